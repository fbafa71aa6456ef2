//! Python values to the core's [`Arg`]s and [`Value`]s, through pyo3 (the general path:
//! every shape `log_event` and the decorators accept, with their errors; the common shapes
//! on borrowed pointers are [`crate::fast`]'s), and [`record`], which hands them to the core.
#![allow(unsafe_code)] // CPython's type checks and str lengths on live objects (SAFETY notes)

use dftracer_core::{Arg, Layer, Value};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use std::borrow::Cow;

use crate::{native, MAX_PY_ARGS};

/// A Python value converted for the core, borrowing Python strings where possible.
pub(crate) enum PyVal<'py> {
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
    pub(crate) fn value(&self) -> Option<Value<'_>> {
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
pub(crate) fn utf8_of<'a>(s: &'a Bound<'_, PyString>) -> Cow<'a, str> {
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

pub(crate) fn text<'py>(s: &Bound<'py, PyAny>) -> Cow<'static, str> {
    match s.str() {
        Ok(v) => Cow::Owned(utf8_of(&v).into_owned()),
        Err(_) => Cow::Borrowed("<unprintable>"),
    }
}

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Kind {
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

    pub(crate) fn what(self) -> &'static str {
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
pub(crate) fn convert<'py>(
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

pub(crate) type Collected<'py> = heapless::Vec<(Bound<'py, PyString>, PyVal<'py>), MAX_PY_ARGS>;

pub(crate) fn collect<'py>(
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

pub(crate) fn same_key(a: &Bound<'_, PyString>, b: &Bound<'_, PyString>) -> bool {
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

pub(crate) fn record(name: &[u8], cat: &[u8], ts: u64, dur: u64, vals: &Collected) {
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
    native::complete_args(Layer::Python, name, cat, ts, dur, &args);
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

pub(crate) fn time_arg(v: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
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

pub(crate) fn name_arg<'a>(
    v: &'a Bound<'_, PyAny>,
    what: &str,
) -> PyResult<&'a Bound<'a, PyString>> {
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

pub(crate) fn py_val<'py>(v: &Bound<'py, PyAny>) -> PyVal<'py> {
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
