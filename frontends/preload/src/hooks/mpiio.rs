//! MPI-IO: `MPI_File_open`, `_close`, the reads and writes (blocking and nonblocking,
//! individual and collective, split collective, explicit offset, individual, shared or
//! ordered file pointer),
//! `_sync`, `_set_size`, `_seek`, `_seek_shared`, `_set_view`, recorded with
//! `cat` `MPIIO` and type 10 (`TRACE_TYPE_MPI`), the reference develop branch's, when the
//! file is traced. Bound like the HDF5 hooks ([`super::hdf5`]): exported by no one, written
//! into the GOT slots of the objects importing them once a pass meets an object defining
//! `MPI_File_open` and `MPI_Type_size` (the MPI library), with every function resolved from
//! that object. The real call runs outside the recording section: the POSIX calls of the
//! MPI-IO implementation (ROMIO, OMPIO) are recorded beneath.
//!
//! Handles: `MPI_File`, `MPI_Comm`, `MPI_Info` and `MPI_Datatype` are pointers in Open MPI
//! and `int`s (or pointers) in MPICH; every one is passed on in a full register here, so both
//! ABIs are forwarded unchanged. A file handle is mapped to its file at `MPI_File_open` and
//! forgotten at `MPI_File_close` (handles are reused after a close); a file opened before the
//! hooks were bound is not traced. Bytes: `count` x `MPI_Type_size(datatype)` of a call that
//! returned `MPI_SUCCESS` (0), asked once per predefined datatype (never freed: Open MPI's
//! are objects inside libmpi, MPICH's handles of kind "builtin") and at every call for a
//! derived one. A nonblocking call's event is its post: the request's
//! completion (`MPI_Wait`, `MPI_Test` and their `*all`/`*any`/`*some` forms, shared with
//! every other kind of request) is not hooked.
#![allow(non_snake_case, non_camel_case_types)]

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use libc::{c_char, c_int, c_void};

use dftracer_core::{Arg, Layer, Schema, Slot, Value};

use super::libs::{self, reals, IdCache};
use super::{out_of_line, HookEntry};
use crate::table::{self, Interned};
use crate::{enter, guarded, metadata_on, mpiio_on, ticks, SavedErrno};

pub const MPIIO: &[u8] = b"MPIIO";

/// An MPI handle, forwarded in a full register (a pointer, or an `int` in MPICH).
type H = usize;

/// The layer's table from one list: `reals!` of the hooked functions (the required ones,
/// then those a library may lack) and the queries, and [`hooks`]' addresses in that order.
macro_rules! layer {
    (required: [$($h:ident),* $(,)?], optional: [$($o:ident),* $(,)?], queries: [$($q:ident),* $(,)?] $(,)?) => {
        reals!($($h,)* $($o,)* $($q,)*);
        /// Index of the first optional hook; [`HOOKED`]: of the first query.
        const FIRST_OPTIONAL: usize = [$(R::$h),*].len();
        const HOOKED: usize = FIRST_OPTIONAL + [$(R::$o),*].len();
        fn addrs() -> [*const (); HOOKED] {
            [$($h as *const (),)* $($o as *const (),)*]
        }
    };
}

