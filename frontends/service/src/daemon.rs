//! The four commands. `start` is a launcher: it validates, detaches a `run --ready-fd N`
//! daemon (double fork + exec, so the daemon's `/proc/<pid>/cmdline` names its log_dir
//! canonically), and waits for the daemon to write `ready <pid> <trace>` or `error <why>` on a
//! pipe. `run` is the daemon itself: the core is initialised only there.

use crate::collect::Sampler;
use crate::state::{self, is_our_daemon, ClaimError, State, BIN_NAME};
use crate::sys::{self, SignalWait};
use dftracer_core::{Config, Layer, Origin};
use std::ffi::CString;
use std::fmt;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How long `start` waits for the daemon to report that it samples.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `stop` waits for the daemon to finish its trace and exit.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `start` gives a leftover daemon to exit after SIGTERM before SIGKILL.
const LEFTOVER_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a command failed; each is one line on stderr and exit code 1.
#[derive(Debug)]
pub enum Error {
    NoLogFile,
    LogFile {
        prefix: String,
        reason: String,
    },
    Config(String),
    LogDir {
        dir: PathBuf,
        reason: String,
    },
    AlreadyRunning {
        pid: u32,
        host: String,
        dir: PathBuf,
    },
    NotRunning {
        host: String,
        dir: PathBuf,
    },
    StopTimeout {
        pids: Vec<u32>,
        secs: u64,
    },
    Signal {
        pid: u32,
        reason: String,
    },
    Spawn(String),
    Daemon {
        reason: String,
        err_file: PathBuf,
    },
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        1
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoLogFile => write!(
                f,
                "DFTRACER_LOG_FILE is not set; set it to the trace prefix (the file is <prefix>_<hostname>.pfw.gz)"
            ),
            Error::LogFile { prefix, reason } => {
                write!(f, "cannot write the trace with DFTRACER_LOG_FILE={prefix}: {reason}")
            }
            Error::Config(e) => write!(f, "{e}"),
            Error::LogDir { dir, reason } => {
                write!(f, "cannot use log_dir {}: {reason}", dir.display())
            }
            Error::AlreadyRunning { pid, host, dir } => write!(
                f,
                "already running on {host} (PID {pid}) for {}; run `{BIN_NAME} stop {}` first",
                dir.display(),
                dir.display()
            ),
            Error::NotRunning { host, dir } => {
                write!(f, "no running service on {host} for {}", dir.display())
            }
            Error::StopTimeout { pids, secs } => write!(
                f,
                "PID {} did not exit within {secs} s of SIGTERM; its trace may be incomplete",
                pids.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
            ),
            Error::Signal { pid, reason } => write!(f, "cannot signal PID {pid}: {reason}"),
            Error::Spawn(e) => write!(f, "cannot start the daemon: {e}"),
            Error::Daemon { reason, err_file } => {
                write!(f, "the daemon failed to start: {reason} (see {})", err_file.display())
            }
        }
    }
}

impl std::error::Error for Error {}

/// The configuration the service runs with: the environment and YAML as for any DFTracer
/// process (read whether or not DFTRACER_ENABLE is set), forced on, with our own signal
/// handling, and a checked absolute log prefix.
fn service_config() -> Result<Config, Error> {
    let (mut cfg, warnings, err) = dftracer_core::config::resolve(|k| std::env::var(k).ok());
    for w in &warnings {
        eprintln!("{BIN_NAME}: warning: {w}");
    }
    if let Some(e) = err {
        return Err(Error::Config(e.to_string()));
    }
    let raw = cfg
        .log_file
        .clone()
        .filter(|p| !p.trim().is_empty())
        .ok_or(Error::NoLogFile)?;
    let prefix = if raw.starts_with('/') {
        raw
    } else {
        let cwd = std::env::current_dir().map_err(|e| Error::LogFile {
            prefix: raw.clone(),
            reason: format!("cannot resolve the relative path: {e}"),
        })?;
        format!(
            "{}/{}",
            cwd.display(),
            raw.strip_prefix("./").unwrap_or(&raw)
        )
    };
    check_prefix(&prefix)?;
    cfg.log_file = Some(prefix);
    cfg.enable = true;
    cfg.metadata = true;
    // We wait for SIGTERM/SIGINT/SIGHUP ourselves (sigtimedwait), then finalize.
    cfg.bind_signals = false;
    // Every flush interval the JSON is compressed into the open gzip member, so the buffer
    // only ever holds one interval's lines (a few KB): its size does not set the RSS. It does
    // set how much JSON a member holds before it is closed and a new one starts from an empty
    // window (about 5 minutes of samples at 1 s): fewer restarts, fewer bytes per sample.
    cfg.write_buffer_size = 1024 * 1024;
    Ok(cfg)
}

