//! `libdftracer_preload.so`: POSIX and stdio I/O tracing by `LD_PRELOAD`.
//!
//! ```text
//! LD_PRELOAD=/path/libdftracer_preload.so DFTRACER_ENABLE=1 DFTRACER_INIT=PRELOAD \
//!   DFTRACER_DATA_DIR=/scratch/data DFTRACER_LOG_FILE=/tmp/run/trace ./train
//! # -> /tmp/run/trace-<hash>-preload.pfw.gz (one file per process; fork children: -fork)
//! ```
//!
//! Contract:
//! - **Activation**: the library constructor starts the core only when `DFTRACER_ENABLE` is true
//!   and `DFTRACER_INIT=PRELOAD`. Otherwise every interposed function is a plain forward: one
//!   load of the resolved libc pointer and one load of the mode word.
//! - **Shims are thin**: each `extern "C"` function in `hooks` forwards to the next definition
//!   (resolved once with `dlsym(RTLD_NEXT)`, [`real`]), and records an event only for traced
//!   files (`DFTRACER_DATA_DIR`, policy in `dftracer_core::filter`), traced fds ([`table`]) and
//!   traced `FILE*`s. Return values are always the real call's; `errno` is saved right after
//!   the real call and restored after recording.
//! - **No recursion**: a thread-local guard ([`enter`]) makes I/O done while recording, and all
//!   I/O of the tracer's own threads and sections (`dftracer_core::is_internal`), pass straight
//!   through. Trace files are therefore never traced (they are also excluded by name).
//! - **No panic crosses the C boundary**: all recording runs inside [`guarded`]
//!   (`catch_unwind`); a failure loses an event, never the program's call.
//!
//! The unsafe surface is this crate's reason to exist: `hooks` (the C ABI), [`real`] (symbol
//! resolution) and [`table`] (lock-free tables); each unsafe block states why it is sound.
#![deny(unsafe_code)]
// The unit-test build leaves out the C entry points (they would interpose the test harness).
#![cfg_attr(test, allow(dead_code))]

#[cfg(not(test))]
mod hooks;
pub mod real;
pub mod table;

use std::cell::Cell;
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};
use std::sync::OnceLock;

use dftracer_core::filter::DataDirs;
use dftracer_core::{Arg, Layer};

/// `MODE` bits, set once by the constructor after the core started.
const POSIX: u8 = 1;
const STDIO: u8 = 2;
const METADATA: u8 = 4;
static MODE: AtomicU8 = AtomicU8::new(0);
/// Which paths are traced; set before `MODE`.
static FILTER: OnceLock<DataDirs> = OnceLock::new();
/// The pid that owns the tracer state in this address space. A `vfork` child (which shares
/// the parent's memory and runs no atfork handler) sees a different `getpid()` and must not
/// flush or finalize the parent's tracer from `exec*`/`_exit`.
static OWNER_PID: AtomicI32 = AtomicI32::new(0);

pub(crate) static FDS: table::FdTable = table::FdTable::new();
pub(crate) static FILES: table::FileTable = table::FileTable::new();

/// POSIX calls are traced now (mode set and the core still running).
#[inline(always)]
pub(crate) fn posix_on() -> bool {
    MODE.load(Ordering::Relaxed) & POSIX != 0 && dftracer_core::is_enabled()
}

/// Stdio calls are traced now.
#[inline(always)]
pub(crate) fn stdio_on() -> bool {
    MODE.load(Ordering::Relaxed) & STDIO != 0 && dftracer_core::is_enabled()
}

pub(crate) fn filter() -> Option<&'static DataDirs> {
    FILTER.get()
}

thread_local! {
    /// This thread is inside a hook's recording section.
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// Proof that this thread may record: not already recording, not a tracer thread or section,
/// TLS alive. Dropping it ends the section.
pub(crate) struct Busy(());

/// Longest normalised path traced; longer ones are passed through untraced.
pub const PATH_MAX: usize = 4096;

thread_local! {
    /// Path buffers of this thread's recording section (a 4 KiB stack array would have to be
    /// zeroed on every call: that memset was most of the cost of an untraced `open`).
    static SCRATCH: std::cell::UnsafeCell<[[u8; PATH_MAX]; 2]> =
        const { std::cell::UnsafeCell::new([[0; PATH_MAX]; 2]) };
}

impl Busy {
    /// This thread's two path buffers, exclusively borrowed while the section lasts (`None`
    /// when thread-local storage is already gone).
    #[allow(unsafe_code)]
    pub(crate) fn scratch(&mut self) -> Option<&mut [[u8; PATH_MAX]; 2]> {
        let p = SCRATCH.try_with(|c| c.get()).ok()?;
        // SAFETY: a `Busy` exists at most once per thread at a time (BUSY flag), and only code
        // holding it mutably reaches the buffers, so this is the only live reference.
        Some(unsafe { &mut *p })
    }
}

/// Enters a recording section, or `None` when the call must pass straight through.
#[inline]
pub(crate) fn enter() -> Option<Busy> {
    if dftracer_core::is_internal() {
        return None;
    }
    match BUSY.try_with(|b| b.replace(true)) {
        Ok(false) => Some(Busy(())),
        _ => None,
    }
}

/// True when this thread is inside a recording section (a signal handler that interrupted a
/// hook, for instance): the tracer's locks may be held here.
pub(crate) fn busy_here() -> bool {
    BUSY.try_with(|b| b.get()).unwrap_or(true)
}

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = BUSY.try_with(|b| b.set(false));
    }
}