layer!(
    required: [
        MPI_File_open, MPI_File_close,
        MPI_File_read, MPI_File_read_at, MPI_File_read_all, MPI_File_read_at_all,
        MPI_File_write, MPI_File_write_at, MPI_File_write_all, MPI_File_write_at_all,
        MPI_File_sync, MPI_File_set_size, MPI_File_seek,
        MPI_File_iread, MPI_File_iread_at, MPI_File_iwrite, MPI_File_iwrite_at,
        MPI_File_read_shared, MPI_File_write_shared, MPI_File_read_ordered,
        MPI_File_write_ordered, MPI_File_iread_shared, MPI_File_iwrite_shared,
        MPI_File_seek_shared, MPI_File_set_view,
    ],
    // The nonblocking collectives are MPI-3.1's, the large-count `_c` forms MPI-4.0's (Open
    // MPI 4.1 has none; mpi4py 4 calls them where they exist): a library that lacks them
    // has nothing importing them, and they are not bound.
    optional: [
        MPI_File_iread_all, MPI_File_iread_at_all, MPI_File_iwrite_all, MPI_File_iwrite_at_all,
        MPI_File_read_c, MPI_File_read_at_c, MPI_File_read_all_c, MPI_File_read_at_all_c,
        MPI_File_write_c, MPI_File_write_at_c, MPI_File_write_all_c, MPI_File_write_at_all_c,
        MPI_File_iread_c, MPI_File_iread_at_c, MPI_File_iwrite_c, MPI_File_iwrite_at_c,
        MPI_File_iread_all_c, MPI_File_iread_at_all_c, MPI_File_iwrite_all_c,
        MPI_File_iwrite_at_all_c, MPI_File_read_shared_c, MPI_File_write_shared_c,
        MPI_File_read_ordered_c, MPI_File_write_ordered_c, MPI_File_iread_shared_c,
        MPI_File_iwrite_shared_c,
        MPI_File_read_all_begin, MPI_File_read_all_end, MPI_File_write_all_begin,
        MPI_File_write_all_end, MPI_File_read_at_all_begin, MPI_File_read_at_all_end,
        MPI_File_write_at_all_begin, MPI_File_write_at_all_end, MPI_File_read_ordered_begin,
        MPI_File_read_ordered_end, MPI_File_write_ordered_begin, MPI_File_write_ordered_end,
        MPI_File_read_all_begin_c, MPI_File_write_all_begin_c, MPI_File_read_at_all_begin_c,
        MPI_File_write_at_all_begin_c, MPI_File_read_ordered_begin_c,
        MPI_File_write_ordered_begin_c,
    ],
    queries: [MPI_Type_size],
);

/// Resolves every function of [`NAMES`] from the object `name` (pinned for good). `Err`
/// says what is missing; nothing is stored then.
pub fn resolve(name: &CStr) -> Result<(), String> {
    let (h, got) = libs::resolve_in(name, NAMES, |i| (FIRST_OPTIONAL..HOOKED).contains(&i))?;
    for (slot, p) in REAL.iter().zip(got) {
        slot.store(p, Ordering::Relaxed);
    }
    // SAFETY: a live handle (kept for good) and C strings.
    let (ompi, mpich) = unsafe {
        (
            libc::dlsym(h, c"ompi_mpi_byte".as_ptr()) as usize,
            libc::dlsym(h, c"MPIR_Process".as_ptr()) as usize,
        )
    };
    // A library loaded anew: nothing remembered from another.
    LAST_TYPE.store(0, Ordering::Relaxed);
    let span = (ompi != 0).then(|| crate::real::span_of(ompi)).flatten();
    let (lo, hi) = span
        .filter(|(lo, hi)| hi - lo < u32::MAX as usize)
        .unwrap_or((0, 0));
    PREDEFINED_LO.store(lo, Ordering::Relaxed);
    PREDEFINED_SPAN.store(hi - lo, Ordering::Relaxed);
    MPICH.store(hi == 0 && mpich != 0, Ordering::Relaxed);
    Ok(())
}

// ---- datatype sizes ----

/// Open MPI's predefined datatypes are objects of libmpi itself (`MPI_BYTE` is
/// `&ompi_mpi_byte`): a handle inside its loaded image (`[LO, LO + SPAN)`) is one (a derived
/// type is allocated).
static PREDEFINED_LO: AtomicUsize = AtomicUsize::new(0);
static PREDEFINED_SPAN: AtomicUsize = AtomicUsize::new(0);
/// MPICH (and its derivatives): a predefined datatype is an `int` of handle kind "builtin"
/// (bits 30-31: 01).
static MPICH: AtomicBool = AtomicBool::new(false);
/// The last predefined datatype asked: its key ([`predefined`]) in the high half, its
/// `MPI_Type_size` in the low half (one word: never torn). Predefined types are never freed,
/// so a size asked once holds for the process; a derived type is asked at every call (its
/// handle may be freed and reused).
static LAST_TYPE: AtomicU64 = AtomicU64::new(0);

