//! POSIX AIO (`aio_read`, `aio_write`, `lio_listio`, `aio_error`, `aio_return`,
//! `aio_suspend`, and their `64` names): one event per request on a traced fd, `aio_read` or
//! `aio_write`, with `fd`, `count`, `offset` and `ret` (the request's result), its `ts` the
//! submission and its `dur` until completion was first observed.
//!
//! glibc runs requests on helper threads whose I/O happens inside libc (no interposable
//! call), so completion is observed from the program's side: the first `aio_error` that no
//! longer answers `EINPROGRESS`, the return of an `aio_suspend` that waited for it, or of a
//! `lio_listio(LIO_WAIT)`, whichever comes first; the event is written by `aio_return` (which
//! POSIX requires once per request) with the request's result. A request whose `aio_return`
//! is never called leaves no event. Requests are followed in a fixed table of `MAX_PENDING` (more
//! in flight at once are not followed).
#![allow(clippy::undocumented_unsafe_blocks)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use libc::{aiocb, c_int, ssize_t, timespec};

use dftracer_core::{Layer, Schema, Slot};

use super::{missing, out_of_line, traced_fd};
use crate::table::Interned;
use crate::{enter, guarded, ticks, posix_on, real, record_static, SavedErrno};

const MAX_PENDING: usize = 1024;

struct Pending {
    cb: AtomicUsize,
    t0: AtomicU64,
    /// 0 until completion was observed.
    t1: AtomicU64,
    /// 0 read, 1 write.
    op: AtomicUsize,
    /// The request's file, a parked pin (`table::park`); 0: none.
    file: AtomicU64,
}

static PENDING: [Pending; MAX_PENDING] = [const {
    Pending {
        cb: AtomicUsize::new(0),
        t0: AtomicU64::new(0),
        t1: AtomicU64::new(0),
        op: AtomicUsize::new(0),
        file: AtomicU64::new(0),
    }
}; MAX_PENDING];
/// Requests followed now: 0 lets `aio_error`/`aio_return`/`aio_suspend` forward at once.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The schema of a request's event: `fd`, `count`, `offset`, `ret` (its result).
macro_rules! request_schema {
    ($name:literal) => {
        Schema::new(
            Layer::LibcIo,
            $name,
            "POSIX",
            &[
                ("fd", Slot::Int),
                ("count", Slot::UInt),
                ("offset", Slot::Int),
                ("ret", Slot::Int),
            ],
            "fhash",
        )
    };
}

static AIO_READ: Schema = request_schema!("aio_read");
static AIO_WRITE: Schema = request_schema!("aio_write");

fn follow(cb: *const aiocb, op: usize, t0: u64, file: Interned) {
    let Some(pin) = file.file.pin() else { return };
    for p in &PENDING {
        if p.cb
            .compare_exchange(0, cb as usize, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            p.t0.store(t0, Ordering::Relaxed);
            p.t1.store(0, Ordering::Relaxed);
            p.op.store(op, Ordering::Relaxed);
            p.file.store(crate::table::park(pin), Ordering::Release);
            LIVE.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
}

fn find(cb: *const aiocb) -> Option<&'static Pending> {
    if cb.is_null() {
        return None;
    }
    PENDING.iter().find(|p| {
        p.cb.load(Ordering::Acquire) == cb as usize && p.file.load(Ordering::Acquire) != 0
    })
}

/// Notes that `cb` completed (first observation wins).
fn completed(cb: *const aiocb, t: u64) {
    if let Some(p) = find(cb) {
        let _ =
            p.t1.compare_exchange(0, t.max(1), Ordering::AcqRel, Ordering::Relaxed);
    }
}

#[inline(always)]
fn live() -> bool {
    LIVE.load(Ordering::Relaxed) != 0
}

macro_rules! submit {
    ($sym:ident, $op:expr) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(cb: *mut aiocb) -> c_int {
            let Some(real) = real!($sym: unsafe extern "C" fn(*mut aiocb) -> c_int) else {
                return missing(-1);
            };
            let Some(file) = (if cb.is_null() { None } else { traced_fd((*cb).aio_fildes) }) else {
                return real(cb);
            };
            out_of_line(move || {
                let Some(busy) = enter() else { return real(cb) };
                let t0 = ticks();
                let ret = real(cb);
                let _errno = SavedErrno::new();
                if ret == 0 {
                    guarded(|| follow(cb, $op, t0, file));
                }
                drop(busy);
                ret
            })
        }
    };
}

submit!(aio_read, 0);
submit!(aio_read64, 0);
submit!(aio_write, 1);
submit!(aio_write64, 1);

