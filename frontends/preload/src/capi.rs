//! The C/C++ API of `include/dftracer/dftracer.h` (the reference DFTracer 2.2.0 surface):
//! `initialize_main`, `initialize_no_bind`, `finalize`, `set_app_metadata_*`, `mark_used`, and
//! regions (`initialize_region` ... `finalize_region`, `update_metadata_*`).
//!
//! Contract:
//! - **One tracer per process**: these functions drive the same core as the preload
//!   constructor. When the constructor already started it (`LD_PRELOAD` with
//!   `DFTRACER_INIT=PRELOAD`), `initialize_main` joins that trace: it becomes the application's
//!   (`-app`, as the reference names it; `claim_for_app`), its `log_file` renames the file
//!   (`retarget`), and I/O stays traced with the preload's `DFTRACER_DATA_DIR`.
//! - **I/O**: `initialize_main` turns on this library's interception ([`crate::bind_io`]). When
//!   the program is linked with `-ldftracer_core`, the library's exported `open`/`read`/...
//!   already come before libc's in symbol lookup, so that is all it takes; a dlopen'ed
//!   (RTLD_LOCAL) copy binds the loaded objects' GOT slots ([`crate::bind`]).
//!   `initialize_no_bind` traces regions only.
//! - **`process_id`** is read by nobody, as in the reference (whose core overwrites it with
//!   `getpid()`): the trace always holds the real pid. It is never written through.
//! - **Regions** before any `initialize_*` start the tracer from the environment without I/O
//!   (as the reference and our Python module do); a later `initialize_main` then names the file
//!   and binds I/O.
//! - **Off = free**: with tracing off, `initialize_region` returns NULL after two loads, and
//!   every other call on NULL returns at once.
//! - **Never harm the host**: no panic crosses into C ([`crate::guarded`]); NULL strings and
//!   pointers that are not live regions are ignored ([`crate::region::lookup`]); `errno` is
//!   restored on return; problems are one line on stderr.
//! - **Metadata type** (`*_type` variants, C++ `MetadataType`): the reference uses it only to
//!   choose aggregation keys; the written args are the same for every type. We write the arg
//!   and ignore the type (our aggregation groups by name and category).
#![allow(unsafe_code)]
// The C entry points take C pointers; each reads only NUL-terminated strings the caller
// passes (bounded by `strnlen`), or region pointers checked by address before any use.
#![allow(clippy::missing_safety_doc, clippy::not_unsafe_ptr_arg_deref)]

use std::sync::atomic::{AtomicBool, AtomicU64};

use libc::{c_char, c_int};

use dftracer_core::frontend::MAX_STR;
use dftracer_core::frontend::{Frontend, LazyStart};
use dftracer_core::{AppValue, Config, Error, Layer, Origin};

use crate::region::{self, args_on, c_str, layer_of, DFTracerData};
use crate::{guarded, guarded_or, SavedErrno};

/// `DF_DATA_EVENT` / `DF_METADATA_EVENT`.
const DF_METADATA_EVENT: c_int = 1;

/// The lazy start (first region before any initialize) and the explicit `initialize_*`:
/// core's policy ([`dftracer_core::frontend::LazyStart`]).
static START: LazyStart = LazyStart::new();
/// What the macros of our header read inline to skip the library while regions cannot be
/// recorded (`dftracer_off_` in `dftracer.h`): off when tracing is not enabled and the lazy
/// start was decided. Two pointers, so that a program's copy of this object (a non-PIE
/// executable's copy relocation) still points at this library's words.
#[repr(C)]
pub struct Gate {
    state: *const AtomicU64,
    decided: *const AtomicBool,
}

// SAFETY: two pointers to atomics that live as long as the library, never written.
unsafe impl Sync for Gate {}

#[no_mangle]
pub static dftracer_gate_: Gate = Gate {
    state: &dftracer_core::frontend::STATE_WORD.0,
    decided: START.decided_word(),
};

