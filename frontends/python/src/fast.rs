//! The common calls on borrowed pointers only: no pyo3 trampoline, no reference counting, no
//! allocation, one pass from the caller's objects straight into the core's [`Arg`]s.
//!
//! Each fast path accepts exactly the common shapes (exact `str`, `int`, `float`, `dict`,
//! `tuple` objects) and says `None` for anything else, having recorded nothing and left no
//! exception set: the caller then runs the general path, which validates again from the start
//! and raises its clear errors. Nothing here runs Python code (no `__eq__`, `__index__`,
//! `__hash__`), so the caller's objects cannot change while their bytes are borrowed.
#![allow(unsafe_code)] // CPython's C API on borrowed pointers (SAFETY notes)

use dftracer_core::{Arg, Value};
use pyo3::ffi;

use crate::{internals, MAX_PY_ARGS};

/// The UTF-8 of a str, borrowed from the object (it lives as long as the object): a compact
/// ASCII str is read in place, another through CPython's cached UTF-8 copy. `None` when the
/// str holds lone surrogates (no UTF-8 form; the general path replaces them).
///
/// # Safety
/// `s` is a live str object, the GIL is held, and no exception is set.
#[inline]
pub unsafe fn utf8<'a>(s: *mut ffi::PyObject) -> Option<&'a [u8]> {
    // SAFETY: per this function's contract.
    unsafe {
        if let Some(ascii) = internals::ascii_bytes(s) {
            return Some(ascii);
        }
        let mut len: ffi::Py_ssize_t = 0;
        let p = ffi::PyUnicode_AsUTF8AndSize(s, &mut len);
        if p.is_null() {
            ffi::PyErr_Clear(); // the UnicodeEncodeError we caused
            return None;
        }
        Some(std::slice::from_raw_parts(p as *const u8, len as usize))
    }
}

/// An exact `int` that fits in an i64.
///
/// # Safety
/// `v` is a live object and the GIL is held.
#[inline]
unsafe fn exact_i64(v: *mut ffi::PyObject) -> Option<i64> {
    // SAFETY: per this function's contract; an exact int never calls back into Python.
    unsafe {
        if ffi::PyLong_CheckExact(v) == 0 {
            return None;
        }
        let mut overflow = 0;
        let i = ffi::PyLong_AsLongAndOverflow(v, &mut overflow);
        (overflow == 0).then_some(i as i64)
    }
}

/// Which of `int_args`, `string_args`, `float_args` a dict is.
#[derive(Clone, Copy)]
enum Of {
    Int,
    Str,
    Float,
}

/// Adds the items of one exact dict to `out`; `false` for anything the general path must see.
///
/// # Safety
/// `map` is NULL or a live object, the GIL is held, no exception is set.
#[inline(always)]
unsafe fn add_dict<'a>(
    out: &mut heapless::Vec<Arg<'a>, MAX_PY_ARGS>,
    objs: &mut heapless::Vec<*mut ffi::PyObject, MAX_PY_ARGS>,
    map: *mut ffi::PyObject,
    of: Of,
) -> bool {
    // SAFETY: per this function's contract; PyDict_Next hands out borrowed references that
    // stay valid while the dict is unchanged, and nothing below runs Python code.
    unsafe {
        if map.is_null() || map == ffi::Py_None() {
            return true;
        }
        if ffi::PyDict_CheckExact(map) == 0 {
            return false;
        }
        // Keys of the earlier dicts: the same key in two of them is renamed by the general path.
        let earlier = out.len();
        let mut pos: ffi::Py_ssize_t = 0;
        let mut k: *mut ffi::PyObject = std::ptr::null_mut();
        let mut v: *mut ffi::PyObject = std::ptr::null_mut();
        // As many items as the dict holds (not a last PyDict_Next call that finds none).
        let len = internals::dict_len(map);
        for _ in 0..len {
            if ffi::PyDict_Next(map, &mut pos, &mut k, &mut v) == 0 {
                return false; // cannot happen: nothing changes the dict meanwhile
            }
            if ffi::PyUnicode_CheckExact(k) == 0 {
                return false;
            }
            let Some(key) = utf8(k) else { return false };
            if ffi::PyTuple_CheckExact(v) != 0 {
                if ffi::PyTuple_GET_SIZE(v) != 2 {
                    return false;
                }
                v = ffi::PyTuple_GET_ITEM(v, 1);
            }
            let value = match of {
                Of::Int => match exact_i64(v) {
                    Some(i) => Value::Int(i),
                    None if ffi::Py_TYPE(v) == std::ptr::addr_of_mut!(ffi::PyBool_Type) => {
                        Value::Bool(v == ffi::Py_True())
                    }
                    None => return false,
                },
                Of::Str => {
                    if ffi::PyUnicode_CheckExact(v) == 0 {
                        return false;
                    }
                    match utf8(v) {
                        Some(s) => Value::Str(s),
                        None => return false,
                    }
                }
                Of::Float => {
                    if ffi::PyFloat_CheckExact(v) == 0 {
                        return false;
                    }
                    Value::Float(ffi::PyFloat_AS_DOUBLE(v))
                }
            };
            if out[..earlier].iter().any(|a| a.key == key)
                || out.push(Arg { key, value }).is_err()
                || objs.push(k).is_err()
            {
                return false;
            }
        }
        true
    }
}

