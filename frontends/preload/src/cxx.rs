//! The C++ ABI of class `DFTracer`, as the reference DFTracer 2.2.0 library
//! (`libdftracer_core.so.4.3.0`) exports it, so that C++ programs compiled against the
//! reference's header and linked with its library run unchanged on this one:
//!
//! | symbol | member |
//! |---|---|
//! | `_ZN8DFTracerC1EPKcS1_i14TraceEventType`, `...C2...` | `DFTracer(const char *name, const char *cat, int event_type, TraceEventType type)` |
//! | `_ZN8DFTracer6updateEPKci12MetadataType` | `update(const char *key, int value, MetadataType)` |
//! | `_ZN8DFTracer6updateEPKcS1_12MetadataType` | `update(const char *key, const char *value, MetadataType)` |
//! | `_ZN8DFTracer8finalizeEv` | `finalize()` |
//! | `_ZN8DFTracerD1Ev`, `...D2...` | `~DFTracer()` |
//!
//! (Itanium C++ ABI, x86_64/aarch64: `this` is the first argument; constructors and
//! destructors return nothing; C1/D1 are the complete-object forms, C2/D2 the base-object
//! forms, identical for a class without virtual bases.) Our own header's `DFTracer`
//! (`include/dftracer/dftracer.h`) declares the same members with the same layout, so
//! programs built against either header call these functions: one implementation.
//!
//! **The object is the program's**: it allocates it (stack or `new`) with the header's
//! layout, [`Object`] (48 bytes on LP64). These functions write only inside it: the
//! reference's fields (`event_type`, `initialized`, `name`, `cat`, `type`, `start_time`) are
//! filled as the reference fills them, and its `metadata` pointer holds our region handle
//! (the `struct DFTracerData *` of [`crate::region`]). The handle is only ever used through
//! [`crate::region`]'s address checks, so an object that was never constructed, already
//! finalized or overwritten by the program is never dereferenced beyond its own 48 bytes,
//! and a region ends once. (The reference's class is copyable: a copy destroyed after the
//! original finds the region ended and does nothing, unless its slot was reused by a new
//! region meanwhile, which it then ends: the same as a use after `free`, without the crash.)
//!
//! Everything else is the C API's ([`crate::capi`]): tracing off = `initialized` false and
//! every call returns at once; no panic crosses into C++; `errno` is restored.
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc, clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::c_void;

use libc::{c_char, c_int};

use crate::capi;
use crate::region::DFTracerData;

/// The reference header's `class DFTracer` data members, in order:
/// `int event_type; bool initialized; ConstEventNameType name; ConstEventNameType cat;
/// TraceEventType type /* uint8_t */; TimeResolution start_time /* unsigned long long */;
/// dftracer::Metadata *metadata;`. `initialized` is read as a byte (the program may have
/// stored anything there).
#[repr(C)]
pub struct Object {
    event_type: c_int,
    initialized: u8,
    name: *const c_char,
    cat: *const c_char,
    ty: u8,
    start_time: u64,
    /// Our region handle (NULL: no open region).
    metadata: *mut c_void,
}

// The layout a C++ compiler gives the reference's class on LP64 (x86_64, aarch64).
const _: () = {
    assert!(std::mem::size_of::<Object>() == 48);
    assert!(std::mem::align_of::<Object>() == 8);
    assert!(std::mem::offset_of!(Object, event_type) == 0);
    assert!(std::mem::offset_of!(Object, initialized) == 4);
    assert!(std::mem::offset_of!(Object, name) == 8);
    assert!(std::mem::offset_of!(Object, cat) == 16);
    assert!(std::mem::offset_of!(Object, ty) == 24);
    assert!(std::mem::offset_of!(Object, start_time) == 32);
    assert!(std::mem::offset_of!(Object, metadata) == 40);
};

