//! Directory streams: `opendir`/`fdopendir` of a traced directory make a traced `DIR*`
//! (its fd is traced too, so `fstat`, `openat` and `fchdir` on `dirfd(d)` resolve), and
//! `readdir`/`readdir64` (one event per call: `ret` 1 for an entry, 0 at the end),
//! `dirfd` and `closedir` record on it. `closedir` closes the fd inside libc: the fd table
//! forgets it here.
//! Each `unsafe` forwards the caller's arguments unchanged to the real function of the same
//! C signature.
#![allow(clippy::undocumented_unsafe_blocks)]

use libc::{c_char, c_int, c_void, DIR};

use dftracer_core::{Arg, Layer, Schema, Slot, Value};

use super::{missing, out_of_line, pre_resolve, POSIX};
use crate::table::{intern, FileTable, Interned};
use crate::{enter, guarded, ticks, posix_on, real, record, record_static, SavedErrno, FDS};

/// Traced directory streams: keyed by their fd, checked against the `DIR*`.
static DIRS: FileTable = FileTable::new();

/// The fd of `d` through the real `dirfd` (this library exports its own).
#[inline]
unsafe fn fd_of(d: *mut DIR) -> c_int {
    match real!(dirfd: unsafe extern "C" fn(*mut DIR) -> c_int) {
        Some(f) => f(d),
        None => -1,
    }
}

/// The traced directory behind stream `d`, with its fd.
#[inline(always)]
unsafe fn traced_dir(d: *mut DIR) -> Option<(Interned, c_int)> {
    if d.is_null() || !DIRS.any_open() || !posix_on() {
        return None;
    }
    traced_dir_slow(d)
}

#[inline(never)]
unsafe fn traced_dir_slow(d: *mut DIR) -> Option<(Interned, c_int)> {
    let fd = fd_of(d);
    DIRS.path(fd, d as usize).map(|i| (i, fd))
}

/// Starts following stream `d` of directory `file` (the stream's entry and the fd's entry
/// each hold a pin).
unsafe fn follow_dir(d: *mut DIR, file: dftracer_core::Pinned) -> c_int {
    let fd = fd_of(d);
    if fd >= 0 {
        FDS.set(fd, file.handle().pin());
        DIRS.insert(fd, d as usize, file);
    }
    fd
}

#[no_mangle]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut DIR {
    let Some(real) = real!(opendir: unsafe extern "C" fn(*const c_char) -> *mut DIR) else {
        return missing(std::ptr::null_mut());
    };
    if !posix_on() {
        return real(path);
    }
    let Some(mut busy) = enter() else {
        return real(path);
    };
    let resolved = match busy.scratch() {
        Some(bufs) => pre_resolve(libc::AT_FDCWD, path, &mut bufs[0]).map(|n| (bufs, n)),
        None => None,
    };
    let Some((bufs, n)) = resolved else {
        drop(busy);
        return real(path);
    };
    let t0 = ticks();
    let d = real(path);
    let _errno = SavedErrno::new();
    let t1 = ticks();
    guarded(|| {
        let p = &bufs[0][..n];
        let fd = match (d.is_null(), intern(p)) {
            (false, Some(file)) => follow_dir(d, file),
            (false, None) => fd_of(d),
            (true, _) => -1,
        };
        record(
            POSIX,
            b"opendir",
            t0,
            t1,
            &[
                Arg::int("fd", fd as i64),
                Arg::int("ret", if d.is_null() { -1 } else { 0 }),
                Arg::new("fhash", Value::Path(p)),
            ],
        );
    });
    drop(busy);
    d
}

