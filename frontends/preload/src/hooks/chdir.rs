//! Calls that change the current directory: `chdir`, `fchdir` (traced as path/fd calls), and
//! the libc walkers that change it inside libc (`nftw` with `FTW_CHDIR`, `fts` without
//! `FTS_NOCHDIR`), during which the cwd cache is off (see `cwd.rs`).
//! Each `unsafe` forwards the caller's arguments unchanged to the real function of the same
//! C signature.
#![allow(clippy::undocumented_unsafe_blocks)]

use libc::{c_char, c_int, c_void};

use dftracer_core::Arg;

use super::missing;
use crate::{on_fd, on_path, real};

#[no_mangle]
pub unsafe extern "C" fn chdir(path: *const c_char) -> c_int {
    let Some(real) = real!(chdir: unsafe extern "C" fn(*const c_char) -> c_int) else {
        return missing(-1);
    };
    super::cwd::changing(|| {
        on_path!(b"chdir", libc::AT_FDCWD, path, real(path), |ret| [
            Arg::int("ret", ret as i64)
        ])
    })
}

#[no_mangle]
pub unsafe extern "C" fn fchdir(fd: c_int) -> c_int {
    let Some(real) = real!(fchdir: unsafe extern "C" fn(c_int) -> c_int) else {
        return missing(-1);
    };
    super::cwd::changing(|| on_fd!("fchdir", fd, real(fd), |ret| [ret: I(ret as i64)]))
}

// Walkers that change directory inside libc (their `fchdir` calls are not hooked): the cwd
// cache is off while they run (see `cwd`). Not traced themselves: their reads are.

/// glibc's `FTW_CHDIR` and `FTS_NOCHDIR`.
const FTW_CHDIR: c_int = 4;
const FTS_NOCHDIR: c_int = 4;

type NftwFn = unsafe extern "C" fn(*const c_char, *const c_void, c_int, c_int) -> c_int;

macro_rules! nftw_hook {
    ($($sym:ident),*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $sym(
            path: *const c_char,
            f: *const c_void,
            fds: c_int,
            flags: c_int,
        ) -> c_int {
            let Some(real) = real!($sym: NftwFn) else {
                return missing(-1);
            };
            super::cwd::walking(flags & FTW_CHDIR != 0, || real(path, f, fds, flags))
        }
    )*};
}

nftw_hook!(nftw, nftw64);

type FtsOpen = unsafe extern "C" fn(*const *const c_char, c_int, *const c_void) -> *mut c_void;
type FtsClose = unsafe extern "C" fn(*mut c_void) -> c_int;

macro_rules! fts_hooks {
    ($($open:ident, $close:ident);*) => {$(
        #[no_mangle]
        pub unsafe extern "C" fn $open(
            argv: *const *const c_char,
            options: c_int,
            compar: *const c_void,
        ) -> *mut c_void {
            let Some(real) = real!($open: FtsOpen) else {
                return missing(std::ptr::null_mut());
            };
            let fts = real(argv, options, compar);
            super::cwd::walk_opened(fts as usize, options & FTS_NOCHDIR == 0);
            fts
        }

        #[no_mangle]
        pub unsafe extern "C" fn $close(fts: *mut c_void) -> c_int {
            let Some(real) = real!($close: FtsClose) else {
                return missing(-1);
            };
            let r = real(fts);
            super::cwd::walk_closed(fts as usize);
            r
        }
    )*};
}

fts_hooks!(fts_open, fts_close; fts64_open, fts64_close);
