//! The real `dftracer_service` binary against real `/proc`, real signals and real trace
//! files (decoded with flate2's multi-member reader, every line parsed by serde_json).
//! Each test uses its own directories and stops every daemon it started, even on failure.

use flate2::read::MultiGzDecoder;
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const BIN: &str = env!("CARGO_BIN_EXE_dftracer_service");
static SEQ: AtomicU32 = AtomicU32::new(0);

fn hostname() -> String {
    let out = Command::new("hostname").output().expect("hostname");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn short(host: &str) -> &str {
    host.split('.').next().unwrap()
}

/// One test's directories and environment; `Drop` stops whatever it started.
struct Svc {
    root: PathBuf,
    log_dir: PathBuf,
    out_dir: PathBuf,
    prefix: String,
    env: Vec<(String, String)>,
    pids: std::cell::RefCell<Vec<u32>>,
}

impl Svc {
    fn new(name: &str) -> Svc {
        Svc::with_dirs(name, "state", "out")
    }

    fn with_dirs(name: &str, log: &str, out: &str) -> Svc {
        let root = std::env::temp_dir().join(format!(
            "dft-svc-{name}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        let log_dir = root.join(log);
        let out_dir = root.join(out);
        std::fs::create_dir_all(&out_dir).unwrap();
        let prefix = format!("{}/svc", out_dir.display());
        Svc {
            env: vec![
                ("DFTRACER_LOG_FILE".into(), prefix.clone()),
                ("DFTRACER_TRACE_INTERVAL_MS".into(), "100".into()),
                ("DFTRACER_FLUSH_INTERVAL_MS".into(), "200".into()),
            ],
            root,
            log_dir,
            out_dir,
            prefix,
            pids: Default::default(),
        }
    }

    fn set_env(&mut self, k: &str, v: Option<&str>) {
        self.env.retain(|(key, _)| key != k);
        if let Some(v) = v {
            self.env.push((k.into(), v.into()));
        }
    }

    /// `dftracer_service <args...>` with a clean DFTRACER_* environment.
    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        for (k, _) in std::env::vars() {
            if k.starts_with("DFTRACER_") {
                c.env_remove(k);
            }
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = self
            .cmd(BIN)
            .args(args)
            .output()
            .expect("run dftracer_service");
        self.remember();
        out
    }

    fn start(&self) -> Output {
        self.run(&["start", self.log_dir.to_str().unwrap()])
    }

    fn stop(&self) -> Output {
        self.run(&["stop", self.log_dir.to_str().unwrap()])
    }

    fn status(&self) -> Output {
        self.run(&["status", self.log_dir.to_str().unwrap()])
    }

    fn pid_file(&self, host: &str) -> PathBuf {
        self.log_dir
            .join(format!("dftracer_server_{}.pid", short(host)))
    }

    fn pid(&self) -> Option<u32> {
        let pid = std::fs::read_to_string(self.pid_file(&hostname()))
            .ok()?
            .trim()
            .parse()
            .ok();
        self.remember_pid(pid);
        pid
    }

    fn remember_pid(&self, pid: Option<u32>) {
        if let Some(p) = pid {
            if !self.pids.borrow().contains(&p) {
                self.pids.borrow_mut().push(p);
            }
        }
    }

    fn remember(&self) {
        if let Ok(rd) = std::fs::read_dir(&self.log_dir) {
            for e in rd.flatten() {
                if e.path().extension().is_some_and(|x| x == "pid") {
                    let pid = std::fs::read_to_string(e.path())
                        .ok()
                        .and_then(|s| s.trim().parse().ok());
                    self.remember_pid(pid);
                }
            }
        }
    }

    fn traces(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&self.out_dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().contains(".pfw"))
            .collect();
        v.sort();
        v
    }

    /// Pids of live processes whose command line mentions this test's root.
    fn live_daemons(&self) -> Vec<u32> {
        let root = self.root.to_string_lossy().into_owned();
        let mut v = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmd).contains(&root) && alive(pid) {
                v.push(pid);
            }
        }
        v
    }
}

