//! The in-kernel copies: `sendfile`, `copy_file_range`, `splice` (one event per call, traced
//! when either fd is).
//! Each `unsafe` forwards the caller's arguments unchanged to the real function of the same
//! C signature.
#![allow(clippy::undocumented_unsafe_blocks)]

use libc::{c_int, c_uint, loff_t, off64_t, off_t, size_t, ssize_t};

use dftracer_core::{Arg, Value};

use super::{missing, out_of_line, POSIX};
use crate::table::Interned;
use crate::{enter, guarded, ticks, posix_on, real, record, SavedErrno, FDS};

/// The traced files behind a copy's two fds, when at least one is traced.
#[inline(always)]
fn copy_files(fd_in: c_int, fd_out: c_int) -> Option<(Option<Interned>, Option<Interned>)> {
    if !posix_on() {
        return None;
    }
    match (FDS.path(fd_in), FDS.path(fd_out)) {
        (None, None) => None,
        pair => Some(pair),
    }
}

/// Reads an optional offset the program passed by pointer (before the call updates it).
#[inline]
unsafe fn off_at<T: Copy + Into<i64>>(p: *const T) -> Option<i64> {
    if p.is_null() {
        None
    } else {
        Some((*p).into())
    }
}

/// Records one copy: `fhash` names the input file when it is traced, else the output file;
/// `out_fhash` names the output file when both are traced, so every byte the call moved is
/// attributed to its files once, in one event.
#[allow(clippy::too_many_arguments)]
fn record_copy(
    name: &'static [u8],
    t0: u64,
    t1: u64,
    (fin, fout): (Option<Interned>, Option<Interned>),
    fd_in: c_int,
    fd_out: c_int,
    count: u64,
    off_in: Option<i64>,
    off_out: Option<i64>,
    ret: i64,
) {
    // Pinned while the args borrow their paths.
    let (pin_in, pin_out) = (
        fin.and_then(|f| f.file.pin()),
        fout.and_then(|f| f.file.pin()),
    );
    let mut args = [Arg::int("", 0); 9];
    let mut n = 0;
    let mut push = |a| {
        args[n] = a;
        n += 1;
    };
    push(Arg::int("fd_in", fd_in as i64));
    push(Arg::int("fd_out", fd_out as i64));
    push(Arg::new("count", Value::UInt(count)));
    if let Some(o) = off_in {
        push(Arg::int("offset_in", o));
    }
    if let Some(o) = off_out {
        push(Arg::int("offset_out", o));
    }
    push(Arg::int("ret", ret));
    match (&pin_in, &pin_out) {
        (Some(i), Some(o)) => {
            push(Arg::new("fhash", Value::Path(i.path())));
            push(Arg::new("out_fhash", Value::Path(o.path())));
        }
        (Some(f), None) | (None, Some(f)) => push(Arg::new("fhash", Value::Path(f.path()))),
        (None, None) => {}
    }
    record(POSIX, name, t0, t1, &args[..n]);
}

/// `copy_file_range` and `splice`: the same arguments (`fd_in`, `off_in`, `fd_out`, `off_out`,
/// `len`, `flags`), one copy event each.
macro_rules! copy_range_hook {
    ($sym:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(
            fd_in: c_int,
            off_in: *mut loff_t,
            fd_out: c_int,
            off_out: *mut loff_t,
            len: size_t,
            flags: c_uint,
        ) -> ssize_t {
            let Some(real) = real!($sym: unsafe extern "C" fn(c_int, *mut loff_t, c_int, *mut loff_t, size_t, c_uint) -> ssize_t)
            else {
                return missing(-1);
            };
            let Some(files) = copy_files(fd_in, fd_out) else {
                return real(fd_in, off_in, fd_out, off_out, len, flags);
            };
            out_of_line(move || {
                let Some(busy) = enter() else {
                    return real(fd_in, off_in, fd_out, off_out, len, flags);
                };
                let (oi, oo) = (off_at(off_in), off_at(off_out));
                let t0 = ticks();
                let ret = real(fd_in, off_in, fd_out, off_out, len, flags);
                let _errno = SavedErrno::new();
                let t1 = ticks();
                guarded(|| {
                    record_copy(
                        stringify!($sym).as_bytes(),
                        t0,
                        t1,
                        files,
                        fd_in,
                        fd_out,
                        len as u64,
                        oi,
                        oo,
                        ret as i64,
                    )
                });
                drop(busy);
                ret
            })
        }
    };
}

copy_range_hook!(copy_file_range);
copy_range_hook!(splice);

macro_rules! sendfile_hook {
    ($sym:ident, $off:ty) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(out_fd: c_int, in_fd: c_int, offset: *mut $off, count: size_t) -> ssize_t {
            let Some(real) = real!($sym: unsafe extern "C" fn(c_int, c_int, *mut $off, size_t) -> ssize_t) else {
                return missing(-1);
            };
            let Some(files) = copy_files(in_fd, out_fd) else {
                return real(out_fd, in_fd, offset, count);
            };
            out_of_line(move || {
                let Some(busy) = enter() else {
                    return real(out_fd, in_fd, offset, count);
                };
                let oi = off_at(offset);
                let t0 = ticks();
                let ret = real(out_fd, in_fd, offset, count);
                let _errno = SavedErrno::new();
                let t1 = ticks();
                guarded(|| {
                    record_copy(
                        stringify!($sym).as_bytes(), t0, t1, files, in_fd, out_fd, count as u64, oi, None, ret as i64,
                    )
                });
                drop(busy);
                ret
            })
        }
    };
}

sendfile_hook!(sendfile, off_t);
sendfile_hook!(sendfile64, off64_t);
