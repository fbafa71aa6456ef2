//! Open regions of the C/C++ API (`initialize_region` ... `finalize_region`).
//!
//! A region is a [`RegionCell`] whose first field is the C `struct DFTracerData`; the pointer handed
//! to C is the cell's address. Cells live in chunks that are allocated on demand and never
//! freed, and are recycled through a lock-free free list, so:
//!
//! - **any pointer is safe to pass back**: [`lookup`] only compares addresses against the
//!   chunks' ranges before it touches memory, so NULL, a stack address or a pointer that was
//!   never a region is ignored, never dereferenced;
//! - **a region ends once**: `finalize_region` moves the cell `LIVE -> BUSY` with a CAS; a
//!   second `finalize_region` of the same pointer (or one racing it) finds it not live and
//!   does nothing (if the cell was already reused by a new region, that region is ended: the
//!   same as a reuse by `malloc`, without the crash);
//! - **no lock** anywhere (a region begin or end never waits for another thread, and a `fork`
//!   child cannot inherit a held lock); begin and end cost a CAS each, plus an allocation only
//!   while a cell's text buffer grows past what earlier regions of that cell needed.
//!
//! Memory: cells are never returned to the allocator; their number is the largest number of
//! regions open at once. Each region keeps its name, category and args (keys and string values
//! clipped to the core's limits, at most [`MAX_REGION_ARGS`] distinct keys; the same key again
//! replaces the value, as in the reference).
#![allow(unsafe_code)]

use std::cell::{Cell, UnsafeCell};

