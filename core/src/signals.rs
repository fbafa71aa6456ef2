//! Signal dispositions: the tracer's handler is `SIG_DFL` in disguise (ARCHITECTURE.md,
//! "Signals").
//!
//! For every catchable signal whose default action ends the process ([`FATAL`]), while its
//! disposition is `SIG_DFL`, the tracer's handler is installed in its place. Its effect is the
//! default action's: it finishes the trace (the writer thread does the work, the handler waits
//! with a deadline), sets `SIG_DFL` explicitly, unblocks the signal and raises it again, so the
//! process dies by the same signal with the same status and core dump (a fault the kernel
//! raised is instead left to happen again under `SIG_DFL` when the handler returns).
//!
//! The program never sees the handler: the frontends' `sigaction`, `signal`, `sigset`, ...
//! hooks call [`sigaction`] and the emulations below, which report `SIG_DFL` (with the mask
//! and flags the program last gave it) while the tracer's handler is installed, keep it
//! installed when the program sets `SIG_DFL`, and step aside (really install the program's
//! action) for a handler or `SIG_IGN`. A later `SIG_DFL` brings the tracer's handler back.
//!
//! The handler never calls a handler it found: it is only ever installed where the
//! disposition was `SIG_DFL`, and when something else calls it (a runtime that kept the
//! address it read with a raw system call) it still ends with `SIG_DFL` set explicitly and the
//! signal unblocked, so a re-raise can never loop.
//!
//! Every libc call here that changes a disposition goes to the *real* `sigaction` (the
//! frontend's next definition, or `dlsym(RTLD_NEXT)`), never through the hooks.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};

use libc::c_int;

/// `sigaction(2)` as libc defines it.
pub type SigactionFn =
    unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;

/// The catchable signals whose default action ends the process (terminate or core dump).
/// `SIGSTKFLT`, `SIGPWR`, `SIGIO` and the real-time signals are left alone (their default
/// action ends the process too, but programs that leave them at the default do not receive
/// them).
pub const FATAL: [c_int; 19] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGABRT,
    libc::SIGPIPE,
    libc::SIGALRM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGSYS,
];

/// Signals the kernel raises for the instruction that is running: never blocked (a blocked
/// fault kills at once), and the handler waits less for the writer.
const SYNC: [c_int; 6] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGSYS,
];

const fn bit(sig: c_int) -> u64 {
    1u64 << (sig - 1)
}

const fn mask_of(sigs: &[c_int]) -> u64 {
    let mut m = 0u64;
    let mut i = 0;
    while i < sigs.len() {
        m |= bit(sigs[i]);
        i += 1;
    }
    m
}

const FATAL_MASK: u64 = mask_of(&FATAL);
const SYNC_MASK: u64 = mask_of(&SYNC);

/// How long the handler waits for the writer thread to finish the trace: for a signal sent
/// to the process, and for a fault (the faulting thread may hold a lock the writer needs).
pub const SIGNAL_WAIT_MS: u64 = 2000;
pub const FAULT_WAIT_MS: u64 = 500;

fn is_fatal(sig: c_int) -> bool {
    (1..=64).contains(&sig) && FATAL_MASK & bit(sig) != 0
}

fn is_sync(sig: c_int) -> bool {
    (1..=64).contains(&sig) && SYNC_MASK & bit(sig) != 0
}

/// The asynchronous signals: every signal but the uncatchable ones and the faults. Blocked on
/// the writer thread for its whole life and on an application thread inside the tracer's
/// sections (glibc never blocks its own two internal signals).
pub fn async_set() -> libc::sigset_t {
    // SAFETY: an all-zero sigset is valid; sigfillset/sigdelset only write into it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        for s in SYNC {
            libc::sigdelset(&mut set, s);
        }
        libc::sigdelset(&mut set, libc::SIGKILL);
        libc::sigdelset(&mut set, libc::SIGSTOP);
        set
    }
}

/// The disguise is on: handlers are installed and the hooks virtualise (after `arm`).
static ARMED: AtomicBool = AtomicBool::new(false);
/// The real `sigaction` (0 until resolved).
static REAL: AtomicUsize = AtomicUsize::new(0);
/// The restorer glibc installs with every action (`sa_restorer` of our own action).
static RESTORER: AtomicUsize = AtomicUsize::new(0);
/// Whether this kernel clears unknown `sa_flags` bits (Linux 5.11+), so that a virtual
/// `SIG_DFL` reports the flags the kernel would have kept.
static CLEARS_UNKNOWN: AtomicBool = AtomicBool::new(false);
/// Serialises the hooks' read-modify-write of a disposition (held with every signal blocked
/// on the holding thread, so a handler can never wait for its own thread).
static LOCK: AtomicBool = AtomicBool::new(false);
/// `siginterrupt`'s set, for the `signal()` emulation (glibc's own set is hidden).
static INTR: AtomicU64 = AtomicU64::new(0);

