//! Stdio streams: `fopen`/`fdopen`/`freopen` decide whether a `FILE*` is traced; `fclose`, `fread`,
//! `fwrite`, `fseek`, `ftell`, `fgets`, `fputs`, `fflush` (and their 64-bit, `o` and
//! `_FORTIFY_SOURCE` variants) record only for traced streams. Streams glibc opens for itself
//! use its internal `open`, so a stream's I/O is never also recorded as POSIX events.
//! Each `unsafe` forwards the caller's arguments unchanged to the real function of the same
//! C signature.
#![allow(clippy::undocumented_unsafe_blocks)]

use libc::{c_char, c_int, c_long, c_void, off64_t, off_t, size_t, FILE};

use dftracer_core::{Arg, Value};

use super::{c_bytes, fileno_unlocked, missing, pre_resolve, traced_file, STDIO};
use crate::table::intern;
use crate::{
    enter, guarded, on_file, posix_on, real, record, stdio_on, ticks, SavedErrno, FDS, FILES,
};

type FopenFn = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut FILE;

unsafe fn fopen_common(
    name: &'static [u8],
    real: FopenFn,
    path: *const c_char,
    mode: *const c_char,
) -> *mut FILE {
    if !stdio_on() {
        return real(path, mode);
    }
    let Some(mut busy) = enter() else {
        return real(path, mode);
    };
    let resolved = match busy.scratch() {
        Some(bufs) => pre_resolve(libc::AT_FDCWD, path, &mut bufs[0]).map(|n| (bufs, n)),
        None => None,
    };
    let Some((bufs, n)) = resolved else {
        drop(busy);
        return real(path, mode);
    };
    let t0 = ticks();
    let fp = real(path, mode);
    let _errno = SavedErrno::new();
    let t1 = crate::ticks_after(t0);
    guarded(|| {
        let p = &bufs[0][..n];
        let fd = if fp.is_null() {
            -1
        } else {
            super::fileno_unlocked(fp)
        };
        if !fp.is_null() {
            if let Some(file) = intern(p) {
                // The stream's fd names the file too: POSIX calls the program makes on
                // `fileno(fp)` (fsync, fcntl, fstat) are traced; glibc's own I/O inside the
                // stream does not go through these symbols and is not recorded twice.
                if posix_on() {
                    FDS.set(fd, file.handle().pin());
                }
                FILES.insert(fd, fp as usize, file);
            }
        }
        let m = c_bytes(mode).unwrap_or(b"");
        record(
            STDIO,
            name,
            t0,
            t1,
            &[
                Arg::new("mode", Value::Str(m)),
                Arg::int("fd", fd as i64),
                Arg::new("fhash", Value::Path(p)),
            ],
        );
    });
    drop(busy);
    fp
}

macro_rules! fopen_hook {
    ($($sym:ident),*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $sym(path: *const c_char, mode: *const c_char) -> *mut FILE {
            let Some(real) = real!($sym: FopenFn) else {
                return missing(std::ptr::null_mut());
            };
            fopen_common(stringify!($sym).as_bytes(), real, path, mode)
        }
    )*};
}

fopen_hook!(fopen, fopen64);

#[no_mangle]
pub unsafe extern "C" fn fdopen(fd: c_int, mode: *const c_char) -> *mut FILE {
    let Some(real) = real!(fdopen: unsafe extern "C" fn(c_int, *const c_char) -> *mut FILE) else {
        return missing(std::ptr::null_mut());
    };
    if !stdio_on() {
        return real(fd, mode);
    }
    // Pinned: the path is read below, and another thread may close `fd` meanwhile.
    let Some(file) = FDS.path(fd).and_then(|i| i.file.pin()) else {
        return real(fd, mode);
    };
    let Some(busy) = enter() else {
        return real(fd, mode);
    };
    let t0 = ticks();
    let fp = real(fd, mode);
    let _errno = SavedErrno::new();
    let t1 = crate::ticks_after(t0);
    guarded(|| {
        if !fp.is_null() {
            if let Some(p) = file.handle().pin() {
                FILES.insert(fd, fp as usize, p);
            }
        }
        let m = c_bytes(mode).unwrap_or(b"");
        record(
            STDIO,
            b"fdopen",
            t0,
            t1,
            &[
                Arg::new("mode", Value::Str(m)),
                Arg::int("fd", fd as i64),
                Arg::new("fhash", Value::Path(file.path())),
            ],
        );
    });
    drop(busy);
    fp
}