/// A nonzero 32-bit key for a predefined datatype, `None` for any other.
#[inline(always)]
fn predefined(t: H) -> Option<u32> {
    let off = t.wrapping_sub(PREDEFINED_LO.load(Ordering::Relaxed));
    if off < PREDEFINED_SPAN.load(Ordering::Relaxed) {
        return Some(off as u32 + 1);
    }
    // An `int` handle: the register's upper half is not the caller's.
    let i = t as u32;
    (MPICH.load(Ordering::Relaxed) && i & 0xc000_0000 == 0x4000_0000).then_some(i)
}

/// Bytes of `count` elements of `datatype`.
#[inline(always)]
fn bytes(count: i64, datatype: H) -> u64 {
    (count.max(0) as u64).saturating_mul(type_size(datatype))
}

/// `MPI_Type_size(t)` (0 when it fails): [`LAST_TYPE`]'s when `t` is that predefined type.
#[inline(always)]
fn type_size(t: H) -> u64 {
    let key = predefined(t);
    if let Some(k) = key {
        let w = LAST_TYPE.load(Ordering::Relaxed);
        if w >> 32 == k as u64 {
            return w & 0xffff_ffff;
        }
    }
    out_of_line(|| ask_type_size(t, key))
}

fn ask_type_size(t: H, key: Option<u32>) -> u64 {
    type SizeFn = unsafe extern "C" fn(H, *mut c_int) -> c_int;
    let Some(f) = real::<SizeFn>(R::MPI_Type_size) else {
        return 0;
    };
    let mut size: c_int = 0;
    // SAFETY: a datatype the program's successful call accepted; `size` is ours.
    if unsafe { f(t, &mut size) } != 0 {
        return 0;
    }
    let n = size.max(0) as u32;
    if let Some(k) = key {
        LAST_TYPE.store((k as u64) << 32 | n as u64, Ordering::Relaxed);
    }
    n as u64
}

/// The hooks with the definitions they forward to, after a successful [`resolve`].
pub fn hooks() -> Vec<HookEntry> {
    libs::entries(NAMES, &addrs(), &REAL)
}

/// File handle -> its traced file (a pin word); untraced handles are not kept.
static FILES: IdCache<1024> = IdCache::new();

#[inline(always)]
fn file_of(fh: H) -> Option<Interned> {
    FILES.get(fh as i64).and_then(table::peek)
}

fn release(word: u64) {
    if word != 0 {
        drop(table::unpark(word));
    }
}

macro_rules! schema {
    ($name:literal, [$($key:literal : $slot:ident),*]) => {{
        static S: Schema = Schema::new(
            Layer::Mpi,
            $name,
            "MPIIO",
            &[$(($key, Slot::$slot)),*],
            "fhash",
        );
        &S
    }};
}

macro_rules! real_or {
    ($r:ident : $ty:ty) => {
        match real::<$ty>(R::$r) {
            Some(f) => f,
            // MPI_ERR_INTERN: the call cannot be made.
            None => return 16,
        }
    };
}

/// The tail of every handle-based hook: forwards at once when `fh`'s file is not traced,
/// else times `$call` outside any recording section and records `$record` inside one.
macro_rules! on_fh {
    ($fh:expr, $call:expr, |$ret:ident, $t0:ident, $t1:ident, $file:ident, $busy:ident| $record:expr) => {{
        if !mpiio_on() {
            return $call;
        }
        match file_of($fh) {
            None => $call,
            Some($file) => out_of_line(move || {
                let $t0 = ticks();
                let $ret = $call;
                let _errno = SavedErrno::new();
                let $t1 = ticks();
                if let Some($busy) = enter() {
                    guarded(|| $record);
                    drop($busy);
                }
                $ret
            }),
        }
    }};
}

