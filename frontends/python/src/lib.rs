//! `dftracer.dftracer`: the reference's native module (same functions and signatures, so
//! pydftracer runs unchanged on top of it) plus the native hot paths of `dftracer.python`:
//! [`Wrapped`] (the decorator's wrapper) and [`Region`] (the `dft_fn` context manager).
//!
//! This crate only converts Python values and calls `dftracer_core`; the policy lives in core.
//! Tracing starts lazily on the first event when `DFTRACER_ENABLE` says so (so spawned
//! workers that only import annotated code are traced), and an explicit `initialize(path)`
//! after that still decides the file name (core `retarget`).
#![allow(unsafe_code)] // pyo3 macros, and the vectorcall entry of _Wrapped (each block has a SAFETY note).

mod native;

/// Marks this object as part of the tracer: the in-process I/O binder never rewrites its GOT.
#[no_mangle]
pub static dftracer_core_marker: u8 = 0;

use dftracer_core::{AppValue, Arg, Config, Layer, Origin, Value};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString, PyTuple};
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// Most args collected from Python per event (core keeps 32 and counts the rest).
const MAX_PY_ARGS: usize = 40;

static CONFIG: OnceLock<Config> = OnceLock::new();
/// `initialize()` was called explicitly (a second one is ignored, like the reference).
static EXPLICIT: AtomicBool = AtomicBool::new(false);
/// Set once events have decided not to start the tracer (disabled, finalized, or the start
/// failed): the lazy start is not tried again, so an event then costs what tracing off costs.
static NO_LAZY_START: AtomicBool = AtomicBool::new(false);
static ORIG_EXIT: GILOnceCell<PyObject> = GILOnceCell::new();

fn config() -> &'static Config {
    CONFIG.get_or_init(native::config_from_env)
}

/// True when events should be recorded, starting the tracer from the environment on first
/// use. One load when running; two when off or after a failed start.
#[inline]
fn active() -> bool {
    native::is_enabled() || (!NO_LAZY_START.load(Ordering::Relaxed) && start_from_env())
}

#[cold]
fn start_from_env() -> bool {
    if native::is_finalized() || !config().enable {
        NO_LAZY_START.store(true, Ordering::Relaxed);
        return false;
    }
    match native::init(config().clone(), Origin::App, None) {
        Ok(()) => {
            export_env();
            true
        }
        Err(dftracer_core::Error::AlreadyInitialized) => {
            // The preload library started the core: the trace is the application's now.
            native::claim_for_app();
            native::is_enabled()
        }
        Err(e) => {
            NO_LAZY_START.store(true, Ordering::Relaxed);
            report_once(&e);
            false
        }
    }
}

/// A start error was printed: later lazy starts stay quiet.
static REPORTED: AtomicBool = AtomicBool::new(false);

fn report(e: &dftracer_core::Error) {
    REPORTED.store(true, Ordering::Relaxed);
    dftracer_core::eprint_line(&format!("[DFTRACER ERROR] {e}"));
}

fn report_once(e: &dftracer_core::Error) {
    if !REPORTED.swap(true, Ordering::Relaxed) {
        dftracer_core::eprint_line(&format!("[DFTRACER ERROR] {e}"));
    }
}

/// Children (subprocess, multiprocessing spawn) inherit where to write: set through
/// `os.environ` under the GIL, as Python code sets the environment (it also keeps
/// `os.environ` itself right for code that copies it). The core's own `setenv` is off for
/// this module (see ARCHITECTURE.md, gotchas).
fn export_env() {
    Python::with_gil(|py| {
        let set = || -> PyResult<()> {
            let environ = py.import("os")?.getattr("environ")?;
            for (k, v) in native::child_env() {
                environ.set_item(k, v)?;
            }
            Ok(())
        };
        if let Err(e) = set() {
            dftracer_core::eprint_line(&format!(
                "[DFTRACER WARN] cannot export the trace settings to child processes: {e}"
            ));
        }
    });
}

// ------------------------------------------------------------------ argument conversion

/// A Python value converted for the core, borrowing Python strings where possible.
enum PyVal<'py> {
    Int(i64),
    UInt(u64),
    Float(f64),
    Bool(bool),
    Str(Bound<'py, PyString>),
    Owned(String),
}

impl PyVal<'_> {
    /// The value for the core; `None` for a str that is not valid UTF-8 (lone surrogates:
    /// see `record_lossy`).
    #[inline]
    fn value(&self) -> Option<Value<'_>> {
        Some(match self {
            PyVal::Int(i) => Value::Int(*i),
            PyVal::UInt(u) => Value::UInt(*u),
            PyVal::Float(f) => Value::Float(*f),
            PyVal::Bool(b) => Value::Bool(*b),
            PyVal::Str(s) => Value::Str(s.to_str().ok()?.as_bytes()),
            PyVal::Owned(s) => Value::Str(s.as_bytes()),
        })
    }

    /// Which of `int_args`, `string_args`, `float_args` a converted value came from.
    fn kind(&self) -> Kind {
        match self {
            PyVal::Int(_) | PyVal::UInt(_) | PyVal::Bool(_) => Kind::Int,
            PyVal::Float(_) => Kind::Float,
            PyVal::Str(_) | PyVal::Owned(_) => Kind::Str,
        }
    }
}

