//! End-to-end tests of the core: each scenario runs in its own process (the tracer is
//! process-global), writes a real trace file, and the test reads it back with a real gzip
//! decoder (flate2) and a real JSON parser (serde_json).
//!
//! A scenario is this same test binary re-executed with `DFT_SCENARIO=<name>`: the
//! `scenario_entry` test dispatches to it and does nothing in a normal run.

use dftracer_core::{Arg, ArgsSchema, Config, FileRef, Layer, Origin, Schema, Slot, Value};
use serde_json::Value as J;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

// ---------------------------------------------------------------- helpers

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dft-core-{}-{}", name, std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// This test binary re-executed to run scenario `name`, tracing into `dir`.
fn scenario_cmd(name: &str, dir: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "scenario_entry",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("DFT_SCENARIO", name)
    .env("DFT_DIR", dir)
    .env("DFTRACER_ENABLE", "1")
    .env("DFTRACER_LOG_FILE", dir.join("t"))
    .env_remove("DFTRACER_CONFIGURATION");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs `cmd` with its output captured, and prints that output through the test's own
/// (captured) stdout: the child's libtest chatter ("1 passed; 15 filtered out") stays out of
/// the terminal and shows up only when the test fails.
fn status(cmd: &mut Command) -> ExitStatus {
    echo(cmd.output().unwrap())
}

/// Prints a finished child's output through the test harness's capture; returns its status.
fn echo(out: std::process::Output) -> ExitStatus {
    print!("{}", String::from_utf8_lossy(&out.stdout));
    print!("{}", String::from_utf8_lossy(&out.stderr));
    out.status
}

/// Starts `cmd` with its output piped (read back by [`echo`] after `wait_with_output`).
fn spawn(cmd: &mut Command) -> std::process::Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn run_scenario(name: &str, dir: &Path, env: &[(&str, &str)]) -> ExitStatus {
    status(&mut scenario_cmd(name, dir, env))
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".pfw"))
        .collect();
    v.sort();
    v
}

/// Every line of a trace, parsed. Panics on a line that is not JSON.
fn read_trace(path: &Path) -> Vec<J> {
    let raw = std::fs::read(path).unwrap();
    let mut text = Vec::new();
    if path.to_string_lossy().ends_with(".gz") {
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut text)
            .unwrap();
    } else {
        text = raw;
    }
    assert!(
        text.is_empty() || text.ends_with(b"\n"),
        "last line unterminated"
    );
    text.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            serde_json::from_slice(l)
                .unwrap_or_else(|e| panic!("bad line {e}: {}", String::from_utf8_lossy(l)))
        })
        .collect()
}

/// Number of gzip members (each a complete stream).
fn members(path: &Path) -> usize {
    let raw = std::fs::read(path).unwrap();
    let mut pos = 0;
    let mut n = 0;
    while pos < raw.len() {
        let mut d = flate2::bufread::GzDecoder::new(&raw[pos..]);
        let mut sink = Vec::new();
        d.read_to_end(&mut sink).unwrap();
        let rest = d.into_inner().len();
        pos = raw.len() - rest;
        n += 1;
    }
    n
}

fn user_events(lines: &[J]) -> Vec<&J> {
    lines
        .iter()
        .filter(|l| l["ph"] == 1 && l["cat"] != "dftracer")
        .collect()
}

fn named<'a>(lines: &'a [J], name: &str) -> Vec<&'a J> {
    lines.iter().filter(|l| l["name"] == name).collect()
}

fn start_tracer() {
    // Scenarios start no child processes, and libtest runs them on a second thread (where
    // the core would refuse to setenv and say so).
    dftracer_core::frontend::export_env_at_init(false);
    let cfg = Config::from_env();
    dftracer_core::init(cfg, Origin::App, None).expect("init");
}

// ---------------------------------------------------------------- scenarios

