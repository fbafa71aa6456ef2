//! The producer side: the hot path that pushes records into this thread's ring. A full ring
//! goes to the writer through one door ([`writer::hand_over`]), an orphan's record through
//! another ([`writer::encode_orphan`]).

use super::{is_finalized, shared, writer, Section, PHASE, PHASE_RUNNING, STATE, UNIT};
use crate::config::TimeMetric;
use crate::event::Layer;
use crate::record::{static_len, write_mixed, write_static, Pending, RAW_TIMES, STATIC_HEAD};
use crate::ring::Ring;
use crate::sys;
use std::cell::Cell;
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Everything the hot path needs of this thread, in one thread-local without a destructor:
/// one TLS access per event (the preload library is a cdylib, so every distinct Rust
/// thread-local costs a `__tls_get_addr` call), no lazy-registration check, and it stays
/// readable while the thread's other thread-locals are torn down (glibc runs the main
/// thread's TLS destructors before `atexit` handlers, which still do I/O).
///
/// The thread's strong count of its ring is released by [`RELEASE`]'s destructor, which is
/// registered when the ring is attached; after it ran, `dead` sends events to
/// [`record_orphan`].
pub(super) struct Local {
    pub(super) ring: Cell<*const Ring>,
    /// The `STATE` the ring was attached under; equal to an enabled (odd) `STATE` only
    /// while `ring` is attached (0 before and after).
    pub(super) gen: Cell<u64>,
    /// [`INTERNAL`] | [`BUSY`]: one byte, so that [`enter_hook`] checks both with one
    /// comparison.
    flags: Cell<u8>,
    /// [`RAW_TIMES`] | the unit's code: the times byte of this thread's records of raw
    /// [`ticks`], set when the ring is attached (after `init` stored the unit, which never
    /// changes after).
    raw_times: Cell<u8>,
    /// [`RELEASE`] ran: the ring is gone for good on this thread.
    dead: Cell<bool>,
}

/// [`Local::flags`]: the tracer's own thread, or an application thread inside one of its
/// sections: I/O passes straight through the interposers (see [`super::is_internal`]).
const INTERNAL: u8 = 1;
/// [`Local::flags`]: a frontend's recording section is open on this thread (see
/// [`enter_hook`]).
const BUSY: u8 = 2;

impl Local {
    /// Whether this thread's I/O is the tracer's own.
    #[inline(always)]
    pub(super) fn internal(&self) -> bool {
        self.flags.get() & INTERNAL != 0
    }

    /// Marks this thread's I/O as the tracer's own (or not); returns what it was.
    pub(super) fn set_internal(&self, on: bool) -> bool {
        let f = self.flags.get();
        self.flags
            .set(if on { f | INTERNAL } else { f & !INTERNAL });
        f & INTERNAL != 0
    }
}

/// Drops the thread's ring at thread exit (registered in [`attach`], off the hot path).
struct Release;

impl Drop for Release {
    fn drop(&mut self) {
        let _ = LOCAL.try_with(|l| {
            l.dead.set(true);
            // The generation first: `gen == STATE` says the ring is attached (the hot path
            // then reads the pointer without testing it).
            l.gen.set(0);
            let r = l.ring.replace(ptr::null());
            if !r.is_null() {
                // SAFETY: `r` came from Arc::into_raw in attach and is released exactly once
                // here (the pointer is nulled first; `dead` keeps attach from setting another).
                let ring = unsafe { Arc::from_raw(r) };
                ring.closed.store(true, Ordering::Release);
            }
        });
    }
}

thread_local! {
    pub(super) static LOCAL: Local = const {
        Local {
            ring: Cell::new(ptr::null()),
            // Never an enabled STATE (odd): no ring yet.
            gen: Cell::new(0),
            flags: Cell::new(0),
            raw_times: Cell::new(0),
            dead: Cell::new(false),
        }
    };
    static RELEASE: Release = const { Release };
}

/// An open recording section of a frontend's hook on this thread (at most one at a time):
/// from [`enter_hook`] to its drop. It also carries the thread's state, so that the event
/// it records needs no further thread-local access. Not `Send`: it names this thread's state.
pub struct Hook {
    local: *const Local,
}

/// [`LOCAL`]'s offset from the thread pointer when this object's thread-locals live in the
/// static TLS block, else 0 (not known: [`LOCAL`] is reached through `__tls_get_addr`).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
static LOCAL_OFFSET: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

