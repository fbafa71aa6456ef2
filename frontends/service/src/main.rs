//! `dftracer_service <start|stop|status|run> [log_dir]`: see the library crate.

fn main() -> std::process::ExitCode {
    dftracer_service::run(std::env::args_os().map(|a| a.to_string_lossy().into_owned()))
}
