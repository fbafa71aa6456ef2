//! `dftracer-core`: the engine behind every DFTracer frontend (Python module, node service,
//! LD_PRELOAD library). It records events from many threads into per-thread fixed rings and
//! writes them, off the application's threads, as DFTracer traces: newline-delimited JSON in
//! independent gzip members (`<prefix>-<hash>-<app|preload|fork>.pfw.gz`), readable by
//! dftracer-utils, dfanalyzer and Perfetto.
//!
//! Contract:
//! - **Hot path** ([`complete`], [`complete_static`], [`counter`], [`metadata`], [`now`]):
//!   one load when disabled; when enabled, a thread-local read and a ring push: no lock, no
//!   allocation, no syscall ([`now`] reads the calibrated TSC, or the vDSO clock).
//! - **Bounded**: memory is (threads × `DFTRACER_RING_SIZE`) + the write buffer; strings,
//!   keys and args per event are capped (see [`event`]), over-long values visibly truncated.
//! - **Full ring**: the producer drains its own ring (bounded work, nothing lost); with
//!   `DFTRACER_DROP_WHEN_FULL=1` it drops instead and every drop is counted in `end`.
//! - **Durable**: a member is written at least every `DFTRACER_FLUSH_INTERVAL_MS`; finalize
//!   runs at `finalize()`, `exit`, every catchable signal whose default action ends the process
//!   (while it has that action: see [`signals`]), and frontends' `_exit` hooks; a fork
//!   child writes its own self-contained `-fork` file.
//!
//! ```no_run
//! use dftracer_core::{Arg, Config, Layer, Origin};
//! let mut cfg = Config::from_env();
//! cfg.enable = true;
//! dftracer_core::init(cfg, Origin::App, Some("/tmp/run/trace")).unwrap();
//! let t = dftracer_core::now();
//! dftracer_core::complete(Layer::CppApp, b"step", b"train", t, 5, &[Arg::int("epoch", 1)]);
//! dftracer_core::finalize();
//! ```
#![deny(unsafe_code)]

// Frontends use the API re-exported below, plus `config` (the knob table) and `filter` (the
// DATA_DIR policy). The other modules are hidden: public only so that the fuzz targets and
// benches (separate crates) can reach the encoder, rings and compressors; no stability promise.
#[doc(hidden)]
pub mod aggregate;
#[doc(hidden)]
pub mod api;
#[doc(hidden)]
pub mod clock;
pub mod config;
#[doc(hidden)]
pub mod deflate;
#[doc(hidden)]
pub mod event;
pub mod files;
pub mod filter;
#[doc(hidden)]
pub mod format;
#[doc(hidden)]
pub mod gzip;
#[doc(hidden)]
pub mod hash;
mod intern;
#[doc(hidden)]
pub mod record;
#[doc(hidden)]
pub mod ring;
pub mod rules;
pub mod signals;
#[doc(hidden)]
pub mod sink;
pub mod start;
#[doc(hidden)]
pub mod sys;
// std's atomics and byte cells, or loom's under `--cfg loom` (the ring and the clock use them).
mod sync;
mod tracer;

pub use config::{Config, ConfigError, InitMode, TimeMetric, KNOBS};
pub use event::{Arg, Layer, Schema, Slot, Value};
pub use files::{FileHandle, FileRef, Pinned};
pub use intern::{intern, intern_keyed, Keys as SchemaKeys};
pub use sink::{check_dir as check_log_dir, prepare_dir as prepare_log_dir, Origin};
pub use sys::{cwd, dir_writable, eprint_line, hostname};

/// The word behind [`is_enabled`] (bit 0): for a frontend that reaches this core from another
/// shared object ([`api::Api`]) and keeps the one-load disabled check.
#[doc(hidden)]
pub use tracer::STATE as STATE_WORD;
pub use tracer::{
    before_self_signal, child_env, claim_for_app, complete, complete_static, config, counter,
    end_static, enter_hook, export_env_at_init, finalize, flush, hook_busy, init, is_enabled,
    is_finalized, is_internal, is_running, mark_used, metadata, name_thread, now, prefix,
    prefix_for, retarget, set_app_metadata, set_bind, set_data_dirs, start_failed, stats,
    trace_path, AppValue, Error, Hook, Stats,
};