/// What a query reports while the tracer's handler stands in for `SIG_DFL`: the flags, the
/// first 64 bits of the mask and the restorer the kernel holds for the program's `SIG_DFL`.
struct Virtual {
    flags: AtomicI32,
    mask: AtomicU64,
    restorer: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const V0: Virtual = Virtual {
    flags: AtomicI32::new(0),
    mask: AtomicU64::new(0),
    restorer: AtomicUsize::new(0),
};
static VIRTUAL: [Virtual; 65] = [V0; 65];

/// `SA_UNSUPPORTED` (linux/signal.h): a bit the kernel never supports, to detect whether it
/// clears unknown bits.
const SA_UNSUPPORTED: c_int = 0x400;
/// `sa_flags` bits the kernel keeps (`UAPI_SA_FLAGS`, x86's `SA_RESTORER` included).
const UAPI_SA_FLAGS: c_int = libc::SA_NOCLDSTOP
    | libc::SA_NOCLDWAIT
    | libc::SA_SIGINFO
    | libc::SA_ONSTACK
    | libc::SA_RESTART
    | libc::SA_NODEFER
    | libc::SA_RESETHAND
    | 0x800 // SA_EXPOSE_TAGBITS
    | 0x0400_0000; // SA_RESTORER
/// glibc adds `SA_RESTORER` to every action it passes to the kernel on x86_64.
#[cfg(target_arch = "x86_64")]
const GLIBC_ADDS: c_int = 0x0400_0000;
#[cfg(not(target_arch = "x86_64"))]
const GLIBC_ADDS: c_int = 0;

/// Sets the real `sigaction` the tracer uses (a frontend's next definition). Without it, the
/// first use resolves `dlsym(RTLD_NEXT, "sigaction")`.
pub fn set_real(f: SigactionFn) {
    REAL.store(f as usize, Ordering::Release);
}

fn real() -> Option<SigactionFn> {
    let mut p = REAL.load(Ordering::Acquire);
    if p == 0 {
        // SAFETY: a valid C string; RTLD_NEXT finds the next definition after this object
        // (libc's, or another interposer's: never this library's own hook).
        p = unsafe { libc::dlsym(libc::RTLD_NEXT, c"sigaction".as_ptr()) } as usize;
        if p == 0 {
            return None;
        }
        REAL.store(p, Ordering::Release);
    }
    // SAFETY: p is the address of a function with sigaction's signature.
    Some(unsafe { std::mem::transmute::<usize, SigactionFn>(p) })
}

/// The action the tracer installs: every asynchronous signal blocked while it runs (a second
/// signal waits until the first has ended the process), on the alternate stack when the
/// thread has one.
fn our_action() -> libc::sigaction {
    // SAFETY: an all-zero sigaction is valid; the fields are then set.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = ours();
    act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART | SA_UNSUPPORTED;
    act.sa_mask = async_set();
    act
}

fn ours() -> usize {
    on_signal as *const () as usize
}

/// The first 64 bits of a signal set (the kernel's whole set).
fn mask64(set: &libc::sigset_t) -> u64 {
    // SAFETY: sigset_t is at least 8 bytes; any bit pattern is a valid u64.
    unsafe { std::ptr::read_unaligned(set as *const libc::sigset_t as *const u64) }
}

/// Stores what glibc's query writes: the handler, the flags, the restorer and the mask (the
/// kernel's 64 bits, the rest of the set cleared, as glibc leaves it).
///
/// # Safety
/// `old` must be valid for writes.
unsafe fn write_old(
    old: *mut libc::sigaction,
    handler: usize,
    flags: c_int,
    mask: u64,
    rest: usize,
) {
    // SAFETY: per the contract; the mask is written through a byte copy of 8 bytes.
    unsafe {
        (*old).sa_sigaction = handler;
        (*old).sa_flags = flags;
        (*old).sa_restorer = std::mem::transmute::<usize, Option<extern "C" fn()>>(rest);
        let set = &mut (*old).sa_mask as *mut libc::sigset_t;
        std::ptr::write_bytes(set, 0, 1);
        std::ptr::write_unaligned(set as *mut u64, mask);
    }
}

/// Every signal blocked on this thread and the hooks' lock held, until dropped.
struct Locked(libc::sigset_t);

impl Locked {
    fn new() -> Locked {
        // SAFETY: the sets are initialised before use; the old mask is saved for drop.
        let old = unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old);
            old
        };
        while LOCK
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            std::hint::spin_loop();
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
        }
        Locked(old)
    }
}