type OpenFn = unsafe extern "C" fn(H, *const c_char, c_int, H, *mut H) -> c_int;

pub unsafe extern "C" fn MPI_File_open(
    comm: H,
    filename: *const c_char,
    amode: c_int,
    info: H,
    fh: *mut H,
) -> c_int {
    let f = real_or!(MPI_File_open: OpenFn);
    if !mpiio_on() {
        return f(comm, filename, amode, info, fh);
    }
    let pinned = {
        let _errno = SavedErrno::new();
        let Some(mut busy) = enter() else {
            return f(comm, filename, amode, info, fh);
        };
        let Some(bufs) = busy.scratch() else {
            return f(comm, filename, amode, info, fh);
        };
        // MPI file names may carry a file-system prefix ("ufs:/path"): the path is after it.
        let mut p = filename;
        if let Some(b) = super::c_bytes(filename) {
            if let Some(i) = b.iter().position(|&c| c == b':') {
                if i > 1 && b[..i].iter().all(|c| c.is_ascii_alphanumeric()) {
                    p = filename.add(i + 1);
                }
            }
        }
        match super::traced_path(libc::AT_FDCWD, p, &mut bufs[0]) {
            Some(path) => table::intern(path),
            None => None,
        }
    };
    let Some(pinned) = pinned else {
        return f(comm, filename, amode, info, fh);
    };
    let t0 = ticks();
    let ret = f(comm, filename, amode, info, fh);
    let _errno = SavedErrno::new();
    let t1 = ticks();
    let file = Interned {
        file: pinned.handle(),
    };
    if let Some(_busy) = enter() {
        guarded(|| {
            let Some(pin) = file.file.pin() else { return };
            let args = [
                Arg::int("amode", amode as i64),
                Arg::int("ret", ret as i64),
                Arg::new("fhash", Value::Path(pin.path())),
            ];
            let args = if metadata_on() { &args[..] } else { &[][..] };
            let (ts, dur) = crate::ticks_span(t0, t1);
            dftracer_core::complete(Layer::Mpi, b"MPI_File_open", MPIIO, ts, dur, args);
        });
    }
    if ret == 0 && !fh.is_null() {
        release(FILES.put(*fh as i64, table::park(pinned), false));
    }
    ret
}

pub unsafe extern "C" fn MPI_File_close(fh: *mut H) -> c_int {
    let f = real_or!(MPI_File_close: unsafe extern "C" fn(*mut H) -> c_int);
    if fh.is_null() {
        return f(fh);
    }
    let h = *fh;
    let ret = on_fh!(h, f(fh), |ret, t0, t1, file, busy| {
        busy.record_static(schema!("MPI_File_close", ["ret": Int]), t0, t1, [ret as i64 as u64], &file.file)
    });
    if ret == 0 {
        release(FILES.put(h as i64, 0, true));
    }
    ret
}

/// A read's or write's event: `$count` elements of `$datatype` (and the explicit `$offset`),
/// `size` their bytes when the call succeeded.
macro_rules! xfer_event {
    ($name:literal, $fh:expr, $call:expr, $count:expr, $datatype:expr) => {
        on_fh!($fh, $call, |ret, t0, t1, file, busy| {
            let size = if ret == 0 { bytes($count as i64, $datatype) } else { 0 };
            busy.record_static(
                schema!($name, ["count": Int, "size": UInt, "ret": Int]),
                t0,
                t1,
                [$count as i64 as u64, size, ret as i64 as u64],
                &file.file,
            )
        })
    };
    ($name:literal, $fh:expr, $call:expr, $offset:expr, $count:expr, $datatype:expr) => {
        on_fh!($fh, $call, |ret, t0, t1, file, busy| {
            let size = if ret == 0 { bytes($count as i64, $datatype) } else { 0 };
            busy.record_static(
                schema!($name, ["offset": Int, "count": Int, "size": UInt, "ret": Int]),
                t0,
                t1,
                [$offset as u64, $count as i64 as u64, size, ret as i64 as u64],
                &file.file,
            )
        })
    };
}

