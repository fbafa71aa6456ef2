//! Lifecycle: start, finalize, exit and signal hooks, fork, retarget.

use super::producer::LOCAL;
use super::{
    current, shared, Error, Section, Shared, FINISHED, FORKED, FORK_BUILDING, FORK_NONE,
    FORK_PENDING, FORK_RING, FORK_TID, HOOKS, PHASE, PHASE_DONE, PHASE_FAILED, PHASE_INIT,
    PHASE_NONE, PHASE_RUNNING, SHARED, STATE, UNIT,
};
use crate::config::Config;
use crate::ring::Ring;
use crate::signals;
use crate::sink::{self, Origin};
use crate::sys;
use parking_lot::Mutex;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Starts tracing in this process with `cfg`. `api_log_file` is a path given to an
/// `initialize(log_file)` call (its extension is stripped, reference §1.1).
///
/// The prefix's missing directories are created (0755, like `mkdir -p`); a prefix that cannot
/// hold trace files (see [`sink::check_dir`]) fails the start. A failed start is final for
/// starts from the configuration ([`Error::StartFailed`] at once, no file system access):
/// only an explicit `api_log_file` (a new place named by the program) tries again.
///
/// Children inherit where to write through the environment: see [`export_env_at_init`].
pub fn init(cfg: Config, origin: Origin, api_log_file: Option<&str>) -> Result<(), Error> {
    if !cfg.enable {
        return Err(Error::Disabled);
    }
    let api_log_file = api_log_file.filter(|p| !p.is_empty());
    let from = if api_log_file.is_some() {
        PHASE_FAILED
    } else {
        PHASE_NONE
    };
    if PHASE
        .compare_exchange(PHASE_NONE, PHASE_INIT, Ordering::AcqRel, Ordering::Acquire)
        .or_else(|_| PHASE.compare_exchange(from, PHASE_INIT, Ordering::AcqRel, Ordering::Acquire))
        .is_err()
    {
        return Err(match PHASE.load(Ordering::Acquire) {
            PHASE_DONE => Error::Finalized,
            PHASE_FAILED => Error::StartFailed,
            _ => Error::AlreadyInitialized,
        });
    }
    let prefix = resolve_prefix(&cfg, api_log_file);
    if let Err(e) = sink::prepare_dir(&prefix) {
        // Sticky: STATE stays disabled (the hot path's one load), later starts from the
        // configuration fail at once.
        PHASE.store(PHASE_FAILED, Ordering::Release);
        return Err(Error::LogDir {
            given: given(&cfg, api_log_file),
            prefix,
            reason: e.to_string(),
        });
    }
    // The trace file is created at the first write; its descriptor slot is held from now on,
    // so a program that fills its descriptor table still gets its trace.
    sink::reserve();
    crate::clock::check_tsc(cfg.tsc);
    let data_dirs = cfg.data_dirs.clone();
    let sh = Shared::new(cfg, origin, prefix.clone(), sys::gettid());
    UNIT.store(sh.cfg.time_metric.code(), Ordering::Relaxed);
    let bind_signals = sh.cfg.bind_signals;
    SHARED.store(Box::into_raw(Box::new(sh)), Ordering::Release);
    HOOKS.call_once(|| {
        sys::at_exit(at_exit_hook);
        sys::at_fork(before_fork, after_fork_child);
        if bind_signals {
            signals::arm();
        }
    });
    export_env(&child_env_of(&prefix, data_dirs.as_deref()));
    let gen = STATE.load(Ordering::Relaxed) & !1;
    STATE.store(gen | 1, Ordering::Release);
    PHASE.store(PHASE_RUNNING, Ordering::Release);
    Ok(())
}

/// How the user named the prefix, for error messages.
fn given(cfg: &Config, api_log_file: Option<&str>) -> String {
    match (api_log_file, &cfg.log_file) {
        (Some(p), _) => format!("initialize(log_file={p:?})"),
        (None, Some(p)) => format!("DFTRACER_LOG_FILE={p}"),
        (None, None) => "DFTRACER_LOG_FILE unset (default prefix ./trace)".into(),
    }
}

/// Whether [`init`] and [`retarget`] export the settings to the environment themselves.
static EXPORT_ENV: AtomicBool = AtomicBool::new(true);

/// `true` (the default): [`init`] and [`retarget`] set `DFTRACER_LOG_FILE`, `DFTRACER_ENABLE`
/// and `DFTRACER_DATA_DIR` with `setenv` so that child processes inherit them, but only when
/// the calling thread is the process's only thread (`setenv` while another thread may call
/// `getenv` is undefined behaviour in glibc); otherwise they print one warning and leave the
/// environment alone. `false`: the frontend sets [`child_env`] itself, in a way that is safe
/// in its world (the Python module assigns `os.environ` under the GIL).
pub fn export_env_at_init(on: bool) {
    EXPORT_ENV.store(on, Ordering::Relaxed);
}

