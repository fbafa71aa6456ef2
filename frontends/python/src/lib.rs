//! `dftracer.dftracer`: the reference's native module (same functions and signatures, so
//! pydftracer runs unchanged on top of it) plus the native hot paths of `dftracer.python`:
//! [`Wrapped`] (the decorator's wrapper) and [`DftFn`] (`dftracer.python.dft_fn`).
//!
//! This crate only converts Python values and calls `dftracer_core`; the policy lives in core.
//! Tracing starts lazily on the first event when `DFTRACER_ENABLE` says so (so spawned
//! workers that only import annotated code are traced), and an explicit `initialize(path)`
//! after that still decides the file name (core `retarget`).
#![allow(unsafe_code)] // pyo3 macros, and the vectorcall entry of _Wrapped (each block has a SAFETY note).

mod fast;
mod native;

/// Marks this object as part of the tracer: the in-process I/O binder never rewrites its GOT.
#[no_mangle]
pub static dftracer_core_marker: u8 = 0;

use dftracer_core::start::{Frontend, LazyStart};
use dftracer_core::{AppValue, Arg, Config, Layer, Origin, Value};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyString, PyTuple};
use pyo3::PyTypeInfo;
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Most args collected from Python per event (core keeps 32 and counts the rest).
pub(crate) const MAX_PY_ARGS: usize = 40;

static CONFIG: OnceLock<Config> = OnceLock::new();
/// The lazy start and the explicit `initialize`: core's policy ([`dftracer_core::start`]).
static START: LazyStart = LazyStart::new();
static ORIG_EXIT: GILOnceCell<PyObject> = GILOnceCell::new();

/// `Py_NewRef` for every supported CPython (3.9 on; `Py_NewRef` is 3.10+): the same inline
/// `Py_INCREF` and the pointer back, a new reference.
///
/// # Safety
/// `obj` is a live object and the GIL is held.
#[inline(always)]
unsafe fn new_ref(obj: *mut pyo3::ffi::PyObject) -> *mut pyo3::ffi::PyObject {
    // SAFETY: the caller's.
    unsafe { pyo3::ffi::Py_INCREF(obj) };
    obj
}

fn config() -> &'static Config {
    CONFIG.get_or_init(native::config_from_env)
}

/// This module's side of the lazy-start policy: the core of the native library
/// ([`native`]), the settings read once ([`config`]), the child environment through
/// `os.environ`.
struct Module;

impl Frontend for Module {
    const SAYS_IGNORED: bool = true;

    #[inline(always)]
    fn is_enabled(&self) -> bool {
        native::is_enabled()
    }
    fn is_finalized(&self) -> bool {
        native::is_finalized()
    }
    fn is_running(&self) -> bool {
        native::is_running()
    }
    fn config(&self) -> Config {
        config().clone()
    }
    fn start(&self, cfg: Config, log_file: Option<&str>) -> Result<(), dftracer_core::Error> {
        native::init(cfg, Origin::App, log_file)
    }
    fn join(&self, cfg: Config, log_file: Option<&str>, arg_dirs: Option<&str>) {
        native::join(cfg, log_file, arg_dirs);
    }
    fn found_running(&self) {
        // The preload library started the core: the trace is the application's now.
        native::claim_for_app();
    }
    fn export_env(&self) {
        export_env();
    }
    fn prefix(&self) -> Option<String> {
        native::prefix()
    }
    fn trace_path(&self) -> Option<String> {
        native::trace_path()
    }
}