// The last pointer is an `MPI_Status *` (blocking) or an `MPI_Request *` (nonblocking);
// `$count` is `int`, or `MPI_Count` (64 bits) in the large-count `_c` forms, which are
// recorded under the name without `_c` (the same operation; FORMAT.md).
macro_rules! xfer {
    ($sym:ident, $name:literal, $count:ty) => {
        pub unsafe extern "C" fn $sym(
            fh: H,
            buf: *mut c_void,
            count: $count,
            datatype: H,
            status: *mut c_void,
        ) -> c_int {
            let f = real_or!($sym: unsafe extern "C" fn(H, *mut c_void, $count, H, *mut c_void) -> c_int);
            xfer_event!($name, fh, f(fh, buf, count, datatype, status), count, datatype)
        }
    };
    ($sym:ident, $name:literal) => {
        xfer!($sym, $name, c_int);
    };
}

macro_rules! xfer_at {
    ($sym:ident, $name:literal, $count:ty) => {
        pub unsafe extern "C" fn $sym(
            fh: H,
            offset: i64,
            buf: *mut c_void,
            count: $count,
            datatype: H,
            status: *mut c_void,
        ) -> c_int {
            let f = real_or!($sym: unsafe extern "C" fn(H, i64, *mut c_void, $count, H, *mut c_void) -> c_int);
            xfer_event!($name, fh, f(fh, offset, buf, count, datatype, status), offset, count, datatype)
        }
    };
    ($sym:ident, $name:literal) => {
        xfer_at!($sym, $name, c_int);
    };
}

xfer!(MPI_File_read, "MPI_File_read");
xfer!(MPI_File_read_all, "MPI_File_read_all");
xfer!(MPI_File_write, "MPI_File_write");
xfer!(MPI_File_write_all, "MPI_File_write_all");
xfer_at!(MPI_File_read_at, "MPI_File_read_at");
xfer_at!(MPI_File_read_at_all, "MPI_File_read_at_all");
xfer_at!(MPI_File_write_at, "MPI_File_write_at");
xfer_at!(MPI_File_write_at_all, "MPI_File_write_at_all");
// Shared and ordered file pointer: the individual calls' shape.
xfer!(MPI_File_read_shared, "MPI_File_read_shared");
xfer!(MPI_File_write_shared, "MPI_File_write_shared");
xfer!(MPI_File_read_ordered, "MPI_File_read_ordered");
xfer!(MPI_File_write_ordered, "MPI_File_write_ordered");
// Nonblocking: the event is the post (its `ret` the post's, `size` what was asked); the
// completion is in MPI_Wait/MPI_Test, not recorded (FORMAT.md says why).
xfer!(MPI_File_iread, "MPI_File_iread");
xfer!(MPI_File_iwrite, "MPI_File_iwrite");
xfer!(MPI_File_iread_all, "MPI_File_iread_all");
xfer!(MPI_File_iwrite_all, "MPI_File_iwrite_all");
xfer!(MPI_File_iread_shared, "MPI_File_iread_shared");
xfer!(MPI_File_iwrite_shared, "MPI_File_iwrite_shared");
xfer_at!(MPI_File_iread_at, "MPI_File_iread_at");
xfer_at!(MPI_File_iwrite_at, "MPI_File_iwrite_at");
xfer_at!(MPI_File_iread_at_all, "MPI_File_iread_at_all");
xfer_at!(MPI_File_iwrite_at_all, "MPI_File_iwrite_at_all");

