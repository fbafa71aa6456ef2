//! The process's one core, reached through the native library `libdftracer_core.so`.
//!
//! The library holds the core, the I/O hooks and the in-process binding. It may already be in
//! the process (preloaded as `libdftracer_preload.so`, or linked by a C/C++ program that
//! embeds Python): then this module uses that copy, so Python events, C/C++ events and I/O
//! events go to one trace file through one writer. Otherwise the copy shipped in the wheel
//! (`dftracer/_native/lib/`) is loaded. Both must come from the same build ([`BUILD_ID`]).
//!
//! The functions mirror `dftracer_core`'s API; with no library they do nothing (tracing off,
//! said once on stderr).
#![allow(unsafe_code)]

use dftracer_core::frontend::{Api, API_SYMBOL as SYMBOL, BUILD_ID};
use dftracer_core::{AppValue, Arg, ArgsSchema, Config, Error, Layer, Origin, Stats};

use crate::MAX_PY_ARGS;
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::OnceLock;

/// The enabled word of the core in use (a word that stays 0 until the library is loaded).
static STATE: AtomicPtr<AtomicU64> = AtomicPtr::new(&OFF as *const AtomicU64 as *mut AtomicU64);
static OFF: AtomicU64 = AtomicU64::new(0);
static API: OnceLock<Option<&'static Api>> = OnceLock::new();

/// The table of the library in use, loading it on first use.
pub fn api() -> Option<&'static Api> {
    *API.get_or_init(|| {
        let api = match load() {
            Ok(api) => Some(api),
            Err(e) => {
                dftracer_core::frontend::eprint_line(&format!(
                    "[DFTRACER ERROR] cannot load the native library libdftracer_core.so: {e}; tracing is off"
                ));
                None
            }
        };
        if let Some(a) = api {
            STATE.store(a.state as *const AtomicU64 as *mut AtomicU64, Ordering::Release);
        }
        api
    })
}

/// `dlsym(handle, "dftracer_rs_api")()`, checked against this build.
fn table(handle: *mut libc::c_void) -> Result<&'static Api, String> {
    // SAFETY: a valid handle from dlopen; SYMBOL is NUL-terminated.
    let sym = unsafe { libc::dlsym(handle, SYMBOL.as_ptr().cast()) };
    if sym.is_null() {
        return Err("it has no dftracer_rs_api table".into());
    }
    // SAFETY: the symbol is `extern "C" fn() -> *const Api` (frontends/preload/src/api.rs).
    let f: extern "C" fn() -> *const Api = unsafe { std::mem::transmute(sym) };
    // SAFETY: the table is a static of the library, which is never unloaded (no dlclose).
    let api = unsafe { &*f() };
    if api.build_id != BUILD_ID {
        return Err(format!(
            "it comes from another build (core {} vs {})",
            api.build_id, BUILD_ID
        ));
    }
    Ok(api)
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a valid C string.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-null C string from dlerror.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

/// The copy already in the process (matched by its SONAME, `libdftracer_core.so.4.3.0`, or
/// by the name an older build had), else the one in the wheel. A loaded library of that name
/// without our table is another implementation's (the reference's): not ours to share.
fn load() -> Result<&'static Api, String> {
    for name in [c"libdftracer_core.so.4.3.0", c"libdftracer_core.so"] {
        // SAFETY: dlopen with RTLD_NOLOAD only looks up an object already loaded.
        let loaded = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if loaded.is_null() {
            continue;
        }
        // SAFETY: a valid handle from dlopen; SYMBOL is NUL-terminated.
        if unsafe { libc::dlsym(loaded, SYMBOL.as_ptr().cast()) }.is_null() {
            continue;
        }
        match table(loaded) {
            Ok(api) => return Ok(api),
            Err(e) => {
                dftracer_core::frontend::eprint_line(&format!(
                    "[DFTRACER WARN] the libdftracer_core.so already in this process cannot be shared ({e}); using the module's own copy: this process writes two trace files"
                ));
                break;
            }
        }
    }
    let path = bundled_path().ok_or_else(|| "cannot locate the dftracer package".to_string())?;
    let c = CString::new(path.clone()).map_err(|_| "bad path".to_string())?;
    // SAFETY: a valid path; RTLD_LOCAL keeps the library's symbols out of the global scope.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        return Err(format!("{path}: {}", dlerror()));
    }
    table(h).map_err(|e| format!("{path}: {e}"))
}