/// True when events should be recorded, starting the tracer from the environment on first
/// use. One load when running; two when off or after a failed start.
#[inline]
fn active() -> bool {
    START.active(&Module)
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

/// Which builtin type a value is, by CPython's own checks (flags and exact types: pyo3
/// 0.23's `is_instance_of` walks the MRO on every miss).
#[derive(Clone, Copy, PartialEq)]
enum PyType {
    Bool,
    Int,
    Float,
    Str,
    Other,
}

#[inline]
fn type_of(v: &Bound<'_, PyAny>) -> PyType {
    use pyo3::ffi;
    let p = v.as_ptr();
    // SAFETY: `p` is a live object (borrowed from `v`); these read its type's flags/pointer.
    unsafe {
        if ffi::PyLong_Check(p) != 0 {
            if ffi::PyBool_Check(p) != 0 {
                PyType::Bool
            } else {
                PyType::Int
            }
        } else if ffi::PyUnicode_Check(p) != 0 {
            PyType::Str
        } else if ffi::PyFloat_Check(p) != 0 {
            PyType::Float
        } else {
            PyType::Other
        }
    }
}

/// An int as i64 (the common case: PyLong_AsLong reads the digits) or u64.
#[inline]
fn int_of(v: &Bound<'_, PyAny>) -> Option<PyVal<'static>> {
    match v.extract::<i64>() {
        Ok(i) => Some(PyVal::Int(i)),
        Err(_) => v.extract::<u64>().ok().map(PyVal::UInt),
    }
}

#[cold]
fn too_big(v: &Bound<'_, PyAny>, arg: &str, key: &Bound<'_, PyString>) -> PyErr {
    PyValueError::new_err(format!(
        "log_event(): {arg}[{:?}] = {} does not fit in 64 bits",
        utf8_of(key),
        text(v)
    ))
}

#[cold]
fn bad_value(v: &Bound<'_, PyAny>, kind: Kind, arg: &str, key: &Bound<'_, PyString>) -> PyErr {
    PyTypeError::new_err(format!(
        "log_event(): {arg}[{:?}] must be {} (or a (tag, value) pair), not {}",
        utf8_of(key),
        kind.what(),
        v.get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default()
    ))
}

/// Converts one value of `int_args`/`string_args`/`float_args` (bare, or a `(tag, value)`
/// tuple as the reference takes).
fn convert<'py>(
    v: &Bound<'py, PyAny>,
    kind: Kind,
    arg: &str,
    key: &Bound<'py, PyString>,
) -> PyResult<PyVal<'py>> {
    let v = match v.downcast::<PyTuple>() {
        Ok(t) if t.len() == 2 => t.get_item(1)?,
        Ok(t) => {
            return Err(PyTypeError::new_err(format!(
                "log_event(): {arg}[{:?}] must be {} or a (tag, value) pair, not a tuple of {}",
                utf8_of(key),
                kind.what(),
                t.len()
            )))
        }
        Err(_) => v.clone(),
    };
    match (type_of(&v), kind) {
        (PyType::Int, Kind::Int) => int_of(&v).ok_or_else(|| too_big(&v, arg, key)),
        (PyType::Bool, Kind::Int) => Ok(PyVal::Bool(v.is_truthy()?)),
        // An int where a float is expected is still a number.
        (PyType::Int | PyType::Float, Kind::Float) => Ok(PyVal::Float(v.extract::<f64>()?)),
        (PyType::Str, Kind::Str) => Ok(PyVal::Str(v.downcast_into::<PyString>()?)),
        _ => Err(bad_value(&v, kind, arg, key)),
    }
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
        let val = convert(&v, kind, arg, &key)?;
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
    if a.is(b) {
        return true; // the same (usually interned) str
    }
    // SAFETY: both are live str objects.
    if unsafe {
        pyo3::ffi::PyUnicode_GET_LENGTH(a.as_ptr()) != pyo3::ffi::PyUnicode_GET_LENGTH(b.as_ptr())
    } {
        return false;
    }
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
    if type_of(v) != PyType::Int {
        return Err(PyTypeError::new_err(format!(
            "log_event(): {what} must be an int, not {}",
            v.get_type().name()?
        )));
    }
    match int_of(v) {
        Some(PyVal::Int(i)) if i >= 0 => Ok(i as u64),
        Some(PyVal::UInt(u)) => Ok(u),
        _ => Err(PyValueError::new_err(format!(
            "log_event(): {what} must be a non-negative 64-bit int, got {}",
            text(v)
        ))),
    }
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

// ------------------------------------------------------------------ argument sorting

/// The parameter names of a function whose vectorcall arguments are sorted by hand: pyo3
/// 0.23's extraction compares keyword names as strings and checks every `&PyAny` argument
/// against `object` by walking the MRO, hundreds of instructions per call. Here a keyword
/// is matched by pointer first (names in code and ours are interned).
struct Params<const N: usize> {
    names: [&'static str; N],
    interned: GILOnceCell<[Py<PyString>; N]>,
}

impl<const N: usize> Params<N> {
    const fn new(names: [&'static str; N]) -> Self {
        Params {
            names,
            interned: GILOnceCell::new(),
        }
    }

    fn slot(&self, key: &Bound<'_, PyAny>) -> Option<usize> {
        let interned = self.names(key.py());
        if let Some(i) = interned.iter().position(|n| n.as_ptr() == key.as_ptr()) {
            return Some(i);
        }
        let key = key.downcast::<PyString>().ok()?.to_str().ok()?;
        self.names.iter().position(|n| *n == key)
    }

    /// Sorts positional and keyword arguments into parameter slots. `lenient`: extra
    /// positional and unknown keyword arguments are ignored (for `dft_fn`, whose subclasses
    /// pass their own); otherwise they are a TypeError, as for a Python function.
    fn sort<'py>(
        &self,
        func: &str,
        pos: impl ExactSizeIterator<Item = Bound<'py, PyAny>>,
        kw: impl Iterator<Item = (Bound<'py, PyAny>, Bound<'py, PyAny>)>,
        lenient: bool,
    ) -> PyResult<[Option<Bound<'py, PyAny>>; N]> {
        if !lenient && pos.len() > N {
            return Err(PyTypeError::new_err(format!(
                "{func}() takes at most {N} arguments ({} given)",
                pos.len()
            )));
        }
        let mut out: [Option<Bound<'py, PyAny>>; N] = std::array::from_fn(|_| None);
        for (slot, v) in out.iter_mut().zip(pos) {
            *slot = Some(v);
        }
        for (k, v) in kw {
            match self.slot(&k) {
                Some(i) if out[i].is_some() => {
                    return Err(PyTypeError::new_err(format!(
                        "{func}() got multiple values for argument '{}'",
                        self.names[i]
                    )))
                }
                Some(i) => out[i] = Some(v),
                None if lenient => {}
                None => {
                    return Err(PyTypeError::new_err(format!(
                        "{func}() got an unexpected keyword argument '{}'",
                        text(&k)
                    )))
                }
            }
        }
        Ok(out)
    }

    /// The interned names (made on first use; the module's init makes them).
    fn names(&self, py: Python<'_>) -> &[Py<PyString>; N] {
        self.interned
            .get_or_init(py, || self.names.map(|n| PyString::intern(py, n).unbind()))
    }

    /// The slots of a vectorcall's arguments as borrowed pointers (NULL: not given), when
    /// they fit and every keyword is one of ours by identity (names written in code are
    /// interned); `None` otherwise: then `sort` decides (and raises).
    ///
    /// # Safety
    /// As [`Params::sort_call`], with the GIL held.
    #[inline]
    unsafe fn sort_raw(
        &self,
        args: *const *mut pyo3::ffi::PyObject,
        nargs: pyo3::ffi::Py_ssize_t,
        kwnames: *mut pyo3::ffi::PyObject,
    ) -> Option<[*mut pyo3::ffi::PyObject; N]> {
        use pyo3::ffi;
        let nargs = nargs as usize;
        if nargs > N {
            return None;
        }
        let mut out = [std::ptr::null_mut(); N];
        // SAFETY: per this function's contract: `nargs` positional arguments, then one per
        // keyword name, borrowed from the caller; kwnames is NULL or a tuple.
        unsafe {
            out[..nargs].copy_from_slice(std::slice::from_raw_parts(args, nargs));
            if kwnames.is_null() {
                return Some(out);
            }
            let names = self.interned.get(Python::assume_gil_acquired())?;
            for j in 0..ffi::PyTuple_GET_SIZE(kwnames) as usize {
                let k = ffi::PyTuple_GET_ITEM(kwnames, j as ffi::Py_ssize_t);
                let i = names.iter().position(|n| n.as_ptr() == k)?;
                if !out[i].is_null() {
                    return None;
                }
                out[i] = *args.add(nargs + j);
            }
        }
        Some(out)
    }

    /// `sort` over a vectorcall's arguments, strict.
    ///
    /// # Safety
    /// `args`, `nargs` and `kwnames` are a vectorcall's: `nargs` positional arguments, then
    /// one per name in `kwnames` (NULL or a tuple of str), all borrowed from the caller.
    unsafe fn sort_call<'py>(
        &self,
        py: Python<'py>,
        func: &str,
        args: *const *mut pyo3::ffi::PyObject,
        nargs: pyo3::ffi::Py_ssize_t,
        kwnames: *mut pyo3::ffi::PyObject,
    ) -> PyResult<[Option<Bound<'py, PyAny>>; N]> {
        // SAFETY: per this function's contract.
        let (pos, kw) = unsafe { vectorcall_args(py, args, nargs, kwnames) }?;
        self.sort(func, pos, kw, false)
    }
}

/// A vectorcall's positional arguments and (name, value) keyword pairs.
///
/// # Safety
/// As [`Params::sort_call`].
#[allow(clippy::type_complexity)] // two iterators, named where they are made
unsafe fn vectorcall_args<'py>(
    py: Python<'py>,
    args: *const *mut pyo3::ffi::PyObject,
    nargs: pyo3::ffi::Py_ssize_t,
    kwnames: *mut pyo3::ffi::PyObject,
) -> PyResult<(
    impl ExactSizeIterator<Item = Bound<'py, PyAny>>,
    impl Iterator<Item = (Bound<'py, PyAny>, Bound<'py, PyAny>)>,
)> {
    let nargs = nargs as usize;
    // SAFETY: i < nargs + len(kwnames) indexes the caller's argument array (borrowed refs).
    let arg = move |i: usize| unsafe { Bound::from_borrowed_ptr(py, *args.add(i)) };
    // SAFETY: kwnames is NULL or the caller's tuple of keyword names.
    let names = match unsafe { Bound::from_borrowed_ptr_or_opt(py, kwnames) } {
        Some(n) => Some(n.downcast_into::<PyTuple>()?),
        None => None,
    };
    let kw = names
        .into_iter()
        .flat_map(IntoIterator::into_iter)
        .enumerate()
        .map(move |(i, k)| (k, arg(nargs + i)));
    Ok(((0..nargs).map(arg), kw))
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
    START.initialize(&Module, log_file.as_deref(), data_dirs.as_deref());
    Ok(())
}

/// Current time in the configured unit; 0 when tracing is off. After `finalize()` the clock
/// goes on: pydftracer's wrappers (DLIO's finalize runs inside a decorated function) compute
/// `get_time() - start` after it, and the event they then log is dropped and counted
/// ([`late_event`]).
#[pyfunction]
fn get_time() -> u64 {
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
fn late_event() {
    if LATE_EVENTS.fetch_add(1, Ordering::Relaxed) == 0 && config().logs("WARN") {
        dftracer_core::eprint_line(
            "[DFTRACER WARN] an event was logged after finalize(): dropped (the trace is complete); \
             dftracer.dftracer.stats()['after_finalize'] counts them",
        );
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

/// `log_event(name, cat, start_time, duration, int_args=None, string_args=None,
/// float_args=None)`: records a complete event (type PYTHON). Args may be `(tag, value)` pairs
/// or bare values. A METH_FASTCALL function with its own argument sorting ([`Params`]).
static LOG_EVENT: Params<7> = Params::new([
    "name",
    "cat",
    "start_time",
    "duration",
    "int_args",
    "string_args",
    "float_args",
]);

/// `dftracer.log_event(self, name, cat, start_time, duration, int_args=None, float_args=None,
/// string_args=None, relations=None)`: pydftracer's method (float_args before string_args;
/// `relations` accepted, not recorded).
static TRACER_LOG_EVENT: Params<8> = Params::new([
    "name",
    "cat",
    "start_time",
    "duration",
    "int_args",
    "float_args",
    "string_args",
    "relations",
]);

/// `log_event` as the module function (`METHOD` false) or as `dftracer`'s method (true):
/// METH_FASTCALL | METH_KEYWORDS entries.
unsafe extern "C" fn log_event_fastcall<const METHOD: bool>(
    slf: *mut pyo3::ffi::PyObject,
    args: *const *mut pyo3::ffi::PyObject,
    nargs: pyo3::ffi::Py_ssize_t,
    kwnames: *mut pyo3::ffi::PyObject,
) -> *mut pyo3::ffi::PyObject {
    use pyo3::ffi;
    // The common call first, on borrowed pointers (see `fast`); panics become an exception.
    // SAFETY: called by the interpreter with the GIL held and no exception set.
    let fast =
        std::panic::catch_unwind(|| unsafe { log_event_fast::<METHOD>(args, nargs, kwnames) });
    match fast {
        // SAFETY: as above; None is immortal or counted, a new reference either way.
        Ok(Some(())) => return unsafe { new_ref(ffi::Py_None()) },
        Ok(None) => {}
        Err(_) => {
            // SAFETY: as above; a static message.
            unsafe {
                ffi::PyErr_SetString(ffi::PyExc_RuntimeError, c"log_event() panicked".as_ptr())
            };
            return std::ptr::null_mut();
        }
    }
    // SAFETY: called by the interpreter with the GIL held (the trampoline counts it for pyo3
    // and turns errors and panics into exceptions); for the method, the method descriptor
    // checked `slf`'s type (it is not used).
    unsafe {
        pyo3::impl_::trampoline::fastcall_with_keywords(
            slf,
            args,
            nargs,
            kwnames,
            log_event_call::<METHOD>,
        )
    }
}

/// [`fast::log_event`] on a vectorcall's arguments; `None`: the general path must run
/// (nothing was recorded, no exception is set).
///
/// # Safety
/// The interpreter's vectorcall arguments, the GIL held, no exception set.
#[inline]
unsafe fn log_event_fast<const METHOD: bool>(
    args: *const *mut pyo3::ffi::PyObject,
    nargs: pyo3::ffi::Py_ssize_t,
    kwnames: *mut pyo3::ffi::PyObject,
) -> Option<()> {
    // SAFETY: per this function's contract.
    let e = unsafe {
        if METHOD {
            let [name, cat, ts, dur, ints, floats, strs, _relations] =
                TRACER_LOG_EVENT.sort_raw(args, nargs, kwnames)?;
            fast::Event {
                required: [name, cat, ts, dur],
                maps: [ints, strs, floats],
            }
        } else {
            let [name, cat, ts, dur, ints, strs, floats] =
                LOG_EVENT.sort_raw(args, nargs, kwnames)?;
            fast::Event {
                required: [name, cat, ts, dur],
                maps: [ints, strs, floats],
            }
        }
    };
    let on = native::is_enabled();
    if !on && !START.decided() {
        return None; // the general path decides whether tracing starts now
    }
    // SAFETY: per this function's contract.
    unsafe {
        fast::log_event(&e, |name, cat, ts, dur, args| {
            if on {
                native::complete(Layer::Python, name, cat, ts, dur, args);
            } else if native::is_finalized() {
                late_event();
            }
        })
    }
}

unsafe fn log_event_call<const METHOD: bool>(
    py: Python<'_>,
    _slf: *mut pyo3::ffi::PyObject,
    args: *const *mut pyo3::ffi::PyObject,
    nargs: pyo3::ffi::Py_ssize_t,
    kwnames: *mut pyo3::ffi::PyObject,
) -> PyResult<*mut pyo3::ffi::PyObject> {
    let (required, maps) = if METHOD {
        let [name, cat, ts, dur, ints, floats, strs, _relations] =
            // SAFETY: the interpreter's vectorcall arguments.
            unsafe { TRACER_LOG_EVENT.sort_call(py, "log_event", args, nargs, kwnames) }?;
        ([name, cat, ts, dur], [ints, strs, floats])
    } else {
        let [name, cat, ts, dur, ints, strs, floats] =
            // SAFETY: the interpreter's vectorcall arguments.
            unsafe { LOG_EVENT.sort_call(py, "log_event", args, nargs, kwnames) }?;
        ([name, cat, ts, dur], [ints, strs, floats])
    };
    log_event(required, maps)?;
    Ok(py.None().into_ptr())
}

/// A METH_FASTCALL | METH_KEYWORDS definition, for the life of the process.
fn fastcall_def(
    name: &'static std::ffi::CStr,
    doc: &'static std::ffi::CStr,
    f: pyo3::ffi::PyCFunctionFastWithKeywords,
) -> *mut pyo3::ffi::PyMethodDef {
    Box::into_raw(Box::new(pyo3::ffi::PyMethodDef {
        ml_name: name.as_ptr(),
        ml_meth: pyo3::ffi::PyMethodDefPointer {
            PyCFunctionFastWithKeywords: f,
        },
        ml_flags: pyo3::ffi::METH_FASTCALL | pyo3::ffi::METH_KEYWORDS,
        ml_doc: doc.as_ptr(),
    }))
}

/// Adds the module's `log_event` and `_Tracer.log_event`.
fn add_log_event(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // The fast paths match keywords by these interned names only.
    LOG_EVENT.names(py);
    TRACER_LOG_EVENT.names(py);
    DFT_FN.names(py);
    let def = fastcall_def(
        c"log_event",
        c"log_event(name, cat, start_time, duration, int_args=None, string_args=None, float_args=None)\n--\n\nRecords a complete event (type PYTHON). Args may be (tag, value) pairs or bare values.",
        log_event_fastcall::<false>,
    );
    // SAFETY: a static definition; the module object and its name are valid.
    let f = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            pyo3::ffi::PyCFunction_NewEx(def, m.as_ptr(), m.name()?.as_ptr()),
        )
    }?;
    m.add("log_event", f)?;
    let def = fastcall_def(
        c"log_event",
        c"log_event(self, name, cat, start_time, duration, int_args=None, float_args=None, string_args=None, relations=None)\n--\n\nRecords a complete event (pydftracer's method: float_args before string_args; relations is not recorded).",
        log_event_fastcall::<true>,
    );
    let tp = Tracer::type_object(py);
    // SAFETY: a static definition for our own type.
    let descr = unsafe {
        Bound::from_owned_ptr_or_err(py, pyo3::ffi::PyDescr_NewMethod(tp.as_type_ptr(), def))
    }?;
    tp.setattr("log_event", descr)
}

/// Validates and records one event: `[name, cat, start_time, duration]` and `[int_args,
/// string_args, float_args]`.
fn log_event(
    required: [Option<Bound<'_, PyAny>>; 4],
    maps: [Option<Bound<'_, PyAny>>; 3],
) -> PyResult<()> {
    let [name, cat, start_time, duration] = required;
    let missing = |what: &str| {
        PyTypeError::new_err(format!("log_event() missing required argument '{what}'"))
    };
    let name = name.ok_or_else(|| missing("name"))?;
    let cat = cat.ok_or_else(|| missing("cat"))?;
    let start_time = start_time.ok_or_else(|| missing("start_time"))?;
    let duration = duration.ok_or_else(|| missing("duration"))?;
    // Validate first, whether or not tracing is on: bad input is an error either way.
    let name = name_arg(&name, "name")?;
    let cat = name_arg(&cat, "cat")?;
    let ts = time_arg(&start_time, "start_time")?;
    let dur = time_arg(&duration, "duration")?;
    let mut vals: Collected = heapless::Vec::new();
    let [ints, strs, floats] = maps;
    collect(&mut vals, ints.as_ref(), Kind::Int, "int_args")?;
    collect(&mut vals, strs.as_ref(), Kind::Str, "string_args")?;
    collect(&mut vals, floats.as_ref(), Kind::Float, "float_args")?;
    if active() {
        record(
            utf8_of(name).as_bytes(),
            utf8_of(cat).as_bytes(),
            ts,
            dur,
            &vals,
        );
    } else if native::is_finalized() {
        late_event();
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

/// Names thread `tid` (`threading.get_native_id()`) in the trace (its `thread_name` record);
/// `dftracer._threads` calls it for every thread `threading` starts.
#[pyfunction]
fn _name_thread(tid: u64, name: &Bound<'_, PyAny>) {
    if config().enable && !native::is_finalized() {
        if let Ok(tid) = u32::try_from(tid) {
            native::name_thread(tid, &text(name));
        }
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
    d.set_item("after_finalize", LATE_EVENTS.load(Ordering::Relaxed))?;
    Ok(d.into_any().unbind())
}

/// Writes what was recorded so far (tests, checkpoints).
#[pyfunction]
fn flush(py: Python<'_>) {
    py.allow_threads(native::flush);
}

/// True when tracing is configured on in this process and not finalized: it records, or will
/// once started (on first use, or by an `initialize(log_file)` after a start from the
/// environment failed). Decorators check this when they are applied, so a function decorated
/// before a later `initialize(log_file=...)` is traced once that starts the tracer.
#[pyfunction]
fn is_enabled() -> bool {
    native::is_enabled() || (config().enable && !native::is_finalized())
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

// ------------------------------------------------------------------ update() during a call

/// Entries an [`Updates`] log keeps at most (one per thread and key; beyond it the oldest
/// goes).
const UPDATES_CAP: usize = 1024;

/// What `dft_fn.update()` set, for the decorated calls of that `dft_fn` in progress on the
/// updating thread: shared by the `dft_fn` (made when it first decorates) and each
/// `_Wrapped` it made.
///
/// A call reads `gen` at its entry and at its exit (two loads). The same value: no update of
/// this `dft_fn` ran meanwhile (on any thread), and the call records as it would without
/// this. Moved: the call's event also gets the entries of its own thread whose generation is
/// past the entry value ([`Updates::since`]), over its captured values.
///
/// One entry per (thread, key), with the generation of its latest update: an earlier update
/// of that key by that thread is no use to anyone (a call in progress that saw both takes the
/// later one; a call that saw only the earlier one has ended and took it; a call that starts
/// later sees neither), so the log holds at most threads x keys entries ([`UPDATES_CAP`]).
/// Threads are told apart by their Python thread state: an address reused by a later thread
/// names only entries older than any call of that thread.
struct Updates {
    /// Bumped once per `update()` that set something; written and read with the GIL held.
    gen: AtomicU64,
    log: std::sync::Mutex<Vec<Update>>,
}

struct Update {
    gen: u64,
    thread: usize,
    key: Py<PyString>,
    value: PyObject,
}

/// The calling thread's token for [`Updates`]: its Python thread state.
fn thread_token(_py: Python<'_>) -> usize {
    // SAFETY: the GIL is held (the token proves it), so this thread has a current thread
    // state; only its address is used.
    unsafe { pyo3::ffi::PyThreadState_Get() as usize }
}

/// Keys equal as text, without running Python code (no `__eq__`): a key that is not valid
/// UTF-8 matches only itself.
fn plain_same_key(a: &Bound<'_, PyString>, b: &Bound<'_, PyString>) -> bool {
    a.is(b) || matches!((a.to_str(), b.to_str()), (Ok(x), Ok(y)) if x == y)
}

impl Updates {
    fn new() -> std::sync::Arc<Self> {
        std::sync::Arc::new(Updates {
            gen: AtomicU64::new(0),
            log: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The generation now (a call's entry and exit value).
    #[inline(always)]
    fn mark(&self) -> u64 {
        self.gen.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Update>> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Logs the values one `update()` set (none is None), as of a new generation.
    fn note(&self, py: Python<'_>, set: Vec<(Bound<'_, PyString>, Bound<'_, PyAny>)>) {
        if set.is_empty() {
            return;
        }
        let me = thread_token(py);
        // Objects replaced are dropped after the lock is released (a `__del__` may update).
        let mut old: Vec<PyObject> = Vec::new();
        {
            let mut log = self.lock();
            let gen = self.gen.load(Ordering::Relaxed) + 1;
            self.gen.store(gen, Ordering::Relaxed);
            for (key, value) in set {
                let found = log
                    .iter_mut()
                    .find(|u| u.thread == me && plain_same_key(u.key.bind(py), &key));
                match found {
                    Some(u) => {
                        u.gen = gen;
                        old.push(std::mem::replace(&mut u.value, value.unbind()));
                    }
                    None => {
                        if log.len() >= UPDATES_CAP {
                            if let Some(i) = (0..log.len()).min_by_key(|&i| log[i].gen) {
                                let u = log.remove(i);
                                old.push(u.key.into_any());
                                old.push(u.value);
                            }
                        }
                        log.push(Update {
                            gen,
                            thread: me,
                            key: key.unbind(),
                            value: value.unbind(),
                        });
                    }
                }
            }
        }
        drop(old);
    }

    /// The calling thread's updates after generation `mark`, in the order their keys were
    /// first set.
    fn since<'py>(
        &self,
        py: Python<'py>,
        mark: u64,
    ) -> Vec<(Bound<'py, PyString>, Bound<'py, PyAny>)> {
        let me = thread_token(py);
        let log = self.lock();
        log.iter()
            .filter(|u| u.thread == me && u.gen > mark)
            .map(|u| (u.key.bind(py).clone(), u.value.bind(py).clone()))
            .collect()
    }

    /// [`Updates::since`] over `vals`: a key already there takes the update's value (it was
    /// set during the call, after the arguments were passed), others are added.
    fn overlay<'py>(&self, py: Python<'py>, mark: u64, vals: &mut Collected<'py>) {
        for (key, value) in self.since(py, mark) {
            let v = py_val(&value);
            match vals.iter_mut().find(|(k, _)| same_key(k, &key)) {
                Some(slot) => slot.1 = v,
                None => {
                    let _ = vals.push((key, v));
                }
            }
        }
    }
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
    /// The core's schema for `name` and `cat` (`native::intern`), looked up at the first
    /// recorded call without args: null until then, [`NO_SCHEMA`] when there is none.
    schema: std::sync::atomic::AtomicPtr<dftracer_core::Schema>,
    /// Per capture entry, its index in [`CAPTURED`], when every captured name is one of
    /// those and nothing else can add args (no `base` values, no `self` attributes): calls
    /// whose captured values are all ints (or absent) are then recorded from a keyed schema
    /// (see [`Wrapped::record_ints`]).
    int_caps: Option<heapless::Vec<u8, 4>>,
    /// The keyed schemas by the set of capture entries present (bit j: entry j), looked up
    /// at first use: null until then, [`NO_SCHEMA`] when there is none.
    keyed: [std::sync::atomic::AtomicPtr<dftracer_core::Schema>; 16],
    /// The `dft_fn`'s update log (a private one when built without a `dft_fn`): read at the
    /// call's entry and exit, see [`Updates`].
    updates: std::sync::Arc<Updates>,
}

/// The arg keys of a keyed schema: the [`CAPTURED`] names at `seq` (indices), in that order,
/// as one leaked slice per sequence (at most 65: the ordered choices among 4 names).
fn captured_keys(seq: &[u8]) -> &'static [(&'static str, dftracer_core::Slot)] {
    static LISTS: [OnceLock<&'static [(&'static str, dftracer_core::Slot)]>; 625] =
        [const { OnceLock::new() }; 625];
    let code = seq.iter().fold(0usize, |c, &i| c * 5 + i as usize + 1);
    LISTS[code % 625].get_or_init(|| {
        let keys: Vec<(&'static str, dftracer_core::Slot)> = seq
            .iter()
            .map(|&i| (CAPTURED[i as usize & 3], dftracer_core::Slot::Int))
            .collect();
        Box::leak(keys.into_boxed_slice())
    })
}

/// [`Wrapped::schema`] when the name or category has no schema (it needs escaping, or the
/// core's table is full): such calls are recorded with their strings.
const NO_SCHEMA: *mut dftracer_core::Schema = std::ptr::dangling_mut();

fn py_val<'py>(v: &Bound<'py, PyAny>) -> PyVal<'py> {
    match type_of(v) {
        PyType::Bool => PyVal::Bool(v.is_truthy().unwrap_or(false)),
        PyType::Int => int_of(v).unwrap_or_else(|| PyVal::Owned(text(v).into_owned())),
        PyType::Float => PyVal::Float(v.extract().unwrap_or(f64::NAN)),
        PyType::Str => match v.downcast::<PyString>() {
            Ok(s) => PyVal::Str(s.clone()),
            Err(_) => PyVal::Owned(text(v).into_owned()),
        },
        PyType::Other => PyVal::Owned(text(v).into_owned()),
    }
}

impl Wrapped {
    /// The interned schema of this function's events without args, if any.
    #[inline]
    fn schema(&self) -> Option<&'static dftracer_core::Schema> {
        let p = self.schema.load(Ordering::Acquire);
        if p.is_null() {
            let s = native::intern(Layer::Python, self.name.as_bytes(), self.cat.as_bytes());
            let p = s.map_or(NO_SCHEMA, |s| s as *const _ as *mut _);
            self.schema.store(p, Ordering::Release);
            return s;
        }
        // SAFETY: a non-null value other than NO_SCHEMA came from `native::intern`: a
        // never-freed schema.
        (p != NO_SCHEMA).then(|| unsafe { &*p })
    }

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

    /// Records the call from a keyed schema when every captured value is an `int` that fits
    /// 64 bits signed, `None` or absent, and at least one is an `int`: the values go into the
    /// ring as integers and the writer renders the line from the schema's template, the same
    /// line the general path writes. False: nothing was recorded (the general path runs).
    ///
    /// # Safety
    /// The GIL is held, no exception is set, and `args`/`nargsf`/`kwnames` are the caller's
    /// vectorcall arguments.
    #[inline]
    unsafe fn record_ints(
        &self,
        caps: &[u8],
        t0: u64,
        args: *const *mut pyo3::ffi::PyObject,
        nargsf: usize,
        kwnames: *mut pyo3::ffi::PyObject,
    ) -> bool {
        use pyo3::ffi;
        let (mut vals, mut seq, mut n, mut mask) = ([0u64; 4], [0u8; 4], 0, 0usize);
        // SAFETY: see the function's contract; every pointer read is one of the caller's
        // arguments (positional below `nargs`, keyword values after them, one per name).
        unsafe {
            let nargs = ffi::PyVectorcall_NARGS(nargsf) as usize;
            let nkw = if kwnames.is_null() {
                0
            } else {
                ffi::PyTuple_GET_SIZE(kwnames) as usize
            };
            for (j, (c, &ci)) in self.capture.iter().zip(caps).enumerate() {
                let name = c.name.as_ptr();
                let mut v: *mut ffi::PyObject = std::ptr::null_mut();
                // A keyword first, as `gather` looks.
                for k in 0..nkw {
                    let kn = ffi::PyTuple_GET_ITEM(kwnames, k as ffi::Py_ssize_t);
                    if kn == name || ffi::PyUnicode_Compare(kn, name) == 0 {
                        v = *args.add(nargs + k);
                        break;
                    }
                }
                if v.is_null() {
                    match c.index {
                        Some(i) if i < nargs => v = *args.add(i),
                        _ => continue,
                    }
                }
                match slot_int(v) {
                    SlotInt::Skip => continue,
                    SlotInt::Other => return false,
                    SlotInt::Int(x) => vals[n] = x,
                }
                seq[n] = ci;
                n += 1;
                mask |= 1 << j;
            }
        }
        if n == 0 {
            return false;
        }
        let slot = &self.keyed[mask & 15];
        let mut p = slot.load(Ordering::Acquire);
        if p.is_null() {
            p = native::intern_keyed(
                Layer::Python,
                self.name.as_bytes(),
                self.cat.as_bytes(),
                captured_keys(&seq[..n]),
            )
            .map_or(NO_SCHEMA, |s| s as *const _ as *mut _);
            slot.store(p, Ordering::Release);
        }
        if p == NO_SCHEMA {
            return false;
        }
        // SAFETY: a non-null, non-NO_SCHEMA value is an interned schema (never freed).
        let schema: &'static dftracer_core::Schema = unsafe { &*p };
        let t1 = native::now();
        native::complete_keyed(schema, t0, t1.saturating_sub(t0), &vals[..n]);
        true
    }

    fn finish_call(&self, py: Python<'_>, t0: u64, vals: &Collected) {
        let t1 = native::now();
        if vals.is_empty() {
            if let Some(schema) = self.schema() {
                native::complete_interned(schema, t0, t1.saturating_sub(t0));
                return;
            }
        }
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
/// Calls `func` with our caller's vectorcall arguments: through `func`'s own vectorcall slot
/// when it has one (a Python function does), else through `PyObject_Vectorcall`. Unlike
/// `PyObject_Vectorcall`, the slot's result is not checked here (`_Py_CheckFunctionResult`):
/// we return it as ours, and whoever called us through vectorcall or `tp_call` checks that.
///
/// # Safety
/// The GIL is held; `func` is a live object and `args`/`nargsf`/`kwnames` are a valid
/// vectorcall argument list (our caller's own).
#[inline(always)]
unsafe fn forward(
    func: *mut pyo3::ffi::PyObject,
    args: *const *mut pyo3::ffi::PyObject,
    nargsf: usize,
    kwnames: *mut pyo3::ffi::PyObject,
) -> *mut pyo3::ffi::PyObject {
    use pyo3::ffi;
    // SAFETY: `func` is live (caller); a type with Py_TPFLAGS_HAVE_VECTORCALL keeps a
    // (possibly null) vectorcallfunc at its positive tp_vectorcall_offset in each instance.
    unsafe {
        let tp = ffi::Py_TYPE(func);
        let off = (*tp).tp_vectorcall_offset;
        if ffi::PyType_HasFeature(tp, ffi::Py_TPFLAGS_HAVE_VECTORCALL) != 0 && off > 0 {
            let slot = (func as *const u8).offset(off) as *const Option<ffi::vectorcallfunc>;
            if let Some(f) = *slot {
                return f(func, args, nargsf, kwnames);
            }
        }
        ffi::PyObject_Vectorcall(func, args, nargsf, kwnames)
    }
}

unsafe extern "C" fn wrapped_vectorcall(
    callable: *mut pyo3::ffi::PyObject,
    args: *const *mut pyo3::ffi::PyObject,
    nargsf: usize,
    kwnames: *mut pyo3::ffi::PyObject,
) -> *mut pyo3::ffi::PyObject {
    let off = VC_OFFSET.load(Ordering::Relaxed);
    // SAFETY: `callable` is a _Wrapped (only its type points tp_vectorcall_offset here) and
    // the struct starts at `off` (repr(C), first field); its fields are never mutated after
    // construction, and the GIL is held by our caller.
    let w: &Wrapped = unsafe { &*((callable as *const u8).add(off) as *const Wrapped) };
    let func = w.func.as_ptr();
    if !active() {
        // SAFETY: forwarding the caller's own (valid) vectorcall arguments.
        return unsafe { forward(func, args, nargsf, kwnames) };
    }
    // Two loads of the update generation, at entry and exit: moved, an `update()` of the
    // dft_fn ran during the call (on some thread) and the general path takes what this
    // thread set (see `Updates`).
    let updates: &Updates = &w.updates;
    let g0 = updates.mark();
    let t0 = native::now();
    // SAFETY: as above.
    let result = unsafe { forward(func, args, nargsf, kwnames) };
    if updates.mark() != g0 {
        // SAFETY: the caller's own vectorcall arguments; the GIL is held.
        unsafe { wrapped_general(w, t0, Some(g0), args, nargsf, kwnames) };
        return result;
    }
    if w.capture.is_empty() {
        // No parameter is recorded: the event has no args (no argument list to build).
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            w.schema().map(|schema| native::end_interned(schema, t0))
        }));
        if !matches!(done, Ok(None)) {
            return result;
        }
    }
    if !result.is_null() {
        if let Some(caps) = &w.int_caps {
            // SAFETY: the caller's own vectorcall arguments; the GIL is held and no exception
            // is set (the call returned a value). A panic must not cross this extern "C" fn.
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
                w.record_ints(caps, t0, args, nargsf, kwnames)
            }));
            if !matches!(done, Ok(false)) {
                return result;
            }
        }
    }
    // SAFETY: the caller's own vectorcall arguments; the GIL is held.
    unsafe { wrapped_general(w, t0, None, args, nargsf, kwnames) };
    result
}

/// The general end of a vectorcall: collects the captured arguments (and, with `since`, the
/// calling thread's updates after that generation) and records the event. Never raises: a
/// pending exception of the call is kept aside and restored.
///
/// # Safety
/// The GIL is held and `args`/`nargsf`/`kwnames` are the call's vectorcall arguments.
#[inline(never)]
unsafe fn wrapped_general(
    w: &Wrapped,
    t0: u64,
    since: Option<u64>,
    args: *const *mut pyo3::ffi::PyObject,
    nargsf: usize,
    kwnames: *mut pyo3::ffi::PyObject,
) {
    use pyo3::ffi;
    // SAFETY: the GIL is held (the function's contract).
    let py = unsafe { Python::assume_gil_acquired() };
    // Built here, not in the closure: there it was built and then moved (a 1.3 KB copy per
    // call).
    let mut vals: Collected = heapless::Vec::new();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // Keep a pending exception of the call aside while we look at arguments.
        let saved = if w.capture.is_empty() && since.is_none() {
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
        if let Some(mark) = since {
            w.updates.overlay(py, mark, &mut vals);
        }
        w.finish_call(py, t0, &vals);
        vals.clear();
        if let Some(e) = saved {
            e.restore(py);
        }
    }));
    let _ = outcome; // recording never affects the call's own result
}

