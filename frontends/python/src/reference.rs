//! The reference's module functions (`initialize`, `get_time`, `get_config`,
//! `log_metadata_event`, `set_app_metadata_*`, `mark_used`, `finalize`, ...) that pydftracer
//! calls, and the extras of `dftracer.python` (`trace_path`, `stats`, `flush`, `is_enabled`).
//! `log_event` has its own entry: [`crate::log_event`].

use dftracer_core::{AppValue, Layer};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::convert::{text, utf8_of};
use crate::native;
use crate::start::{active, config, Module, START};

/// Starts tracing. `log_file` is a path whose extension is stripped to make the prefix;
/// `data_dirs` is joined to `DFTRACER_DATA_DIR`; `process_id` is accepted and ignored (the
/// trace always holds the real pid).
#[pyfunction]
#[pyo3(signature = (log_file=None, data_dirs=None, process_id=None))]
pub(crate) fn initialize(
    log_file: Option<&Bound<'_, PyAny>>,
    data_dirs: Option<&Bound<'_, PyAny>>,
    process_id: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let _ = process_id;
    let opt_str = |v: Option<&Bound<'_, PyAny>>, what: &str| -> PyResult<Option<String>> {
        match v {
            None => Ok(None),
            Some(v) if v.is_none() => Ok(None),
            Some(v) => {
                if let Ok(s) = v.downcast::<PyString>() {
                    return Ok(Some(s.to_string_lossy().into_owned()));
                }
                // os.PathLike
                if let Ok(p) = v.call_method0("__fspath__") {
                    if let Ok(s) = p.downcast::<PyString>() {
                        return Ok(Some(s.to_string_lossy().into_owned()));
                    }
                }
                Err(PyTypeError::new_err(format!(
                    "initialize(): {what} must be a str or path, not {}",
                    v.get_type().name()?
                )))
            }
        }
    };
    let log_file = opt_str(log_file, "log_file")?;
    let data_dirs = opt_str(data_dirs, "data_dirs")?;
    START.initialize(&Module, log_file.as_deref(), data_dirs.as_deref());
    Ok(())
}

/// Current time in the configured unit; 0 when tracing is off. After `finalize()` the clock
/// goes on: pydftracer's wrappers (DLIO's finalize runs inside a decorated function) compute
/// `get_time() - start` after it, and the event they then log is dropped and counted
/// ([`late_event`]).
#[pyfunction]
pub(crate) fn get_time() -> u64 {
    if active() || native::is_finalized() {
        native::now()
    } else {
        0
    }
}

/// Events given to `log_event` after `finalize()`: dropped (the trace is complete).
static LATE_EVENTS: AtomicU64 = AtomicU64::new(0);

/// Counts an event that arrived after `finalize()` (one stderr line the first time).
#[cold]
pub(crate) fn late_event() {
    if LATE_EVENTS.fetch_add(1, Ordering::Relaxed) == 0 && config().logs("WARN") {
        dftracer_core::frontend::eprint_line(
            "[DFTRACER WARN] an event was logged after finalize(): dropped (the trace is complete); \
             dftracer.dftracer.stats()['after_finalize'] counts them",
        );
    }
}

/// The value of a configuration key (`ENABLE`, `LOG_FILE`, ...); `""` for unknown keys.
#[pyfunction]
pub(crate) fn get_config(key: &str) -> String {
    match native::config() {
        Some(c) => c.get(key),
        None => config().get(key),
    }
}

/// Kept for compatibility: returns 0.
#[pyfunction]
pub(crate) fn enter_event() -> u64 {
    0
}

/// Kept for compatibility: does nothing.
#[pyfunction]
pub(crate) fn exit_event() {}

/// Writes a `CM` metadata record `{name: key, value: value}`.
#[pyfunction]
pub(crate) fn log_metadata_event(key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
    let key = key
        .downcast::<PyString>()
        .map_err(|_| PyTypeError::new_err("log_metadata_event(): key must be a str"))?;
    let value = text(value);
    if active() {
        native::metadata(
            Layer::Python,
            b"CM",
            utf8_of(key).as_bytes(),
            value.as_bytes(),
        );
    }
    Ok(())
}

#[pyfunction]
pub(crate) fn set_app_metadata_int(key: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
    let v: i64 = value.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "set_app_metadata_int(): value must be a 64-bit int, not {}",
            text(value)
        ))
    })?;
    if active() {
        native::set_app_metadata(key, AppValue::Int(v));
    }
    Ok(())
}

#[pyfunction]
pub(crate) fn set_app_metadata_string(key: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
    if active() {
        native::set_app_metadata(key, AppValue::Str(text(value).into_owned()));
    }
    Ok(())
}

/// Adds `name` to the `used` map of the `end` record.
#[pyfunction]
pub(crate) fn mark_used(name: &str) {
    // Before the start too (an integration object made at import): kept for it.
    if active() || !native::is_finalized() {
        native::mark_used(name);
    }
}

/// Names thread `tid` (`threading.get_native_id()`) in the trace (its `thread_name` record);
/// `dftracer._threads` calls it for every thread `threading` starts.
#[pyfunction]
pub(crate) fn _name_thread(tid: u64, name: &Bound<'_, PyAny>) {
    if config().enable && !native::is_finalized() {
        if let Ok(tid) = u32::try_from(tid) {
            native::name_thread(tid, &text(name));
        }
    }
}

/// Which CPython int layout the fast paths read small ints in ("sized": 3.9 to 3.11,
/// "tagged": 3.12 and 3.13; "": none, every int through `PyLong_AsLongAndOverflow`): for the
/// tests, which check that it is in use where it should be.
#[pyfunction]
pub(crate) fn _int_layout() -> &'static str {
    crate::internals::int_layout()
}

/// Writes `end`, flushes and closes the trace. Idempotent; later events are ignored.
#[pyfunction]
pub(crate) fn finalize(py: Python<'_>) {
    py.allow_threads(native::finalize);
}

/// Where this process's trace is (or will be); None when tracing is off.
#[pyfunction]
pub(crate) fn trace_path() -> Option<String> {
    native::trace_path()
}

/// `{events, bytes, dropped, lost, path}` of this process.
#[pyfunction]
pub(crate) fn stats(py: Python<'_>) -> PyResult<PyObject> {
    let s = native::stats();
    let d = PyDict::new(py);
    d.set_item("events", s.events)?;
    d.set_item("bytes", s.bytes)?;
    d.set_item("dropped", s.dropped)?;
    d.set_item("lost", s.lost)?;
    d.set_item("path", s.path)?;
    d.set_item("after_finalize", LATE_EVENTS.load(Ordering::Relaxed))?;
    Ok(d.into_any().unbind())
}

/// Writes what was recorded so far (tests, checkpoints).
#[pyfunction]
pub(crate) fn flush(py: Python<'_>) {
    py.allow_threads(native::flush);
}

/// True when tracing is configured on in this process and not finalized: it records, or will
/// once started (on first use, or by an `initialize(log_file)` after a start from the
/// environment failed). Decorators check this when they are applied, so a function decorated
/// before a later `initialize(log_file=...)` is traced once that starts the tracer.
#[pyfunction]
pub(crate) fn is_enabled() -> bool {
    native::is_enabled() || (config().enable && !native::is_finalized())
}
