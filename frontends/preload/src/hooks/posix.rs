//! POSIX file calls: open family, fd I/O, dup family, fcntl, mmap, and path calls.
//! Each `unsafe` here forwards the caller's own arguments, unchanged, to the real libc function
//! of the same C signature: the caller's C contract is exactly the real function's.
#![allow(clippy::undocumented_unsafe_blocks)]

use libc::{
    c_char, c_int, c_uint, c_ulong, c_void, iovec, mode_t, off64_t, off_t, size_t, ssize_t,
};

use dftracer_core::{Arg, Layer, Schema, Slot, Value};

use super::{missing, pre_resolve_kept, traced_fd, POSIX};
use crate::{
    enter, guarded, guarded_or, on_fd, on_path, posix_on, real, record,
    ticks, SavedErrno, FDS,
};

type OpenFn = unsafe extern "C" fn(*const c_char, c_int, ...) -> c_int;
type OpenAtFn = unsafe extern "C" fn(c_int, *const c_char, c_int, ...) -> c_int;

fn needs_mode(flags: c_int) -> bool {
    flags & libc::O_CREAT != 0 || flags & libc::O_TMPFILE == libc::O_TMPFILE
}

/// The two static schemas of an open-like call `name`: without and with `mode`.
macro_rules! open_schemas {
    ($name:expr) => {{
        static S: [Schema; 2] = [
            Schema::new(
                Layer::LibcIo,
                $name,
                "POSIX",
                &[("flags", Slot::Int), ("fd", Slot::Int), ("ret", Slot::Int)],
                "fhash",
            ),
            Schema::new(
                Layer::LibcIo,
                $name,
                "POSIX",
                &[
                    ("flags", Slot::Int),
                    ("mode", Slot::Int),
                    ("fd", Slot::Int),
                    ("ret", Slot::Int),
                ],
                "fhash",
            ),
        ];
        &S
    }};
}

/// The common part of every call that returns a new fd for a path: time it, resolve the path,
/// remember the fd when the file is traced (and forget stale state when it is not).
#[inline]
unsafe fn open_common(
    name: &'static [u8],
    schemas: &'static [Schema; 2],
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mode: c_uint,
    call: impl Fn() -> c_int,
) -> c_int {
    if !posix_on() {
        return call();
    }
    let Some(mut busy) = enter() else {
        let fd = call();
        if fd >= 0 {
            // The tracer's own file, or a nested open: never traced, and a stale entry for
            // this fd number must not make it look traced.
            FDS.set(fd, None);
        }
        return fd;
    };
    let resolved = match busy.scratch_last_and_self() {
        Some((bufs, last, rec)) => {
            pre_resolve_kept(dirfd, path, &mut bufs[0], last).map(|r| (bufs, last, rec, r))
        }
        None => None,
    };
    let Some((bufs, last, rec, r)) = resolved else {
        drop(busy);
        let fd = call();
        if fd >= 0 {
            FDS.set(fd, None);
        }
        return fd;
    };
    let t0 = ticks();
    let fd = call();
    let _errno = SavedErrno::new();
    let t1 = ticks();
    let p = if r.kept {
        last.kept_path(r.len)
    } else {
        &bufs[0][..r.len]
    };
    let interned = guarded_or(None, || {
        if fd >= 0 {
            // The slot the last open of this path took, if it still holds it (its
            // generation moves when it is claimed for another path), else the pool's.
            let kept_file = if r.kept { last.file() } else { None };
            let pinned = match kept_file.and_then(|h| h.pin()) {
                Some(f) => {
                    crate::table::touch();
                    Some(f)
                }
                None => crate::table::intern(p),
            };
            match pinned {
                Some(file) => {
                    let h = file.handle();
                    FDS.set_file(fd, file);
                    // The common case: a fixed-shape record naming the interned file.
                    let (f, fdv) = (flags as i64 as u64, fd as i64 as u64);
                    if needs_mode(flags) {
                        rec.record_static(&schemas[1], t0, t1, [f, mode as u64, fdv, fdv], &h);
                    } else {
                        rec.record_static(&schemas[0], t0, t1, [f, fdv, fdv], &h);
                    }
                    return Some(h);
                }
                // No slot free in the path's bucket: the open names its path, the fd is
                // not tracked.
                None => FDS.set(fd, None),
            }
        }
        let fhash = Arg::new("fhash", Value::Path(p));
        let (fl, fdv, ret) = (
            Arg::int("flags", flags as i64),
            Arg::int("fd", fd as i64),
            Arg::int("ret", fd as i64),
        );
        if needs_mode(flags) {
            record(
                POSIX,
                name,
                t0,
                t1,
                &[fl, Arg::int("mode", mode as i64), fdv, ret, fhash],
            );
        } else {
            record(POSIX, name, t0, t1, &[fl, fdv, ret, fhash]);
        }
        None
    });
    // The entry kept for this path remembers its slot (only this path's: `r.entry`).
    if interned.is_some() && r.entry {
        last.set_file(interned);
    }
    drop(busy);
    fd
}

