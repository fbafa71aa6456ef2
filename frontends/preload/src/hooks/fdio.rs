//! fd calls beyond read/write: `flock`, `posix_fadvise`, `posix_fallocate`, `fallocate`, the
//! in-kernel copies (`sendfile`, `copy_file_range`, `splice`: one event per call, traced when
//! either fd is), and `msync`/`munmap` of mappings made by a traced `mmap`.
//! Each `unsafe` forwards the caller's arguments unchanged to the real function of the same
//! C signature.
#![allow(clippy::undocumented_unsafe_blocks)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use libc::{c_int, c_uint, c_void, loff_t, off64_t, off_t, size_t, ssize_t};

use dftracer_core::{Arg, Layer, Schema, Slot, Value};

use super::{missing, out_of_line, POSIX};
use crate::table::Interned;
use crate::{enter, guarded, now, on_fd, posix_on, real, record, record_static, SavedErrno, FDS};

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

macro_rules! fadvise {
    ($sym:ident, $off:ty) => {
        /// Returns an error number (not -1/errno), passed through unchanged.
        #[no_mangle]
        pub unsafe extern "C" fn $sym(fd: c_int, offset: $off, len: $off, advice: c_int) -> c_int {
            let Some(real) = real!($sym: unsafe extern "C" fn(c_int, $off, $off, c_int) -> c_int) else {
                return libc::ENOSYS;
            };
            on_fd!(stringify!($sym), fd, real(fd, offset, len, advice), |ret| [
                offset: I(offset as i64),
                length: I(len as i64),
                advice: I(advice as i64),
                ret: I(ret as i64)
            ])
        }
    };
}

fadvise!(posix_fadvise, off_t);
fadvise!(posix_fadvise64, off64_t);

macro_rules! pfallocate {
    ($sym:ident, $off:ty) => {
        /// Returns an error number (not -1/errno), passed through unchanged.
        #[no_mangle]
        pub unsafe extern "C" fn $sym(fd: c_int, offset: $off, len: $off) -> c_int {
            let Some(real) = real!($sym: unsafe extern "C" fn(c_int, $off, $off) -> c_int) else {
                return libc::ENOSYS;
            };
            on_fd!(stringify!($sym), fd, real(fd, offset, len), |ret| [
                offset: I(offset as i64),
                length: I(len as i64),
                ret: I(ret as i64)
            ])
        }
    };
}

pfallocate!(posix_fallocate, off_t);
pfallocate!(posix_fallocate64, off64_t);

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

// ---------------------------------------------------------------- in-kernel copies

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
                let t0 = now();
                let ret = real(fd_in, off_in, fd_out, off_out, len, flags);
                let _errno = SavedErrno::new();
                let t1 = now();
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
                let t0 = now();
                let ret = real(out_fd, in_fd, offset, count);
                let _errno = SavedErrno::new();
                let t1 = now();
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

// ---------------------------------------------------------------- mappings

/// Mappings made by a traced `mmap`, so that `msync` and `munmap` on them can name the file
/// (the fd may be closed by then). A fixed lock-free array: a mapping is claimed by a CAS on
/// its address, its file published last; when full, further mappings are not followed.
const MAPS: usize = 256;

struct Map {
    addr: AtomicUsize,
    len: AtomicUsize,
    /// The mapped file, a parked pin (`table::park`); 0: none.
    file: AtomicU64,
}