use crate::sites::MAX_KEYED;
use std::sync::atomic::{
    compiler_fence, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

use libc::{c_char, c_int};

use dftracer_core::frontend::{MAX_KEY, MAX_STR};
use dftracer_core::{Arg, Layer, Schema, Value};

/// The C `struct DFTracerData { void *profiler; }` (its field points at the cell itself).
#[repr(C)]
pub struct DFTracerData {
    pub profiler: *mut std::ffi::c_void,
}

/// Distinct arg keys kept per region (the core writes 32 and counts the rest as dropped).
pub const MAX_REGION_ARGS: usize = 64;
/// A cell's text buffer is given back to the allocator above this size when it is reused.
const TEXT_KEEP: usize = 64 * 1024;

const FREE: u8 = 0;
const LIVE: u8 = 1;
const BUSY: u8 = 2;

/// Cells in chunk 0; chunk `k` holds `BASE << k`.
const BASE: usize = 64;
const CHUNKS: usize = 24;
static CHUNK: [AtomicPtr<RegionCell>; CHUNKS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; CHUNKS];
/// Free-list head: (tag << 32) | (index + 1); 0 in the low half is the empty list. The tag,
/// bumped by every change, makes a stale compare-and-swap fail (no ABA).
static HEAD: AtomicU64 = AtomicU64::new(0);

#[repr(C)]
pub struct RegionCell {
    /// What C sees; must stay the first field (the C pointer is the cell's address).
    data: DFTracerData,
    state: AtomicU8,
    /// 0: a shared region (any thread may end it: `state` moves by compare-and-swap). Else
    /// the region was begun by our header's macros ([`begin_scoped`]) and belongs to the
    /// thread whose free-cell block has this address: only that thread reads or changes it,
    /// with plain loads and stores.
    owner: AtomicUsize,
    /// Free-list link: index + 1 of the next free cell, 0 at the end.
    next: AtomicU32,
    body: UnsafeCell<Region>,
}

// SAFETY: `body` is only touched by the one thread that moved `state` to BUSY (or that popped
// the cell off the free list, before publishing it as LIVE); `data.profiler` is written once,
// before the chunk is published, and only read afterwards.
unsafe impl Sync for RegionCell {}

enum ArgVal {
    Int(i64),
    Str(u32, u32),
}

struct RegionArg {
    key: (u32, u32),
    val: ArgVal,
}

/// One open region: where it started and what it will write.
pub struct Region {
    pub layer: Layer,
    /// `DF_METADATA_EVENT`: written as a `CM` record (name = key, cat = value).
    pub meta: bool,
    /// The start: a raw clock read (`dftracer_core::frontend::ticks`), converted when the
    /// region's event is recorded.
    pub ts: u64,
    text: Vec<u8>,
    name: (u32, u32),
    cat: (u32, u32),
    args: Vec<RegionArg>,
    /// The interned schema of this name and category when the call site's strings were known
    /// ([`crate::sites::site_schema`]): then `name` and `cat` are not copied into `text`.
    pub schema: Option<&'static Schema>,
}

impl Region {
    const fn empty() -> Region {
        Region {
            layer: Layer::CApp,
            meta: false,
            ts: 0,
            text: Vec::new(),
            name: (0, 0),
            cat: (0, 0),
            args: Vec::new(),
            schema: None,
        }
    }

    fn push_text(&mut self, s: &[u8], max: usize) -> (u32, u32) {
        // One byte over the limit is kept so that the core still sees the string as
        // over-long and writes its truncation marker.
        let s = &s[..s.len().min(max + 1)];
        let start = self.text.len() as u32;
        self.text.extend_from_slice(s);
        (start, s.len() as u32)
    }

    fn text(&self, r: (u32, u32)) -> &[u8] {
        &self.text[r.0 as usize..(r.0 + r.1) as usize]
    }

    pub fn name(&self) -> &[u8] {
        match self.schema {
            Some(s) => s.name().as_bytes(),
            None => self.text(self.name),
        }
    }

    pub fn cat(&self) -> &[u8] {
        match self.schema {
            Some(s) => s.cat().as_bytes(),
            None => self.text(self.cat),
        }
    }

    /// No arg was added.
    pub fn args_empty(&self) -> bool {
        self.args.is_empty()
    }

    /// Adds an int arg (replacing an earlier value of the same key).
    pub fn set_int(&mut self, key: &[u8], v: i64) {
        self.set(key, |_| ArgVal::Int(v));
    }

    /// Adds a string arg (replacing an earlier value of the same key).
    pub fn set_str(&mut self, key: &[u8], v: &[u8]) {
        self.set(key, |r| {
            let (s, n) = r.push_text(v, MAX_STR);
            ArgVal::Str(s, n)
        });
    }

    fn set(&mut self, key: &[u8], val: impl FnOnce(&mut Region) -> ArgVal) {
        let key = &key[..key.len().min(MAX_KEY + 1)];
        let pos = self.args.iter().position(|a| self.text(a.key) == key);
        match pos {
            Some(i) => {
                let v = val(self);
                self.args[i].val = v;
            }
            None if self.args.len() < MAX_REGION_ARGS => {
                let k = self.push_text(key, MAX_KEY);
                let v = val(self);
                self.args.push(RegionArg { key: k, val: v });
            }
            None => {}
        }
    }

    /// When the region has a schema and its args are all integers (two `_UPDATE_INT`s, as in
    /// most annotated loops): the schema of those keys (the core's keyed schema, found through
    /// [`crate::sites::keyed_schema`]) and the values to record with it.
    pub fn keyed(&self) -> Option<(&'static Schema, [u64; MAX_KEYED], usize)> {
        let base = self.schema?;
        let n = self.args.len();
        if n == 0 || n > MAX_KEYED {
            return None;
        }
        let mut vals = [0u64; MAX_KEYED];
        for (v, a) in vals.iter_mut().zip(&self.args) {
            match a.val {
                ArgVal::Int(i) => *v = i as u64,
                ArgVal::Str(..) => return None,
            }
        }
        let mut keys: [&[u8]; MAX_KEYED] = [b""; MAX_KEYED];
        for (k, a) in keys.iter_mut().zip(&self.args) {
            *k = self.text(a.key);
        }
        crate::sites::keyed_schema(base, &keys[..n]).map(|s| (s, vals, n))
    }

    /// Calls `f` with the region's args as the core takes them (on the stack up to
    /// [`INLINE_ARGS`]; more, which is rare, in a short-lived `Vec`).
    pub fn with_args<R>(&self, f: impl FnOnce(&[Arg]) -> R) -> R {
        let arg = |a: &RegionArg| Arg {
            key: self.text(a.key),
            value: match a.val {
                ArgVal::Int(v) => Value::Int(v),
                ArgVal::Str(s, n) => Value::Str(self.text((s, n))),
            },
        };
        if self.args.len() <= INLINE_ARGS {
            let mut out = [Arg {
                key: b"",
                value: Value::Int(0),
            }; INLINE_ARGS];
            for (o, a) in out.iter_mut().zip(&self.args) {
                *o = arg(a);
            }
            f(&out[..self.args.len()])
        } else {
            f(&self.args.iter().map(arg).collect::<Vec<_>>())
        }
    }
}

/// Region args are kept: 0 not known yet, 1 no (`DFTRACER_INC_METADATA=0`), 2 yes.
static ARGS: AtomicU8 = AtomicU8::new(0);

/// The bytes of C string `p`, at most `max + 1` of them (`None` for NULL).
pub(crate) fn c_str<'a>(p: *const c_char, max: usize) -> Option<&'a [u8]> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller passed a NUL-terminated string (the C API's contract); strnlen reads
    // no further than its NUL or `max + 1` bytes.
    unsafe {
        let n = libc::strnlen(p, max + 1);
        Some(std::slice::from_raw_parts(p as *const u8, n))
    }
}

/// Region args are recorded (the core's `metadata` setting), read once.
pub(crate) fn args_on() -> bool {
    match ARGS.load(Ordering::Relaxed) {
        0 => {
            let on = match dftracer_core::config() {
                Some(c) => c.metadata,
                None => true,
            };
            ARGS.store(if on { 2 } else { 1 }, Ordering::Relaxed);
            on
        }
        v => v == 2,
    }
}

/// The layer of a `TraceEventType` value (out of range: `UNKNOWN`, as the reference's
/// `convert`).
pub(crate) fn layer_of(trace_type: c_int) -> Layer {
    match u8::try_from(trace_type) {
        Ok(t) => Layer::from_u8(t),
        Err(_) => Layer::Unknown,
    }
}

/// Args handed to the core from the stack (a 64-entry array cost ~400 instructions to fill).
const INLINE_ARGS: usize = 8;
fn chunk_len(k: usize) -> usize {
    BASE << k
}

/// First global index of chunk `k`.
fn chunk_start(k: usize) -> usize {
    BASE * ((1 << k) - 1)
}

fn cell(index: usize) -> &'static RegionCell {
    let k = (index / BASE + 1).ilog2() as usize;
    let p = CHUNK[k].load(Ordering::Acquire);
    debug_assert!(!p.is_null());
    // SAFETY: indices on the free list (and returned by `grow`) belong to published chunks,
    // which are never freed; `index - chunk_start(k)` is below `chunk_len(k)` by construction.
    unsafe { &*p.add(index - chunk_start(k)) }
}