/// An open-like shim: `$sym` calls its real function through `$fn` (`$real(args)`) and
/// records event `$name`; `flags` and `mode` (or what stands for them)
/// and the dirfd (`AT_FDCWD` for the path-only calls) go to [`open_common`].
macro_rules! open_hook {
    ($sym:ident => $name:ident, ($($arg:ident: $ty:ty),*), $fn:ty, $dirfd:expr, $path:ident, $flags:expr, $mode:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym($($arg: $ty),*) -> c_int {
            let Some(real) = real!($sym: $fn) else {
                return missing(-1);
            };
            open_common(
                stringify!($name).as_bytes(),
                open_schemas!(stringify!($name)),
                $dirfd,
                $path,
                $flags,
                $mode,
                || real($($arg),*),
            )
        }
    };
}

/// `open`, `openat`, `creat` and their `64` twins (one body per pair; each symbol its own real
/// function and event name).
macro_rules! open_hooks {
    ($($sym:ident),*) => {$(
        open_hook!($sym => $sym, (path: *const c_char, flags: c_int, mode: c_uint), OpenFn,
            libc::AT_FDCWD, path, flags, mode);
    )*};
}
macro_rules! openat_hooks {
    ($($sym:ident),*) => {$(
        open_hook!($sym => $sym, (dirfd: c_int, path: *const c_char, flags: c_int, mode: c_uint),
            OpenAtFn, dirfd, path, flags, mode);
    )*};
}
/// `_FORTIFY_SOURCE` builds call these when `flags` is not a constant and no mode is given.
macro_rules! open_2_hooks {
    ($($sym:ident => $name:ident),*) => {$(
        open_hook!($sym => $name, (path: *const c_char, flags: c_int),
            unsafe extern "C" fn(*const c_char, c_int) -> c_int, libc::AT_FDCWD, path, flags, 0);
    )*};
}
macro_rules! openat_2_hooks {
    ($($sym:ident => $name:ident),*) => {$(
        open_hook!($sym => $name, (dirfd: c_int, path: *const c_char, flags: c_int),
            unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int, dirfd, path, flags, 0);
    )*};
}
macro_rules! creat_hooks {
    ($($sym:ident),*) => {$(
        open_hook!($sym => $sym, (path: *const c_char, mode: mode_t),
            unsafe extern "C" fn(*const c_char, mode_t) -> c_int, libc::AT_FDCWD, path,
            libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC, mode);
    )*};
}

