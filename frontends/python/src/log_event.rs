//! `log_event`, the module function and `_Tracer`'s method: METH_FASTCALL entries with their
//! own argument sorting ([`Params`]); the common call on borrowed pointers ([`fast`]), anything
//! else validated and converted through pyo3 ([`log_event`]).
#![allow(unsafe_code)] // raw C entries and their arguments (SAFETY notes)

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::convert::{collect, name_arg, record, time_arg, utf8_of, Collected, Kind};
use crate::dft_fn::DFT_FN;
use crate::internals::{self, fastcall_def, new_ref};
use crate::params::Params;
use crate::reference::late_event;
use crate::start::{active, START};
use crate::tracer::Tracer;
use crate::{fast, native};

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
    unsafe { internals::fastcall(slf, args, nargs, kwnames, log_event_call::<METHOD>) }
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
    // SAFETY: per this function's contract (the GIL is held; the call's objects are live).
    unsafe {
        fast::log_event(&e, |c| {
            if on {
                return native::complete_call(c);
            }
            c.text()?;
            if native::is_finalized() {
                late_event();
            }
            Some(())
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

/// Adds the module's `log_event` and `_Tracer.log_event`.
pub(crate) fn add_log_event(m: &Bound<'_, PyModule>) -> PyResult<()> {
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
    internals::add_method::<Tracer>(py, "log_event", def)
}

/// Validates and records one event: `[name, cat, start_time, duration]` and `[int_args,
/// string_args, float_args]`.
pub(crate) fn log_event(
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