/// The calling thread's pointer (`%fs:0`, the thread control block's own address, which
/// glibc's `pthread_self` returns too): one load. The preload's `errno` and path buffers
/// are found from it as well.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline(always)]
pub fn thread_pointer() -> usize {
    let v: usize;
    // SAFETY: on x86-64 Linux %fs:0 holds the thread control block's own address; the load
    // changes nothing but `v`.
    unsafe {
        std::arch::asm!("mov {v}, qword ptr fs:[0]", v = out(reg) v,
                        options(nostack, readonly, preserves_flags))
    };
    v
}

/// Tells the core that the object it is linked into was loaded with the program (an
/// `LD_PRELOAD` library, or a `DT_NEEDED` of the program: before libc in the link map), so
/// that its thread-locals live in the static TLS block, at one offset from every thread's
/// pointer (glibc places every object loaded at start-up there; x86-64's TLS variant II, the
/// layout libc's own `errno` relies on). [`LOCAL`] is then found with one load and an add
/// instead of a `__tls_get_addr` call (a cdylib's thread-locals use the general-dynamic
/// model): every hook's first step. Never call it from an object that may have been
/// `dlopen`ed (its TLS block is then allocated per thread, anywhere).
pub fn tls_is_static() {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    if let Ok(l) = LOCAL.try_with(|l| l as *const Local as usize) {
        let off = l.wrapping_sub(thread_pointer()) as isize;
        LOCAL_OFFSET.store(off, Ordering::Relaxed);
    }
}

/// This thread's [`LOCAL`], by address: from the thread pointer when [`tls_is_static`] said
/// so, else through the thread-local's own access (`None` once it is gone; a thread-local
/// without a destructor never is).
#[inline(always)]
fn local_ptr() -> Option<*const Local> {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let off = LOCAL_OFFSET.load(Ordering::Relaxed);
        if off != 0 {
            return Some(thread_pointer().wrapping_add_signed(off) as *const Local);
        }
    }
    // The thread's state by address (a closure of one instruction, always inlined, where a
    // closure doing the work is a function of its own at every call site beyond the first).
    LOCAL.try_with(|l| l as *const Local).ok()
}

/// Opens a recording section for a frontend's hook: `None` when the call must pass straight
/// through (a tracer thread or section, a section already open on this thread, e.g. a hook
/// reached from inside another one or from a signal handler that interrupted it).
#[inline]
pub fn enter_hook() -> Option<Hook> {
    // SAFETY: this thread's LOCAL (see `local_ptr`), a thread-local without a destructor: it
    // lives as long as the thread.
    let l = unsafe { &*local_ptr()? };
    if l.flags.get() != 0 {
        None
    } else {
        l.flags.set(BUSY);
        Some(Hook { local: l })
    }
}

/// True when a recording section is open on this thread (or thread-local state is gone).
#[inline]
pub fn hook_busy() -> bool {
    LOCAL
        .try_with(|l| l.flags.get() & BUSY != 0)
        .unwrap_or(true)
}

impl Hook {
    #[inline(always)]
    fn local(&self) -> &Local {
        // SAFETY: `local` is this thread's LOCAL (a Hook is not Send); a thread-local without
        // a destructor lives as long as its thread.
        unsafe { &*self.local }
    }

    /// As [`Hook::complete_static`], for an event from [`ticks`] `t0` to `t1`: the times are
    /// converted by the writer, so the hook's clock reads are [`crate::clock::ticks`] (a raw
    /// counter read) rather than [`now`]'s conversions.
    ///
    /// The values by value (an array whose length is a constant of the caller) or by
    /// reference: by value, the copy the cold path needs is made only when it is taken,
    /// not before the hot path's test (a slice had the values stored on the stack first).
    #[inline(always)]
    pub fn complete_ticks<V: Vals>(
        &self,
        schema: &'static crate::Schema,
        t0: u64,
        t1: u64,
        vals: V,
        file: Option<crate::files::FileHandle>,
    ) {
        record_ticks_in(self.local(), schema, t0, t1, vals, file);
    }