/// The variables a child process needs to trace like this one (empty before [`init`]).
pub fn child_env() -> Vec<(&'static str, String)> {
    match shared() {
        Some(sh) => child_env_of(&sh.prefix.lock(), sh.data_dirs.lock().as_deref()),
        None => Vec::new(),
    }
}

/// The data dirs whose I/O is now traced (an `initialize(data_dirs)` that bound I/O on a
/// tracer started without them): child processes inherit them (exported as at [`init`]).
pub fn set_data_dirs(dirs: Option<&str>) {
    if let Some(sh) = shared() {
        *sh.data_dirs.lock() = dirs.map(str::to_string);
        export_env(&child_env());
    }
}

fn child_env_of(prefix: &str, data_dirs: Option<&str>) -> Vec<(&'static str, String)> {
    let mut v = vec![
        ("DFTRACER_LOG_FILE", prefix.to_string()),
        ("DFTRACER_ENABLE", "1".to_string()),
    ];
    if let Some(d) = data_dirs {
        v.push(("DFTRACER_DATA_DIR", d.to_string()));
    }
    v
}

fn export_env(vars: &[(&'static str, String)]) {
    if !EXPORT_ENV.load(Ordering::Relaxed) {
        return;
    }
    if sys::single_threaded() {
        for (k, v) in vars {
            std::env::set_var(k, v);
        }
    } else {
        let line = "[DFTRACER WARN] other threads are running: DFTRACER_LOG_FILE/DFTRACER_ENABLE are not exported to child processes (set them before starting threads, or start tracing before them)";
        crate::config::print_once(line, "export_env");
    }
}

pub(super) fn resolve_prefix(cfg: &Config, api_log_file: Option<&str>) -> String {
    let p = match api_log_file.filter(|p| !p.is_empty()) {
        Some(path) => sink::prefix_from_api_path(path),
        None => cfg.log_file.clone().unwrap_or_else(|| "./trace".into()),
    };
    if p.starts_with('/') {
        p
    } else {
        // Resolve now: a later chdir must not move the trace.
        let cwd = sys::cwd();
        format!("{}/{}", cwd, p.strip_prefix("./").unwrap_or(&p))
    }
}

/// Stops tracing: drains every ring, writes `end`, flushes and closes the file. Idempotent;
/// later events are ignored. Called by the API, `atexit` and the frontends' `_exit` hooks.
pub fn finalize() {
    if PHASE
        .compare_exchange(
            PHASE_RUNNING,
            PHASE_DONE,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_err()
    {
        return;
    }
    STATE.fetch_and(!1, Ordering::AcqRel);
    let Some(sh) = shared() else { return };
    // A signal arriving now (a pool's terminate() racing a worker's own exit) stays pending
    // on this thread until the file is whole; then it acts as usual.
    let _mask = sys::SignalBlock::new(signals::async_set());
    sh.stop.store(true, Ordering::Release);
    sh.wake.post();
    if let Some(t) = sh.writer_thread.lock().take() {
        // A writer that has not run yet (a short process: started at its first event, the
        // process ends before the scheduler ran it) is called off and detached instead of
        // waited for: finalize does the drain itself either way, and the wait was the
        // scheduler's latency (milliseconds on a loaded node, per process).
        let called_off = sh
            .writer_begun
            .compare_exchange(
                super::writer::NOT_BEGUN,
                super::writer::CALLED_OFF,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok();
        if called_off {
            sys::detach_thread(t);
        // SAFETY: pthread_self is always valid.
        } else if t != unsafe { libc::pthread_self() } {
            sys::join_thread(t);
        }
    }
    sh.finish();
}

extern "C" fn at_exit_hook() {
    no_unwind("exit hook", finalize);
}

/// Runs `f` so that a panic never unwinds into C (which would abort the program): one line on
/// stderr instead, and the program goes on.
pub(super) fn no_unwind(what: &str, f: impl FnOnce()) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
        sys::eprint_line(&format!(
            "[DFTRACER ERROR] internal error in the tracer's {what}; the program goes on"
        ));
    }
}

/// The process is about to send itself `sig` (`kill(getpid(), sig)`, `raise`, `tgkill`,
/// `pthread_kill`, `sigqueue`). Only `SIGKILL`, which no handler sees, finishes the trace here
/// (async-signal-safe, a bounded wait for the writer thread). Every other signal is left to
/// its delivery: where the disposition is the default, the tracer's handler stands in for it
/// and finishes the trace then ([`crate::signals`]); a blocked signal the program takes with
/// `sigwait`/`signalfd` ends nothing.
pub fn before_self_signal(sig: i32) {
    if sig == libc::SIGKILL {
        let saved = sys::errno();
        finish_for_signal(sig, signals::SIGNAL_WAIT_MS);
        sys::set_errno(saved);
    }
}

/// Finishes the trace because the process is about to die by `sig`: the writer thread does
/// the work (this thread never takes a lock: application threads hold the tracer's locks only
/// inside a [`Section`], with every asynchronous signal blocked), this thread waits at most
/// `wait_ms`. False when the trace was not finished in time. Async-signal-safe.
pub(crate) fn finish_for_signal(sig: i32, wait_ms: u64) -> bool {
    // Nothing of a fork child's own has been recorded while its state is pending.
    let sh = if FORKED.load(Ordering::Acquire) == FORK_NONE {
        current()
    } else {
        None
    };
    let Some(sh) = sh else { return true };
    let steps = wait_ms.div_ceil(2).max(1);
    if PHASE.load(Ordering::Acquire) == PHASE_RUNNING && sh.writer_started.load(Ordering::Acquire) {
        STATE.fetch_and(!1, Ordering::AcqRel);
        let _ = sh
            .signal
            .compare_exchange(0, sig, Ordering::AcqRel, Ordering::Acquire);
        sh.wake.post();
        for _ in 0..steps {
            if sh.signal_done.load(Ordering::Acquire) {
                return true;
            }
            sys::sleep_ms(2);
        }
        sh.signal_done.load(Ordering::Acquire)
    } else if PHASE.load(Ordering::Acquire) == PHASE_DONE {
        // Another thread is finalizing (with these signals blocked there): let it finish.
        for _ in 0..steps {
            if FINISHED.load(Ordering::Acquire) {
                return true;
            }
            sys::sleep_ms(2);
        }
        FINISHED.load(Ordering::Acquire)
    } else {
        true
    }
}

/// The `pthread_atfork` prepare handler: a change of the trace file's descriptor in flight
/// on the writer finishes before the fork ([`sink::settle_before_fork`]).
unsafe extern "C" fn before_fork() {
    no_unwind("fork handler", sink::settle_before_fork);
}

/// The `pthread_atfork` child handler. Only async-signal-safe work happens here (atomics,
/// `fstat`, `close`): the parent's other threads may have held any lock when it forked. The
/// child's own state (which allocates and reads `/proc`) is built later, on its first use
/// ([`rebuild_after_fork`]).
unsafe extern "C" fn after_fork_child() {
    no_unwind("fork handler", fork_child);
}

fn fork_child() {
    signals::after_fork_child();
    sink::after_fork_child();
    if current().is_none() {
        return;
    }
    // The parent's trace descriptor is not the child's business: the child never writes the
    // inherited copy (if it still names the parent's file; the number may be the program's
    // by now). It keeps it as the reserved slot of its own `-fork` file (`sink::reserve`),
    // unless it inherited its parent's reserve (the parent had no file yet). It is no longer
    // published: a fork child that forks again before building its own state hands the
    // grandchild that reserve, nothing else. No descriptor change was in flight at the fork
    // (`before_fork`), so these two name every tracer descriptor the child holds.
    if let Some((fd, id)) = sink::published() {
        sink::unpublish();
        if !sink::is_reserve(fd) && sys::fd_identity(fd) == Some(id) {
            if sink::has_reserve() {
                sys::close_fd(fd);
            } else {
                sink::adopt_reserve(fd, id);
            }
        }
    }
    if PHASE.load(Ordering::Acquire) != PHASE_RUNNING {
        // Finalizing or finalized in the parent: the child stays off (and holds no slot).
        sink::release_reserve();
        STATE.fetch_and(!1, Ordering::AcqRel);
        PHASE.store(PHASE_DONE, Ordering::Release);
        return;
    }
    // Neither (the program closed them): a fresh one (system calls only).
    sink::reserve();
    FINISHED.store(false, Ordering::Release);
    let tid = sys::gettid();
    let _ = LOCAL.try_with(|l| {
        let r = l.ring.get();
        if !r.is_null() {
            // SAFETY: the thread's own ring is alive (held by its Arc); no other thread exists
            // in the child, so nobody produces or consumes concurrently.
            let ring = unsafe { &*r };
            ring.discard();
            ring.tid.store(tid, Ordering::Relaxed);
            // SAFETY: r came from Arc::into_raw; the new strong count is owned by FORK_RING
            // until the rebuild hands it to the child's ring registry.
            unsafe { Arc::increment_strong_count(r) };
            FORK_RING.store(r as *mut Ring, Ordering::Release);
        }
    });
    FORK_TID.store(tid, Ordering::Relaxed);
    FORKED.store(FORK_PENDING, Ordering::Release);
    // New generation: every thread re-attaches (and so rebuilds the state) on its next event.
    let gen = (STATE.load(Ordering::Relaxed) | 1).wrapping_add(2);
    STATE.store(gen, Ordering::Release);
}

/// Builds a fork child's own state (a `-fork` file, ids from 1, its own header records) from
/// its parent's, whose locks may be held by threads that no longer exist. Runs once, on the
/// first thread that needs the state; others wait for it.
#[cold]
pub(super) fn rebuild_after_fork() {
    match FORKED.compare_exchange(
        FORK_PENDING,
        FORK_BUILDING,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => {}
        Err(FORK_BUILDING) => {
            while FORKED.load(Ordering::Acquire) == FORK_BUILDING {
                std::thread::yield_now();
            }
            return;
        }
        Err(_) => return,
    }
    let Some(old) = current() else {
        FORKED.store(FORK_NONE, Ordering::Release);
        return;
    };
    let sh: &'static Shared = Box::leak(Box::new(Shared::new(
        old.cfg.clone(),
        Origin::Fork,
        old.prefix.lock_arc_free(),
        FORK_TID.load(Ordering::Relaxed),
    )));
    sh.bind
        .store(old.bind.load(Ordering::Relaxed), Ordering::Relaxed);
    *sh.used_names.lock() = old
        .used_names
        .try_lock()
        .map(|g| g.clone())
        .unwrap_or_default();
    *sh.app.lock() = old.app.try_lock().map(|g| g.clone()).unwrap_or_default();
    let r = FORK_RING.swap(ptr::null_mut(), Ordering::AcqRel);
    if !r.is_null() {
        // SAFETY: the strong count taken in after_fork_child, handed to the registry.
        sh.rings
            .lock()
            .push(unsafe { Arc::from_raw(r as *const Ring) });
    }
    SHARED.store(sh as *const Shared as *mut Shared, Ordering::Release);
    FORKED.store(FORK_NONE, Ordering::Release);
}

