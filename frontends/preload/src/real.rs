//! The next definition of each interposed symbol, resolved once with `dlsym(RTLD_NEXT)`.
//!
//! [`real!`](crate::real!) keeps one `AtomicUsize` per symbol: a relaxed load on every call, a
//! `dlsym` only the first time (two racing threads may both resolve; they store the same
//! value). `dlsym` may allocate (`calloc` for its error state); that is safe here because
//! this library does not interpose the allocator.
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Resolves `name` (NUL-terminated) in the objects after this one; 0 when absent.
#[cold]
pub fn resolve(name: &CStr) -> usize {
    // SAFETY: `name` is a valid C string; RTLD_NEXT is valid from a shared object.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as usize }
}

/// Loads a cached symbol address, resolving it on first use.
#[inline(always)]
pub fn cached(slot: &AtomicUsize, name: &CStr) -> usize {
    let p = slot.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    let p = resolve(name);
    slot.store(p, Ordering::Relaxed);
    p
}

/// `real!(name: fn-type)` evaluates to `Option<fn-type>`: the next `name` after this library.
#[macro_export]
macro_rules! real {
    ($name:ident : $ty:ty) => {{
        static SLOT: ::std::sync::atomic::AtomicUsize = ::std::sync::atomic::AtomicUsize::new(0);
        let p = $crate::real::cached(
            &SLOT,
            // SAFETY: the literal ends with exactly one NUL.
            unsafe {
                ::std::ffi::CStr::from_bytes_with_nul_unchecked(
                    concat!(stringify!($name), "\0").as_bytes(),
                )
            },
        );
        if p == 0 {
            None
        } else {
            // SAFETY: `p` is the address of the C function `name`, whose C signature is `$ty`.
            Some(unsafe { ::std::mem::transmute::<usize, $ty>(p) })
        }
    }};
}

/// This thread's `errno`.
#[inline(always)]
pub fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno slot, always valid.
    unsafe { *libc::__errno_location() }
}

/// Sets `errno`.
#[inline(always)]
pub fn set_errno(v: i32) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = v };
}

pub fn getpid() -> i32 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() }
}

/// Registers `f` to run in the child after `fork`.
pub fn at_fork_child(f: extern "C" fn()) {
    // SAFETY: registering a plain function pointer; handlers live for the whole process.
    unsafe {
        let f: unsafe extern "C" fn() = f;
        libc::pthread_atfork(None, None, Some(f));
    }
}
