//! The process-wide tracer: thread rings, the writer thread, stats and lifecycle.
//!
//! Hot path ([`record`](producer::record)): one relaxed load of `STATE` (enabled bit + fork generation), one
//! thread-local read, one ring push (no lock, no allocation, no syscall). A ring more than
//! half full posts the writer's semaphore once (amortised). A full ring is drained by its own
//! producer under the writer lock (bounded work, nothing dropped) unless drop mode is on.
//!
//! Off the hot path, the writer thread wakes every `flush_interval_ms` (or when posted),
//! drains every ring, assigns ids in file order, encodes JSON lines, and cuts a gzip member
//! when `write_buffer_size` bytes are pending or the interval has passed.
//!
//! Lifecycle: [`init`] resolves names and facts; the file is created lazily at the first
//! member. [`finalize`] runs from the API, `atexit`, the frontends' `_exit` hooks and (via the
//! writer thread) from SIGTERM/SIGINT/SIGHUP handlers. A fork child gets a fresh state
//! (`-fork` file, ids from 1, its own HH/FH/SH records, the parent's buffered events
//! discarded) through a `pthread_atfork` child handler.
#![allow(unsafe_code)]

use crate::aggregate::Aggregator;
use crate::config::{self, Config, Selection};
use crate::format::Encoder;
use crate::gzip::GzipWriter;
use crate::hash::{hash16, hash_str};
use crate::ring::Ring;
use crate::signals;
use crate::sink::{self, Origin};
use crate::sys;
use parking_lot::Mutex;
use std::fmt;
use std::ptr;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering,
};
use std::sync::{Arc, Once};

mod lifecycle;
mod output;
mod producer;
mod writer;

pub(crate) use lifecycle::finish_for_signal;
pub use lifecycle::{
    before_self_signal, child_env, claim_for_app, export_env_at_init, finalize, init, retarget,
    set_data_dirs,
};
use output::Output;
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub use producer::thread_pointer;
use producer::LOCAL;
pub use producer::{
    complete, complete_static, complete_strs, complete_ticks, complete_ticks_inline, counter,
    end_ticks, enter_hook, hook_busy, is_enabled, metadata, now, ticks, ticks_in_unit, ticks_span,
    tls_is_static, Hook, Vals,
};
pub use writer::flush;
use writer::Writer;

/// Bit 0: tracing enabled. Bits 1..: generation, bumped in each fork child so that threads
/// re-attach their ring to the child's state.
pub static STATE: crate::sync::Padded<AtomicU64> = crate::sync::Padded(AtomicU64::new(0));
/// The live state; never freed (a fork child leaks its parent's copy).
static SHARED: AtomicPtr<Shared> = AtomicPtr::new(ptr::null_mut());
/// Lifecycle phase.
static PHASE: AtomicU8 = AtomicU8::new(PHASE_NONE);
const PHASE_NONE: u8 = 0;
const PHASE_INIT: u8 = 1;
const PHASE_RUNNING: u8 = 2;
const PHASE_DONE: u8 = 3;
/// `init` failed (the prefix cannot hold trace files): tracing stays off; only an explicit
/// `init` with a log file path tries again.
const PHASE_FAILED: u8 = 4;
/// Time unit for `now()` without touching SHARED.
static UNIT: crate::sync::Padded<AtomicU8> = crate::sync::Padded(AtomicU8::new(1));
static HOOKS: Once = Once::new();
/// A fork child's state: `FORK_PENDING` from the atfork handler until the first use builds
/// it (`FORK_BUILDING` meanwhile).
static FORKED: AtomicU8 = AtomicU8::new(FORK_NONE);
const FORK_NONE: u8 = 0;
const FORK_PENDING: u8 = 1;
const FORK_BUILDING: u8 = 2;
/// The forking thread's ring (one strong count) and tid, for the child's rebuild.
static FORK_RING: AtomicPtr<Ring> = AtomicPtr::new(ptr::null_mut());
static FORK_TID: AtomicU32 = AtomicU32::new(0);
/// Set when `finish` completed: the trace file is whole.
static FINISHED: AtomicBool = AtomicBool::new(false);
/// Names given to [`mark_used`] before the tracer started (a module-level integration object
/// made at import, before `initialize`): the start takes them over.
static EARLY_USED: Mutex<Vec<String>> = parking_lot::const_mutex(Vec::new());
/// Threads named ([`name_thread`]) before the tracer started.
static EARLY_THREAD_NAMES: Mutex<Vec<(u32, String)>> = parking_lot::const_mutex(Vec::new());