/// The cell behind a C pointer, if it is one (address checks only: `p` is not read).
pub fn lookup(p: *const DFTracerData) -> Option<(usize, &'static RegionCell)> {
    let addr = p as usize;
    let size = std::mem::size_of::<RegionCell>();
    for (k, chunk) in CHUNK.iter().enumerate() {
        let base = chunk.load(Ordering::Acquire);
        if base.is_null() {
            break; // chunks are published in order
        }
        let b = base as usize;
        let i = addr.wrapping_sub(b) / size;
        if addr >= b && i < chunk_len(k) && b + i * size == addr {
            // SAFETY: in range of a published, never-freed chunk, on a cell boundary.
            return Some((chunk_start(k) + i, unsafe { &*base.add(i) }));
        }
    }
    None
}

fn push(index: usize) {
    let s = cell(index);
    let mut h = HEAD.load(Ordering::Relaxed);
    loop {
        s.next.store(h as u32, Ordering::Relaxed);
        let nh = (((h >> 32) + 1) << 32) | (index as u64 + 1);
        match HEAD.compare_exchange_weak(h, nh, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return,
            Err(cur) => h = cur,
        }
    }
}

fn pop() -> Option<usize> {
    let mut h = HEAD.load(Ordering::Acquire);
    loop {
        let top = h as u32;
        if top == 0 {
            return grow();
        }
        // A cell's `next` may be rewritten by a thread that popped and pushed it meanwhile:
        // then the tag has moved and the exchange below fails.
        let next = cell(top as usize - 1).next.load(Ordering::Relaxed);
        let nh = (((h >> 32) + 1) << 32) | next as u64;
        match HEAD.compare_exchange_weak(h, nh, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => return Some(top as usize - 1),
            Err(cur) => h = cur,
        }
    }
}

