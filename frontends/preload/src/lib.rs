//! `libdftracer_preload.so` / `libdftracer_core.so` / `libdftracer_core.so.4.3.0` (one file,
//! SONAME `libdftracer_core.so.4.3.0`, the reference's): POSIX and stdio I/O tracing by
//! `LD_PRELOAD`, and the C/C++ API of `include/dftracer/dftracer.h` (module `capi`:
//! `initialize_main`, regions, ...; module `cxx`: the C++ class `DFTracer`'s exported members
//! under the reference's mangled names) for programs linked with `-ldftracer_core`, ours or
//! the reference's. Both paths start the same core (`start_tracing`),
//! so a linked program that is also preloaded has one tracer and one trace file.
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
//!   load of the resolved libc pointer and one load of the mode word (an fd call: of the fd
//!   table's chunk pointer, null when tracing never started).
//! - **Shims are thin**: each `extern "C"` function in `hooks` forwards to the next definition
//!   (resolved once with `dlsym(RTLD_NEXT)`, [`real`](mod@real)), and records an event only for traced
//!   files (`DFTRACER_DATA_DIR`, policy in `dftracer_core::filter`), traced fds ([`table`]) and
//!   traced `FILE*`s. Return values are always the real call's; `errno` is saved right after
//!   the real call and restored after recording.
//! - **No recursion**: a thread-local guard ([`enter`]) makes I/O done while recording, and all
//!   I/O of the tracer's own threads and sections (`dftracer_core::frontend::is_internal`), pass straight
//!   through. Trace files are therefore never traced (they are also excluded by name).
//! - **No panic crosses the C boundary**: all recording runs inside [`guarded`]
//!   (`catch_unwind`); a failure loses an event, never the program's call.
//!
//! - **Without `LD_PRELOAD`** ([`bind`]): when the library is `dlopen`ed (Python/C API) or
//!   linked, `dftracer_bind_io()` rewrites the GOT slots of the loaded objects so that their
//!   calls reach the same hooks, and wraps `dlopen` so that later objects are bound too.
//!
//! The unsafe surface is this crate's reason to exist: `hooks` and `capi` (the C ABI), [`real`](mod@real)
//! (symbol resolution), [`bind`] (GOT rewriting), [`table`] and [`region`] (lock-free tables and
//! region cells); each unsafe block states why it is sound.
#![deny(unsafe_code)]
// The unit-test build leaves out the C entry points (they would interpose the test harness).
#![cfg_attr(test, allow(dead_code))]

mod api;
pub mod bind;
#[cfg(not(test))]
mod capi;
#[cfg(not(test))]
mod cxx;
#[cfg(not(test))]
mod frame;
mod hooks;
pub mod real;
pub mod region;
pub mod sites;
pub mod table;

/// Every allocation of this library's code (and of the Python module that links it) comes
/// from the tracer's own pages, never from the program's `malloc` heap: see
/// `dftracer_core::frontend::TracerHeap`.
#[global_allocator]
static HEAP: dftracer_core::frontend::TracerHeap = dftracer_core::frontend::TracerHeap;

use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU8, Ordering};

use dftracer_core::frontend::DataDirs;
use dftracer_core::{Arg, Layer};

/// `MODE` bits, set once by the constructor after the core started.
const POSIX: u8 = 1;
const STDIO: u8 = 2;
const METADATA: u8 = 4;
const HDF5: u8 = 8;
const MPIIO: u8 = 16;
static MODE: AtomicU8 = AtomicU8::new(0);
/// Which paths are traced; set before `MODE`. Replaced (never freed: shims may hold the old
/// one) when a late `initialize(data_dirs=...)` names other directories.
static FILTER: AtomicPtr<DataDirs> = AtomicPtr::new(std::ptr::null_mut());
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

/// HDF5 calls are traced now (mode set and the core still running). The HDF5 hooks are bound
/// only once a libhdf5 is loaded ([`bind`]), so a process without one never reads this.
#[inline(always)]
pub(crate) fn hdf5_on() -> bool {
    MODE.load(Ordering::Relaxed) & HDF5 != 0 && dftracer_core::is_enabled()
}

/// HDF5 calls are to be traced (`DFTRACER_DISABLE_HDF5` and `_IO` not set): bind their hooks
/// when a libhdf5 turns up.
#[inline]
pub(crate) fn hdf5_wanted() -> bool {
    MODE.load(Ordering::Relaxed) & HDF5 != 0
}

