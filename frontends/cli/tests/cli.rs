//! The `dftracer` binary on real traces: this test binary, re-executed with
//! `DFT_SCENARIO=io`, writes a trace through the core (threads, I/O-like events with files,
//! stdio reads, counters); the tests run `dftracer` on it and check what it says against an
//! independent reading of the same files (flate2 + serde_json).

use dftracer_core::{Arg, Config, Layer, Origin, Value};
use serde_json::Value as J;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

const THREADS: u64 = 3;
const STEPS: u64 = 400;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dft-cli-{}-{}", name, std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the `io` scenario into `dir` (optionally under `wrap`, e.g. `unshare`).
fn write_trace(dir: &Path, env: &[(&str, &str)], wrap: &[&str]) {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = if wrap.is_empty() {
        Command::new(&exe)
    } else {
        let mut c = Command::new(wrap[0]);
        c.args(&wrap[1..]).arg(&exe);
        c
    };
    cmd.args([
        "--exact",
        "scenario_entry",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("DFT_SCENARIO", "io")
    .env("DFTRACER_ENABLE", "1")
    .env("DFTRACER_LOG_FILE", dir.join("t"))
    .env_remove("DFTRACER_CONFIGURATION");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn scenario_entry() {
    let Ok(name) = std::env::var("DFT_SCENARIO") else {
        return;
    };
    assert_eq!(name, "io");
    dftracer_core::frontend::export_env_at_init(false);
    dftracer_core::init(Config::from_env(), Origin::App, None).expect("init");
    // Explicit times: the same trace content with aggregation on or off.
    let base = 1_700_000_000_000_000u64;
    let hs: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::spawn(move || {
                let path = format!("/data/part-{t}.bin");
                for i in 0..STEPS {
                    let ts = base + t * 1_000_000 + i * 50;
                    let ret: i64 = if i % 50 == 49 { -1 } else { 4096 };
                    dftracer_core::complete(
                        Layer::LibcIo,
                        b"read",
                        b"POSIX",
                        ts,
                        7 + i % 5,
                        &[
                            Arg::new("fhash", Value::Path(path.as_bytes())),
                            Arg::int("count", 4096),
                            Arg::int("ret", ret),
                        ],
                    );
                    if i % 4 == 0 {
                        dftracer_core::complete(
                            Layer::LibcIo,
                            b"pwrite64",
                            b"POSIX",
                            ts + 20,
                            11,
                            &[
                                Arg::new("fhash", Value::Path(b"/data/out.bin")),
                                Arg::int("count", 1000),
                                Arg::int("ret", 1000),
                            ],
                        );
                        dftracer_core::complete(
                            Layer::LibcIo,
                            b"fread",
                            b"STDIO",
                            ts + 35,
                            2,
                            &[
                                Arg::new("fhash", Value::Path(b"/data/table.csv")),
                                Arg::int("size", 8),
                                Arg::int("count", 100),
                                Arg::int("ret", 50),
                            ],
                        );
                    }
                    dftracer_core::complete(
                        Layer::Python,
                        b"train_step",
                        b"app",
                        ts + 40,
                        9,
                        &[Arg::int("step", i as i64)],
                    );
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    for i in 0..5u64 {
        dftracer_core::counter(
            Layer::Psutil,
            b"cpu",
            b"sys",
            base + i * 1_000_000,
            &[
                Arg::new("user_pct", Value::Float(10.5 + i as f64)),
                Arg::int("procs", 3),
                Arg::str("unit", "pct"),
            ],
        );
    }
    dftracer_core::finalize();
}

fn dftracer(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dftracer"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn trace_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".pfw.gz"))
        .collect();
    v.sort();
    v
}

fn read_lines(path: &Path) -> Vec<J> {
    let mut text = String::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What the summary should say, computed from serde_json values.
#[derive(Debug, PartialEq, Default)]
struct Oracle {
    by_cat: BTreeMap<String, u64>,
    /// family → (calls, bytes, µs)
    families: BTreeMap<String, (u64, u64, u64)>,
}

fn oracle(lines: &[J]) -> Oracle {
    let mut o = Oracle::default();
    for l in lines {
        let cat = l["cat"].as_str().unwrap_or("");
        if cat == "dftracer" {
            continue;
        }
        let a = &l["args"];
        let (n, dur, ret, size) = match l["ph"].as_u64() {
            Some(1) => (
                1,
                l["dur"].as_u64().unwrap(),
                a["ret"].as_i64(),
                a["size"].as_u64(),
            ),
            Some(3) => (
                a["dft_cnt"].as_u64().unwrap(),
                a.get("dur_sum")
                    .or(a.get("dur"))
                    .and_then(J::as_u64)
                    .unwrap(),
                a.get("ret_sum").or(a.get("ret")).and_then(J::as_i64),
                a.get("size").or(a.get("size_max")).and_then(J::as_u64),
            ),
            _ => continue,
        };
        *o.by_cat.entry(cat.into()).or_default() += n;
        if cat == "POSIX" || cat == "STDIO" {
            let name = l["name"].as_str().unwrap();
            let fam = match name {
                "read" | "fread" => "read",
                "pwrite64" => "write",
                _ => "other",
            };
            // Plain events: a failed call moves nothing. (The aggregated sum already holds
            // the -1s; the workload's failures are all in `read`, whose bytes the test
            // compares per event below.)
            let mut bytes = ret.unwrap_or(0).max(0) as u64;
            if name == "fread" {
                bytes *= size.unwrap_or(1);
            }
            let e = o.families.entry(fam.into()).or_default();
            e.0 += n;
            e.1 += bytes;
            e.2 += dur;
        }
    }
    o
}

fn summary_json(dir: &Path) -> J {
    let (ok, out, err) = dftracer(&["summary", "--json", dir.to_str().unwrap()]);
    assert!(ok, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn from_summary(s: &J) -> Oracle {
    let t = &s["total"];
    let mut o = Oracle::default();
    for (k, v) in t["events_by_category"].as_object().unwrap() {
        o.by_cat.insert(k.clone(), v.as_u64().unwrap());
    }
    for (k, v) in t["io_by_family"].as_object().unwrap() {
        o.families.insert(
            k.clone(),
            (
                v["calls"].as_u64().unwrap(),
                v["bytes"].as_u64().unwrap(),
                (v["seconds"].as_f64().unwrap() * 1e6).round() as u64,
            ),
        );
    }
    o
}

#[test]
fn summary_agrees_with_an_independent_reading_with_aggregation_off_and_on() {
    let plain = scratch("plain");
    write_trace(&plain, &[], &[]);
    let files = trace_files(&plain);
    assert_eq!(files.len(), 1);
    let lines = read_lines(&files[0]);
    let want = oracle(&lines);
    assert_eq!(want.by_cat["POSIX"], THREADS * (STEPS + STEPS / 4));
    let s = summary_json(&plain);
    assert_eq!(from_summary(&s), want);
    let total = &s["total"];
    assert_eq!(s["processes"].as_array().unwrap().len(), 1);
    assert_eq!(s["bad_lines"], 0);
    assert_eq!(total["counters"], 5);
    assert_eq!(total["dropped"], 0);
    assert_eq!(total["files_without_end"], 0);
    // Per file: paths from the FH records.
    let per_file = total["io_by_file"].as_array().unwrap();
    let part0 = per_file
        .iter()
        .find(|f| f["file"] == "/data/part-0.bin")
        .unwrap();
    assert_eq!(part0["calls"], STEPS);
    assert_eq!(part0["bytes"], (STEPS - STEPS / 50) * 4096);
    let top = total["top_functions"].as_array().unwrap();
    assert_eq!(top[0]["name"], "read");
    assert_eq!(top[0]["calls"], THREADS * STEPS);

    // The same program with aggregation on: the same totals (the failed reads' -1 are in
    // ret_sum, so the read family's bytes differ by exactly those).
    let agg = scratch("agg");
    write_trace(&agg, &[("DFTRACER_ENABLE_AGGREGATION", "1")], &[]);
    let agg_lines = read_lines(&trace_files(&agg)[0]);
    assert!(agg_lines.iter().any(|l| l["ph"] == 3));
    assert!(!agg_lines
        .iter()
        .any(|l| l["ph"] == 1 && l["cat"] == "POSIX"));
    let mut got = from_summary(&summary_json(&agg));
    let failed = THREADS * (STEPS / 50);
    let read = got.families.get_mut("read").unwrap();
    read.1 += failed; // ret_sum counted each failed read as -1 byte
    assert_eq!(got, want);
}

#[test]
fn text_summary_names_the_process_and_its_io() {
    let dir = scratch("text");
    write_trace(&dir, &[], &[]);
    let (ok, out, err) = dftracer(&["summary", dir.to_str().unwrap()]);
    assert!(ok, "{err}");
    for want in [
        "1 file(s), 1 process(es)",
        "I/O by call family",
        "/data/part-2.bin",
        "train_step",
        "losses: 0 dropped, 0 lost; 0 of 1 file(s) without an end record",
    ] {
        assert!(out.contains(want), "{want:?} missing from:\n{out}");
    }
}

#[test]
fn perfetto_json_has_every_event_with_names_files_counters_and_buckets() {
    let dir = scratch("pf");
    write_trace(&dir, &[], &[]);
    let agg = scratch("pf-agg");
    write_trace(&agg, &[("DFTRACER_ENABLE_AGGREGATION", "1")], &[]);
    let out = dir.join("out.json.gz");
    let (ok, _, err) = dftracer(&[
        "perfetto",
        dir.to_str().unwrap(),
        trace_files(&agg)[0].to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(err.contains("perfetto: "), "{err}");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&out).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let doc: J = serde_json::from_str(&text).unwrap();
    let ev = doc["traceEvents"].as_array().unwrap();
    assert!(ev.iter().all(|e| e["ph"].is_string()));
    let plain = read_lines(&trace_files(&dir)[0]);
    let plain_pid = plain[0]["pid"].as_u64().unwrap();
    let complete = plain.iter().filter(|l| l["ph"] == 1).count();
    let xs: Vec<&J> = ev
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == plain_pid)
        .collect();
    assert_eq!(xs.len(), complete);
    // µs, file paths from FH.
    let first_read = plain.iter().find(|l| l["name"] == "read").unwrap();
    let x = xs
        .iter()
        .find(|e| e["name"] == "read" && e["ts"] == first_read["ts"])
        .unwrap();
    assert_eq!(x["dur"], first_read["dur"]);
    assert!(x["args"]["file"]
        .as_str()
        .unwrap()
        .starts_with("/data/part-"));
    assert_eq!(x["args"]["fhash"], first_read["args"]["fhash"]);
    // Counters: numeric args only.
    let cs: Vec<&J> = ev.iter().filter(|e| e["ph"] == "C").collect();
    assert_eq!(cs.len(), 10);
    assert!(cs
        .iter()
        .all(|c| c["args"].get("unit").is_none() && c["args"]["user_pct"].is_f64()));
    // Names.
    let meta = |what: &str| -> Vec<(u64, u64, String)> {
        ev.iter()
            .filter(|e| e["ph"] == "M" && e["name"] == what)
            .map(|e| {
                (
                    e["pid"].as_u64().unwrap(),
                    e["tid"].as_u64().unwrap_or(0),
                    e["args"]["name"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let host = dftracer_core::frontend::hostname();
    let procs = meta("process_name");
    assert_eq!(procs.len(), 2, "{procs:?}");
    assert!(
        procs.iter().all(|p| p.2.ends_with(&format!(" @ {host}"))),
        "{procs:?}"
    );
    let threads = meta("thread_name");
    // Main thread + 3 workers of each trace, and one aggregated track per (thread, name).
    let agg_tracks: Vec<_> = threads
        .iter()
        .filter(|t| t.2.ends_with(" (aggregated)"))
        .collect();
    assert_eq!(agg_tracks.len(), 3 * 4, "{threads:?}");
    // Buckets carry their counts; the counts add up to the events folded.
    let agg_pid = read_lines(&trace_files(&agg)[0])[0]["pid"]
        .as_u64()
        .unwrap();
    let folded: u64 = ev
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == agg_pid && e["args"]["dft_cnt"].is_u64())
        .map(|e| e["args"]["dft_cnt"].as_u64().unwrap())
        .sum();
    assert_eq!(folded, THREADS * (STEPS * 2 + STEPS / 2));
}

#[test]
fn processes_of_two_hosts_with_the_same_pid_stay_apart() {
    // Two "nodes" (UTS namespaces with their own hostname), each program pid 1 in its own
    // pid namespace: the same pid on two hosts.
    let probe = Command::new("unshare")
        .args(["-u", "-p", "-f", "true"])
        .status();
    assert!(
        probe.is_ok_and(|s| s.success()),
        "unshare -u -p -f must work here (root, util-linux)"
    );
    let dir = scratch("hosts");
    for node in ["node-a", "node-b"] {
        let sub = dir.join(node);
        std::fs::create_dir_all(&sub).unwrap();
        let script = format!("hostname {node} && exec \"$0\" \"$@\"");
        write_trace(
            &sub,
            &[],
            &["unshare", "-u", "-p", "-f", "sh", "-c", &script],
        );
    }
    let a = read_lines(&trace_files(&dir.join("node-a"))[0]);
    let b = read_lines(&trace_files(&dir.join("node-b"))[0]);
    assert_eq!(a[0]["pid"], b[0]["pid"], "same pid on both nodes");
    let out = dir.join("both.json");
    let (ok, _, err) = dftracer(&[
        "perfetto",
        "-q",
        dir.join("node-a").to_str().unwrap(),
        dir.join("node-b").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let doc: J = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let ev = doc["traceEvents"].as_array().unwrap();
    let mut names: Vec<(u64, String)> = ev
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| {
            (
                e["pid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_ne!(names[0].0, names[1].0);
    assert!(names.iter().any(|n| n.1.ends_with("@ node-a")));
    assert!(names.iter().any(|n| n.1.ends_with("@ node-b")));
    // No thread of one process appears under the other's pid.
    let mut tids: BTreeMap<u64, u64> = BTreeMap::new();
    for e in ev.iter().filter(|e| e["ph"] == "X") {
        let (p, t) = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
        assert_eq!(*tids.entry(t).or_insert(p), p, "tid {t} under two pids");
    }
    let x = ev.iter().filter(|e| e["ph"] == "X").count();
    let want = a.iter().chain(&b).filter(|l| l["ph"] == 1).count();
    assert_eq!(x, want);
}

#[test]
fn validate_passes_whole_traces_and_names_what_is_wrong_with_broken_ones() {
    let dir = scratch("val");
    write_trace(&dir, &[], &[]);
    let agg = scratch("val-agg");
    write_trace(&agg, &[("DFTRACER_ENABLE_AGGREGATION", "1")], &[]);
    let (ok, out, _) = dftracer(&["validate", dir.to_str().unwrap(), agg.to_str().unwrap()]);
    assert!(ok, "{out}");
    assert!(out.contains("validated 2 file(s): 2 ok, 0 failed"), "{out}");

    let good = &trace_files(&dir)[0];
    let raw = std::fs::read(good).unwrap();
    let mut text = Vec::new();
    flate2::read::MultiGzDecoder::new(&raw[..])
        .read_to_end(&mut text)
        .unwrap();
    let bad = scratch("val-bad");
    // Cut inside the last gzip member.
    std::fs::write(bad.join("cut.pfw.gz"), &raw[..raw.len() - 20]).unwrap();
    // A line that is not JSON (the reference's unescaped quote).
    let mut garbage = text.clone();
    garbage.extend_from_slice(b"{\"name\":\"a\"b\"}\n");
    std::fs::write(bad.join("garbage.pfw"), &garbage).unwrap();
    // No end record (the last line dropped).
    let body = &text[..text.len() - 1];
    let cut = body.iter().rposition(|&b| b == b'\n').unwrap() + 1;
    std::fs::write(bad.join("noend.pfw"), &text[..cut]).unwrap();
    // A complete record missing before end.
    let lines: Vec<&[u8]> = text
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let drop_at = lines
        .iter()
        .position(|l| l.starts_with(b"{\"id\":5,"))
        .unwrap();
    let mut missing = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if i != drop_at {
            missing.extend_from_slice(l);
            missing.push(b'\n');
        }
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&missing).unwrap();
    std::fs::write(bad.join("missing.pfw.gz"), gz.finish().unwrap()).unwrap();
    let (ok, out, _) = dftracer(&["validate", "-q", bad.to_str().unwrap()]);
    assert!(!ok);
    assert!(out.contains("validated 4 file(s): 0 ok, 4 failed"), "{out}");
    let line_of = |name: &str| out.lines().find(|l| l.contains(name)).unwrap().to_string();
    assert!(line_of("cut.pfw.gz").contains("gzip error"), "{out}");
    assert!(
        line_of("garbage.pfw").contains("1 line(s) are not JSON objects"),
        "{out}"
    );
    assert!(line_of("noend.pfw").contains("no end record"), "{out}");
    assert!(
        line_of("missing.pfw.gz").contains("complete records with an id"),
        "{out}"
    );
}

#[test]
fn help_version_and_usage_errors() {
    let (ok, out, _) = dftracer(&["--version"]);
    assert!(ok && out.starts_with("dftracer "), "{out}");
    let (ok, out, _) = dftracer(&["--help"]);
    assert!(ok && out.contains("perfetto") && out.contains("summary") && out.contains("validate"));
    let (ok, out, _) = dftracer(&["perfetto", "--help"]);
    assert!(ok && out.contains("--output"), "{out}");
    let (ok, _, err) = dftracer(&["summary", "/nonexistent/dir"]);
    assert!(!ok && err.contains("/nonexistent/dir"), "{err}");
    let (ok, _, err) = dftracer(&[]);
    assert!(!ok && err.contains("a command is needed"), "{err}");
}

/// A process-control call is written with `dur` 0 and its length in `args.call_dur` (FORMAT.md
/// "Process calls"): the timeline draws it over that length; other events keep their `dur`.
#[test]
fn perfetto_draws_a_process_call_over_its_call_dur() {
    let dir = scratch("calldur");
    let trace = dir.join("t-0123456789abcdef-preload.pfw");
    std::fs::write(
        &trace,
        concat!(
            "[\n",
            r#"{"id":1,"name":"waitpid","cat":"POSIX","pid":7,"tid":7,"ts":1000,"dur":0,"ph":"X","args":{"ret":8,"status":0,"call_dur":150000}}"#,
            "\n",
            r#"{"id":2,"name":"read","cat":"POSIX","pid":7,"tid":7,"ts":160000,"dur":5,"ph":"X","args":{"ret":4,"call_dur":99}}"#,
            "\n",
            r#"{"id":3,"name":"fork","cat":"POSIX","pid":7,"tid":7,"ts":170000,"dur":0,"ph":"X","args":{"ret":9}}"#,
            "\n",
        ),
    )
    .unwrap();
    let out = dir.join("p.json");
    let (ok, _, err) = dftracer(&[
        "perfetto",
        "-q",
        trace.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let doc: J = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let ev = doc["traceEvents"].as_array().unwrap();
    let dur = |name: &str| {
        ev.iter()
            .find(|e| e["ph"] == "X" && e["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {ev:?}"))["dur"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(dur("waitpid"), 150000.0, "drawn over call_dur");
    assert_eq!(dur("read"), 5.0, "a dur is kept");
    assert_eq!(dur("fork"), 0.0, "no call_dur: as written");
}
