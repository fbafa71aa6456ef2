//! The Python side of the lazy start and of the exit hooks.
//!
//! The policy is core's ([`dftracer_core::frontend::LazyStart`]); [`Module`] is what this module gives it:
//! the native library's core ([`crate::native`]), the settings read once ([`config`]), the
//! child environment exported through `os.environ` under the GIL. [`active`] is every
//! event's check (one load when running, two when off). [`install_exit_hook`] finishes the
//! trace before `os._exit`, `os.execv`/`os.execve` and at Python's `atexit`.

use dftracer_core::frontend::{Frontend, LazyStart};
use dftracer_core::{Config, Origin};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use std::sync::OnceLock;

use crate::native;

static CONFIG: OnceLock<Config> = OnceLock::new();
/// The lazy start and the explicit `initialize`: core's policy ([`dftracer_core::frontend::LazyStart`]).
pub(crate) static START: LazyStart = LazyStart::new();
static ORIG_EXIT: GILOnceCell<PyObject> = GILOnceCell::new();

pub(crate) fn config() -> &'static Config {
    CONFIG.get_or_init(native::config_from_env)
}

/// This module's side of the lazy-start policy: the core of the native library
/// ([`native`]), the settings read once ([`config`]), the child environment through
/// `os.environ`.
pub(crate) struct Module;

impl Frontend for Module {
    const SAYS_IGNORED: bool = true;

    #[inline(always)]
    fn is_enabled(&self) -> bool {
        native::is_enabled()
    }
    fn is_finalized(&self) -> bool {
        native::is_finalized()
    }
    fn is_running(&self) -> bool {
        native::is_running()
    }
    fn config(&self) -> Config {
        config().clone()
    }
    fn start(&self, cfg: Config, log_file: Option<&str>) -> Result<(), dftracer_core::Error> {
        native::init(cfg, Origin::App, log_file)
    }
    fn join(&self, cfg: Config, log_file: Option<&str>, arg_dirs: Option<&str>) {
        native::join(cfg, log_file, arg_dirs);
    }
    fn found_running(&self) {
        // The preload library started the core: the trace is the application's now.
        native::claim_for_app();
    }
    fn export_env(&self) {
        export_env();
    }
    fn prefix(&self) -> Option<String> {
        native::prefix()
    }
    fn trace_path(&self) -> Option<String> {
        native::trace_path()
    }
}

/// True when events should be recorded, starting the tracer from the environment on first
/// use. One load when running; two when off or after a failed start.
#[inline]
pub(crate) fn active() -> bool {
    START.active(&Module)
}

/// Children (subprocess, multiprocessing spawn) inherit where to write: set through
/// `os.environ` under the GIL, as Python code sets the environment (it also keeps
/// `os.environ` itself right for code that copies it). The core's own `setenv` is off for
/// this module (see ARCHITECTURE.md, gotchas).
fn export_env() {
    Python::with_gil(|py| {
        let set = || -> PyResult<()> {
            let environ = py.import("os")?.getattr("environ")?;
            for (k, v) in native::child_env() {
                environ.set_item(k, v)?;
            }
            Ok(())
        };
        if let Err(e) = set() {
            dftracer_core::frontend::eprint_line(&format!(
                "[DFTRACER WARN] cannot export the trace settings to child processes: {e}"
            ));
        }
    });
}

/// Replacement of `os._exit`: finishes the trace first (multiprocessing fork workers leave
/// through `os._exit`), then exits.
#[pyfunction]
pub(crate) fn _exit(py: Python<'_>, code: &Bound<'_, PyAny>) -> PyResult<()> {
    py.allow_threads(native::finalize);
    match ORIG_EXIT.get(py) {
        Some(orig) => orig.call1(py, (code,)).map(|_| ()),
        None => Ok(()),
    }
}

/// Called by the `os.execv`/`os.execve` wrappers: finishes the trace before the image goes.
#[pyfunction]
pub(crate) fn _before_exec(py: Python<'_>) {
    if native::is_running() {
        py.allow_threads(native::finalize);
    }
}

pub(crate) fn install_exit_hook(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let os = py.import("os")?;
    let current = os.getattr("_exit")?;
    // Idempotent: never wrap our own wrapper (module re-import, pydftracer on top).
    if current
        .getattr("__module__")
        .ok()
        .and_then(|v| v.extract::<String>().ok())
        == Some("dftracer.dftracer".into())
    {
        return Ok(());
    }
    let _ = ORIG_EXIT.set(py, current.unbind());
    os.setattr("_exit", m.getattr("_exit")?)?;
    // `os.execv`/`os.execve` (which `execl*`/`execvp*` call) replace the image: the trace is
    // finished first, its `end` record last (when I/O is bound in process, the native
    // library's exec hooks do the same for calls from C).
    let globals = pyo3::types::PyDict::new(py);
    globals.set_item("os", &os)?;
    globals.set_item("before", m.getattr("_before_exec")?)?;
    py.run(
        c"def _wrap(orig):\n    def exec_finishing_trace(*a, **k):\n        before()\n        return orig(*a, **k)\n    exec_finishing_trace.__doc__ = orig.__doc__\n    exec_finishing_trace.__wrapped__ = orig\n    return exec_finishing_trace\nfor _n in ('execv', 'execve'):\n    setattr(os, _n, _wrap(getattr(os, _n)))\n",
        Some(&globals),
        None,
    )?;
    // Python-level atexit too: a KeyboardInterrupt exit re-kills the process with SIGINT
    // after interpreter finalization, before C atexit handlers would run.
    py.import("atexit")?
        .call_method1("register", (m.getattr("finalize")?,))?;
    Ok(())
}