    /// As [`complete_static`], without looking up this thread's state again.
    #[inline(always)]
    pub fn complete_static(
        &self,
        schema: &'static crate::Schema,
        ts: u64,
        dur: u64,
        vals: &[u64],
        file: Option<crate::files::FileHandle>,
    ) {
        let s = STATE.load(Ordering::Relaxed);
        if s & 1 == 0 {
            return;
        }
        record_static_in(self.local(), s, schema, ts, dur, vals, file, Times::Unit);
    }
}

impl Drop for Hook {
    #[inline]
    fn drop(&mut self) {
        let l = self.local();
        l.flags.set(l.flags.get() & !BUSY);
    }
}

/// One load: is tracing on?
#[inline]
pub fn is_enabled() -> bool {
    STATE.load(Ordering::Relaxed) & 1 == 1
}

/// The clock for [`Hook::complete_ticks`]: a raw reading the writer converts (see
/// [`crate::clock::ticks`]). Only meaningful as that call's `t0`/`t1`.
#[inline(always)]
pub fn ticks() -> u64 {
    crate::clock::ticks()
}

/// The (timestamp, duration) in the configured unit of an event from [`ticks`] `t0` to `t1`,
/// for a hook whose event is not a static record.
pub fn ticks_span(t0: u64, t1: u64) -> (u64, u64) {
    crate::clock::span(unit(), t0, t1)
}

/// Current time in the configured unit; 0 when tracing is off (never started).
#[inline]
pub fn now() -> u64 {
    // After finalize the clock goes on (callers still compute durations: pydftracer's
    // wrappers around a function that finalized); before any start it reads 0.
    if !is_enabled() && !is_finalized() {
        return 0;
    }
    crate::clock::now_in(unit())
}

#[inline]
fn unit() -> TimeMetric {
    TimeMetric::from_code(UNIT.load(Ordering::Relaxed))
}

/// Records a complete event (ph 1). No-op when tracing is off.
#[inline]
pub fn complete(layer: Layer, name: &[u8], cat: &[u8], ts: u64, dur: u64, args: &[crate::Arg]) {
    record(&Pending::Complete {
        layer,
        name,
        cat,
        ts,
        dur,
        args,
    });
}

/// Records a complete event of a fixed shape (see [`crate::Schema`]): the cheapest record,
/// a pointer and a few integers in the ring. `file`'s hash is written under the schema's
/// `file_key`, with its `FH` record before the first event that names it. The caller keeps
/// `file`'s slot pinned until this returns (see [`crate::files`]); a stale handle makes an
/// event without its file, never with another one.
#[inline]
pub fn complete_static(
    schema: &'static crate::Schema,
    ts: u64,
    dur: u64,
    vals: &[u64],
    file: Option<crate::files::FileHandle>,
) {
    let s = STATE.load(Ordering::Relaxed);
    if s & 1 == 0 {
        return;
    }
    let _ = LOCAL.try_with(|l| record_static_in(l, s, schema, ts, dur, vals, file, Times::Unit));
}

/// As [`complete_static`] for a schema whose slots hold floats, bools or strings
/// ([`crate::intern_args`]): `strs` are the strings of its [`crate::Slot::Str`] slots, in
/// order, each at most [`crate::event::MAX_STR`] bytes (the ring carries their bytes after
/// the values; the slot values of those slots are ignored). No file.
///
/// As [`record_static_in`] does for a static record, the record is written in place
/// ([`write_mixed`]) when it fits quietly, without [`Pending`]'s general length and write.
pub fn complete_strs(schema: crate::MixedSchema, ts: u64, dur: u64, vals: &[u64], strs: &[&[u8]]) {
    let s = STATE.load(Ordering::Relaxed);
    if s & 1 == 0 {
        return;
    }
    let schema = schema.schema();
    let vals = &vals[..vals.len().min(schema.keys.len())];
    let _ = LOCAL.try_with(|l| {
        // As in `record_static_in`: `gen == s` only while the ring is attached.
        if l.gen.get() == s {
            // SAFETY: as in `record_static_in`.
            let ring = unsafe { &*l.ring.get() };
            let len = static_len(vals.len(), strs);
            if ring.push_quiet(len, |buf| write_mixed(buf, schema, ts, dur, vals, strs)) {
                return;
            }
        }
        record_mixed_rest(l, s, schema, ts, dur, vals, strs);
    });
}

