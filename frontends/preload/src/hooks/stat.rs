//! The stat family: `stat`/`lstat`/`fstat`/`fstatat` (+64), the glibc `__xstat` versions
//! still exported by glibc 2.36 for old binaries, and `statx`. The stat buffer is opaque here
//! (`*mut c_void`): it is only passed through.
//! Each `unsafe` forwards the caller's arguments unchanged to the real function of the same
//! C signature.
#![allow(clippy::undocumented_unsafe_blocks)]

use libc::{c_char, c_int, c_uint, c_void};

use dftracer_core::Arg;

use super::missing;
use crate::{on_fd, on_path, real};

macro_rules! path_stat {
    ($sym:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(path: *const c_char, buf: *mut c_void) -> c_int {
            let Some(real) = real!($sym: unsafe extern "C" fn(*const c_char, *mut c_void) -> c_int) else {
                return missing(-1);
            };
            on_path!(stringify!($sym).as_bytes(), libc::AT_FDCWD, path, real(path, buf), |ret| [
                Arg::int("ret", ret as i64)
            ])
        }
    };
}

path_stat!(stat);
path_stat!(stat64);
path_stat!(lstat);
path_stat!(lstat64);

macro_rules! path_xstat {
    ($sym:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(ver: c_int, path: *const c_char, buf: *mut c_void) -> c_int {
            let Some(real) = real!($sym: unsafe extern "C" fn(c_int, *const c_char, *mut c_void) -> c_int) else {
                return missing(-1);
            };
            on_path!(stringify!($sym).as_bytes(), libc::AT_FDCWD, path, real(ver, path, buf), |ret| [
                Arg::int("ret", ret as i64)
            ])
        }
    };
}

path_xstat!(__xstat);
path_xstat!(__xstat64);
path_xstat!(__lxstat);
path_xstat!(__lxstat64);

macro_rules! fd_stat {
    ($sym:ident) => {
        crate::fd_shim!(fold fn $sym(fd: c_int, buf: *mut c_void) -> c_int, fd, -1,
            stringify!($sym), |ret| [ret: I(ret as i64)]);
    };
}

fd_stat!(fstat);
fd_stat!(fstat64);

macro_rules! fd_xstat {
    ($sym:ident) => {
        crate::fd_shim!(fold fn $sym(ver: c_int, fd: c_int, buf: *mut c_void) -> c_int, fd, -1,
            stringify!($sym), |ret| [ret: I(ret as i64)]);
    };
}

fd_xstat!(__fxstat);
fd_xstat!(__fxstat64);

/// `fstatat(fd, "", buf, AT_EMPTY_PATH)` is an fd call on `fd`.
unsafe fn empty_path(path: *const c_char, flags: c_int) -> bool {
    flags & libc::AT_EMPTY_PATH != 0 && (path.is_null() || *path == 0)
}

macro_rules! at_stat {
    ($sym:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(dirfd: c_int, path: *const c_char, buf: *mut c_void, flags: c_int) -> c_int {
            let Some(real) = real!($sym: unsafe extern "C" fn(c_int, *const c_char, *mut c_void, c_int) -> c_int) else {
                return missing(-1);
            };
            if empty_path(path, flags) {
                return on_fd!(fold stringify!($sym), dirfd, real(dirfd, path, buf, flags), |ret| [
                    flags: I(flags as i64),
                    ret: I(ret as i64)
                ]);
            }
            on_path!(stringify!($sym).as_bytes(), dirfd, path, real(dirfd, path, buf, flags), |ret| [
                Arg::int("flags", flags as i64),
                Arg::int("ret", ret as i64)
            ])
        }
    };
}

at_stat!(fstatat);
at_stat!(fstatat64);

macro_rules! at_xstat {
    ($sym:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(ver: c_int, dirfd: c_int, path: *const c_char, buf: *mut c_void, flags: c_int) -> c_int {
            let Some(real) = real!($sym: unsafe extern "C" fn(c_int, c_int, *const c_char, *mut c_void, c_int) -> c_int) else {
                return missing(-1);
            };
            if empty_path(path, flags) {
                return on_fd!(fold stringify!($sym), dirfd, real(ver, dirfd, path, buf, flags), |ret| [
                    flags: I(flags as i64),
                    ret: I(ret as i64)
                ]);
            }
            on_path!(stringify!($sym).as_bytes(), dirfd, path, real(ver, dirfd, path, buf, flags), |ret| [
                Arg::int("flags", flags as i64),
                Arg::int("ret", ret as i64)
            ])
        }
    };
}

at_xstat!(__fxstatat);
at_xstat!(__fxstatat64);

#[no_mangle]
pub unsafe extern "C" fn statx(
    dirfd: c_int,
    path: *const c_char,
    flags: c_int,
    mask: c_uint,
    buf: *mut c_void,
) -> c_int {
    let Some(real) = real!(statx: unsafe extern "C" fn(c_int, *const c_char, c_int, c_uint, *mut c_void) -> c_int)
    else {
        return missing(-1);
    };
    if empty_path(path, flags) {
        return on_fd!(
            fold "statx",
            dirfd,
            real(dirfd, path, flags, mask, buf),
            |ret| [flags: I(flags as i64), ret: I(ret as i64)]
        );
    }
    on_path!(
        b"statx",
        dirfd,
        path,
        real(dirfd, path, flags, mask, buf),
        |ret| [Arg::int("flags", flags as i64), Arg::int("ret", ret as i64)]
    )
}