/// UTF-8 of a Python str without copying. A str with lone surrogates (which UTF-8 cannot
/// hold) is converted with each surrogate replaced by U+FFFD: only then is anything copied.
fn utf8_of<'a>(s: &'a Bound<'_, PyString>) -> Cow<'a, str> {
    match s.to_str() {
        Ok(v) => Cow::Borrowed(v),
        Err(_) => Cow::Owned(replace_surrogates(s)),
    }
}

#[cold]
fn replace_surrogates(s: &Bound<'_, PyString>) -> String {
    // 'surrogatepass' writes each lone surrogate as its 3-byte (invalid) UTF-8 form
    // ED A0..BF 80..BF; everything else is valid UTF-8.
    let bytes = match s.call_method1("encode", ("utf-8", "surrogatepass")) {
        Ok(b) => b,
        Err(_) => return s.to_string_lossy().into_owned(),
    };
    let Ok(mut rest) = bytes.extract::<&[u8]>() else {
        return s.to_string_lossy().into_owned();
    };
    let mut out = String::with_capacity(rest.len());
    loop {
        match std::str::from_utf8(rest) {
            Ok(v) => {
                out.push_str(v);
                return out;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                out.push(char::REPLACEMENT_CHARACTER);
                let skip = if bad.len() >= 3 && bad[0] == 0xED && (0xA0..=0xBF).contains(&bad[1]) {
                    3
                } else {
                    e.error_len().unwrap_or(bad.len())
                };
                rest = &bad[skip..];
            }
        }
    }
}

fn text<'py>(s: &Bound<'py, PyAny>) -> Cow<'static, str> {
    match s.str() {
        Ok(v) => Cow::Owned(utf8_of(&v).into_owned()),
        Err(_) => Cow::Borrowed("<unprintable>"),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Int,
    Str,
    Float,
}

impl Kind {
    /// Suffix of a key that also appears in a later dict (see `collect`).
    fn suffix(self) -> &'static str {
        match self {
            Kind::Int => "int",
            Kind::Str => "str",
            Kind::Float => "float",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Kind::Int => "an int",
            Kind::Str => "a str",
            Kind::Float => "a float",
        }
    }
}

fn int_val<'py>(v: &Bound<'py, PyAny>, arg: &str, key: &str) -> PyResult<PyVal<'py>> {
    if let Ok(i) = v.extract::<i64>() {
        return Ok(PyVal::Int(i));
    }
    if let Ok(u) = v.extract::<u64>() {
        return Ok(PyVal::UInt(u));
    }
    Err(PyValueError::new_err(format!(
        "log_event(): {arg}[{key:?}] = {} does not fit in 64 bits",
        text(v)
    )))
}