impl Drop for Locked {
    fn drop(&mut self) {
        LOCK.store(false, Ordering::Release);
        // SAFETY: restores the mask saved in new(), on the same thread; errno is untouched.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// Installs the tracer's handler for every [`FATAL`] signal whose disposition is `SIG_DFL`
/// (remembering what a query reported for it) and turns the hooks' virtualisation on. Called
/// once, when tracing starts with `DFTRACER_BIND_SIGNALS` on.
pub fn arm() {
    let Some(real) = real() else { return };
    let _l = Locked::new();
    // First: a hook that sees it waits for the lock, so no query ever sees our handler.
    ARMED.store(true, Ordering::Release);
    let act = our_action();
    for sig in FATAL {
        // SAFETY: zeroed sigactions are valid; real is sigaction.
        unsafe {
            let mut cur: libc::sigaction = std::mem::zeroed();
            if real(sig, std::ptr::null(), &mut cur) != 0 || cur.sa_sigaction != libc::SIG_DFL {
                continue;
            }
            let v = &VIRTUAL[sig as usize];
            v.flags.store(cur.sa_flags, Ordering::Relaxed);
            v.mask.store(mask64(&cur.sa_mask), Ordering::Relaxed);
            v.restorer
                .store(cur.sa_restorer.map_or(0, |f| f as usize), Ordering::Relaxed);
            if real(sig, &act, std::ptr::null_mut()) == 0 {
                learn(real, sig);
            }
        }
    }
}

/// Once our action is installed for `sig`: the restorer glibc gave it, and whether the kernel
/// cleared the unknown flag bit we passed.
///
/// # Safety
/// `real` is `sigaction`.
unsafe fn learn(real: SigactionFn, sig: c_int) {
    if RESTORER.load(Ordering::Relaxed) != 0 {
        return;
    }
    // SAFETY: a zeroed sigaction is valid; real is sigaction.
    unsafe {
        let mut q: libc::sigaction = std::mem::zeroed();
        if real(sig, std::ptr::null(), &mut q) == 0 {
            CLEARS_UNKNOWN.store(q.sa_flags & SA_UNSUPPORTED == 0, Ordering::Relaxed);
            RESTORER.store(q.sa_restorer.map_or(0, |f| f as usize), Ordering::Relaxed);
        }
    }
}

/// Whether the hooks virtualise `sig` (the disguise is on and `sig` is one of [`FATAL`]).
#[inline]
pub fn managed(sig: c_int) -> bool {
    ARMED.load(Ordering::Acquire) && is_fatal(sig)
}

/// A fork child: the hooks' lock may have been held by a thread that does not exist there.
pub fn after_fork_child() {
    LOCK.store(false, Ordering::Release);
}

/// `sigaction` as the program sees it untraced. `real` is the frontend's next definition.
///
/// # Safety
/// The arguments of a `sigaction` call (`act` NULL or readable, `old` NULL or writable).
pub unsafe fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
    real: SigactionFn,
) -> c_int {
    if !managed(sig) {
        // SAFETY: the caller's arguments, unchanged.
        return unsafe { real(sig, act, old) };
    }
    let _l = Locked::new();
    // SAFETY: a zeroed sigaction is valid; real is sigaction; act/old per the contract.
    unsafe {
        let mut cur: libc::sigaction = std::mem::zeroed();
        if real(sig, std::ptr::null(), &mut cur) != 0 {
            return -1;
        }
        let was_ours = cur.sa_sigaction == ours();
        let v = &VIRTUAL[sig as usize];
        // What the program would have been told, taken before any change.
        let (h, f, m, r) = if was_ours {
            (
                libc::SIG_DFL,
                v.flags.load(Ordering::Relaxed),
                v.mask.load(Ordering::Relaxed),
                v.restorer.load(Ordering::Relaxed),
            )
        } else {
            (
                cur.sa_sigaction,
                cur.sa_flags,
                mask64(&cur.sa_mask),
                cur.sa_restorer.map_or(0, |f| f as usize),
            )
        };
        if !act.is_null() {
            let a = &*act;
            if a.sa_sigaction == libc::SIG_DFL {
                if !was_ours {
                    if real(sig, &our_action(), std::ptr::null_mut()) != 0 {
                        return -1;
                    }
                    learn(real, sig);
                }
                // What the kernel would hold for this SIG_DFL.
                let mut flags = a.sa_flags | GLIBC_ADDS;
                if CLEARS_UNKNOWN.load(Ordering::Relaxed) {
                    flags &= UAPI_SA_FLAGS;
                }
                let mask = mask64(&a.sa_mask) & !(bit(libc::SIGKILL) | bit(libc::SIGSTOP));
                let restorer = if GLIBC_ADDS != 0 {
                    RESTORER.load(Ordering::Relaxed)
                } else {
                    a.sa_restorer.map_or(0, |f| f as usize)
                };
                v.flags.store(flags, Ordering::Relaxed);
                v.mask.store(mask, Ordering::Relaxed);
                v.restorer.store(restorer, Ordering::Relaxed);
            } else if real(sig, act, std::ptr::null_mut()) != 0 {
                return -1;
            }
        }
        if !old.is_null() {
            write_old(old, h, f, m, r);
        }
    }
    0
}

/// glibc's `bsd_signal` (`signal` and `ssignal`), `sysv_signal` (`sysv` true), built on
/// [`sigaction`] for a managed signal; `None` when `sig` is not managed (call the real one).
///
/// # Safety
/// As `signal`.
pub unsafe fn signal(
    sig: c_int,
    handler: libc::sighandler_t,
    sysv: bool,
    real: SigactionFn,
) -> Option<libc::sighandler_t> {
    if !managed(sig) {
        return None;
    }
    if handler == libc::SIG_ERR {
        crate::sys::set_errno(libc::EINVAL);
        return Some(libc::SIG_ERR);
    }
    // SAFETY: zeroed sigactions are valid; sigemptyset/sigaddset write into them.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        let mut old: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = handler;
        libc::sigemptyset(&mut act.sa_mask);
        if sysv {
            // SA_ONESHOT | SA_NOMASK | SA_INTERRUPT, without SA_RESTART.
            act.sa_flags = libc::SA_RESETHAND | libc::SA_NODEFER | 0x2000_0000;
        } else {
            libc::sigaddset(&mut act.sa_mask, sig);
            act.sa_flags = if INTR.load(Ordering::Relaxed) & bit(sig) != 0 {
                0
            } else {
                libc::SA_RESTART
            };
        }
        if sigaction(sig, &act, &mut old, real) < 0 {
            return Some(libc::SIG_ERR);
        }
        Some(old.sa_sigaction)
    }
}