/// A value of `end.args.app` (the format's).
pub use crate::format::AppValue;

/// Why [`init`] did not start tracing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// `DFTRACER_ENABLE` (or the config) says off.
    Disabled,
    /// The tracer already runs in this process.
    AlreadyInitialized,
    /// The tracer was finalized; it does not start twice.
    Finalized,
    /// The trace prefix cannot take files. `given` is how the user named it
    /// (`DFTRACER_LOG_FILE=...`, `initialize(log_file="...")`), `prefix` the absolute prefix.
    LogDir {
        given: String,
        prefix: String,
        reason: String,
    },
    /// An earlier start failed in this process; starts from the configuration are not retried.
    StartFailed,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Disabled => write!(f, "tracing is disabled (DFTRACER_ENABLE is not set)"),
            Error::AlreadyInitialized => write!(f, "the tracer is already initialized"),
            Error::Finalized => write!(f, "the tracer was finalized in this process"),
            Error::LogDir {
                given,
                prefix,
                reason,
            } => write!(
                f,
                "{given}: cannot write trace files with prefix {prefix}: {reason}; tracing disabled"
            ),
            Error::StartFailed => write!(
                f,
                "tracing failed to start earlier in this process; tracing disabled"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// Counters of what the tracer did, for `end` records, stderr and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Complete events encoded (user events; not `start`/`end`).
    pub events: u64,
    /// Bytes written to the trace file.
    pub bytes: u64,
    /// Events dropped because a ring was full (drop mode only).
    pub dropped: u64,
    /// Events encoded but not written (the file could not be created or written).
    pub lost: u64,
    /// The trace file, once created.
    pub path: Option<String>,
}

struct Shared {
    cfg: Config,
    /// An [`Origin`] (`as u8`): an API start in a preloaded process changes it to `App`.
    origin: AtomicU8,
    prefix: Mutex<String>,
    /// The data dirs whose I/O is traced (the start's, or those a later `initialize` bound
    /// when the start had none): what child processes inherit.
    data_dirs: Mutex<Option<String>>,
    host: String,
    file_hash: String,
    pid: u32,
    ppid: u32,
    init_tid: u32,
    cwd: String,
    cmd: String,
    exec: String,
    start_ts: u64,
    date: String,
    rings: Mutex<Vec<Arc<Ring>>>,
    writer: Mutex<Writer>,
    output: Mutex<Output>,
    wake: sys::Wake,
    app: Mutex<Vec<(String, AppValue)>>,
    used_names: Mutex<Vec<String>>,
    /// Names given to [`name_thread`] whose `thread_name` record is not written yet.
    thread_names: Mutex<Vec<(u32, String)>>,
    bind: AtomicBool,
    dropped: AtomicU64,
    writer_started: AtomicBool,
    /// The writer thread's start, against a finalize that comes first: [`writer::NOT_BEGUN`],
    /// [`writer::BEGUN`] or [`writer::CALLED_OFF`] (finalize had nothing to wait for).
    writer_begun: std::sync::atomic::AtomicU8,
    writer_thread: Mutex<Option<libc::pthread_t>>,
    stop: AtomicBool,
    signal: AtomicI32,
    signal_done: AtomicBool,
}

/// This thread's "internal" flag: a bit of [`producer::Local`]'s flags, so that the hot
/// path's checks and its record share one thread-local access.
struct InternalFlag;

