//! HDF5: the file, dataset, group, attribute and object calls that carry I/O, recorded with
//! `cat` `HDF5` (type 5, `TRACE_TYPE_HDF5`) when the file is traced (the data-dir filter).
//!
//! Nothing here is exported: a libhdf5 is usually loaded `RTLD_LOCAL` (h5py's own copy in
//! `h5py.libs/`), so its functions are not in the global scope and an exported `H5Dread`
//! would reach no one, or the wrong library. The hooks are bound into the GOT slots of the
//! objects that import them ([`crate::bind`]: in process in both modes, for objects loaded
//! before or after tracing started), and forward to the functions of the one libhdf5 that
//! defines them, resolved from that object ([`resolve`]: `dlsym` on its own handle) before
//! any slot is written. A slot that holds another library's definition is left alone.
//!
//! The real call runs outside the recording section, so the POSIX calls libhdf5 makes
//! inside it are recorded as well (both layers: an `H5Dread` with its `pread`s within it).
//! Only the real call is timed; the queries that give the file and the bytes
//! (`H5Fget_name`, `H5Sget_select_npoints`, `H5Tget_size`, ...) run before or after it, on
//! ids the call has just accepted: a failed call gets no query (an HDF5 call clears the
//! thread's error stack, and a query on a bad id would print one).
//!
//! Files: an id's file is found once (`H5Iis_valid`, then `H5Fget_name`, resolved against
//! the cwd and filtered) and kept in a small lock-free cache keyed by the id (HDF5 never
//! reuses an id while the library is open: its ids count up), with the interned file pinned,
//! or "not traced". A new id from a traced open or create is cached with its file at once.
#![allow(non_snake_case, non_camel_case_types)]
#![allow(clippy::too_many_arguments)]

use std::ffi::CStr;
use std::sync::atomic::{fence, AtomicI64, AtomicU64, AtomicUsize, Ordering};

use libc::{c_char, c_int, c_uint, c_void, size_t, ssize_t};

use dftracer_core::{Arg, FileHandle, Layer, Schema, Slot, Value};

use super::libs::{self, reals, IdCache};
use super::{out_of_line, HookEntry};
use crate::table::{self, Interned};
use crate::{enter, guarded, hdf5_on, metadata_on, ticks, ticks_span, SavedErrno};

pub type Hid = i64;
pub type Herr = c_int;

/// `H5S_ALL`, `H5S_BLOCK`, `H5S_PLIST` (1.14): dataspace ids that are not dataspaces.
const SPECIAL_SPACES: Hid = 2;

pub const HDF5: &[u8] = b"HDF5";

// Every function this module calls in libhdf5: the hooked ones first, then the queries.
reals!(
    H5Fcreate, H5Fopen, H5Fclose, H5Fflush,
    H5Dcreate2, H5Dopen2, H5Dread, H5Dwrite, H5Dset_extent, H5Dclose,
    H5Gcreate2, H5Gopen2, H5Gclose,
    H5Acreate2, H5Acreate_by_name, H5Aopen, H5Aopen_by_name, H5Aread, H5Awrite, H5Aclose,
    H5Oopen, H5Oclose,
    H5Tset_size, H5Tset_precision, H5Tset_offset, H5Tpack, H5Dextend, H5Drefresh,
    H5Sselect_hyperslab, H5Sselect_elements, H5Sselect_all, H5Sselect_none, H5Sselect_copy,
    H5Smodify_select, H5Sset_extent_simple, H5Sset_extent_none, H5Sextent_copy, H5close,
    H5get_libversion, H5Iis_valid, H5Fget_name, H5Dget_space, H5Aget_space,
    H5Sget_select_npoints, H5Sclose, H5Tget_size,
);

/// Hooks a libhdf5 may lack (built without the deprecated API; before 1.12): when missing,
/// nothing imports them, and they are not bound.
const OPTIONAL: &[R] = &[R::H5Dextend, R::H5Sselect_copy, R::H5Smodify_select];

/// How many of [`NAMES`] are hooked (the rest are queries).
const HOOKED: usize = R::H5close as usize + 1;