/// What the header's frame start reads to open a frame inline, without a call
/// (`dftracer_frame_begin_` in `dftracer.h`, x86-64 with GCC or Clang): the state word (bit 0:
/// tracing on), the clock's word (even: a tick is `rdtsc` tagged with bit 63, as
/// [`dftracer_core::frontend::ticks`] reads it; odd: the header calls `dftracer_frame_open_`,
/// which reads the clock the library's way) and the key of a frame's tag. Pointers, as in
/// [`Gate`], so that a program's copy of this object still reads this library's words.
#[repr(C)]
pub struct Fast {
    state: *const AtomicU64,
    clock: *const AtomicU64,
    frame_key: u64,
}

// SAFETY: two pointers to atomics that live as long as the library and a constant.
unsafe impl Sync for Fast {}

#[no_mangle]
pub static dftracer_fast_: Fast = Fast {
    state: &dftracer_core::frontend::STATE_WORD.0,
    clock: dftracer_core::frontend::tsc_word(),
    frame_key: crate::frame::FRAME_KEY as u64,
};

fn c_string(p: *const c_char) -> Option<String> {
    c_str(p, MAX_STR).map(|b| String::from_utf8_lossy(b).into_owned())
}

/// This library's side of the lazy-start policy: its own core; `io`: `initialize_main` binds
/// I/O (an implicit start and `initialize_no_bind` do not).
struct Capi {
    io: bool,
}

impl Frontend for Capi {
    #[inline(always)]
    fn is_enabled(&self) -> bool {
        dftracer_core::is_enabled()
    }
    fn is_finalized(&self) -> bool {
        dftracer_core::is_finalized()
    }
    fn is_running(&self) -> bool {
        dftracer_core::is_running()
    }
    fn config(&self) -> Config {
        Config::from_env()
    }
    fn start(&self, cfg: Config, log_file: Option<&str>) -> Result<(), Error> {
        crate::start_tracing(cfg, Origin::App, log_file, self.io)
    }
    fn join(&self, cfg: Config, log_file: Option<&str>, arg_dirs: Option<&str>) {
        crate::join_running(cfg, log_file, arg_dirs, self.io);
    }
    fn cold<R>(&self, f: impl FnOnce() -> R) -> R {
        // Starting reads /proc and creates directories: the program's errno stays its own.
        let _errno = SavedErrno::new();
        f()
    }
}

/// Tracing is on, starting it from the environment on the first call if nobody did (events
/// before `initialize_main`, as in the reference). Two loads once decided.
#[inline]
pub(crate) fn active() -> bool {
    START.active(&Capi { io: false })
}

fn initialize(log_file: *const c_char, data_dirs: *const c_char, io: bool) {
    let _errno = SavedErrno::new();
    let log_file = c_string(log_file);
    let data_dirs = c_string(data_dirs);
    guarded(|| START.initialize(&Capi { io }, log_file.as_deref(), data_dirs.as_deref()));
}

#[no_mangle]
pub extern "C" fn initialize_main(
    log_file: *const c_char,
    data_dirs: *const c_char,
    process_id: *mut c_int,
) {
    let _ = process_id;
    initialize(log_file, data_dirs, true);
}

#[no_mangle]
pub extern "C" fn initialize_no_bind(
    log_file: *const c_char,
    data_dirs: *const c_char,
    process_id: *mut c_int,
) {
    let _ = process_id;
    initialize(log_file, data_dirs, false);
}

#[no_mangle]
pub extern "C" fn finalize() {
    let _errno = SavedErrno::new();
    guarded(dftracer_core::finalize);
}

#[no_mangle]
pub extern "C" fn set_app_metadata_int(key: *const c_char, value: c_int) {
    let _errno = SavedErrno::new();
    guarded(|| {
        if let Some(k) = c_string(key) {
            if active() {
                dftracer_core::set_app_metadata(&k, AppValue::Int(value as i64));
            }
        }
    });
}