/// Converts one value of `int_args`/`string_args`/`float_args` (bare, or a `(tag, value)`
/// tuple as the reference takes).
fn convert<'py>(v: &Bound<'py, PyAny>, kind: Kind, arg: &str, key: &str) -> PyResult<PyVal<'py>> {
    let v = match v.downcast::<PyTuple>() {
        Ok(t) if t.len() == 2 => t.get_item(1)?,
        Ok(_) => {
            return Err(PyTypeError::new_err(format!(
                "log_event(): {arg}[{key:?}] must be {} or a (tag, value) pair, not a tuple of {}",
                kind.what(),
                v.len().unwrap_or(0)
            )))
        }
        Err(_) => v.clone(),
    };
    let bad = || {
        PyTypeError::new_err(format!(
            "log_event(): {arg}[{key:?}] must be {} (or a (tag, value) pair), not {}",
            kind.what(),
            v.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    };
    if v.is_instance_of::<PyBool>() {
        return match kind {
            Kind::Int => Ok(PyVal::Bool(v.extract::<bool>()?)),
            _ => Err(bad()),
        };
    }
    if v.is_instance_of::<PyInt>() {
        return match kind {
            Kind::Int => int_val(&v, arg, key),
            // An int where a float is expected is still a number.
            Kind::Float => Ok(PyVal::Float(v.extract::<f64>()?)),
            Kind::Str => Err(bad()),
        };
    }
    if v.is_instance_of::<PyFloat>() {
        return match kind {
            Kind::Float => Ok(PyVal::Float(v.extract::<f64>()?)),
            _ => Err(bad()),
        };
    }
    if let Ok(s) = v.downcast::<PyString>() {
        return match kind {
            Kind::Str => Ok(PyVal::Str(s.clone())),
            _ => Err(bad()),
        };
    }
    Err(bad())
}

type Collected<'py> = heapless::Vec<(Bound<'py, PyString>, PyVal<'py>), MAX_PY_ARGS>;

fn collect<'py>(
    out: &mut Collected<'py>,
    map: Option<&Bound<'py, PyAny>>,
    kind: Kind,
    arg: &str,
) -> PyResult<()> {
    let Some(map) = map else { return Ok(()) };
    if map.is_none() {
        return Ok(());
    }
    let mut add = |k: Bound<'py, PyAny>, v: Bound<'py, PyAny>| -> PyResult<bool> {
        let key = k.downcast_into::<PyString>().map_err(|e| {
            PyTypeError::new_err(format!(
                "log_event(): keys of {arg} must be str, not {}",
                e.into_inner()
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?;
        let val = convert(&v, kind, arg, &utf8_of(&key))?;
        if let Some(i) = out.iter().position(|(k2, _)| same_key(k2, &key)) {
            if out[i].1.kind() == kind {
                // A mapping (not a dict) that repeats a key: its last value.
                out[i].1 = val;
                return Ok(true);
            }
            // The same key in two of int_args, string_args, float_args (pydftracer's dft_fn
            // does this when an update() value changes type): every value is kept. The later
            // dict (order int, string, float, where the reference keeps the last) keeps the
            // key; the earlier value is written as `<key>_<int|str|float>`.
            let renamed = suffixed(&*out, &out[i].0, out[i].1.kind());
            out[i].0 = PyString::new(key.py(), &renamed);
        }
        // Over MAX_PY_ARGS: the core reports dropped args; keep the first ones.
        Ok(out.push((key, val)).is_ok())
    };
    if let Ok(d) = map.downcast::<PyDict>() {
        for (k, v) in d.iter() {
            if !add(k, v)? {
                break;
            }
        }
        return Ok(());
    }
    if !map.hasattr("items")? {
        return Err(PyTypeError::new_err(format!(
            "log_event(): {arg} must be a mapping of str to values, not {}",
            map.get_type().name()?
        )));
    }
    for item in map.call_method0("items")?.try_iter()? {
        let (k, v): (Bound<PyAny>, Bound<PyAny>) = item?.extract()?;
        if !add(k, v)? {
            break;
        }
    }
    Ok(())
}

fn same_key(a: &Bound<'_, PyString>, b: &Bound<'_, PyString>) -> bool {
    match (a.to_str(), b.to_str()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.as_any().eq(b).unwrap_or(false),
    }
}

/// `<key>_<suffix>`, with the suffix repeated until no collected key has that name.
#[cold]
fn suffixed(out: &Collected, key: &Bound<'_, PyString>, kind: Kind) -> String {
    let mut name = format!("{}_{}", utf8_of(key), kind.suffix());
    while out.iter().any(|(k, _)| utf8_of(k) == name.as_str()) {
        name.push('_');
        name.push_str(kind.suffix());
    }
    name
}

fn record(name: &[u8], cat: &[u8], ts: u64, dur: u64, vals: &Collected) {
    let mut args: heapless::Vec<Arg, MAX_PY_ARGS> = heapless::Vec::new();
    for (k, v) in vals {
        let (Ok(key), Some(value)) = (k.to_str(), v.value()) else {
            return record_lossy(name, cat, ts, dur, vals);
        };
        let _ = args.push(Arg {
            key: key.as_bytes(),
            value,
        });
    }
    native::complete(Layer::Python, name, cat, ts, dur, &args);
}

/// `record` for args whose keys or str values hold lone surrogates: each is written with
/// U+FFFD in place of a surrogate (FORMAT.md), never as "".
#[cold]
fn record_lossy(name: &[u8], cat: &[u8], ts: u64, dur: u64, vals: &Collected) {
    let keys: Vec<Cow<str>> = vals.iter().map(|(k, _)| utf8_of(k)).collect();
    let strs: Vec<Option<Cow<str>>> = vals
        .iter()
        .map(|(_, v)| match v {
            PyVal::Str(s) => Some(utf8_of(s)),
            _ => None,
        })
        .collect();
    let args: Vec<Arg> = vals
        .iter()
        .zip(keys.iter().zip(&strs))
        .map(|((_, v), (k, s))| Arg {
            key: k.as_bytes(),
            value: match s {
                Some(s) => Value::Str(s.as_bytes()),
                None => v.value().unwrap_or(Value::Str(b"")),
            },
        })
        .collect();
    native::complete(Layer::Python, name, cat, ts, dur, &args);
}

fn time_arg(v: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    if v.is_instance_of::<PyBool>() || !v.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "log_event(): {what} must be an int, not {}",
            v.get_type().name()?
        )));
    }
    v.extract::<u64>().map_err(|_| {
        PyValueError::new_err(format!(
            "log_event(): {what} must be a non-negative 64-bit int, got {}",
            text(v)
        ))
    })
}

