//! `dftracer_service`: the node telemetry daemon. One instance per node samples `/proc` every
//! `DFTRACER_TRACE_INTERVAL_MS` and writes DFTracer counter records (ph 2, type 7) through
//! `dftracer-core` to `<DFTRACER_LOG_FILE>_<hostname>.pfw.gz`.
//!
//! Contract:
//! - `start [log_dir]` checks what it can (log file prefix set and writable, log_dir
//!   creatable, no live instance), detaches, and returns 0 only once the daemon is sampling
//!   and its trace file exists; otherwise non-zero with one line on stderr.
//! - `stop [log_dir]` sends SIGTERM and returns once the daemon has exited, which it does only
//!   after the trace is complete (`end` record written, file closed).
//! - `status [log_dir]` exits 0 when running, 3 when not; `run [log_dir]` samples in the
//!   foreground (systemd, containers) until SIGTERM/SIGINT/SIGHUP.
//! - State files: `<log_dir>/dftracer_server_<shorthost>.{pid,out,err}`.
//! - Cheap: one thread samples (signals are waited for, not handled), `/proc` files stay
//!   open and are re-read into one buffer; the core's writer thread compresses.
//!
//! ```no_run
//! let code = dftracer_service::run(["dftracer_service", "status", "/tmp"]);
//! ```
#![deny(unsafe_code)]
// The argh structs' doc comments are the `--help` text users read (`<host>` there is a
// placeholder, not HTML).
#![allow(rustdoc::invalid_html_tags)]

pub mod collect;
mod daemon;
pub mod proc;
pub mod state;
mod sys;

use argh::FromArgs;
use std::process::ExitCode;

pub use daemon::Error;

/// dftracer_service: samples CPU, memory, disks, network and load on this node into a
/// DFTracer trace (<DFTRACER_LOG_FILE>_<hostname>.pfw.gz). `dftracer_service --version`
/// prints the version.
#[derive(FromArgs, Debug)]
pub struct Cli {
    #[argh(subcommand)]
    pub command: Command,
}

#[derive(FromArgs, Debug)]
#[argh(subcommand)]
pub enum Command {
    Start(Start),
    Stop(Stop),
    Status(Status),
    Run(Run),
}

/// Start the service in the background; returns once it samples.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "start")]
pub struct Start {
    /// directory for dftracer_server_<host>.{pid,out,err} (default /tmp)
    #[argh(positional, default = "String::from(\"/tmp\")")]
    pub log_dir: String,
}

/// Stop the service; returns once its trace is complete.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "stop")]
pub struct Stop {
    /// directory given to start (default /tmp)
    #[argh(positional, default = "String::from(\"/tmp\")")]
    pub log_dir: String,
}

/// Tell whether the service runs (exit 0) or not (exit 3).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "status")]
pub struct Status {
    /// directory given to start (default /tmp)
    #[argh(positional, default = "String::from(\"/tmp\")")]
    pub log_dir: String,
}

/// Sample in the foreground until SIGTERM, SIGINT or SIGHUP (for systemd and containers).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "run")]
pub struct Run {
    /// directory for the PID file (default /tmp)
    #[argh(positional, default = "String::from(\"/tmp\")")]
    pub log_dir: String,
    /// internal: descriptor on which `start` waits for readiness
    #[argh(option, hidden_help)]
    pub ready_fd: Option<i32>,
}

/// Parses `argv` (program name first) and runs the command. Messages go to stdout (results)
/// and stderr (errors, one line each).
pub fn run<I, S>(argv: I) -> ExitCode
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let argv: Vec<String> = argv.into_iter().map(|s| s.as_ref().to_string()).collect();
    let name = argv
        .first()
        .map(|a| a.rsplit('/').next().unwrap_or(a).to_string())
        .unwrap_or_else(|| state::BIN_NAME.to_string());
    let rest: Vec<&str> = argv.iter().skip(1).map(String::as_str).collect();
    if matches!(rest.as_slice(), ["--version"] | ["-V"]) {
        println!("{} {}", state::BIN_NAME, env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let cli = match Cli::from_args(&[name.as_str()], &rest) {
        Ok(c) => c,
        Err(early) => {
            return match early.status {
                Ok(()) => {
                    println!("{}", early.output.trim_end());
                    ExitCode::SUCCESS
                }
                Err(()) => {
                    eprintln!("{}", early.output.trim_end());
                    // The reference exits 1 on bad usage; scripts may rely on it.
                    ExitCode::from(1)
                }
            };
        }
    };
    execute(cli.command)
}

/// Runs one parsed command.
pub fn execute(cmd: Command) -> ExitCode {
    let result = match cmd {
        Command::Start(a) => daemon::start(&a.log_dir),
        Command::Stop(a) => daemon::stop(&a.log_dir),
        Command::Status(a) => daemon::status(&a.log_dir),
        Command::Run(a) => daemon::run(&a.log_dir, a.ready_fd),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}: {e}", state::BIN_NAME);
            ExitCode::from(e.exit_code())
        }
    }
}
