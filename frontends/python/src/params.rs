//! Vectorcall arguments sorted into parameter slots by hand ([`Params`]): for the entries
//! that skip pyo3's extraction (`log_event`, `dft_fn(...)`).
#![allow(unsafe_code)] // a vectorcall's raw argument array (SAFETY notes)

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyString, PyTuple};

use crate::convert::text;

/// The parameter names of a function whose vectorcall arguments are sorted by hand: pyo3
/// 0.23's extraction compares keyword names as strings and checks every `&PyAny` argument
/// against `object` by walking the MRO, hundreds of instructions per call. Here a keyword
/// is matched by pointer first (names in code and ours are interned).
pub(crate) struct Params<const N: usize> {
    names: [&'static str; N],
    interned: GILOnceCell<[Py<PyString>; N]>,
}

impl<const N: usize> Params<N> {
    pub(crate) const fn new(names: [&'static str; N]) -> Self {
        Params {
            names,
            interned: GILOnceCell::new(),
        }
    }

    pub(crate) fn slot(&self, key: &Bound<'_, PyAny>) -> Option<usize> {
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
    pub(crate) fn sort<'py>(
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
    pub(crate) fn names(&self, py: Python<'_>) -> &[Py<PyString>; N] {
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
    pub(crate) unsafe fn sort_raw(
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
            // A few pointers, one test each over the constant `N` (a loop of `nargs` copies
            // becomes a memcpy call).
            for (i, o) in out.iter_mut().enumerate() {
                if i < nargs {
                    *o = *args.add(i);
                }
            }
            if kwnames.is_null() {
                return Some(out);
            }
            let names = self.interned.get(Python::assume_gil_acquired())?;
            for j in 0..ffi::PyTuple_GET_SIZE(kwnames) as usize {
                let k = ffi::PyTuple_GET_ITEM(kwnames, j as ffi::Py_ssize_t);
                // Only the parameters after the positional ones: a keyword naming one of
                // those is a second value for it, which `sort` reports.
                let i = nargs + names[nargs..].iter().position(|n| n.as_ptr() == k)?;
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
    pub(crate) unsafe fn sort_call<'py>(
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
pub(crate) unsafe fn vectorcall_args<'py>(
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