/// [`complete_strs`] past its common case, out of line, as [`record_static_rest`]: a record
/// that wraps the ring's end, a ring over half full in the producer's view, or a thread
/// without its ring yet: the general path, which also refreshes the quiet bound.
#[cold]
#[inline(never)]
fn record_mixed_rest(
    l: &Local,
    s: u64,
    schema: &'static crate::Schema,
    ts: u64,
    dur: u64,
    vals: &[u64],
    strs: &[&[u8]],
) {
    let p = Pending::Static {
        schema,
        ts,
        dur,
        vals,
        file: None,
        strs,
    };
    let ring = l.ring.get();
    if l.gen.get() == s && !ring.is_null() {
        // SAFETY: as in `record_static_in`.
        let ring = unsafe { &*ring };
        if let Some(head) = ring.try_push(p.len(), |buf| p.write(buf)) {
            if ring.wants_drain_at(head) {
                wake_writer();
            }
            ring.refresh_quiet();
            return;
        }
    }
    record_slow(l, s, &p);
}

/// As [`complete_static`] for an event from [`ticks`] `t0` to `t1` (the writer converts
/// them): a frontend whose clock reads are raw counter reads (the C API's regions).
pub fn complete_ticks(
    schema: &'static crate::Schema,
    t0: u64,
    t1: u64,
    vals: &[u64],
    file: Option<crate::files::FileHandle>,
) {
    complete_ticks_inline(schema, t0, t1, vals, file);
}

/// [`complete_ticks`] inlined into the caller (a C/C++ region's end, a preload hook's
/// record): the same record, through a path the compiler specialises when the number of
/// values is a constant there (whole-word stores of a constant length, no argument
/// marshalling).
#[inline(always)]
pub fn complete_ticks_inline(
    schema: &'static crate::Schema,
    t0: u64,
    t1: u64,
    vals: &[u64],
    file: Option<crate::files::FileHandle>,
) {
    let Some(l) = local_ptr() else {
        return;
    };
    // SAFETY: this thread's LOCAL, a thread-local without a destructor: it lives as long as
    // the thread, and nothing else on this thread holds a reference into it now.
    record_ticks_in(unsafe { &*l }, schema, t0, t1, vals, file);
}

/// [`complete_ticks`] on this thread's state `l`. No-op when tracing is off.
#[inline(always)]
fn record_ticks_in<V: Vals>(
    l: &Local,
    schema: &'static crate::Schema,
    t0: u64,
    t1: u64,
    vals: V,
    file: Option<crate::files::FileHandle>,
) {
    // No test of the enabled bit here: `l.gen` equals only an enabled (odd) STATE, and the
    // cold path tests it first.
    let s = STATE.load(Ordering::Relaxed);
    record_static_in(l, s, schema, t0, t1, vals, file, Times::Raw);
}

/// Ends a static event without file that began at [`ticks`] `t0`, with its slot values
/// `vals`: reads the clock the same way and records `schema`'s complete event (the writer
/// converts both ends). One call instead of two for a frontend that reaches the core through
/// [`crate::api::Api`] (a decorated Python function's exit). No-op when tracing is off.
pub fn end_ticks(schema: &'static crate::Schema, t0: u64, vals: &[u64]) {
    complete_ticks(schema, t0, crate::clock::ticks_after(t0), vals, None);
}

/// A [`ticks`] value in the configured unit: what [`now`] read at that instant.
pub fn ticks_in_unit(t: u64) -> u64 {
    crate::clock::now_at(unit(), t)
}

/// The hot path of a static record: the record is written in place as whole words, without
/// going through [`Pending`]'s general length and write. `s` is the STATE just loaded,
/// enabled or not (only an enabled one can equal `l.gen`; the cold path tests it).
#[inline(always)]
#[allow(clippy::too_many_arguments)] // inlined into each caller: the arguments are registers
fn record_static_in<V: Vals>(
    l: &Local,
    s: u64,
    schema: &'static crate::Schema,
    ts: u64,
    dur: u64,
    all: V,
    file: Option<crate::files::FileHandle>,
    times: Times,
) {
    // `gen == s` (an enabled STATE, odd) only while the ring is attached: `attach` sets the
    // pointer before the generation, `Release::drop` clears the generation before the
    // pointer, and it starts at 0.
    if l.gen.get() == s {
        // SAFETY: attached, so non-null; the ring is kept alive by the Arc this thread holds
        // (released only by Release::drop, on this thread, which nulls the pointer after
        // clearing the generation).
        let ring = unsafe { &*l.ring.get() };
        let vals = all.as_ref();
        let vals = &vals[..vals.len().min(schema.keys.len())];
        let len = STATIC_HEAD + 8 * vals.len();
        // Attached: the thread's copy of the raw times byte is set.
        let times = match times {
            Times::Unit => 0,
            Times::Raw => l.raw_times.get(),
        };
        if ring.push_quiet(
            len,
            #[inline(always)]
            |buf| write_static(buf, schema, ts, dur, vals, file, times),
        ) {
            return;
        }
    }
    let times = match times {
        Times::Unit => 0,
        Times::Raw => RAW_TIMES | UNIT.load(Ordering::Relaxed),
    };
    record_static_rest(l, s, schema, ts, dur, all, file, times);
}

