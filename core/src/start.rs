//! The lazy-start policy every frontend with an `initialize` call follows (the Python module,
//! the C/C++ API): one [`LazyStart`] per frontend (a `static`), driven through the frontend's
//! [`Frontend`] (how it reaches the core, starts and joins it, exports the child environment).
//!
//! - **An event before `initialize` starts tracing once** from the environment
//!   ([`LazyStart::active`]), so a spawned worker that only runs annotated code is traced.
//! - **Decided once**: the first event that finds tracing off tries the start; whatever comes
//!   of it (started, disabled, finalized, failed), later events do not try again, so an event
//!   then costs what tracing off costs: the enabled check plus one relaxed load.
//! - **Explicit `initialize`** ([`LazyStart::initialize`]): the first one joins a trace
//!   already running (started by an event or by the preload library: it names the file and
//!   binds the data dirs), or starts one; a second is ignored while tracing runs; when a start
//!   failed, one naming a new file tries again (the core retries only for an explicit path).
//! - **Reported once**: a start error is one line on stderr; a later failure of the same
//!   start (the core's [`Error::StartFailed`]) stays quiet.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::{Config, Error};

/// What a frontend supplies to [`LazyStart`]: the core it reaches (directly, or through the
/// native library's table) and what it does when it starts or joins the trace.
pub trait Frontend {
    /// Says when an explicit `initialize` naming a file is ignored (finalized, or a second
    /// call naming another file): one line on stderr. The C API is silent, as the reference.
    const SAYS_IGNORED: bool = false;

    /// Events are recorded now: the core's one-load check (inlined into every event).
    fn is_enabled(&self) -> bool;
    fn is_finalized(&self) -> bool;
    fn is_running(&self) -> bool;
    /// The settings in force for this frontend (the environment's, with the config file).
    fn config(&self) -> Config;
    /// Starts the core; `log_file` is an explicit `initialize`'s path.
    fn start(&self, cfg: Config, log_file: Option<&str>) -> Result<(), Error>;
    /// An explicit `initialize` found the core running: the trace becomes the application's,
    /// `log_file` names it, `arg_dirs` (the call's data dirs; `cfg.data_dirs` holds them
    /// joined with the environment's) bind I/O or replace the dirs in force.
    fn join(&self, cfg: Config, log_file: Option<&str>, arg_dirs: Option<&str>);
    /// The lazy start found the core started by someone else in the process.
    fn found_running(&self) {}
    /// This frontend started or joined the trace: children inherit where to write.
    fn export_env(&self) {}
    /// Runs the cold start (the C API keeps the program's errno around it).
    fn cold<R>(&self, f: impl FnOnce() -> R) -> R {
        f()
    }
    /// The prefix of the running trace ([`crate::prefix`]), for [`Frontend::SAYS_IGNORED`].
    fn prefix(&self) -> Option<String> {
        None
    }
    /// The running trace's path ([`crate::trace_path`]), for [`Frontend::SAYS_IGNORED`].
    fn trace_path(&self) -> Option<String> {
        None
    }
}

/// The decision state of one frontend's lazy start (a `static` of the frontend).
pub struct LazyStart {
    /// The lazy start was tried (or declined): events no longer try it.
    decided: AtomicBool,
    /// An explicit `initialize` ran.
    explicit: AtomicBool,
    /// A start error was printed: later failures of that start stay quiet.
    reported: AtomicBool,
}

impl Default for LazyStart {
    fn default() -> Self {
        Self::new()
    }
}

impl LazyStart {
    pub const fn new() -> Self {
        LazyStart {
            decided: AtomicBool::new(false),
            explicit: AtomicBool::new(false),
            reported: AtomicBool::new(false),
        }
    }

    /// True when events should be recorded, starting tracing from the environment on the
    /// first call that finds it off. Running: the frontend's enabled check alone; off once
    /// decided: that check and one relaxed load.
    #[inline(always)]
    pub fn active<F: Frontend>(&self, f: &F) -> bool {
        f.is_enabled() || (!self.decided() && self.start_lazily(f))
    }

    /// The word behind [`LazyStart::decided`], for a frontend that reads it from C (the C API
    /// header's inline off check).
    pub const fn decided_word(&self) -> &AtomicBool {
        &self.decided
    }