/// One `log_event` call, sorted into `[name, cat, start_time, duration]` and `[int_args,
/// string_args, float_args]` (NULL: not given).
pub struct Event {
    pub required: [*mut ffi::PyObject; 4],
    pub maps: [*mut ffi::PyObject; 3],
}

/// The str objects of a `log_event` call: its name, category and one key per arg (borrowed
/// from the call, live while `record` runs).
pub struct Objs<'a> {
    pub name: *mut ffi::PyObject,
    pub cat: *mut ffi::PyObject,
    pub keys: &'a [*mut ffi::PyObject],
}

/// Validates and converts a common `log_event` call and hands it to `record`; `None`: the
/// general path must handle it (nothing was recorded).
///
/// # Safety
/// The pointers of `e` are NULL or live objects, the GIL is held, no exception is set.
#[inline]
pub unsafe fn log_event(
    e: &Event,
    record: impl FnOnce(Objs, &[u8], &[u8], u64, u64, &[Arg]),
) -> Option<()> {
    let [name, cat, ts, dur] = e.required;
    if name.is_null() || cat.is_null() || ts.is_null() || dur.is_null() {
        return None;
    }
    // SAFETY: per this function's contract.
    unsafe {
        if ffi::PyUnicode_CheckExact(name) == 0 || ffi::PyUnicode_CheckExact(cat) == 0 {
            return None;
        }
        let (name_obj, cat_obj) = (name, cat);
        let name = utf8(name)?;
        let cat = utf8(cat)?;
        let ts = u64::try_from(exact_i64(ts)?).ok()?;
        let dur = u64::try_from(exact_i64(dur)?).ok()?;
        let mut args: heapless::Vec<Arg, MAX_PY_ARGS> = heapless::Vec::new();
        let mut keys: heapless::Vec<*mut ffi::PyObject, MAX_PY_ARGS> = heapless::Vec::new();
        let [ints, strs, floats] = e.maps;
        if !(add_dict(&mut args, &mut keys, ints, Of::Int)
            && add_dict(&mut args, &mut keys, strs, Of::Str)
            && add_dict(&mut args, &mut keys, floats, Of::Float))
        {
            return None;
        }
        let objs = Objs {
            name: name_obj,
            cat: cat_obj,
            keys: &keys,
        };
        record(objs, name, cat, ts, dur, &args);
    }
    Some(())
}

/// A value recorded as is (`dft_fn`'s epoch, step, ... and `update(args=...)`): an exact int
/// that fits in an i64, a bool, an exact float or an exact str; `None` for anything else
/// (the general path converts it).
///
/// # Safety
/// `v` is a live object, the GIL is held, no exception is set.
#[inline]
pub unsafe fn plain_value<'a>(v: *mut ffi::PyObject) -> Option<Value<'a>> {
    // SAFETY: per this function's contract.
    unsafe {
        if let Some(i) = exact_i64(v) {
            return Some(Value::Int(i));
        }
        if ffi::PyUnicode_CheckExact(v) != 0 {
            return utf8(v).map(Value::Str);
        }
        if ffi::PyFloat_CheckExact(v) != 0 {
            return Some(Value::Float(ffi::PyFloat_AS_DOUBLE(v)));
        }
        if ffi::Py_TYPE(v) == std::ptr::addr_of_mut!(ffi::PyBool_Type) {
            return Some(Value::Bool(v == ffi::Py_True()));
        }
        None
    }
}