/// MPI-IO calls are traced now (bound only once an MPI library is loaded, as HDF5's).
#[inline(always)]
pub(crate) fn mpiio_on() -> bool {
    MODE.load(Ordering::Relaxed) & MPIIO != 0 && dftracer_core::is_enabled()
}

/// MPI-IO calls are to be traced (`DFTRACER_DISABLE_MPIIO` and `_IO` not set).
#[inline]
pub(crate) fn mpiio_wanted() -> bool {
    MODE.load(Ordering::Relaxed) & MPIIO != 0
}

/// Event args are written (`DFTRACER_INC_METADATA`).
#[inline]
pub(crate) fn metadata_on() -> bool {
    MODE.load(Ordering::Relaxed) & METADATA != 0
}

/// Stdio calls are traced now.
#[inline(always)]
pub(crate) fn stdio_on() -> bool {
    MODE.load(Ordering::Relaxed) & STDIO != 0 && dftracer_core::is_enabled()
}

#[inline]
#[allow(unsafe_code)]
pub(crate) fn filter() -> Option<&'static DataDirs> {
    // SAFETY: FILTER is null or a leaked Box (published with Release after it was built),
    // never freed: a `'static` reference.
    unsafe { FILTER.load(Ordering::Acquire).as_ref() }
}

/// Publishes `dirs` as the filter: only when none is set (`replace` false; returns whether it
/// was), or in place of the current one (`replace` true; the old one stays allocated).
#[allow(unsafe_code)]
fn set_filter(dirs: DataDirs, replace: bool) -> bool {
    let new = Box::into_raw(Box::new(dirs));
    if replace {
        FILTER.store(new, Ordering::Release);
        return true;
    }
    match FILTER.compare_exchange(
        std::ptr::null_mut(),
        new,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => true,
        Err(_) => {
            // SAFETY: `new` was never published; this is its only owner.
            drop(unsafe { Box::from_raw(new) });
            false
        }
    }
}

/// Proof that this thread may record: not already recording, not a tracer thread or section,
/// TLS alive. Dropping it ends the section. The section flag lives in the core's per-thread
/// state ([`dftracer_core::frontend::Hook`]), with everything else the hot path needs: one
/// thread-local access per traced call.
pub(crate) struct Busy(dftracer_core::frontend::Hook);

/// Longest normalised path traced; longer ones are passed through untraced.
pub const PATH_MAX: usize = 4096;

/// A thread's scratch space: two path buffers, and the last `open`'s resolution.
pub(crate) struct Scratch {
    bufs: [[u8; PATH_MAX]; 2],
    last: hooks::resolved::Last,
}

thread_local! {
    /// Path buffers of this thread's recording section (a 4 KiB stack array would have to be
    /// zeroed on every call: that memset was most of the cost of an untraced `open`).
    static SCRATCH: std::cell::UnsafeCell<Scratch> = const {
        std::cell::UnsafeCell::new(Scratch {
            bufs: [[0; PATH_MAX]; 2],
            last: hooks::resolved::Last::EMPTY,
        })
    };
}

/// [`SCRATCH`]'s offset from the thread pointer when this library was loaded with the program
/// (its thread-locals are then in the static TLS block, as the core's are: see
/// `dftracer_core::frontend::tls_is_static`), else 0.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
static SCRATCH_OFFSET: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

/// Measures [`SCRATCH_OFFSET`] (the constructor, loaded before libc).
#[cfg(not(test))]
fn scratch_is_static() {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    if let Ok(p) = SCRATCH.try_with(|c| c.get() as usize) {
        let off = p.wrapping_sub(real::thread_pointer()) as isize;
        SCRATCH_OFFSET.store(off, Ordering::Relaxed);
    }
}

/// This thread's [`SCRATCH`], by address: from the thread pointer when its offset is known
/// (no `__tls_get_addr` call), else through the thread-local's own access.
#[inline(always)]
fn scratch_ptr() -> Option<*mut Scratch> {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let off = SCRATCH_OFFSET.load(Ordering::Relaxed);
        if off != 0 {
            return Some(real::thread_pointer().wrapping_add_signed(off) as *mut _);
        }
    }
    SCRATCH.try_with(|c| c.get()).ok()
}