    /// The lazy start was decided (tried, or declined): events no longer try it. One
    /// relaxed load (a frontend's fast path that leaves the start to its general path).
    #[inline(always)]
    pub fn decided(&self) -> bool {
        self.decided.load(Ordering::Relaxed)
    }

    #[cold]
    #[inline(never)]
    fn start_lazily<F: Frontend>(&self, f: &F) -> bool {
        f.cold(|| {
            if self.decided.swap(true, Ordering::AcqRel) || f.is_finalized() {
                return f.is_enabled();
            }
            let cfg = f.config();
            if cfg.enable {
                match f.start(cfg, None) {
                    Ok(()) => f.export_env(),
                    Err(Error::AlreadyInitialized) => f.found_running(),
                    Err(Error::Disabled) | Err(Error::Finalized) => {}
                    Err(e) => self.report_once(&e),
                }
            }
            f.is_enabled()
        })
    }

    /// An explicit `initialize(log_file, data_dirs)` (see the module docs): `log_file` and
    /// `arg_dirs` as the call gave them (`None` or empty: not given).
    pub fn initialize<F: Frontend>(&self, f: &F, log_file: Option<&str>, arg_dirs: Option<&str>) {
        let log_file = log_file.filter(|p| !p.is_empty());
        let arg_dirs = arg_dirs.filter(|d| !d.is_empty());
        let named = |p: &str| format!("initialize(log_file={p:?})");
        let warn = |what: &str| crate::sys::eprint_line(&format!("[DFTRACER WARN] {what}"));
        if f.is_finalized() {
            if let Some(p) = log_file.filter(|_| F::SAYS_IGNORED) {
                if f.config().enable {
                    warn(&format!(
                        "tracing was finalized in this process; {} ignored",
                        named(p)
                    ));
                }
            }
            return;
        }
        let mut cfg = f.config();
        if !cfg.enable {
            return;
        }
        // The reference's order: the argument's directories, then DFTRACER_DATA_DIR's.
        if let Some(d) = arg_dirs {
            cfg.data_dirs = Some(match cfg.data_dirs.take() {
                Some(env) => format!("{d}:{env}"),
                None => d.to_string(),
            });
        }
        let explicit_before = self.explicit.swap(true, Ordering::AcqRel);
        if f.is_running() {
            if explicit_before {
                // A second initialize is ignored, as in the reference; said when it names
                // another file (the same one again is silent).
                if let Some(p) = log_file.filter(|_| F::SAYS_IGNORED) {
                    if f.prefix().as_deref() != Some(&crate::tracer::prefix_for(p)) {
                        let now = f.trace_path().unwrap_or_default();
                        warn(&format!("already tracing to {now}; {} ignored", named(p)));
                    }
                }
                return;
            }
            // Started by an earlier event (or by the preload library): the explicit call
            // still names the file (renamed if already written), it is the application's,
            // and its data dirs are bound now.
            f.join(cfg, log_file, arg_dirs);
            f.export_env();
            return;
        }
        // Not running: never started, or an earlier start failed (then only a log file path
        // tries again; the core says StartFailed otherwise).
        match f.start(cfg.clone(), log_file) {
            Ok(()) => f.export_env(),
            Err(Error::AlreadyInitialized) => {
                // Started by an event on another thread meanwhile.
                f.join(cfg, log_file, arg_dirs);
                f.export_env();
            }
            Err(Error::Disabled) | Err(Error::Finalized) => {}
            Err(e @ Error::StartFailed) => self.report_once(&e),
            Err(e) => self.report(&e),
        }
    }

    /// Prints a start error (and marks it reported).
    pub fn report(&self, e: &Error) {
        self.reported.store(true, Ordering::Relaxed);
        crate::sys::eprint_line(&format!("[DFTRACER ERROR] {e}"));
    }

    /// Prints a start error unless one was printed.
    pub fn report_once(&self, e: &Error) {
        if !self.reported.swap(true, Ordering::Relaxed) {
            crate::sys::eprint_line(&format!("[DFTRACER ERROR] {e}"));
        }
    }
}