/// The flag of one thread, as [`InternalFlag::try_with`] hands it out.
struct InternalBit<'a>(&'a producer::Local);

impl InternalBit<'_> {
    fn get(&self) -> bool {
        self.0.internal()
    }

    fn set(&self, on: bool) {
        self.0.set_internal(on);
    }

    fn replace(&self, on: bool) -> bool {
        self.0.set_internal(on)
    }
}

impl InternalFlag {
    #[inline(always)]
    fn try_with<R>(
        &'static self,
        f: impl FnOnce(&InternalBit<'_>) -> R,
    ) -> Result<R, std::thread::AccessError> {
        LOCAL.try_with(|l| f(&InternalBit(l)))
    }
}

static INTERNAL: InternalFlag = InternalFlag;

/// True on threads (or inside sections) where the tracer itself does I/O: interposers must
/// pass such calls straight through.
#[inline]
pub fn is_internal() -> bool {
    INTERNAL.try_with(|c| c.get()).unwrap_or(true)
}

struct InternalGuard(bool);
impl InternalGuard {
    fn new() -> Self {
        InternalGuard(INTERNAL.try_with(|c| c.replace(true)).unwrap_or(true))
    }
}
impl Drop for InternalGuard {
    fn drop(&mut self) {
        let prev = self.0;
        let _ = INTERNAL.try_with(|c| c.set(prev));
    }
}

/// An application thread inside one of the tracer's cold paths, where it takes the tracer's
/// locks: its I/O is internal, and every asynchronous signal stays pending until the section
/// ends, so neither the tracer's handler (which waits for the writer to finish the file) nor a
/// program's handler that re-raises into it ever runs on a thread that holds a lock the writer
/// needs.
struct Section {
    _internal: InternalGuard,
    _signals: sys::SignalBlock,
}

impl Section {
    fn new() -> Section {
        Section {
            _signals: sys::SignalBlock::new(signals::async_set()),
            _internal: InternalGuard::new(),
        }
    }
}

/// The live state (in a fork child, built on first use).
fn shared() -> Option<&'static Shared> {
    if FORKED.load(Ordering::Acquire) != FORK_NONE {
        lifecycle::rebuild_after_fork();
    }
    current()
}

/// The state as it is, without building a fork child's (for signal and atfork handlers).
fn current() -> Option<&'static Shared> {
    let p = SHARED.load(Ordering::Acquire);
    // SAFETY: SHARED only ever holds pointers from Box::into_raw that are never freed.
    unsafe { p.as_ref() }
}