impl Busy {
    /// This thread's two path buffers, exclusively borrowed while the section lasts (`None`
    /// when thread-local storage is already gone).
    #[allow(unsafe_code)]
    pub(crate) fn scratch(&mut self) -> Option<&mut [[u8; PATH_MAX]; 2]> {
        Some(&mut self.scratch_all()?.bufs)
    }

    /// This thread's whole [`Scratch`], exclusively borrowed as [`Busy::scratch`].
    #[allow(unsafe_code)]
    #[inline(always)]
    fn scratch_all(&mut self) -> Option<&mut Scratch> {
        let p = scratch_ptr()?;
        // SAFETY: a `Busy` exists at most once per thread at a time (the core's section flag), and only code
        // holding it mutably reaches the buffers, so this is the only live reference.
        Some(unsafe { &mut *p })
    }

    /// The path buffers and the last `open`'s resolution ([`hooks::resolved`]), with the
    /// section itself for recording while they are borrowed ([`Busy::record_static`]).
    #[inline(always)]
    pub(crate) fn scratch_last_and_self(
        &mut self,
    ) -> Option<(&mut [[u8; PATH_MAX]; 2], &mut hooks::resolved::Last, &Busy)> {
        let s: *mut Scratch = self.scratch_all()?;
        // SAFETY: the scratch space is thread-local storage, not part of `self`: the exclusive
        // borrow of it (see `scratch_all`) and a shared one of `self` do not alias; its two
        // fields are disjoint.
        #[allow(unsafe_code)]
        let s = unsafe { &mut *s };
        Some((&mut s.bufs, &mut s.last, &*self))
    }
}

/// Enters a recording section, or `None` when the call must pass straight through.
#[inline]
pub(crate) fn enter() -> Option<Busy> {
    dftracer_core::frontend::enter_hook().map(Busy)
}

/// True when this thread is inside a recording section (a signal handler that interrupted a
/// hook, for instance): the tracer's locks may be held here.
pub(crate) fn busy_here() -> bool {
    dftracer_core::frontend::hook_busy()
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

/// Records one LIBC_IO event from [`ticks`] `t0` to `t1` (args dropped when metadata is
/// off): the two raw readings are converted once, here, into the trace's unit.
#[inline]
pub(crate) fn record(cat: &[u8], name: &[u8], t0: u64, t1: u64, args: &[Arg]) {
    let args = if metadata_on() { args } else { &[] };
    let (ts, dur) = ticks_span(t0, t1);
    dftracer_core::complete(Layer::LibcIo, name, cat, ts, dur, args);
}

/// Records one LIBC_IO event of a fixed shape from [`ticks`] `t0` to `t1` (values and file
/// left out when metadata is off; the writer converts the times). `file` comes from a table
/// entry (or a pin) that keeps its slot pinned meanwhile.
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
    dftracer_core::frontend::complete_ticks_inline(schema, t0, t1, vals, file);
}

impl Busy {
    /// As [`record_static`], on this section's thread state (no thread-local lookup), for an
    /// event from [`ticks`] `t0` to `t1` (the writer converts them).
    /// Inlined into each hook, where the schema and the number of values are constants: the
    /// record is a handful of stores (shared, it copied the values with a `memcpy` call).
    ///
    /// Leaves `errno` as it was (the clock reads and this record are all a hook does after
    /// its real call: `on_fd!` saves no `errno`): the record's hot path is loads, stores and
    /// no call; its cold rest keeps `errno` itself, unwinding included.
    #[inline(always)]
    pub(crate) fn record_static<V: dftracer_core::frontend::Vals>(
        &self,
        schema: &'static dftracer_core::Schema,
        t0: u64,
        t1: u64,
        vals: V,
        file: &dftracer_core::FileHandle,
    ) {
        // Two calls, each with a constant number of values (one `(vals, file)` pair chosen
        // first would leave the count unknown, and the values copied by a `memcpy` call).
        if MODE.load(Ordering::Relaxed) & METADATA != 0 {
            self.0.complete_ticks(schema, t0, t1, vals, Some(*file));
        } else {
            self.0.complete_ticks(schema, t0, t1, [], None);
        }
    }
}

/// A raw clock reading: every hook times its call with two of these, which [`record`],
/// [`record_static`] and [`Busy::record_static`] take (or [`ticks_span`] converts), cheaper
/// than converting each reading on the calling thread.
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    dftracer_core::frontend::ticks()
}

