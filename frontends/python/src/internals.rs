//! The one place that relies on details outside pyo3's and CPython's stable surfaces.
//!
//! Pinned: **pyo3 0.23** (`frontends/python/Cargo.toml`). The hot entries (`log_event`,
//! `_Wrapped`'s call, `dft_fn(...)`, `__enter__`, `__exit__`) skip pyo3's argument extraction
//! and go through these instead; a pyo3 upgrade must re-check every item here:
//! - [`fastcall`] and [`noargs`]: pyo3's `impl_::trampoline` (semver-exempt, what its own
//!   generated methods call: counts the GIL for pyo3, turns errors and panics into
//!   exceptions), for entries whose common case returns before it;
//! - [`contents`]: a `#[pyclass]` object's Rust value at a fixed offset from the object
//!   (pyo3 0.23's `PyClassObject` layout; the offset is measured once on a probe object);
//! - [`set_instance_vectorcall`], [`set_type_call`]: writes to slots of pyo3's heap types
//!   (`tp_vectorcall_offset`, flags, `tp_vectorcall`, `tp_init`) after pyo3 built them;
//! - [`forward`]: another object's vectorcall slot read through its type's
//!   `tp_vectorcall_offset` (CPython's `PyTypeObject` layout);
//! - [`ascii_bytes`], [`dict_len`]: a compact ASCII str's characters and a dict's item count
//!   read from CPython's object layouts (`PyASCIIObject`, `PyDictObject`);
//! - [`small_int`]: an int of at most two digits read from `PyLongObject` (3.9 to 3.11's
//!   `ob_size`, 3.12 and 3.13's `lv_tag`), only where [`probe_ints`] found the layout it
//!   expects (a new CPython version must be added there, after checking its layout);
//! - [`fastcall_def`], [`noargs_def`], [`add_method`]: raw `PyMethodDef`s and method
//!   descriptors made outside pyo3's `#[pymethods]`.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU8, Ordering};

use pyo3::prelude::*;
use pyo3::{ffi, PyTypeInfo};

/// The body of a METH_FASTCALL | METH_KEYWORDS entry, as pyo3's trampoline runs it.
type FastcallBody = for<'py> unsafe fn(
    Python<'py>,
    *mut ffi::PyObject,
    *const *mut ffi::PyObject,
    ffi::Py_ssize_t,
    *mut ffi::PyObject,
) -> PyResult<*mut ffi::PyObject>;

/// Runs `f` through pyo3's fastcall trampoline (GIL count, errors and panics to exceptions).
///
/// # Safety
/// Called by the interpreter with the GIL held; the arguments are its vectorcall arguments.
#[inline(always)]
pub(crate) unsafe fn fastcall(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
    f: FastcallBody,
) -> *mut ffi::PyObject {
    // SAFETY: the caller's.
    unsafe { pyo3::impl_::trampoline::fastcall_with_keywords(slf, args, nargs, kwnames, f) }
}

/// Runs `f` through pyo3's METH_NOARGS trampoline.
///
/// # Safety
/// As [`fastcall`], for a METH_NOARGS entry.
#[inline(always)]
pub(crate) unsafe fn noargs(
    slf: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
    f: for<'py> unsafe fn(Python<'py>, *mut ffi::PyObject) -> PyResult<*mut ffi::PyObject>,
) -> *mut ffi::PyObject {
    // SAFETY: the caller's.
    unsafe { pyo3::impl_::trampoline::noargs(slf, args, f) }
}

/// The Rust value of a `#[pyclass]` object, `offset` bytes into it (measured on a probe).
///
/// # Safety
/// `obj` is a live instance of the class whose value sits at `offset`, the GIL is held, and
/// the value is not mutated while the reference lives.
#[inline(always)]
pub(crate) unsafe fn contents<'a, T>(obj: *mut ffi::PyObject, offset: usize) -> &'a T {
    // SAFETY: the caller's.
    unsafe { &*((obj as *const u8).add(offset) as *const T) }
}

/// Makes instances of `tp` vectorcall-able through the function pointer `offset` bytes into
/// each, and bind like functions (`Py_TPFLAGS_METHOD_DESCRIPTOR`).
///
/// # Safety
/// `tp` is our own heap type, no instance of it has reached Python code yet, every instance
/// holds a vectorcallfunc at `offset`, and its `tp_call` / `__get__` behave as these do.
pub(crate) unsafe fn set_instance_vectorcall(tp: *mut ffi::PyTypeObject, offset: usize) {
    // SAFETY: the caller's.
    unsafe {
        (*tp).tp_vectorcall_offset = offset as ffi::Py_ssize_t;
        (*tp).tp_flags |= ffi::Py_TPFLAGS_HAVE_VECTORCALL | ffi::Py_TPFLAGS_METHOD_DESCRIPTOR;
    }
}

