//! The schemas of `log_event` calls (`dftracer_core::intern_args`), found again by the
//! identity of the call's str objects: its name, category and arg keys (string literals in
//! the caller's code are the same objects at every call), with the kinds of the values.
//!
//! A thread's cache holds a strong reference to every str object of its entries, so an
//! address seen here is never another string's while its entry lives: a hit compares
//! addresses only, no bytes. An entry replaced drops its references (the GIL is held: every
//! caller is a Python call on this thread). A thread's last entries are never dropped (the
//! cache has no destructor, which could run without the GIL): at most [`WAYS`] × (2 +
//! [`KEYS`]) references per thread, to objects the thread's code used.
//!
//! (One cache for the process under the GIL saves the thread-local access, a
//! `__tls_get_addr` call from this `dlopen`ed module, about 15 instructions per call; but
//! this module's thread-local block, which glibc allocates with `malloc`, then shrinks by
//! 10 KB and moves the program's heap: an unrelated figure of the callgrind check,
//! `python_pread_bound`, whose `os.pread` allocates 4 KiB per call, went from 8 to 205
//! instructions per call from glibc's `_int_malloc` alone. Kept per thread.)
#![allow(unsafe_code)] // CPython's C API on borrowed pointers (SAFETY notes)

use std::cell::UnsafeCell;

use dftracer_core::{ArgsSchema, Slot};
use pyo3::ffi;

/// Entries per thread (direct-mapped).
const WAYS: usize = 64;
/// Most keys an entry holds; a call with more looks its schema up by bytes every time.
pub const KEYS: usize = 8;

#[derive(Clone, Copy)]
struct Entry {
    name: *mut ffi::PyObject,
    cat: *mut ffi::PyObject,
    n: usize,
    keys: [*mut ffi::PyObject; KEYS],
    slots: [Option<Slot>; KEYS],
    schema: Option<ArgsSchema>,
}

const EMPTY: Entry = Entry {
    name: std::ptr::null_mut(),
    cat: std::ptr::null_mut(),
    n: 0,
    keys: [std::ptr::null_mut(); KEYS],
    slots: [None; KEYS],
    schema: None,
};

thread_local! {
    static CACHE: UnsafeCell<[Entry; WAYS]> = const { UnsafeCell::new([EMPTY; WAYS]) };
}

/// A `log_event` call's shape: its name and category objects and, per arg, the key object
/// and the slot its value takes.
pub struct Shape<'a> {
    pub name: *mut ffi::PyObject,
    pub cat: *mut ffi::PyObject,
    pub keys: &'a [(*mut ffi::PyObject, Slot)],
}

impl Shape<'_> {
    fn home(&self) -> usize {
        let first = self.keys.first().map_or(0, |k| k.0 as usize);
        let h = (self.name as usize ^ (self.cat as usize).rotate_left(21) ^ first.rotate_left(42))
            .wrapping_add(self.keys.len())
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> 58) & (WAYS - 1)
    }

    fn is(&self, e: &Entry) -> bool {
        e.name == self.name
            && e.cat == self.cat
            && e.n == self.keys.len()
            && self
                .keys
                .iter()
                .zip(e.keys.iter().zip(&e.slots))
                .all(|(&(k, s), (&ek, &es))| k == ek && Some(s) == es)
    }
}

/// The schema of calls of `shape` if its entry is there (`None`: more than [`KEYS`] keys, or
/// no entry: then [`insert`] once the schema is made).
///
/// # Safety
/// The GIL is held; `shape`'s pointers are live exact str objects.
#[inline(always)]
pub unsafe fn find(shape: &Shape) -> Option<ArgsSchema> {
    if shape.keys.len() > KEYS {
        return None;
    }
    let i = shape.home();
    CACHE
        .try_with(|c| {
            // SAFETY: this thread's cache; no other reference to it lives (`insert` holds
            // its own only while it runs, and calls nothing that could come back here).
            let e = unsafe { &(*c.get())[i] };
            if e.schema.is_some() && shape.is(e) {
                e.schema
            } else {
                None
            }
        })
        .ok()
        .flatten()
}

/// Makes `schema` the entry of `shape` (at most [`KEYS`] keys, else nothing), replacing the
/// entry in its place.
///
/// # Safety
/// As [`find`].
pub unsafe fn insert(shape: &Shape, schema: ArgsSchema) {
    if shape.keys.len() > KEYS {
        return;
    }
    let i = shape.home();
    let _ = CACHE.try_with(|c| {
        // SAFETY: this thread's cache, not borrowed elsewhere: nothing below calls back into
        // Python code or into this module (the decrefs free str objects only).
        let e = unsafe { &mut (*c.get())[i] };
        // SAFETY: per this function's contract (the GIL is held); the old entry's
        // references are its own.
        unsafe { replace(e, shape, schema) };
    });
}

/// Makes `e` the entry of `shape`: new references to its objects, the old entry's dropped.
///
/// # Safety
/// As [`find`]; `e`'s objects, if any, are references this cache holds.
unsafe fn replace(e: &mut Entry, shape: &Shape, schema: ArgsSchema) {
    let old = *e;
    let mut new = Entry {
        name: shape.name,
        cat: shape.cat,
        n: shape.keys.len(),
        schema: Some(schema),
        ..EMPTY
    };
    for (i, &(k, s)) in shape.keys.iter().enumerate() {
        new.keys[i] = k;
        new.slots[i] = Some(s);
    }
    // SAFETY: the GIL is held; new references first (an object may be in both entries).
    unsafe {
        for p in [new.name, new.cat]
            .into_iter()
            .chain(new.keys[..new.n].iter().copied())
        {
            ffi::Py_INCREF(p);
        }
        *e = new;
        if old.schema.is_some() {
            for p in [old.name, old.cat]
                .into_iter()
                .chain(old.keys[..old.n].iter().copied())
            {
                ffi::Py_DECREF(p);
            }
        }
    }
}
