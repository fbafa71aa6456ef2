//! Regions kept on the caller's stack: the frames of our header's region macros
//! (`struct dftracer_frame_` in `dftracer.h`).
//!
//! A macro region's start, call site and first two int args are stored in the caller's own
//! variable by the header's inline start (or `dftracer_frame_open_`, [`open`], where it cannot
//! read the clock itself) and its inline `_UPDATE_INT`, and the event is recorded by
//! [`dftracer_frame_close_`] with the region's schema (a keyed one for int args): one call
//! per region on x86-64 (two elsewhere), no region cell, no allocation, nothing shared. A
//! string arg, a third int key or one of the reference's functions called with the frame's
//! pointer moves the region into a region cell ([`into_cell`]), which then takes every update
//! and the end.
//!
//! - **The frame's pointer is the reference's `struct DFTracerData *`** (the macros' `data_fn`
//!   / `data_<name>`): its `profiler` field is a tag of the frame's own address, and the
//!   reference's functions given a pointer that is no region cell read it only through
//!   `process_vm_readv` ([`foreign`]), so any pointer at all is still safe to pass.
//! - **A frame is one thread's**: the thread that opened it (its `pthread_self`); another
//!   thread's call with its pointer is ignored, as for a scoped region cell.
//! - **A call site** (the C++ macros' static `dftracer_site_`, zero-initialised) remembers the
//!   schema of its name and category pointers; without one (C, whose `extern inline`
//!   functions may not have statics) the region finds it in [`crate::sites`].
#![allow(unsafe_code)]
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::sync::atomic::{AtomicPtr, Ordering};

use libc::{c_char, c_int};

use dftracer_core::{Layer, Schema};

use crate::region::{self, args_on, c_str, layer_of, DFTracerData};
use crate::sites::{self, MAX_KEYED};

/// What the tag of a frame at address `a` is: `a ^ FRAME_KEY`.
pub(crate) const FRAME_KEY: usize = 0x5DF7_F4A3_E11C_0DE5;

const ENDED: u8 = 0;
const OPEN: u8 = 1;
const IN_CELL: u8 = 2;

/// `struct dftracer_frame_` (dftracer.h): the same fields in the same order.
#[repr(C)]
pub struct Frame {
    d: DFTracerData,
    ts: u64,
    owner: libc::c_ulong,
    site: *mut Site,
    cell: *mut DFTracerData,
    name: *const c_char,
    cat: *const c_char,
    key: [*const c_char; 2],
    val: [i64; 2],
    mode: u8,
    n: u8,
    trace_type: u8,
}

/// `struct dftracer_site_` (dftracer.h): two pointer words, zero until a region of the site
/// ends; the first publishes a [`SiteEntry`].
#[repr(C)]
pub struct Site {
    entry: AtomicPtr<SiteEntry>,
    _spare: AtomicPtr<()>,
}

/// What a call site's first region found: its strings' addresses and their schema. Never
/// freed (one per call site).
struct SiteEntry {
    name: usize,
    cat: usize,
    layer: Layer,
    schema: &'static Schema,
}

fn tag(f: *const Frame) -> *mut std::ffi::c_void {
    (f as usize ^ FRAME_KEY) as *mut std::ffi::c_void
}

/// This thread's identity: its thread pointer (the word at `%fs:0`, which glibc's
/// `pthread_self` returns too), one load instead of a call; `pthread_self` elsewhere.
#[inline(always)]
fn this_thread() -> libc::c_ulong {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        crate::real::thread_pointer() as libc::c_ulong
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    // SAFETY: pthread_self has no preconditions.
    unsafe {
        libc::pthread_self()
    }
}

/// Opens the frame `f` (its caller checked that tracing is on): the start is read now. The
/// header's `dftracer_frame_begin_` fills the same fields inline instead (x86-64, GCC or
/// Clang) while tracing is on and the clock is the TSC (`dftracer_fast_`): the two must stay
/// field for field the same.
pub(crate) fn open(
    f: *mut Frame,
    site: *mut Site,
    name: *const c_char,
    cat: *const c_char,
    trace_type: c_int,
) {
    // SAFETY: `f` is the caller's frame variable (the header's macros pass its address).
    let fr = unsafe { &mut *f };
    fr.d.profiler = tag(f);
    fr.owner = this_thread();
    fr.site = site;
    fr.cell = std::ptr::null_mut();
    fr.name = name;
    fr.cat = cat;
    fr.n = 0;
    fr.trace_type = trace_type as u8;
    fr.ts = dftracer_core::frontend::ticks();
    fr.mode = OPEN;
}