fn name_arg<'a>(v: &'a Bound<'_, PyAny>, what: &str) -> PyResult<&'a Bound<'a, PyString>> {
    v.downcast::<PyString>().map_err(|_| {
        PyTypeError::new_err(format!(
            "log_event(): {what} must be a str, not {}",
            v.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })
}

// ------------------------------------------------------------------ reference API

/// Starts tracing. `log_file` is a path whose extension is stripped to make the prefix;
/// `data_dirs` is joined to `DFTRACER_DATA_DIR`; `process_id` is accepted and ignored (the
/// trace always holds the real pid).
#[pyfunction]
#[pyo3(signature = (log_file=None, data_dirs=None, process_id=None))]
fn initialize(
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
    let mut cfg = config().clone();
    if !cfg.enable {
        return Ok(());
    }
    let warn = |what: &str| dftracer_core::eprint_line(&format!("[DFTRACER WARN] {what}"));
    let named = |p: &str| format!("initialize(log_file={p:?})");
    if native::is_finalized() {
        if let Some(p) = &log_file {
            warn(&format!(
                "tracing was finalized in this process; {} ignored",
                named(p)
            ));
        }
        return Ok(());
    }
    let arg_dirs = data_dirs.clone().filter(|d| !d.is_empty());
    if let Some(d) = data_dirs.filter(|d| !d.is_empty()) {
        cfg.data_dirs = Some(match cfg.data_dirs.take() {
            Some(env) => format!("{d}:{env}"),
            None => d,
        });
    }
    let explicit_before = EXPLICIT.swap(true, Ordering::AcqRel);
    if native::is_running() {
        if explicit_before {
            // A second initialize() is ignored, as in the reference; say so when it names
            // another file (the same one again is silent).
            if let Some(p) = &log_file {
                if native::prefix().as_deref() != Some(&dftracer_core::prefix_for(p)) {
                    let now = native::trace_path().unwrap_or_default();
                    warn(&format!("already tracing to {now}; {} ignored", named(p)));
                }
            }
            return Ok(());
        }
        // Started implicitly by an earlier event (or by the preload library): the explicit
        // path still names the file (renamed if already written), it is the application's,
        // and the data dirs are bound now (a `dft_fn` made at import time started it).
        native::join(cfg, log_file.as_deref(), arg_dirs.as_deref());
        export_env();
        return Ok(());
    }
    // Not running: never started, or an earlier start failed (then only a log file path
    // tries again; core init says StartFailed otherwise).
    match native::init(cfg, Origin::App, log_file.as_deref()) {
        Ok(()) => export_env(),
        Err(dftracer_core::Error::AlreadyInitialized) => {}
        Err(dftracer_core::Error::Disabled) | Err(dftracer_core::Error::Finalized) => {}
        Err(e @ dftracer_core::Error::StartFailed) => report_once(&e),
        Err(e) => report(&e),
    }
    Ok(())
}

/// Current time in the configured unit; 0 when tracing is off.
#[pyfunction]
fn get_time() -> u64 {
    if active() {
        native::now()
    } else {
        0
    }
}

/// The value of a configuration key (`ENABLE`, `LOG_FILE`, ...); `""` for unknown keys.
#[pyfunction]
fn get_config(key: &str) -> String {
    match native::config() {
        Some(c) => c.get(key),
        None => config().get(key),
    }
}

/// Kept for compatibility: returns 0.
#[pyfunction]
fn enter_event() -> u64 {
    0
}

/// Kept for compatibility: does nothing.
#[pyfunction]
fn exit_event() {}

/// Records a complete event (type PYTHON). Args may be `(tag, value)` pairs or bare values.
#[pyfunction]
#[pyo3(signature = (name, cat, start_time, duration, int_args=None, string_args=None, float_args=None))]
fn log_event(
    name: &Bound<'_, PyAny>,
    cat: &Bound<'_, PyAny>,
    start_time: &Bound<'_, PyAny>,
    duration: &Bound<'_, PyAny>,
    int_args: Option<&Bound<'_, PyAny>>,
    string_args: Option<&Bound<'_, PyAny>>,
    float_args: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    // Validate first, whether or not tracing is on: bad input is an error either way.
    let name = name_arg(name, "name")?;
    let cat = name_arg(cat, "cat")?;
    let ts = time_arg(start_time, "start_time")?;
    let dur = time_arg(duration, "duration")?;
    let mut vals: Collected = heapless::Vec::new();
    collect(&mut vals, int_args, Kind::Int, "int_args")?;
    collect(&mut vals, string_args, Kind::Str, "string_args")?;
    collect(&mut vals, float_args, Kind::Float, "float_args")?;
    if active() {
        record(
            utf8_of(name).as_bytes(),
            utf8_of(cat).as_bytes(),
            ts,
            dur,
            &vals,
        );
    }
    Ok(())
}

/// Writes a `CM` metadata record `{name: key, value: value}`.
#[pyfunction]
fn log_metadata_event(key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
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
fn set_app_metadata_int(key: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
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
fn set_app_metadata_string(key: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
    if active() {
        native::set_app_metadata(key, AppValue::Str(text(value).into_owned()));
    }
    Ok(())
}

/// Adds `name` to the `used` map of the `end` record.
#[pyfunction]
fn mark_used(name: &str) {
    // Before the start too (an integration object made at import): kept for it.
    if active() || !native::is_finalized() {
        native::mark_used(name);
    }
}

/// Writes `end`, flushes and closes the trace. Idempotent; later events are ignored.
#[pyfunction]
fn finalize(py: Python<'_>) {
    py.allow_threads(native::finalize);
}

// ------------------------------------------------------------------ extras for dftracer.python

/// Where this process's trace is (or will be); None when tracing is off.
#[pyfunction]
fn trace_path() -> Option<String> {
    native::trace_path()
}

/// `{events, bytes, dropped, lost, path}` of this process.
#[pyfunction]
fn stats(py: Python<'_>) -> PyResult<PyObject> {
    let s = native::stats();
    let d = PyDict::new(py);
    d.set_item("events", s.events)?;
    d.set_item("bytes", s.bytes)?;
    d.set_item("dropped", s.dropped)?;
    d.set_item("lost", s.lost)?;
    d.set_item("path", s.path)?;
    Ok(d.into_any().unbind())
}

/// Writes what was recorded so far (tests, checkpoints).
#[pyfunction]
fn flush(py: Python<'_>) {
    py.allow_threads(native::flush);
}

/// True when tracing is (or would be, on first use) on in this process.
#[pyfunction]
fn is_enabled() -> bool {
    native::is_enabled() || (config().enable && !native::is_finalized() && !native::start_failed())
}

/// Replacement of `os._exit`: finishes the trace first (multiprocessing fork workers leave
/// through `os._exit`), then exits.
#[pyfunction]
fn _exit(py: Python<'_>, code: &Bound<'_, PyAny>) -> PyResult<()> {
    py.allow_threads(native::finalize);
    match ORIG_EXIT.get(py) {
        Some(orig) => orig.call1(py, (code,)).map(|_| ()),
        None => Ok(()),
    }
}

/// Called by the `os.execv`/`os.execve` wrappers: finishes the trace before the image goes.
#[pyfunction]
fn _before_exec(py: Python<'_>) {
    if native::is_running() {
        py.allow_threads(native::finalize);
    }
}

fn install_exit_hook(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let os = py.import("os")?;
    let current = os.getattr("_exit")?;
    // Idempotent: never wrap our own wrapper (module re-import, pydftracer on top).
    if current
        .getattr("__module__")
        .ok()
        .and_then(|v| v.extract::<String>().ok())
        == Some("dftracer.dftracer".into())
    {
        return Ok(());
    }
    let _ = ORIG_EXIT.set(py, current.unbind());
    os.setattr("_exit", m.getattr("_exit")?)?;
    // `os.execv`/`os.execve` (which `execl*`/`execvp*` call) replace the image: the trace is
    // finished first, its `end` record last (when I/O is bound in process, the native
    // library's exec hooks do the same for calls from C).
    let globals = pyo3::types::PyDict::new(py);
    globals.set_item("os", &os)?;
    globals.set_item("before", m.getattr("_before_exec")?)?;
    py.run(
        c"def _wrap(orig):\n    def exec_finishing_trace(*a, **k):\n        before()\n        return orig(*a, **k)\n    exec_finishing_trace.__doc__ = orig.__doc__\n    exec_finishing_trace.__wrapped__ = orig\n    return exec_finishing_trace\nfor _n in ('execv', 'execve'):\n    setattr(os, _n, _wrap(getattr(os, _n)))\n",
        Some(&globals),
        None,
    )?;
    // Python-level atexit too: a KeyboardInterrupt exit re-kills the process with SIGINT
    // after interpreter finalization, before C atexit handlers would run.
    py.import("atexit")?
        .call_method1("register", (m.getattr("finalize")?,))?;
    Ok(())
}

// ------------------------------------------------------------------ decorator wrapper

/// What a wrapper records of each call: parameter name and its positional index.
struct Capture {
    name: Py<PyString>,
    index: Option<usize>,
}

/// The callable `dft_fn.log` returns for a plain function: calls the function, records one
/// event (also when it raises), and binds like a function when used as a method.
#[pyclass(dict, module = "dftracer.dftracer", name = "_Wrapped")]
#[repr(C)]
struct Wrapped {
    /// First field (repr C): the type's `tp_vectorcall_offset` points here, so calls skip
    /// building an args tuple and kwargs dict (see `enable_vectorcall`).
    vectorcall: pyo3::ffi::vectorcallfunc,
    func: PyObject,
    name: String,
    cat: String,
    capture: Vec<Capture>,
    /// The first parameter is `self`: also record `self.<capture name>` attributes.
    self_attrs: bool,
    /// Values given to the `dft_fn` (epoch=..., step=...): recorded unless the call passes
    /// its own.
    base: Vec<(Py<PyString>, PyObject)>,
}

fn py_val<'py>(v: &Bound<'py, PyAny>) -> PyVal<'py> {
    if v.is_instance_of::<PyBool>() {
        return PyVal::Bool(v.extract().unwrap_or(false));
    }
    if v.is_instance_of::<PyInt>() {
        if let Ok(i) = v.extract::<i64>() {
            return PyVal::Int(i);
        }
        if let Ok(u) = v.extract::<u64>() {
            return PyVal::UInt(u);
        }
    }
    if v.is_instance_of::<PyFloat>() {
        return PyVal::Float(v.extract().unwrap_or(f64::NAN));
    }
    if let Ok(s) = v.downcast::<PyString>() {
        return PyVal::Str(s.clone());
    }
    PyVal::Owned(text(v).into_owned())
}

impl Wrapped {
    /// Collects the captured parameters: passed by keyword, else by position, else
    /// `self.<name>`, else the dft_fn's own value.
    fn gather<'py>(
        &self,
        py: Python<'py>,
        positional: &dyn Fn(usize) -> Option<Bound<'py, PyAny>>,
        keyword: &dyn Fn(&Bound<'py, PyString>) -> Option<Bound<'py, PyAny>>,
        out: &mut Collected<'py>,
    ) {
        for c in &self.capture {
            let name = c.name.bind(py);
            let mut found = keyword(name);
            if found.is_none() {
                if let Some(i) = c.index {
                    found = positional(i);
                }
            }
            if found.is_none() && self.self_attrs {
                if let Some(obj) = positional(0) {
                    found = obj.getattr(name).ok();
                }
            }
            if found.is_none() {
                found = self
                    .base
                    .iter()
                    .find(|(k, _)| k.bind(py).to_str().ok() == name.to_str().ok())
                    .map(|(_, v)| v.bind(py).clone());
            }
            if let Some(v) = found {
                if v.is_none() {
                    continue;
                }
                let _ = out.push((name.clone(), py_val(&v)));
            }
        }
    }

    fn finish_call(&self, py: Python<'_>, t0: u64, vals: &Collected) {
        let t1 = native::now();
        record(
            self.name.as_bytes(),
            self.cat.as_bytes(),
            t0,
            t1.saturating_sub(t0),
            vals,
        );
        let _ = py;
    }
}

/// Offset of `Wrapped::vectorcall` inside a `_Wrapped` object (same for every instance).
static VC_OFFSET: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The vectorcall entry of `_Wrapped`: forwards the caller's argument array unchanged.
unsafe extern "C" fn wrapped_vectorcall(
    callable: *mut pyo3::ffi::PyObject,
    args: *const *mut pyo3::ffi::PyObject,
    nargsf: usize,
    kwnames: *mut pyo3::ffi::PyObject,
) -> *mut pyo3::ffi::PyObject {
    use pyo3::ffi;
    let off = VC_OFFSET.load(Ordering::Relaxed);
    // SAFETY: `callable` is a _Wrapped (only its type points tp_vectorcall_offset here) and
    // the struct starts at `off` (repr(C), first field); its fields are never mutated after
    // construction, and the GIL is held by our caller.
    let w: &Wrapped = unsafe { &*((callable as *const u8).add(off) as *const Wrapped) };
    let func = w.func.as_ptr();
    if !active() {
        // SAFETY: forwarding the caller's own (valid) vectorcall arguments.
        return unsafe { ffi::PyObject_Vectorcall(func, args, nargsf, kwnames) };
    }
    let t0 = native::now();
    // SAFETY: as above.
    let result = unsafe { ffi::PyObject_Vectorcall(func, args, nargsf, kwnames) };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: the GIL is held (we are called from the interpreter).
        let py = unsafe { Python::assume_gil_acquired() };
        let mut vals: Collected = heapless::Vec::new();
        // Keep a pending exception of the call aside while we look at arguments.
        let saved = if w.capture.is_empty() {
            None
        } else {
            PyErr::take(py)
        };
        if !w.capture.is_empty() {
            // SAFETY: nargsf comes from the caller.
            let nargs = unsafe { ffi::PyVectorcall_NARGS(nargsf) } as usize;
            let positional = |i: usize| -> Option<Bound<'_, PyAny>> {
                // SAFETY: i < nargs indexes the caller's argument array (borrowed refs).
                (i < nargs).then(|| unsafe { Bound::from_borrowed_ptr(py, *args.add(i)) })
            };
            let keyword = |name: &Bound<'_, PyString>| -> Option<Bound<'_, PyAny>> {
                if kwnames.is_null() {
                    return None;
                }
                // SAFETY: kwnames is a tuple of str owned by the caller.
                let names = unsafe { Bound::from_borrowed_ptr(py, kwnames) };
                let names = names.downcast::<PyTuple>().ok()?;
                for (k, n) in names.iter().enumerate() {
                    if n.is(name) || n.eq(name).unwrap_or(false) {
                        // SAFETY: keyword values follow the positional ones.
                        return Some(unsafe { Bound::from_borrowed_ptr(py, *args.add(nargs + k)) });
                    }
                }
                None
            };
            w.gather(py, &positional, &keyword, &mut vals);
        }
        w.finish_call(py, t0, &vals);
        drop(vals);
        if let Some(e) = saved {
            e.restore(py);
        }
    }));
    let _ = outcome; // recording never affects the call's own result
    result
}