/// Resolves every function of [`NAMES`] from the object `name` (already loaded; pinned for
/// good, so it is never unloaded under a bound slot). `Err` says what is missing; nothing is
/// stored then, and nothing must be bound.
pub fn resolve(name: &CStr) -> Result<(), String> {
    // A library built without the deprecated API has no H5Dextend: nothing imports it.
    let (h, got) =
        libs::resolve_in(name, NAMES, |i| OPTIONAL.iter().any(|&o| o as usize == i))?;
    type VersionFn = unsafe extern "C" fn(*mut c_uint, *mut c_uint, *mut c_uint) -> Herr;
    let (mut maj, mut min, mut rel) = (0, 0, 0);
    // SAFETY: H5get_libversion's signature; it writes three unsigned ints.
    let r = unsafe {
        std::mem::transmute::<usize, VersionFn>(got[R::H5get_libversion as usize])(
            &mut maj, &mut min, &mut rel,
        )
    };
    if r < 0 || (maj, min) < (1, 10) {
        // SAFETY: the reference `resolve_in` took on a loaded object (it stays loaded).
        unsafe { libc::dlclose(h) };
        return Err(format!(
            "HDF5 {maj}.{min}.{rel} (1.10 or later is needed: 64-bit hid_t)"
        ));
    }
    for (slot, p) in REAL.iter().zip(got) {
        slot.store(p, Ordering::Relaxed);
    }
    Ok(())
}

/// The hooks with the definitions they forward to (the slots they may replace), after a
/// successful [`resolve`].
pub fn hooks() -> Vec<HookEntry> {
    let addrs: [*const (); HOOKED] = [
        H5Fcreate as *const (),
        H5Fopen as *const (),
        H5Fclose as *const (),
        H5Fflush as *const (),
        H5Dcreate2 as *const (),
        H5Dopen2 as *const (),
        H5Dread as *const (),
        H5Dwrite as *const (),
        H5Dset_extent as *const (),
        H5Dclose as *const (),
        H5Gcreate2 as *const (),
        H5Gopen2 as *const (),
        H5Gclose as *const (),
        H5Acreate2 as *const (),
        H5Acreate_by_name as *const (),
        H5Aopen as *const (),
        H5Aopen_by_name as *const (),
        H5Aread as *const (),
        H5Awrite as *const (),
        H5Aclose as *const (),
        H5Oopen as *const (),
        H5Oclose as *const (),
        H5Tset_size as *const (),
        H5Tset_precision as *const (),
        H5Tset_offset as *const (),
        H5Tpack as *const (),
        H5Dextend as *const (),
        H5Drefresh as *const (),
        H5Sselect_hyperslab as *const (),
        H5Sselect_elements as *const (),
        H5Sselect_all as *const (),
        H5Sselect_none as *const (),
        H5Sselect_copy as *const (),
        H5Smodify_select as *const (),
        H5Sset_extent_simple as *const (),
        H5Sset_extent_none as *const (),
        H5Sextent_copy as *const (),
        H5close as *const (),
    ];
    libs::entries(NAMES, &addrs, &REAL)
}

// ---- per-id caches ----

/// id -> its file: a pin word ([`table::park`]) or [`UNTRACED`].
static FILES: IdCache<4096> = IdCache::new();
/// A cached "this id's file is not traced".
const UNTRACED: u64 = u64::MAX;

/// Caches `id` with `val` (a pin word, given to the entry, or [`UNTRACED`]); the word it
/// replaces gives its pin back.
fn store(id: Hid, val: u64) {
    release(FILES.put(id, val, false));
}

/// Forgets `id` (closed), giving its pin back.
fn forget(id: Hid) {
    release(FILES.put(id, 0, true));
}

#[inline(always)]
fn cached(id: Hid) -> Option<u64> {
    FILES.get(id)
}