// Split collectives: `_begin` posts the operation (an event with what was asked, as a
// nonblocking post), `_end` completes it (an event of its own: the wait for the data).
macro_rules! begin {
    ($sym:ident, $name:literal, $count:ty) => {
        pub unsafe extern "C" fn $sym(fh: H, buf: *mut c_void, count: $count, datatype: H) -> c_int {
            let f = real_or!($sym: unsafe extern "C" fn(H, *mut c_void, $count, H) -> c_int);
            xfer_event!($name, fh, f(fh, buf, count, datatype), count, datatype)
        }
    };
}

macro_rules! begin_at {
    ($sym:ident, $name:literal, $count:ty) => {
        pub unsafe extern "C" fn $sym(fh: H, offset: i64, buf: *mut c_void, count: $count, datatype: H) -> c_int {
            let f = real_or!($sym: unsafe extern "C" fn(H, i64, *mut c_void, $count, H) -> c_int);
            xfer_event!($name, fh, f(fh, offset, buf, count, datatype), offset, count, datatype)
        }
    };
}

macro_rules! end {
    ($sym:ident, $name:literal) => {
        pub unsafe extern "C" fn $sym(fh: H, buf: *mut c_void, status: *mut c_void) -> c_int {
            let f = real_or!($sym: unsafe extern "C" fn(H, *mut c_void, *mut c_void) -> c_int);
            on_fh!(fh, f(fh, buf, status), |ret, t0, t1, file, busy| {
                busy.record_static(schema!($name, ["ret": Int]), t0, t1, [ret as i64 as u64], &file.file)
            })
        }
    };
}

begin!(MPI_File_read_all_begin, "MPI_File_read_all_begin", c_int);
begin!(MPI_File_write_all_begin, "MPI_File_write_all_begin", c_int);
begin!(MPI_File_read_ordered_begin, "MPI_File_read_ordered_begin", c_int);
begin!(MPI_File_write_ordered_begin, "MPI_File_write_ordered_begin", c_int);
begin_at!(MPI_File_read_at_all_begin, "MPI_File_read_at_all_begin", c_int);
begin_at!(MPI_File_write_at_all_begin, "MPI_File_write_at_all_begin", c_int);
begin!(MPI_File_read_all_begin_c, "MPI_File_read_all_begin", Count);
begin!(MPI_File_write_all_begin_c, "MPI_File_write_all_begin", Count);
begin!(MPI_File_read_ordered_begin_c, "MPI_File_read_ordered_begin", Count);
begin!(MPI_File_write_ordered_begin_c, "MPI_File_write_ordered_begin", Count);
begin_at!(MPI_File_read_at_all_begin_c, "MPI_File_read_at_all_begin", Count);
begin_at!(MPI_File_write_at_all_begin_c, "MPI_File_write_at_all_begin", Count);
end!(MPI_File_read_all_end, "MPI_File_read_all_end");
end!(MPI_File_write_all_end, "MPI_File_write_all_end");
end!(MPI_File_read_at_all_end, "MPI_File_read_at_all_end");
end!(MPI_File_write_at_all_end, "MPI_File_write_at_all_end");
end!(MPI_File_read_ordered_end, "MPI_File_read_ordered_end");
end!(MPI_File_write_ordered_end, "MPI_File_write_ordered_end");