#[no_mangle]
pub unsafe extern "C" fn fclose(fp: *mut FILE) -> c_int {
    let Some(real) = real!(fclose: unsafe extern "C" fn(*mut FILE) -> c_int) else {
        return missing(libc::EOF);
    };
    if !fp.is_null() && posix_on() {
        // fclose closes the fd without going through `close`: forget it (fdopen'd fds).
        FDS.set(super::fileno_unlocked(fp), None);
    }
    let Some((_, fd)) = traced_file(fp) else {
        return real(fp);
    };
    // Forget the stream before it is freed: its address and fd may be reused at once. The
    // entry's pin keeps the file's path readable below.
    let Some(file) = FILES.remove(fd, fp as usize) else {
        return real(fp);
    };
    let Some(busy) = enter() else { return real(fp) };
    let t0 = ticks();
    let ret = real(fp);
    let _errno = SavedErrno::new();
    let t1 = crate::ticks_after(t0);
    guarded(|| {
        record(
            STDIO,
            b"fclose",
            t0,
            t1,
            &[
                Arg::int("ret", ret as i64),
                Arg::new("fhash", Value::Path(file.path())),
            ],
        )
    });
    drop(busy);
    ret
}

macro_rules! rw {
    ($sym:ident, $name:literal, $ptr:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(ptr: $ptr, size: size_t, n: size_t, fp: *mut FILE) -> size_t {
            let Some(real) = real!($sym: unsafe extern "C" fn($ptr, size_t, size_t, *mut FILE) -> size_t) else {
                return missing(0);
            };
            on_file!($name, fp, real(ptr, size, n, fp), |ret| [
                size: U(size as u64),
                count: U(n as u64),
                ret: U(ret as u64)
            ])
        }
    };
}

rw!(fread, "fread", *mut c_void);
rw!(fwrite, "fwrite", *const c_void);

#[no_mangle]
pub unsafe extern "C" fn __fread_chk(
    ptr: *mut c_void,
    ptrlen: size_t,
    size: size_t,
    n: size_t,
    fp: *mut FILE,
) -> size_t {
    let Some(real) = real!(__fread_chk: unsafe extern "C" fn(*mut c_void, size_t, size_t, size_t, *mut FILE) -> size_t)
    else {
        return missing(0);
    };
    on_file!("fread", fp, real(ptr, ptrlen, size, n, fp), |ret| [
        size: U(size as u64),
        count: U(n as u64),
        ret: U(ret as u64)
    ])
}

macro_rules! seek {
    ($sym:ident, $off:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(fp: *mut FILE, offset: $off, whence: c_int) -> c_int {
            let Some(real) = real!($sym: unsafe extern "C" fn(*mut FILE, $off, c_int) -> c_int) else {
                return missing(-1);
            };
            on_file!(stringify!($sym), fp, real(fp, offset, whence), |ret| [
                offset: I(offset as i64),
                whence: I(whence as i64),
                ret: I(ret as i64)
            ])
        }
    };
}

seek!(fseek, c_long);
seek!(fseeko, off_t);
seek!(fseeko64, off64_t);

macro_rules! tell {
    ($sym:ident, $off:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(fp: *mut FILE) -> $off {
            let Some(real) = real!($sym: unsafe extern "C" fn(*mut FILE) -> $off) else { return missing(-1) };
            on_file!(stringify!($sym), fp, real(fp), |ret| [ret: I(ret as i64)])
        }
    };
}

tell!(ftell, c_long);
tell!(ftello, off_t);
tell!(ftello64, off64_t);

/// Bytes `fgets` stored (-1 for NULL: EOF or error).
unsafe fn got(ret: *mut c_char) -> i64 {
    match c_bytes(ret) {
        Some(b) => b.len() as i64,
        None => -1,
    }
}

#[no_mangle]
pub unsafe extern "C" fn fgets(s: *mut c_char, n: c_int, fp: *mut FILE) -> *mut c_char {
    let Some(real) =
        real!(fgets: unsafe extern "C" fn(*mut c_char, c_int, *mut FILE) -> *mut c_char)
    else {
        return missing(std::ptr::null_mut());
    };
    on_file!("fgets", fp, real(s, n, fp), |ret| [
        count: I(n as i64),
        ret: I(got(ret))
    ])
}