/// The directory of `prefix` exists (missing directories are created, as the tracer does for
/// `DFTRACER_LOG_FILE`) and a file can really be created there (a probe created with O_EXCL
/// and removed at once: `access()` says yes to root on a read-only mount).
fn check_prefix(prefix: &str) -> Result<(), Error> {
    let fail = |reason: String| Error::LogFile {
        prefix: prefix.to_string(),
        reason,
    };
    dftracer_core::frontend::prepare_log_dir(prefix).map_err(|e| {
        let dir = Path::new(prefix).parent().unwrap_or(Path::new("/"));
        fail(format!("directory {}: {e}", dir.display()))
    })?;
    let probe = format!("{prefix}.dftracer-probe-{}", std::process::id());
    match sys::create_own_file(Path::new(&probe), 0o600) {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(fail(e.to_string())),
    }
}

fn prepare_log_dir(st: &State) -> Result<(), Error> {
    let fail = |e: std::io::Error| Error::LogDir {
        dir: st.log_dir.clone(),
        reason: e.to_string(),
    };
    fs::create_dir_all(&st.log_dir).map_err(fail)?;
    dftracer_core::frontend::dir_writable(&st.log_dir.to_string_lossy()).map_err(fail)
}

/// Waits until none of `pids` is alive (zombies count as gone); returns those still alive.
fn wait_gone(pids: &[u32], timeout: Duration) -> Vec<u32> {
    let deadline = Instant::now() + timeout;
    loop {
        let alive: Vec<u32> = pids
            .iter()
            .copied()
            .filter(|&p| state::is_alive(p))
            .collect();
        if alive.is_empty() || Instant::now() >= deadline {
            if alive.is_empty() {
                wait_reaped(pids);
            }
            return alive;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// After the daemons exited: wait (up to 2 s) until their process entries are gone too, so a
/// scheduler that counts leftover processes sees none once `stop` returns. A daemon is
/// reparented to init (or the nearest subreaper), which reaps it at once; a zombie that
/// nobody reaps is accepted after the wait (it holds no resources).
fn wait_reaped(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline
        && pids
            .iter()
            .any(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
    {
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn signal(pid: u32, sig: i32) -> Result<(), Error> {
    match sys::kill(pid, sig) {
        Ok(()) => Ok(()),
        // Exited in the meantime: that is what we wanted.
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        Err(e) => Err(Error::Signal {
            pid,
            reason: e.to_string(),
        }),
    }
}

pub fn start(dir: &str) -> Result<ExitCode, Error> {
    sys::ensure_std_fds();
    let st = State::new(dir);
    let cfg = service_config()?;
    prepare_log_dir(&st)?;
    // The daemon's stdout and stderr: checked now (a link or FIFO planted at either name is
    // refused before anything else is done), truncated once leftovers are stopped.
    let open = |p: &Path| {
        sys::open_own_file(p).map_err(|e| Error::LogDir {
            dir: st.log_dir.clone(),
            reason: e.to_string(),
        })
    };
    let out = open(&st.out_file)?;
    let err = open(&st.err_file)?;
    if let Some(pid) = st.read_pid() {
        if is_our_daemon(pid, &st) {
            return Err(Error::AlreadyRunning {
                pid,
                host: st.host.clone(),
                dir: st.log_dir.clone(),
            });
        }
    }
    if st.pid_file_exists() {
        let _ = fs::remove_file(&st.pid_file);
        println!(
            "{BIN_NAME}: removed stale PID file {}",
            st.pid_file.display()
        );
    }
    stop_leftovers(&st)?;

    for (f, p) in [(&out, &st.out_file), (&err, &st.err_file)] {
        f.set_len(0).map_err(|e| Error::LogDir {
            dir: st.log_dir.clone(),
            reason: format!("{}: {e}", p.display()),
        })?;
    }
    let (ready_r, ready_w) = sys::pipe().map_err(|e| Error::Spawn(format!("pipe: {e}")))?;
    let exe = std::env::current_exe().map_err(|e| Error::Spawn(format!("own path: {e}")))?;
    let cstr =
        |b: &[u8]| CString::new(b).map_err(|_| Error::Spawn("NUL byte in an argument".into()));
    let exe_c = cstr(exe.as_os_str().as_bytes())?;
    let argv = vec![
        exe_c.clone(),
        cstr(b"run")?,
        cstr(b"--ready-fd")?,
        cstr(ready_w.as_raw_fd().to_string().as_bytes())?,
        cstr(st.log_dir.as_os_str().as_bytes())?,
    ];
    let envp = daemon_env(cfg.log_file.as_deref().unwrap_or_default())?;
    sys::detach(sys::Detach {
        exe: exe_c,
        argv,
        envp,
        stdout: out.into(),
        stderr: err.into(),
        ready: ready_w,
    })
    .map_err(|e| Error::Spawn(e.to_string()))?;

    let mut reader = File::from(ready_r);
    let msg = read_line_timeout(&mut reader, READY_TIMEOUT);
    let daemon_failed = |reason: String| Error::Daemon {
        reason,
        err_file: st.err_file.clone(),
    };
    match msg {
        Some(line) if line.starts_with("ready ") => {
            let mut parts = line["ready ".len()..].splitn(2, ' ');
            let pid = parts.next().unwrap_or("?");
            let trace = parts.next().unwrap_or("?");
            println!(
                "{BIN_NAME} started on {} (PID {pid}) for {}; trace {trace}",
                st.host,
                st.log_dir.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Some(line) => Err(daemon_failed(
            line.strip_prefix("error ").unwrap_or(&line).to_string(),
        )),
        None => {
            // No word from the daemon: make sure none is left behind.
            for pid in st.daemons() {
                let _ = sys::kill(pid, libc::SIGKILL);
            }
            let last = sys::read_own_file(&st.err_file)
                .ok()
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .and_then(|t| {
                    t.lines()
                        .rev()
                        .find(|l| !l.trim().is_empty())
                        .map(str::to_string)
                })
                .unwrap_or_else(|| "it exited or hung without reporting".into());
            Err(daemon_failed(last))
        }
    }
}

/// The daemon's environment: ours, with the checked absolute prefix (env overrides YAML, so
/// this also pins a prefix that came from YAML) and an absolute YAML path (the daemon runs in
/// `/`).
fn daemon_env(prefix: &str) -> Result<Vec<CString>, Error> {
    let mut env = Vec::new();
    for (k, v) in std::env::vars_os() {
        let kb = k.as_bytes();
        if kb == b"DFTRACER_LOG_FILE" {
            continue;
        }
        let mut line = kb.to_vec();
        line.push(b'=');
        if kb == b"DFTRACER_CONFIGURATION" && !v.as_bytes().starts_with(b"/") && !v.is_empty() {
            let abs = std::env::current_dir().unwrap_or_default().join(&v);
            line.extend_from_slice(abs.as_os_str().as_bytes());
        } else {
            line.extend_from_slice(v.as_bytes());
        }
        if let Ok(c) = CString::new(line) {
            env.push(c);
        }
    }
    env.push(
        CString::new(format!("DFTRACER_LOG_FILE={prefix}"))
            .map_err(|_| Error::Spawn("NUL byte in DFTRACER_LOG_FILE".into()))?,
    );
    Ok(env)
}

/// Reads one `\n`-terminated line (or what came before EOF) within `timeout`; `None` on
/// timeout or when nothing came.
fn read_line_timeout(f: &mut File, timeout: Duration) -> Option<String> {
    let deadline = Instant::now() + timeout;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || !sys::wait_readable(f.as_raw_fd(), left) {
            return None;
        }
        match f.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.contains(&b'\n') || buf.len() > 64 * 1024 {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let line = text.lines().next().unwrap_or("").trim().to_string();
    (!line.is_empty()).then_some(line)
}

/// Daemons of ours for this log_dir that the PID file does not name (a lost PID file, a
/// crashed launcher): SIGTERM, then SIGKILL after a bounded wait.
fn stop_leftovers(st: &State) -> Result<(), Error> {
    let left = st.daemons();
    if left.is_empty() {
        return Ok(());
    }
    for &pid in &left {
        println!(
            "{BIN_NAME}: stopping leftover daemon PID {pid} for {}",
            st.log_dir.display()
        );
        signal(pid, libc::SIGTERM)?;
    }
    let stubborn = wait_gone(&left, LEFTOVER_TIMEOUT);
    for &pid in &stubborn {
        signal(pid, libc::SIGKILL)?;
    }
    wait_gone(&stubborn, Duration::from_secs(2));
    Ok(())
}

pub fn stop(dir: &str) -> Result<ExitCode, Error> {
    let st = State::new(dir);
    let pids = st.daemons();
    if pids.is_empty() {
        if st.pid_file_exists() {
            let _ = fs::remove_file(&st.pid_file);
            eprintln!(
                "{BIN_NAME}: removed stale PID file {}",
                st.pid_file.display()
            );
        }
        return Err(Error::NotRunning {
            host: st.host.clone(),
            dir: st.log_dir.clone(),
        });
    }
    let trace = trace_from_out(&st.out_file)
        .map(|t| format!(" {t}"))
        .unwrap_or_default();
    for &pid in &pids {
        signal(pid, libc::SIGTERM)?;
    }
    let alive = wait_gone(&pids, STOP_TIMEOUT);
    if !alive.is_empty() {
        return Err(Error::StopTimeout {
            pids: alive,
            secs: STOP_TIMEOUT.as_secs(),
        });
    }
    for &pid in &pids {
        // Normally the daemon removed it; not if it died some other way meanwhile.
        st.release_pid_file(pid);
        println!(
            "{BIN_NAME} stopped on {} (PID {pid}); trace{trace} complete",
            st.host
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn status(dir: &str) -> Result<ExitCode, Error> {
    let st = State::new(dir);
    let pids = st.daemons();
    if let Some(&pid) = pids.first() {
        let trace = trace_from_out(&st.out_file)
            .map(|t| format!("; trace {t}"))
            .unwrap_or_default();
        println!(
            "{BIN_NAME} is running on {} (PID {pid}) for {}{trace}",
            st.host,
            st.log_dir.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let stale = if st.pid_file_exists() {
        format!(" (stale PID file {})", st.pid_file.display())
    } else {
        String::new()
    };
    println!(
        "{BIN_NAME} is not running on {} for {}{stale}",
        st.host,
        st.log_dir.display()
    );
    Ok(ExitCode::from(3))
}

/// The trace path from the daemon's first stdout line.
fn trace_from_out(out: &Path) -> Option<String> {
    let text = String::from_utf8(sys::read_own_file(out).ok()?).ok()?;
    let line = text.lines().next()?;
    Some(line.split_once(" ms; trace ")?.1.trim().to_string())
}

/// Tells `start` how startup went (at most once).
struct Ready(Option<File>);

impl Ready {
    fn send(&mut self, msg: &str) {
        if let Some(mut f) = self.0.take() {
            let _ = f.write_all(msg.as_bytes());
        }
    }
}

/// The daemon (detached by `start`) or the foreground service (`run`).
pub fn run(dir: &str, ready_fd: Option<i32>) -> Result<ExitCode, Error> {
    let mut ready = Ready(ready_fd.and_then(sys::adopt_fd));
    let r = serve(dir, &mut ready);
    if let Err(e) = &r {
        ready.send(&format!("error {e}\n"));
    }
    r
}

fn serve(dir: &str, ready: &mut Ready) -> Result<ExitCode, Error> {
    let st = State::new(dir);
    let mut cfg = service_config()?;
    // Before any thread exists, so that every thread inherits the mask.
    let signals = SignalWait::block();
    sys::single_malloc_arena();
    prepare_log_dir(&st)?;
    let pid = std::process::id();
    st.claim_pid_file(pid).map_err(|e| match e {
        ClaimError::Running(other) => Error::AlreadyRunning {
            pid: other,
            host: st.host.clone(),
            dir: st.log_dir.clone(),
        },
        ClaimError::Io(e) => Error::LogDir {
            dir: st.log_dir.clone(),
            reason: format!("{}: {e}", st.pid_file.display()),
        },
    })?;
    let result = sample(&st, &mut cfg, &signals, ready);
    st.release_pid_file(pid);
    result
}

/// Ring bytes: half of what the records of the ticks between two flushes take (about 400
/// bytes per record in the ring), at least 32 KiB and at most the configured size. A ring more
/// than half full wakes the writer early, and a full one is drained by the sampling thread
/// itself, so this only needs to be about right; a small ring keeps the daemon's RSS small.
fn ring_size(records_per_tick: usize, cfg: &Config) -> usize {
    let ticks = (cfg.flush_interval_ms / cfg.trace_interval_ms.max(1)) as usize + 1;
    let want = records_per_tick.max(8) * 400 * ticks / 2;
    want.next_power_of_two()
        .clamp(32 * 1024, cfg.ring_size.max(32 * 1024))
}

fn sample(
    st: &State,
    cfg: &mut Config,
    signals: &SignalWait,
    ready: &mut Ready,
) -> Result<ExitCode, Error> {
    let mut sampler = Sampler::new();
    sampler.tick(&mut |_, _, _| {}); // the baseline for every per-interval figure
    cfg.ring_size = ring_size(sampler.records_per_tick(), cfg);
    let prefix = cfg.log_file.clone().unwrap_or_default();
    let interval = Duration::from_millis(cfg.trace_interval_ms);
    let flush_every = Duration::from_millis(cfg.flush_interval_ms);
    // Wake-ups, not work, dominate the cost of an idle daemon (a VM's vCPU leaving halt costs
    // more than reading five /proc files). The sampling thread writes the trace itself right
    // after a tick, while it is awake anyway; the core's writer thread, which still wakes at
    // least once a second, gets a timer slack of one interval (it inherits the slack set
    // here: it starts at the first record). That does not make it fire with the next tick
    // (its deadline is its own wake-up + 1 s, just after our next tick, so it fires on a
    // later interrupt: see benches/service/RESULTS.md, 2026-11-30 02:14); it is harmless.
    sys::set_timer_slack(interval.as_nanos().min(u64::MAX as u128) as u64);
    // The daemon starts no traced children: nothing to export to the environment.
    dftracer_core::frontend::export_env_at_init(false);
    dftracer_core::init(cfg.clone(), Origin::Service, None).map_err(|e| Error::LogFile {
        prefix: prefix.clone(),
        reason: e.to_string(),
    })?;
    // A first sample, written at once: the file (with its header records) exists and its
    // name is known before `start` reports success, and errors surface now.
    let ts = dftracer_core::now();
    let mut records = sampler
        .instant(&mut |name, cat, args| dftracer_core::counter(Layer::Psutil, name, cat, ts, args))
        .records;
    dftracer_core::flush();
    let Some(trace) = dftracer_core::stats().path else {
        dftracer_core::finalize();
        return Err(Error::LogFile {
            prefix,
            reason: "the trace file could not be created".into(),
        });
    };
    // The sampling thread's own slack: 1 % of the interval (at most 10 ms), enough for the
    // kernel to batch our tick with other timers without visibly moving the samples.
    sys::set_timer_slack((interval.as_nanos() / 100).min(10_000_000) as u64);
    let pid = std::process::id();
    println!(
        "{BIN_NAME} running on {} (PID {pid}) for {}, every {} ms; trace {trace}",
        st.host,
        st.log_dir.display(),
        cfg.trace_interval_ms
    );
    ready.send(&format!("ready {pid} {trace}\n"));

    let mut next = Instant::now() + interval;
    let mut last_flush = Instant::now();
    let sig = loop {
        let now = Instant::now();
        if now < next {
            if let Some(s) = signals.wait(next - now) {
                break s;
            }
            continue;
        }
        let ts = dftracer_core::now();
        records += sampler
            .tick(&mut |name, cat, args| dftracer_core::counter(Layer::Psutil, name, cat, ts, args))
            .records;
        // Write at least every flush interval (a SIGKILL loses at most that much), on this
        // thread while it is awake; half a tick early rather than a whole tick late.
        if last_flush.elapsed() + interval / 2 >= flush_every {
            dftracer_core::flush();
            last_flush = Instant::now();
        }
        next += interval;
        let now = Instant::now();
        if next <= now {
            // Overran (suspend, overload): skip the missed ticks rather than burst.
            next = now + interval;
        }
    };
    dftracer_core::finalize();
    println!(
        "{BIN_NAME} stopped by {}; trace {trace} complete ({records} records)",
        sys::signal_name(sig)
    );
    Ok(ExitCode::SUCCESS)
}
