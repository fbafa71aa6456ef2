//! `_Wrapped`, the callable `dft_fn.log` returns for a plain function: called through its
//! own vectorcall entry ([`wrapped_vectorcall`]), it calls the function through the
//! function's vectorcall slot and records one event; no args: `end_ticks` (the clock read
//! and the record in one call); all-int captured values: a keyed schema's slots; otherwise
//! (or when the dft_fn's `update()` ran during the call) the general path.
#![allow(unsafe_code)] // the vectorcall entry and its raw arguments (SAFETY notes)

use dftracer_core::Layer;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use std::sync::atomic::Ordering;

use crate::captured::{captured_keys, slot_int, SlotInt, CAPTURED};
use crate::convert::{py_val, record, utf8_of, Collected};
use crate::dft_fn::DftFn;
use crate::internals::{self, forward};
use crate::native;
use crate::start::active;
use crate::updates::Updates;

/// What a wrapper records of each call: parameter name and its positional index.
struct Capture {
    name: Py<PyString>,
    index: Option<usize>,
}

/// The callable `dft_fn.log` returns for a plain function: calls the function, records one
/// event (also when it raises), and binds like a function when used as a method.
#[pyclass(dict, module = "dftracer.dftracer", name = "_Wrapped")]
#[repr(C)]
pub(crate) struct Wrapped {
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

/// [`Wrapped::schema`] when the name or category has no schema (it needs escaping, or the
/// core's table is full): such calls are recorded with their strings.
const NO_SCHEMA: *mut dftracer_core::Schema = std::ptr::dangling_mut();

impl Wrapped {
    /// The interned schema of this function's events without args, if any.
    #[inline]
    pub(crate) fn schema(&self) -> Option<&'static dftracer_core::Schema> {
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
    /// line the general path writes. `tick`: the call's start, a raw clock read (the end is
    /// read and both are converted in the core). False: nothing was recorded (the general path
    /// runs).
    ///
    /// # Safety
    /// The GIL is held, no exception is set, and `args`/`nargsf`/`kwnames` are the caller's
    /// vectorcall arguments.
    #[inline]
    pub(crate) unsafe fn record_ints(
        &self,
        caps: &[u8],
        tick: u64,
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
        native::end_ticks(schema, tick, &vals[..n]);
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
    let w: &Wrapped = unsafe { internals::contents(callable, off) };
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
    // A raw clock read: the writer converts it for the no-args event below; every other path
    // converts it first (`ticks_in_unit`).
    let tick = native::ticks();
    // SAFETY: as above.
    let result = unsafe { forward(func, args, nargsf, kwnames) };
    if updates.mark() != g0 {
        // SAFETY: the caller's own vectorcall arguments; the GIL is held.
        unsafe {
            wrapped_general(
                w,
                native::ticks_in_unit(tick),
                Some(g0),
                args,
                nargsf,
                kwnames,
            )
        };
        return result;
    }
    if w.capture.is_empty() {
        // No parameter is recorded: the event has no args (no argument list to build).
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            w.schema()
                .map(|schema| native::end_ticks(schema, tick, &[]))
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
                w.record_ints(caps, tick, args, nargsf, kwnames)
            }));
            if !matches!(done, Ok(false)) {
                return result;
            }
        }
    }
    // SAFETY: the caller's own vectorcall arguments; the GIL is held.
    unsafe { wrapped_general(w, native::ticks_in_unit(tick), None, args, nargsf, kwnames) };
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
pub(crate) fn enable_vectorcall(py: Python<'_>) -> PyResult<()> {
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
    unsafe { internals::set_instance_vectorcall(tp, field - obj) };
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
