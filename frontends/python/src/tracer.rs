//! `_Tracer`, the base of `dftracer.python.dftracer`: its `log_event` method is native
//! ([`crate::log_event::add_log_event`]).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

/// Base of `dftracer.python.dftracer`: its `log_event` method is native (added by
/// `add_log_event`), so an event logged through the instance runs no Python frame.
#[pyclass(subclass, frozen, module = "dftracer.dftracer", name = "_Tracer")]
pub(crate) struct Tracer;

#[pymethods]
impl Tracer {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        Tracer
    }
}