/// [`ticks`] at the end of a call that began at `t0` (see `dftracer_core::frontend::ticks_after`).
#[inline(always)]
pub(crate) fn ticks_after(t0: u64) -> u64 {
    dftracer_core::frontend::ticks_after(t0)
}

/// The (timestamp, duration) in the trace's unit of an event from [`ticks`] `t0` to `t1`.
pub(crate) fn ticks_span(t0: u64, t1: u64) -> (u64, u64) {
    dftracer_core::frontend::ticks_span(t0, t1)
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
    // PRELOAD means LD_PRELOAD (or a program linked with the library), or a `dlopen` of the
    // library by its preload name, as the reference's libdftracer_preload.so starts then.
    // Loaded later as libdftracer_core.so (the Python module, ctypes of the core), it leaves
    // starting, and I/O, to the API, as the reference's core does.
    if !real::loaded_before_libc() && !real::loaded_as_preload() {
        return;
    }
    match start_tracing(cfg, dftracer_core::Origin::Preload, None, true) {
        Ok(()) => STARTED_BY_CONSTRUCTOR.store(true, Ordering::Relaxed),
        Err(dftracer_core::Error::Disabled) => {}
        Err(e) => dftracer_core::frontend::eprint_line(&format!("[DFTRACER ERROR] preload: {e}")),
    }
}

/// Starts the core and, with `io`, this library's I/O interception: the one start path of the
/// preload constructor and of the C API's `initialize_main` / `initialize_no_bind`.
pub(crate) fn start_tracing(
    cfg: dftracer_core::Config,
    origin: dftracer_core::Origin,
    api_log_file: Option<&str>,
    io: bool,
) -> Result<(), dftracer_core::Error> {
    let io_cfg = io.then(|| cfg.clone());
    if let Some(f) = real::sigaction() {
        dftracer_core::frontend::signals::set_real(f);
    }
    {
        // The core reads /proc and the cwd while starting: keep that out of the trace.
        let _busy = enter();
        dftracer_core::init(cfg, origin, api_log_file)?;
    }
    if let Some(c) = io_cfg {
        bind_io(&c);
    }
    Ok(())
}

/// `initialize_*` found the tracer running: started by the preload constructor, or implicitly
/// by an earlier event (a decorated `__init__` run before DLIO calls `initialize_log`). One
/// trace either way, and the late call wins: `log_file` renames the trace, and data dirs
/// given by the call (`arg_dirs`; `cfg.data_dirs` is them joined with the environment's)
/// replace the filter in force, or bind I/O now when nothing did (`io`: the caller may bind).
/// One stderr line says what changed.
pub(crate) fn join_running(
    cfg: dftracer_core::Config,
    log_file: Option<&str>,
    arg_dirs: Option<&str>,
    io: bool,
) {
    dftracer_core::frontend::claim_for_app();
    let mut changed = Vec::new();
    if let Some(path) = log_file {
        let before = dftracer_core::prefix();
        if before.as_deref() != Some(&dftracer_core::frontend::prefix_for(path)) {
            match dftracer_core::frontend::retarget(path) {
                Ok(prefix) => changed.push(format!("log file prefix {prefix}")),
                Err(e) => dftracer_core::frontend::eprint_line(&format!("[DFTRACER ERROR] {e}")),
            }
        }
    }
    let arg_dirs = arg_dirs.filter(|d| !d.is_empty());
    if io && crate::bind_io(&cfg) {
        // The first binding: its data dirs are the ones children inherit.
        dftracer_core::frontend::set_data_dirs(cfg.data_dirs.as_deref());
        if let Some(d) = cfg.data_dirs.as_deref() {
            changed.push(format!("I/O traced under {d}"));
        }
    } else if let (Some(_), Some(dirs)) = (arg_dirs, cfg.data_dirs.as_deref()) {
        let env = dftracer_core::frontend::child_env();
        let now = env.iter().find(|(k, _)| *k == "DFTRACER_DATA_DIR");
        // The call's dirs are joined with the environment's: the same dir twice is one.
        let dirs = &unique_dirs(dirs);
        let same = now.is_some_and(|(_, v)| unique_dirs(v) == *dirs);
        if filter().is_some() && !same {
            let cwd = dftracer_core::frontend::cwd();
            set_filter(DataDirs::parse(Some(dirs), cwd.as_bytes()), true);
            dftracer_core::frontend::set_data_dirs(Some(dirs));
            let was = now.map_or("every file", |(_, v)| v.as_str());
            changed.push(format!("I/O traced under {dirs} (was {was})"));
        }
    }
    if !changed.is_empty() && cfg.logs("WARN") {
        dftracer_core::frontend::eprint_line(&format!(
            "[DFTRACER INFO] initialize: tracing had started before it (an earlier event{}); \
             applied: {}",
            if origin_was_preload() {
                " or LD_PRELOAD"
            } else {
                ""
            },
            changed.join(", ")
        ));
    }
}