/// Publishes the next chunk and returns its first cell (the others go on the free list).
fn grow() -> Option<usize> {
    for (k, chunk) in CHUNK.iter().enumerate() {
        if !chunk.load(Ordering::Acquire).is_null() {
            continue;
        }
        let mut v: Vec<RegionCell> = (0..chunk_len(k))
            .map(|_| RegionCell {
                data: DFTracerData {
                    profiler: std::ptr::null_mut(),
                },
                state: AtomicU8::new(FREE),
                owner: AtomicUsize::new(0),
                next: AtomicU32::new(0),
                body: UnsafeCell::new(Region::empty()),
            })
            .collect();
        for s in v.iter_mut() {
            s.data.profiler = s as *mut RegionCell as *mut std::ffi::c_void;
        }
        let p = Box::into_raw(v.into_boxed_slice()) as *mut RegionCell;
        match chunk.compare_exchange(std::ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                let first = chunk_start(k);
                for i in 1..chunk_len(k) {
                    push(first + i);
                }
                return Some(first);
            }
            Err(_) => {
                // Another thread published chunk k first: ours was never shared.
                // SAFETY: `p` came from `Box::into_raw` of a slice of this length just above.
                drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, chunk_len(k))) });
                return pop();
            }
        }
    }
    None
}

/// Free cells this thread keeps for itself: taken and given back without a compare-and-swap
/// (the shared list's two per region were a third of a region's cost). A signal handler that
/// interrupts this thread while it is in here finds `busy` set and uses the shared list; the
/// cells go back to the shared list when the thread ends.
struct LocalFree {
    busy: Cell<bool>,
    n: Cell<usize>,
    idx: [Cell<u32>; LOCAL_FREE],
}

const LOCAL_FREE: usize = 16;

impl LocalFree {
    /// This thread's owner token for its scoped regions (nonzero, unique among live threads).
    fn token(&self) -> usize {
        self as *const LocalFree as usize
    }

    fn pop(&self) -> Option<usize> {
        let n = self.n.get();
        (n > 0).then(|| {
            self.n.set(n - 1);
            self.idx[n - 1].get() as usize
        })
    }

    /// Keeps `index`; false when full.
    fn push(&self, index: usize) -> bool {
        let n = self.n.get();
        if n < LOCAL_FREE {
            self.idx[n].set(index as u32);
            self.n.set(n + 1);
        }
        n < LOCAL_FREE
    }
}

impl Drop for LocalFree {
    fn drop(&mut self) {
        for i in 0..self.n.get() {
            push(self.idx[i].get() as usize);
        }
        self.n.set(0);
    }
}

thread_local! {
    static FREE_CELLS: LocalFree = const {
        LocalFree {
            busy: Cell::new(false),
            n: Cell::new(0),
            idx: [const { Cell::new(0) }; LOCAL_FREE],
        }
    };
}

/// Runs `f` on this thread's free cells, unless they are in use further down this thread's
/// stack (a signal handler) or already gone (thread exit).
#[inline]
fn with_local_free<R>(f: impl FnOnce(&LocalFree) -> R) -> Option<R> {
    FREE_CELLS
        .try_with(|l| {
            if l.busy.get() {
                return None;
            }
            l.busy.set(true);
            compiler_fence(Ordering::SeqCst);
            let r = f(l);
            compiler_fence(Ordering::SeqCst);
            l.busy.set(false);
            Some(r)
        })
        .ok()
        .flatten()
}

/// A free cell: this thread's own first, else the shared list's.
#[inline]
fn take() -> Option<usize> {
    with_local_free(LocalFree::pop).flatten().or_else(pop)
}

/// Gives a cell back: to this thread's own cells while there is room, else the shared list.
#[inline]
fn give(index: usize) {
    if with_local_free(|l| l.push(index)) != Some(true) {
        push(index);
    }
}

/// Opens a region; `None` only when 2^30 regions are already open. With `schema` (the
/// interned schema of this name and category), `name` and `cat` are not copied.
#[inline]
pub fn begin(
    layer: Layer,
    meta: bool,
    name: &[u8],
    cat: &[u8],
    ts: u64,
    schema: Option<&'static Schema>,
) -> Option<*mut DFTracerData> {
    let index = take()?;
    Some(fill(index, 0, layer, meta, name, cat, ts, schema))
}

