//! `dftracer_rs_api`: this library's copy of the core, offered to the other frontends of the
//! process (the Python module), so that a process has one core and one trace file whether
//! the library was preloaded, linked, or loaded by the Python module itself.

use dftracer_core::frontend::{Api, BUILD_ID};

fn start(
    cfg: dftracer_core::Config,
    origin: dftracer_core::Origin,
    api_log_file: Option<&str>,
    io: bool,
) -> Result<(), dftracer_core::Error> {
    crate::start_tracing(cfg, origin, api_log_file, io)
}

static API: Api = Api {
    build_id: BUILD_ID,
    state: &dftracer_core::frontend::STATE_WORD.0,
    config_from_env: dftracer_core::Config::from_env,
    start,
    join: crate::join_running,
    complete: dftracer_core::complete,
    intern: dftracer_core::intern,
    intern_keyed: dftracer_core::intern_keyed,
    complete_static: dftracer_core::complete_static,
    intern_args: dftracer_core::intern_args,
    complete_strs: dftracer_core::complete_strs,
    metadata: dftracer_core::metadata,
    now: dftracer_core::now,
    ticks: dftracer_core::frontend::ticks,
    end_ticks: dftracer_core::end_ticks,
    ticks_in_unit: dftracer_core::frontend::ticks_in_unit,
    finalize: dftracer_core::finalize,
    flush: dftracer_core::flush,
    retarget: dftracer_core::frontend::retarget,
    claim_for_app: dftracer_core::frontend::claim_for_app,
    config: dftracer_core::config,
    set_app_metadata: dftracer_core::set_app_metadata,
    mark_used: dftracer_core::frontend::mark_used,
    name_thread: dftracer_core::name_thread,
    trace_path: dftracer_core::trace_path,
    stats: dftracer_core::stats,
    is_running: dftracer_core::is_running,
    start_failed: dftracer_core::frontend::start_failed,
    prefix: dftracer_core::prefix,
    export_env_at_init: dftracer_core::frontend::export_env_at_init,
    child_env: dftracer_core::frontend::child_env,
    is_finalized: dftracer_core::is_finalized,
};

/// The table, for `dlsym(handle, "dftracer_rs_api")` callers (checked by `build_id`).
#[cfg(not(test))]
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn dftracer_rs_api() -> *const Api {
    &API
}
