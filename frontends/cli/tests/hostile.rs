//! `dftracer` on hostile input: a 1 GiB line (memory stays flat, the line is reported and
//! skipped, the valid lines around it are counted), files with no valid line (non-zero exit
//! naming them), and inputs that are not regular files (FIFO, devices, a symlink loop, a
//! missing or unreadable file: each named for what it is, none waited on).
//!
//! Every command runs as a child with a deadline (a command that hangs fails the test
//! instead of hanging it) and its peak RSS measured: the highest `VmHWM` of
//! /proc/<pid>/status read while it runs (the high-water mark of its own address space
//! since exec). wait4's `ru_maxrss` is no good here: exec records the high-water mark of
//! the address space it replaces, the test process's own (std spawns with vfork semantics).
//! A peak reached in the last 2 ms of a run would be missed; the memory a line costs is held
//! for as long as the line is read.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dft-hostile-{}-{}", name, std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[derive(Debug)]
struct Run {
    ok: bool,
    out: String,
    err: String,
    /// Peak resident set size of the command, KiB.
    hwm_kib: u64,
}

/// Runs `dftracer args` (under `wrap`, e.g. `setpriv ...`, which execs it in place) with a
/// deadline, watching its peak RSS.
fn dftracer_in(wrap: &[&str], args: &[&str], deadline: Duration) -> Run {
    let bin = env!("CARGO_BIN_EXE_dftracer");
    let mut cmd = match wrap.split_first() {
        None => Command::new(bin),
        Some((w, rest)) => {
            let mut c = Command::new(w);
            c.args(rest).arg(bin);
            c
        }
    };
    let mut child = cmd
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let status_file = format!("/proc/{}/status", child.id());
    let t0 = Instant::now();
    let mut hwm = 0;
    let status = loop {
        // Read before try_wait reaps it: the pid is not reused while it is our child.
        if let Ok(s) = std::fs::read_to_string(&status_file) {
            if let Some(kb) = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                hwm = hwm.max(kb);
            }
        }
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "dftracer {args:?} still running after {deadline:?} (hung); stderr: {}",
                err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    Run {
        ok: status.success(),
        out: out.join().unwrap(),
        err: err.join().unwrap(),
        hwm_kib: hwm,
    }
}

fn dftracer(args: &[&str]) -> Run {
    dftracer_in(&[], args, Duration::from_secs(20))
}

const START: &str = r#"{"id":1,"name":"start","cat":"dftracer","pid":7,"tid":7,"ts":100,"dur":0,"ph":1,"args":{"hhash":"h1"}}"#;
const READ2: &str = r#"{"id":2,"name":"read","cat":"POSIX","pid":7,"tid":7,"ts":110,"dur":5,"ph":1,"args":{"ret":10}}"#;
const READ3: &str = r#"{"id":3,"name":"read","cat":"POSIX","pid":7,"tid":7,"ts":120,"dur":5,"ph":1,"args":{"ret":20}}"#;
const END: &str = r#"{"id":4,"name":"end","cat":"dftracer","pid":7,"tid":7,"ts":200,"dur":0,"ph":1,"args":{"num_events":3}}"#;

/// A valid trace (start, read, read, end) with a 1 GiB line after the first read: a JSON
/// object, so only its length is wrong. Streamed through the encoder in 1 MiB pieces.
fn write_long_line_trace(path: &Path) -> u64 {
    let f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    writeln!(gz, "{START}\n{READ2}").unwrap();
    let head = br#"{"name":"huge","cat":"x","ph":1,"args":{"s":""#;
    let tail = br#""}}"#;
    let piece = vec![b'a'; 1 << 20];
    gz.write_all(head).unwrap();
    for _ in 0..1024 {
        gz.write_all(&piece).unwrap();
    }
    gz.write_all(tail).unwrap();
    writeln!(gz, "\n{READ3}\n{END}").unwrap();
    gz.finish().unwrap().flush().unwrap();
    (head.len() + (1 << 30) + tail.len()) as u64
}

/// Peak RSS allowed for any command on that file (before: about 2 GiB).
const RSS_LIMIT_KIB: u64 = 100 * 1024;