impl Drop for Svc {
    fn drop(&mut self) {
        let live = self.live_daemons();
        if !live.is_empty() {
            let _ = self.stop();
        }
        for pid in self
            .live_daemons()
            .into_iter()
            .chain(self.pids.borrow().iter().copied())
        {
            if alive(pid) && cmdline_mentions(pid, &self.root) {
                unsafe_kill(pid, libc::SIGKILL);
            }
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

fn cmdline_mentions(pid: u32, root: &Path) -> bool {
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&cmd).contains(&*root.to_string_lossy())
}

fn unsafe_kill(pid: u32, sig: i32) {
    // SAFETY: kill on a positive pid is a plain syscall.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Exists and is not a zombie (a reparented daemon may stay a zombie until reaped).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let state = s
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .chars()
                .next();
            !matches!(state, Some('Z') | Some('X') | None)
        }
        Err(_) => false,
    }
}

fn wait_gone(pid: u32, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    !alive(pid)
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// Every line of a (multi-member) gzip trace, parsed.
fn read_trace(path: &Path) -> Vec<Value> {
    let raw = std::fs::read(path).unwrap();
    let mut s = String::new();
    MultiGzDecoder::new(&raw[..])
        .read_to_string(&mut s)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    s.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect()
}

fn named<'a>(lines: &'a [Value], name: &str) -> Vec<&'a Value> {
    lines.iter().filter(|v| v["name"] == name).collect()
}

/// The checks every complete service trace passes.
fn assert_complete(lines: &[Value], pid: u32) {
    assert_eq!(lines[0]["name"], "HH", "{:?}", lines[0]);
    assert_eq!(named(lines, "start").len(), 1);
    let end = named(lines, "end");
    assert_eq!(end.len(), 1, "no end record");
    assert_eq!(lines.last().unwrap()["name"], "end");
    let counters: Vec<&Value> = lines.iter().filter(|v| v["ph"] == 2).collect();
    assert!(!counters.is_empty());
    for c in counters {
        assert_eq!(c["type"], 7, "{c}");
        assert_eq!(c["pid"], pid, "{c}");
        assert!(c["args"]["hhash"].is_string(), "{c}");
        assert!(c["args"].as_object().unwrap().len() <= 33, "{c}");
    }
}

#[test]
fn start_status_stop_round_trip() {
    let s = Svc::new("roundtrip");
    let out = s.start();
    ok(&out);
    let pid = s.pid().expect("PID file");
    assert!(
        text(&out.stdout).contains(&format!("PID {pid}")),
        "{}",
        text(&out.stdout)
    );
    assert!(alive(pid));
    let trace = s.out_dir.join(format!("svc_{}.pfw.gz", hostname()));
    let trace = trace.to_str().unwrap();
    assert!(text(&out.stdout).contains(trace), "{}", text(&out.stdout));
    let st = s.status();
    ok(&st);
    assert!(text(&st.stdout).contains("is running"));
    assert!(
        text(&st.stdout).ends_with(&format!("; trace {trace}\n")),
        "{}",
        text(&st.stdout)
    );
    std::thread::sleep(Duration::from_millis(350));
    let out = s.stop();
    ok(&out);
    assert!(
        text(&out.stdout).contains(&format!("trace {trace} complete")),
        "{}",
        text(&out.stdout)
    );
    assert!(!alive(pid), "stop returned before the daemon exited");
    // Not even a zombie: a scheduler counting leftover processes sees none.
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "stop returned before the daemon was reaped"
    );
    assert!(!s.pid_file(&hostname()).exists());
    let traces = s.traces();
    assert_eq!(traces.len(), 1, "{traces:?}");
    assert!(traces[0].ends_with(format!("svc_{}.pfw.gz", hostname())));
    let lines = read_trace(&traces[0]);
    assert_complete(&lines, pid);
    for n in ["cpu", "cpu-0", "memory", "loadavg", "sched"] {
        assert!(!named(&lines, n).is_empty(), "no {n} record");
    }
    assert!(lines
        .iter()
        .all(|v| !v["name"].as_str().unwrap_or("").starts_with("net- ")));

    let st = s.status();
    assert_eq!(st.status.code(), Some(3));
    assert!(text(&st.stdout).contains("not running"));
    let again = s.stop();
    assert_eq!(again.status.code(), Some(1));
    let err = text(&again.stderr);
    assert!(
        err.contains("no running service") && err.ends_with('\n') && err.lines().count() == 1,
        "{err}"
    );
}

