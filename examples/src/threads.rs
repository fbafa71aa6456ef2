//! A multi-threaded workload traced through the core: N threads each run "steps" that read a
//! small file and compute, recording one event per step and one per read.
//!
//! `cargo run --release -p dftracer-examples --bin threads -- <out_dir> [threads] [steps]`
//! prints the trace path and a one-line summary.

use dftracer_core::{Arg, Config, Layer, Origin, Value};
use std::io::Read;

const USAGE: &str = "usage: threads [out_dir (default ./dft-example)] [threads (default 4)] \
[steps (default 10000)]
N threads each run `steps` steps that read a small file and compute, traced through the core
into out_dir/threads-<hash>-app.pfw.gz; prints the trace path and a one-line summary.";

fn main() -> std::process::ExitCode {
    let first = std::env::args().nth(1);
    match first.as_deref() {
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return std::process::ExitCode::SUCCESS;
        }
        Some("-V" | "--version") => {
            println!("threads (dftracer-examples) {}", env!("CARGO_PKG_VERSION"));
            return std::process::ExitCode::SUCCESS;
        }
        Some(a) if a.starts_with('-') => {
            eprintln!("threads: unknown option {a}\n{USAGE}");
            return std::process::ExitCode::from(2);
        }
        _ => {}
    }
    let mut args = std::env::args().skip(1);
    let out = args.next().unwrap_or_else(|| "./dft-example".into());
    let threads: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(4);
    let steps: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    if let Err(e) = std::fs::create_dir_all(&out) {
        eprintln!("threads: cannot create {out}: {e}");
        return std::process::ExitCode::FAILURE;
    }
    let data = format!("{out}/input.bin");
    std::fs::write(&data, vec![7u8; 4096]).expect("write input");

    let mut cfg = Config::from_env();
    cfg.enable = true;
    if let Err(e) = dftracer_core::init(cfg, Origin::App, Some(&format!("{out}/threads"))) {
        eprintln!("threads: {e}");
        return std::process::ExitCode::FAILURE;
    }
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let data = data.clone();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 4096];
                let mut acc = 0u64;
                for step in 0..steps {
                    let t0 = dftracer_core::now();
                    if step % 100 == 0 {
                        let r0 = dftracer_core::now();
                        let n = std::fs::File::open(&data)
                            .and_then(|mut f| f.read(&mut buf))
                            .unwrap_or(0);
                        dftracer_core::complete(
                            Layer::CppApp,
                            b"read",
                            b"io",
                            r0,
                            dftracer_core::now() - r0,
                            &[
                                Arg::new("fhash", Value::Path(data.as_bytes())),
                                Arg::int("ret", n as i64),
                            ],
                        );
                    }
                    acc = acc.wrapping_add(buf.iter().map(|&b| b as u64).sum::<u64>() ^ step);
                    dftracer_core::complete(
                        Layer::CppApp,
                        b"step",
                        b"compute",
                        t0,
                        dftracer_core::now() - t0,
                        &[Arg::int("thread", t as i64), Arg::int("step", step as i64)],
                    );
                }
                acc
            })
        })
        .collect();
    let checksum = handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .fold(0u64, u64::wrapping_add);
    dftracer_core::finalize();
    let s = dftracer_core::stats();
    println!("trace: {}", s.path.as_deref().unwrap_or("(none)"));
    println!(
        "summary: {} threads, {} events, {} bytes written, {} dropped, {} lost (checksum {checksum})",
        threads, s.events, s.bytes, s.dropped, s.lost
    );
    std::process::ExitCode::SUCCESS
}