/// `<directory of this extension module>/_native/lib/libdftracer_core.so`.
pub fn bundled_path() -> Option<String> {
    // SAFETY: dladdr fills `info` for an address inside a loaded object (this function).
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let addr = bundled_path as *const () as *const libc::c_void;
    // SAFETY: valid pointers.
    if unsafe { libc::dladdr(addr, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a valid C string for a loaded object.
    let me = unsafe { CStr::from_ptr(info.dli_fname) }
        .to_string_lossy()
        .into_owned();
    let dir = std::path::Path::new(&me).parent()?;
    Some(
        dir.join("_native/lib/libdftracer_core.so")
            .to_string_lossy()
            .into_owned(),
    )
}

/// One load (plus the pointer to the word): is tracing on?
#[inline]
pub fn is_enabled() -> bool {
    // SAFETY: STATE always points at a static AtomicU64 (ours or the library's).
    unsafe { &*STATE.load(Ordering::Relaxed) }.load(Ordering::Relaxed) & 1 == 1
}

pub fn config_from_env() -> Config {
    match api() {
        Some(a) => (a.config_from_env)(),
        None => Config::default(),
    }
}

/// Whether the Python API binds the process's POSIX/stdio calls in process: the
/// configuration names data dirs (none: no binding at all) and `DFTRACER_INIT` is FUNCTION
/// (the default). PRELOAD leaves interception to the preload library; any other value
/// (HYBRID included) means none, as in the reference.
fn binds_io(cfg: &Config) -> bool {
    cfg.io && cfg.data_dirs.is_some() && cfg.init == dftracer_core::InitMode::Function
}

/// Starts the core; the process's POSIX/stdio calls on the data dirs are traced when
/// [`binds_io`] says so.
pub fn init(cfg: Config, origin: Origin, api_log_file: Option<&str>) -> Result<(), Error> {
    let a = api().ok_or(Error::Disabled)?;
    let io = binds_io(&cfg);
    (a.start)(cfg, origin, api_log_file, io)
}

/// An explicit `initialize` found the core running (see [`Api::join`]): binds the data dirs
/// of `cfg` (the argument's, `arg_dirs`, first) when I/O interception is not on yet and
/// [`binds_io`], or replaces the data dirs of the interception in force.
pub fn join(cfg: Config, log_file: Option<&str>, arg_dirs: Option<&str>) {
    if let Some(a) = api() {
        let io = binds_io(&cfg);
        (a.join)(cfg, log_file, arg_dirs, io)
    }
}

#[inline]
pub fn complete(layer: Layer, name: &[u8], cat: &[u8], ts: u64, dur: u64, args: &[Arg<'_>]) {
    if let Some(a) = api() {
        (a.complete)(layer, name, cat, ts, dur, args)
    }
}

/// The slot an arg's value takes in a schema ([`dftracer_core::intern_args`]) and its slot
/// value (a string's is its length); `None` for a path, or a string over `MAX_STR` bytes
/// (clipped and marked, which only the generic record does).
#[inline(always)]
fn slot_of(v: &dftracer_core::Value) -> Option<(dftracer_core::Slot, u64)> {
    use dftracer_core::{Slot, Value};
    Some(match *v {
        Value::Int(i) => (Slot::Int, i as u64),
        Value::UInt(u) => (Slot::UInt, u),
        Value::Float(f) => (Slot::Float, f.to_bits()),
        Value::Bool(b) => (Slot::Bool, b as u64),
        Value::Str(s) if s.len() <= dftracer_core::frontend::MAX_STR => (Slot::Str, s.len() as u64),
        _ => return None,
    })
}

/// Records an event of `schema` (from `intern_args` for exactly these args' keys and
/// slots): the slot values, and for a mixed schema the strings.
#[inline(always)]
fn complete_schema(a: &Api, schema: ArgsSchema, ts: u64, dur: u64, vals: &[u64], strs: &[&[u8]]) {
    match schema {
        ArgsSchema::Ints(schema) => (a.complete_static)(schema, ts, dur, vals, None),
        ArgsSchema::Mixed(schema) => (a.complete_strs)(schema, ts, dur, vals, strs),
    }
}

/// [`complete`] through the schema of its name, category and arg keys with the kinds of
/// their values (`dftracer_core::intern_args`), when there is or can be one: the ring then
/// carries the values and the strings' bytes only, and the writer renders the line from the
/// schema's template (the same line). Otherwise (a key or name that needs escaping, a
/// string over `MAX_STR` bytes that must be clipped, a full table...) as [`complete`].
#[inline]
pub fn complete_args(layer: Layer, name: &[u8], cat: &[u8], ts: u64, dur: u64, args: &[Arg<'_>]) {
    let Some(a) = api() else { return };
    let mut keys: heapless::Vec<(&[u8], dftracer_core::Slot), MAX_PY_ARGS> = heapless::Vec::new();
    let fits = args
        .iter()
        .all(|arg| slot_of(&arg.value).is_some_and(|(s, _)| keys.push((arg.key, s)).is_ok()));
    if fits {
        if let Some(schema) = (a.intern_args)(layer, name, cat, &keys) {
            let mut vals: heapless::Vec<u64, MAX_PY_ARGS> = heapless::Vec::new();
            let mut strs: heapless::Vec<&[u8], MAX_PY_ARGS> = heapless::Vec::new();
            for arg in args {
                // At most MAX_PY_ARGS args: no push fails.
                let _ = vals.push(slot_of(&arg.value).map_or(0, |s| s.1));
                if let dftracer_core::Value::Str(s) = arg.value {
                    let _ = strs.push(s);
                }
            }
            return complete_schema(a, schema, ts, dur, &vals, &strs);
        }
    }
    (a.complete)(layer, name, cat, ts, dur, args)
}

/// Records a common `log_event` call ([`crate::fast::Call`]) as [`complete_args`] does,
/// the schema found by the identity of its name, category and key objects
/// ([`crate::arg_schemas`]) instead of their bytes: a hit needs no UTF-8 and no check that
/// the keys of its dicts differ (its entry was made from a call of the same objects that
/// passed [`crate::fast::Call::text`]). `None`: the general path must record the call
/// (nothing was recorded, no exception is set).
///
/// # Safety
/// The GIL is held; the call's objects are live.
#[inline(always)]
pub unsafe fn complete_call(c: &crate::fast::Call) -> Option<()> {
    let a = api();
    if let Some(a) = a {
        if c.fits {
            let shape = crate::arg_schemas::Shape {
                name: c.name,
                cat: c.cat,
                keys: c.shape,
            };
            // SAFETY: per this function's contract (exact str objects: `fast` checked them).
            if let Some(schema) = unsafe { crate::arg_schemas::find(&shape) } {
                complete_schema(a, schema, c.ts, c.dur, c.vals, c.strs);
                return Some(());
            }
        }
    }
    // SAFETY: per this function's contract.
    unsafe { complete_call_rest(a, c) }
}

/// [`complete_call`] past a cache hit, out of line: the call's text read and checked, its
/// schema made from it and entered (when it fits), else a record through [`complete_args`].
///
/// # Safety
/// As [`complete_call`].
#[cold]
#[inline(never)]
unsafe fn complete_call_rest(a: Option<&'static Api>, c: &crate::fast::Call) -> Option<()> {
    use crate::arg_schemas::{insert, Shape, KEYS};
    // SAFETY: per this function's contract.
    let t = unsafe { c.text() }?;
    // Nothing to record with (never so while tracing is on): the call was still checked.
    let Some(a) = a else { return Some(()) };
    if c.fits && c.shape.len() <= KEYS {
        let mut keys: heapless::Vec<(&[u8], dftracer_core::Slot), KEYS> = heapless::Vec::new();
        for (&k, &(_, slot)) in t.keys.iter().zip(c.shape) {
            let _ = keys.push((k, slot)); // at most KEYS
        }
        if let Some(schema) = (a.intern_args)(Layer::Python, t.name, t.cat, &keys) {
            let shape = Shape {
                name: c.name,
                cat: c.cat,
                keys: c.shape,
            };
            // SAFETY: per this function's contract (exact str objects: `fast` checked them).
            unsafe { insert(&shape, schema) };
            complete_schema(a, schema, c.ts, c.dur, c.vals, c.strs);
            return Some(());
        }
    }
    complete_args(Layer::Python, t.name, t.cat, c.ts, c.dur, &c.args(&t.keys));
    Some(())
}

/// The core's schema for events named `name` in `cat` without args (`dftracer_core::intern`).
#[inline]
pub fn intern(layer: Layer, name: &[u8], cat: &[u8]) -> Option<&'static dftracer_core::Schema> {
    api().and_then(|a| (a.intern)(layer, name, cat))
}

/// The core's schema for events named `name` in `cat` with integer args under `keys`
/// (`dftracer_core::intern_keyed`).
pub fn intern_keyed(
    layer: Layer,
    name: &[u8],
    cat: &[u8],
    keys: &'static [(&'static str, dftracer_core::Slot)],
) -> Option<&'static dftracer_core::Schema> {
    api().and_then(|a| (a.intern_keyed)(layer, name, cat, keys))
}