/// Makes `_Wrapped` instances vectorcall-able and bind like functions in `obj.meth()` calls.
fn enable_vectorcall(py: Python<'_>) -> PyResult<()> {
    use pyo3::ffi;
    let probe = Py::new(
        py,
        Wrapped::new(
            py.None(),
            &PyString::new(py, ""),
            &PyString::new(py, ""),
            Vec::new(),
            false,
            Vec::new(),
        ),
    )?;
    let obj = probe.as_ptr() as usize;
    let field = {
        let r = probe.borrow(py);
        &r.vectorcall as *const _ as usize
    };
    VC_OFFSET.store(field - obj, Ordering::Relaxed);
    let tp = probe.bind(py).get_type().as_type_ptr();
    // SAFETY: our own heap type, before any instance is exposed to Python; both flags only
    // add fast paths that behave like tp_call / __get__ (which stay in place).
    unsafe {
        (*tp).tp_vectorcall_offset = (field - obj) as ffi::Py_ssize_t;
        (*tp).tp_flags |= ffi::Py_TPFLAGS_HAVE_VECTORCALL | ffi::Py_TPFLAGS_METHOD_DESCRIPTOR;
    }
    Ok(())
}

#[pymethods]
impl Wrapped {
    #[new]
    #[pyo3(signature = (func, name, cat, capture=Vec::new(), self_attrs=false, base=Vec::new()))]
    fn new(
        func: PyObject,
        name: &Bound<'_, PyString>,
        cat: &Bound<'_, PyString>,
        capture: Vec<(Py<PyString>, Option<usize>)>,
        self_attrs: bool,
        base: Vec<(Py<PyString>, PyObject)>,
    ) -> Self {
        Wrapped {
            vectorcall: wrapped_vectorcall,
            func,
            name: utf8_of(name).into_owned(),
            cat: utf8_of(cat).into_owned(),
            capture: capture
                .into_iter()
                .map(|(name, index)| Capture { name, index })
                .collect(),
            self_attrs,
            base,
        }
    }

    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<PyObject> {
        let func = self.func.bind(py);
        if !active() {
            return func.call(args, kwargs).map(Bound::unbind);
        }
        let t0 = native::now();
        let result = func.call(args, kwargs);
        let mut vals: Collected = heapless::Vec::new();
        if !self.capture.is_empty() {
            let positional = |i: usize| args.get_item(i).ok();
            let keyword =
                |n: &Bound<'py, PyString>| kwargs.and_then(|k| k.get_item(n).ok().flatten());
            self.gather(py, &positional, &keyword, &mut vals);
        }
        self.finish_call(py, t0, &vals);
        result.map(Bound::unbind)
    }