/// A captured value as a keyed schema's slot sees it.
enum SlotInt {
    /// `None`: not recorded.
    Skip,
    /// An exact `int` within 64 bits signed: its bits.
    Int(u64),
    /// Anything else: the general path records it.
    Other,
}

/// [`SlotInt`] of `v`.
///
/// # Safety
/// `v` is a live object, the GIL is held and no exception is set.
#[inline(always)]
unsafe fn slot_int(v: *mut pyo3::ffi::PyObject) -> SlotInt {
    use pyo3::ffi;
    // SAFETY: the function's contract.
    unsafe {
        if v == ffi::Py_None() {
            return SlotInt::Skip;
        }
        if ffi::PyLong_CheckExact(v) == 0 {
            return SlotInt::Other;
        }
        let mut overflow = 0;
        let x = ffi::PyLong_AsLongAndOverflow(v, &mut overflow);
        if overflow != 0 || (x == -1 && !ffi::PyErr_Occurred().is_null()) {
            ffi::PyErr_Clear();
            return SlotInt::Other;
        }
        SlotInt::Int(x as i64 as u64)
    }
}

/// [`Wrapped::int_caps`] of a capture list.
fn int_caps(
    capture: &[(Py<PyString>, Option<usize>)],
    self_attrs: bool,
    base: &[(Py<PyString>, PyObject)],
) -> Option<heapless::Vec<u8, 4>> {
    if self_attrs || !base.is_empty() || capture.is_empty() {
        return None;
    }
    Python::with_gil(|py| {
        let mut out = heapless::Vec::new();
        for (name, _) in capture {
            let name = name.bind(py).to_str().ok()?;
            let i = CAPTURED.iter().position(|c| *c == name)? as u8;
            if out.contains(&i) {
                return None;
            }
            out.push(i).ok()?;
        }
        Some(out)
    })
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
            None,
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
    #[pyo3(signature = (func, name, cat, capture=Vec::new(), self_attrs=false, base=Vec::new(), df=None))]
    fn new(
        func: PyObject,
        name: &Bound<'_, PyString>,
        cat: &Bound<'_, PyString>,
        capture: Vec<(Py<PyString>, Option<usize>)>,
        self_attrs: bool,
        base: Vec<(Py<PyString>, PyObject)>,
        df: Option<&Bound<'_, DftFn>>,
    ) -> Self {
        // The dft_fn's update log (made now if it has none); a dft_fn borrowed elsewhere
        // (never, at decoration) or none: a private log no update reaches.
        let updates = df
            .and_then(|d| d.try_borrow_mut().ok())
            .map_or_else(Updates::new, |mut d| d.updates());
        Wrapped {
            updates,
            vectorcall: wrapped_vectorcall,
            func,
            name: utf8_of(name).into_owned(),
            cat: utf8_of(cat).into_owned(),
            int_caps: int_caps(&capture, self_attrs, &base),
            capture: capture
                .into_iter()
                .map(|(name, index)| Capture { name, index })
                .collect(),
            self_attrs,
            base,
            schema: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
            keyed: [const { std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()) }; 16],
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
        let g0 = self.updates.mark();
        let t0 = native::now();
        let result = func.call(args, kwargs);
        let mut vals: Collected = heapless::Vec::new();
        if !self.capture.is_empty() {
            let positional = |i: usize| args.get_item(i).ok();
            let keyword =
                |n: &Bound<'py, PyString>| kwargs.and_then(|k| k.get_item(n).ok().flatten());
            self.gather(py, &positional, &keyword, &mut vals);
        }
        if self.updates.mark() != g0 {
            self.updates.overlay(py, g0, &mut vals);
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

/// `dft_fn`'s parameters, in order (after `self`).
static DFT_FN: Params<7> = Params::new([
    "cat",
    "name",
    "epoch",
    "step",
    "image_idx",
    "image_size",
    "enable",
]);

/// `dftracer.python.dft_fn`: a category of events, a decorator factory (`.log`, `.iter`: their
/// Python half is in `dftracer.python`) and a context manager.
///
/// `dft_fn(cat, name=None, epoch=None, step=None, image_idx=None, image_size=None,
/// enable=True)`; `name` defaults to the calling function's name.
///
/// Built inline in loops (`with dft_fn("io", name="read"):`), so constructing, entering and
/// leaving it allocate nothing but the object: the type is called through its own vectorcall
/// entry (no args tuple, no kwargs dict, see `dft_fn_vectorcall`), `cat` and `name` are the
/// caller's str objects, the four captured values have fixed slots.
#[pyclass(subclass, dict, module = "dftracer.python", name = "dft_fn")]
struct DftFn {
    /// None until `__init__` ran (a subclass that never calls it records cat "").
    cat: Option<Py<PyString>>,
    /// None: not given and tracing was off when built.
    name: Option<Py<PyString>>,
    t1: u64,
    flushed: bool,
    enable: bool,
    /// epoch, step, image_idx, image_size (CAPTURED order).
    captured: [Option<PyObject>; 4],
    /// Bit i: `update()` set `captured[i]` (else it is the constructor's value, which the
    /// functions this dft_fn decorates record when a call does not pass it: `_base_args`).
    updated: u8,
    /// Other keys set by `update(args=...)`, in order.
    extra: Vec<(Py<PyString>, PyObject)>,
    /// What `update()` set, for the decorated calls in progress (see [`Updates`]): made when
    /// the dft_fn first decorates (a region built inline never has one: no allocation).
    updates: Option<std::sync::Arc<Updates>>,
}

const CAPTURED: [&str; 4] = ["epoch", "step", "image_idx", "image_size"];

/// The interned key of captured slot `i`.
fn captured_key(py: Python<'_>, i: usize) -> &Bound<'_, PyString> {
    match i {
        0 => pyo3::intern!(py, "epoch"),
        1 => pyo3::intern!(py, "step"),
        2 => pyo3::intern!(py, "image_idx"),
        _ => pyo3::intern!(py, "image_size"),
    }
}

/// The calling function's name: the innermost Python frame (native code has none; for a
/// subclass whose `__init__` calls `super().__init__`, that `__init__`, as in pydftracer).
fn caller_name(py: Python<'_>) -> Py<PyString> {
    let name = || -> PyResult<Bound<'_, PyString>> {
        let f = py.import("sys")?.call_method1("_getframe", (0,))?;
        Ok(f.getattr("f_code")?
            .getattr("co_name")?
            .downcast_into::<PyString>()?)
    };
    name()
        .unwrap_or_else(|_| PyString::new(py, "<module>"))
        .unbind()
}

/// The value a `dftracer.python` `TagValue` holds (pydftracer's `update(args=...)` records
/// `TagValue(9, TagDType.INT)` as 9); any other object as it is.
fn tag_value_inner<'py>(v: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let ty = v.get_type();
    if ty.name()?.to_str()? == "TagValue" && ty.module()?.to_str()?.starts_with("dftracer.") {
        return v.getattr(pyo3::intern!(v.py(), "_value"));
    }
    Ok(v)
}

impl DftFn {
    fn blank() -> Self {
        DftFn {
            cat: None,
            name: None,
            t1: 0,
            flushed: false,
            enable: true,
            captured: Default::default(),
            updated: 0,
            extra: Vec::new(),
            updates: None,
        }
    }

    /// The update log, made at the first call.
    fn updates(&mut self) -> std::sync::Arc<Updates> {
        self.updates.get_or_insert_with(Updates::new).clone()
    }

    /// `__init__`: sets every field from the sorted arguments.
    fn configure(&mut self, py: Python<'_>, a: [Option<Bound<'_, PyAny>>; 7]) -> PyResult<()> {
        let [cat, name, epoch, step, image_idx, image_size, enable] = a;
        let cat = cat
            .ok_or_else(|| PyTypeError::new_err("dft_fn() missing required argument 'cat'"))?
            .downcast_into::<PyString>()
            .map_err(|_| PyTypeError::new_err("dft_fn(): cat must be a str"))?;
        let name = match name {
            Some(n) if !n.is_none() => Some(
                n.downcast_into::<PyString>()
                    .map_err(|_| PyTypeError::new_err("dft_fn(): name must be a str"))?
                    .unbind(),
            ),
            _ => None,
        };
        self.enable = match enable {
            Some(e) => e.is_truthy()?,
            None => true,
        };
        let on = active();
        self.cat = Some(cat.unbind());
        self.name = match name {
            None if on => Some(caller_name(py)),
            n => n,
        };
        for (slot, v) in self
            .captured
            .iter_mut()
            .zip([epoch, step, image_idx, image_size])
        {
            *slot = v.filter(|v| !v.is_none()).map(Bound::unbind);
        }
        self.updated = 0;
        self.extra.clear();
        self.t1 = if self.enable && on { native::now() } else { 0 };
        self.flushed = false;
        Ok(())
    }

    fn set_arg(&mut self, key: &Bound<'_, PyString>, value: Bound<'_, PyAny>) {
        if value.is_none() {
            return;
        }
        let py = key.py();
        if let Some(i) = CAPTURED.iter().position(|c| key.to_str().ok() == Some(*c)) {
            self.captured[i] = Some(value.unbind());
            self.updated |= 1 << i;
        } else if let Some(slot) = self
            .extra
            .iter_mut()
            .find(|(k, _)| same_key(k.bind(py), key))
        {
            slot.1 = value.unbind();
        } else {
            self.extra.push((key.clone().unbind(), value.unbind()));
        }
    }

    fn start(&mut self) {
        self.t1 = if self.enable && active() {
            native::now()
        } else {
            0
        };
        self.flushed = false;
    }

    fn record_now(&mut self, py: Python<'_>) {
        self.flushed = true;
        if !self.enable || !active() {
            return;
        }
        let t2 = native::now();
        if self.record_fast(t2) {
            return;
        }
        let mut vals: Collected = heapless::Vec::new();
        for (i, v) in self.captured.iter().enumerate() {
            if let Some(v) = v {
                let _ = vals.push((captured_key(py, i).clone(), py_val(v.bind(py))));
            }
        }
        for (k, v) in &self.extra {
            let _ = vals.push((k.bind(py).clone(), py_val(v.bind(py))));
        }
        let empty = pyo3::intern!(py, "");
        let name = utf8_of(self.name.as_ref().map_or(empty, |n| n.bind(py)));
        let cat = utf8_of(self.cat.as_ref().map_or(empty, |c| c.bind(py)));
        record(
            name.as_bytes(),
            cat.as_bytes(),
            self.t1,
            t2.saturating_sub(self.t1),
            &vals,
        );
    }

    /// `__exit__`'s common case: nothing to record (tracing off, disabled) or values
    /// `record_fast` takes; false: `record_now` must run (nothing was recorded).
    #[inline]
    fn finish_fast(&mut self) -> bool {
        if !self.enable || !active() {
            self.flushed = true;
            return true;
        }
        if self.extra.is_empty() {
            if self.captured.iter().all(Option::is_none) {
                if let Some(schema) = self.plain_schema() {
                    // No args: the core reads the clock and records in one call.
                    native::end_interned(schema, self.t1);
                    self.flushed = true;
                    return true;
                }
            } else if self.record_ints() {
                self.flushed = true;
                return true;
            }
        }
        let t2 = native::now();
        self.flushed = self.record_fast(t2);
        self.flushed
    }

    /// Records the event from a keyed schema when every captured value is an `int` that fits
    /// 64 bits signed or `None` (as `Wrapped::record_ints`; keys in [`CAPTURED`] order, as the
    /// general path writes them). False: nothing was recorded.
    fn record_ints(&self) -> bool {
        let (mut vals, mut seq, mut n) = ([0u64; 4], [0u8; 4], 0);
        for (i, v) in self.captured.iter().enumerate() {
            let Some(v) = v else { continue };
            let v = v.as_ptr();
            // SAFETY: a live object we hold; the GIL is held (a method of ours runs) and no
            // exception is set.
            match unsafe { slot_int(v) } {
                SlotInt::Skip => continue,
                SlotInt::Other => return false,
                SlotInt::Int(x) => vals[n] = x,
            }
            seq[n] = i as u8;
            n += 1;
        }
        let text = |s: &Option<Py<PyString>>| match s {
            // SAFETY: as in `plain_schema`.
            Some(s) => unsafe { fast::utf8(s.as_ptr()) },
            None => Some(&b""[..]),
        };
        let (Some(name), Some(cat)) = (text(&self.name), text(&self.cat)) else {
            return false;
        };
        if n == 0 {
            return false;
        }
        let Some(schema) = native::intern_keyed(Layer::Python, name, cat, captured_keys(&seq[..n]))
        else {
            return false;
        };
        let t2 = native::now();
        native::complete_keyed(schema, self.t1, t2.saturating_sub(self.t1), &vals[..n]);
        true
    }

    /// The core's schema of this name and category for an event without args, when it has
    /// one (the line rendered from a cached template, no strings copied into the ring).
    #[inline]
    fn plain_schema(&self) -> Option<&'static dftracer_core::Schema> {
        let text = |s: &Option<Py<PyString>>| match s {
            // SAFETY: a live str (we hold it), the GIL is held (a method of ours runs), no
            // exception is set.
            Some(s) => unsafe { fast::utf8(s.as_ptr()) },
            None => Some(&b""[..]),
        };
        native::intern(Layer::Python, text(&self.name)?, text(&self.cat)?)
    }

    /// `record_now` for the common values (see [`fast::plain_value`]) on borrowed pointers;
    /// false: nothing was recorded, the general conversion must run.
    #[inline]
    fn record_fast(&self, t2: u64) -> bool {
        let text = |s: &Option<Py<PyString>>| match s {
            // SAFETY: a live str (we hold it), the GIL is held (a method of ours runs), no
            // exception is set.
            Some(s) => unsafe { fast::utf8(s.as_ptr()) },
            None => Some(&b""[..]),
        };
        let (Some(name), Some(cat)) = (text(&self.name), text(&self.cat)) else {
            return false;
        };
        let mut args: heapless::Vec<Arg, MAX_PY_ARGS> = heapless::Vec::new();
        for (v, key) in self.captured.iter().zip(CAPTURED) {
            let Some(v) = v else { continue };
            // SAFETY: as above.
            let Some(value) = (unsafe { fast::plain_value(v.as_ptr()) }) else {
                return false;
            };
            let _ = args.push(Arg {
                key: key.as_bytes(),
                value,
            }); // 4 slots: always room
        }
        for (k, v) in &self.extra {
            // SAFETY: as above.
            let (Some(key), Some(value)) =
                (unsafe { (fast::utf8(k.as_ptr()), fast::plain_value(v.as_ptr())) })
            else {
                return false;
            };
            if args.push(Arg { key, value }).is_err() {
                return false;
            }
        }
        if args.is_empty() {
            // No args (all captured values None): as in `finish_fast`.
            if let Some(schema) = self.plain_schema() {
                native::complete_interned(schema, self.t1, t2.saturating_sub(self.t1));
                return true;
            }
        }
        native::complete(
            Layer::Python,
            name,
            cat,
            self.t1,
            t2.saturating_sub(self.t1),
            &args,
        );
        true
    }

    /// `dftracer.python.<func>`: the Python half of `dft_fn` (decorating and iterating build
    /// Python wrappers; they run at import time or once per loop).
    fn python_half<'py>(py: Python<'py>, func: &str) -> PyResult<Bound<'py, PyAny>> {
        py.import("dftracer.python")?.getattr(func)
    }
}