/// Sets the type's own call entry (`tp_vectorcall`: "call this type", never inherited) and
/// its `tp_init`.
///
/// # Safety
/// `tp` is our own heap type, before any instance exists; both behave as `type.__call__`
/// and `__init__` would.
pub(crate) unsafe fn set_type_call(
    tp: *mut ffi::PyTypeObject,
    vectorcall: ffi::vectorcallfunc,
    init: ffi::initproc,
) {
    // SAFETY: the caller's.
    unsafe {
        (*tp).tp_vectorcall = Some(vectorcall);
        (*tp).tp_init = Some(init);
    }
}

/// A METH_NOARGS definition, for the life of the process.
pub(crate) fn noargs_def(
    name: &'static std::ffi::CStr,
    doc: &'static std::ffi::CStr,
    f: ffi::PyCFunction,
) -> *mut ffi::PyMethodDef {
    Box::into_raw(Box::new(ffi::PyMethodDef {
        ml_name: name.as_ptr(),
        ml_meth: ffi::PyMethodDefPointer { PyCFunction: f },
        ml_flags: ffi::METH_NOARGS,
        ml_doc: doc.as_ptr(),
    }))
}

/// Sets `T.<name>` to a method descriptor of `def` (a definition for the life of the process).
pub(crate) fn add_method<T: PyTypeInfo>(
    py: Python<'_>,
    name: &str,
    def: *mut ffi::PyMethodDef,
) -> PyResult<()> {
    let tp = T::type_object(py);
    // SAFETY: a definition that lives as long as the process, for our own type.
    let descr =
        unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyDescr_NewMethod(tp.as_type_ptr(), def)) }?;
    tp.setattr(name, descr)
}

/// A compact ASCII str's characters, read in place (one byte each, after the header).
///
/// # Safety
/// `s` is a live str object and the GIL is held.
#[inline(always)]
pub(crate) unsafe fn ascii_bytes<'a>(s: *mut ffi::PyObject) -> Option<&'a [u8]> {
    // SAFETY: the caller's; a compact ASCII str's `length` characters follow its header.
    unsafe {
        if ffi::PyUnicode_IS_COMPACT_ASCII(s) == 0 {
            return None;
        }
        let len = ffi::PyUnicode_GET_LENGTH(s) as usize;
        let data = (s as *const ffi::PyASCIIObject).add(1) as *const u8;
        Some(std::slice::from_raw_parts(data, len))
    }
}

/// How this CPython lays out an int's value, for [`small_int`]: [`INT_SIZED`], [`INT_TAGGED`]
/// or 0 (not known: every int is read through `PyLong_AsLongAndOverflow`). Set once by
/// [`probe_ints`].
static INT_LAYOUT: AtomicU8 = AtomicU8::new(0);
/// CPython 3.9 to 3.11: the word after the object header is `ob_size`, the digit count
/// with the value's sign.
const INT_SIZED: u8 = 1;
/// CPython 3.12 and 3.13: it is `lv_tag`, the digit count shifted left by 3 over the sign
/// in its low two bits (0 positive, 1 zero, 2 negative).
const INT_TAGGED: u8 = 2;

/// An exact int's value, read in place when it has at most two digits (below 2^60 in
/// magnitude: every such value fits in an i64); `None` otherwise, or when the layout is not
/// known (then `PyLong_AsLongAndOverflow` reads it, about 35 instructions where this takes
/// a few). Both layouts keep the digits, 30 bits each in a `u32`, after that word.
///
/// # Safety
/// `v` is a live exact int (`PyLong_CheckExact`) and the GIL is held.
#[inline(always)]
pub(crate) unsafe fn small_int(v: *mut ffi::PyObject) -> Option<i64> {
    let layout = INT_LAYOUT.load(Ordering::Relaxed);
    // SAFETY: the caller's; with a layout set (checked by `probe_ints`), the word after
    // the header and as many digits as it counts are the object's own.
    unsafe {
        let word = *(v as *const isize).add(2);
        // The digit count, negative for a negative value (what `ob_size` is).
        let size = match layout {
            INT_SIZED => word,
            INT_TAGGED if word & 2 != 0 => -(word >> 3),
            INT_TAGGED => word >> 3,
            _ => return None,
        };
        let digit = |i: usize| *(v as *const u32).add(6 + i) as i64;
        Some(match size {
            0 => 0,
            1 => digit(0),
            -1 => -digit(0),
            2 => digit(0) | digit(1) << 30,
            -2 => -(digit(0) | digit(1) << 30),
            _ => return None,
        })
    }
}