#[no_mangle]
pub extern "C" fn set_app_metadata_string(key: *const c_char, value: *const c_char) {
    let _errno = SavedErrno::new();
    guarded(|| {
        if let (Some(k), Some(v)) = (c_string(key), c_string(value)) {
            if active() {
                dftracer_core::set_app_metadata(&k, AppValue::Str(v));
            }
        }
    });
}

#[no_mangle]
pub extern "C" fn mark_used(name: *const c_char) {
    let _errno = SavedErrno::new();
    guarded(|| {
        if let Some(n) = c_string(name) {
            if active() {
                dftracer_core::frontend::mark_used(&n);
            }
        }
    });
}

/// Opens a region of layer `layer` (NULL when tracing is off). A NULL `cat` takes the layer's
/// category (`C_APP` / `CPP_APP`); a NULL `name` is an empty name.
fn region_begin(
    name: *const c_char,
    cat: *const c_char,
    event_type: c_int,
    layer: Layer,
) -> *mut DFTracerData {
    region_begin_at(name, cat, event_type, layer, false).0
}

/// [`region_begin`], also returning the region's start (a raw clock read,
/// `dftracer_core::frontend::ticks`; 0 for a metadata region or when tracing is off).
/// With `scoped`, a data region belongs to this thread ([`region::begin_scoped`]).
pub(crate) fn region_begin_at(
    name: *const c_char,
    cat: *const c_char,
    event_type: c_int,
    layer: Layer,
    scoped: bool,
) -> (*mut DFTracerData, u64) {
    if !active() {
        return (std::ptr::null_mut(), 0);
    }
    let meta = event_type == DF_METADATA_EVENT;
    if !meta {
        // A call site seen before: its schema without reading the strings' lengths, hashing
        // or copying them. Nothing here touches errno.
        if let Some(schema) = crate::sites::site_schema(name, cat, layer) {
            return guarded_or((std::ptr::null_mut(), 0), || {
                let ts = dftracer_core::frontend::ticks();
                let p = if scoped {
                    region::begin_scoped(layer, b"", b"", ts, Some(schema))
                } else {
                    region::begin(layer, false, b"", b"", ts, Some(schema))
                };
                match p {
                    Some(p) => (p, ts),
                    None => (std::ptr::null_mut(), 0),
                }
            });
        }
    }
    let _errno = SavedErrno::new();
    guarded_or((std::ptr::null_mut(), 0), || {
        let ts = if meta {
            0
        } else {
            dftracer_core::frontend::ticks()
        };
        let name_s = c_str(name, MAX_STR).unwrap_or_default();
        // A data region without a category takes its layer's (a metadata one: an empty value).
        let default_cat: &[u8] = if meta { b"" } else { layer.name().as_bytes() };
        let cat_s = c_str(cat, MAX_STR).unwrap_or(default_cat);
        let schema = if meta {
            None
        } else {
            dftracer_core::intern(layer, name_s, cat_s)
        };
        if let Some(schema) = schema {
            crate::sites::remember_site(name, cat, layer, schema);
        }
        let p = if scoped && !meta {
            region::begin_scoped(layer, name_s, cat_s, ts, schema)
        } else {
            region::begin(layer, meta, name_s, cat_s, ts, schema)
        };
        let p = p.unwrap_or(std::ptr::null_mut());
        (p, if p.is_null() { 0 } else { ts })
    })
}

#[no_mangle]
pub extern "C" fn initialize_region(
    name: *const c_char,
    cat: *const c_char,
    event_type: c_int,
) -> *mut DFTracerData {
    region_begin(name, cat, event_type, Layer::CApp)
}

/// Ours (declared in our header): `initialize_region` with the event's layer
/// (`TraceEventType`: 2 C_APP, 9 CPP_APP, ...). The C++ `DFTracer` is in [`crate::cxx`].
#[no_mangle]
pub extern "C" fn dftracer_region_begin(
    name: *const c_char,
    cat: *const c_char,
    event_type: c_int,
    trace_type: c_int,
) -> *mut DFTracerData {
    region_begin(name, cat, event_type, layer_of(trace_type))
}