/// The `dft_fn` type (pyo3's lookup of it costs ~60 instructions).
static DFT_FN_TYPE: std::sync::atomic::AtomicPtr<pyo3::ffi::PyTypeObject> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// The vectorcall entry of the `dft_fn` type: `dft_fn(cat, name="x")` builds the object from
/// the caller's argument array, as `__new__` + `__init__` would.
unsafe extern "C" fn dft_fn_vectorcall(
    callable: *mut pyo3::ffi::PyObject,
    args: *const *mut pyo3::ffi::PyObject,
    nargsf: usize,
    kwnames: *mut pyo3::ffi::PyObject,
) -> *mut pyo3::ffi::PyObject {
    // SAFETY: nargsf comes from the caller.
    let nargs = unsafe { pyo3::ffi::PyVectorcall_NARGS(nargsf) };
    // SAFETY: called by the interpreter with the GIL held; the trampoline (what every pyo3
    // method goes through) counts the GIL for pyo3, turns errors and panics into exceptions.
    unsafe {
        pyo3::impl_::trampoline::fastcall_with_keywords(
            callable,
            args,
            nargs,
            kwnames,
            dft_fn_new_fast,
        )
    }
}

unsafe fn dft_fn_new_fast(
    py: Python<'_>,
    callable: *mut pyo3::ffi::PyObject,
    args: *const *mut pyo3::ffi::PyObject,
    nargs: pyo3::ffi::Py_ssize_t,
    kwnames: *mut pyo3::ffi::PyObject,
) -> PyResult<*mut pyo3::ffi::PyObject> {
    if callable != DFT_FN_TYPE.load(Ordering::Relaxed).cast() {
        // SAFETY: the interpreter's vectorcall arguments.
        let (pos, kw) = unsafe { vectorcall_args(py, args, nargs, kwnames) }?;
        // tp_vectorcall is never inherited, so this is not reached; should it be, the
        // type's own call (`__new__` then `__init__`) with a tuple and a dict.
        let pos = PyTuple::new(py, pos)?;
        let kwargs = PyDict::new(py);
        for (k, v) in kw {
            kwargs.set_item(k, v)?;
        }
        // SAFETY: `callable` is a type (only types carry this entry); type.__call__ on it.
        let Some(call) = (unsafe { (*pyo3::ffi::Py_TYPE(callable)).tp_call }) else {
            return Err(PyTypeError::new_err("dft_fn: type not callable"));
        };
        // SAFETY: valid type, tuple and dict; a new reference or NULL with an exception set.
        let r = unsafe { call(callable, pos.as_ptr(), kwargs.as_ptr()) };
        return if r.is_null() {
            Err(PyErr::fetch(py))
        } else {
            Ok(r)
        };
    }
    // The common call (keywords by identity) on borrowed pointers, else the general sort.
    // SAFETY: the interpreter's vectorcall arguments, borrowed for this call.
    let sorted = match unsafe { DFT_FN.sort_raw(args, nargs, kwnames) } {
        // SAFETY: NULL or a live argument of the caller.
        Some(raw) => raw.map(|p| unsafe { Bound::from_borrowed_ptr_or_opt(py, p) }),
        None => {
            // SAFETY: as above.
            let (pos, kw) = unsafe { vectorcall_args(py, args, nargs, kwnames) }?;
            DFT_FN.sort("dft_fn", pos, kw, true)?
        }
    };
    let mut df = DftFn::blank();
    df.configure(py, sorted)?;
    Ok(Bound::new(py, df)?.into_ptr())
}