open_hooks!(open, open64);
open_2_hooks!(__open_2 => open, __open64_2 => open64);
openat_hooks!(openat, openat64);
openat_2_hooks!(__openat_2 => openat, __openat64_2 => openat64);
creat_hooks!(creat, creat64);

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    let Some(real) = real!(close: unsafe extern "C" fn(c_int) -> c_int) else {
        return missing(-1);
    };
    if !posix_on() {
        return real(fd);
    }
    // Forget the fd before closing it: once closed, another thread may get the same number.
    let Some(file) = FDS.take(fd) else {
        return real(fd);
    };
    let Some(busy) = enter() else { return real(fd) };
    let t0 = ticks();
    let ret = real(fd);
    let t1 = ticks();
    static CLOSE: Schema = Schema::new(
        Layer::LibcIo,
        "close",
        "POSIX",
        &[("fd", Slot::Int), ("ret", Slot::Int)],
        "fhash",
    );
    // No `SavedErrno`: the clock, a static record and a pin's release (atomics) leave
    // `errno` alone (see `Busy::record_static`).
    guarded(|| {
        busy.record_static(
            &CLOSE,
            t0,
            t1,
            [fd as i64 as u64, ret as i64 as u64],
            &file.handle(),
        )
    });
    // The entry's pin, given back after the record naming the file was written.
    drop(file);
    drop(busy);
    ret
}

#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    let Some(real) = real!(close_range: unsafe extern "C" fn(c_uint, c_uint, c_int) -> c_int)
    else {
        return missing(-1);
    };
    let ret = real(first, last, flags);
    if ret == 0 && flags & (libc::CLOSE_RANGE_CLOEXEC as c_int) == 0 && posix_on() {
        FDS.clear_range(first, last);
    }
    ret
}

#[no_mangle]
pub unsafe extern "C" fn closefrom(lowfd: c_int) {
    let Some(real) = real!(closefrom: unsafe extern "C" fn(c_int)) else {
        return;
    };
    real(lowfd);
    if posix_on() {
        FDS.clear_range(lowfd.max(0) as u32, u32::MAX);
    }
}

crate::fd_shim!(fn read(fd: c_int, buf: *mut c_void, count: size_t) -> ssize_t, fd, -1, "read",
    |ret| [count: U(count as u64), ret: I(ret as i64)]);

crate::fd_shim!(fn __read_chk(fd: c_int, buf: *mut c_void, count: size_t, buflen: size_t) -> ssize_t,
    fd, -1, "read", |ret| [count: U(count as u64), ret: I(ret as i64)]);

crate::fd_shim!(fn write(fd: c_int, buf: *const c_void, count: size_t) -> ssize_t, fd, -1, "write",
    |ret| [count: U(count as u64), ret: I(ret as i64)]);

// The positioned reads and writes (the I/O of every MPI-IO and HDF5 layer under them), as
// every common fd call: `fd_shim!`, whose untraced call is a few tests and a jump.
macro_rules! pio {
    ($sym:ident, $name:literal, $buf:ty, $off:ty) => {
        crate::fd_shim!(fn $sym(fd: c_int, buf: $buf, count: size_t, offset: $off) -> ssize_t,
            fd, -1, $name, |ret| [
                count: U(count as u64),
                offset: I(offset as i64),
                ret: I(ret as i64)
            ]);
    };
}

pio!(pread, "pread", *mut c_void, off_t);
pio!(pread64, "pread64", *mut c_void, off64_t);
pio!(pwrite, "pwrite", *const c_void, off_t);
pio!(pwrite64, "pwrite64", *const c_void, off64_t);

macro_rules! pio_chk {
    ($sym:ident, $name:literal, $off:ty) => {
        crate::fd_shim!(fn $sym(fd: c_int, buf: *mut c_void, count: size_t, offset: $off, buflen: size_t) -> ssize_t,
            fd, -1, $name, |ret| [
                count: U(count as u64),
                offset: I(offset as i64),
                ret: I(ret as i64)
            ]);
    };
}

pio_chk!(__pread_chk, "pread", off_t);
pio_chk!(__pread64_chk, "pread64", off64_t);

/// Total bytes described by `iov[..cnt]`.
unsafe fn iov_bytes(iov: *const iovec, cnt: c_int) -> u64 {
    if iov.is_null() || cnt <= 0 {
        return 0;
    }
    // SAFETY: the program passed `cnt` iovecs at `iov` to the real call, which read them.
    unsafe { std::slice::from_raw_parts(iov, cnt as usize) }
        .iter()
        .map(|v| v.iov_len as u64)
        .sum()
}

