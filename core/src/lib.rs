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

// The crate's face has three parts: this root (what a program recording events needs), `config`
// (the knob table), [`frontend`] (what the three frontends need beyond that: lazy start, data
// dirs, the signal hand-off, the child environment, the cross-object API) and one hidden door,
// `internals`, for the fuzz targets, benches and integration tests. Every other module is
// private to the crate.
mod aggregate;
mod alloc;
mod api;
mod clock;
pub mod config;
mod deflate;
mod event;
mod files;
mod filter;
mod fold;
mod format;
pub mod frontend;
mod gzip;
mod hash;
mod intern;
mod paths;
mod record;
mod ring;
mod rules;
mod signals;
mod sink;
mod start;
// std's atomics and byte cells, or loom's under `--cfg loom` (the ring and the clock use them).
mod sync;
mod sys;
mod tracer;

pub use config::{Config, ConfigError, InitMode, TimeMetric};
pub use event::{Arg, ArgsSchema, Layer, MixedSchema, Schema, Slot, Value};
pub use files::{FileHandle, FileRef, Pinned};
pub use intern::{intern, intern_args, intern_keyed, Keys as SchemaKeys};
pub use sink::Origin;
pub use tracer::{
    complete, complete_static, complete_strs, config, counter, end_ticks, finalize, flush, init,
    is_enabled, is_finalized, is_running, metadata, name_thread, now, prefix, set_app_metadata,
    stats, trace_path, AppValue, Error, Stats,
};

/// The engine's parts, for the fuzz targets, benches and integration tests (separate crates)
/// that drive the encoder, rings, compressors and clock directly. No stability promise: a
/// frontend uses the root and [`frontend`], never this.
#[doc(hidden)]
pub mod internals {
    pub mod clock {
        pub use crate::clock::*;
    }
    pub mod deflate {
        pub use crate::deflate::*;
    }
    pub mod event {
        pub use crate::event::*;
    }
    pub mod files {
        pub use crate::files::*;
    }
    pub mod format {
        pub use crate::format::*;
    }
    pub mod gzip {
        pub use crate::gzip::*;
    }
    pub mod hash {
        pub use crate::hash::*;
    }
    pub mod record {
        pub use crate::record::*;
    }
    pub mod ring {
        pub use crate::ring::*;
    }
}