/// tp_init of `dft_fn`: `__init__` for calls that go through `type.__call__` (subclasses
/// that do not define `__init__` go through the `__init__` method instead).
unsafe extern "C" fn dft_fn_init(
    slf: *mut pyo3::ffi::PyObject,
    args: *mut pyo3::ffi::PyObject,
    kwargs: *mut pyo3::ffi::PyObject,
) -> std::os::raw::c_int {
    let r = std::panic::catch_unwind(|| {
        Python::with_gil(|py| {
            // SAFETY: the interpreter passes the object, an args tuple and a kwargs dict or NULL.
            let (slf, args, kwargs) = unsafe {
                (
                    Bound::from_borrowed_ptr(py, slf),
                    Bound::from_borrowed_ptr(py, args),
                    Bound::from_borrowed_ptr_or_opt(py, kwargs),
                )
            };
            let r = (|| -> PyResult<()> {
                let kwargs = match &kwargs {
                    Some(k) => Some(k.downcast::<PyDict>()?),
                    None => None,
                };
                DftFn::init_from(
                    slf.downcast::<DftFn>()?,
                    args.downcast::<PyTuple>()?,
                    kwargs,
                )
            })();
            match r {
                Ok(()) => 0,
                Err(e) => {
                    e.restore(py);
                    -1
                }
            }
        })
    });
    r.unwrap_or_else(|_| {
        Python::with_gil(|py| {
            PyErr::new::<pyo3::exceptions::PyRuntimeError, _>("dft_fn.__init__ panicked")
                .restore(py)
        });
        -1
    })
}