impl Shared {
    fn new(cfg: Config, origin: Origin, prefix: String, init_tid: u32) -> Shared {
        let host = sys::hostname();
        let pid = sys::getpid();
        let argv = sys::cmdline();
        let exec = sys::exec_name(&argv);
        let file_hash = if origin == Origin::Service {
            host.clone()
        } else {
            hash_str(&hash16(format!("{exec}-{host}-{pid}").as_bytes())).to_string()
        };
        let gz = cfg
            .compression
            .then(|| GzipWriter::new(cfg.compression_level));
        // The rules' `app` and `rank`: this process's executable name and launcher rank (the
        // service is not a rank of the job).
        let rank = match origin {
            Origin::Service => None,
            _ => config::launcher_rank(|k| std::env::var(k).ok()),
        };
        let agg = match (&cfg.aggregation_enable, &cfg.aggregation_selection) {
            (false, _) | (true, Selection::Off) => None,
            (true, Selection::All) => Some(Aggregator::new(None)),
            (true, Selection::Rules(r)) => Some(Aggregator::new(Some(r.clone()))),
        }
        .map(|mut a| {
            a.app = exec.as_bytes().into();
            a.rank = rank;
            a
        });
        let hhash = hash_str(&hash16(host.as_bytes())).to_string();
        let writer = Writer::new(&cfg, Encoder::new(pid, &hhash, cfg.metadata), agg);
        Shared {
            host,
            file_hash,
            pid,
            ppid: sys::getppid(),
            init_tid,
            cwd: sys::cwd(),
            cmd: argv.join(";"),
            exec,
            start_ts: crate::clock::now_in(cfg.time_metric),
            date: sys::asctime_now(),
            rings: Mutex::new(Vec::new()),
            writer: Mutex::new(writer),
            output: Mutex::new(Output::new(gz)),
            wake: sys::Wake::new(),
            // A fork child copies its parent's list (rebuild_after_fork); the service is not a
            // rank of the job even when a launcher started it.
            app: Mutex::new(match origin {
                Origin::Fork | Origin::Service => Vec::new(),
                _ => rank
                    .map(|r| vec![("rank".to_string(), AppValue::Int(r))])
                    .unwrap_or_default(),
            }),
            used_names: Mutex::new(std::mem::take(&mut *EARLY_USED.lock())),
            thread_names: Mutex::new(std::mem::take(&mut *EARLY_THREAD_NAMES.lock())),
            bind: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            writer_started: AtomicBool::new(false),
            writer_begun: std::sync::atomic::AtomicU8::new(writer::NOT_BEGUN),
            writer_thread: Mutex::new(None),
            stop: AtomicBool::new(false),
            signal: AtomicI32::new(0),
            signal_done: AtomicBool::new(false),
            prefix: Mutex::new(prefix),
            data_dirs: Mutex::new(cfg.data_dirs.clone()),
            cfg,
            origin: AtomicU8::new(origin as u8),
        }
    }

    fn origin(&self) -> Origin {
        Origin::from_u8(self.origin.load(Ordering::Relaxed))
    }

    fn tid_of(&self, ring_tid: u32) -> u32 {
        if self.cfg.tids {
            ring_tid
        } else {
            0
        }
    }

    /// A panic inside the tracer (writer thread, a producer's hand-over): tracing stops, what
    /// was recorded but not written is counted as lost, and the program goes on. The file keeps
    /// its complete members.
    #[cold]
    fn broken(&self, what: &str) {
        STATE.fetch_and(!1, Ordering::AcqRel);
        PHASE.store(PHASE_DONE, Ordering::Release);
        let mut unwritten = 0u64;
        for ring in self.rings.lock().iter() {
            ring.drain(usize::MAX, |_| {
                unwritten += 1;
                false
            });
        }
        unwritten += self.writer.lock().take_pending();
        let mut o = self.output.lock();
        let unwritten = o.give_up(unwritten);
        let path = o
            .open_path()
            .map(str::to_string)
            .unwrap_or_else(|| self.expected_path());
        drop(o);
        sys::eprint_line(&format!(
            "[DFTRACER ERROR] internal error in the tracer's {what} (pid {}): tracing is off, {unwritten} events lost; {path} keeps what was written before",
            self.pid
        ));
        self.signal_done.store(true, Ordering::Release);
        FINISHED.store(true, Ordering::Release);
    }

    fn stats(&self) -> Stats {
        let events = self.writer.lock().events();
        let o = self.output.lock();
        let (path, bytes) = match o.file() {
            Some((p, b)) => (Some(p.to_string()), b),
            None => (None, 0),
        };
        Stats {
            events,
            bytes,
            dropped: self.dropped.load(Ordering::Relaxed),
            lost: o.lost(),
            path,
        }
    }

    /// The trace file's name before it is created.
    fn expected_path(&self) -> String {
        sink::trace_path(
            &self.prefix.lock(),
            &self.file_hash,
            self.origin(),
            0,
            self.cfg.compression,
        )
    }

    /// Drains everything, writes `end`, writes the last member and closes the file.
    fn finish(&self) {
        let _g = InternalGuard::new();
        let mut w = self.writer.lock();
        Writer::finish(&mut w, self);
        let mut o = self.output.lock();
        o.close(self);
        // A process that recorded nothing has no file: its reserved slot goes back to it.
        sink::release_reserve();
        FINISHED.store(true, Ordering::Release);
    }
}