/// A static record's values: `&[u64]`, or `[u64; N]` by value (see [`Hook::complete_ticks`]).
pub trait Vals: AsRef<[u64]> + Copy {}
impl Vals for &[u64] {}
impl<const N: usize> Vals for [u64; N] {}

/// What a static record's times are: in the configured unit already, or raw [`ticks`]
/// (the record's times byte: 0, or [`RAW_TIMES`] | the unit's code).
#[derive(Clone, Copy)]
enum Times {
    Unit,
    Raw,
}

/// [`record_static_in`] past its common case, out of line: a record that wraps the ring's
/// end (padding first), a ring over half full in the producer's view (a drain to ask for,
/// or a full ring), or a thread without its ring yet.
///
/// The program's `errno` is left as it was, even if this panics (the hot path before it
/// touches no `errno`: a preload hook records a static event without saving it).
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)] // the hot path's own arguments, passed on
fn record_static_rest<V: Vals>(
    l: &Local,
    s: u64,
    schema: &'static crate::Schema,
    ts: u64,
    dur: u64,
    vals: V,
    file: Option<crate::files::FileHandle>,
    times: u8,
) {
    if s & 1 == 0 {
        // Tracing is off (the hot path leaves this test to here).
        return;
    }
    let _errno = KeepErrno::new();
    let vals = vals.as_ref();
    let vals = &vals[..vals.len().min(schema.keys.len())];
    let ring = l.ring.get();
    if l.gen.get() == s && !ring.is_null() {
        // SAFETY: as in `record_static_in`.
        let ring = unsafe { &*ring };
        let len = STATIC_HEAD + 8 * vals.len();
        if let Some(head) = ring.try_push(len, |buf| {
            write_static(buf, schema, ts, dur, vals, file, times)
        }) {
            if ring.wants_drain_at(head) {
                wake_writer();
            }
            ring.refresh_quiet();
            return;
        }
    }
    // Off the hot path: the record goes through `Pending`, whose times are in the unit.
    let (ts, dur) = match times {
        0 => (ts, dur),
        t => crate::clock::span(TimeMetric::from_code(t), ts, dur),
    };
    record_slow(
        l,
        s,
        &Pending::Static {
            schema,
            ts,
            dur,
            vals,
            file,
            strs: &[],
        },
    );
}

/// Records a counter event (ph 2).
#[inline]
pub fn counter(layer: Layer, name: &[u8], cat: &[u8], ts: u64, args: &[crate::Arg]) {
    record(&Pending::Counter {
        layer,
        name,
        cat,
        ts,
        args,
    });
}

/// Records a metadata record `name` (e.g. `CM`) with `key`/`value`.
pub fn metadata(layer: Layer, name: &[u8], key: &[u8], value: &[u8]) {
    record(&Pending::Meta {
        layer,
        name,
        key,
        value,
    });
}

/// The hot path.
#[inline]
pub fn record(p: &Pending) {
    let s = STATE.load(Ordering::Relaxed);
    if s & 1 == 0 {
        return;
    }
    let _ = LOCAL.try_with(|l| {
        let ring = l.ring.get();
        if l.gen.get() == s && !ring.is_null() {
            // SAFETY: as in record_static_in.
            let ring = unsafe { &*ring };
            let len = p.len();
            if let Some(head) = ring.try_push(len, |buf| p.write(buf)) {
                if ring.wants_drain_at(head) {
                    wake_writer();
                }
                return;
            }
        }
        record_slow(l, s, p);
    });
}