/// `dft_fn.__enter__` (METH_NOARGS): starts the region now. The common case touches no
/// Python object (a borrow flag, the clock), so it skips pyo3's trampoline; anything else
/// (the object already borrowed) goes through it and raises as pyo3 would.
unsafe extern "C" fn dft_fn_enter(
    slf: *mut pyo3::ffi::PyObject,
    args: *mut pyo3::ffi::PyObject,
) -> *mut pyo3::ffi::PyObject {
    let done = std::panic::catch_unwind(|| {
        // SAFETY: called by the interpreter with the GIL held; the method descriptor checked
        // that `slf` is a dft_fn (or a subclass), borrowed for this call.
        let obj = unsafe { pyo3::Borrowed::from_ptr(Python::assume_gil_acquired(), slf) };
        // SAFETY: as above.
        let cell = unsafe { obj.downcast_unchecked::<DftFn>() };
        match cell.try_borrow_mut() {
            Ok(mut d) => {
                d.start();
                true
            }
            Err(_) => false,
        }
    });
    match done {
        // SAFETY: `slf` is live; `__enter__` returns it (a new reference).
        Ok(true) => unsafe { new_ref(slf) },
        // SAFETY: as above; pyo3's trampoline counts the GIL, turns errors into exceptions.
        Ok(false) => unsafe { pyo3::impl_::trampoline::noargs(slf, args, dft_fn_enter_general) },
        Err(_) => panicked(c"dft_fn.__enter__ panicked"),
    }
}

