//! The common calls on borrowed pointers only: no pyo3 trampoline, no reference counting, no
//! allocation, one pass from the caller's objects straight into the core's [`Arg`]s.
//!
//! Each fast path accepts exactly the common shapes (exact `str`, `int`, `float`, `dict`,
//! `tuple` objects) and says `None` for anything else, having recorded nothing and left no
//! exception set: the caller then runs the general path, which validates again from the start
//! and raises its clear errors. Nothing here runs Python code (no `__eq__`, `__index__`,
//! `__hash__`), so the caller's objects cannot change while their bytes are borrowed.
#![allow(unsafe_code)] // CPython's C API on borrowed pointers (SAFETY notes)

use dftracer_core::{Arg, Slot, Value};
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

/// An exact `int` that fits in an i64: one of at most two digits read in place
/// ([`internals::small_int`]), another through `PyLong_AsLongAndOverflow`.
///
/// # Safety
/// `v` is a live object and the GIL is held.
#[inline(always)]
unsafe fn exact_i64(v: *mut ffi::PyObject) -> Option<i64> {
    // SAFETY: per this function's contract; an exact int never calls back into Python.
    unsafe {
        if ffi::PyLong_CheckExact(v) == 0 {
            return None;
        }
        if let Some(i) = internals::small_int(v) {
            return Some(i);
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

/// One `log_event` call, sorted into `[name, cat, start_time, duration]` and `[int_args,
/// string_args, float_args]` (NULL: not given).
pub struct Event {
    pub required: [*mut ffi::PyObject; 4],
    pub maps: [*mut ffi::PyObject; 3],
}

/// A common `log_event` call read in one pass, in the forms its record takes: the name and
/// category objects, the times, and per arg (int_args', then string_args', then
/// float_args' items) its key object, the slot its value takes in a schema and its slot
/// value, the string values' bytes in order. All borrowed from the call's objects (live
/// while the call runs). The UTF-8 of the name, category and keys is read only when
/// needed ([`Call::text`]): a schema found by the objects' identity needs none of it.
pub struct Call<'a, 'b> {
    pub name: *mut ffi::PyObject,
    pub cat: *mut ffi::PyObject,
    pub ts: u64,
    pub dur: u64,
    /// Per arg: its key's exact str object and its value's slot ([`Slot::Str`] also for a
    /// string too long for one: see `fits`).
    pub shape: &'b [(*mut ffi::PyObject, Slot)],
    /// Per arg: its slot value (a string's is its length).
    pub vals: &'b [u64],
    /// The string values, in order.
    pub strs: &'b [&'a [u8]],
    /// Every string fits a slot (at most `MAX_STR` bytes; a longer one is clipped and
    /// marked, which only the generic record does).
    pub fits: bool,
    /// Where string_args' and float_args' items begin in `shape`.
    starts: [usize; 2],
}

/// Where [`add_dict`] collects a [`Call`]'s args: each vector its own local of the caller
/// (built as one aggregate, the compiler zeroed all 1.6 KB of them at every call).
struct Collect<'a, 'b> {
    shape: &'b mut heapless::Vec<(*mut ffi::PyObject, Slot), MAX_PY_ARGS>,
    vals: &'b mut heapless::Vec<u64, MAX_PY_ARGS>,
    strs: &'b mut heapless::Vec<&'a [u8], MAX_PY_ARGS>,
    fits: bool,
}

/// The UTF-8 of a [`Call`]'s name, category and keys (one per arg).
pub struct Text<'a> {
    pub name: &'a [u8],
    pub cat: &'a [u8],
    pub keys: heapless::Vec<&'a [u8], MAX_PY_ARGS>,
}

impl<'a> Call<'a, '_> {
    /// The UTF-8 of the name, category and keys; `None` when the general path must record
    /// the call (nothing was recorded, no exception is set): a str with lone surrogates (it
    /// replaces them), or a key in two of the dicts (it renames one).
    ///
    /// # Safety
    /// The call's objects are live, the GIL is held, no exception is set.
    pub unsafe fn text(&self) -> Option<Text<'a>> {
        // SAFETY: per this function's contract.
        unsafe {
            let name = utf8(self.name)?;
            let cat = utf8(self.cat)?;
            let mut keys: heapless::Vec<&[u8], MAX_PY_ARGS> = heapless::Vec::new();
            for &(k, _) in self.shape {
                // As many keys as args: no push fails.
                let _ = keys.push(utf8(k)?);
            }
            // A dict's keys differ among themselves; a key must not be in an earlier dict.
            let [strs, floats] = self.starts;
            for (j, key) in keys.iter().enumerate().skip(strs) {
                let earlier = if j < floats { strs } else { floats };
                if keys[..earlier].contains(key) {
                    return None;
                }
            }
            Some(Text { name, cat, keys })
        }
    }

    /// The args as core [`Arg`]s, under `keys` (this call's, from [`Call::text`]).
    pub fn args(&self, keys: &[&'a [u8]]) -> heapless::Vec<Arg<'a>, MAX_PY_ARGS> {
        let mut strs = self.strs.iter();
        let mut out = heapless::Vec::new();
        for ((&(_, slot), &v), &key) in self.shape.iter().zip(self.vals).zip(keys) {
            let value = match slot {
                Slot::Int => Value::Int(v as i64),
                Slot::UInt => Value::UInt(v),
                Slot::Float => Value::Float(f64::from_bits(v)),
                Slot::Bool => Value::Bool(v != 0),
                Slot::Str => Value::Str(strs.next().copied().unwrap_or_default()),
            };
            // As many args as the call has: no push fails.
            let _ = out.push(Arg { key, value });
        }
        out
    }
}

/// Adds the items of one exact dict to `c`; `false` for anything the general path must see.
///
/// # Safety
/// `map` is NULL or a live object, the GIL is held, no exception is set.
#[inline(always)]
unsafe fn add_dict(c: &mut Collect, map: *mut ffi::PyObject, of: Of) -> bool {
    // SAFETY: per this function's contract; PyDict_Next hands out borrowed references that
    // stay valid while the dict is unchanged, and nothing below runs Python code.
    unsafe {
        if map.is_null() || map == ffi::Py_None() {
            return true;
        }
        if ffi::PyDict_CheckExact(map) == 0 {
            return false;
        }
        let mut pos: ffi::Py_ssize_t = 0;
        let mut k: *mut ffi::PyObject = std::ptr::null_mut();
        let mut v: *mut ffi::PyObject = std::ptr::null_mut();
        // As many items as the dict holds (not a last PyDict_Next call that finds none).
        let len = internals::dict_len(map);
        for _ in 0..len {
            if ffi::PyDict_Next(map, &mut pos, &mut k, &mut v) == 0 {
                return false; // cannot happen: nothing changes the dict meanwhile
            }
            if ffi::PyUnicode_CheckExact(k) == 0 || c.shape.is_full() {
                return false;
            }
            if ffi::PyTuple_CheckExact(v) != 0 {
                if ffi::PyTuple_GET_SIZE(v) != 2 {
                    return false;
                }
                v = ffi::PyTuple_GET_ITEM(v, 1);
            }
            let (slot, val) = match of {
                Of::Int => match exact_i64(v) {
                    Some(i) => (Slot::Int, i as u64),
                    None if ffi::Py_TYPE(v) == std::ptr::addr_of_mut!(ffi::PyBool_Type) => {
                        (Slot::Bool, (v == ffi::Py_True()) as u64)
                    }
                    None => return false,
                },
                Of::Str => {
                    if ffi::PyUnicode_CheckExact(v) == 0 {
                        return false;
                    }
                    let Some(s) = utf8(v) else { return false };
                    c.fits &= s.len() <= dftracer_core::frontend::MAX_STR;
                    // Fewer strings than args, and `shape` is not full: room.
                    c.strs.push_unchecked(s);
                    (Slot::Str, s.len() as u64)
                }
                Of::Float => {
                    if ffi::PyFloat_CheckExact(v) == 0 {
                        return false;
                    }
                    (Slot::Float, ffi::PyFloat_AS_DOUBLE(v).to_bits())
                }
            };
            // `shape` is not full (checked above), and `vals` is as long.
            c.shape.push_unchecked((k, slot));
            c.vals.push_unchecked(val);
        }
        true
    }
}

/// Validates and reads a common `log_event` call and hands it to `record`, whose `None`
/// says that the general path must record it; `None`: the general path must handle it
/// (nothing was recorded).
///
/// # Safety
/// The pointers of `e` are NULL or live objects, the GIL is held, no exception is set.
#[inline]
pub unsafe fn log_event(e: &Event, record: impl FnOnce(&Call) -> Option<()>) -> Option<()> {
    let [name, cat, ts, dur] = e.required;
    if name.is_null() || cat.is_null() || ts.is_null() || dur.is_null() {
        return None;
    }
    // SAFETY: per this function's contract.
    unsafe {
        if ffi::PyUnicode_CheckExact(name) == 0 || ffi::PyUnicode_CheckExact(cat) == 0 {
            return None;
        }
        let ts = u64::try_from(exact_i64(ts)?).ok()?;
        let dur = u64::try_from(exact_i64(dur)?).ok()?;
        let mut shape = heapless::Vec::new();
        let mut vals = heapless::Vec::new();
        let mut strs = heapless::Vec::new();
        let mut c = Collect {
            shape: &mut shape,
            vals: &mut vals,
            strs: &mut strs,
            fits: true,
        };
        let [ints, strings, floats] = e.maps;
        if !add_dict(&mut c, ints, Of::Int) {
            return None;
        }
        let strings_at = c.shape.len();
        if !add_dict(&mut c, strings, Of::Str) {
            return None;
        }
        let floats_at = c.shape.len();
        if !add_dict(&mut c, floats, Of::Float) {
            return None;
        }
        let fits = c.fits;
        record(&Call {
            name,
            cat,
            ts,
            dur,
            shape: &shape,
            vals: &vals,
            strs: &strs,
            fits,
            starts: [strings_at, floats_at],
        })
    }
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
