//! fd calls that move no data: `flock`, `posix_fadvise`, `posix_fallocate`, `fallocate` (and
//! their `64` names), `ioctl` and `isatty`.
//! Each `unsafe` forwards the caller's arguments unchanged to the real function of the same
//! C signature.
#![allow(clippy::undocumented_unsafe_blocks)]

use libc::{c_int, off64_t, off_t};

use super::missing;
use crate::{on_fd, real};

#[no_mangle]
pub unsafe extern "C" fn flock(fd: c_int, op: c_int) -> c_int {
    let Some(real) = real!(flock: unsafe extern "C" fn(c_int, c_int) -> c_int) else {
        return missing(-1);
    };
    on_fd!("flock", fd, real(fd, op), |ret| [
        operation: I(op as i64),
        ret: I(ret as i64)
    ])
}

/// `posix_fadvise` and `posix_fallocate` (and their `64` twins): `(fd, offset, len[, advice])`.
macro_rules! range_hook {
    ($sym:ident, $off:ty $(, $extra:ident: $ety:ty)?) => {
        /// Returns an error number (not -1/errno), passed through unchanged.
        #[no_mangle]
        pub unsafe extern "C" fn $sym(fd: c_int, offset: $off, len: $off $(, $extra: $ety)?) -> c_int {
            let Some(real) = real!($sym: unsafe extern "C" fn(c_int, $off, $off $(, $ety)?) -> c_int) else {
                return libc::ENOSYS;
            };
            on_fd!(stringify!($sym), fd, real(fd, offset, len $(, $extra)?), |ret| [
                offset: I(offset as i64),
                length: I(len as i64),
                $($extra: I($extra as i64),)?
                ret: I(ret as i64)
            ])
        }
    };
}

range_hook!(posix_fadvise, off_t, advice: c_int);
range_hook!(posix_fadvise64, off64_t, advice: c_int);
range_hook!(posix_fallocate, off_t);
range_hook!(posix_fallocate64, off64_t);

macro_rules! fallocate_hook {
    ($sym:ident, $off:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(fd: c_int, mode: c_int, offset: $off, len: $off) -> c_int {
            let Some(real) = real!($sym: unsafe extern "C" fn(c_int, c_int, $off, $off) -> c_int) else {
                return missing(-1);
            };
            on_fd!(stringify!($sym), fd, real(fd, mode, offset, len), |ret| [
                mode: I(mode as i64),
                offset: I(offset as i64),
                length: I(len as i64),
                ret: I(ret as i64)
            ])
        }
    };
}

fallocate_hook!(fallocate, off_t);
fallocate_hook!(fallocate64, off64_t);

/// `ioctl(fd, request, ...)`: the optional argument is taken as a fixed integer/pointer
/// parameter, as for `fcntl` (same register either way on x86_64 and aarch64 Linux).
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, request: libc::c_ulong, arg: libc::c_ulong) -> c_int {
    let Some(real) = real!(ioctl: unsafe extern "C" fn(c_int, libc::c_ulong, ...) -> c_int) else {
        return missing(-1);
    };
    on_fd!("ioctl", fd, real(fd, request, arg), |ret| [
        request: U(request as u64),
        ret: I(ret as i64)
    ])
}

// `isatty` asks the terminal layer with an `ioctl` inside libc: recorded on traced fds.
crate::fd_shim!(fold fn isatty(fd: c_int) -> c_int, fd, 0, "isatty", |ret| [ret: I(ret as i64)]);
