//! The table through which a frontend reaches the process's one core when that core lives in
//! another shared object: the Python module uses the core inside `libdftracer_core.so` (the
//! native library, which also holds the I/O hooks and may already be preloaded or linked),
//! so that a process has one tracer, one writer and one trace file whatever loaded it.
//!
//! The entries are Rust function pointers passing Rust values, so both sides must come from
//! the same build of this crate: [`BUILD_ID`] is compared before the table is used.

use crate::files::FileHandle;
use crate::{
    AppValue, Arg, ArgsSchema, Config, Error, Layer, MixedSchema, Origin, Schema, SchemaKeys, Slot,
    Stats,
};
use std::sync::atomic::AtomicU64;

/// Identifies this build of the core (sources, version, compiler).
pub const BUILD_ID: &str = env!("DFTRACER_BUILD_ID");

/// Name of the C symbol (a `extern "C" fn() -> *const Api`) that a native library exports.
pub const SYMBOL: &[u8] = b"dftracer_rs_api\0";

/// [`crate::complete`]: layer, name, category, ts, dur, args.
pub type CompleteFn = fn(Layer, &[u8], &[u8], u64, u64, &[Arg<'_>]);

/// [`crate::intern_args`]: layer, name, category, (key, slot) per arg.
pub type InternArgsFn = fn(Layer, &[u8], &[u8], &[(&[u8], Slot)]) -> Option<ArgsSchema>;

/// [`crate::complete_strs`]: schema, ts, dur, slot values, strings.
pub type CompleteStrsFn = fn(MixedSchema, u64, u64, &[u64], &[&[u8]]);

/// The core's entry points, as one library's copy of the core provides them.
pub struct Api {
    pub build_id: &'static str,
    /// The enabled word: bit 0 set while tracing records (see `is_enabled`).
    pub state: &'static AtomicU64,
    /// The configuration from the environment (and the YAML file it names), parsed by the
    /// core that reports bad values, so that each is reported once per process.
    pub config_from_env: fn() -> Config,
    /// Starts the core; `io`: also trace the process's POSIX/stdio calls on data dirs.
    pub start: fn(Config, Origin, Option<&str>, bool) -> Result<(), Error>,
    /// An explicit `initialize` found the core running (started by an earlier event or by
    /// the preload): the application claims it, `log_file` renames it, and with `io` the
    /// data dirs of `Config` (the argument's, `arg_dirs`, first) are bound unless I/O
    /// interception is already on.
    pub join: fn(Config, Option<&str>, Option<&str>, bool),
    pub complete: CompleteFn,
    /// [`crate::intern()`]: the schema of a name and category without args, if it has one.
    pub intern: fn(Layer, &[u8], &[u8]) -> Option<&'static Schema>,
    /// [`crate::intern_keyed`]: the same with integer args under fixed keys.
    pub intern_keyed: fn(Layer, &[u8], &[u8], SchemaKeys) -> Option<&'static Schema>,
    /// [`crate::complete_static`]: schema, ts, dur, slot values, file.
    pub complete_static: fn(&'static Schema, u64, u64, &[u64], Option<FileHandle>),
    /// [`crate::intern_args`]: the schema of a name and category with args of any kind.
    pub intern_args: InternArgsFn,
    /// [`crate::complete_strs`]: schema, ts, dur, slot values, strings.
    pub complete_strs: CompleteStrsFn,
    pub metadata: fn(Layer, &[u8], &[u8], &[u8]),
    pub now: fn() -> u64,
    /// [`crate::frontend::ticks`]: a raw clock read, only for `end_ticks` or `ticks_in_unit`.
    pub ticks: fn() -> u64,
    /// [`crate::end_ticks`]: schema, begin tick (the end is read inside), slot values.
    pub end_ticks: fn(&'static Schema, u64, &[u64]),
    /// [`crate::frontend::ticks_in_unit`]: a tick as the `now` value of that instant.
    pub ticks_in_unit: fn(u64) -> u64,
    pub finalize: fn(),
    pub flush: fn(),
    pub retarget: fn(&str) -> Result<String, Error>,
    /// The application joins a core the preload library started: its file becomes `-app`.
    pub claim_for_app: fn(),
    pub config: fn() -> Option<Config>,
    pub set_app_metadata: fn(&str, AppValue),
    pub mark_used: fn(&str),
    /// [`crate::name_thread`]: kernel tid, name.
    pub name_thread: fn(u32, &str),
    pub trace_path: fn() -> Option<String>,
    pub stats: fn() -> Stats,
    pub is_running: fn() -> bool,
    /// A start failed (decided once: later events cost what tracing off costs).
    pub start_failed: fn() -> bool,
    /// The prefix in force.
    pub prefix: fn() -> Option<String>,
    /// Whether `init` exports the settings to the environment (a frontend that sets the
    /// environment itself, under its own lock, turns it off).
    pub export_env_at_init: fn(bool),
    /// The environment children need to trace into the same place.
    pub child_env: fn() -> Vec<(&'static str, String)>,
    pub is_finalized: fn() -> bool,
}