macro_rules! listio {
    ($sym:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(
            mode: c_int,
            list: *const *mut aiocb,
            nent: c_int,
            sig: *mut libc::sigevent,
        ) -> c_int {
            let Some(real) = real!($sym: unsafe extern "C" fn(c_int, *const *mut aiocb, c_int, *mut libc::sigevent) -> c_int) else {
                return missing(-1);
            };
            if !posix_on() || list.is_null() || nent <= 0 {
                return real(mode, list, nent, sig);
            }
            out_of_line(move || {
                let Some(busy) = enter() else { return real(mode, list, nent, sig) };
                let t0 = ticks();
                let ret = real(mode, list, nent, sig);
                let _errno = SavedErrno::new();
                let t1 = ticks();
                guarded(|| {
                    for i in 0..nent as usize {
                        let cb = *list.add(i);
                        if cb.is_null() {
                            continue;
                        }
                        let op = match (*cb).aio_lio_opcode {
                            libc::LIO_READ => 0,
                            libc::LIO_WRITE => 1,
                            _ => continue,
                        };
                        // A request that failed to queue reports its error through
                        // aio_error/aio_return like any other: follow it too.
                        if let Some(file) = traced_fd((*cb).aio_fildes) {
                            follow(cb, op, t0, file);
                            if mode == libc::LIO_WAIT {
                                completed(cb, t1);
                            }
                        }
                    }
                });
                drop(busy);
                ret
            })
        }
    };
}

listio!(lio_listio);
listio!(lio_listio64);

macro_rules! error_hook {
    ($sym:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(cb: *const aiocb) -> c_int {
            let Some(real) = real!($sym: unsafe extern "C" fn(*const aiocb) -> c_int) else {
                return missing(-1);
            };
            if !live() {
                return real(cb);
            }
            let ret = real(cb);
            if ret != libc::EINPROGRESS {
                let _errno = SavedErrno::new();
                guarded(|| completed(cb, ticks()));
            }
            ret
        }
    };
}

error_hook!(aio_error);
error_hook!(aio_error64);

macro_rules! return_hook {
    ($sym:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $sym(cb: *mut aiocb) -> ssize_t {
            let Some(real) = real!($sym: unsafe extern "C" fn(*mut aiocb) -> ssize_t) else {
                return missing(-1);
            };
            if !live() {
                return real(cb);
            }
            out_of_line(move || {
                let Some(p) = find(cb) else { return real(cb) };
                let ret = real(cb);
                let _errno = SavedErrno::new();
                let t = ticks();
                // Forget the request first (its aiocb may be reused at once), then record.
                let Some(file) = crate::table::unpark(p.file.swap(0, Ordering::AcqRel)) else {
                    return ret;
                };
                let (t0, t1, op) = (
                    p.t0.load(Ordering::Relaxed),
                    p.t1.load(Ordering::Acquire),
                    p.op.load(Ordering::Relaxed),
                );
                p.cb.store(0, Ordering::Release);
                LIVE.fetch_sub(1, Ordering::Relaxed);
                let Some(busy) = enter() else { return ret };
                guarded(|| {
                    let t1 = if t1 == 0 { t } else { t1 };
                    let c = &*cb;
                    let schema = if op == 0 { &AIO_READ } else { &AIO_WRITE };
                    record_static(
                        schema,
                        t0,
                        t1,
                        &[
                            c.aio_fildes as i64 as u64,
                            c.aio_nbytes as u64,
                            c.aio_offset as i64 as u64,
                            ret as i64 as u64,
                        ],
                        &file.handle(),
                    );
                });
                drop(busy);
                ret
            })
        }
    };
}

return_hook!(aio_return);
return_hook!(aio_return64);

macro_rules! suspend_hook {
    ($sym:ident) => {
        /// Waiting is not an event of its own; the requests it saw complete get their
        /// completion time.
        #[no_mangle]
        pub unsafe extern "C" fn $sym(list: *const *const aiocb, nent: c_int, timeout: *const timespec) -> c_int {
            let Some(real) = real!($sym: unsafe extern "C" fn(*const *const aiocb, c_int, *const timespec) -> c_int) else {
                return missing(-1);
            };
            if !live() {
                return real(list, nent, timeout);
            }
            let ret = real(list, nent, timeout);
            if ret == 0 && !list.is_null() {
                let _errno = SavedErrno::new();
                let t = ticks();
                guarded(|| {
                    let Some(err) = real!(aio_error: unsafe extern "C" fn(*const aiocb) -> c_int) else {
                        return;
                    };
                    for i in 0..nent.max(0) as usize {
                        let cb = *list.add(i);
                        if !cb.is_null() && find(cb).is_some() && err(cb) != libc::EINPROGRESS {
                            completed(cb, t);
                        }
                    }
                });
            }
            ret
        }
    };
}

suspend_hook!(aio_suspend);
suspend_hook!(aio_suspend64);