unsafe fn dft_fn_enter_general(
    py: Python<'_>,
    slf: *mut pyo3::ffi::PyObject,
) -> PyResult<*mut pyo3::ffi::PyObject> {
    // SAFETY: as in `dft_fn_enter`.
    let obj = unsafe { Bound::from_borrowed_ptr(py, slf).downcast_into_unchecked::<DftFn>() };
    obj.try_borrow_mut()?.start();
    Ok(obj.into_ptr())
}

/// `dft_fn.__exit__(exc_type, exc_value, traceback)` (METH_FASTCALL; the arguments are not
/// used): records the region unless `flush()` did. The common case (see
/// [`DftFn::finish_fast`]) skips pyo3's trampoline and argument extraction; anything else
/// goes through them.
unsafe extern "C" fn dft_fn_exit(
    slf: *mut pyo3::ffi::PyObject,
    args: *const *mut pyo3::ffi::PyObject,
    nargs: pyo3::ffi::Py_ssize_t,
    kwnames: *mut pyo3::ffi::PyObject,
) -> *mut pyo3::ffi::PyObject {
    use pyo3::ffi;
    let done = std::panic::catch_unwind(|| {
        // SAFETY: as in `dft_fn_enter`.
        let obj = unsafe { pyo3::Borrowed::from_ptr(Python::assume_gil_acquired(), slf) };
        // SAFETY: as above.
        let cell = unsafe { obj.downcast_unchecked::<DftFn>() };
        match cell.try_borrow_mut() {
            Ok(mut d) => d.flushed || d.finish_fast(),
            Err(_) => false,
        }
    });
    match done {
        // SAFETY: False is immortal or counted; a new reference either way.
        Ok(true) => unsafe { new_ref(ffi::Py_False()) },
        // SAFETY: the interpreter's arguments; pyo3's trampoline as in `dft_fn_enter`.
        Ok(false) => unsafe {
            pyo3::impl_::trampoline::fastcall_with_keywords(
                slf,
                args,
                nargs,
                kwnames,
                dft_fn_exit_general,
            )
        },
        Err(_) => panicked(c"dft_fn.__exit__ panicked"),
    }
}

unsafe fn dft_fn_exit_general(
    py: Python<'_>,
    slf: *mut pyo3::ffi::PyObject,
    _args: *const *mut pyo3::ffi::PyObject,
    _nargs: pyo3::ffi::Py_ssize_t,
    _kwnames: *mut pyo3::ffi::PyObject,
) -> PyResult<*mut pyo3::ffi::PyObject> {
    // SAFETY: as in `dft_fn_enter`.
    let obj = unsafe { Bound::from_borrowed_ptr(py, slf).downcast_into_unchecked::<DftFn>() };
    let mut d = obj.try_borrow_mut()?;
    if !d.flushed {
        d.record_now(py);
    }
    // SAFETY: False is immortal or counted; a new reference either way.
    Ok(unsafe { new_ref(pyo3::ffi::Py_False()) })
}

/// A RuntimeError for a panic caught in an entry without pyo3's trampoline; NULL.
#[cold]
fn panicked(msg: &'static std::ffi::CStr) -> *mut pyo3::ffi::PyObject {
    // SAFETY: called from an entry of the interpreter (GIL held); a static message.
    unsafe { pyo3::ffi::PyErr_SetString(pyo3::ffi::PyExc_RuntimeError, msg.as_ptr()) };
    std::ptr::null_mut()
}

/// Adds `dft_fn.__enter__` and `dft_fn.__exit__` (see `dft_fn_enter`, `dft_fn_exit`).
fn add_dft_fn_protocol(py: Python<'_>) -> PyResult<()> {
    let enter = Box::into_raw(Box::new(pyo3::ffi::PyMethodDef {
        ml_name: c"__enter__".as_ptr(),
        ml_meth: pyo3::ffi::PyMethodDefPointer {
            PyCFunction: dft_fn_enter,
        },
        ml_flags: pyo3::ffi::METH_NOARGS,
        ml_doc: c"Starts the region now; returns the object.".as_ptr(),
    }));
    let exit = fastcall_def(
        c"__exit__",
        c"Records the region (unless flush() did); never suppresses an exception.",
        dft_fn_exit,
    );
    let tp = DftFn::type_object(py);
    for (name, def) in [("__enter__", enter), ("__exit__", exit)] {
        // SAFETY: a definition for the life of the process, for our own type.
        let descr = unsafe {
            Bound::from_owned_ptr_or_err(py, pyo3::ffi::PyDescr_NewMethod(tp.as_type_ptr(), def))
        }?;
        tp.setattr(name, descr)?;
    }
    Ok(())
}

/// Makes `dft_fn(...)` skip the args tuple and kwargs dict, and `__init__` run for calls
/// through `type.__call__`.
fn enable_dft_fn_fast_new(py: Python<'_>) {
    let tp = DftFn::type_object_raw(py);
    DFT_FN_TYPE.store(tp, Ordering::Relaxed);
    // SAFETY: our own heap type, before any instance exists; tp_vectorcall is a type's
    // documented "call this type" entry (never inherited by subclasses), tp_init a slot.
    unsafe {
        (*tp).tp_vectorcall = Some(dft_fn_vectorcall);
        (*tp).tp_init = Some(dft_fn_init);
    }
}

impl DftFn {
    fn init_from(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let a = DFT_FN.sort(
            "dft_fn",
            args.iter(),
            kwargs.into_iter().flat_map(|k| k.iter()),
            true,
        )?;
        slf.try_borrow_mut()?.configure(slf.py(), a)
    }
}