#[no_mangle]
pub unsafe extern "C" fn fdopendir(fd: c_int) -> *mut DIR {
    let Some(real) = real!(fdopendir: unsafe extern "C" fn(c_int) -> *mut DIR) else {
        return missing(std::ptr::null_mut());
    };
    let Some(file) = super::traced_fd(fd) else {
        return real(fd);
    };
    out_of_line(move || {
        let Some(busy) = enter() else { return real(fd) };
        let t0 = ticks();
        let d = real(fd);
        let _errno = SavedErrno::new();
        let t1 = ticks();
        static FDOPENDIR: Schema = Schema::new(
            Layer::LibcIo,
            "fdopendir",
            "POSIX",
            &[("fd", Slot::Int), ("ret", Slot::Int)],
            "fhash",
        );
        guarded(|| {
            if !d.is_null() {
                if let Some(pin) = file.file.pin() {
                    DIRS.insert(fd, d as usize, pin);
                }
            }
            let ok = if d.is_null() { -1i64 } else { 0 };
            record_static(
                &FDOPENDIR,
                t0,
                t1,
                &[fd as i64 as u64, ok as u64],
                &file.file,
            );
        });
        drop(busy);
        d
    })
}

macro_rules! readdir_hook {
    ($sym:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(d: *mut DIR) -> *mut c_void {
            let Some(real) = real!($sym: unsafe extern "C" fn(*mut DIR) -> *mut c_void) else {
                return missing(std::ptr::null_mut());
            };
            let Some((file, fd)) = traced_dir(d) else {
                return real(d);
            };
            out_of_line(move || {
                let Some(busy) = enter() else { return real(d) };
                static SCHEMA: Schema = Schema::new(
                    Layer::LibcIo,
                    stringify!($sym),
                    "POSIX",
                    &[("fd", Slot::Int), ("ret", Slot::Int)],
                    "fhash",
                );
                let t0 = ticks();
                let e = real(d);
                let _errno = SavedErrno::new();
                let t1 = ticks();
                guarded(|| {
                    record_static(&SCHEMA, t0, t1, &[fd as i64 as u64, (!e.is_null()) as u64], &file.file)
                });
                drop(busy);
                e
            })
        }
    };
}

readdir_hook!(readdir);
readdir_hook!(readdir64);

#[no_mangle]
pub unsafe extern "C" fn dirfd(d: *mut DIR) -> c_int {
    let Some(real) = real!(dirfd: unsafe extern "C" fn(*mut DIR) -> c_int) else {
        return missing(-1);
    };
    let Some((file, _)) = traced_dir(d) else {
        return real(d);
    };
    out_of_line(move || {
        let Some(busy) = enter() else { return real(d) };
        static DIRFD: Schema = Schema::new(
            Layer::LibcIo,
            "dirfd",
            "POSIX",
            &[("ret", Slot::Int)],
            "fhash",
        );
        let t0 = ticks();
        let ret = real(d);
        let _errno = SavedErrno::new();
        let t1 = ticks();
        guarded(|| record_static(&DIRFD, t0, t1, &[ret as i64 as u64], &file.file));
        drop(busy);
        ret
    })
}

#[no_mangle]
pub unsafe extern "C" fn closedir(d: *mut DIR) -> c_int {
    let Some(real) = real!(closedir: unsafe extern "C" fn(*mut DIR) -> c_int) else {
        return missing(-1);
    };
    if d.is_null() || !posix_on() {
        return real(d);
    }
    out_of_line(move || {
        // libc closes the fd itself (not through `close`): forget it first, traced or not,
        // since the number may be reused at once.
        let fd = fd_of(d);
        let file = DIRS.remove(fd, d as usize);
        if fd >= 0 {
            FDS.set(fd, None);
        }
        let Some(file) = file else { return real(d) };
        let Some(busy) = enter() else { return real(d) };
        static CLOSEDIR: Schema = Schema::new(
            Layer::LibcIo,
            "closedir",
            "POSIX",
            &[("fd", Slot::Int), ("ret", Slot::Int)],
            "fhash",
        );
        let t0 = ticks();
        let ret = real(d);
        let _errno = SavedErrno::new();
        let t1 = ticks();
        guarded(|| {
            record_static(
                &CLOSEDIR,
                t0,
                t1,
                &[fd as i64 as u64, ret as i64 as u64],
                &file.handle(),
            )
        });
        drop(busy);
        ret
    })
}