/// Ends the open frame `f` and records its event.
#[no_mangle]
pub extern "C" fn dftracer_frame_close_(f: *mut Frame) {
    if f.is_null() {
        return;
    }
    // SAFETY: as in `open`.
    let fr = unsafe { &mut *f };
    match fr.mode {
        OPEN => {
            let t1 = dftracer_core::frontend::ticks_after(fr.ts);
            fr.mode = ENDED;
            // errno: the clock and a ring push leave it; the core keeps it across attaching
            // a ring and waking the writer, and the slow paths here save it themselves.
            crate::guarded(|| {
                // The common regions: a call site seen before, no args or up to two int args
                // under keys seen before.
                if !quick_close(fr, t1) {
                    close(fr, t1)
                }
            });
        }
        IN_CELL => {
            fr.mode = ENDED;
            finalize_cell(fr.cell);
        }
        _ => {}
    }
}

/// Moves the open frame `f` into a region cell and returns the cell (NULL: none could be
/// had, or `f` is not open; the update is then not recorded).
#[no_mangle]
pub extern "C" fn dftracer_frame_cell_(f: *mut Frame) -> *mut DFTracerData {
    if f.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: as in `open`.
    let fr = unsafe { &mut *f };
    match fr.mode {
        OPEN => crate::guarded_or(std::ptr::null_mut(), || into_cell(fr)),
        IN_CELL => fr.cell,
        _ => std::ptr::null_mut(),
    }
}

fn layer(fr: &Frame) -> Layer {
    layer_of(fr.trace_type as c_int)
}

/// The schema of the frame's name and category: its site's entry, the sites table's, or
/// interned now (and remembered in both).
fn schema(fr: &Frame) -> Option<&'static Schema> {
    if let Some(s) = known_schema(fr) {
        return Some(s);
    }
    let layer = layer(fr);
    // SAFETY: a site is the caller's static `dftracer_site_`, two pointer words.
    let site = unsafe { fr.site.as_ref() };
    let schema = match sites::site_schema(fr.name, fr.cat, layer) {
        Some(s) => s,
        None => {
            let _errno = crate::SavedErrno::new();
            let name = c_str(fr.name, dftracer_core::frontend::MAX_STR).unwrap_or_default();
            let cat =
                c_str(fr.cat, dftracer_core::frontend::MAX_STR).unwrap_or(layer.name().as_bytes());
            let s = dftracer_core::intern(layer, name, cat)?;
            sites::remember_site(fr.name, fr.cat, layer, s);
            s
        }
    };
    if let Some(site) = site {
        if site.entry.load(Ordering::Relaxed).is_null() && !fr.name.is_null() && !fr.cat.is_null() {
            sites::publish_once(
                &site.entry,
                SiteEntry {
                    name: fr.name as usize,
                    cat: fr.cat as usize,
                    layer,
                    schema,
                },
            );
        }
    }
    Some(schema)
}

/// Records the frame's event when everything it needs was found before (its schema, and a
/// keyed schema for its int args' key pointers), with the record's length a constant in
/// each branch; false when the frame needs [`close`].
#[inline(always)]
fn quick_close(fr: &Frame, t1: u64) -> bool {
    let Some(base) = known_schema(fr) else {
        return false;
    };
    let n = fr.n as usize;
    if n == 0 || !args_on() {
        dftracer_core::frontend::complete_ticks_inline(base, fr.ts, t1, &[], None);
        return true;
    }
    if n > 2 {
        return false;
    }
    let Some(found) = sites::keyed_by_ptrs(base, &fr.key[..n]) else {
        return false;
    };
    let Some(keyed) = found.keyed else {
        return false;
    };
    let v = [fr.val[0] as u64, fr.val[1] as u64];
    // One text under two pointers: one arg, the later value.
    let vals = if found.dup { &v[1..] } else { &v[..n] };
    dftracer_core::frontend::complete_ticks_inline(keyed, fr.ts, t1, vals, None);
    true
}