#[test]
fn scenario_entry() {
    let Ok(name) = std::env::var("DFT_SCENARIO") else {
        return;
    };
    match name.as_str() {
        "basic" => {
            start_tracer();
            let t = dftracer_core::now();
            for i in 0..1000 {
                dftracer_core::complete(
                    Layer::CppApp,
                    b"step",
                    b"train",
                    t + i,
                    3,
                    &[
                        Arg::int("i", i as i64),
                        Arg::new("f", Value::Float(0.1)),
                        Arg::str("s", "v"),
                        Arg::new("p", Value::Path(b"/data/x.bin")),
                    ],
                );
            }
            dftracer_core::metadata(Layer::CppApp, b"CM", b"model", b"resnet");
            dftracer_core::frontend::mark_used("example");
            dftracer_core::set_app_metadata("batch", dftracer_core::AppValue::Int(32));
            dftracer_core::finalize();
        }
        "hostile" => {
            start_tracer();
            let t = dftracer_core::now();
            let huge = vec![b'n'; 1 << 20];
            let names: Vec<&[u8]> = vec![
                b"q\"uo\\te\nnl",
                b"ctl\x01\x02\x1f\x7f",
                b"bad\x86utf8\xa5",
                &huge,
            ];
            for n in &names {
                dftracer_core::complete(
                    Layer::CppApp,
                    n,
                    b"C\"x",
                    t,
                    1,
                    &[
                        Arg::new("s", Value::Str(n)),
                        Arg::new("nan", Value::Float(f64::NAN)),
                        Arg::new("inf", Value::Float(f64::INFINITY)),
                        Arg::new("max", Value::UInt(u64::MAX)),
                        Arg::new("min", Value::Int(i64::MIN)),
                    ],
                );
            }
            dftracer_core::finalize();
        }
        "threads" => {
            let n: u64 = std::env::var("DFT_N").unwrap().parse().unwrap();
            let threads: u64 = std::env::var("DFT_THREADS").unwrap().parse().unwrap();
            start_tracer();
            let hs: Vec<_> = (0..threads)
                .map(|k| {
                    std::thread::spawn(move || {
                        for i in 0..n {
                            dftracer_core::complete(Layer::CppApp, b"e", b"c", i, k, &[]);
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            dftracer_core::finalize();
        }
        "start_only" => {
            dftracer_core::frontend::export_env_at_init(false);
            if let Err(e) = dftracer_core::init(Config::from_env(), Origin::App, None) {
                dftracer_core::frontend::eprint_line(&format!("[DFTRACER ERROR] {e}"));
            }
            dftracer_core::complete(Layer::CppApp, b"e", b"c", 1, 1, &[]);
        }
        "env_export" => {
            let dir = std::env::var("DFT_DIR").unwrap();
            let cfg = || Config::from_env();
            // SAFETY: the child only runs the core's init, reads the environment and exits.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // The forking thread is the child's only thread: init may setenv.
                dftracer_core::init(cfg(), Origin::App, Some(&format!("{dir}/child"))).unwrap();
                println!("CHILD {}", std::env::var("DFTRACER_LOG_FILE").unwrap());
                std::process::exit(0);
            }
            let mut status = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            assert_eq!(status, 0);
            // Here libtest's main thread waits for this one: init must not setenv.
            dftracer_core::init(cfg(), Origin::App, Some(&format!("{dir}/parent"))).unwrap();
            println!("PARENT {}", std::env::var("DFTRACER_LOG_FILE").unwrap());
        }
        "config_twice" => {
            for _ in 0..3 {
                let _ = Config::from_env();
            }
        }
        "failed_start_is_sticky" => {
            let dir = std::env::var("DFT_DIR").unwrap();
            let blocker = format!("{dir}/blocker");
            std::fs::write(&blocker, b"a regular file where a directory is needed").unwrap();
            dftracer_core::frontend::export_env_at_init(false);
            let cfg = Config::from_env();
            let first = dftracer_core::init(cfg.clone(), Origin::App, None).unwrap_err();
            println!("FIRST {first}");
            // The obstacle goes away, but a start from the configuration is not retried.
            std::fs::remove_file(&blocker).unwrap();
            std::fs::create_dir(&blocker).unwrap();
            let again = dftracer_core::init(cfg.clone(), Origin::App, None).unwrap_err();
            println!("AGAIN {again}");
            assert!(dftracer_core::frontend::start_failed() && !dftracer_core::is_enabled());
            dftracer_core::complete(Layer::CppApp, b"lost", b"c", 1, 1, &[]);
            // A log file named by the program is a new place: it is tried.
            dftracer_core::init(cfg, Origin::App, Some(&format!("{dir}/named/run.pfw"))).unwrap();
            dftracer_core::complete(Layer::CppApp, b"kept", b"c", 1, 1, &[]);
            dftracer_core::finalize();
        }
        "fork" => {
            start_tracer();
            for i in 0..10 {
                dftracer_core::complete(Layer::CppApp, b"parent_before", b"c", i, 1, &[]);
            }
            // SAFETY: test child; only async-signal-safe-enough work before the child exits.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                for i in 0..7 {
                    dftracer_core::complete(
                        Layer::CppApp,
                        b"child",
                        b"c",
                        i,
                        1,
                        &[Arg::new("p", Value::Path(b"/child/file"))],
                    );
                }
                // Exit through exit(): the atexit hook finalizes the child's own file.
                std::process::exit(0);
            }
            let mut status = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            assert_eq!(status, 0);
            for i in 0..5 {
                dftracer_core::complete(Layer::CppApp, b"parent_after", b"c", i, 1, &[]);
            }
            dftracer_core::finalize();
        }
        "sleep_forever" => {
            start_tracer();
            for i in 0..500 {
                dftracer_core::complete(Layer::CppApp, b"before_kill", b"c", i, 1, &[]);
            }
            std::fs::write(
                Path::new(&std::env::var("DFT_DIR").unwrap()).join("ready"),
                b"",
            )
            .unwrap();
            loop {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
        "preexisting" => {
            start_tracer();
            let expected = dftracer_core::trace_path().unwrap();
            std::fs::write(&expected, b"PRE-EXISTING GARBAGE\n").unwrap();
            std::fs::write(
                Path::new(&std::env::var("DFT_DIR").unwrap()).join("planted"),
                &expected,
            )
            .unwrap();
            for i in 0..3 {
                dftracer_core::complete(Layer::CppApp, b"e", b"c", i, 1, &[]);
            }
            dftracer_core::finalize();
        }
        "disk_full" => {
            // A file-size limit makes every write past 4 KiB fail (EFBIG), as a full disk would.
            // SAFETY: plain libc calls on this test process.
            unsafe {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                let lim = libc::rlimit {
                    rlim_cur: 4096,
                    rlim_max: 4096,
                };
                libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            }
            start_tracer();
            let payload = "x".repeat(200);
            for i in 0..20_000 {
                dftracer_core::complete(
                    Layer::CppApp,
                    b"e",
                    b"c",
                    i,
                    1,
                    &[Arg::str("p", &payload)],
                );
                if i % 5000 == 0 {
                    dftracer_core::flush();
                }
            }
            dftracer_core::finalize();
            let s = dftracer_core::stats();
            std::fs::write(
                Path::new(&std::env::var("DFT_DIR").unwrap()).join("stats"),
                format!("{} {}", s.events, s.lost),
            )
            .unwrap_or(());
            println!("STATS {} {}", s.events, s.lost);
        }
        "flush_loop" => {
            // This thread holds the writer and output locks most of the time (flush encodes,
            // compresses and writes); the signal is aimed at it, not at whichever thread the
            // kernel would pick.
            start_tracer();
            // SAFETY: pthread_self has no preconditions.
            let me = unsafe { libc::pthread_self() } as usize;
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(300));
                // SAFETY: `me` is the scenario thread, alive (it loops forever).
                unsafe { libc::pthread_kill(me as libc::pthread_t, libc::SIGTERM) };
            });
            let mut n = 0u64;
            loop {
                for _ in 0..2000 {
                    dftracer_core::complete(Layer::CppApp, b"busy", b"c", n, 1, &[]);
                    n += 1;
                }
                dftracer_core::flush();
            }
        }
        "writer_fault" => {
            start_tracer();
            for i in 0..1000 {
                dftracer_core::complete(Layer::CppApp, b"before", b"c", i, 1, &[]);
            }
            std::thread::sleep(std::time::Duration::from_millis(400));
            for i in 0..1000 {
                dftracer_core::complete(Layer::CppApp, b"after", b"c", i, 1, &[]);
            }
            dftracer_core::finalize();
            println!("PROGRAM DONE");
        }
        "dir_removed" => {
            start_tracer();
            for i in 0..100 {
                dftracer_core::complete(Layer::CppApp, b"e", b"c", i, 1, &[]);
            }
            let dir = std::env::var("DFT_DIR").unwrap();
            std::fs::remove_dir_all(&dir).unwrap();
            dftracer_core::finalize();
            let s = dftracer_core::stats();
            println!("STATS {} {}", s.events, s.lost);
        }
        "aggregate" => {
            start_tracer();
            for i in 0..1000u64 {
                dftracer_core::complete(
                    Layer::CppApp,
                    if i % 2 == 0 { b"even" } else { b"odd" },
                    b"c",
                    5_000_000 + i,
                    i % 7,
                    &[Arg::int("size", 4096), Arg::int("i", i as i64)],
                );
            }
            dftracer_core::complete(
                Layer::CppApp,
                b"once",
                b"c",
                5_002_000,
                3,
                &[Arg::int("size", 7), Arg::int("i", 1)],
            );
            dftracer_core::finalize();
        }
        "mixed" => {
            // complete_strs's records (log_event's): many more than the ring holds, of
            // lengths that vary, so that they wrap its end, fill it past half and fill it
            // (the cold paths) as well as fit quietly (the record written in place).
            start_tracer();
            let keys: &[(&[u8], Slot)] = &[
                (b"i", Slot::Int),
                (b"s", Slot::Str),
                (b"f", Slot::Float),
                (b"b", Slot::Bool),
                (b"t", Slot::Str),
            ];
            let Some(ArgsSchema::Mixed(schema)) =
                dftracer_core::intern_args(Layer::Python, b"mx", b"cat", keys)
            else {
                panic!("a mixed schema")
            };
            let text = "abcdefghijklmnopqrstuvwxyz0123456789".repeat(4);
            for i in 0..MIXED_EVENTS {
                let s = &text.as_bytes()[..(i % 101) as usize];
                let vals = [i, 0, (i as f64 * 0.5).to_bits(), i % 2, 0];
                dftracer_core::complete_strs(schema, 100 + i, i % 7, &vals, &[s, b"q\"t"]);
            }
            dftracer_core::finalize();
        }
        "static" => {
            static READ: Schema = Schema::new(
                Layer::LibcIo,
                "pread",
                "POSIX",
                &[
                    ("fd", Slot::Int),
                    ("count", Slot::UInt),
                    ("offset", Slot::Int),
                    ("ret", Slot::Int),
                ],
                "fhash",
            );
            let a: &'static FileRef = Box::leak(Box::new(FileRef::new(b"/data/a.bin")));
            let b: &'static FileRef = Box::leak(Box::new(FileRef::new(b"/data/b.bin")));
            start_tracer();
            // The same file named by a path arg first: its FH must not be written twice.
            dftracer_core::complete(
                Layer::LibcIo,
                b"open",
                b"POSIX",
                1,
                1,
                &[Arg::new("fhash", Value::Path(b"/data/b.bin"))],
            );
            let hs: Vec<_> = (0..4u64)
                .map(|t| {
                    std::thread::spawn(move || {
                        for i in 0..25_000u64 {
                            let f = if i % 2 == 0 { a } else { b };
                            let vals = [3, 4096, (i * 4096) as i64 as u64, (-1i64) as u64];
                            dftracer_core::complete_static(
                                &READ,
                                10 + i,
                                t,
                                &vals,
                                Some(f.handle()),
                            );
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            // SAFETY: test child; it only records and exits.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                dftracer_core::complete_static(&READ, 5, 1, &[9], Some(a.handle()));
                dftracer_core::complete_static(&READ, 6, 1, &[9], Some(a.handle()));
                dftracer_core::complete_static(&READ, 7, 1, &[], None);
                std::process::exit(0);
            }
            let mut status = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            assert_eq!(status, 0);
            dftracer_core::finalize();
        }
        "end_ticks" => {
            // A decorated function's exit: the event began at a raw clock read and the core
            // reads the end the same way; the writer converts both. Inside each, an event
            // timed with `now()` (a nested call of another frontend): each lasts 50 us.
            start_tracer();
            // Where the machine has a trusted TSC, the writer publishes its first conversion
            // 55 ms after it started (at the first event): wait for it, so that the ticks are
            // raw counter reads.
            let first = dftracer_core::intern(Layer::Python, b"first", b"bench").expect("schema");
            dftracer_core::complete_static(first, dftracer_core::now(), 0, &[], None);
            let t = std::time::Instant::now();
            while !dftracer_core::internals::clock::tsc_in_use()
                && t.elapsed() < std::time::Duration::from_secs(2)
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            let schema = dftracer_core::intern(Layer::Python, b"deco", b"bench").expect("schema");
            let inner = dftracer_core::intern(Layer::Python, b"inner", b"bench").expect("schema");
            for _ in 0..200 {
                let t0 = dftracer_core::frontend::ticks();
                let a = dftracer_core::now();
                while dftracer_core::now() < a + 50 {
                    std::hint::spin_loop();
                }
                let b = dftracer_core::now();
                dftracer_core::complete_static(inner, a, b - a, &[], None);
                dftracer_core::end_ticks(schema, t0, &[]);
            }
            dftracer_core::finalize();
        }
        "kinds" => {
            // A training loop's I/O: a dozen kinds of static line alternating, one file per
            // sample, and a Python-layer event with an arg (a cached middle).
            start_tracer();
            let names = [
                "open64", "fstat64", "isatty", "lseek64", "fstat64", "read", "read", "close",
            ];
            let schemas: Vec<&'static Schema> = names
                .iter()
                .map(|n| {
                    &*Box::leak(Box::new(Schema::new(
                        Layer::LibcIo,
                        n,
                        "POSIX",
                        &[("fd", Slot::Int), ("ret", Slot::Int)],
                        "fhash",
                    )))
                })
                .collect();
            let mut ts = 1_796_000_000_000_000u64;
            for step in 0..3000u64 {
                let path = format!("/data/f{step:05}.bin");
                let f: &'static FileRef = Box::leak(Box::new(FileRef::new(path.as_bytes())));
                for (k, schema) in schemas.iter().enumerate() {
                    ts += 1 + (step * 7 + k as u64) % 13;
                    let ret = if k == 5 { 65536 } else { 0 };
                    dftracer_core::complete_static(
                        schema,
                        ts,
                        1 + k as u64 % 3,
                        &[3, ret],
                        Some(f.handle()),
                    );
                }
                ts += 30;
                let args = [Arg::int("step", step as i64)];
                dftracer_core::complete(Layer::Python, b"compute", b"train", ts, 20, &args);
            }
            dftracer_core::finalize();
        }
        "nothing" => {
            start_tracer();
            dftracer_core::finalize();
        }
        "no_finalize" => {
            start_tracer();
            for i in 0..42 {
                dftracer_core::complete(Layer::CppApp, b"e", b"c", i, 1, &[]);
            }
            // Normal exit, no finalize(): the atexit hook must write everything.
            std::process::exit(0);
        }
        "drop" => {
            start_tracer();
            // A tiny ring and no drain opportunity: drops are counted, never silent.
            for i in 0..200_000 {
                dftracer_core::complete(Layer::CppApp, b"e", b"c", i, 1, &[]);
            }
            let s = dftracer_core::stats();
            std::fs::write(
                Path::new(&std::env::var("DFT_DIR").unwrap()).join("dropped"),
                s.dropped.to_string(),
            )
            .unwrap();
            dftracer_core::finalize();
        }
        other => panic!("unknown scenario {other}"),
    }
}

// ---------------------------------------------------------------- tests

#[test]
fn basic_trace_has_reference_shape() {
    let dir = scratch("basic");
    assert!(run_scenario("basic", &dir, &[("DFTRACER_WRITE_BUFFER_SIZE", "4096")]).success());
    let f = files(&dir);
    assert_eq!(f.len(), 1, "{f:?}");
    let name = f[0].file_name().unwrap().to_string_lossy().to_string();
    assert!(
        name.starts_with("t-") && name.ends_with("-app.pfw.gz"),
        "{name}"
    );
    assert!(
        members(&f[0]) > 10,
        "4096-byte buffer must cut many members"
    );
    let lines = read_trace(&f[0]);
    // Header order: HH, thread_name, CM, FH(cwd), SH(cmd), SH(exec), start.
    let heads: Vec<&str> = lines[..7]
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        heads,
        ["HH", "thread_name", "CM", "FH", "SH", "SH", "start"]
    );
    assert_eq!(lines[6]["id"], 1);
    let ev = user_events(&lines);
    assert_eq!(ev.len(), 1000);
    // Ids are sequential in file order.
    for (k, e) in ev.iter().enumerate() {
        assert_eq!(e["id"], k as u64 + 2);
        assert_eq!(e["type"], 9);
        assert_eq!(e["args"]["i"], k as u64);
        assert_eq!(e["args"]["f"], 0.1);
    }
    let keys: Vec<&String> = ev[0].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["id", "name", "cat", "type", "pid", "tid", "ts", "dur", "ph", "args"]
    );
    let arg_keys: Vec<&String> = ev[0]["args"].as_object().unwrap().keys().collect();
    assert_eq!(arg_keys, ["hhash", "i", "f", "s", "p"]);
    // One FH for the data file, defined before its first use, hash matching.
    let fh: Vec<&J> = named(&lines, "FH")
        .into_iter()
        .filter(|l| l["args"]["name"] == "/data/x.bin")
        .collect();
    assert_eq!(fh.len(), 1);
    assert_eq!(fh[0]["args"]["value"], ev[0]["args"]["p"]);
    let end = named(&lines, "end");
    assert_eq!(end.len(), 1);
    let end = end[0];
    assert_eq!(lines.last().unwrap()["name"], "end");
    assert_eq!(end["args"]["num_events"], 1001);
    assert_eq!(end["id"], 1002);
    assert_eq!(end["args"]["used"]["CPP_APP"], 1);
    assert_eq!(end["args"]["used"]["example"], 1);
    assert_eq!(end["args"]["app"]["batch"], 32);
    assert_eq!(end["args"]["dropped"], 0);
    assert_eq!(
        end["args"]["cfg"]["log_file"],
        f[0].to_string_lossy().as_ref()
    );
    let cm: Vec<&J> = named(&lines, "CM");
    assert!(cm
        .iter()
        .any(|l| l["args"]["name"] == "model" && l["args"]["value"] == "resnet"));
}

#[test]
fn hostile_strings_stay_valid_json() {
    let dir = scratch("hostile");
    assert!(run_scenario("hostile", &dir, &[]).success());
    let lines = read_trace(&files(&dir)[0]);
    let ev = user_events(&lines);
    assert_eq!(ev.len(), 4);
    assert_eq!(ev[0]["name"], "q\"uo\\te\nnl");
    assert_eq!(ev[0]["cat"], "C\"x");
    assert_eq!(ev[1]["name"], "ctl\x01\x02\x1f\x7f");
    assert_eq!(ev[2]["name"], "bad\u{fffd}utf8\u{fffd}");
    let big = ev[3]["name"].as_str().unwrap();
    assert!(
        big.ends_with("...[truncated, 1048576 bytes]"),
        "{}",
        &big[big.len() - 40..]
    );
    assert!(big.starts_with("nnnn"));
    assert_eq!(ev[0]["args"]["nan"], J::Null);
    assert_eq!(ev[0]["args"]["inf"], J::Null);
    assert_eq!(ev[0]["args"]["max"], u64::MAX);
    assert_eq!(ev[0]["args"]["min"], i64::MIN);
}

#[test]
fn eight_threads_of_a_million_events_are_all_written() {
    let dir = scratch("threads");
    let n: u64 = if cfg!(debug_assertions) {
        100_000
    } else {
        1_000_000
    };
    assert!(run_scenario(
        "threads",
        &dir,
        &[
            ("DFT_N", &n.to_string()),
            ("DFT_THREADS", "8"),
            ("DFTRACER_INC_METADATA", "0"),
        ]
    )
    .success());
    let f = files(&dir);
    assert_eq!(f.len(), 1);
    // Stream the file: count per thread, check ids strictly increase.
    let raw = std::fs::read(&f[0]).unwrap();
    let mut text = Vec::new();
    flate2::read::MultiGzDecoder::new(&raw[..])
        .read_to_end(&mut text)
        .unwrap();
    let mut per_dur = [0u64; 8];
    let mut last_id = 0u64;
    let mut end = None;
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let v: J = serde_json::from_slice(line).unwrap();
        if v["ph"] != 1 {
            continue;
        }
        let id = v["id"].as_u64().unwrap();
        assert!(id > last_id, "ids in file order");
        last_id = id;
        if v["name"] == "e" {
            per_dur[v["dur"].as_u64().unwrap() as usize] += 1;
        } else if v["name"] == "end" {
            end = Some(v);
        }
    }
    assert_eq!(per_dur, [n; 8]);
    let end = end.expect("end record");
    assert_eq!(end["id"], 8 * n + 2);
}

#[test]
fn fork_child_writes_a_self_contained_file() {
    let dir = scratch("fork");
    assert!(run_scenario("fork", &dir, &[]).success());
    let f = files(&dir);
    assert_eq!(f.len(), 2, "{f:?}");
    let (mut parent, mut child) = (None, None);
    for p in &f {
        let lines = read_trace(p);
        if p.to_string_lossy().contains("-fork.pfw.gz") {
            child = Some(lines);
        } else {
            parent = Some(lines);
        }
    }
    let (parent, child) = (parent.unwrap(), child.unwrap());
    assert_eq!(named(&parent, "parent_before").len(), 10);
    assert_eq!(named(&parent, "parent_after").len(), 5);
    assert_eq!(named(&parent, "child").len(), 0);
    assert_eq!(named(&child, "child").len(), 7);
    assert_eq!(
        named(&child, "parent_before").len(),
        0,
        "parent's events never re-written"
    );
    for rec in ["HH", "thread_name", "CM", "start", "end"] {
        assert_eq!(named(&child, rec).len(), 1, "{rec}");
    }
    // Self-contained: every hash referenced by the child is defined in the child's file.
    let defined: Vec<&J> = child
        .iter()
        .filter(|l| l["name"] == "FH" || l["name"] == "SH")
        .map(|l| &l["args"]["value"])
        .collect();
    let start = named(&child, "start")[0];
    for k in ["cmd_hash", "exec_hash", "cwd"] {
        assert!(defined.contains(&&start["args"][k]), "{k}");
    }
    let ev = named(&child, "child");
    assert!(defined.contains(&&ev[0]["args"]["p"]));
    assert_eq!(start["id"], 1);
    assert_eq!(ev[0]["id"], 2, "ids restart in the child");
    assert_ne!(start["pid"], named(&parent, "start")[0]["pid"]);
}

fn wait_for(path: &Path) {
    for _ in 0..200 {
        if path.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    panic!("{} never appeared", path.display());
}

#[test]
fn sigkill_after_a_flush_interval_leaves_a_readable_file() {
    let dir = scratch("kill");
    let mut child = spawn(&mut scenario_cmd(
        "sleep_forever",
        &dir,
        &[("DFTRACER_FLUSH_INTERVAL_MS", "200")],
    ));
    wait_for(&dir.join("ready"));
    std::thread::sleep(std::time::Duration::from_millis(700));
    child.kill().unwrap();
    echo(child.wait_with_output().unwrap());
    let f = files(&dir);
    assert_eq!(f.len(), 1);
    let lines = read_trace(&f[0]);
    assert_eq!(named(&lines, "before_kill").len(), 500);
    assert_eq!(named(&lines, "end").len(), 0);
}

#[test]
fn sigterm_finishes_the_trace_and_dies_by_the_signal() {
    use std::os::unix::process::ExitStatusExt;
    let dir = scratch("term");
    let child = spawn(&mut scenario_cmd(
        "sleep_forever",
        &dir,
        &[("DFTRACER_FLUSH_INTERVAL_MS", "60000")],
    ));
    wait_for(&dir.join("ready"));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let st = echo(child.wait_with_output().unwrap());
    assert_eq!(st.signal(), Some(libc::SIGTERM));
    let lines = read_trace(&files(&dir)[0]);
    assert_eq!(named(&lines, "before_kill").len(), 500);
    assert_eq!(named(&lines, "end").len(), 1);
}

#[test]
fn sigterm_while_a_thread_holds_the_writer_lock_still_finishes_the_trace() {
    use std::os::unix::process::ExitStatusExt;
    let dir = scratch("term-lock");
    let st = status(&mut scenario_cmd("flush_loop", &dir, &[]));
    assert_eq!(st.signal(), Some(libc::SIGTERM));
    let lines = read_trace(&files(&dir)[0]);
    let end = named(&lines, "end");
    assert_eq!(
        end.len(),
        1,
        "the handler never waited on a lock its thread held"
    );
    assert_eq!(
        end[0]["args"]["num_events"].as_u64().unwrap() as usize,
        named(&lines, "busy").len() + 1,
        "num_events counts start and every event before end"
    );
}

#[test]
fn a_writer_failure_is_reported_counted_and_the_program_goes_on() {
    let dir = scratch("fault");
    let out = scenario_output(
        "writer_fault",
        &dir,
        &[
            ("DFTRACER_FAULT", "writer"),
            ("DFTRACER_FLUSH_INTERVAL_MS", "100"),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("PROGRAM DONE"),
        "the program ran to its end"
    );
    assert!(
        stderr.contains("internal error in the tracer's writer thread"),
        "{stderr}"
    );
    // The file holds whole members: the first burst, no end record.
    let lines = read_trace(&files(&dir)[0]);
    assert_eq!(named(&lines, "before").len(), 1000);
    assert_eq!(named(&lines, "end").len(), 0);
}

#[test]
fn nothing_recorded_means_no_file() {
    let dir = scratch("nothing");
    assert!(run_scenario("nothing", &dir, &[]).success());
    assert!(files(&dir).is_empty());
}

#[test]
fn exit_without_finalize_keeps_everything() {
    let dir = scratch("nofin");
    assert!(run_scenario(
        "no_finalize",
        &dir,
        &[("DFTRACER_FLUSH_INTERVAL_MS", "60000")]
    )
    .success());
    let lines = read_trace(&files(&dir)[0]);
    assert_eq!(named(&lines, "e").len(), 42);
    assert_eq!(named(&lines, "end")[0]["args"]["num_events"], 43);
}

#[test]
fn a_preexisting_file_is_left_untouched() {
    let dir = scratch("pre");
    assert!(run_scenario("preexisting", &dir, &[]).success());
    let planted = std::fs::read_to_string(dir.join("planted")).unwrap();
    assert_eq!(std::fs::read(&planted).unwrap(), b"PRE-EXISTING GARBAGE\n");
    let f = files(&dir);
    assert_eq!(f.len(), 2, "{f:?}");
    let fresh = f.iter().find(|p| p.to_string_lossy() != planted).unwrap();
    assert!(
        fresh.to_string_lossy().ends_with("-app-1.pfw.gz"),
        "{fresh:?}"
    );
    assert_eq!(named(&read_trace(fresh), "e").len(), 3);
}

#[test]
fn drop_mode_counts_every_drop() {
    let dir = scratch("drop");
    assert!(run_scenario(
        "drop",
        &dir,
        &[
            ("DFTRACER_DROP_WHEN_FULL", "1"),
            ("DFTRACER_RING_SIZE", "524288"),
            ("DFTRACER_FLUSH_INTERVAL_MS", "60000"),
            ("DFTRACER_INC_METADATA", "1"),
        ]
    )
    .success());
    let dropped: u64 = std::fs::read_to_string(dir.join("dropped"))
        .unwrap()
        .parse()
        .unwrap();
    let lines = read_trace(&files(&dir)[0]);
    let written = named(&lines, "e").len() as u64;
    assert_eq!(
        written + dropped,
        200_000,
        "written {written} + dropped {dropped}"
    );
    assert_eq!(named(&lines, "end")[0]["args"]["dropped"], dropped);
}

#[test]
fn unwritable_log_dir_is_one_clear_error() {
    // A directory that cannot be made (below /proc): init fails before touching global state.
    let cfg = Config {
        enable: true,
        log_file: Some("/proc/nonexistent-dir-xyz/t".into()),
        ..Config::default()
    };
    let err = dftracer_core::init(cfg, Origin::App, None).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("DFTRACER_LOG_FILE=/proc/nonexistent-dir-xyz/t:"),
        "{msg}"
    );
    assert!(msg.contains("proc filesystem"), "{msg}");
    assert!(!dftracer_core::is_enabled());
    assert_eq!(dftracer_core::now(), 0);
}

#[test]
fn missing_log_directories_are_created() {
    let dir = scratch("mkdir");
    let prefix = dir.join("a/b/run");
    let st = status(scenario_cmd("basic", &dir, &[]).env("DFTRACER_LOG_FILE", &prefix));
    assert!(st.success());
    let made = dir.join("a/b");
    let f = files(&made);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(user_events(&read_trace(&f[0])).len(), 1000);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&made).unwrap().permissions().mode() & 0o777;
    // 0755 before the umask (022 in every harness we run; a stricter one only removes bits).
    assert_eq!(mode & !0o755, 0, "{mode:o}");
}

#[test]
fn a_prefix_naming_a_directory_writes_next_to_it() {
    // A prefix is a prefix (the reference 2.2.0 writes `<dir>-<hash>-app.pfw.gz` beside
    // the directory `<dir>`).
    let dir = scratch("dirprefix");
    let sub = dir.join("tr");
    std::fs::create_dir(&sub).unwrap();
    let out = scenario_cmd("basic", &dir, &[])
        .env("DFTRACER_LOG_FILE", &sub)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("DFTRACER"), "{err}");
    let f: Vec<_> = files(&dir)
        .into_iter()
        .filter(|f| f.to_string_lossy().contains(".pfw"))
        .collect();
    assert_eq!(f.len(), 1, "{f:?}");
    let name = f[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("tr-") && name.ends_with("-app.pfw.gz"),
        "{name}"
    );
    assert_eq!(user_events(&read_trace(&f[0])).len(), 1000);
    assert!(files(&sub).is_empty(), "nothing inside the directory");
}

#[test]
fn a_prefix_that_is_a_device_is_refused() {
    let dir = scratch("notfile");
    let prefix = "/dev/full";
    let out = scenario_cmd("start_only", &dir, &[("DFTRACER_LOG_FILE", prefix)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("DFTRACER")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains(&format!("DFTRACER_LOG_FILE={prefix}:"))
            && lines[0].contains("a character device"),
        "{err}"
    );
    assert!(
        files(Path::new("/dev")).is_empty(),
        "nothing created in /dev"
    );
    assert!(files(&dir).is_empty());
}

#[test]
fn a_failed_start_is_final_for_the_configuration() {
    let dir = scratch("sticky");
    let out = scenario_cmd("failed_start_is_sticky", &dir, &[])
        .env("DFTRACER_LOG_FILE", dir.join("blocker/t"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("FIRST DFTRACER_LOG_FILE="), "{text}");
    assert!(text.contains("is not a directory"), "{text}");
    assert!(
        text.contains("AGAIN tracing failed to start earlier"),
        "{text}"
    );
    // Nothing went to the configured place although it became usable.
    assert!(files(&dir.join("blocker")).is_empty());
    let f = files(&dir.join("named"));
    assert_eq!(f.len(), 1);
    let lines = read_trace(&f[0]);
    let names: Vec<&J> = user_events(&lines).iter().map(|e| &e["name"]).collect();
    assert_eq!(names, [&J::from("kept")]);
}

#[test]
fn settings_are_exported_only_from_a_single_threaded_process() {
    let dir = scratch("envexp");
    let out = scenario_output("env_export", &dir, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}{err}");
    let d = dir.display();
    assert!(text.contains(&format!("CHILD {d}/child")), "{text}");
    assert!(
        text.contains(&format!("PARENT {d}/t")),
        "the environment is left alone: {text}"
    );
    let warned: Vec<&str> = err.lines().filter(|l| l.contains("not exported")).collect();
    assert_eq!(warned.len(), 1, "{err}");
}

#[test]
fn a_bad_knob_warns_once_however_often_the_config_is_read() {
    let dir = scratch("warnonce");
    let out = scenario_output(
        "config_twice",
        &dir,
        &[
            ("DFTRACER_COMPRESSION_LEVEL", "99"),
            ("DFTRACER_INIT", "garbage"),
            ("DFTRACER_TSC", "perhaps"),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("[DFTRACER WARN]"))
        .collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("DFTRACER_COMPRESSION_LEVEL=\"99\"") && l.ends_with("using 10")),
        "{err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("DFTRACER_INIT=\"garbage\"") && l.contains("using NONE")),
        "{err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("DFTRACER_TSC=\"perhaps\"") && l.ends_with("using 1")),
        "{err}"
    );
}