/// Adds `name` to `end.args.used`.
/// Names thread `tid` (a kernel tid: Python's `threading.get_native_id()`) in the trace: a
/// `thread_name` metadata record on that tid, `args.name` the name, written with the next
/// events (never by itself: a process that records nothing still leaves no file). Names
/// given before the start are kept for it (a thread started before the first event). A
/// thread named again gets a second record (readers take the last). Ignored when tids are
/// off (`DFTRACER_DISABLE_TIDS`: every thread is tid 0); at most 4,096 names wait at once.
pub fn name_thread(tid: u32, name: &str) {
    let push = |v: &mut Vec<(u32, String)>| {
        v.retain(|(t, _)| *t != tid);
        if v.len() < 4096 {
            v.push((tid, name.to_string()));
        }
    };
    let _s = Section::new();
    match shared() {
        Some(sh) if sh.cfg.tids && PHASE.load(Ordering::Acquire) == PHASE_RUNNING => {
            push(&mut sh.thread_names.lock())
        }
        None if PHASE.load(Ordering::Acquire) == PHASE_NONE => push(&mut EARLY_THREAD_NAMES.lock()),
        _ => {}
    }
}

pub fn mark_used(name: &str) {
    let push = |u: &mut Vec<String>| {
        if !u.iter().any(|n| n == name) {
            u.push(name.to_string());
        }
    };
    let _s = Section::new();
    match shared() {
        Some(sh) => push(&mut sh.used_names.lock()),
        // Kept for a start to come (bounded: integrations have a handful of names).
        None if PHASE.load(Ordering::Acquire) == PHASE_NONE => {
            let mut early = EARLY_USED.lock();
            if early.len() < 64 {
                push(&mut early);
            }
        }
        None => {}
    }
}

/// Sets `end.args.app.<key>` (last write wins).
pub fn set_app_metadata(key: &str, value: AppValue) {
    if let Some(sh) = shared() {
        let _s = Section::new();
        let mut app = sh.app.lock();
        match app.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => app.push((key.to_string(), value)),
        }
    }
}

/// Records whether I/O interception is bound (`cfg.bind` in the end record).
pub fn set_bind(bound: bool) {
    if let Some(sh) = shared() {
        sh.bind.store(bound, Ordering::Relaxed);
    }
}

/// What the tracer has done so far in this process.
pub fn stats() -> Stats {
    shared()
        .map(|s| {
            let _s = Section::new();
            s.stats()
        })
        .unwrap_or_default()
}

/// The configuration in force (None before `init`).
pub fn config() -> Option<Config> {
    shared().map(|s| s.cfg.clone())
}

/// Where this process's trace goes (the actual file once created).
pub fn trace_path() -> Option<String> {
    let sh = shared()?;
    let _s = Section::new();
    let o = sh.output.lock();
    Some(match o.file() {
        Some((p, _)) => p.to_string(),
        None => sh.expected_path(),
    })
}

/// True once `init` succeeded and `finalize` has not run.
pub fn is_running() -> bool {
    PHASE.load(Ordering::Acquire) == PHASE_RUNNING
}

/// True when a start failed (and no later explicit start succeeded): tracing is off for good
/// unless the program names another log file.
pub fn start_failed() -> bool {
    PHASE.load(Ordering::Acquire) == PHASE_FAILED
}

/// The absolute prefix a path given to `initialize(log_file)` stands for (extension
/// stripped, relative paths resolved against the current directory).
pub fn prefix_for(api_log_file: &str) -> String {
    lifecycle::resolve_prefix(&Config::default(), Some(api_log_file))
}

/// The absolute prefix of this process's trace files (None before `init`).
pub fn prefix() -> Option<String> {
    shared().map(|sh| sh.prefix.lock().clone())
}

/// True once `finalize` ran in this process.
pub fn is_finalized() -> bool {
    PHASE.load(Ordering::Acquire) == PHASE_DONE
}