/// The schema of the frame's name and category when its call site, or the sites table, has
/// it already (no interning, no allocation).
#[inline(always)]
fn known_schema(fr: &Frame) -> Option<&'static Schema> {
    let layer = layer(fr);
    // SAFETY: a site is the caller's static `dftracer_site_`, two pointer words.
    if let Some(site) = unsafe { fr.site.as_ref() } {
        let e = site.entry.load(Ordering::Acquire);
        // SAFETY: published entries are never freed.
        if let Some(e) = unsafe { e.as_ref() } {
            if e.name == fr.name as usize && e.cat == fr.cat as usize && e.layer == layer {
                return Some(e.schema);
            }
        }
        return None;
    }
    sites::site_schema(fr.name, fr.cat, layer)
}

/// The frame's int args as keys and values (a key given twice under two pointers to the same
/// text: the later value), or none when args are not recorded.
fn args(fr: &Frame) -> ([&[u8]; 2], [u64; MAX_KEYED], usize) {
    let mut keys: [&[u8]; 2] = [b""; 2];
    let mut vals = [0u64; MAX_KEYED];
    let mut n = 0;
    if fr.n == 0 || !args_on() {
        return (keys, vals, 0);
    }
    for i in 0..(fr.n as usize).min(2) {
        let Some(k) = c_str(fr.key[i], dftracer_core::frontend::MAX_KEY) else {
            continue;
        };
        match keys[..n].iter().position(|x| *x == k) {
            Some(j) => vals[j] = fr.val[i] as u64,
            None => {
                keys[n] = k;
                vals[n] = fr.val[i] as u64;
                n += 1;
            }
        }
    }
    (keys, vals, n)
}

fn close(fr: &mut Frame, t1: u64) {
    let Some(base) = schema(fr) else {
        // The core refused the name (its table full): the general path.
        if let Some(c) = cell_at(fr) {
            end_region(c, t1);
        }
        return;
    };
    let n = fr.n as usize;
    if n == 0 || !args_on() {
        dftracer_core::frontend::complete_ticks(base, fr.ts, t1, &[], None);
        return;
    }
    let ptrs = &fr.key[..n.min(2)];
    let found = match sites::keyed_by_ptrs(base, ptrs) {
        Some(f) => f,
        None => {
            let mut texts: [&[u8]; 2] = [b""; 2];
            for (t, &p) in texts.iter_mut().zip(ptrs) {
                *t = c_str(p, dftracer_core::frontend::MAX_KEY).unwrap_or_default();
            }
            // One text under two pointers: one arg, the later value.
            let dup = ptrs.len() == 2 && texts[0] == texts[1];
            let keys = if dup {
                &texts[..1]
            } else {
                &texts[..ptrs.len()]
            };
            let found = sites::KeyedPtrs {
                keyed: sites::keyed_schema(base, keys),
                dup,
            };
            sites::remember_keyed_ptrs(base, ptrs, &texts[..ptrs.len()], found);
            found
        }
    };
    match found.keyed {
        Some(keyed) => {
            let v = [fr.val[0] as u64, fr.val[1] as u64];
            let vals: &[u64] = if found.dup {
                &v[1..2]
            } else {
                &v[..ptrs.len()]
            };
            dftracer_core::frontend::complete_ticks(keyed, fr.ts, t1, vals, None);
        }
        None => {
            // Keys the core does not take as a keyed schema (escaping, its table full).
            if let Some(c) = cell_at(fr) {
                end_region(c, t1);
            }
        }
    }
}

/// A region cell holding what the frame holds (its start, name, category and int args).
fn cell_at(fr: &Frame) -> Option<*mut DFTracerData> {
    let layer = layer(fr);
    let _errno = crate::SavedErrno::new();
    let name = c_str(fr.name, dftracer_core::frontend::MAX_STR).unwrap_or_default();
    let cat = c_str(fr.cat, dftracer_core::frontend::MAX_STR).unwrap_or(layer.name().as_bytes());
    let schema = sites::site_schema(fr.name, fr.cat, layer);
    let p = region::begin_scoped(layer, name, cat, fr.ts, schema)?;
    let (keys, vals, n) = args(fr);
    if n > 0 {
        region::with_live(p, |r| {
            for (k, v) in keys.iter().zip(vals).take(n) {
                r.set_int(k, v as i64);
            }
        });
    }
    Some(p)
}