macro_rules! iov_hook {
    ($($sym:ident),*) => {$(
        crate::fd_shim!(fn $sym(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t, fd, -1,
            stringify!($sym), |ret| [
                count: U(iov_bytes(iov, cnt)),
                iovcnt: I(cnt as i64),
                ret: I(ret as i64)
            ]);
    )*};
}

iov_hook!(readv, writev);

macro_rules! piov {
    ($sym:ident, $name:literal, $off:ty) => {
        crate::fd_shim!(fn $sym(fd: c_int, iov: *const iovec, cnt: c_int, offset: $off) -> ssize_t,
            fd, -1, $name, |ret| [
                count: U(iov_bytes(iov, cnt)),
                iovcnt: I(cnt as i64),
                offset: I(offset as i64),
                ret: I(ret as i64)
            ]);
    };
}

piov!(preadv, "preadv", off_t);
piov!(preadv64, "preadv64", off64_t);
piov!(pwritev, "pwritev", off_t);
piov!(pwritev64, "pwritev64", off64_t);

macro_rules! lseek_hook {
    ($($sym:ident: $off:ty),*) => {$(
        crate::fd_shim!(fn $sym(fd: c_int, offset: $off, whence: c_int) -> $off, fd, -1,
            stringify!($sym), |ret| [
                offset: I(offset as i64),
                whence: I(whence as i64),
                ret: I(ret as i64)
            ]);
    )*};
}

lseek_hook!(lseek: off_t, lseek64: off64_t);

macro_rules! sync_hook {
    ($($sym:ident),*) => {$(
        crate::fd_shim!(fn $sym(fd: c_int) -> c_int, fd, -1, stringify!($sym),
            |ret| [ret: I(ret as i64)]);
    )*};
}

sync_hook!(fsync, fdatasync);

macro_rules! ftruncate_hook {
    ($($sym:ident: $off:ty),*) => {$(
        crate::fd_shim!(fn $sym(fd: c_int, length: $off) -> c_int, fd, -1, stringify!($sym),
            |ret| [length: I(length as i64), ret: I(ret as i64)]);
    )*};
}

ftruncate_hook!(ftruncate: off_t, ftruncate64: off64_t);

/// After a successful dup-like call: `newfd` now refers to whatever `oldfd` referred to.
#[inline]
fn follow(oldfd: c_int, newfd: c_int) {
    if newfd >= 0 && newfd != oldfd && posix_on() {
        FDS.set(newfd, FDS.path(oldfd).and_then(|i| i.file.pin()));
    }
}

#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    let Some(real) = real!(dup: unsafe extern "C" fn(c_int) -> c_int) else {
        return missing(-1);
    };
    let ret = on_fd!("dup", fd, real(fd), |ret| [ret: I(ret as i64)]);
    follow(fd, ret);
    ret
}

#[no_mangle]
pub unsafe extern "C" fn dup2(oldfd: c_int, newfd: c_int) -> c_int {
    let Some(real) = real!(dup2: unsafe extern "C" fn(c_int, c_int) -> c_int) else {
        return missing(-1);
    };
    let ret = on_fd!("dup2", oldfd, real(oldfd, newfd), |ret| [ret: I(ret as i64)]);
    follow(oldfd, ret);
    ret
}

#[no_mangle]
pub unsafe extern "C" fn dup3(oldfd: c_int, newfd: c_int, flags: c_int) -> c_int {
    let Some(real) = real!(dup3: unsafe extern "C" fn(c_int, c_int, c_int) -> c_int) else {
        return missing(-1);
    };
    let ret = on_fd!("dup3", oldfd, real(oldfd, newfd, flags), |ret| [
        flags: I(flags as i64),
        ret: I(ret as i64)
    ]);
    follow(oldfd, ret);
    ret
}

type FcntlFn = unsafe extern "C" fn(c_int, c_int, ...) -> c_int;

