//! Links and file attributes by path or fd: `link`/`symlink` (+`at`), `readlink`, `remove`,
//! permissions and owners, times, `truncate`, special files (`mkfifo`, `mknod`), `statvfs` and
//! `realpath`. Each path call is traced when its path (resolved against the cwd or its dirfd)
//! is under a data dir; the fd variants when the fd is traced. Relative paths are resolved with
//! the cwd of the moment, so they still resolve after a `chdir`.
//! Each `unsafe` forwards the caller's arguments unchanged to the real function of the same
//! C signature.
#![allow(clippy::undocumented_unsafe_blocks)]

use libc::{c_char, c_int, c_void, dev_t, gid_t, mode_t, off64_t, off_t, size_t, ssize_t, uid_t};

use dftracer_core::{Arg, Value};

use super::posix::rename_common;
use super::{c_bytes, missing};
use crate::{on_fd, on_path, real};

#[no_mangle]
pub unsafe extern "C" fn link(old: *const c_char, new: *const c_char) -> c_int {
    let Some(real) = real!(link: unsafe extern "C" fn(*const c_char, *const c_char) -> c_int)
    else {
        return missing(-1);
    };
    rename_common(b"link", libc::AT_FDCWD, old, libc::AT_FDCWD, new, || {
        real(old, new)
    })
}

#[no_mangle]
pub unsafe extern "C" fn linkat(
    olddirfd: c_int,
    old: *const c_char,
    newdirfd: c_int,
    new: *const c_char,
    flags: c_int,
) -> c_int {
    let Some(real) = real!(linkat: unsafe extern "C" fn(c_int, *const c_char, c_int, *const c_char, c_int) -> c_int)
    else {
        return missing(-1);
    };
    rename_common(b"linkat", olddirfd, old, newdirfd, new, || {
        real(olddirfd, old, newdirfd, new, flags)
    })
}

/// `symlink(target, linkpath)`: traced when the link created is; `target` is recorded as the
/// program wrote it (it is text stored in the link, resolved only when the link is used).
#[no_mangle]
pub unsafe extern "C" fn symlink(target: *const c_char, linkpath: *const c_char) -> c_int {
    let Some(real) = real!(symlink: unsafe extern "C" fn(*const c_char, *const c_char) -> c_int)
    else {
        return missing(-1);
    };
    on_path!(
        b"symlink",
        libc::AT_FDCWD,
        linkpath,
        real(target, linkpath),
        |ret| [
            Arg::new("target", Value::Str(c_bytes(target).unwrap_or(b""))),
            Arg::int("ret", ret as i64)
        ]
    )
}

#[no_mangle]
pub unsafe extern "C" fn symlinkat(
    target: *const c_char,
    dirfd: c_int,
    linkpath: *const c_char,
) -> c_int {
    let Some(real) =
        real!(symlinkat: unsafe extern "C" fn(*const c_char, c_int, *const c_char) -> c_int)
    else {
        return missing(-1);
    };
    on_path!(
        b"symlinkat",
        dirfd,
        linkpath,
        real(target, dirfd, linkpath),
        |ret| [
            Arg::new("target", Value::Str(c_bytes(target).unwrap_or(b""))),
            Arg::int("ret", ret as i64)
        ]
    )
}

#[no_mangle]
pub unsafe extern "C" fn readlink(path: *const c_char, buf: *mut c_char, size: size_t) -> ssize_t {
    let Some(real) =
        real!(readlink: unsafe extern "C" fn(*const c_char, *mut c_char, size_t) -> ssize_t)
    else {
        return missing(-1);
    };
    on_path!(
        b"readlink",
        libc::AT_FDCWD,
        path,
        real(path, buf, size),
        |ret| [Arg::int("count", size as i64), Arg::int("ret", ret as i64)]
    )
}

