//! `dftracer`: the command-line tool for DFTracer traces (ours and the reference's: the
//! format is the same).
//!
//! - `dftracer perfetto TRACES... -o out.json[.gz]`: a timeline the Perfetto UI opens
//!   ([`perfetto`]);
//! - `dftracer summary TRACES... [--json]`: events, top functions, I/O per family and file,
//!   losses ([`summary`]);
//! - `dftracer validate TRACES...`: every line JSON, every file complete, counts agree
//!   ([`validate`]).
//!
//! TRACES are files (`.pfw`, `.pfw.gz`, any number of gzip members) or directories (their
//! trace files). Files are read one per core, streamed through a fixed buffer: memory does
//! not grow with the size of a file, nor with the length of a line (a line over
//! [`input::MAX_LINE`] is reported and skipped). A path that is not a readable file or
//! directory (missing, a FIFO, a device, a symlink loop, unreadable) is an error saying
//! which. Exit status: 0 when valid lines were read, 1 when an input is bad, nothing was
//! found, no valid line was read (the files named) or, for `validate`, a file failed; 2 for
//! usage errors. `main` only calls [`run`].

#![deny(unsafe_code)]

pub mod input;
pub mod meta;
pub mod perfetto;
pub mod scan;
pub mod summary;
pub mod validate;

use argh::FromArgs;
use std::path::PathBuf;
use std::process::ExitCode;