fn graceful_signal(sig: i32, name: &str) {
    let s = Svc::new(name);
    ok(&s.start());
    let pid = s.pid().unwrap();
    std::thread::sleep(Duration::from_millis(450));
    unsafe_kill(pid, sig);
    assert!(
        wait_gone(pid, Duration::from_secs(10)),
        "daemon ignored {name}"
    );
    assert!(
        !s.pid_file(&hostname()).exists(),
        "the daemon leaves no PID file"
    );
    let lines = read_trace(&s.traces()[0]);
    assert_complete(&lines, pid);
    assert!(!named(&lines, "cpu").is_empty());
    let out = std::fs::read_to_string(
        s.log_dir
            .join(format!("dftracer_server_{}.out", short(&hostname()))),
    )
    .unwrap();
    assert!(out.contains(&format!("stopped by {name}")), "{out}");
}

#[test]
fn sigterm_leaves_a_complete_trace() {
    graceful_signal(libc::SIGTERM, "SIGTERM");
}

#[test]
fn sigint_leaves_a_complete_trace() {
    graceful_signal(libc::SIGINT, "SIGINT");
}

#[test]
fn sigkill_loses_at_most_an_interval_then_restart_cleans_up_and_keeps_the_trace() {
    let s = Svc::new("sigkill");
    ok(&s.start());
    let pid = s.pid().unwrap();
    std::thread::sleep(Duration::from_millis(900));
    let killed_at = now_us();
    unsafe_kill(pid, libc::SIGKILL);
    assert!(wait_gone(pid, Duration::from_secs(5)));
    let first = s.traces();
    assert_eq!(first.len(), 1);
    let before = std::fs::read(&first[0]).unwrap();
    let lines = read_trace(&first[0]);
    assert!(named(&lines, "end").is_empty());
    let last_ts = lines
        .iter()
        .filter(|v| v["ph"] == 2)
        .filter_map(|v| v["ts"].as_u64())
        .max()
        .unwrap();
    // Flush interval (200 ms) + one sampling interval (100 ms) + scheduling slack.
    assert!(
        killed_at.saturating_sub(last_ts) < 700_000,
        "last sample {} ms before SIGKILL",
        (killed_at - last_ts) / 1000
    );

    // The PID file is stale now: status says so, start removes it and starts afresh.
    assert!(s.pid_file(&hostname()).exists());
    let st = s.status();
    assert_eq!(st.status.code(), Some(3));
    assert!(text(&st.stdout).contains("stale"), "{}", text(&st.stdout));
    let out = s.start();
    ok(&out);
    assert!(
        text(&out.stdout).contains("removed stale PID file"),
        "{}",
        text(&out.stdout)
    );
    let pid2 = s.pid().unwrap();
    assert_ne!(pid, pid2);
    std::thread::sleep(Duration::from_millis(250));
    ok(&s.stop());
    let traces = s.traces();
    assert_eq!(traces.len(), 2, "{traces:?}");
    assert_eq!(
        std::fs::read(&first[0]).unwrap(),
        before,
        "the earlier trace was touched"
    );
    let second = traces.iter().find(|p| **p != first[0]).unwrap();
    assert!(
        second
            .to_string_lossy()
            .ends_with(&format!("svc_{}-1.pfw.gz", hostname())),
        "{second:?}"
    );
    assert_complete(&read_trace(second), pid2);
}

