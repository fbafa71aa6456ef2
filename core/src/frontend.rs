//! What the three frontends (the Python module, the native library's hooks and C/C++ API, the
//! node service) need from the core beyond the recording API at the crate's root. Each section
//! names the policy it carries; the policy itself lives in the module it comes from.
//!
//! - **Starting**: [`LazyStart`] (an event before `initialize` starts tracing once; a failed or
//!   declined start is decided once; an explicit `initialize` joins or starts), driven through
//!   the frontend's [`Frontend`]; [`claim_for_app`], [`retarget`] (a late `initialize` names
//!   the file), [`start_failed`], [`prefix_for`], and the log directory checks.
//! - **Data dirs**: [`set_data_dirs`] and [`DataDirs`], the interception filter the I/O hooks
//!   read; [`normalize_into`], [`append_normalized`], the path normalisation they share with
//!   the core.
//! - **Signals**: the hand-off between the hooks' `sigaction`/`signal` emulation and the
//!   core's handler that is `SIG_DFL` in disguise ([`signals`]); [`before_self_signal`] for a
//!   frontend about to raise a fatal signal itself.
//! - **Child environment**: [`child_env`] (what children inherit to write where the parent
//!   writes) and [`export_env_at_init`] (whether the core sets it itself).
//! - **Recording sections**: [`enter_hook`]/[`Hook`], [`hook_busy`], [`is_internal`] (I/O the
//!   tracer does itself is never traced); [`set_bind`], [`mark_used`].
//! - **Files named by events**: [`FilePool`] (the preload library's table of
//!   [`FileRef`](crate::FileRef)s, [`WAYS`] per set, paths up to [`INLINE`] bytes kept in
//!   the slot), [`PATHS_CAP`] (the writer's path table),
//!   [`hash16`] (the reference's file hash).
//! - **Across shared objects**: [`Api`] (the Python module reaching the native library's core:
//!   one core per process) and [`STATE_WORD`] (the word behind the one-load enabled check).
//! - **Host facts and messages**: [`eprint_line`] (one line on stderr, never stdout),
//!   [`cwd`], [`hostname`], [`dir_writable`]; the per-event limits [`MAX_STR`], [`MAX_KEY`].

// Starting
pub use crate::sink::{check_dir as check_log_dir, prepare_dir as prepare_log_dir};
pub use crate::start::{Frontend, LazyStart};
pub use crate::tracer::{claim_for_app, prefix_for, retarget, start_failed};
// Data dirs
pub use crate::filter::{append_normalized, copy_words, normalize_into, DataDirs};
pub use crate::tracer::set_data_dirs;
// Signals
pub use crate::tracer::before_self_signal;
/// The signal hand-off: the real `sigaction` ([`signals::set_real`]) and the emulation the
/// hooks call (see the module's own docs in `core/src/signals.rs`).
pub mod signals {
    pub use crate::signals::*;
}
// Child environment
pub use crate::tracer::{child_env, export_env_at_init};
// Recording sections
pub use crate::clock::ticks_after;
/// The calling thread's pointer, for a frontend's own static thread-locals (see
/// [`tls_is_static`]).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub use crate::tracer::thread_pointer;
pub use crate::tracer::{complete_ticks, complete_ticks_inline, ticks_in_unit};
pub use crate::tracer::{
    enter_hook, hook_busy, is_internal, mark_used, set_bind, ticks, ticks_span, tls_is_static,
    Hook, Vals,
};
// Files named by events
/// The tracer's own heap, for the library every frontend links to declare as its
/// `#[global_allocator]` (see the module's docs).
pub use crate::alloc::TracerHeap;
pub use crate::files::{Pool as FilePool, INLINE, WAYS};
pub use crate::hash::hash16;
pub use crate::paths::PATHS_CAP;
// Across shared objects
pub use crate::api::{Api, BUILD_ID, SYMBOL as API_SYMBOL};
#[cfg(not(loom))]
pub use crate::clock::tsc_word;
pub use crate::tracer::STATE as STATE_WORD;
// Host facts and messages
pub use crate::event::{MAX_KEY, MAX_STR};
pub use crate::sys::{cwd, dir_writable, eprint_line, hostname};