fn stats_line(out: &std::process::Output) -> (u64, u64) {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.find("STATS ").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("no STATS line in {text}"));
    let mut it = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse::<u64>().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

fn scenario_output(name: &str, dir: &Path, env: &[(&str, &str)]) -> std::process::Output {
    scenario_cmd(name, dir, env).output().unwrap()
}

#[test]
fn disk_full_is_counted_and_reported_and_the_program_goes_on() {
    let dir = scratch("full");
    let out = scenario_output("disk_full", &dir, &[("DFTRACER_COMPRESSION_LEVEL", "0")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (events, lost) = stats_line(&out);
    assert_eq!(events, 20_000);
    assert!(lost > 0, "events that could not be written are counted");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot write trace file"), "{err}");
    assert!(err.contains("lost (write errors)"), "{err}");
    // What did reach the file is still readable up to the failure (complete members only).
    let f = files(&dir);
    assert_eq!(f.len(), 1);
    assert!(std::fs::metadata(&f[0]).unwrap().len() <= 4096);
}

#[test]
fn log_dir_removed_mid_run_is_one_clear_error() {
    let dir = scratch("gone");
    let out = scenario_output("dir_removed", &dir, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (events, lost) = stats_line(&out);
    assert_eq!((events, lost), (100, 100));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("DFTRACER")).collect();
    assert!(lines[0].contains("cannot create trace file"), "{err}");
    assert!(lines.iter().any(|l| l.contains("100 lost")), "{err}");
}

/// Static-schema records (what the preload library writes): the same lines as generic
/// records, one FH per file per trace file (also when a path arg named it first, also in a
/// fork child's own file), from many threads, and aggregated like any event.
/// The writer names each line's previous line of the same template to the compressor: the
/// file must come out clearly smaller than the same JSON compressed, member by member, by the
/// same encoder without those hints (and decode to every event).
#[test]
fn line_hints_make_alternating_kinds_compress_better() {
    let dir = scratch("kinds");
    // A ring that holds every record and no timed flush: the members are cut by size alone,
    // at the drain in finalize, not by when the writer happened to wake (each wake's push
    // ends a block: under load, many small pushes moved the ratio to 95.2 % in one CI run).
    let env = [
        ("DFTRACER_RING_SIZE", "16777216"),
        ("DFTRACER_FLUSH_INTERVAL_MS", "600000"),
    ];
    assert!(run_scenario("kinds", &dir, &env).success());
    let fs = files(&dir);
    assert_eq!(fs.len(), 1, "{fs:?}");
    let lines = read_trace(&fs[0]);
    assert_eq!(user_events(&lines).len(), 3000 * 9);
    let raw = std::fs::read(&fs[0]).unwrap();
    let mut plain = 0;
    let mut pos = 0;
    let mut d = dftracer_core::internals::deflate::FastDeflate::new();
    while pos < raw.len() {
        let mut dec = flate2::bufread::GzDecoder::new(&raw[pos..]);
        let mut json = Vec::new();
        dec.read_to_end(&mut json).unwrap();
        pos = raw.len() - dec.into_inner().len();
        let mut out = Vec::new();
        d.compress(&json, &mut out);
        plain += out.len() + 18;
    }
    assert!(
        raw.len() * 100 <= plain * 93,
        "file {} bytes, the same members without hints {plain}",
        raw.len()
    );
}

#[test]
fn end_ticks_records_from_its_begin_to_the_clock_read_inside() {
    let dir = scratch("end_ticks");
    assert!(run_scenario("end_ticks", &dir, &[]).success());
    let fs = files(&dir);
    assert_eq!(fs.len(), 1, "{fs:?}");
    let lines = read_trace(&fs[0]);
    let ev = user_events(&lines);
    assert_eq!(ev.len(), 401);
    assert_eq!(ev[0]["name"].as_str(), Some("first"));
    let ev = &ev[1..];
    let span = |e: &J| (e["ts"].as_u64().unwrap(), e["dur"].as_u64().unwrap());
    let mut end = 0;
    // Each inner event (recorded first) and the event around it.
    for pair in ev.chunks(2) {
        let (inner, outer) = (&pair[0], &pair[1]);
        assert_eq!(
            (inner["name"].as_str(), outer["name"].as_str()),
            (Some("inner"), Some("deco"))
        );
        let ((its, idur), (ts, dur)) = (span(inner), span(outer));
        assert!(idur >= 50 && dur >= 50, "{inner} {outer}");
        // Raw ticks convert to the now() values of the same instants: nested stays nested.
        assert!(
            ts <= its && its + idur <= ts + dur,
            "{inner} is not inside {outer}"
        );
        assert!(
            ts >= end,
            "{outer} began before the previous event ended ({end})"
        );
        end = ts + dur;
    }
}

/// Events of the "mixed" scenario.
const MIXED_EVENTS: u64 = 60_000;

/// Every record of a mixed schema (`complete_strs`, what `log_event` records through) reads
/// back as given, in order, through a small ring that they wrap and fill many times over.
#[test]
fn mixed_records_read_back_through_a_small_ring() {
    let dir = scratch("mixed");
    assert!(run_scenario("mixed", &dir, &[("DFTRACER_RING_SIZE", "524288")]).success());
    let lines = read_trace(&files(&dir)[0]);
    let events = named(&lines, "mx");
    assert_eq!(events.len() as u64, MIXED_EVENTS);
    let text = "abcdefghijklmnopqrstuvwxyz0123456789".repeat(4);
    for (i, e) in events.iter().enumerate() {
        let i = i as u64;
        assert_eq!(
            (&e["cat"], &e["ts"], &e["dur"]),
            (&J::from("cat"), &J::from(100 + i), &J::from(i % 7))
        );
        let args = e["args"].as_object().unwrap();
        let keys: Vec<&str> = args.keys().map(|k| k.as_str()).collect();
        assert_eq!(keys, ["hhash", "i", "s", "f", "b", "t"], "{e}");
        assert_eq!(args["i"], i, "{e}");
        assert_eq!(args["s"], &text[..(i % 101) as usize], "{e}");
        assert_eq!(args["f"], i as f64 * 0.5, "{e}");
        assert_eq!(args["b"], i % 2 == 1, "{e}");
        assert_eq!(args["t"], "q\"t", "{e}");
    }
}

#[test]
fn static_records_read_back_with_their_file_hashes() {
    let dir = scratch("static");
    assert!(run_scenario("static", &dir, &[]).success());
    let fs = files(&dir);
    assert_eq!(fs.len(), 2, "{fs:?}");
    let (mut parent, mut child) = (None, None);
    for f in &fs {
        if f.to_string_lossy().contains("-fork") {
            child = Some(read_trace(f));
        } else {
            parent = Some(read_trace(f));
        }
    }
    let (parent, child) = (parent.unwrap(), child.unwrap());
    let fh = |lines: &[J], path: &str| {
        lines
            .iter()
            .filter(|l| l["name"] == "FH" && l["args"]["name"] == path)
            .map(|l| l["args"]["value"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let (ha, hb) = (fh(&parent, "/data/a.bin"), fh(&parent, "/data/b.bin"));
    assert_eq!((ha.len(), hb.len()), (1, 1), "one FH per file");
    let reads = named(&parent, "pread");
    assert_eq!(reads.len(), 100_000);
    let first_a = parent
        .iter()
        .position(|l| l["name"] == "pread" && l["args"]["fhash"] == ha[0].as_str())
        .unwrap();
    let fh_a = parent
        .iter()
        .position(|l| l["name"] == "FH" && l["args"]["name"] == "/data/a.bin")
        .unwrap();
    assert!(
        fh_a < first_a,
        "FH precedes the first event naming the file"
    );
    for r in &reads {
        assert_eq!(r["cat"], "POSIX");
        assert_eq!(r["type"], 3);
        let args = r["args"].as_object().unwrap();
        let keys: Vec<&str> = args.keys().map(|k| k.as_str()).collect();
        assert_eq!(keys, ["hhash", "fd", "count", "offset", "ret", "fhash"]);
        assert_eq!(args["fd"], 3);
        assert_eq!(args["count"], 4096);
        assert_eq!(args["ret"], -1);
        let off = args["offset"].as_u64().unwrap();
        let want = if off / 4096 % 2 == 0 { &ha[0] } else { &hb[0] };
        assert_eq!(args["fhash"], want.as_str());
    }
    let ids: std::collections::HashSet<u64> =
        parent.iter().filter_map(|l| l["id"].as_u64()).collect();
    assert_eq!(
        ids.len(),
        parent.iter().filter(|l| l["id"].is_u64()).count()
    );
    // The child's own file: its own FH for a, slots as given, no file when none given.
    assert_eq!(fh(&child, "/data/a.bin").len(), 1);
    let creads = named(&child, "pread");
    assert_eq!(creads.len(), 3);
    assert_eq!(creads[0]["args"]["fd"], 9);
    assert!(creads[0]["args"].get("count").is_none());
    assert!(creads[2]["args"].get("fhash").is_none());

    let dir = scratch("static-agg");
    let ok = run_scenario("static", &dir, &[("DFTRACER_ENABLE_AGGREGATION", "1")]);
    assert!(ok.success());
    let parent = files(&dir)
        .into_iter()
        .find(|f| !f.to_string_lossy().contains("-fork"))
        .unwrap();
    let lines = read_trace(&parent);
    let agg: Vec<&J> = lines
        .iter()
        .filter(|l| l["ph"] == 3 && l["name"] == "pread")
        .collect();
    let count: u64 = agg
        .iter()
        .map(|a| a["args"]["dft_cnt"].as_u64().unwrap())
        .sum();
    assert_eq!(count, 100_000);
    // The same count in every event, still summed (readers add up `count_sum`).
    let bytes: u64 = agg
        .iter()
        .map(|a| a["args"]["count_sum"].as_u64().unwrap())
        .sum();
    assert_eq!(bytes, 100_000 * 4096);
    assert!(agg.iter().all(|a| a["args"].get("count").is_none()));
}

#[test]
fn aggregation_folds_events_into_ph3_records_before_end() {
    let dir = scratch("agg");
    let ok = run_scenario(
        "aggregate",
        &dir,
        &[
            ("DFTRACER_ENABLE_AGGREGATION", "1"),
            ("DFTRACER_TRACE_INTERVAL_MS", "1"),
        ],
    );
    assert!(ok.success());
    let lines = read_trace(&files(&dir)[0]);
    assert!(
        user_events(&lines).is_empty(),
        "events are folded, not written"
    );
    let agg: Vec<&J> = lines.iter().filter(|l| l["ph"] == 3).collect();
    // ts 5,000,000..5,000,999 us with 1 ms buckets: one bucket per name.
    assert_eq!(agg.len(), 3, "{agg:?}");
    for a in agg.iter().filter(|a| a["name"] != "once") {
        assert_eq!(a["ts"], 5_000_000);
        assert_eq!(a["args"]["dft_cnt"], 500);
        assert!(
            a["args"].get("size").is_none(),
            "dft_cnt > 1: _min/_max/_sum even for a value that never varied"
        );
        assert_eq!(a["args"]["size_min"], 4096);
        assert_eq!(a["args"]["size_max"], 4096);
        assert_eq!(a["args"]["size_sum"], 500 * 4096);
        assert_eq!(a["args"]["dur_min"], 0);
        assert_eq!(a["args"]["dur_max"], 6);
        assert!(a["args"]["i_sum"].as_u64().unwrap() > 0);
    }
    let even = agg.iter().find(|a| a["name"] == "even").unwrap();
    assert_eq!(even["args"]["i_sum"], (0..1000u64).step_by(2).sum::<u64>());
    // A bucket of one event: plain values.
    let once = agg.iter().find(|a| a["name"] == "once").unwrap();
    assert_eq!(once["args"]["dft_cnt"], 1);
    assert_eq!(once["args"]["dur"], 3);
    assert_eq!(once["args"]["size"], 7);
    let end = lines.last().unwrap();
    assert_eq!(end["name"], "end", "end is the last line");
    assert_eq!(end["args"]["aggregated"], 1001);

    // The same program with aggregation off: per-name sums of every numeric arg and of
    // `dur`, and the number of events, agree exactly with what the ph 3 records carry.
    let plain_dir = scratch("agg-off");
    assert!(run_scenario("aggregate", &plain_dir, &[]).success());
    let plain = read_trace(&files(&plain_dir)[0]);
    let sums = |recs: &[J], aggregated: bool| {
        let mut m = std::collections::BTreeMap::<(String, String), i64>::new();
        for l in recs {
            let name = l["name"].as_str().unwrap_or("").to_string();
            if l["cat"] == "dftracer" {
                continue;
            }
            let args = &l["args"];
            let (want_ph, cnt) = if aggregated {
                (3, args["dft_cnt"].as_i64().unwrap_or(0))
            } else {
                (1, 1)
            };
            if l["ph"] != want_ph {
                continue;
            }
            *m.entry((name.clone(), "#events".into())).or_default() += cnt;
            for key in ["dur", "size", "i"] {
                let v = if aggregated {
                    args.get(format!("{key}_sum"))
                        .or_else(|| args.get(key))
                        .and_then(J::as_i64)
                } else if key == "dur" {
                    l["dur"].as_i64()
                } else {
                    args[key].as_i64()
                };
                *m.entry((name.clone(), key.into())).or_default() += v.unwrap_or(0);
            }
        }
        m
    };
    let (off, on) = (sums(&plain, false), sums(&lines, true));
    assert_eq!(off.len(), 12, "{off:?}");
    assert_eq!(off, on);
}

#[test]
fn selective_aggregation_folds_only_what_the_rules_pick() {
    let dir = scratch("agg-selective");
    let rules = dir.join("rules.yaml");
    std::fs::write(
        &rules,
        "inclusion:\n  - \"cat == 'c' AND name LIKE 'e*'\"\n  - \"dur == 3\"\nexclusion:\n  - \"name IN {odd}\"\n",
    )
    .unwrap();
    let out = scenario_cmd(
        "aggregate",
        &dir,
        &[
            ("DFTRACER_ENABLE_AGGREGATION", "1"),
            ("DFTRACER_AGGREGATION_TYPE", "SELECTIVE"),
            ("DFTRACER_AGGREGATION_FILE", rules.to_str().unwrap()),
        ],
    )
    .output()
    .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("DFTRACER"), "{stderr}");
    let trace = files(&dir)
        .into_iter()
        .find(|f| f.to_string_lossy().contains(".pfw"))
        .unwrap();
    let lines = read_trace(&trace);
    // even: aggregated; odd: excluded, written one by one; once: dur == 3, aggregated.
    let agg: Vec<&J> = lines.iter().filter(|l| l["ph"] == 3).collect();
    let mut names: Vec<&str> = agg.iter().map(|a| a["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["even", "once"]);
    assert_eq!(named(&lines, "odd").len(), 500);
    assert!(named(&lines, "odd").iter().all(|l| l["ph"] == 1));
    let end = lines.last().unwrap();
    assert_eq!(end["args"]["aggregated"], 501);
    // The end record says what was in force.
    assert_eq!(end["args"]["cfg"]["aggregation_enable"], 1);
    assert_eq!(end["args"]["cfg"]["aggregation_type"], "SELECTIVE");
    assert_eq!(
        end["args"]["cfg"]["aggregation_file"],
        rules.to_str().unwrap()
    );
}

#[test]
fn selective_rules_know_the_reference_s_app_rank_and_tags() {
    let dir = scratch("agg-fields");
    let rules = dir.join("rules.yaml");
    // `app` is the executable's name (this test binary: lifecycle-<hash>).
    std::fs::write(
        &rules,
        "inclusion:\n  - \"name LIKE 'e*' AND app LIKE 'lifecycle*' AND tags.size == 4096\"\n  - \"tags.i == 1 AND rank == 2\"\n",
    )
    .unwrap();
    let out = scenario_cmd(
        "aggregate",
        &dir,
        &[
            ("DFTRACER_ENABLE_AGGREGATION", "1"),
            ("DFTRACER_AGGREGATION_TYPE", "SELECTIVE"),
            ("DFTRACER_AGGREGATION_FILE", rules.to_str().unwrap()),
            ("OMPI_COMM_WORLD_RANK", "2"),
        ],
    )
    .output()
    .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("DFTRACER"), "{stderr}");
    let trace = files(&dir)
        .into_iter()
        .find(|f| f.to_string_lossy().contains(".pfw"))
        .unwrap();
    let lines = read_trace(&trace);
    let count = |name: &str, ph: i64| -> i64 {
        named(&lines, name)
            .iter()
            .filter(|l| l["ph"] == ph)
            .map(|l| l["args"]["dft_cnt"].as_i64().unwrap_or(1))
            .sum()
    };
    // even: all 500 (size 4096); odd: only i == 1 (rank 2); once: i == 1.
    assert_eq!(count("even", 3), 500);
    assert_eq!(count("even", 1), 0);
    assert_eq!(count("odd", 3), 1);
    assert_eq!(count("odd", 1), 499);
    assert_eq!(count("once", 3), 1);
    assert_eq!(lines.last().unwrap()["args"]["aggregated"], 502);
}

#[test]
fn selective_without_a_rules_file_aggregates_every_event() {
    // The reference 2.2.0: SELECTIVE and no file aggregates every event, silently.
    let dir = scratch("agg-selective-nofile");
    let out = scenario_cmd(
        "aggregate",
        &dir,
        &[
            ("DFTRACER_ENABLE_AGGREGATION", "1"),
            ("DFTRACER_AGGREGATION_TYPE", "SELECTIVE"),
        ],
    )
    .env_remove("DFTRACER_AGGREGATION_FILE")
    .output()
    .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("DFTRACER"), "{stderr}");
    let trace = files(&dir)
        .into_iter()
        .find(|f| f.to_string_lossy().contains(".pfw"))
        .unwrap();
    let lines = read_trace(&trace);
    assert!(user_events(&lines).is_empty());
    let end = lines.last().unwrap();
    assert_eq!(end["args"]["aggregated"], 1001);
    assert_eq!(end["args"]["cfg"]["aggregation_enable"], 1);
    assert_eq!(end["args"]["cfg"]["aggregation_type"], "SELECTIVE");
    assert_eq!(end["args"]["cfg"]["aggregation_file"], "");
}

#[test]
fn a_bad_rules_file_is_one_error_line_and_no_aggregation() {
    for (label, content) in [
        ("syntax", Some("inclusion:\n  - \"name = 'even'\"\n")),
        ("yaml", Some("inclusion: [unclosed\n")),
        ("missing", None),
    ] {
        let dir = scratch(&format!("agg-bad-{label}"));
        let rules = dir.join("rules.yaml");
        if let Some(c) = content {
            std::fs::write(&rules, c).unwrap();
        }
        let out = scenario_cmd(
            "aggregate",
            &dir,
            &[
                ("DFTRACER_ENABLE_AGGREGATION", "1"),
                ("DFTRACER_AGGREGATION_TYPE", "SELECTIVE"),
                ("DFTRACER_AGGREGATION_FILE", rules.to_str().unwrap()),
            ],
        )
        .output()
        .unwrap();
        assert!(out.status.success(), "{label}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let errs: Vec<&str> = stderr.lines().filter(|l| l.contains("DFTRACER")).collect();
        assert_eq!(errs.len(), 1, "{label}: {stderr}");
        assert!(
            errs[0].starts_with("[DFTRACER ERROR] DFTRACER_AGGREGATION_FILE="),
            "{}",
            errs[0]
        );
        assert!(errs[0].ends_with("aggregation is off"), "{}", errs[0]);
        let trace = files(&dir)
            .into_iter()
            .find(|f| f.to_string_lossy().contains(".pfw"))
            .unwrap();
        let lines = read_trace(&trace);
        assert!(lines.iter().all(|l| l["ph"] != 3), "{label}");
        assert_eq!(user_events(&lines).len(), 1001, "{label}");
        let end = lines.last().unwrap();
        assert_eq!(end["name"], "end");
        // Not "aggregation_enable":1: nothing was aggregated.
        assert_eq!(end["args"]["cfg"]["aggregation_enable"], 0, "{label}");
        assert!(
            end["args"]["cfg"].get("aggregation_file").is_none(),
            "{label}"
        );
    }
}