/// Decides [`small_int`]'s layout from the interpreter's version and `sys.int_info` (30-bit
/// digits in 4 bytes, the default wherever a 64-bit type exists), then checks it on ints
/// made here: any value read otherwise than `PyLong_AsLongAndOverflow` reads it leaves the
/// layout unknown. Called once, at the module's import.
pub(crate) fn probe_ints(py: Python<'_>) -> PyResult<()> {
    let v = py.version_info();
    let layout = match (v.major, v.minor) {
        (3, 9..=11) => INT_SIZED,
        (3, 12..=13) => INT_TAGGED,
        _ => return Ok(()),
    };
    let info = py.import("sys")?.getattr("int_info")?;
    let bits: u32 = info.getattr("bits_per_digit")?.extract()?;
    let size: u32 = info.getattr("sizeof_digit")?.extract()?;
    if (bits, size) != (30, 4) {
        return Ok(());
    }
    INT_LAYOUT.store(layout, Ordering::Relaxed);
    let probes = [
        0,
        1,
        -1,
        5,
        -6,
        256,
        (1 << 30) - 1,
        1 << 30,
        -(1 << 30),
        (1 << 30) + 12_345,
        -(1 << 31) - 7,
        1_700_000_000_000_000,
        (1 << 60) - 1,
        -(1 << 60) + 1,
        1 << 60,
        -(1 << 60),
        i64::MAX,
        i64::MIN,
    ];
    for want in probes {
        let o = want.into_pyobject(py)?;
        // SAFETY: an exact int made just above; the GIL is held.
        let got = unsafe { small_int(o.as_ptr()) };
        let fits = want.unsigned_abs() < 1 << 60;
        if got != fits.then_some(want) {
            INT_LAYOUT.store(0, Ordering::Relaxed);
            return Ok(());
        }
    }
    Ok(())
}

/// Which layout [`small_int`] reads ("sized", "tagged", or "" when it reads none): for the
/// tests.
pub(crate) fn int_layout() -> &'static str {
    match INT_LAYOUT.load(Ordering::Relaxed) {
        INT_SIZED => "sized",
        INT_TAGGED => "tagged",
        _ => "",
    }
}

/// The number of items of an exact dict.
///
/// # Safety
/// `map` is a live exact dict and the GIL is held.
#[inline(always)]
pub(crate) unsafe fn dict_len(map: *mut ffi::PyObject) -> ffi::Py_ssize_t {
    // SAFETY: the caller's.
    unsafe { (*(map as *mut ffi::PyDictObject)).ma_used }
}

/// `Py_NewRef` for every supported CPython (3.9 on; `Py_NewRef` is 3.10+): the same inline
/// `Py_INCREF` and the pointer back, a new reference.
///
/// # Safety
/// `obj` is a live object and the GIL is held.
#[inline(always)]
pub(crate) unsafe fn new_ref(obj: *mut pyo3::ffi::PyObject) -> *mut pyo3::ffi::PyObject {
    // SAFETY: the caller's.
    unsafe { pyo3::ffi::Py_INCREF(obj) };
    obj
}

/// A METH_FASTCALL | METH_KEYWORDS definition, for the life of the process.
pub(crate) fn fastcall_def(
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

/// Calls `func` with our caller's vectorcall arguments: through `func`'s own vectorcall slot
/// when it has one (a Python function does), else through `PyObject_Vectorcall`. Unlike
/// `PyObject_Vectorcall`, the slot's result is not checked here (`_Py_CheckFunctionResult`):
/// we return it as ours, and whoever called us through vectorcall or `tp_call` checks that.
///
/// # Safety
/// The GIL is held; `func` is a live object and `args`/`nargsf`/`kwnames` are a valid
/// vectorcall argument list (our caller's own).
#[inline(always)]
pub(crate) unsafe fn forward(
    func: *mut pyo3::ffi::PyObject,
    args: *const *mut pyo3::ffi::PyObject,
    nargsf: usize,
    kwnames: *mut pyo3::ffi::PyObject,
) -> *mut pyo3::ffi::PyObject {
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

/// A RuntimeError for a panic caught in an entry without pyo3's trampoline; NULL.
#[cold]
pub(crate) fn panicked(msg: &'static std::ffi::CStr) -> *mut pyo3::ffi::PyObject {
    // SAFETY: called from an entry of the interpreter (GIL held); a static message.
    unsafe { pyo3::ffi::PyErr_SetString(pyo3::ffi::PyExc_RuntimeError, msg.as_ptr()) };
    std::ptr::null_mut()
}