#[no_mangle]
pub unsafe extern "C" fn __fgets_chk(
    s: *mut c_char,
    size: size_t,
    n: c_int,
    fp: *mut FILE,
) -> *mut c_char {
    let Some(real) = real!(__fgets_chk: unsafe extern "C" fn(*mut c_char, size_t, c_int, *mut FILE) -> *mut c_char)
    else {
        return missing(std::ptr::null_mut());
    };
    on_file!("fgets", fp, real(s, size, n, fp), |ret| [
        count: I(n as i64),
        ret: I(got(ret))
    ])
}

#[no_mangle]
pub unsafe extern "C" fn fputs(s: *const c_char, fp: *mut FILE) -> c_int {
    let Some(real) = real!(fputs: unsafe extern "C" fn(*const c_char, *mut FILE) -> c_int) else {
        return missing(libc::EOF);
    };
    on_file!("fputs", fp, real(s, fp), |ret| [
        count: U(c_bytes(s).map_or(0, |b| b.len() as u64)),
        ret: I(ret as i64)
    ])
}

#[no_mangle]
pub unsafe extern "C" fn fflush(fp: *mut FILE) -> c_int {
    let Some(real) = real!(fflush: unsafe extern "C" fn(*mut FILE) -> c_int) else {
        return missing(libc::EOF);
    };
    on_file!("fflush", fp, real(fp), |ret| [ret: I(ret as i64)])
}

type FreopenFn = unsafe extern "C" fn(*const c_char, *const c_char, *mut FILE) -> *mut FILE;

/// `freopen(path, mode, fp)`: the old stream is closed (forgotten); the new one is traced when
/// `path` is (or, for a NULL path, a mode change, when the old one was).
unsafe fn freopen_common(
    name: &'static [u8],
    real: FreopenFn,
    path: *const c_char,
    mode: *const c_char,
    fp: *mut FILE,
) -> *mut FILE {
    if !stdio_on() {
        return real(path, mode, fp);
    }
    let Some(mut busy) = enter() else {
        return real(path, mode, fp);
    };
    let old = traced_file(fp);
    // A path-less freopen keeps the stream's file: pin it before its entry goes.
    let old_pin = old.and_then(|(i, _)| i.file.pin());
    if let Some((_, fd)) = old {
        FILES.remove(fd, fp as usize);
    }
    if !fp.is_null() && posix_on() {
        // The old fd is closed inside libc.
        FDS.set(fileno_unlocked(fp), None);
    }
    let resolved = if path.is_null() {
        None
    } else {
        match busy.scratch() {
            Some(bufs) => pre_resolve(libc::AT_FDCWD, path, &mut bufs[0]).map(|n| (bufs, n)),
            None => None,
        }
    };
    let file = match resolved {
        Some((bufs, n)) => intern(&bufs[0][..n]),
        None if path.is_null() => old_pin,
        None => None,
    };
    let Some(file) = file else {
        drop(busy);
        return real(path, mode, fp);
    };
    let t0 = ticks();
    let ret = real(path, mode, fp);
    let _errno = SavedErrno::new();
    let t1 = crate::ticks_after(t0);
    guarded(|| {
        let fd = if ret.is_null() {
            -1
        } else {
            fileno_unlocked(ret)
        };
        if !ret.is_null() && posix_on() {
            FDS.set(fd, file.handle().pin());
        }
        record(
            STDIO,
            name,
            t0,
            t1,
            &[
                Arg::new("mode", Value::Str(c_bytes(mode).unwrap_or(b""))),
                Arg::int("fd", fd as i64),
                Arg::new("fhash", Value::Path(file.path())),
            ],
        );
        if !ret.is_null() {
            FILES.insert(fd, ret as usize, file);
        }
    });
    drop(busy);
    ret
}

macro_rules! freopen_hook {
    ($($sym:ident),*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $sym(
            path: *const c_char,
            mode: *const c_char,
            fp: *mut FILE,
        ) -> *mut FILE {
            let Some(real) = real!($sym: FreopenFn) else {
                return missing(std::ptr::null_mut());
            };
            freopen_common(stringify!($sym).as_bytes(), real, path, mode, fp)
        }
    )*};
}

freopen_hook!(freopen, freopen64);
