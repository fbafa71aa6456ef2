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
//! - [`fastcall_def`], [`noargs_def`], [`add_method`]: raw `PyMethodDef`s and method
//!   descriptors made outside pyo3's `#[pymethods]`.
#![allow(unsafe_code)]

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