/// Datatype id -> `H5Tget_size`, dataset/attribute id -> points of its whole extent, and
/// dataspace id -> points selected, each word tagged with the generation it was read in
/// (read before the query). A datatype's size changes only through `H5Tset_size`,
/// `H5Tset_precision`, `H5Tset_offset` and `H5Tpack`, a dataset's extent through
/// `H5Dset_extent`, `H5Dextend` and `H5Drefresh` (an attribute's never), a dataspace's
/// selection through `H5Sselect_hyperslab`, `_elements`, `_all`, `_none`, `_copy`,
/// `H5Smodify_select`, `H5Sset_extent_simple`, `_none` and `H5Sextent_copy`: those calls
/// are hooked (files traced or not) and move the generation before and after the real call,
/// so a value is used only while nothing could have changed it. `H5close` moves all three
/// and forgets every file (ids may start over after it).
static SIZES: IdCache<256> = IdCache::new();
static EXTENTS: IdCache<1024> = IdCache::new();
static SELECTED: IdCache<1024> = IdCache::new();
static TYPE_GEN: AtomicU64 = AtomicU64::new(1);
static SPACE_GEN: AtomicU64 = AtomicU64::new(1);
static SELECT_GEN: AtomicU64 = AtomicU64::new(1);

/// A generation-tagged value: 24 bits of generation, 40 of value (larger values are not
/// cached).
#[inline(always)]
fn tagged(gen: &AtomicU64, v: u64) -> Option<u64> {
    (v < 1 << 40).then(|| (gen.load(Ordering::Relaxed) & 0xff_ffff) << 40 | v)
}

#[inline(always)]
fn untag(gen: &AtomicU64, w: u64) -> Option<u64> {
    (w >> 40 == gen.load(Ordering::Relaxed) & 0xff_ffff).then_some(w & ((1 << 40) - 1))
}

fn bump(gen: &AtomicU64) {
    // Never 0 in the low 24 bits: a tagged 0 would read as "no entry".
    let g = gen.fetch_add(1, Ordering::Relaxed) + 1;
    if g & 0xff_ffff == 0 {
        gen.fetch_add(1, Ordering::Relaxed);
    }
    ANY_GEN.fetch_add(1, Ordering::Relaxed);
}

/// Moves with each of the three generations: what [`LAST`] was computed under.
static ANY_GEN: AtomicU64 = AtomicU64::new(1);

/// The last transfer's bytes, for the ids it was computed from (dataset, memory type,
/// memory space, file space) under [`ANY_GEN`]: a loop that reads the same selection again
/// finds its bytes in one look instead of two cache look-ups. A sequence word (odd while
/// written) keeps readers from a torn entry; a writer that finds it busy does not store.
struct Last {
    seq: AtomicU64,
    ids: [AtomicI64; 4],
    gen: AtomicU64,
    bytes: AtomicU64,
}

static LAST: Last = Last {
    seq: AtomicU64::new(0),
    ids: [const { AtomicI64::new(0) }; 4],
    gen: AtomicU64::new(0),
    bytes: AtomicU64::new(0),
};

impl Last {
    #[inline(always)]
    fn get(&self, ids: [Hid; 4], gen: u64) -> Option<u64> {
        let s = self.seq.load(Ordering::Acquire);
        let same = self.gen.load(Ordering::Relaxed) == gen
            && ids.iter().zip(&self.ids).all(|(a, b)| *a == b.load(Ordering::Relaxed));
        let bytes = self.bytes.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        (same && s & 1 == 0 && self.seq.load(Ordering::Relaxed) == s).then_some(bytes)
    }