#[no_mangle]
pub unsafe extern "C" fn __readlink_chk(
    path: *const c_char,
    buf: *mut c_char,
    size: size_t,
    buflen: size_t,
) -> ssize_t {
    let Some(real) = real!(__readlink_chk: unsafe extern "C" fn(*const c_char, *mut c_char, size_t, size_t) -> ssize_t)
    else {
        return missing(-1);
    };
    on_path!(
        b"readlink",
        libc::AT_FDCWD,
        path,
        real(path, buf, size, buflen),
        |ret| [Arg::int("count", size as i64), Arg::int("ret", ret as i64)]
    )
}

#[no_mangle]
pub unsafe extern "C" fn readlinkat(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut c_char,
    size: size_t,
) -> ssize_t {
    let Some(real) = real!(readlinkat: unsafe extern "C" fn(c_int, *const c_char, *mut c_char, size_t) -> ssize_t)
    else {
        return missing(-1);
    };
    on_path!(
        b"readlinkat",
        dirfd,
        path,
        real(dirfd, path, buf, size),
        |ret| [Arg::int("count", size as i64), Arg::int("ret", ret as i64)]
    )
}

#[no_mangle]
pub unsafe extern "C" fn __readlinkat_chk(
    dirfd: c_int,
    path: *const c_char,
    buf: *mut c_char,
    size: size_t,
    buflen: size_t,
) -> ssize_t {
    let Some(real) = real!(__readlinkat_chk: unsafe extern "C" fn(c_int, *const c_char, *mut c_char, size_t, size_t) -> ssize_t)
    else {
        return missing(-1);
    };
    on_path!(
        b"readlinkat",
        dirfd,
        path,
        real(dirfd, path, buf, size, buflen),
        |ret| [Arg::int("count", size as i64), Arg::int("ret", ret as i64)]
    )
}

/// One-path calls whose only extra args are integers: `hook!(sym, (path, a: T, ...), [keys])`.
macro_rules! path_call {
    ($sym:ident ( $($a:ident : $t:ty),* ) -> $r:ty, [$($key:literal = $v:ident),*]) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(path: *const c_char $(, $a: $t)*) -> $r {
            let Some(real) = real!($sym: unsafe extern "C" fn(*const c_char $(, $t)*) -> $r) else {
                return missing(-1);
            };
            on_path!(stringify!($sym).as_bytes(), libc::AT_FDCWD, path, real(path $(, $a)*), |ret| [
                $(Arg::int($key, $v as i64),)*
                Arg::int("ret", ret as i64)
            ])
        }
    };
}

path_call!(remove() -> c_int, []);
path_call!(chmod(mode: mode_t) -> c_int, ["mode" = mode]);
path_call!(chown(owner: uid_t, group: gid_t) -> c_int, ["uid" = owner, "gid" = group]);
path_call!(lchown(owner: uid_t, group: gid_t) -> c_int, ["uid" = owner, "gid" = group]);
path_call!(utime(times: *const c_void) -> c_int, []);
path_call!(utimes(times: *const c_void) -> c_int, []);
path_call!(lutimes(times: *const c_void) -> c_int, []);
path_call!(truncate(length: off_t) -> c_int, ["length" = length]);
path_call!(truncate64(length: off64_t) -> c_int, ["length" = length]);
path_call!(mkfifo(mode: mode_t) -> c_int, ["mode" = mode]);
path_call!(mknod(mode: mode_t, dev: dev_t) -> c_int, ["mode" = mode, "dev" = dev]);
path_call!(statvfs(buf: *mut c_void) -> c_int, []);
path_call!(statvfs64(buf: *mut c_void) -> c_int, []);

/// `*at` calls with a dirfd, a path and integer args.
macro_rules! at_call {
    ($sym:ident ( $($a:ident : $t:ty),* ) -> $r:ty, [$($key:literal = $v:ident),*]) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(dirfd: c_int, path: *const c_char $(, $a: $t)*) -> $r {
            let Some(real) = real!($sym: unsafe extern "C" fn(c_int, *const c_char $(, $t)*) -> $r) else {
                return missing(-1);
            };
            on_path!(stringify!($sym).as_bytes(), dirfd, path, real(dirfd, path $(, $a)*), |ret| [
                $(Arg::int($key, $v as i64),)*
                Arg::int("ret", ret as i64)
            ])
        }
    };
}