/// `MPI_Count`: 64 bits in every MPI (MPICH, Open MPI 5).
type Count = i64;
xfer!(MPI_File_read_c, "MPI_File_read", Count);
xfer!(MPI_File_read_all_c, "MPI_File_read_all", Count);
xfer!(MPI_File_write_c, "MPI_File_write", Count);
xfer!(MPI_File_write_all_c, "MPI_File_write_all", Count);
xfer_at!(MPI_File_read_at_c, "MPI_File_read_at", Count);
xfer_at!(MPI_File_read_at_all_c, "MPI_File_read_at_all", Count);
xfer_at!(MPI_File_write_at_c, "MPI_File_write_at", Count);
xfer_at!(MPI_File_write_at_all_c, "MPI_File_write_at_all", Count);
xfer!(MPI_File_read_shared_c, "MPI_File_read_shared", Count);
xfer!(MPI_File_write_shared_c, "MPI_File_write_shared", Count);
xfer!(MPI_File_read_ordered_c, "MPI_File_read_ordered", Count);
xfer!(MPI_File_write_ordered_c, "MPI_File_write_ordered", Count);
xfer!(MPI_File_iread_c, "MPI_File_iread", Count);
xfer!(MPI_File_iwrite_c, "MPI_File_iwrite", Count);
xfer!(MPI_File_iread_all_c, "MPI_File_iread_all", Count);
xfer!(MPI_File_iwrite_all_c, "MPI_File_iwrite_all", Count);
xfer!(MPI_File_iread_shared_c, "MPI_File_iread_shared", Count);
xfer!(MPI_File_iwrite_shared_c, "MPI_File_iwrite_shared", Count);
xfer_at!(MPI_File_iread_at_c, "MPI_File_iread_at", Count);
xfer_at!(MPI_File_iwrite_at_c, "MPI_File_iwrite_at", Count);
xfer_at!(MPI_File_iread_at_all_c, "MPI_File_iread_at_all", Count);
xfer_at!(MPI_File_iwrite_at_all_c, "MPI_File_iwrite_at_all", Count);

pub unsafe extern "C" fn MPI_File_sync(fh: H) -> c_int {
    let f = real_or!(MPI_File_sync: unsafe extern "C" fn(H) -> c_int);
    on_fh!(fh, f(fh), |ret, t0, t1, file, busy| {
        busy.record_static(schema!("MPI_File_sync", ["ret": Int]), t0, t1, [ret as i64 as u64], &file.file)
    })
}

pub unsafe extern "C" fn MPI_File_set_size(fh: H, size: i64) -> c_int {
    let f = real_or!(MPI_File_set_size: unsafe extern "C" fn(H, i64) -> c_int);
    on_fh!(fh, f(fh, size), |ret, t0, t1, file, busy| {
        busy.record_static(
            schema!("MPI_File_set_size", ["size": Int, "ret": Int]),
            t0,
            t1,
            [size as u64, ret as i64 as u64],
            &file.file,
        )
    })
}

macro_rules! seek {
    ($sym:ident, $name:literal) => {
        pub unsafe extern "C" fn $sym(fh: H, offset: i64, whence: c_int) -> c_int {
            let f = real_or!($sym: unsafe extern "C" fn(H, i64, c_int) -> c_int);
            on_fh!(fh, f(fh, offset, whence), |ret, t0, t1, file, busy| {
                busy.record_static(
                    schema!($name, ["offset": Int, "whence": Int, "ret": Int]),
                    t0,
                    t1,
                    [offset as u64, whence as i64 as u64, ret as i64 as u64],
                    &file.file,
                )
            })
        }
    };
}

seek!(MPI_File_seek, "MPI_File_seek");
seek!(MPI_File_seek_shared, "MPI_File_seek_shared");

type SetViewFn = unsafe extern "C" fn(H, i64, H, H, *const c_char, H) -> c_int;

/// `disp` (bytes) and the etype's size: an `offset` of the calls after it is in etypes.
pub unsafe extern "C" fn MPI_File_set_view(
    fh: H,
    disp: i64,
    etype: H,
    filetype: H,
    datarep: *const c_char,
    info: H,
) -> c_int {
    let f = real_or!(MPI_File_set_view: SetViewFn);
    on_fh!(fh, f(fh, disp, etype, filetype, datarep, info), |ret, t0, t1, file, busy| {
        let etype_size = if ret == 0 { bytes(1, etype) } else { 0 };
        busy.record_static(
            schema!("MPI_File_set_view", ["disp": Int, "etype_size": UInt, "ret": Int]),
            t0,
            t1,
            [disp as u64, etype_size, ret as i64 as u64],
            &file.file,
        )
    })
}