/// An event of an interned schema, without args.
#[inline]
pub fn complete_interned(schema: &'static dftracer_core::Schema, ts: u64, dur: u64) {
    if let Some(a) = api() {
        (a.complete_static)(schema, ts, dur, &[], None)
    }
}

pub fn metadata(layer: Layer, name: &[u8], key: &[u8], value: &[u8]) {
    if let Some(a) = api() {
        (a.metadata)(layer, name, key, value)
    }
}

#[inline]
pub fn now() -> u64 {
    api().map(|a| (a.now)()).unwrap_or(0)
}

/// A raw clock read (cheaper than [`now`]): only for [`end_ticks`] or [`ticks_in_unit`].
#[inline]
pub fn ticks() -> u64 {
    api().map(|a| (a.ticks)()).unwrap_or(0)
}

/// Ends an event of `schema` begun at [`ticks`] `t0`, with its slot values: the end is read
/// in the core, and the writer converts both.
#[inline]
pub fn end_ticks(schema: &'static dftracer_core::Schema, t0: u64, vals: &[u64]) {
    if let Some(a) = api() {
        (a.end_ticks)(schema, t0, vals)
    }
}

/// A [`ticks`] value as the [`now`] value of that instant.
pub fn ticks_in_unit(t: u64) -> u64 {
    api().map(|a| (a.ticks_in_unit)(t)).unwrap_or(0)
}