    /// Binds like a function: `obj.method` gives a bound method.
    fn __get__(
        slf: Bound<'_, Self>,
        obj: Option<Bound<'_, PyAny>>,
        _objtype: Option<Bound<'_, PyAny>>,
    ) -> PyResult<PyObject> {
        let py = slf.py();
        match obj {
            Some(o) if !o.is_none() => {
                let method_type = py.import("types")?.getattr("MethodType")?;
                Ok(method_type.call1((slf, o))?.unbind())
            }
            _ => Ok(slf.into_any().unbind()),
        }
    }

    /// Pickled by reference, like the function it wraps (multiprocessing sends tasks this
    /// way): the module-level name that `functools.update_wrapper` copied.
    fn __reduce__(slf: &Bound<'_, Self>) -> PyResult<PyObject> {
        Ok(slf.getattr("__qualname__")?.unbind())
    }

    /// The wrapped function.
    #[getter(__func__)]
    fn func(&self, py: Python<'_>) -> PyObject {
        self.func.clone_ref(py)
    }
}

// ------------------------------------------------------------------ context manager

/// The native part of `dft_fn`: a named region with a start time and args; `flush()`
/// records it. Subclassed by `dftracer.python.dft_fn`.
#[pyclass(subclass, dict, module = "dftracer.dftracer", name = "_Region")]
struct Region {
    #[pyo3(get)]
    cat: String,
    #[pyo3(get, set)]
    name: String,
    t1: u64,
    flushed: bool,
    enable: bool,
    /// epoch, step, image_idx, image_size and update(args=...) values, in order.
    args: Vec<(Py<PyString>, PyObject)>,
}