    fn put(&self, ids: [Hid; 4], gen: u64, bytes: u64) {
        let s = self.seq.load(Ordering::Relaxed);
        if s & 1 != 0
            || self
                .seq
                .compare_exchange(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        fence(Ordering::Release);
        for (a, b) in ids.iter().zip(&self.ids) {
            b.store(*a, Ordering::Relaxed);
        }
        self.gen.store(gen, Ordering::Relaxed);
        self.bytes.store(bytes, Ordering::Relaxed);
        self.seq.store(s + 2, Ordering::Release);
    }
}

fn release(word: u64) {
    if word != 0 && word != UNTRACED {
        drop(table::unpark(word));
    }
}

/// The traced file of object `id` (any id of an open file: file, group, dataset,
/// attribute), `None` when it is not traced or not a valid id. A cache hit is a few loads;
/// a miss asks libhdf5 once (`H5Iis_valid`, `H5Fget_name`) and caches the answer.
#[inline(always)]
fn file_of(id: Hid) -> Option<Interned> {
    match cached(id) {
        Some(UNTRACED) => None,
        Some(w) => table::peek(w),
        None if id <= 0 => None,
        None => out_of_line(|| lookup(id)),
    }
}

fn lookup(id: Hid) -> Option<Interned> {
    let _errno = SavedErrno::new();
    let mut busy = enter()?;
    let bufs = busy.scratch()?;
    type ValidFn = unsafe extern "C" fn(Hid) -> c_int;
    type NameFn = unsafe extern "C" fn(Hid, *mut c_char, size_t) -> ssize_t;
    let valid: ValidFn = real(R::H5Iis_valid)?;
    let get_name: NameFn = real(R::H5Fget_name)?;
    // SAFETY: H5Iis_valid takes any id (no error pushed for a bad one).
    if unsafe { valid(id) } <= 0 {
        return None;
    }
    let (name, out) = bufs.split_at_mut(1);
    let name = &mut name[0];
    // SAFETY: a valid id; libhdf5 writes at most `len` bytes, NUL included.
    let n = unsafe { get_name(id, name.as_mut_ptr() as *mut c_char, name.len()) };
    if n <= 0 || n as usize >= name.len() {
        store(id, UNTRACED);
        return None;
    }
    name[n as usize] = 0;
    // SAFETY: a NUL-terminated string in our buffer.
    let traced = unsafe {
        super::traced_path(
            libc::AT_FDCWD,
            name.as_ptr() as *const c_char,
            &mut out[0],
        )
    };
    let Some(p) = traced else {
        store(id, UNTRACED);
        return None;
    };
    let pinned = table::intern(p)?;
    let file = Interned {
        file: pinned.handle(),
    };
    store(id, table::park(pinned));
    Some(file)
}

/// Caches `new` (an id a traced call just returned) with `file`.
fn adopt(new: Hid, file: &Interned) {
    if new > 0 {
        if let Some(p) = file.file.pin() {
            store(new, table::park(p));
        }
    }
}

// ---- bytes ----

type SpaceOfFn = unsafe extern "C" fn(Hid) -> Hid;
type NpointsFn = unsafe extern "C" fn(Hid) -> i64;
type CloseFn = unsafe extern "C" fn(Hid) -> Herr;
type SizeFn = unsafe extern "C" fn(Hid) -> size_t;

/// Points selected in `space` (a real dataspace id), 0 when unknown.
fn npoints(space: Hid) -> u64 {
    let Some(f) = real::<NpointsFn>(R::H5Sget_select_npoints) else {
        return 0;
    };
    // SAFETY: a dataspace id the program's successful call accepted (or our own copy).
    unsafe { f(space) }.max(0) as u64
}

/// [`npoints`] of a dataspace of the program's, through [`SELECTED`].
fn selected(space: Hid) -> u64 {
    if let Some(n) = SELECTED.get(space).and_then(|w| untag(&SELECT_GEN, w)) {
        return n;
    }
    let tag = tagged(&SELECT_GEN, 0);
    let n = npoints(space);
    if let Some(t) = tag.filter(|_| n < 1 << 40) {
        SELECTED.put(space, t | n, false);
    }
    n
}

/// Points of the whole extent of `obj`'s dataspace (`H5Dget_space` / `H5Aget_space`).
fn extent(obj: Hid, space_of: R) -> u64 {
    if let Some(n) = EXTENTS.get(obj).and_then(|w| untag(&SPACE_GEN, w)) {
        return n;
    }
    let (Some(get), Some(close)) = (real::<SpaceOfFn>(space_of), real::<CloseFn>(R::H5Sclose))
    else {
        return 0;
    };
    let tag = tagged(&SPACE_GEN, 0);
    // SAFETY: a dataset/attribute id the program's successful call accepted; the copy of its
    // dataspace we get is ours to close.
    let s = unsafe { get(obj) };
    if s < 0 {
        return 0;
    }
    let n = npoints(s);
    // SAFETY: our own dataspace id.
    unsafe { close(s) };
    // Tagged with the generation read before the query: a change meanwhile is not missed.
    if let Some(t) = tag.filter(|_| n < 1 << 40) {
        EXTENTS.put(obj, t | n, false);
    }
    n
}

fn type_size(t: Hid) -> u64 {
    if let Some(n) = SIZES.get(t).and_then(|w| untag(&TYPE_GEN, w)) {
        return n;
    }
    let tag = tagged(&TYPE_GEN, 0);
    let Some(f) = real::<SizeFn>(R::H5Tget_size) else {
        return 0;
    };
    // SAFETY: a datatype id the program's successful call accepted.
    let n = unsafe { f(t) } as u64;
    if let Some(tag) = tag.filter(|_| n != 0 && n < 1 << 40) {
        SIZES.put(t, tag | n, false);
    }
    n
}

/// Bytes a successful `H5Dread`/`H5Dwrite` moved: the selected points (the memory space's,
/// else the file space's, else the dataset's whole extent) times the memory type's size;
/// [`LAST`] when it holds these ids under the current generation.
#[inline(always)]
fn dataset_bytes(dset: Hid, mem_type: Hid, mem_space: Hid, file_space: Hid) -> u64 {
    let ids = [dset, mem_type, mem_space, file_space];
    // Read before the queries: a change meanwhile leaves the stored value unused.
    let gen = ANY_GEN.load(Ordering::Relaxed);
    if let Some(b) = LAST.get(ids, gen) {
        return b;
    }
    out_of_line(|| {
        let b = transfer_bytes(dset, mem_type, mem_space, file_space);
        if b != 0 {
            LAST.put(ids, gen, b);
        }
        b
    })
}

fn transfer_bytes(dset: Hid, mem_type: Hid, mem_space: Hid, file_space: Hid) -> u64 {
    let points = if mem_space > SPECIAL_SPACES {
        selected(mem_space)
    } else if file_space > SPECIAL_SPACES {
        selected(file_space)
    } else if file_space == 0 {
        extent(dset, R::H5Dget_space)
    } else {
        0
    };
    points.saturating_mul(type_size(mem_type))
}

// ---- recording ----

/// A static event: `vals` under `schema`'s keys, the file as `fhash`.
#[inline(always)]
fn record_static(
    busy: &crate::Busy,
    schema: &'static Schema,
    t0: u64,
    t1: u64,
    vals: &[u64],
    file: &FileHandle,
) {
    busy.record_static(schema, t0, t1, vals, file);
}

/// A generic event (open/create: with the object's name), from [`ticks`] `t0` to `t1`.
fn record_named(name: &str, t0: u64, t1: u64, args: &[Arg], file: &Interned) {
    let Some(pin) = file.file.pin() else { return };
    let mut all: [Arg; 5] = [Arg::int("", 0); 5];
    let mut n = 0;
    if metadata_on() {
        for a in args.iter().take(4) {
            all[n] = *a;
            n += 1;
        }
        all[n] = Arg::new("fhash", Value::Path(pin.path()));
        n += 1;
    }
    let (ts, dur) = ticks_span(t0, t1);
    dftracer_core::complete(Layer::Hdf5, name.as_bytes(), HDF5, ts, dur, &all[..n]);
}

macro_rules! schema {
    ($name:literal, [$($key:literal : $slot:ident),*]) => {{
        static S: Schema = Schema::new(
            Layer::Hdf5,
            $name,
            "HDF5",
            &[$(($key, Slot::$slot)),*],
            "fhash",
        );
        &S
    }};
}

/// The tail of every id-based hook: forwards at once when `id`'s file is not traced,
/// else times `$call` (outside any recording section: libhdf5's own POSIX calls are
/// traced), keeps `errno`, and runs `$record(ret, t0, t1, file)` inside a recording section.
macro_rules! on_id {
    ($id:expr, $call:expr, |$ret:ident, $t0:ident, $t1:ident, $file:ident, $busy:ident| $record:expr) => {
        on_id!($id, $call, |$ret, $t0, $t1, $file, $busy| $record, untraced: |r| r)
    };
    ($id:expr, $call:expr, |$ret:ident, $t0:ident, $t1:ident, $file:ident, $busy:ident| $record:expr,
     untraced: |$u:ident| $untraced:expr) => {{
        if !hdf5_on() {
            return $call;
        }
        match file_of($id) {
            None => {
                let $u = $call;
                $untraced
            }
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

macro_rules! real_or {
    ($r:ident : $ty:ty, $fail:expr) => {
        match real::<$ty>(R::$r) {
            Some(f) => f,
            None => return $fail,
        }
    };
}

// ---- files ----

type FcreateFn = unsafe extern "C" fn(*const c_char, c_uint, Hid, Hid) -> Hid;
type FopenFn = unsafe extern "C" fn(*const c_char, c_uint, Hid) -> Hid;

/// `H5Fcreate`/`H5Fopen`: traced when the path is; the new file id is cached with it.
unsafe fn file_open(
    name: &'static str,
    path: *const c_char,
    flags: c_uint,
    call: impl FnOnce() -> Hid,
) -> Hid {
    if !hdf5_on() {
        return call();
    }
    let pinned = {
        let _errno = SavedErrno::new();
        let Some(mut busy) = enter() else {
            return call();
        };
        let Some(bufs) = busy.scratch() else {
            return call();
        };
        // SAFETY: the program passed a C string (or NULL) to H5Fcreate/H5Fopen.
        match unsafe { super::traced_path(libc::AT_FDCWD, path, &mut bufs[0]) } {
            Some(p) => table::intern(p).ok_or(false),
            None => Err(true),
        }
    };
    let pinned = match pinned {
        Ok(p) => p,
        Err(untraced) => {
            let ret = call();
            if untraced && ret > 0 {
                store(ret, UNTRACED);
            }
            return ret;
        }
    };
    let t0 = ticks();
    let ret = call();
    let _errno = SavedErrno::new();
    let t1 = ticks();
    let file = Interned {
        file: pinned.handle(),
    };
    if let Some(_busy) = enter() {
        guarded(|| {
            record_named(
                name,
                t0,
                t1,
                &[
                    Arg::new("flags", Value::UInt(flags as u64)),
                    Arg::int("ret", ret),
                ],
                &file,
            )
        });
    }
    if ret > 0 {
        store(ret, table::park(pinned));
    }
    ret
}

pub unsafe extern "C" fn H5Fcreate(name: *const c_char, flags: c_uint, fcpl: Hid, fapl: Hid) -> Hid {
    let f = real_or!(H5Fcreate: FcreateFn, -1);
    file_open("H5Fcreate", name, flags, || f(name, flags, fcpl, fapl))
}

pub unsafe extern "C" fn H5Fopen(name: *const c_char, flags: c_uint, fapl: Hid) -> Hid {
    let f = real_or!(H5Fopen: FopenFn, -1);
    file_open("H5Fopen", name, flags, || f(name, flags, fapl))
}

/// A call on `id` returning a status, recorded with `ret`; `close` forgets the id after it.
macro_rules! status_hook {
    ($sym:ident, $name:literal, ($id:ident: Hid $(, $a:ident: $t:ty)*), close: $close:expr) => {
        status_hook!($sym => $sym, $name, ($id: Hid $(, $a: $t)*), close: $close);
    };
    ($sym:ident => $real:ident, $name:literal, ($id:ident: Hid $(, $a:ident: $t:ty)*), close: $close:expr) => {
        pub unsafe extern "C" fn $sym($id: Hid $(, $a: $t)*) -> Herr {
            type F = unsafe extern "C" fn(Hid $(, $t)*) -> Herr;
            let f = real_or!($real: F, -1);
            let ret = on_id!($id, f($id $(, $a)*), |ret, t0, t1, file, busy| {
                record_static(&busy, schema!($name, ["ret": Int]), t0, t1, &[ret as i64 as u64], &file.file)
            });
            if $close && ret >= 0 {
                forget($id);
            }
            ret
        }
    };
}

/// A call that may change what [`SIZES`] or [`EXTENTS`] hold: moves `$gen` first (whatever
/// the file), then forwards; no event.
macro_rules! invalidating_hook {
    ($sym:ident, ($($a:ident: $t:ty),*) -> $ret:ty, $gen:expr, $fail:expr) => {
        pub unsafe extern "C" fn $sym($($a: $t),*) -> $ret {
            type F = unsafe extern "C" fn($($t),*) -> $ret;
            let f = real_or!($sym: F, $fail);
            bump($gen);
            let r = f($($a),*);
            bump($gen);
            r
        }
    };
}

invalidating_hook!(H5Tset_size, (t: Hid, size: size_t) -> Herr, &TYPE_GEN, -1);
invalidating_hook!(H5Tset_precision, (t: Hid, prec: size_t) -> Herr, &TYPE_GEN, -1);
invalidating_hook!(H5Tset_offset, (t: Hid, offset: size_t) -> Herr, &TYPE_GEN, -1);
invalidating_hook!(H5Tpack, (t: Hid) -> Herr, &TYPE_GEN, -1);
invalidating_hook!(H5Dextend, (d: Hid, size: *const u64) -> Herr, &SPACE_GEN, -1);
invalidating_hook!(H5Drefresh, (d: Hid) -> Herr, &SPACE_GEN, -1);
invalidating_hook!(H5Sselect_hyperslab, (s: Hid, op: c_int, start: *const u64, stride: *const u64, count: *const u64, block: *const u64) -> Herr, &SELECT_GEN, -1);
invalidating_hook!(H5Sselect_elements, (s: Hid, op: c_int, n: size_t, coord: *const u64) -> Herr, &SELECT_GEN, -1);
invalidating_hook!(H5Sselect_all, (s: Hid) -> Herr, &SELECT_GEN, -1);
invalidating_hook!(H5Sselect_none, (s: Hid) -> Herr, &SELECT_GEN, -1);
invalidating_hook!(H5Sselect_copy, (dst: Hid, src: Hid) -> Herr, &SELECT_GEN, -1);
invalidating_hook!(H5Smodify_select, (s1: Hid, op: c_int, s2: Hid) -> Herr, &SELECT_GEN, -1);
invalidating_hook!(H5Sset_extent_simple, (s: Hid, rank: c_int, dims: *const u64, max: *const u64) -> Herr, &SELECT_GEN, -1);
invalidating_hook!(H5Sset_extent_none, (s: Hid) -> Herr, &SELECT_GEN, -1);
invalidating_hook!(H5Sextent_copy, (dst: Hid, src: Hid) -> Herr, &SELECT_GEN, -1);

/// `H5close`: every id may be handed out again after it (the library starts over when next
/// used), so every cache is emptied first.
pub unsafe extern "C" fn H5close() -> Herr {
    let f = real_or!(H5close: unsafe extern "C" fn() -> Herr, -1);
    for g in [&TYPE_GEN, &SPACE_GEN, &SELECT_GEN] {
        bump(g);
    }
    for id in FILES.keys() {
        forget(id);
    }
    f()
}

status_hook!(H5Fclose, "H5Fclose", (id: Hid), close: true);
status_hook!(H5Fflush, "H5Fflush", (id: Hid, scope: c_int), close: false);
/// `H5Dset_extent` changes the dataset's extent: [`EXTENTS`] moves on, traced or not.
pub unsafe extern "C" fn H5Dset_extent(id: Hid, size: *const u64) -> Herr {
    bump(&SPACE_GEN);
    let r = H5Dset_extent_traced(id, size);
    bump(&SPACE_GEN);
    r
}

status_hook!(H5Dset_extent_traced => H5Dset_extent, "H5Dset_extent", (id: Hid, size: *const u64), close: false);
status_hook!(H5Dclose, "H5Dclose", (id: Hid), close: true);
status_hook!(H5Gclose, "H5Gclose", (id: Hid), close: true);
status_hook!(H5Aclose, "H5Aclose", (id: Hid), close: true);
status_hook!(H5Oclose, "H5Oclose", (id: Hid), close: true);

/// A call on `loc` returning a new id (open, create), recorded with the object's name and
/// `ret`; the new id is cached with `loc`'s file.
macro_rules! open_hook {
    ($sym:ident, ($loc:ident: Hid $(, $a:ident: $t:ty)*), name: $nm:ident) => {
        pub unsafe extern "C" fn $sym($loc: Hid $(, $a: $t)*) -> Hid {
            type F = unsafe extern "C" fn(Hid $(, $t)*) -> Hid;
            let f = real_or!($sym: F, -1);
            on_id!($loc, f($loc $(, $a)*), |ret, t0, t1, file, _busy| {
                // SAFETY: the program passed a C string (or NULL) as the object's name.
                let nm = unsafe { super::c_bytes($nm) }.unwrap_or(b"");
                record_named(
                    stringify!($sym),
                    t0,
                    t1,
                    &[Arg::new("name", Value::Str(nm)), Arg::int("ret", ret)],
                    &file,
                );
                adopt(ret, &file)
            }, untraced: |ret| {
                // An object of a file that is not traced: its id need not be asked again.
                if ret > 0 {
                    store(ret, UNTRACED);
                }
                ret
            })
        }
    };
}

open_hook!(H5Dcreate2, (loc: Hid, name: *const c_char, t: Hid, space: Hid, lcpl: Hid, dcpl: Hid, dapl: Hid), name: name);
open_hook!(H5Dopen2, (loc: Hid, name: *const c_char, dapl: Hid), name: name);
open_hook!(H5Gcreate2, (loc: Hid, name: *const c_char, lcpl: Hid, gcpl: Hid, gapl: Hid), name: name);
open_hook!(H5Gopen2, (loc: Hid, name: *const c_char, gapl: Hid), name: name);
open_hook!(H5Oopen, (loc: Hid, name: *const c_char, lapl: Hid), name: name);
open_hook!(H5Acreate2, (loc: Hid, name: *const c_char, t: Hid, space: Hid, acpl: Hid, aapl: Hid), name: name);
open_hook!(H5Acreate_by_name, (loc: Hid, obj: *const c_char, name: *const c_char, t: Hid, space: Hid, acpl: Hid, aapl: Hid, lapl: Hid), name: name);
open_hook!(H5Aopen, (loc: Hid, name: *const c_char, aapl: Hid), name: name);
open_hook!(H5Aopen_by_name, (loc: Hid, obj: *const c_char, name: *const c_char, aapl: Hid, lapl: Hid), name: name);

// ---- transfers ----

type DxferFn = unsafe extern "C" fn(Hid, Hid, Hid, Hid, Hid, *mut c_void) -> Herr;
type AxferFn = unsafe extern "C" fn(Hid, Hid, *mut c_void) -> Herr;

pub unsafe extern "C" fn H5Dread(
    dset: Hid,
    mem_type: Hid,
    mem_space: Hid,
    file_space: Hid,
    dxpl: Hid,
    buf: *mut c_void,
) -> Herr {
    let f = real_or!(H5Dread: DxferFn, -1);
    on_id!(dset, f(dset, mem_type, mem_space, file_space, dxpl, buf), |ret, t0, t1, file, busy| {
        let size = if ret >= 0 { dataset_bytes(dset, mem_type, mem_space, file_space) } else { 0 };
        record_static(&busy, schema!("H5Dread", ["size": UInt, "ret": Int]), t0, t1, &[size, ret as i64 as u64], &file.file)
    })
}

pub unsafe extern "C" fn H5Dwrite(
    dset: Hid,
    mem_type: Hid,
    mem_space: Hid,
    file_space: Hid,
    dxpl: Hid,
    buf: *const c_void,
) -> Herr {
    let f = real_or!(H5Dwrite: DxferFn, -1);
    on_id!(dset, f(dset, mem_type, mem_space, file_space, dxpl, buf as *mut c_void), |ret, t0, t1, file, busy| {
        let size = if ret >= 0 { dataset_bytes(dset, mem_type, mem_space, file_space) } else { 0 };
        record_static(&busy, schema!("H5Dwrite", ["size": UInt, "ret": Int]), t0, t1, &[size, ret as i64 as u64], &file.file)
    })
}

pub unsafe extern "C" fn H5Aread(attr: Hid, mem_type: Hid, buf: *mut c_void) -> Herr {
    let f = real_or!(H5Aread: AxferFn, -1);
    on_id!(attr, f(attr, mem_type, buf), |ret, t0, t1, file, busy| {
        let size = if ret >= 0 { extent(attr, R::H5Aget_space).saturating_mul(type_size(mem_type)) } else { 0 };
        record_static(&busy, schema!("H5Aread", ["size": UInt, "ret": Int]), t0, t1, &[size, ret as i64 as u64], &file.file)
    })
}

pub unsafe extern "C" fn H5Awrite(attr: Hid, mem_type: Hid, buf: *const c_void) -> Herr {
    let f = real_or!(H5Awrite: AxferFn, -1);
    on_id!(attr, f(attr, mem_type, buf as *mut c_void), |ret, t0, t1, file, busy| {
        let size = if ret >= 0 { extent(attr, R::H5Aget_space).saturating_mul(type_size(mem_type)) } else { 0 };
        record_static(&busy, schema!("H5Awrite", ["size": UInt, "ret": Int]), t0, t1, &[size, ret as i64 as u64], &file.file)
    })
}