macro_rules! fcntl_hook {
    ($sym:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
            let Some(real) = real!($sym: FcntlFn) else {
                return missing(-1);
            };
            let ret = on_fd!(stringify!($sym), fd, real(fd, cmd, arg), |ret| [
                cmd: I(cmd as i64),
                ret: I(ret as i64)
            ]);
            if cmd == libc::F_DUPFD || cmd == libc::F_DUPFD_CLOEXEC {
                follow(fd, ret);
            }
            ret
        }
    };
}

fcntl_hook!(fcntl);
fcntl_hook!(fcntl64);

macro_rules! mmap_hook {
    ($sym:ident, $name:literal, $off:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(
            addr: *mut c_void,
            len: size_t,
            prot: c_int,
            flags: c_int,
            fd: c_int,
            offset: $off,
        ) -> *mut c_void {
            let Some(real) = real!($sym: unsafe extern "C" fn(*mut c_void, size_t, c_int, c_int, c_int, $off) -> *mut c_void) else {
                return missing(libc::MAP_FAILED);
            };
            let Some(file) = (if fd < 0 { None } else { traced_fd(fd) }) else {
                return real(addr, len, prot, flags, fd, offset);
            };
            let ret = on_fd!($name, fd, real(addr, len, prot, flags, fd, offset), |ret| [
                length: U(len as u64),
                offset: I(offset as i64),
                prot: I(prot as i64),
                flags: I(flags as i64),
                ret: I(if ret == libc::MAP_FAILED { -1 } else { 0 })
            ]);
            if ret != libc::MAP_FAILED {
                let _errno = SavedErrno::new();
                guarded(|| super::maps::map_insert(ret as usize, len, file));
            }
            ret
        }
    };
}

mmap_hook!(mmap, "mmap", off_t);
mmap_hook!(mmap64, "mmap64", off64_t);

#[no_mangle]
pub unsafe extern "C" fn access(path: *const c_char, mode: c_int) -> c_int {
    let Some(real) = real!(access: unsafe extern "C" fn(*const c_char, c_int) -> c_int) else {
        return missing(-1);
    };
    on_path!(b"access", libc::AT_FDCWD, path, real(path, mode), |ret| [
        Arg::int("mode", mode as i64),
        Arg::int("ret", ret as i64)
    ])
}

#[no_mangle]
pub unsafe extern "C" fn faccessat(
    dirfd: c_int,
    path: *const c_char,
    mode: c_int,
    flags: c_int,
) -> c_int {
    let Some(real) =
        real!(faccessat: unsafe extern "C" fn(c_int, *const c_char, c_int, c_int) -> c_int)
    else {
        return missing(-1);
    };
    on_path!(
        b"faccessat",
        dirfd,
        path,
        real(dirfd, path, mode, flags),
        |ret| [
            Arg::int("mode", mode as i64),
            Arg::int("flags", flags as i64),
            Arg::int("ret", ret as i64)
        ]
    )
}

#[no_mangle]
pub unsafe extern "C" fn unlink(path: *const c_char) -> c_int {
    let Some(real) = real!(unlink: unsafe extern "C" fn(*const c_char) -> c_int) else {
        return missing(-1);
    };
    on_path!(b"unlink", libc::AT_FDCWD, path, real(path), |ret| [
        Arg::int("ret", ret as i64)
    ])
}

#[no_mangle]
pub unsafe extern "C" fn unlinkat(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    let Some(real) = real!(unlinkat: unsafe extern "C" fn(c_int, *const c_char, c_int) -> c_int)
    else {
        return missing(-1);
    };
    on_path!(b"unlinkat", dirfd, path, real(dirfd, path, flags), |ret| [
        Arg::int("flags", flags as i64),
        Arg::int("ret", ret as i64)
    ])
}

