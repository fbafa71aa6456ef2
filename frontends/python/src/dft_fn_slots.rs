//! `dft_fn`'s C entries, set on the type by hand: `dft_fn(...)` through the type's own
//! vectorcall ([`dft_fn_vectorcall`]: no args tuple, no kwargs dict), `tp_init` for calls
//! through `type.__call__`, and `__enter__` / `__exit__` as raw method descriptors whose
//! common case skips pyo3's trampoline.
#![allow(unsafe_code)] // raw C entries and their arguments (SAFETY notes)

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use pyo3::PyTypeInfo;
use std::sync::atomic::Ordering;

use crate::dft_fn::{DftFn, DFT_FN};
use crate::internals::{self, fastcall_def, new_ref, panicked};
use crate::params::vectorcall_args;

/// The `dft_fn` type (pyo3's lookup of it costs ~60 instructions).
static DFT_FN_TYPE: std::sync::atomic::AtomicPtr<pyo3::ffi::PyTypeObject> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// The vectorcall entry of the `dft_fn` type: `dft_fn(cat, name="x")` builds the object from
/// the caller's argument array, as `__new__` + `__init__` would.
pub(crate) unsafe extern "C" fn dft_fn_vectorcall(
    callable: *mut pyo3::ffi::PyObject,
    args: *const *mut pyo3::ffi::PyObject,
    nargsf: usize,
    kwnames: *mut pyo3::ffi::PyObject,
) -> *mut pyo3::ffi::PyObject {
    // SAFETY: nargsf comes from the caller.
    let nargs = unsafe { pyo3::ffi::PyVectorcall_NARGS(nargsf) };
    // SAFETY: called by the interpreter with the GIL held; the trampoline (what every pyo3
    // method goes through) counts the GIL for pyo3, turns errors and panics into exceptions.
    unsafe { internals::fastcall(callable, args, nargs, kwnames, dft_fn_new_fast) }
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

/// `f` on the dft_fn `slf`, borrowed mutably; `Ok(false)` when it is borrowed already (the
/// entry's general path then raises as pyo3 would), `Err` when `f` panicked.
///
/// # Safety
/// Called from an entry of the interpreter (GIL held) whose method descriptor checked that
/// `slf` is a dft_fn (or a subclass), borrowed for this call.
#[inline(always)]
unsafe fn borrowed(
    slf: *mut pyo3::ffi::PyObject,
    f: impl FnOnce(&mut DftFn) -> bool,
) -> std::thread::Result<bool> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: the function's contract.
        let obj = unsafe { pyo3::Borrowed::from_ptr(Python::assume_gil_acquired(), slf) };
        // SAFETY: as above.
        let cell = unsafe { obj.downcast_unchecked::<DftFn>() };
        match cell.try_borrow_mut() {
            Ok(mut d) => f(&mut d),
            Err(_) => false,
        }
    }))
}

/// `dft_fn.__enter__` (METH_NOARGS): starts the region now. The common case touches no
/// Python object (a borrow flag, the clock), so it skips pyo3's trampoline; anything else
/// (the object already borrowed) goes through it and raises as pyo3 would.
pub(crate) unsafe extern "C" fn dft_fn_enter(
    slf: *mut pyo3::ffi::PyObject,
    args: *mut pyo3::ffi::PyObject,
) -> *mut pyo3::ffi::PyObject {
    // SAFETY: called by the interpreter with the GIL held; the method descriptor checked
    // that `slf` is a dft_fn (or a subclass), borrowed for this call.
    let done = unsafe {
        borrowed(slf, |d| {
            d.start();
            true
        })
    };
    match done {
        // SAFETY: `slf` is live; `__enter__` returns it (a new reference).
        Ok(true) => unsafe { new_ref(slf) },
        // SAFETY: as above; pyo3's trampoline counts the GIL, turns errors into exceptions.
        Ok(false) => unsafe { internals::noargs(slf, args, dft_fn_enter_general) },
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
pub(crate) unsafe extern "C" fn dft_fn_exit(
    slf: *mut pyo3::ffi::PyObject,
    args: *const *mut pyo3::ffi::PyObject,
    nargs: pyo3::ffi::Py_ssize_t,
    kwnames: *mut pyo3::ffi::PyObject,
) -> *mut pyo3::ffi::PyObject {
    use pyo3::ffi;
    // SAFETY: as in `dft_fn_enter`.
    let done = unsafe { borrowed(slf, |d| d.flushed || d.finish_fast()) };
    match done {
        // SAFETY: False is immortal or counted; a new reference either way.
        Ok(true) => unsafe { new_ref(ffi::Py_False()) },
        // SAFETY: the interpreter's arguments; pyo3's trampoline as in `dft_fn_enter`.
        Ok(false) => unsafe { internals::fastcall(slf, args, nargs, kwnames, dft_fn_exit_general) },
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

/// Adds `dft_fn.__enter__` and `dft_fn.__exit__` (see `dft_fn_enter`, `dft_fn_exit`).
pub(crate) fn add_dft_fn_protocol(py: Python<'_>) -> PyResult<()> {
    let enter = internals::noargs_def(
        c"__enter__",
        c"Starts the region now; returns the object.",
        dft_fn_enter,
    );
    let exit = fastcall_def(
        c"__exit__",
        c"Records the region (unless flush() did); never suppresses an exception.",
        dft_fn_exit,
    );
    internals::add_method::<DftFn>(py, "__enter__", enter)?;
    internals::add_method::<DftFn>(py, "__exit__", exit)?;
    Ok(())
}

/// Makes `dft_fn(...)` skip the args tuple and kwargs dict, and `__init__` run for calls
/// through `type.__call__`.
pub(crate) fn enable_dft_fn_fast_new(py: Python<'_>) {
    let tp = DftFn::type_object_raw(py);
    DFT_FN_TYPE.store(tp, Ordering::Relaxed);
    // SAFETY: our own heap type, before any instance exists; tp_vectorcall is a type's
    // documented "call this type" entry (never inherited by subclasses), tp_init a slot.
    unsafe { internals::set_type_call(tp, dft_fn_vectorcall, dft_fn_init) };
}

impl DftFn {
    pub(crate) fn init_from(
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