/// Ours (what our header's region macros call): [`dftracer_region_begin`] for a region that
/// the calling thread ends at the end of the same scope, as the macros do. Its end and updates
/// from another thread are ignored (the owner's scope end records it); in return it ends
/// without an atomic read-modify-write.
#[no_mangle]
pub extern "C" fn dftracer_scope_begin(
    name: *const c_char,
    cat: *const c_char,
    event_type: c_int,
    trace_type: c_int,
) -> *mut DFTracerData {
    region_begin_at(name, cat, event_type, layer_of(trace_type), true).0
}

#[no_mangle]
pub extern "C" fn finalize_region(data: *mut DFTracerData) {
    if data.is_null() {
        return;
    }
    let _errno = SavedErrno::new();
    let t1 = dftracer_core::frontend::ticks();
    guarded(|| {
        if !crate::frame::end_region(data, t1) {
            // Not a live region cell: perhaps the frame of one of our macros' regions
            // (their data_fn), which ends here.
            crate::frame::close_foreign(data);
        }
    });
}

#[no_mangle]
pub extern "C" fn finalize_region_cleanup(data: *mut *mut DFTracerData) {
    if data.is_null() {
        return;
    }
    // SAFETY: `data` is the address of the caller's region variable (the cleanup attribute
    // passes it); it is read and then set to NULL, nothing else.
    let p = unsafe { *data };
    if p.is_null() {
        return;
    }
    finalize_region(p);
    // SAFETY: as above.
    unsafe { *data = std::ptr::null_mut() };
}

fn update(
    data: *mut DFTracerData,
    key: *const c_char,
    set: impl FnOnce(&mut region::Region, &[u8]),
) {
    if data.is_null() || key.is_null() {
        return;
    }
    let _errno = SavedErrno::new();
    guarded(|| {
        if !args_on() {
            return;
        }
        let Some(k) = c_str(key, dftracer_core::frontend::MAX_KEY) else {
            return;
        };
        // Not a region cell: perhaps the frame of one of our macros' regions (their
        // data_fn), whose update moves it into a cell.
        let data = match region::lookup(data) {
            Some(_) => data,
            None => match crate::frame::cell_of(data) {
                Some(c) => c,
                None => return,
            },
        };
        region::with_live(data, |r| {
            // Metadata events carry no args (reference).
            if !r.meta {
                set(r, k)
            }
        });
    });
}

#[no_mangle]
pub extern "C" fn update_metadata_int(data: *mut DFTracerData, key: *const c_char, value: c_int) {
    update(data, key, |r, k| r.set_int(k, value as i64));
}

#[no_mangle]
pub extern "C" fn update_metadata_string(
    data: *mut DFTracerData,
    key: *const c_char,
    value: *const c_char,
) {
    let Some(v) = c_str(value, MAX_STR) else {
        return;
    };
    update(data, key, |r, k| r.set_str(k, v));
}

#[no_mangle]
pub extern "C" fn update_metadata_int_type(
    data: *mut DFTracerData,
    key: *const c_char,
    value: c_int,
    metadata_type: c_int,
) {
    let _ = metadata_type; // see the module doc: aggregation-only in the reference
    update_metadata_int(data, key, value);
}

#[no_mangle]
pub extern "C" fn update_metadata_string_type(
    data: *mut DFTracerData,
    key: *const c_char,
    value: *const c_char,
    metadata_type: c_int,
) {
    let _ = metadata_type;
    update_metadata_string(data, key, value);
}

/// Opens the frame `f` of one of our header's macro regions (`dftracer.h`
/// `dftracer_frame_open_`; [`crate::frame`]): 0 when tracing is off (the frame stays ended).
#[no_mangle]
pub extern "C" fn dftracer_frame_open_(
    f: *mut crate::frame::Frame,
    site: *mut crate::frame::Site,
    name: *const c_char,
    cat: *const c_char,
    trace_type: c_int,
) -> c_int {
    if f.is_null() || !active() {
        return 0;
    }
    crate::frame::open(f, site, name, cat, trace_type);
    1
}