/// `SIG_HOLD` (signal.h).
const SIG_HOLD: libc::sighandler_t = 2;

/// glibc's `sigset`, built on [`sigaction`]; `None` when `sig` is not managed.
///
/// # Safety
/// As `sigset`.
pub unsafe fn sigset(
    sig: c_int,
    disp: libc::sighandler_t,
    real: SigactionFn,
) -> Option<libc::sighandler_t> {
    if !managed(sig) {
        return None;
    }
    if disp == libc::SIG_ERR {
        crate::sys::set_errno(libc::EINVAL);
        return Some(libc::SIG_ERR);
    }
    // SAFETY: zeroed sets and actions are valid; the libc calls write into them.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut oset: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        let mut old: libc::sigaction = std::mem::zeroed();
        if disp == SIG_HOLD {
            if libc::sigprocmask(libc::SIG_BLOCK, &set, &mut oset) < 0 {
                return Some(libc::SIG_ERR);
            }
            if libc::sigismember(&oset, sig) == 1 {
                return Some(SIG_HOLD);
            }
            if sigaction(sig, std::ptr::null(), &mut old, real) < 0 {
                return Some(libc::SIG_ERR);
            }
            return Some(old.sa_sigaction);
        }
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = disp;
        libc::sigemptyset(&mut act.sa_mask);
        if sigaction(sig, &act, &mut old, real) < 0 {
            return Some(libc::SIG_ERR);
        }
        if libc::sigprocmask(libc::SIG_UNBLOCK, &set, &mut oset) < 0 {
            return Some(libc::SIG_ERR);
        }
        Some(if libc::sigismember(&oset, sig) == 1 {
            SIG_HOLD
        } else {
            old.sa_sigaction
        })
    }
}