#[test]
fn a_one_gib_line_is_reported_and_skipped_with_memory_flat() {
    let dir = scratch("long");
    let trace = dir.join("long.pfw.gz");
    let len = write_long_line_trace(&trace);
    assert!(std::fs::metadata(&trace).unwrap().len() < 20 << 20);
    let t = trace.to_str().unwrap();
    let said = format!("{t}: line 3 ({len} bytes) is over the 16 MiB line limit (skipped)");
    let deadline = Duration::from_secs(120);

    let v = dftracer_in(&[], &["validate", t], deadline);
    eprintln!("validate: peak RSS {} KiB", v.hwm_kib);
    assert!(!v.ok, "a line over the limit fails validation: {v:?}");
    assert!(v.out.contains(&format!("FAIL  {said}")), "{v:?}");
    // Nothing else is wrong: the counts of the lines around it agree.
    assert!(!v.out.contains("num_events"), "{v:?}");
    assert!(!v.out.contains("no end record"), "{v:?}");
    assert!(v.hwm_kib < RSS_LIMIT_KIB, "validate: {} KiB", v.hwm_kib);

    let s = dftracer_in(&[], &["summary", "--json", t], deadline);
    eprintln!("summary: peak RSS {} KiB", s.hwm_kib);
    assert!(s.ok, "{s:?}");
    let j: serde_json::Value = serde_json::from_str(&s.out).unwrap();
    assert_eq!(j["lines"], 5);
    assert_eq!(j["valid_lines"], 4);
    assert_eq!(j["total"]["events_by_category"]["POSIX"], 2);
    assert_eq!(j["total"]["io_by_family"]["read"]["bytes"], 30);
    assert_eq!(j["long_lines"][0]["file"], t);
    assert_eq!(j["long_lines"][0]["first"][0]["line"], 3);
    assert_eq!(j["long_lines"][0]["first"][0]["bytes"], len);
    assert!(s.hwm_kib < RSS_LIMIT_KIB, "summary: {} KiB", s.hwm_kib);

    let text = dftracer_in(&[], &["summary", t], deadline);
    assert!(text.ok, "{text:?}");
    assert!(text.out.contains(&format!("warning: {said}")), "{text:?}");
    assert!(
        text.hwm_kib < RSS_LIMIT_KIB,
        "summary: {} KiB",
        text.hwm_kib
    );

    let out = dir.join("out.json");
    let o = out.to_str().unwrap();
    let p = dftracer_in(&[], &["perfetto", "-q", t, "-o", o], deadline);
    eprintln!("perfetto: peak RSS {} KiB", p.hwm_kib);
    assert!(p.ok, "{p:?}");
    assert!(p.err.contains(&format!("dftracer: {said}")), "{p:?}");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let reads = doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"] == "read")
        .count();
    assert_eq!(reads, 2);
    assert!(p.hwm_kib < RSS_LIMIT_KIB, "perfetto: {} KiB", p.hwm_kib);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn files_without_a_valid_line_fail_every_command_and_are_named() {
    let dir = scratch("novalid");
    let garbage = dir.join("garbage.pfw");
    std::fs::write(&garbage, b"not json\n[1,2]\n{\"a\":\n").unwrap();
    let empty = dir.join("empty.pfw");
    std::fs::write(&empty, b"").unwrap();
    let gz = dir.join("text.pfw.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b"hello\nworld\n").unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    for f in [&garbage, &empty, &gz] {
        let f = f.to_str().unwrap();
        let s = dftracer(&["summary", f]);
        assert!(!s.ok, "{s:?}");
        assert!(
            s.err
                .contains(&format!("dftracer: no valid trace line in {f}")),
            "{s:?}"
        );
        assert!(s.out.is_empty(), "no summary of nothing: {s:?}");
        let s = dftracer(&["summary", "--json", f]);
        assert!(!s.ok && s.err.contains(f) && s.out.is_empty(), "{s:?}");
        let out = dir.join("out.json");
        let p = dftracer(&["perfetto", "-q", f, "-o", out.to_str().unwrap()]);
        assert!(!p.ok, "{p:?}");
        assert!(
            p.err.contains(&format!(
                "dftracer: no valid trace line in {f} (no output written)"
            )),
            "{p:?}"
        );
        assert!(!out.exists(), "an empty output is not left behind");
        let v = dftracer(&["validate", f]);
        assert!(!v.ok, "{v:?}");
        let want = if f.ends_with("empty.pfw") {
            "empty: no line at all"
        } else {
            "no valid line (not a trace file)"
        };
        assert!(v.out.contains(&format!("FAIL  {f}: {want}")), "{v:?}");
    }
    // The whole directory: still nothing valid, all three named.
    let d = dir.to_str().unwrap();
    let s = dftracer(&["summary", d]);
    assert!(!s.ok, "{s:?}");
    for f in ["garbage.pfw", "empty.pfw", "text.pfw.gz"] {
        assert!(s.err.contains(f), "{f} in {s:?}");
    }
    // One valid file among them: a summary, with the others named as warnings.
    std::fs::write(
        dir.join("good.pfw"),
        format!("{START}\n{READ2}\n{READ3}\n{END}\n"),
    )
    .unwrap();
    let s = dftracer(&["summary", d]);
    assert!(s.ok, "{s:?}");
    assert!(
        s.out
            .contains(&format!("warning: {}: no valid line", garbage.display())),
        "{s:?}"
    );
    let out = dir.join("out.json");
    let p = dftracer(&["perfetto", "-q", d, "-o", out.to_str().unwrap()]);
    assert!(p.ok, "{p:?}");
    assert!(
        p.err
            .contains(&format!("dftracer: {}: no valid line", empty.display())),
        "{p:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn inputs_that_are_not_regular_files_are_named_for_what_they_are_and_never_waited_on() {
    let dir = scratch("kinds");
    let fifo = dir.join("fifo.pfw");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: `c` is a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let loop1 = dir.join("loop1.pfw");
    std::os::unix::fs::symlink(dir.join("loop2.pfw"), &loop1).unwrap();
    std::os::unix::fs::symlink(&loop1, dir.join("loop2.pfw")).unwrap();
    let missing = dir.join("missing.pfw");
    let secret = dir.join("secret.pfw");
    std::fs::write(&secret, format!("{START}\n{END}\n")).unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    let fifo_s = fifo.to_str().unwrap().to_string();
    let loop_s = loop1.to_str().unwrap().to_string();
    let missing_s = missing.to_str().unwrap().to_string();
    let out = dir.join("out.json");
    let out_s = out.to_str().unwrap().to_string();
    let cases: [(&str, &str); 5] = [
        (&fifo_s, "is a FIFO: not read"),
        ("/dev/zero", "is a character device: not read"),
        ("/dev/null", "is a character device: not read"),
        (&loop_s, "too many levels of symbolic links"),
        (&missing_s, "no such file or directory"),
    ];
    let commands = |path: &str| -> Vec<Vec<String>> {
        vec![
            vec!["validate".into(), path.into()],
            vec!["summary".into(), path.into()],
            vec!["summary".into(), "--json".into(), path.into()],
            vec![
                "perfetto".into(),
                "-q".into(),
                path.into(),
                "-o".into(),
                out_s.clone(),
            ],
        ]
    };
    for (path, what) in cases {
        for args in commands(path) {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let r = dftracer_in(&[], &args, Duration::from_secs(10));
            assert!(!r.ok, "{args:?}: {r:?}");
            assert!(
                r.err.contains(&format!("dftracer: {path}: {what}")),
                "{args:?}: {r:?}"
            );
        }
    }
    // Unreadable: root reads anything, so drop to nobody for it.
    let wrap: &[&str] = if is_root() {
        &[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ]
    } else {
        &[]
    };
    let secret_s = secret.to_str().unwrap();
    for args in commands(secret_s) {
        // (perfetto checks its inputs before it creates the output, which nobody could not.)
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let r = dftracer_in(wrap, &args, Duration::from_secs(10));
        assert!(!r.ok, "{args:?}: {r:?}");
        assert!(
            r.err
                .contains(&format!("dftracer: {secret_s}: permission denied")),
            "{args:?}: {r:?}"
        );
    }
    // Several bad paths at once: each on its own line.
    let r = dftracer(&["summary", &fifo_s, "/dev/zero", &loop_s]);
    assert!(!r.ok);
    assert_eq!(r.err.lines().count(), 3, "{r:?}");

    // In a directory: entries that are not regular files are skipped with a note, the
    // trace files are read.
    let walk = dir.join("walk");
    std::fs::create_dir(&walk).unwrap();
    std::fs::write(
        walk.join("good.pfw"),
        format!("{START}\n{READ2}\n{READ3}\n{END}\n"),
    )
    .unwrap();
    let c = std::ffi::CString::new(walk.join("f.pfw").to_str().unwrap()).unwrap();
    // SAFETY: `c` is a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    std::os::unix::fs::symlink("/dev/zero", walk.join("zero.pfw")).unwrap();
    std::os::unix::fs::symlink(walk.join("b.pfw"), walk.join("a.pfw")).unwrap();
    std::os::unix::fs::symlink(walk.join("a.pfw"), walk.join("b.pfw")).unwrap();
    std::os::unix::fs::symlink("/nonexistent", walk.join("dangling.pfw.gz")).unwrap();
    std::fs::create_dir(walk.join("sub.pfw")).unwrap();
    let w = walk.to_str().unwrap();
    let walk_out = dir.join("walk-out.json");
    for args in [
        vec!["validate", w],
        vec!["summary", w],
        vec!["perfetto", "-q", w, "-o", walk_out.to_str().unwrap()],
    ] {
        let r = dftracer_in(&[], &args, Duration::from_secs(10));
        assert!(r.ok, "{args:?}: {r:?}");
        for (name, what) in [
            ("f.pfw", "is a FIFO"),
            ("zero.pfw", "is a character device"),
            ("a.pfw", "too many levels of symbolic links"),
            ("b.pfw", "too many levels of symbolic links"),
            ("dangling.pfw.gz", "no such file or directory"),
            ("sub.pfw", "is a directory"),
        ] {
            let note = format!("dftracer: note: {w}/{name}: {what}: skipped");
            assert!(r.err.contains(&note), "{note:?} in {args:?}: {r:?}");
        }
    }
    let r = dftracer(&["validate", w]);
    assert!(
        r.out.contains("validated 1 file(s): 1 ok, 0 failed"),
        "{r:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