/// [`begin`] for a region of our header's macros, which the same thread ends at the end of
/// the same scope: the cell belongs to this thread, and ending it takes no compare-and-swap.
/// Inside a signal handler that interrupted this thread's own region work (or without
/// thread-local storage) the region is a shared one.
#[inline]
pub fn begin_scoped(
    layer: Layer,
    name: &[u8],
    cat: &[u8],
    ts: u64,
    schema: Option<&'static Schema>,
) -> Option<*mut DFTracerData> {
    let own = with_local_free(|l| {
        let index = l.pop().or_else(pop)?;
        Some(fill(index, l.token(), layer, false, name, cat, ts, schema))
    });
    match own {
        Some(p) => p,
        None => begin(layer, false, name, cat, ts, schema),
    }
}

#[inline]
#[allow(clippy::too_many_arguments)]
fn fill(
    index: usize,
    owner: usize,
    layer: Layer,
    meta: bool,
    name: &[u8],
    cat: &[u8],
    ts: u64,
    schema: Option<&'static Schema>,
) -> *mut DFTracerData {
    let s = cell(index);
    // SAFETY: the cell was just taken off a free list, so no other thread refers to its body
    // (a stale C pointer to it fails `lookup`'s LIVE check until the store below).
    let r = unsafe { &mut *s.body.get() };
    if !r.text.is_empty() {
        if r.text.capacity() > TEXT_KEEP {
            r.text = Vec::new();
        }
        r.text.clear();
    }
    r.args.clear();
    r.layer = layer;
    r.meta = meta;
    r.ts = ts;
    r.schema = schema;
    if schema.is_none() {
        r.name = r.push_text(name, MAX_STR);
        r.cat = r.push_text(cat, MAX_STR);
    }
    s.owner.store(owner, Ordering::Relaxed);
    s.state.store(LIVE, Ordering::Release);
    &s.data as *const DFTracerData as *mut DFTracerData
}

