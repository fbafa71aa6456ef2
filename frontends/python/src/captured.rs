//! The values a `dft_fn` and its decorated functions capture (epoch, step, image_idx,
//! image_size: [`CAPTURED`]) and how integer ones go into the ring as a keyed schema's slots
//! ([`captured_keys`], [`slot_int`]).
#![allow(unsafe_code)] // an int read from a live object (SAFETY notes)

use pyo3::prelude::*;
use pyo3::types::PyString;
use std::sync::OnceLock;

/// The arg keys of a keyed schema: the [`CAPTURED`] names at `seq` (indices), in that order,
/// as one leaked slice per sequence (at most 65: the ordered choices among 4 names).
#[inline]
pub(crate) fn captured_keys(seq: &[u8]) -> &'static [(&'static str, dftracer_core::Slot)] {
    static LISTS: [OnceLock<&'static [(&'static str, dftracer_core::Slot)]>; 625] =
        [const { OnceLock::new() }; 625];
    let code = seq.iter().fold(0usize, |c, &i| c * 5 + i as usize + 1);
    LISTS[code % 625].get_or_init(|| {
        let keys: Vec<(&'static str, dftracer_core::Slot)> = seq
            .iter()
            .map(|&i| (CAPTURED[i as usize & 3], dftracer_core::Slot::Int))
            .collect();
        Box::leak(keys.into_boxed_slice())
    })
}

/// A captured value as a keyed schema's slot sees it.
pub(crate) enum SlotInt {
    /// `None`: not recorded.
    Skip,
    /// An exact `int` within 64 bits signed: its bits.
    Int(u64),
    /// Anything else: the general path records it.
    Other,
}

/// [`SlotInt`] of `v`.
///
/// # Safety
/// `v` is a live object, the GIL is held and no exception is set.
#[inline(always)]
pub(crate) unsafe fn slot_int(v: *mut pyo3::ffi::PyObject) -> SlotInt {
    use pyo3::ffi;
    // SAFETY: the function's contract.
    unsafe {
        if v == ffi::Py_None() {
            return SlotInt::Skip;
        }
        if ffi::PyLong_CheckExact(v) == 0 {
            return SlotInt::Other;
        }
        let mut overflow = 0;
        let x = ffi::PyLong_AsLongAndOverflow(v, &mut overflow);
        if overflow != 0 || (x == -1 && !ffi::PyErr_Occurred().is_null()) {
            ffi::PyErr_Clear();
            return SlotInt::Other;
        }
        SlotInt::Int(x as i64 as u64)
    }
}

pub(crate) const CAPTURED: [&str; 4] = ["epoch", "step", "image_idx", "image_size"];

/// The interned key of captured slot `i`.
pub(crate) fn captured_key(py: Python<'_>, i: usize) -> &Bound<'_, PyString> {
    match i {
        0 => pyo3::intern!(py, "epoch"),
        1 => pyo3::intern!(py, "step"),
        2 => pyo3::intern!(py, "image_idx"),
        _ => pyo3::intern!(py, "image_size"),
    }
}