fn into_cell(fr: &mut Frame) -> *mut DFTracerData {
    match cell_at(fr) {
        Some(p) => {
            fr.cell = p;
            fr.mode = IN_CELL;
            p
        }
        None => std::ptr::null_mut(),
    }
}

/// The open frame of this thread that `p` points at, if it is one: `p` is read only through
/// `process_vm_readv` (which fails, never faults, on memory that cannot be read), and a frame
/// is taken only with its tag, an open mode and this thread as its owner.
pub(crate) fn foreign(p: *mut DFTracerData) -> Option<&'static mut Frame> {
    let size = std::mem::size_of::<Frame>();
    if p.is_null() || !(p as usize).is_multiple_of(std::mem::align_of::<Frame>()) {
        return None;
    }
    let mut copy = std::mem::MaybeUninit::<Frame>::uninit();
    let local = libc::iovec {
        iov_base: copy.as_mut_ptr().cast(),
        iov_len: size,
    };
    let remote = libc::iovec {
        iov_base: p.cast(),
        iov_len: size,
    };
    let _errno = crate::SavedErrno::new();
    // SAFETY: one local buffer of `size` bytes; the remote range is only read by the kernel.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    if n != size as isize {
        return None;
    }
    // SAFETY: all `size` bytes were written; every field is an integer or a raw pointer.
    let copy = unsafe { copy.assume_init() };
    let f = p as *mut Frame;
    if copy.d.profiler != tag(f) || copy.owner != this_thread() || copy.mode == ENDED {
        return None;
    }
    // SAFETY: readable, tagged with its own address and this thread's: the frame of one of
    // this thread's open regions, on this thread's stack below the caller.
    Some(unsafe { &mut *f })
}

/// The region cell an update through the frame's pointer `p` goes to (moving an open frame
/// into one), if `p` is this thread's frame.
pub(crate) fn cell_of(p: *mut DFTracerData) -> Option<*mut DFTracerData> {
    let fr = foreign(p)?;
    let c = dftracer_frame_cell_(fr);
    (!c.is_null()).then_some(c)
}

/// `finalize_region` of a frame's pointer: the frame ends (true), if `p` is one.
pub(crate) fn close_foreign(p: *mut DFTracerData) -> bool {
    match foreign(p) {
        Some(fr) => {
            dftracer_frame_close_(fr);
            true
        }
        None => false,
    }
}

/// `finalize_region` of a cell, as the C API's (errno kept, the clock read now).
fn finalize_cell(data: *mut DFTracerData) {
    let _errno = crate::SavedErrno::new();
    let t1 = dftracer_core::frontend::ticks();
    end_region(data, t1);
}

pub(crate) fn end_region(data: *mut DFTracerData, t1: u64) -> bool {
    region::end(data, |r| {
        if r.meta {
            dftracer_core::metadata(r.layer, b"CM", r.name(), r.cat());
        } else if let Some((schema, vals, n)) = r.keyed() {
            // Integer args only, under the keys of a known schema: a static record too.
            dftracer_core::frontend::complete_ticks(schema, r.ts, t1, &vals[..n], None);
        } else if let Some(schema) = r
            .args_empty()
            .then(|| {
                r.schema
                    .or_else(|| dftracer_core::intern(r.layer, r.name(), r.cat()))
            })
            .flatten()
        {
            // No args: the core's schema of this name and category (no strings copied
            // into the ring, the line rendered from a cached template).
            dftracer_core::frontend::complete_ticks(schema, r.ts, t1, &[], None);
        } else {
            let (ts, dur) = dftracer_core::frontend::ticks_span(r.ts, t1);
            r.with_args(|args| dftracer_core::complete(r.layer, r.name(), r.cat(), ts, dur, args));
        }
    })
}