/// Gzip members of a file (each a complete stream).
fn members(raw: &[u8]) -> usize {
    let mut pos = 0;
    let mut n = 0;
    while pos < raw.len() {
        let mut d = flate2::bufread::GzDecoder::new(&raw[pos..]);
        d.read_to_end(&mut Vec::new()).expect("a complete member");
        pos = raw.len() - d.into_inner().len();
        n += 1;
    }
    n
}

/// Every flush grows one open gzip member (core `gzip.rs`): killed between two flushes, the
/// file ends with that member complete (its provisional end and trailer), so gzip, flate2
/// and dftracer-utils read it whole, and at most a flush interval of samples is missing.
#[test]
fn sigkill_inside_an_open_member_leaves_a_file_every_reader_accepts() {
    let mut s = Svc::new("killopen");
    s.set_env("DFTRACER_FLUSH_INTERVAL_MS", Some("100"));
    ok(&s.start());
    let pid = s.pid().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let killed_at = now_us();
    unsafe_kill(pid, libc::SIGKILL);
    assert!(wait_gone(pid, Duration::from_secs(5)));
    let t = s.traces();
    assert_eq!(t.len(), 1);
    let raw = std::fs::read(&t[0]).unwrap();
    let lines = read_trace(&t[0]);
    assert!(named(&lines, "end").is_empty(), "killed: no end record");
    let samples = named(&lines, "cpu").len();
    // About 15 flushes went into the file, all into its one member.
    assert!(samples >= 8, "{samples} samples");
    assert_eq!(members(&raw), 1, "flushes continue the open member");
    let last_ts = named(&lines, "cpu")
        .iter()
        .filter_map(|v| v["ts"].as_u64())
        .max()
        .unwrap();
    // Flush interval (100 ms) + one sampling interval (100 ms) + scheduling slack.
    assert!(
        killed_at.saturating_sub(last_ts) < 600_000,
        "last sample {} ms before SIGKILL",
        (killed_at - last_ts) / 1000
    );
    let gz = Command::new("gzip").arg("-t").arg(&t[0]).output().unwrap();
    assert!(gz.status.success(), "gzip -t: {}", text(&gz.stderr));
    let validate =
        std::env::var("DFTRACER_VALIDATE").unwrap_or_else(|_| "dftracer_validate".into());
    match Command::new(&validate).arg("--files").arg(&t[0]).output() {
        Ok(out) => {
            let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
            assert!(
                out.status.success() && all.contains("1 passed, 0 failed"),
                "{all}"
            );
        }
        Err(_) => println!("dftracer_validate not checked: {validate} not found"),
    }
}

#[test]
fn second_start_is_refused() {
    let s = Svc::new("second");
    ok(&s.start());
    let pid = s.pid().unwrap();
    let out = s.start();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("already running") && err.contains(&pid.to_string()),
        "{err}"
    );
    assert_eq!(s.pid(), Some(pid));
    assert_eq!(s.live_daemons(), vec![pid]);
    ok(&s.stop());
}