static MAPPED: [Map; MAPS] = [const {
    Map {
        addr: AtomicUsize::new(0),
        len: AtomicUsize::new(0),
        file: AtomicU64::new(0),
    }
}; MAPS];
/// Traced mappings alive now: 0 lets `munmap`/`msync` forward after one load.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Remembers a traced mapping (called by the `mmap` hooks after a successful traced call).
pub(crate) fn map_insert(addr: usize, len: usize, file: Interned) {
    if addr == 0 || len == 0 {
        return;
    }
    let Some(pin) = file.file.pin() else { return };
    for m in &MAPPED {
        if m.addr
            .compare_exchange(0, addr, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            m.len.store(len, Ordering::Release);
            m.file.store(crate::table::park(pin), Ordering::Release);
            LIVE.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
}

/// The first traced mapping overlapping `[addr, addr + len)`: its slot and file.
fn map_find(addr: usize, len: usize) -> Option<(&'static Map, Interned)> {
    let end = addr.saturating_add(len.max(1));
    for m in &MAPPED {
        let a = m.addr.load(Ordering::Acquire);
        if a == 0 {
            continue;
        }
        let f = m.file.load(Ordering::Acquire);
        let l = m.len.load(Ordering::Acquire);
        if f == 0 || a >= end || a.saturating_add(l) <= addr {
            continue;
        }
        let Some(file) = crate::table::peek(f) else {
            continue;
        };
        return Some((m, file));
    }
    None
}

#[inline(always)]
fn maps_live() -> bool {
    LIVE.load(Ordering::Relaxed) != 0 && posix_on()
}

#[no_mangle]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: size_t) -> c_int {
    let Some(real) = real!(munmap: unsafe extern "C" fn(*mut c_void, size_t) -> c_int) else {
        return missing(-1);
    };
    if !maps_live() {
        return real(addr, len);
    }
    out_of_line(move || {
        let Some((slot, file)) = map_find(addr as usize, len) else {
            return real(addr, len);
        };
        let Some(busy) = enter() else {
            return real(addr, len);
        };
        // Forget the mapping before it goes (its address may be reused at once) when the
        // call covers all of it.
        let (a, l) = (
            slot.addr.load(Ordering::Acquire),
            slot.len.load(Ordering::Acquire),
        );
        let whole = addr as usize <= a && (addr as usize).saturating_add(len) >= a + l;
        // The mapping's pin, released once its last event is recorded.
        let mut parked = 0;
        if whole {
            parked = slot.file.swap(0, Ordering::AcqRel);
            if parked != 0 {
                slot.len.store(0, Ordering::Release);
                slot.addr.store(0, Ordering::Release);
                LIVE.fetch_sub(1, Ordering::Relaxed);
            }
        }
        static MUNMAP: Schema = Schema::new(
            Layer::LibcIo,
            "munmap",
            "POSIX",
            &[("length", Slot::UInt), ("ret", Slot::Int)],
            "fhash",
        );
        let t0 = now();
        let ret = real(addr, len);
        let _errno = SavedErrno::new();
        let t1 = now();
        guarded(|| {
            record_static(
                &MUNMAP,
                t0,
                t1,
                &[len as u64, ret as i64 as u64],
                &file.file,
            )
        });
        drop(crate::table::unpark(parked));
        drop(busy);
        ret
    })
}

#[no_mangle]
pub unsafe extern "C" fn msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int {
    let Some(real) = real!(msync: unsafe extern "C" fn(*mut c_void, size_t, c_int) -> c_int) else {
        return missing(-1);
    };
    if !maps_live() {
        return real(addr, len, flags);
    }
    out_of_line(move || {
        let Some((_, file)) = map_find(addr as usize, len) else {
            return real(addr, len, flags);
        };
        let Some(busy) = enter() else {
            return real(addr, len, flags);
        };
        static MSYNC: Schema = Schema::new(
            Layer::LibcIo,
            "msync",
            "POSIX",
            &[
                ("length", Slot::UInt),
                ("flags", Slot::Int),
                ("ret", Slot::Int),
            ],
            "fhash",
        );
        let t0 = now();
        let ret = real(addr, len, flags);
        let _errno = SavedErrno::new();
        let t1 = now();
        guarded(|| {
            record_static(
                &MSYNC,
                t0,
                t1,
                &[len as u64, flags as i64 as u64, ret as i64 as u64],
                &file.file,
            )
        });
        drop(busy);
        ret
    })
}

// ---------------------------------------------------------------- ioctl, isatty

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

/// `isatty` asks the terminal layer with an `ioctl` inside libc: recorded on traced fds.
#[no_mangle]
pub unsafe extern "C" fn isatty(fd: c_int) -> c_int {
    let Some(real) = real!(isatty: unsafe extern "C" fn(c_int) -> c_int) else {
        return missing(0);
    };
    on_fd!("isatty", fd, real(fd), |ret| [ret: I(ret as i64)])
}