pub fn finalize() {
    if let Some(a) = api() {
        (a.finalize)()
    }
}

pub fn flush() {
    if let Some(a) = api() {
        (a.flush)()
    }
}

/// This module joins a core started by the preload library: one `-app` file.
pub fn claim_for_app() {
    if let Some(a) = api() {
        (a.claim_for_app)()
    }
}

pub fn config() -> Option<Config> {
    api().and_then(|a| (a.config)())
}

pub fn set_app_metadata(key: &str, value: AppValue) {
    if let Some(a) = api() {
        (a.set_app_metadata)(key, value)
    }
}

pub fn mark_used(name: &str) {
    if let Some(a) = api() {
        (a.mark_used)(name)
    }
}

pub fn name_thread(tid: u32, name: &str) {
    if let Some(a) = api() {
        (a.name_thread)(tid, name)
    }
}

pub fn trace_path() -> Option<String> {
    api().and_then(|a| (a.trace_path)())
}

pub fn stats() -> Stats {
    api().map(|a| (a.stats)()).unwrap_or_default()
}

pub fn is_running() -> bool {
    api().is_some_and(|a| (a.is_running)())
}

pub fn is_finalized() -> bool {
    api().is_some_and(|a| (a.is_finalized)())
}

pub fn prefix() -> Option<String> {
    api().and_then(|a| (a.prefix)())
}

pub fn export_env_at_init(on: bool) {
    if let Some(a) = api() {
        (a.export_env_at_init)(on)
    }
}

pub fn child_env() -> Vec<(&'static str, String)> {
    api().map(|a| (a.child_env)()).unwrap_or_default()
}