/// A `:`-separated list of directories without empty or repeated entries, in order.
fn unique_dirs(list: &str) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for d in list.split(':').filter(|d| !d.is_empty()) {
        if !seen.contains(&d) {
            seen.push(d);
        }
    }
    seen.join(":")
}

/// Whether this library's constructor started the tracer (interception on from the start).
fn origin_was_preload() -> bool {
    STARTED_BY_CONSTRUCTOR.load(Ordering::Relaxed)
}

/// Set when the preload constructor started the core.
static STARTED_BY_CONSTRUCTOR: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Turns on the interception of POSIX/stdio calls by this library's exported symbols for a
/// running core: the DATA_DIR filter first, then the mode bits that the shims read. Returns
/// false when interception was already on (the first filter stays: it cannot change under
/// concurrent shims).
pub(crate) fn bind_io(cfg: &dftracer_core::Config) -> bool {
    let cwd = dftracer_core::frontend::cwd();
    let fresh = set_filter(
        DataDirs::parse(cfg.data_dirs.as_deref(), cwd.as_bytes()),
        false,
    );
    let mut mode = 0;
    if cfg.io && cfg.posix {
        mode |= POSIX;
    }
    if cfg.io && cfg.stdio {
        mode |= STDIO;
    }
    if cfg.io && cfg.hdf5 {
        mode |= HDF5;
    }
    if cfg.io && cfg.mpiio {
        mode |= MPIIO;
    }
    if cfg.metadata {
        mode |= METADATA;
    }
    if fresh {
        bind::HDF5_EXPLICIT.store(
            std::env::var_os("DFTRACER_DISABLE_HDF5").is_some(),
            Ordering::Relaxed,
        );
        bind::MPIIO_EXPLICIT.store(
            std::env::var_os("DFTRACER_DISABLE_MPIIO").is_some(),
            Ordering::Relaxed,
        );
        MODE.store(mode, Ordering::Release);
        // fds already open at start (a shell's `> data/out`) on traced files.
        #[cfg(not(test))]
        if mode & POSIX != 0 {
            guarded(hooks::inherit::adopt_inherited);
        }
    }
    let bound = MODE.load(Ordering::Relaxed) & (POSIX | STDIO | HDF5 | MPIIO) != 0;
    dftracer_core::frontend::set_bind(bound);
    // Preloaded or linked, this library's exported hooks already come before libc's in every
    // lookup. Loaded by dlopen (the Python module, ctypes), they must be bound in process.
    // The HDF5 hooks are exported by no one: they are bound in process in both cases, in the
    // objects that import them from a libhdf5 (loaded now or later: the `dlopen` wrapper).
    #[cfg(not(test))]
    if bound && !real::loaded_before_libc() {
        bind::bind_io_in_process();
    } else if fresh && mode & (HDF5 | MPIIO) != 0 {
        bind::bind_layers_preloaded();
    }
    fresh
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
    real::measure_errno();
    // Loaded with the program, this library's thread-locals are in the static TLS block:
    // every hook then finds the core's thread state without a `__tls_get_addr` call.
    // Only on a positive answer from the link map: a `dlopen`ed library's thread-locals are
    // allocated per thread, anywhere, and a wrong yes here would be unsound.
    if real::loaded_before_libc_known() == Some(true) {
        dftracer_core::frontend::tls_is_static();
        scratch_is_static();
    }
    guarded(start);
}

/// Runs `constructor` when the library is loaded (before `main`).
#[cfg(not(test))]
#[allow(unsafe_code)]
#[used]
#[link_section = ".init_array"]
static CONSTRUCTOR: extern "C" fn() = constructor;
