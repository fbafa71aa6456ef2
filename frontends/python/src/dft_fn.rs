//! `dftracer.python.dft_fn`: the native class (a category of events, a context manager, the
//! decorator factory whose Python half is in `dftracer.python`): its state, how it records
//! (keyed schema, borrowed pointers, or the general conversion) and its Python methods. Its
//! C entries (construction through the type's vectorcall, `__enter__`, `__exit__`) are in
//! [`crate::dft_fn_slots`].
#![allow(unsafe_code)] // borrowed str bytes and ints of live objects (SAFETY notes)

use dftracer_core::{Arg, Layer};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use crate::captured::{captured_key, captured_keys, slot_int, SlotInt, CAPTURED};
use crate::convert::{py_val, record, same_key, utf8_of, Collected};
use crate::params::Params;
use crate::reference::log_metadata_event;
use crate::start::active;
use crate::updates::Updates;
use crate::{fast, native, MAX_PY_ARGS};

/// `dft_fn`'s parameters, in order (after `self`).
pub(crate) static DFT_FN: Params<7> = Params::new([
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
pub(crate) struct DftFn {
    /// None until `__init__` ran (a subclass that never calls it records cat "").
    cat: Option<Py<PyString>>,
    /// None: not given and tracing was off when built.
    name: Option<Py<PyString>>,
    /// The start: a raw clock read (`native::ticks`; 0 when not recording), converted by the
    /// writer (`end_ticks`) or by [`DftFn::begin`].
    t1: u64,
    pub(crate) flushed: bool,
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
    #[inline]
    pub(crate) fn blank() -> Self {
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
    pub(crate) fn updates(&mut self) -> std::sync::Arc<Updates> {
        self.updates.get_or_insert_with(Updates::new).clone()
    }

    /// `__init__`: sets every field from the sorted arguments.
    #[inline]
    pub(crate) fn configure(
        &mut self,
        py: Python<'_>,
        a: [Option<Bound<'_, PyAny>>; 7],
    ) -> PyResult<()> {
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
        self.t1 = if self.enable && on {
            native::ticks()
        } else {
            0
        };
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

    /// The start in the trace's unit (what `now` read then).
    fn begin(&self) -> u64 {
        native::ticks_in_unit(self.t1)
    }

    #[inline]
    pub(crate) fn start(&mut self) {
        self.t1 = if self.enable && active() {
            native::ticks()
        } else {
            0
        };
        self.flushed = false;
    }

    pub(crate) fn record_now(&mut self, py: Python<'_>) {
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
        let t1 = self.begin();
        record(
            name.as_bytes(),
            cat.as_bytes(),
            t1,
            t2.saturating_sub(t1),
            &vals,
        );
    }

    /// `__exit__`'s common case: nothing to record (tracing off, disabled) or values
    /// `record_fast` takes; false: `record_now` must run (nothing was recorded).
    #[inline]
    pub(crate) fn finish_fast(&mut self) -> bool {
        if !self.enable || !active() {
            self.flushed = true;
            return true;
        }
        if self.extra.is_empty() {
            if self.captured.iter().all(Option::is_none) {
                if let Some(schema) = self.plain_schema() {
                    // No args: the core reads the clock and records in one call.
                    native::end_ticks(schema, self.t1, &[]);
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
    pub(crate) fn record_ints(&self) -> bool {
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
        // The core reads the end and the writer converts both.
        native::end_ticks(schema, self.t1, &vals[..n]);
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
                let t1 = self.begin();
                native::complete_interned(schema, t1, t2.saturating_sub(t1));
                return true;
            }
        }
        let t1 = self.begin();
        native::complete_args(Layer::Python, name, cat, t1, t2.saturating_sub(t1), &args);
        true
    }

    /// `dftracer.python.<func>`: the Python half of `dft_fn` (decorating and iterating build
    /// Python wrappers; they run at import time or once per loop).
    fn python_half<'py>(py: Python<'py>, func: &str) -> PyResult<Bound<'py, PyAny>> {
        py.import("dftracer.python")?.getattr(func)
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