#[test]
fn missing_log_file_is_an_error_and_leaves_no_daemon() {
    let mut s = Svc::new("nolog");
    s.set_env("DFTRACER_LOG_FILE", None);
    let out = s.start();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("DFTRACER_LOG_FILE is not set"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(s.live_daemons().is_empty());
    assert!(!s.pid_file(&hostname()).exists());
}

#[test]
fn unwritable_log_file_is_an_error_and_leaves_no_daemon() {
    let mut s = Svc::new("badlog");
    let file = s.root.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    for prefix in [
        format!("{}/sub/svc", file.display()),
        // missing directories are created, but never on proc
        "/proc/dft-no-such-dir/svc".to_string(),
    ] {
        s.set_env("DFTRACER_LOG_FILE", Some(&prefix));
        let out = s.start();
        assert_eq!(out.status.code(), Some(1), "{prefix}");
        let err = text(&out.stderr);
        assert!(
            err.contains("cannot write the trace") && err.contains(&prefix),
            "{err}"
        );
        assert!(s.live_daemons().is_empty());
        assert!(!s.pid_file(&hostname()).exists());
    }
}

#[test]
fn log_paths_with_spaces_work() {
    let s = Svc::with_dirs("spaces", "state dir/with space", "trace out");
    assert!(s.prefix.contains(' '));
    ok(&s.start());
    let pid = s.pid().unwrap();
    ok(&s.status());
    std::thread::sleep(Duration::from_millis(250));
    ok(&s.stop());
    let t = s.traces();
    assert_eq!(t.len(), 1);
    assert_complete(&read_trace(&t[0]), pid);
}

#[test]
fn missing_trace_directories_are_created_as_the_tracer_does() {
    let mut s = Svc::new("mkdir");
    let prefix = format!("{}/a/b/node", s.out_dir.display());
    s.set_env("DFTRACER_LOG_FILE", Some(&prefix));
    ok(&s.start());
    ok(&s.stop());
    let made = s.out_dir.join("a/b");
    let t: Vec<_> = std::fs::read_dir(&made).unwrap().flatten().collect();
    assert_eq!(t.len(), 1, "{t:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&made).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o700, 0o700);
}

#[test]
fn relative_log_file_is_resolved_before_detaching() {
    let mut s = Svc::new("relative");
    s.set_env("DFTRACER_LOG_FILE", Some("out/rel"));
    let out = s
        .cmd(BIN)
        .current_dir(&s.root)
        .args(["start", "state"])
        .output()
        .unwrap();
    ok(&out);
    s.remember();
    let pid = s.pid().unwrap();
    let out = s
        .cmd(BIN)
        .current_dir(&s.root)
        .args(["stop", "state/"])
        .output()
        .unwrap();
    ok(&out);
    assert!(!alive(pid));
    let t = s.out_dir.join(format!("rel_{}.pfw.gz", hostname()));
    assert_complete(&read_trace(&t), pid);
}

#[test]
fn cpu_percentages_of_each_interval_sum_to_100() {
    let s = Svc::new("cpusum");
    ok(&s.start());
    let pid = s.pid().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    ok(&s.stop());
    let lines = read_trace(&s.traces()[0]);
    assert_complete(&lines, pid);
    let keys = [
        "user_pct",
        "nice_pct",
        "system_pct",
        "idle_pct",
        "iowait_pct",
        "irq_pct",
        "softirq_pct",
        "steal_pct",
    ];
    let mut n = 0;
    for v in lines.iter().filter(|v| {
        v["name"]
            .as_str()
            .is_some_and(|n| n == "cpu" || n.starts_with("cpu-"))
    }) {
        let sum: f64 = keys.iter().map(|k| v["args"][k].as_f64().unwrap()).sum();
        assert!((sum - 100.0).abs() <= 2.0, "sum {sum}: {v}");
        assert!(v["args"]["idle_pct"].as_f64().unwrap() <= 100.0);
        n += 1;
    }
    assert!(n >= 6, "only {n} cpu records");
    // Per-interval, not since boot: values change between samples on a live machine, and the
    // series is never constant across all fields (the reference's cumulative bug).
    let ts: Vec<u64> = named(&lines, "cpu")
        .iter()
        .map(|v| v["ts"].as_u64().unwrap())
        .collect();
    for w in ts.windows(2) {
        let gap = w[1] - w[0];
        // 100 ms apart; generous bounds for loaded CI machines (a late tick is skipped, never
        // bunched up).
        assert!(
            (50_000..=1_500_000).contains(&gap),
            "samples {gap} us apart"
        );
    }
}

#[test]
fn leftover_daemon_without_pid_file_is_stopped_gracefully() {
    let s = Svc::new("leftover");
    ok(&s.start());
    let old = s.pid().unwrap();
    std::fs::remove_file(s.pid_file(&hostname())).unwrap();
    let out = s.start();
    ok(&out);
    assert!(
        text(&out.stdout).contains(&format!("leftover daemon PID {old}")),
        "{}",
        text(&out.stdout)
    );
    assert!(!alive(old));
    let new = s.pid().unwrap();
    assert_ne!(new, old);
    ok(&s.stop());
    let h = hostname();
    assert_eq!(s.traces().len(), 2);
    assert_complete(&read_trace(&s.out_dir.join(format!("svc_{h}.pfw.gz"))), old);
    assert_complete(
        &read_trace(&s.out_dir.join(format!("svc_{h}-1.pfw.gz"))),
        new,
    );
}

#[test]
fn stop_never_signals_a_foreign_pid() {
    let s = Svc::new("foreign");
    std::fs::create_dir_all(&s.log_dir).unwrap();
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    std::fs::write(s.pid_file(&hostname()), format!("{}\n", sleeper.id())).unwrap();
    let st = s.status();
    assert_eq!(st.status.code(), Some(3));
    let out = s.stop();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no running service"));
    assert!(
        sleeper.try_wait().unwrap().is_none(),
        "stop signalled an unrelated process"
    );
    assert!(!s.pid_file(&hostname()).exists(), "stale PID file left");
    // start treats it the same way: not ours, so not "already running".
    std::fs::write(s.pid_file(&hostname()), format!("{}\n", sleeper.id())).unwrap();
    ok(&s.start());
    assert!(sleeper.try_wait().unwrap().is_none());
    ok(&s.stop());
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

#[test]
fn two_hostnames_share_one_log_dir() {
    let probe = Command::new("unshare").args(["-u", "true"]).output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        println!("skipped: `unshare -u` is not available here ({probe:?})");
        return;
    }
    let s = Svc::new("twohosts");
    let other = format!("node{}", std::process::id());
    let dir = s.log_dir.to_str().unwrap().to_string();
    ok(&s.start());
    let out = s
        .cmd("unshare")
        .args([
            "-u",
            "sh",
            "-c",
            "hostname \"$1\" && exec \"$0\" start \"$2\"",
            BIN,
            &other,
            &dir,
        ])
        .output()
        .unwrap();
    ok(&out);
    s.remember();
    let here = s.pid().unwrap();
    let there: u32 = std::fs::read_to_string(s.pid_file(&other))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_ne!(here, there);
    assert!(alive(here) && alive(there));
    // Stopping this host's service leaves the other host's alone.
    ok(&s.stop());
    assert!(!alive(here));
    assert!(alive(there), "stop on one host stopped the other");
    let nsenter = s
        .cmd("nsenter")
        .args(["-t", &there.to_string(), "-u", BIN, "stop", &dir])
        .output();
    match nsenter {
        Ok(o) if o.status.success() => {}
        other_result => {
            println!("nsenter unavailable ({other_result:?}); stopping with SIGTERM");
            unsafe_kill(there, libc::SIGTERM);
        }
    }
    assert!(wait_gone(there, Duration::from_secs(10)));
    let h = hostname();
    let a = s.out_dir.join(format!("svc_{h}.pfw.gz"));
    let b = s.out_dir.join(format!("svc_{other}.pfw.gz"));
    let (la, lb) = (read_trace(&a), read_trace(&b));
    assert_complete(&la, here);
    assert_complete(&lb, there);
    assert_eq!(la[0]["args"]["name"], h.as_str());
    assert_eq!(lb[0]["args"]["name"], other.as_str());
}

#[test]
fn help_and_usage_errors() {
    for sub in ["start", "stop", "status", "run"] {
        let out = Command::new(BIN).args([sub, "--help"]).output().unwrap();
        ok(&out);
        assert!(text(&out.stdout).contains("log_dir"), "{sub}");
    }
    let out = Command::new(BIN).arg("--help").output().unwrap();
    ok(&out);
    for word in ["start", "stop", "status", "run", "--version"] {
        assert!(
            text(&out.stdout).contains(word),
            "{word}: {}",
            text(&out.stdout)
        );
    }
    for flag in ["--version", "-V"] {
        let out = Command::new(BIN).arg(flag).output().unwrap();
        ok(&out);
        assert_eq!(
            text(&out.stdout).trim(),
            format!("dftracer_service {}", env!("CARGO_PKG_VERSION"))
        );
    }
    let out = Command::new(BIN).arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!out.stderr.is_empty());
    let out = Command::new(BIN).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn status_through_the_library_entry_point() {
    let s = Svc::new("inprocess");
    let code = dftracer_service::run(["dftracer_service", "status", s.log_dir.to_str().unwrap()]);
    assert_eq!(code, std::process::ExitCode::from(3));
}

#[test]
fn dftracer_utils_accepts_the_trace() {
    let validate =
        std::env::var("DFTRACER_VALIDATE").unwrap_or_else(|_| "dftracer_validate".into());
    if Command::new(&validate).arg("--help").output().is_err() {
        println!("skipped: {validate} not found (pip install dftracer-utils==0.0.14, or set DFTRACER_VALIDATE)");
        return;
    }
    let s = Svc::new("utils");
    ok(&s.start());
    std::thread::sleep(Duration::from_millis(400));
    ok(&s.stop());
    let t = s.traces();
    let out = Command::new(&validate)
        .arg("--files")
        .arg(&t[0])
        .output()
        .unwrap();
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success() && all.contains("1 passed, 0 failed"),
        "{all}"
    );
}

#[test]
fn start_hands_the_daemon_no_descriptor_of_its_caller() {
    // A launcher reads a pipe it gave `start` (without close-on-exec, here as fd 9) until EOF,
    // as MPICH's Hydra proxy does with its PMI socket and an ssh session with its channel:
    // EOF must come when `start` returns, not when the daemon exits.
    let s = Svc::new("fds");
    let script = format!("exec {BIN} start '{}' 9>&1", s.log_dir.display());
    let mut child = s
        .cmd("sh")
        .args(["-c", &script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("sh");
    let mut out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut b = String::new();
        let _ = out.read_to_string(&mut b);
        let _ = tx.send(b);
    });
    let got = rx.recv_timeout(Duration::from_secs(20));
    assert!(child.wait().unwrap().success());
    let pid = s.pid().expect("a daemon");
    assert!(alive(pid));
    let printed = got.unwrap_or_else(|_| {
        panic!("the caller's pipe stayed open after `start` returned: daemon {pid} holds it")
    });
    assert!(printed.contains("started on"), "{printed}");
    ok(&s.stop());
}

/// As root, in a log_dir anyone may write (mode 0777, not sticky: job directories on
/// Lustre/NFS are group-writable without the sticky bit, so the kernel's protected_symlinks
/// does not apply), links owned by `nobody` planted at `.out` and `.err` that point at
/// root-owned 0600 files: `start` refuses with one line naming the link, exits 1, starts no
/// daemon, and the targets keep their content and mode. So does a FIFO planted at `.out`
/// (refused without blocking) and a second hard link at `.err`. A FIFO at the PID file's
/// name is a stale PID file (removed; the start goes on). Once the links are gone, `start`
/// works.
#[test]
fn links_and_fifos_planted_in_log_dir_are_never_written_through() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIP links_and_fifos_planted_in_log_dir_are_never_written_through: not root");
        return;
    }
    let s = Svc::new("planted");
    std::fs::create_dir_all(&s.log_dir).unwrap();
    std::fs::set_permissions(&s.log_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let host = hostname();
    let base = s.log_dir.join(format!("dftracer_server_{}", short(&host)));
    let out_file = base.with_extension("out");
    let err_file = base.with_extension("err");
    let secret = s.root.join("secret");
    let other = s.root.join("other-secret");
    for (p, body) in [(&secret, "root only\n"), (&other, "also root only\n")] {
        std::fs::write(p, body).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let as_nobody = |args: &[&str]| {
        let st = Command::new("runuser")
            .args(["-u", "nobody", "--"])
            .args(args)
            .status()
            .expect("runuser");
        assert!(st.success(), "runuser -u nobody {args:?}");
    };
    let untouched = || {
        for (p, body) in [(&secret, "root only\n"), (&other, "also root only\n")] {
            assert_eq!(std::fs::read_to_string(p).unwrap(), body, "{}", p.display());
            let m = std::fs::metadata(p).unwrap();
            assert_eq!(m.mode() & 0o7777, 0o600, "{}", p.display());
            assert_eq!(m.uid(), 0);
        }
    };
    let refused = |what: &str, path: &Path| {
        let t0 = Instant::now();
        let out = s.start();
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{what}: start took {:?}",
            t0.elapsed()
        );
        assert_eq!(out.status.code(), Some(1), "{what}: {}", text(&out.stderr));
        let err = text(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{what}: one line: {err}");
        assert!(
            err.contains(&*path.to_string_lossy()) && err.contains(what),
            "{err}"
        );
        assert!(s.live_daemons().is_empty(), "{what}: no daemon");
        assert!(!s.pid_file(&host).exists(), "{what}: no PID file");
        untouched();
    };
    let (secret_s, other_s) = (secret.to_str().unwrap(), other.to_str().unwrap());
    // Links at both names, made by nobody.
    as_nobody(&["ln", "-s", secret_s, out_file.to_str().unwrap()]);
    as_nobody(&["ln", "-s", other_s, err_file.to_str().unwrap()]);
    let owner = std::fs::symlink_metadata(&out_file).unwrap().uid();
    assert_ne!(owner, 0, "the link is nobody's");
    refused("symbolic link", &out_file);
    // Only at .err (a fresh .out is fine, but the start still refuses before anything else).
    std::fs::remove_file(&out_file).unwrap();
    refused("symbolic link", &err_file);
    std::fs::remove_file(&err_file).unwrap();
    // .out was created, and is not truncated by a refused start.
    std::fs::write(&out_file, b"an earlier run\n").unwrap();
    as_nobody(&["ln", "-s", other_s, err_file.to_str().unwrap()]);
    refused("symbolic link", &err_file);
    assert_eq!(std::fs::read(&out_file).unwrap(), b"an earlier run\n");
    std::fs::remove_file(&err_file).unwrap();
    std::fs::remove_file(&out_file).unwrap();
    // A FIFO at .out: refused without blocking (no reader: a blocking open would hang).
    as_nobody(&["mkfifo", out_file.to_str().unwrap()]);
    refused("fifo", &out_file);
    std::fs::remove_file(&out_file).unwrap();
    // A second name of the root-only file at .err (a file system without protected_hardlinks).
    std::fs::hard_link(&other, &err_file).unwrap();
    refused("hard links", &err_file);
    std::fs::remove_file(&err_file).unwrap();
    // A FIFO at the PID file's name is no PID file: removed, and the start goes on.
    as_nobody(&["mkfifo", s.pid_file(&host).to_str().unwrap()]);
    let out = s.start();
    ok(&out);
    assert!(
        text(&out.stdout).contains("removed stale PID file"),
        "{}",
        text(&out.stdout)
    );
    let pid = s.pid().expect("a regular PID file");
    assert!(std::fs::symlink_metadata(s.pid_file(&host))
        .unwrap()
        .is_file());
    let st = s.status();
    assert_eq!(st.status.code(), Some(0), "{}", text(&st.stdout));
    ok(&s.stop());
    assert!(wait_gone(pid, Duration::from_secs(5)));
    untouched();
    for p in [&out_file, &err_file] {
        let m = std::fs::symlink_metadata(p).unwrap();
        assert!(m.is_file() && m.uid() == 0, "{}", p.display());
    }
}