#[no_mangle]
pub unsafe extern "C" fn mkdir(path: *const c_char, mode: mode_t) -> c_int {
    let Some(real) = real!(mkdir: unsafe extern "C" fn(*const c_char, mode_t) -> c_int) else {
        return missing(-1);
    };
    on_path!(b"mkdir", libc::AT_FDCWD, path, real(path, mode), |ret| [
        Arg::int("mode", mode as i64),
        Arg::int("ret", ret as i64)
    ])
}

#[no_mangle]
pub unsafe extern "C" fn mkdirat(dirfd: c_int, path: *const c_char, mode: mode_t) -> c_int {
    let Some(real) = real!(mkdirat: unsafe extern "C" fn(c_int, *const c_char, mode_t) -> c_int)
    else {
        return missing(-1);
    };
    on_path!(b"mkdirat", dirfd, path, real(dirfd, path, mode), |ret| [
        Arg::int("mode", mode as i64),
        Arg::int("ret", ret as i64)
    ])
}

#[no_mangle]
pub unsafe extern "C" fn rmdir(path: *const c_char) -> c_int {
    let Some(real) = real!(rmdir: unsafe extern "C" fn(*const c_char) -> c_int) else {
        return missing(-1);
    };
    on_path!(b"rmdir", libc::AT_FDCWD, path, real(path), |ret| [
        Arg::int("ret", ret as i64)
    ])
}

/// rename-like calls: traced when either path is traced; `fhash` is the old path,
/// `newpath_hash` the new one (reference §6.2).
#[inline]
pub(crate) unsafe fn rename_common(
    name: &'static [u8],
    olddirfd: c_int,
    old: *const c_char,
    newdirfd: c_int,
    new: *const c_char,
    call: impl Fn() -> c_int,
) -> c_int {
    let Some(mut busy) = (if posix_on() { enter() } else { None }) else {
        return call();
    };
    let Some(filter) = crate::filter() else {
        drop(busy);
        return call();
    };
    // Both sides resolved before the call (lexically), errno left as the program had it.
    let saved = SavedErrno::new();
    let resolved = busy.scratch().and_then(|[a, b]| {
        guarded_or(None, || {
            let la = super::resolve_path(olddirfd, old, a).map(|p| (p.len(), filter.traces(p)));
            let lb = super::resolve_path(newdirfd, new, b).map(|p| (p.len(), filter.traces(p)));
            match (la, lb) {
                (Some((_, false)) | None, Some((_, false)) | None) => None,
                _ => Some((la.map_or(0, |x| x.0), lb.map_or(0, |x| x.0))),
            }
        })
        .map(|lens| (a, b, lens))
    });
    drop(saved);
    let Some((a, b, (na, nb))) = resolved else {
        drop(busy);
        return call();
    };
    let t0 = ticks();
    let ret = call();
    let _errno = SavedErrno::new();
    let t1 = ticks();
    guarded(|| {
        // An untraced side is still named (absolute, normalised) so the event is complete.
        record(
            POSIX,
            name,
            t0,
            t1,
            &[
                Arg::int("ret", ret as i64),
                Arg::new("newpath_hash", Value::Path(&b[..nb])),
                Arg::new("fhash", Value::Path(&a[..na])),
            ],
        );
    });
    drop(busy);
    ret
}

#[no_mangle]
pub unsafe extern "C" fn rename(old: *const c_char, new: *const c_char) -> c_int {
    let Some(real) = real!(rename: unsafe extern "C" fn(*const c_char, *const c_char) -> c_int)
    else {
        return missing(-1);
    };
    rename_common(b"rename", libc::AT_FDCWD, old, libc::AT_FDCWD, new, || {
        real(old, new)
    })
}

#[no_mangle]
pub unsafe extern "C" fn renameat(
    olddirfd: c_int,
    old: *const c_char,
    newdirfd: c_int,
    new: *const c_char,
) -> c_int {
    let Some(real) =
        real!(renameat: unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char) -> c_int)
    else {
        return missing(-1);
    };
    rename_common(b"renameat", olddirfd, old, newdirfd, new, || {
        real(olddirfd, old, newdirfd, new)
    })
}