/// glibc's `siginterrupt`, built on [`sigaction`]; `None` when `sig` is not managed. The
/// interrupt set is kept for every signal, so a later `signal()` emulation agrees with it.
///
/// # Safety
/// As `siginterrupt`.
pub unsafe fn siginterrupt(sig: c_int, interrupt: c_int, real: SigactionFn) -> Option<c_int> {
    let remember = || {
        if (1..=64).contains(&sig) {
            if interrupt != 0 {
                INTR.fetch_or(bit(sig), Ordering::Relaxed);
            } else {
                INTR.fetch_and(!bit(sig), Ordering::Relaxed);
            }
        }
    };
    if !managed(sig) {
        remember();
        return None;
    }
    // SAFETY: a zeroed sigaction is valid.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        if sigaction(sig, std::ptr::null(), &mut action, real) < 0 {
            return Some(-1);
        }
        remember();
        if interrupt != 0 {
            action.sa_flags &= !libc::SA_RESTART;
        } else {
            action.sa_flags |= libc::SA_RESTART;
        }
        if sigaction(sig, &action, std::ptr::null_mut(), real) < 0 {
            return Some(-1);
        }
    }
    Some(0)
}

/// The tracer's handler: finishes the trace, then does what `SIG_DFL` does. Async-signal-safe
/// (atomics, `sem_post`, `nanosleep`, `sigaction`, `pthread_sigmask`, `tgkill`, `write`).
extern "C" fn on_signal(sig: c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let saved = crate::sys::errno();
    let sync = is_sync(sig);
    let wait = if sync { FAULT_WAIT_MS } else { SIGNAL_WAIT_MS };
    if !crate::tracer::finish_for_signal(sig, wait) {
        late_warning(sig, wait);
    }
    // A fault the kernel raised for an instruction that faults again (SIGSEGV, SIGBUS,
    // SIGFPE, SIGILL; not SIGTRAP or SIGSYS, whose instruction is already behind): return
    // and let it happen again under SIG_DFL, for the same core dump. Anything sent (si_code
    // <= 0: kill, tgkill, raise, sigqueue) is raised again.
    // SAFETY: the kernel passes a valid siginfo with SA_SIGINFO (NULL only when someone
    // calls the handler directly).
    let kernel_fault = !info.is_null()
        && unsafe { (*info).si_code } > 0
        && matches!(
            sig,
            libc::SIGSEGV | libc::SIGBUS | libc::SIGFPE | libc::SIGILL
        );
    default_and_unblock(sig, !kernel_fault);
    crate::sys::set_errno(saved);
}

/// Sets `SIG_DFL` for `sig` with the real `sigaction`; with `raise`, unblocks it and sends it
/// to this thread: the default action happens before this returns.
fn default_and_unblock(sig: c_int, raise: bool) {
    // SAFETY: a zeroed sigaction is SIG_DFL with an empty mask and no flags; the sets are
    // initialised before use; tgkill targets this thread.
    unsafe {
        let dfl: libc::sigaction = std::mem::zeroed();
        match real() {
            Some(real) => {
                real(sig, &dfl, std::ptr::null_mut());
            }
            None => {
                libc::syscall(libc::SYS_rt_sigaction, sig, &dfl, 0usize, 8usize);
            }
        }
        if !raise {
            return;
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::syscall(
            libc::SYS_tgkill,
            libc::getpid(),
            libc::syscall(libc::SYS_gettid),
            sig,
        );
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// One line on stderr without allocating: the trace could not be finished in time.
fn late_warning(sig: c_int, ms: u64) {
    let mut buf = [0u8; 160];
    let mut n = 0;
    let mut put = |b: &[u8]| {
        let k = b.len().min(buf.len() - n);
        buf[n..n + k].copy_from_slice(&b[..k]);
        n += k;
    };
    let mut num = [0u8; 20];
    let digits = |v: u64, num: &mut [u8; 20]| -> usize {
        let mut v = v;
        let mut i = num.len();
        loop {
            i -= 1;
            num[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        i
    };
    put(b"[DFTRACER WARN] pid ");
    let i = digits(crate::sys::getpid() as u64, &mut num);
    put(&num[i..]);
    put(b": signal ");
    let i = digits(sig as u64, &mut num);
    put(&num[i..]);
    put(b" ends the process; its trace was not finished within ");
    let i = digits(ms, &mut num);
    put(&num[i..]);
    put(b" ms (the file keeps its written members, without `end`)\n");
    // SAFETY: the buffer is valid for n bytes; a failed write to stderr is ignored.
    unsafe { libc::write(2, buf.as_ptr().cast(), n) };
}