fn caller_name(py: Python<'_>) -> String {
    // The innermost Python frame is the caller of dft_fn(...) (native code has no frame);
    // for a subclass constructed from Python, __init__ frames do not exist either.
    py.import("sys")
        .and_then(|s| s.call_method1("_getframe", (0,)))
        .and_then(|f| f.getattr("f_code"))
        .and_then(|c| c.getattr("co_name"))
        .and_then(|n| n.extract::<String>())
        .unwrap_or_else(|_| "<module>".into())
}

impl Region {
    /// Sets the values given for epoch, step, image_idx and image_size (in that order).
    fn set_captured(&mut self, py: Python<'_>, values: [Option<PyObject>; 4]) {
        for (k, v) in ["epoch", "step", "image_idx", "image_size"]
            .into_iter()
            .zip(values)
        {
            if let Some(v) = v {
                self.set_arg(py, k, v);
            }
        }
    }

    fn set_arg(&mut self, py: Python<'_>, key: &str, value: PyObject) {
        if value.is_none(py) {
            return;
        }
        match self
            .args
            .iter_mut()
            .find(|(k, _)| k.bind(py).to_str().ok() == Some(key))
        {
            Some(slot) => slot.1 = value,
            None => self.args.push((PyString::new(py, key).unbind(), value)),
        }
    }
}