/// Runs recording work so that a panic can never unwind into C. The program's call has
/// already been made; at worst its event is lost.
#[inline]
pub(crate) fn guarded(f: impl FnOnce()) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
}

/// Like [`guarded`] for work that produces a value; `default` if it panicked.
#[inline]
pub(crate) fn guarded_or<R>(default: R, f: impl FnOnce() -> R) -> R {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(default)
}

/// Records one LIBC_IO event from `t0` to `t1` (args dropped when metadata is off).
#[inline]
pub(crate) fn record(cat: &[u8], name: &[u8], t0: u64, t1: u64, args: &[Arg]) {
    let args = if MODE.load(Ordering::Relaxed) & METADATA != 0 {
        args
    } else {
        &[]
    };
    dftracer_core::complete(Layer::LibcIo, name, cat, t0, t1.saturating_sub(t0), args);
}

/// Records one LIBC_IO event of a fixed shape (values and file left out when metadata is off).
/// `file` comes from a table entry (or a pin) that keeps its slot pinned meanwhile.
#[inline]
pub(crate) fn record_static(
    schema: &'static dftracer_core::Schema,
    t0: u64,
    t1: u64,
    vals: &[u64],
    file: &dftracer_core::FileHandle,
) {
    let (vals, file) = if MODE.load(Ordering::Relaxed) & METADATA != 0 {
        (vals, Some(*file))
    } else {
        (&[][..], None)
    };
    dftracer_core::complete_static(schema, t0, t1.saturating_sub(t0), vals, file);
}

#[inline(always)]
pub(crate) fn now() -> u64 {
    dftracer_core::now()
}

#[inline(always)]
pub(crate) fn errno() -> i32 {
    real::errno()
}

/// Restores the `errno` seen at creation when dropped: taken right after the real call, so
/// that nothing done while recording can change what the program sees.
pub(crate) struct SavedErrno(i32);

impl SavedErrno {
    #[inline(always)]
    pub(crate) fn new() -> Self {
        SavedErrno(errno())
    }
}

impl Drop for SavedErrno {
    #[inline(always)]
    fn drop(&mut self) {
        real::set_errno(self.0);
    }
}

/// The pid owning the tracer (see [`OWNER_PID`]).
pub(crate) fn owner_pid() -> i32 {
    OWNER_PID.load(Ordering::Relaxed)
}

/// Starts tracing if the environment asks for the preload (called once, from the constructor).
pub(crate) fn start() {
    OWNER_PID.store(real::getpid(), Ordering::Relaxed);
    real::at_fork_child(after_fork_child);
    let cfg = dftracer_core::Config::from_env();
    if !cfg.enable || cfg.init != dftracer_core::InitMode::Preload {
        return;
    }
    let cwd = dftracer_core::cwd();
    let _ = FILTER.set(DataDirs::parse(cfg.data_dirs.as_deref(), cwd.as_bytes()));
    let mut mode = 0;
    if cfg.io && cfg.posix {
        mode |= POSIX;
    }
    if cfg.io && cfg.stdio {
        mode |= STDIO;
    }
    if cfg.metadata {
        mode |= METADATA;
    }
    // The core reads /proc and the cwd while starting: keep that out of the trace.
    let _busy = enter();
    match dftracer_core::init(cfg, dftracer_core::Origin::Preload, None) {
        Ok(()) => {
            MODE.store(mode, Ordering::Release);
            dftracer_core::set_bind(mode & (POSIX | STDIO) != 0);
        }
        Err(dftracer_core::Error::Disabled) => {}
        Err(e) => dftracer_core::eprint_line(&format!("[DFTRACER ERROR] preload: {e}")),
    }
}

extern "C" fn after_fork_child() {
    OWNER_PID.store(real::getpid(), Ordering::Relaxed);
}

/// Exported so that other frontends in the same process (the Python module under
/// `LD_PRELOAD`) can tell that this library owns a running tracer and leave I/O to it.
#[cfg(not(test))]
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn dftracer_preload_active() -> i32 {
    (MODE.load(Ordering::Relaxed) != 0 && dftracer_core::is_running()) as i32
}

#[cfg(not(test))]
extern "C" fn constructor() {
    guarded(start);
}

/// Runs `constructor` when the library is loaded (before `main`).
#[cfg(not(test))]
#[allow(unsafe_code)]
#[used]
#[link_section = ".init_array"]
static CONSTRUCTOR: extern "C" fn() = constructor;