/// DFTracer trace tools: a Perfetto timeline, a summary, a validity check.
#[derive(FromArgs)]
struct Cli {
    /// print the version and exit
    #[argh(switch, short = 'V')]
    version: bool,
    #[argh(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(FromArgs)]
#[argh(subcommand)]
enum Cmd {
    Perfetto(PerfettoArgs),
    Summary(SummaryArgs),
    Validate(ValidateArgs),
}

/// Convert traces to Chrome Trace Event JSON for the Perfetto UI (ui.perfetto.dev, or
/// `vizviewer out.json` offline).
#[derive(FromArgs)]
#[argh(subcommand, name = "perfetto")]
struct PerfettoArgs {
    /// trace files or directories
    #[argh(positional)]
    traces: Vec<PathBuf>,
    /// output file (`.json`, or `.json.gz` for gzip)
    #[argh(option, short = 'o')]
    output: PathBuf,
    /// worker threads (default: one per core)
    #[argh(option, short = 'j')]
    jobs: Option<usize>,
    /// no progress lines on stderr
    #[argh(switch, short = 'q')]
    quiet: bool,
}

/// Summarize traces: events by category, time in the top functions, I/O bytes, calls and
/// bandwidth per call family and per file, losses.
#[derive(FromArgs)]
#[argh(subcommand, name = "summary")]
struct SummaryArgs {
    /// trace files or directories
    #[argh(positional)]
    traces: Vec<PathBuf>,
    /// print JSON (for scripts)
    #[argh(switch)]
    json: bool,
    /// rows of the top-N tables (default 10)
    #[argh(option, default = "10")]
    top: usize,
    /// worker threads (default: one per core)
    #[argh(option, short = 'j')]
    jobs: Option<usize>,
    /// no progress lines on stderr
    #[argh(switch, short = 'q')]
    quiet: bool,
}

/// Check traces: every line parses, every gzip member is complete, every file ends with
/// `end`, and the counts in `end` agree with the file.
#[derive(FromArgs)]
#[argh(subcommand, name = "validate")]
struct ValidateArgs {
    /// trace files or directories
    #[argh(positional)]
    traces: Vec<PathBuf>,
    /// worker threads (default: one per core)
    #[argh(option, short = 'j')]
    jobs: Option<usize>,
    /// print only failures and the closing line
    #[argh(switch, short = 'q')]
    quiet: bool,
}

/// Runs the tool with `args` (`args[0]` is the program name). Errors are one line on stderr.
pub fn run(args: impl IntoIterator<Item = String>) -> ExitCode {
    let args: Vec<String> = args.into_iter().collect();
    let prog = args.first().map_or("dftracer", |s| s.as_str());
    let rest: Vec<&str> = args.iter().skip(1).map(|s| s.as_str()).collect();
    let cli = match Cli::from_args(&["dftracer"], &rest) {
        Ok(c) => c,
        Err(e) => {
            return if e.status.is_ok() {
                print!("{}", e.output);
                ExitCode::SUCCESS
            } else {
                eprint!("{}", e.output);
                ExitCode::from(2)
            };
        }
    };
    if cli.version {
        println!("dftracer {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let Some(cmd) = cli.cmd else {
        eprintln!("{prog}: a command is needed: perfetto, summary or validate (see --help)");
        return ExitCode::from(2);
    };
    let fail = |e: std::io::Error| {
        eprintln!("dftracer: {e}");
        ExitCode::FAILURE
    };
    let need = |t: &[PathBuf]| {
        if t.is_empty() {
            eprintln!("dftracer: no trace files or directories given");
            false
        } else {
            true
        }
    };
    match cmd {
        Cmd::Perfetto(a) => {
            if !need(&a.traces) {
                return ExitCode::from(2);
            }
            let t0 = std::time::Instant::now();
            match perfetto::convert(&a.traces, &a.output, input::jobs(a.jobs), a.quiet) {
                Err(e) => fail(e),
                Ok(r) => {
                    for (p, e) in &r.errors {
                        eprintln!("dftracer: {}: {e}", p.display());
                    }
                    for (p, l) in &r.long_lines {
                        if let Some(d) = l.describe() {
                            eprintln!("dftracer: {}: {d}", p.display());
                        }
                    }
                    if r.bad_lines > 0 {
                        eprintln!("dftracer: {} line(s) are not JSON (skipped)", r.bad_lines);
                    }
                    if r.files == 0 {
                        let _ = std::fs::remove_file(&a.output);
                        eprintln!("dftracer: no trace files found in {}", names(&a.traces));
                        return ExitCode::FAILURE;
                    }
                    if r.valid_lines == 0 {
                        let _ = std::fs::remove_file(&a.output);
                        eprintln!(
                            "dftracer: no valid trace line in {} (no output written)",
                            names(
                                &r.no_valid
                                    .iter()
                                    .chain(r.errors.iter().map(|e| &e.0))
                                    .cloned()
                                    .collect::<Vec<_>>()
                            )
                        );
                        return ExitCode::FAILURE;
                    }
                    for p in &r.no_valid {
                        eprintln!("dftracer: {}: no valid line", p.display());
                    }
                    if !a.quiet {
                        let s = t0.elapsed().as_secs_f64();
                        eprintln!(
                            "perfetto: {} events from {} file(s) ({} MB, {:.2} s, {:.0} MB/s) -> {}",
                            r.events,
                            r.files,
                            r.bytes / 1_000_000,
                            s,
                            r.bytes as f64 / 1e6 / s.max(1e-9),
                            a.output.display()
                        );
                    }
                    ExitCode::SUCCESS
                }
            }
        }
        Cmd::Summary(a) => {
            if !need(&a.traces) {
                return ExitCode::from(2);
            }
            match summary::summarize(&a.traces, input::jobs(a.jobs), a.quiet || a.json) {
                Err(e) => fail(e),
                Ok(s) => {
                    if s.files == 0 {
                        eprintln!("dftracer: no trace files found in {}", names(&a.traces));
                        return ExitCode::FAILURE;
                    }
                    if s.valid_lines == 0 {
                        for (p, e) in &s.errors {
                            eprintln!("dftracer: {}: {e}", p.display());
                        }
                        for (p, l) in &s.long_lines {
                            if let Some(d) = l.describe() {
                                eprintln!("dftracer: {}: {d}", p.display());
                            }
                        }
                        eprintln!(
                            "dftracer: no valid trace line in {}",
                            names(
                                &s.no_valid
                                    .iter()
                                    .chain(s.errors.iter().map(|e| &e.0))
                                    .cloned()
                                    .collect::<Vec<_>>()
                            )
                        );
                        return ExitCode::FAILURE;
                    }
                    if a.json {
                        println!("{:#}", s.to_json(a.top));
                    } else {
                        print!("{}", s.to_text(a.top));
                    }
                    ExitCode::SUCCESS
                }
            }
        }
        Cmd::Validate(a) => {
            if !need(&a.traces) {
                return ExitCode::from(2);
            }
            match validate::validate(&a.traces, input::jobs(a.jobs)) {
                Err(e) => fail(e),
                Ok(reports) => {
                    let failed = reports.iter().filter(|r| !r.problems.is_empty()).count();
                    for r in &reports {
                        if r.problems.is_empty() {
                            if !a.quiet {
                                println!(
                                    "ok    {} ({} lines, {} events)",
                                    r.path.display(),
                                    r.lines,
                                    r.events
                                );
                            }
                        } else {
                            println!("FAIL  {}: {}", r.path.display(), r.problems.join("; "));
                        }
                    }
                    println!(
                        "validated {} file(s): {} ok, {} failed",
                        reports.len(),
                        reports.len() - failed,
                        failed
                    );
                    if reports.is_empty() {
                        eprintln!("dftracer: no trace files found in {}", names(&a.traces));
                        return ExitCode::FAILURE;
                    }
                    if failed > 0 {
                        ExitCode::FAILURE
                    } else {
                        ExitCode::SUCCESS
                    }
                }
            }
        }
    }
}

/// Paths for a message: "a, b, c" (the first 5, then "and N more").
fn names(paths: &[PathBuf]) -> String {
    let mut v: Vec<String> = paths
        .iter()
        .take(5)
        .map(|p| p.display().to_string())
        .collect();
    if paths.len() > 5 {
        v.push(format!("and {} more", paths.len() - 5));
    }
    v.join(", ")
}