#[pymethods]
impl Region {
    #[new]
    #[pyo3(signature = (cat, name=None, epoch=None, step=None, image_idx=None, image_size=None, enable=true, *_args, **_kwargs))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        cat: &Bound<'_, PyAny>,
        name: Option<&Bound<'_, PyAny>>,
        epoch: Option<PyObject>,
        step: Option<PyObject>,
        image_idx: Option<PyObject>,
        image_size: Option<PyObject>,
        enable: bool,
        _args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let cat = utf8_of(
            cat.downcast::<PyString>()
                .map_err(|_| PyTypeError::new_err("dft_fn(): cat must be a str"))?,
        )
        .into_owned();
        let name = match name {
            Some(n) if !n.is_none() => utf8_of(
                n.downcast::<PyString>()
                    .map_err(|_| PyTypeError::new_err("dft_fn(): name must be a str"))?,
            )
            .into_owned(),
            _ if active() => caller_name(py),
            _ => String::new(),
        };
        let mut r = Region {
            cat,
            name,
            t1: if active() { native::now() } else { 0 },
            flushed: false,
            enable,
            args: Vec::new(),
        };
        r.set_captured(py, [epoch, step, image_idx, image_size]);
        Ok(r)
    }

    /// Starts the region now.
    fn reset(&mut self) {
        self.t1 = if self.enable && active() {
            native::now()
        } else {
            0
        };
        self.flushed = false;
    }

    /// Records the region from its start until now.
    fn flush(&mut self, py: Python<'_>) {
        self.flushed = true;
        if !self.enable || !active() {
            return;
        }
        let t2 = native::now();
        let mut vals: Collected = heapless::Vec::new();
        for (k, v) in &self.args {
            let _ = vals.push((k.bind(py).clone(), py_val(v.bind(py))));
        }
        record(
            self.name.as_bytes(),
            self.cat.as_bytes(),
            self.t1,
            t2.saturating_sub(self.t1),
            &vals,
        );
    }

    fn __enter__(mut slf: PyRefMut<'_, Self>) -> PyRefMut<'_, Self> {
        slf.reset();
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&mut self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> bool {
        if !self.flushed {
            self.flush(py);
        }
        false
    }

    /// Sets args recorded by the next `flush()`; `args` may hold any values.
    #[pyo3(signature = (epoch=None, step=None, image_idx=None, image_size=None, args=None))]
    fn update(
        &mut self,
        py: Python<'_>,
        epoch: Option<PyObject>,
        step: Option<PyObject>,
        image_idx: Option<PyObject>,
        image_size: Option<PyObject>,
        args: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        self.set_captured(py, [epoch, step, image_idx, image_size]);
        if let Some(a) = args {
            for (k, v) in a.iter() {
                let key = utf8_of(&k.str()?).into_owned();
                self.set_arg(py, &key, v.unbind());
            }
        }
        Ok(())
    }

    /// The args `update()` and the constructor set, as a dict.
    #[getter]
    fn _args(&self, py: Python<'_>) -> PyResult<PyObject> {
        let d = PyDict::new(py);
        for (k, v) in &self.args {
            d.set_item(k, v)?;
        }
        Ok(d.into_any().unbind())
    }

    #[getter]
    fn _enabled(&self) -> bool {
        self.enable
    }

    /// Writes a `CM` record `{name: key, value: str(value)}`.
    fn log_metadata(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        log_metadata_event(key, value)
    }
}

#[pymodule]
fn dftracer(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // This module exports the settings to children itself, through os.environ.
    native::export_env_at_init(false);
    m.add_function(wrap_pyfunction!(initialize, m)?)?;
    m.add_function(wrap_pyfunction!(get_time, m)?)?;
    m.add_function(wrap_pyfunction!(get_config, m)?)?;
    m.add_function(wrap_pyfunction!(enter_event, m)?)?;
    m.add_function(wrap_pyfunction!(exit_event, m)?)?;
    m.add_function(wrap_pyfunction!(log_event, m)?)?;
    m.add_function(wrap_pyfunction!(log_metadata_event, m)?)?;
    m.add_function(wrap_pyfunction!(set_app_metadata_int, m)?)?;
    m.add_function(wrap_pyfunction!(set_app_metadata_string, m)?)?;
    m.add_function(wrap_pyfunction!(mark_used, m)?)?;
    m.add_function(wrap_pyfunction!(finalize, m)?)?;
    m.add_function(wrap_pyfunction!(trace_path, m)?)?;
    m.add_function(wrap_pyfunction!(stats, m)?)?;
    m.add_function(wrap_pyfunction!(flush, m)?)?;
    m.add_function(wrap_pyfunction!(is_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(_exit, m)?)?;
    m.add_function(wrap_pyfunction!(_before_exec, m)?)?;
    m.add_class::<Wrapped>()?;
    enable_vectorcall(m.py())?;
    m.add_class::<Region>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    if config().enable {
        install_exit_hook(m)?;
    }
    Ok(())
}