fn construct(
    this: *mut Object,
    name: *const c_char,
    cat: *const c_char,
    event_type: c_int,
    ty: u8,
) {
    if this.is_null() {
        return;
    }
    let (handle, ts) = capi::region_begin_at(
        name,
        cat,
        event_type,
        crate::region::layer_of(ty as c_int),
        false,
    );
    let obj = Object {
        event_type,
        initialized: u8::from(!handle.is_null()),
        name,
        cat,
        ty,
        // The reference's field holds the start in the trace's unit.
        start_time: dftracer_core::frontend::ticks_in_unit(ts),
        metadata: handle as *mut c_void,
    };
    // SAFETY: `this` is the storage the program allocated for a `DFTracer` (the constructor's
    // contract), `Object`'s size and alignment are the class's; the whole object is written,
    // nothing beyond it.
    unsafe { std::ptr::write(this, obj) };
}

/// The region handle stored in `this` (NULL for a NULL `this`).
fn handle(this: *const Object) -> *mut DFTracerData {
    if this.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: `this` is a `DFTracer` object of the program (the member function's contract);
    // one aligned pointer field inside it is read. Its value is checked by address before
    // any use (crate::region::lookup).
    unsafe { std::ptr::addr_of!((*this).metadata).read() as *mut DFTracerData }
}

fn end(this: *mut Object) {
    let h = handle(this);
    if h.is_null() {
        return;
    }
    capi::finalize_region(h);
    // SAFETY: as in `handle`: two fields of the program's object are written (the region is
    // over: a later finalize or the destructor does nothing).
    unsafe {
        std::ptr::addr_of_mut!((*this).metadata).write(std::ptr::null_mut());
        std::ptr::addr_of_mut!((*this).initialized).write(0);
    }
}

/// `DFTracer::DFTracer(const char*, const char*, int, TraceEventType)`, complete object.
#[export_name = "_ZN8DFTracerC1EPKcS1_i14TraceEventType"]
pub extern "C" fn dftracer_cxx_ctor_complete(
    this: *mut Object,
    name: *const c_char,
    cat: *const c_char,
    event_type: c_int,
    ty: u8,
) {
    construct(this, name, cat, event_type, ty);
}

/// The base-object constructor (the same: no virtual bases).
#[export_name = "_ZN8DFTracerC2EPKcS1_i14TraceEventType"]
pub extern "C" fn dftracer_cxx_ctor_base(
    this: *mut Object,
    name: *const c_char,
    cat: *const c_char,
    event_type: c_int,
    ty: u8,
) {
    construct(this, name, cat, event_type, ty);
}

/// `void DFTracer::update(const char*, int, MetadataType)`.
#[export_name = "_ZN8DFTracer6updateEPKci12MetadataType"]
pub extern "C" fn dftracer_cxx_update_int(
    this: *mut Object,
    key: *const c_char,
    value: c_int,
    metadata_type: u8,
) {
    let h = handle(this);
    if !h.is_null() {
        capi::update_metadata_int_type(h, key, value, c_int::from(metadata_type));
    }
}

/// `void DFTracer::update(const char*, const char*, MetadataType)`.
#[export_name = "_ZN8DFTracer6updateEPKcS1_12MetadataType"]
pub extern "C" fn dftracer_cxx_update_str(
    this: *mut Object,
    key: *const c_char,
    value: *const c_char,
    metadata_type: u8,
) {
    let h = handle(this);
    if !h.is_null() {
        capi::update_metadata_string_type(h, key, value, c_int::from(metadata_type));
    }
}

/// `void DFTracer::finalize()`: ends the region now (the destructor then does nothing).
#[export_name = "_ZN8DFTracer8finalizeEv"]
pub extern "C" fn dftracer_cxx_finalize(this: *mut Object) {
    end(this);
}

/// `DFTracer::~DFTracer()`, complete object: ends the region if still open.
#[export_name = "_ZN8DFTracerD1Ev"]
pub extern "C" fn dftracer_cxx_dtor_complete(this: *mut Object) {
    end(this);
}

/// The base-object destructor (the same).
#[export_name = "_ZN8DFTracerD2Ev"]
pub extern "C" fn dftracer_cxx_dtor_base(this: *mut Object) {
    end(this);
}