/// Restores the `errno` it found when dropped, also while unwinding.
struct KeepErrno(i32);

impl KeepErrno {
    fn new() -> KeepErrno {
        KeepErrno(crate::sys::errno())
    }
}

impl Drop for KeepErrno {
    fn drop(&mut self) {
        crate::sys::set_errno(self.0);
    }
}

/// A ring more than half full: the writer is posted (once per drain).
#[cold]
#[inline(never)]
fn wake_writer() {
    if let Some(sh) = shared() {
        // The program's errno is its own (a frontend's fast path does not save it).
        let _errno = KeepErrno::new();
        sh.wake.post();
    }
}

/// Everything but a push into an attached ring with room: attaching (first event, new fork
/// generation), a thread whose ring is gone, a full ring.
#[cold]
#[inline(never)]
fn record_slow(l: &Local, s: u64, p: &Pending) {
    // Attaching maps a ring and may start the writer: the program's errno stays its own (a
    // frontend's fast path does not save it).
    let _errno = KeepErrno::new();
    record_slow_inner(l, s, p);
}

fn record_slow_inner(l: &Local, s: u64, p: &Pending) {
    if l.dead.get() {
        return record_orphan(p);
    }
    let mut ring = l.ring.get();
    if l.gen.get() != s || ring.is_null() {
        ring = attach(l, s);
        if ring.is_null() {
            if l.dead.get() {
                record_orphan(p);
            }
            return;
        }
    }
    // SAFETY: as in record_static_in.
    let ring = unsafe { &*ring };
    let len = p.len();
    if !ring.push(len, |buf| p.write(buf)) {
        ring_full(ring, p, len);
    } else if ring.wants_drain() {
        wake_writer();
    }
}

/// An event of a thread whose thread-local state is gone: glibc runs the main thread's TLS
/// destructors before `atexit` handlers, where programs still do I/O (coreutils closes
/// `stdout` there). Encoded at once under the writer lock: rare, and never lost.
#[cold]
fn record_orphan(p: &Pending) {
    let Some(sh) = shared() else { return };
    if PHASE.load(Ordering::Acquire) != PHASE_RUNNING {
        return;
    }
    let len = p.len();
    // 8-byte aligned, as ring records are.
    let mut words = vec![0u64; len.div_ceil(8)];
    // SAFETY: `words` owns at least `len` initialised bytes; u8 has no alignment needs.
    let bytes = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), len) };
    p.write(bytes);
    writer::encode_orphan(sh, bytes);
}

#[cold]
fn attach(l: &Local, s: u64) -> *const Ring {
    let Some(sh) = shared() else {
        return ptr::null();
    };
    if PHASE.load(Ordering::Acquire) != PHASE_RUNNING {
        return ptr::null();
    }
    if l.ring.get().is_null() {
        // Registers the destructor that releases the ring at thread exit; fails once this
        // thread's thread-locals are being torn down (the event is then an orphan).
        if RELEASE.try_with(|_| ()).is_err() {
            l.dead.set(true);
            return ptr::null();
        }
        let _s = Section::new();
        let ring = Arc::new(Ring::new(sh.cfg.ring_size, sys::gettid()));
        sh.rings.lock().push(ring.clone());
        l.ring.set(Arc::into_raw(ring));
    }
    writer::ensure_thread(sh);
    l.raw_times.set(RAW_TIMES | UNIT.load(Ordering::Relaxed));
    l.gen.set(s);
    l.ring.get()
}

#[cold]
fn ring_full(ring: &Ring, p: &Pending, len: usize) {
    let Some(sh) = shared() else { return };
    if sh.cfg.drop_when_full {
        sh.dropped.fetch_add(1, Ordering::Relaxed);
        return;
    }
    // Hand work over: encode a bounded part of our own ring (no compression, no I/O: the
    // writer cuts members), then retry, up to 8 chunks (more than any record needs).
    let handed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for _ in 0..8 {
            writer::hand_over(sh, ring);
            if ring.push(len, |buf| p.write(buf)) {
                return true;
            }
        }
        false
    }));
    match handed {
        Ok(true) => {}
        Ok(false) => {
            sh.dropped.fetch_add(1, Ordering::Relaxed);
        }
        Err(_) => sh.broken("hand-over of a full ring"),
    }
}