#[pymethods]
impl DftFn {
    /// The object; `__init__` sets it up (so subclasses may take other arguments).
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        DftFn::blank()
    }

    #[pyo3(signature = (*args, **kwargs))]
    fn __init__(
        slf: &Bound<'_, Self>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        DftFn::init_from(slf, args, kwargs)
    }

    #[getter]
    fn cat(&self, py: Python<'_>) -> Py<PyString> {
        match &self.cat {
            Some(c) => c.clone_ref(py),
            None => pyo3::intern!(py, "").clone().unbind(),
        }
    }

    #[getter]
    fn name(&self, py: Python<'_>) -> Py<PyString> {
        match &self.name {
            Some(n) => n.clone_ref(py),
            None => pyo3::intern!(py, "").clone().unbind(),
        }
    }

    #[setter]
    fn set_name(&mut self, name: Bound<'_, PyString>) {
        self.name = Some(name.unbind());
    }

    /// Starts the region now.
    fn reset(mut slf: PyRefMut<'_, Self>) -> PyRefMut<'_, Self> {
        slf.start();
        slf
    }

    /// Records the region from its start until now.
    fn flush(mut slf: PyRefMut<'_, Self>) -> PyRefMut<'_, Self> {
        let py = slf.py();
        slf.record_now(py);
        slf
    }

    // __enter__ and __exit__: see `dft_fn_enter`, `dft_fn_exit`.

    /// Sets args recorded by the next `flush()` (and `__exit__`), and by the decorated calls
    /// of this dft_fn in progress on this thread (see [`Updates`]); `args` may hold any
    /// values. `image_size` is recorded as a float (`float(value)`), as pydftracer 2.0.6 does.
    #[pyo3(signature = (epoch=None, step=None, image_idx=None, image_size=None, args=None))]
    fn update<'py>(
        mut slf: PyRefMut<'py, Self>,
        epoch: Option<Bound<'py, PyAny>>,
        step: Option<Bound<'py, PyAny>>,
        image_idx: Option<Bound<'py, PyAny>>,
        image_size: Option<Bound<'py, PyAny>>,
        args: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<PyRefMut<'py, Self>> {
        let py = slf.py();
        // image_size as pydftracer 2.0.6 sets it: float(value) (a value float() refuses is
        // kept as it is: tracing never raises for it).
        let image_size = image_size.filter(|v| !v.is_none()).map(|v| {
            match v.downcast_exact::<pyo3::types::PyFloat>() {
                Ok(_) => v,
                Err(_) => py
                    .get_type::<pyo3::types::PyFloat>()
                    .call1((&v,))
                    .unwrap_or(v),
            }
        });
        // What this update set, for the decorated calls in progress (when the dft_fn
        // decorates: see `Updates`).
        let watched = slf.updates.is_some();
        let mut set: Vec<(Bound<'py, PyString>, Bound<'py, PyAny>)> = Vec::new();
        for (i, v) in [epoch, step, image_idx, image_size].into_iter().enumerate() {
            if let Some(v) = v.filter(|v| !v.is_none()) {
                if watched {
                    set.push((captured_key(py, i).clone(), v.clone()));
                }
                slf.captured[i] = Some(v.unbind());
                slf.updated |= 1 << i;
            }
        }
        if let Some(a) = args {
            for (k, v) in a.iter() {
                let key = match k.downcast_into::<PyString>() {
                    Ok(s) => s,
                    Err(e) => e.into_inner().str()?,
                };
                let v = tag_value_inner(v)?;
                if watched && !v.is_none() {
                    set.push((key.clone(), v.clone()));
                }
                slf.set_arg(&key, v);
            }
        }
        if let Some(u) = slf.updates.clone() {
            // The log's lock is not held while Python code runs; `slf` stays borrowed (an
            // update() from a `__del__` raises, as one during this update() always has).
            u.note(py, set);
        }
        Ok(slf)
    }

    /// The update generation now (for the layer's generator and coroutine wrappers: see
    /// [`Updates`]); makes the dft_fn log its updates from now on.
    fn _update_mark(&mut self) -> u64 {
        self.updates().mark()
    }

    /// {key: value} of what `update()` set on this thread after generation `mark`; None when
    /// nothing was.
    fn _updates_since<'py>(
        &self,
        py: Python<'py>,
        mark: u64,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(u) = &self.updates else {
            return Ok(None);
        };
        if u.mark() == mark {
            return Ok(None);
        }
        let d = PyDict::new(py);
        for (k, v) in u.since(py, mark) {
            d.set_item(k, v)?;
        }
        Ok((!d.is_empty()).then_some(d))
    }

    /// The args `update()` and the constructor set, as a dict.
    #[getter]
    fn _args(&self, py: Python<'_>) -> PyResult<PyObject> {
        let d = PyDict::new(py);
        for (i, v) in self.captured.iter().enumerate() {
            if let Some(v) = v {
                d.set_item(captured_key(py, i), v)?;
            }
        }
        for (k, v) in &self.extra {
            d.set_item(k, v)?;
        }
        Ok(d.into_any().unbind())
    }

    /// The constructor's epoch/step/image_idx/image_size that no `update()` replaced, as a
    /// dict: what a function this dft_fn decorates records when the call does not pass them
    /// (what `update()` sets reaches only the calls in progress, see [`Updates`]).
    #[getter]
    fn _base_args(&self, py: Python<'_>) -> PyResult<PyObject> {
        let d = PyDict::new(py);
        for (i, v) in self.captured.iter().enumerate() {
            if let Some(v) = v.as_ref().filter(|_| self.updated & (1 << i) == 0) {
                d.set_item(captured_key(py, i), v)?;
            }
        }
        Ok(d.into_any().unbind())
    }

    #[getter]
    fn _enabled(&self) -> bool {
        self.enable
    }

    /// Writes a `CM` record `{name: key, value: str(value)}`.
    fn log_metadata(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        if !self.enable {
            return Ok(());
        }
        log_metadata_event(key, value)
    }

    /// Decorator: one event per call, named `name` or the function's `__qualname__`,
    /// recording the epoch/step/image_idx/image_size arguments actually passed and what
    /// `update()` set during the call. Also `log_init` and `log_static` (set in the module's
    /// init).
    #[pyo3(signature = (func=None, name=None))]
    fn log<'py>(
        slf: &Bound<'py, Self>,
        func: Option<Bound<'py, PyAny>>,
        name: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        DftFn::python_half(slf.py(), "_dft_fn_log")?.call1((slf, func, name))
    }

    /// Yields the items of `iterable`, recording `<name>.iter` (waiting for each item) and
    /// `<name>.yield` (the loop body), with `<iter_name>` = 1, 2, ...
    #[pyo3(signature = (func, name="loop", iter_name="step"))]
    fn iter<'py>(
        slf: &Bound<'py, Self>,
        func: Bound<'py, PyAny>,
        name: &str,
        iter_name: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        DftFn::python_half(slf.py(), "_dft_fn_iter")?.call1((slf, func, name, iter_name))
    }

    // Entity API of newer pydftracer releases: accepted, not recorded (as with tracing off).
    #[pyo3(signature = (*_args, **_kwargs))]
    fn relate<'py>(
        slf: Bound<'py, Self>,
        _args: &Bound<'py, PyTuple>,
        _kwargs: Option<&Bound<'py, PyDict>>,
    ) -> Bound<'py, Self> {
        slf
    }

    #[pyo3(signature = (*_args, **_kwargs))]
    fn relate_entity(
        &self,
        _args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, PyDict>>,
    ) -> u64 {
        0
    }

    #[pyo3(signature = (*_args, **_kwargs))]
    fn uses(&self, _args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> u64 {
        0
    }

    #[pyo3(signature = (*_args, **_kwargs))]
    fn generates(&self, _args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> u64 {
        0
    }
}

// ------------------------------------------------------------------ dftracer (the class)

/// Base of `dftracer.python.dftracer`: its `log_event` method is native (added by
/// `add_log_event`), so an event logged through the instance runs no Python frame.
#[pyclass(subclass, frozen, module = "dftracer.dftracer", name = "_Tracer")]
struct Tracer;

#[pymethods]
impl Tracer {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        Tracer
    }
}

// gil_used = true (pyo3's default, said here): the module is not claimed safe without the
// GIL (its fast paths read dicts, strings and reference counts under the GIL's guarantees),
// so a free-threaded CPython (3.13t) re-enables the GIL when it imports the module, and says
// so with a RuntimeWarning.
#[pymodule(gil_used = true)]
fn dftracer(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // This module exports the settings to children itself, through os.environ.
    native::export_env_at_init(false);
    m.add_function(wrap_pyfunction!(initialize, m)?)?;
    m.add_function(wrap_pyfunction!(get_time, m)?)?;
    m.add_function(wrap_pyfunction!(_name_thread, m)?)?;
    m.add_function(wrap_pyfunction!(get_config, m)?)?;
    m.add_function(wrap_pyfunction!(enter_event, m)?)?;
    m.add_function(wrap_pyfunction!(exit_event, m)?)?;
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
    m.add_class::<DftFn>()?;
    enable_dft_fn_fast_new(m.py());
    add_dft_fn_protocol(m.py())?;
    // pydftracer's log_init and log_static decorate as log does.
    let dft_fn = DftFn::type_object(m.py());
    for alias in ["log_init", "log_static"] {
        dft_fn.setattr(alias, dft_fn.getattr("log")?)?;
    }
    m.add_class::<Tracer>()?;
    add_log_event(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    if config().enable {
        install_exit_hook(m)?;
        // Python thread names in the trace (dftracer/_threads.py); a missing or broken file
        // costs the names, never the import.
        let names = m
            .py()
            .import("dftracer._threads")
            .and_then(|t| t.call_method1("install", (m.getattr("_name_thread")?,)));
        if let Err(e) = names {
            dftracer_core::eprint_line(&format!(
                "[DFTRACER WARN] Python thread names are not traced: {e}"
            ));
        }
    }
    Ok(())
}