at_call!(fchmodat(mode: mode_t, flags: c_int) -> c_int, ["mode" = mode, "flags" = flags]);
at_call!(fchownat(owner: uid_t, group: gid_t, flags: c_int) -> c_int, ["uid" = owner, "gid" = group, "flags" = flags]);
at_call!(mkfifoat(mode: mode_t) -> c_int, ["mode" = mode]);
at_call!(mknodat(mode: mode_t, dev: dev_t) -> c_int, ["mode" = mode, "dev" = dev]);

/// `utimensat(fd, NULL, times, 0)` is `futimens(fd, times)`: an fd call.
#[no_mangle]
pub unsafe extern "C" fn utimensat(
    dirfd: c_int,
    path: *const c_char,
    times: *const c_void,
    flags: c_int,
) -> c_int {
    let Some(real) =
        real!(utimensat: unsafe extern "C" fn(c_int, *const c_char, *const c_void, c_int) -> c_int)
    else {
        return missing(-1);
    };
    if path.is_null() {
        return on_fd!("utimensat", dirfd, real(dirfd, path, times, flags), |ret| [
            flags: I(flags as i64),
            ret: I(ret as i64)
        ]);
    }
    on_path!(
        b"utimensat",
        dirfd,
        path,
        real(dirfd, path, times, flags),
        |ret| [Arg::int("flags", flags as i64), Arg::int("ret", ret as i64)]
    )
}

/// fd calls with integer args: `fd_call!(sym(a: T, ...), [key: K(v), ...])`.
macro_rules! fd_call {
    ($sym:ident ( $($a:ident : $t:ty),* ) -> $r:ty, [$($key:ident : $kind:ident($v:expr)),*]) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(fd: c_int $(, $a: $t)*) -> $r {
            let Some(real) = real!($sym: unsafe extern "C" fn(c_int $(, $t)*) -> $r) else {
                return missing(-1);
            };
            on_fd!(stringify!($sym), fd, real(fd $(, $a)*), |ret| [
                $($key: $kind($v),)*
                ret: I(ret as i64)
            ])
        }
    };
}

fd_call!(fchmod(mode: mode_t) -> c_int, [mode: I(mode as i64)]);
fd_call!(fchown(owner: uid_t, group: gid_t) -> c_int, [uid: I(owner as i64), gid: I(group as i64)]);
fd_call!(futimens(times: *const c_void) -> c_int, []);
fd_call!(futimes(times: *const c_void) -> c_int, []);
fd_call!(fstatvfs(buf: *mut c_void) -> c_int, []);
fd_call!(fstatvfs64(buf: *mut c_void) -> c_int, []);

type RealpathFn = unsafe extern "C" fn(*const c_char, *mut c_char) -> *mut c_char;

#[no_mangle]
pub unsafe extern "C" fn realpath(path: *const c_char, resolved: *mut c_char) -> *mut c_char {
    let Some(real) = real!(realpath: RealpathFn) else {
        return missing(std::ptr::null_mut());
    };
    on_path!(
        b"realpath",
        libc::AT_FDCWD,
        path,
        real(path, resolved),
        |ret| [Arg::int("ret", if ret.is_null() { -1 } else { 0 })]
    )
}

#[no_mangle]
pub unsafe extern "C" fn __realpath_chk(
    path: *const c_char,
    resolved: *mut c_char,
    resolvedlen: size_t,
) -> *mut c_char {
    let Some(real) = real!(__realpath_chk: unsafe extern "C" fn(*const c_char, *mut c_char, size_t) -> *mut c_char)
    else {
        return missing(std::ptr::null_mut());
    };
    on_path!(
        b"realpath",
        libc::AT_FDCWD,
        path,
        real(path, resolved, resolvedlen),
        |ret| [Arg::int("ret", if ret.is_null() { -1 } else { 0 })]
    )
}
