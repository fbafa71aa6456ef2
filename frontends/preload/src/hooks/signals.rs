//! Signal dispositions as the program sees them untraced: `sigaction`, `__sigaction`,
//! `signal`/`bsd_signal`/`ssignal`, `sysv_signal`/`__sysv_signal`, `sigset` and
//! `siginterrupt` go through `dftracer_core::signals`, where the tracer's handler (installed
//! only while a disposition is `SIG_DFL`, and doing what `SIG_DFL` does once the trace is
//! finished) is reported as `SIG_DFL`. glibc's `signal`, `sigset` and `siginterrupt` call its
//! internal `__sigaction`, which no hook sees: they are emulated here (glibc 2.36's behaviour, written anew, on
//! the hooked `sigaction`) for the signals the core manages, and forwarded for every other.
//! With `DFTRACER_BIND_SIGNALS=0`, or before tracing starts, every one is a plain forward.

use libc::{c_int, sighandler_t};

use super::missing;
use crate::real;
use dftracer_core::frontend::signals::{self as sigs, SigactionFn};

type SignalFn = unsafe extern "C" fn(c_int, sighandler_t) -> sighandler_t;

#[inline]
unsafe fn do_sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let Some(real) = real!(sigaction: SigactionFn) else {
        return missing(-1);
    };
    if !sigs::managed(sig) {
        return real(sig, act, old);
    }
    crate::guarded_or(-1, || sigs::sigaction(sig, act, old, real))
}

#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    do_sigaction(sig, act, old)
}

#[no_mangle]
pub unsafe extern "C" fn __sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    do_sigaction(sig, act, old)
}

/// `signal` family: emulated on the hooked `sigaction` for a managed signal, else `real`.
#[inline]
unsafe fn do_signal(
    real_fn: Option<SignalFn>,
    sig: c_int,
    handler: sighandler_t,
    sysv: bool,
) -> sighandler_t {
    let Some(real_fn) = real_fn else {
        return missing(libc::SIG_ERR);
    };
    if !sigs::managed(sig) {
        return real_fn(sig, handler);
    }
    let Some(real_sa) = real!(sigaction: SigactionFn) else {
        return missing(libc::SIG_ERR);
    };
    crate::guarded_or(libc::SIG_ERR, || {
        sigs::signal(sig, handler, sysv, real_sa).unwrap_or_else(|| real_fn(sig, handler))
    })
}

#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, handler: sighandler_t) -> sighandler_t {
    do_signal(real!(signal: SignalFn), sig, handler, false)
}

#[no_mangle]
pub unsafe extern "C" fn bsd_signal(sig: c_int, handler: sighandler_t) -> sighandler_t {
    do_signal(real!(bsd_signal: SignalFn), sig, handler, false)
}

#[no_mangle]
pub unsafe extern "C" fn ssignal(sig: c_int, handler: sighandler_t) -> sighandler_t {
    do_signal(real!(ssignal: SignalFn), sig, handler, false)
}

#[no_mangle]
pub unsafe extern "C" fn sysv_signal(sig: c_int, handler: sighandler_t) -> sighandler_t {
    do_signal(real!(sysv_signal: SignalFn), sig, handler, true)
}

#[no_mangle]
pub unsafe extern "C" fn __sysv_signal(sig: c_int, handler: sighandler_t) -> sighandler_t {
    do_signal(real!(__sysv_signal: SignalFn), sig, handler, true)
}

#[no_mangle]
pub unsafe extern "C" fn sigset(sig: c_int, disp: sighandler_t) -> sighandler_t {
    let Some(real_fn) = real!(sigset: SignalFn) else {
        return missing(libc::SIG_ERR);
    };
    if !sigs::managed(sig) {
        return real_fn(sig, disp);
    }
    let Some(real_sa) = real!(sigaction: SigactionFn) else {
        return missing(libc::SIG_ERR);
    };
    crate::guarded_or(libc::SIG_ERR, || {
        sigs::sigset(sig, disp, real_sa).unwrap_or_else(|| real_fn(sig, disp))
    })
}

#[no_mangle]
pub unsafe extern "C" fn siginterrupt(sig: c_int, interrupt: c_int) -> c_int {
    let Some(real_fn) = real!(siginterrupt: unsafe extern "C" fn(c_int, c_int) -> c_int) else {
        return missing(-1);
    };
    let Some(real_sa) = real!(sigaction: SigactionFn) else {
        return missing(-1);
    };
    crate::guarded_or(-1, || {
        sigs::siginterrupt(sig, interrupt, real_sa).unwrap_or_else(|| real_fn(sig, interrupt))
    })
}