trait LockFree {
    fn lock_arc_free(&self) -> String;
}

impl LockFree for Mutex<String> {
    /// Reads the prefix in a fork child, where the lock may be held by a thread that no
    /// longer exists.
    fn lock_arc_free(&self) -> String {
        match self.try_lock() {
            Some(g) => g.clone(),
            // SAFETY: only reached in a fork child where the holder thread is gone; the
            // String is not being mutated (the mutating thread does not exist).
            None => unsafe { (*self.data_ptr()).clone() },
        }
    }
}

/// Changes the file prefix (an `initialize(path)` that arrives after events were already
/// recorded). An existing file is renamed, so its events stay with the new name.
pub fn retarget(api_log_file: &str) -> Result<String, Error> {
    let Some(sh) = shared() else {
        return Err(Error::Disabled);
    };
    let mut cfg = sh.cfg.clone();
    cfg.log_file = None;
    let prefix = resolve_prefix(&cfg, Some(api_log_file));
    if let Err(e) = sink::prepare_dir(&prefix) {
        return Err(Error::LogDir {
            given: format!("initialize(log_file={api_log_file:?})"),
            prefix,
            reason: e.to_string(),
        });
    }
    export_env(&child_env_of(&prefix, None)[..1]);
    rename_trace(sh, Some(prefix.clone()), None);
    Ok(prefix)
}

/// An API `initialize` in a process whose core the preload library started: the trace is
/// the application's now (one file per process, named `-app` as the reference names it), so
/// its suffix changes from `-preload` to `-app` (an existing file is renamed).
pub fn claim_for_app() {
    if let Some(sh) = shared() {
        if sh.origin() == Origin::Preload {
            rename_trace(sh, None, Some(Origin::App));
        }
    }
}

/// Sets a new prefix and/or origin; renames the file if it exists, never onto another.
fn rename_trace(sh: &Shared, prefix: Option<String>, origin: Option<Origin>) {
    let _s = Section::new();
    let _w = sh.writer.lock();
    let mut o = sh.output.lock();
    let mut p = sh.prefix.lock();
    if let Some(new) = prefix {
        *p = new;
    }
    if let Some(origin) = origin {
        sh.origin.store(origin as u8, Ordering::Relaxed);
    }
    o.rename(|n| sink::trace_path(&p, &sh.file_hash, sh.origin(), n, sh.cfg.compression));
}
