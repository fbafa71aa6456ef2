//! `dftracer <perfetto|summary|validate> ...`: see the library crate.

fn main() -> std::process::ExitCode {
    dftracer_cli::run(std::env::args_os().map(|a| a.to_string_lossy().into_owned()))
}