/// Runs `f` on a live region (ignored when `p` is not one, or is a scoped region of another
/// thread).
pub fn with_live(p: *const DFTracerData, f: impl FnOnce(&mut Region)) {
    let Some((_, s)) = lookup(p) else { return };
    if s.owner.load(Ordering::Relaxed) != 0 {
        with_local_free(|l| {
            // Only the owner reads the body; `state` is this thread's own too.
            if s.owner.load(Ordering::Relaxed) == l.token()
                && s.state.load(Ordering::Relaxed) == LIVE
            {
                // SAFETY: a scoped region's body is touched by its owner thread only, and
                // this thread's region work is not re-entered (`busy`).
                f(unsafe { &mut *s.body.get() });
            }
        });
        return;
    }
    if s.state
        .compare_exchange(LIVE, BUSY, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    // SAFETY: this thread moved the cell to BUSY: it has the body to itself until it stores
    // LIVE again.
    f(unsafe { &mut *s.body.get() });
    s.state.store(LIVE, Ordering::Release);
}

/// Ends a live region: `f` sees it one last time, then the cell is recycled. Returns false
/// when `p` is not a live region, or is a scoped region of another thread (its owner's
/// scope end records it).
pub fn end(p: *const DFTracerData, f: impl FnOnce(&Region)) -> bool {
    let Some((index, s)) = lookup(p) else {
        return false;
    };
    if s.owner.load(Ordering::Relaxed) != 0 {
        return with_local_free(|l| {
            if s.owner.load(Ordering::Relaxed) != l.token()
                || s.state.load(Ordering::Relaxed) != LIVE
            {
                return false;
            }
            // SAFETY: as in `with_live`'s scoped branch.
            f(unsafe { &*s.body.get() });
            s.owner.store(0, Ordering::Relaxed);
            s.state.store(FREE, Ordering::Release);
            if !l.push(index) {
                push(index);
            }
            true
        })
        .unwrap_or(false);
    }
    if s.state
        .compare_exchange(LIVE, BUSY, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        return false;
    }
    // SAFETY: BUSY, as in `with_live`.
    f(unsafe { &*s.body.get() });
    s.state.store(FREE, Ordering::Release);
    give(index);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests share the process's cells, which are reused once ended: a test's ended
    /// handle may name another test's new region, so they run one at a time.
    fn serial() -> std::sync::MutexGuard<'static, ()> {
        static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn begin_update_end_and_double_end() {
        let _serial = serial();
        let p = begin(Layer::CApp, false, b"n", b"C_APP", 5, None).unwrap();
        with_live(p, |r| {
            r.set_int(b"a", 1);
            r.set_str(b"b", b"x");
            r.set_int(b"a", 2);
        });
        let mut seen = Vec::new();
        assert!(end(p, |r| {
            assert_eq!(r.name(), b"n");
            assert_eq!(r.cat(), b"C_APP");
            r.with_args(|a| {
                seen = a
                    .iter()
                    .map(|a| (a.key.to_vec(), a.value.to_owned_string()))
                    .collect()
            });
        }));
        assert_eq!(
            seen,
            vec![
                (b"a".to_vec(), "2".to_string()),
                (b"b".to_vec(), "x".to_string())
            ]
        );
        assert!(!end(p, |_| panic!("ended twice")));
        with_live(p, |_| panic!("updated after end"));
    }

    #[test]
    fn a_scoped_region_is_its_threads_own() {
        let _serial = serial();
        let p = begin_scoped(Layer::CApp, b"n", b"C_APP", 7, None).unwrap() as usize;
        // Another thread can neither update nor end it.
        std::thread::spawn(move || {
            let p = p as *const DFTracerData;
            with_live(p, |_| panic!("updated from another thread"));
            assert!(!end(p, |_| panic!("ended from another thread")));
        })
        .join()
        .unwrap();
        let p = p as *const DFTracerData;
        with_live(p, |r| r.set_int(b"k", 1));
        assert!(end(p, |r| {
            assert_eq!((r.name(), r.cat(), r.ts), (&b"n"[..], &b"C_APP"[..], 7));
            assert!(!r.args_empty());
        }));
        assert!(!end(p, |_| panic!("ended twice")));
        // Its cell is reused, as a shared region too, and ends once.
        let q = begin(Layer::CApp, false, b"m", b"c", 0, None).unwrap();
        let q2 = begin_scoped(Layer::CApp, b"o", b"c", 0, None).unwrap();
        assert!(end(q, |r| assert_eq!(r.name(), b"m")));
        assert!(end(q2, |r| assert_eq!(r.name(), b"o")));
        assert!(!end(q2, |_| panic!("ended twice")));
    }

    #[test]
    fn many_args_beyond_the_inline_array_and_the_cap() {
        let _serial = serial();
        let p = begin(Layer::CApp, false, b"n", b"c", 0, None).unwrap();
        with_live(p, |r| {
            for i in 0..MAX_REGION_ARGS + 5 {
                r.set_int(format!("k{i}").as_bytes(), i as i64);
            }
        });
        assert!(end(p, |r| r.with_args(|a| {
            assert_eq!(a.len(), MAX_REGION_ARGS);
            assert_eq!(a[INLINE_ARGS].key, format!("k{INLINE_ARGS}").as_bytes());
            assert_eq!(
                a[MAX_REGION_ARGS - 1].value,
                Value::Int(MAX_REGION_ARGS as i64 - 1)
            );
        })));
    }

    #[test]
    fn foreign_pointers_are_ignored() {
        let _serial = serial();
        let x = 0u64;
        let stack = &x as *const u64 as *const DFTracerData;
        assert!(lookup(std::ptr::null()).is_none());
        assert!(lookup(stack).is_none());
        assert!(!end(stack, |_| panic!()));
        let p = begin(Layer::CApp, false, b"n", b"c", 0, None).unwrap();
        let inside = (p as usize + 1) as *const DFTracerData;
        assert!(lookup(inside).is_none(), "not on a cell boundary");
        assert!(end(p, |_| {}));
    }

    #[test]
    fn many_threads_many_regions() {
        let _serial = serial();
        let hs: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut open = Vec::new();
                    for i in 0..2000u64 {
                        let p = if i % 2 == 0 {
                            begin(Layer::CppApp, false, b"r", b"c", i, None)
                        } else {
                            begin_scoped(Layer::CppApp, b"r", b"c", i, None)
                        };
                        open.push(p.unwrap() as usize);
                        if i % 3 == 0 {
                            let p = open.swap_remove(0) as *const DFTracerData;
                            assert!(end(p, |r| assert_eq!(r.name(), b"r")));
                        }
                    }
                    for p in open {
                        assert!(end(p as *const DFTracerData, |_| {}));
                    }
                    t
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }

    trait Show {
        fn to_owned_string(&self) -> String;
    }
    impl Show for Value<'_> {
        fn to_owned_string(&self) -> String {
            match self {
                Value::Int(v) => v.to_string(),
                Value::Str(s) => String::from_utf8_lossy(s).into_owned(),
                _ => unreachable!(),
            }
        }
    }
}
