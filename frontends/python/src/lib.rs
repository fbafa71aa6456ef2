//! `dftracer.dftracer`: the reference's native module (same functions and signatures, so
//! pydftracer runs unchanged on top of it) plus the native hot paths of `dftracer.python`:
//! `_Wrapped` (the decorator's wrapper) and `dft_fn` (`dftracer.python.dft_fn`).
//!
//! This file is the module's definition; the policy lives in core (the lazy start:
//! `dftracer_core::start`). Tracing starts lazily on the first event when `DFTRACER_ENABLE`
//! says so (so spawned workers that only import annotated code are traced), and an explicit
//! `initialize(path)` after that still decides the file name (core `retarget`).
//!
//! Files: `start.rs` (this module's side of the lazy start, exit hooks), `reference.rs` (the
//! reference's functions), `log_event.rs`, `convert.rs` (Python values to core args, the
//! general path), `fast.rs` (the common shapes on borrowed pointers), `params.rs`
//! (vectorcall argument sorting), `wrapped.rs` (`_Wrapped`), `dft_fn.rs` and
//! `dft_fn_slots.rs` (`dft_fn` and its C entries), `updates.rs` (`update()` during a
//! decorated call), `captured.rs` (captured values as keyed schema slots), `tracer.rs`
//! (`_Tracer`), `native.rs` (the native library's core), `internals.rs` (the one file
//! relying on pyo3 0.23 internals and CPython layouts).
//!
//! Unsafe code is denied here and allowed only in the modules that need it (each says why;
//! each block has a SAFETY note).
#![deny(unsafe_code)]

mod arg_schemas;
mod captured;
mod convert;
mod dft_fn;
mod dft_fn_slots;
mod fast;
mod internals;
mod log_event;
mod native;
mod params;
mod reference;
mod start;
mod tracer;
mod updates;
mod wrapped;

/// The native library's allocator, here too: Rust values (the child environment's strings,
/// reports) cross between it and this module through the `Api` table, each side freeing what
/// the other allocated. Two copies of `TracerHeap` may exchange blocks (a block carries no
/// header; each copy's lists take any block of their class), and neither touches the
/// program's `malloc` heap.
#[global_allocator]
static HEAP: dftracer_core::frontend::TracerHeap = dftracer_core::frontend::TracerHeap;

use pyo3::prelude::*;
use pyo3::PyTypeInfo;

/// Marks this object as part of the tracer: the in-process I/O binder never rewrites its GOT.
#[allow(unsafe_code)] // `no_mangle` (an exported symbol the binder looks up)
#[no_mangle]
pub static dftracer_core_marker: u8 = 0;

/// Most args collected from Python per event (core keeps 32 and counts the rest).
pub(crate) const MAX_PY_ARGS: usize = 40;

// gil_used = true (pyo3's default, said here): the module is not claimed safe without the
// GIL (its fast paths read dicts, strings and reference counts under the GIL's guarantees),
// so a free-threaded CPython (3.13t) re-enables the GIL when it imports the module, and says
// so with a RuntimeWarning.
#[pymodule(gil_used = true)]
fn dftracer(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // This module exports the settings to children itself, through os.environ.
    native::export_env_at_init(false);
    internals::probe_ints(m.py())?;
    m.add_function(wrap_pyfunction!(reference::initialize, m)?)?;
    m.add_function(wrap_pyfunction!(reference::get_time, m)?)?;
    m.add_function(wrap_pyfunction!(reference::_name_thread, m)?)?;
    m.add_function(wrap_pyfunction!(reference::get_config, m)?)?;
    m.add_function(wrap_pyfunction!(reference::enter_event, m)?)?;
    m.add_function(wrap_pyfunction!(reference::exit_event, m)?)?;
    m.add_function(wrap_pyfunction!(reference::log_metadata_event, m)?)?;
    m.add_function(wrap_pyfunction!(reference::set_app_metadata_int, m)?)?;
    m.add_function(wrap_pyfunction!(reference::set_app_metadata_string, m)?)?;
    m.add_function(wrap_pyfunction!(reference::mark_used, m)?)?;
    m.add_function(wrap_pyfunction!(reference::finalize, m)?)?;
    m.add_function(wrap_pyfunction!(reference::trace_path, m)?)?;
    m.add_function(wrap_pyfunction!(reference::stats, m)?)?;
    m.add_function(wrap_pyfunction!(reference::flush, m)?)?;
    m.add_function(wrap_pyfunction!(reference::is_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(reference::_int_layout, m)?)?;
    m.add_function(wrap_pyfunction!(start::_exit, m)?)?;
    m.add_function(wrap_pyfunction!(start::_before_exec, m)?)?;
    m.add_class::<wrapped::Wrapped>()?;
    wrapped::enable_vectorcall(m.py())?;
    m.add_class::<dft_fn::DftFn>()?;
    dft_fn_slots::enable_dft_fn_fast_new(m.py());
    dft_fn_slots::add_dft_fn_protocol(m.py())?;
    // pydftracer's log_init and log_static decorate as log does.
    let dft_fn = dft_fn::DftFn::type_object(m.py());
    for alias in ["log_init", "log_static"] {
        dft_fn.setattr(alias, dft_fn.getattr("log")?)?;
    }
    m.add_class::<tracer::Tracer>()?;
    log_event::add_log_event(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    if start::config().enable {
        start::install_exit_hook(m)?;
        // Python thread names in the trace (dftracer/_threads.py); a missing or broken file
        // costs the names, never the import.
        let names = m
            .py()
            .import("dftracer._threads")
            .and_then(|t| t.call_method1("install", (m.getattr("_name_thread")?,)));
        if let Err(e) = names {
            dftracer_core::frontend::eprint_line(&format!(
                "[DFTRACER WARN] Python thread names are not traced: {e}"
            ));
        }
    }
    Ok(())
}
