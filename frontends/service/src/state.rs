//! The per-host state files in `log_dir` and the question "which processes are our daemon for
//! this log_dir?", answered from `/proc/<pid>/{stat,cmdline,ns/uts}`, never by matching a
//! shell command line.

use crate::proc;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The binary name every daemon of ours runs under (argv\[0\]'s basename).
pub const BIN_NAME: &str = "dftracer_service";

/// Where one host's service keeps its state.
#[derive(Clone, Debug)]
pub struct State {
    /// Absolute, one trailing `/` stripped.
    pub log_dir: PathBuf,
    /// Full hostname (the trace file name uses it).
    pub host: String,
    /// Hostname up to the first `.` (the state files use it).
    pub short_host: String,
    pub pid_file: PathBuf,
    pub out_file: PathBuf,
    pub err_file: PathBuf,
}

/// The reference's rule: one trailing `/` stripped (`/` itself stays `/`). A relative
/// directory is made absolute against `cwd`.
pub fn normalize_dir(dir: &str, cwd: &Path) -> PathBuf {
    let d = match dir.strip_suffix('/') {
        Some("") => "/",
        Some(s) => s,
        None => dir,
    };
    let d = if d.is_empty() { "." } else { d };
    let p = Path::new(d);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        let rel = d.strip_prefix("./").unwrap_or(d);
        if rel == "." {
            cwd.to_path_buf()
        } else {
            cwd.join(rel)
        }
    }
}

impl State {
    pub fn new(log_dir: &str) -> State {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let log_dir = normalize_dir(log_dir, &cwd);
        let host = dftracer_core::frontend::hostname();
        let short_host = host.split('.').next().unwrap_or(&host).to_string();
        let base = format!("dftracer_server_{short_host}");
        State {
            pid_file: log_dir.join(format!("{base}.pid")),
            out_file: log_dir.join(format!("{base}.out")),
            err_file: log_dir.join(format!("{base}.err")),
            log_dir,
            host,
            short_host,
        }
    }

    /// The pid in the PID file, if the file holds one.
    pub fn read_pid(&self) -> Option<u32> {
        let text = crate::sys::read_own_file(&self.pid_file).ok()?;
        let first = text.split(|&b| b == b'\n').next()?;
        proc::parse_u64(proc::trim(first))
            .and_then(|p| u32::try_from(p).ok())
            .filter(|&p| p > 0)
    }

    /// True if the PID file exists (whatever it holds).
    pub fn pid_file_exists(&self) -> bool {
        self.pid_file.symlink_metadata().is_ok()
    }

    /// Creates the PID file for `pid` with O_EXCL. A file left by a dead or foreign process
    /// is replaced; one naming a live daemon of ours is an error that names it.
    pub fn claim_pid_file(&self, pid: u32) -> Result<(), ClaimError> {
        for _ in 0..5 {
            match crate::sys::create_own_file(&self.pid_file, 0o644) {
                Ok(mut f) => {
                    return f
                        .write_all(format!("{pid}\n").as_bytes())
                        .map_err(ClaimError::Io);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    if let Some(other) = self.read_pid() {
                        if other != pid && is_our_daemon(other, self) {
                            return Err(ClaimError::Running(other));
                        }
                    }
                    let _ = fs::remove_file(&self.pid_file);
                }
                Err(e) => return Err(ClaimError::Io(e)),
            }
        }
        Err(ClaimError::Io(io::Error::other(
            "the PID file keeps reappearing",
        )))
    }

    /// Removes the PID file if it still names `pid`.
    pub fn release_pid_file(&self, pid: u32) {
        if self.read_pid() == Some(pid) {
            let _ = fs::remove_file(&self.pid_file);
        }
    }

    /// Every live daemon of ours for this log_dir in this UTS namespace, the PID file's first.
    pub fn daemons(&self) -> Vec<u32> {
        let me = std::process::id();
        let mut found: Vec<u32> = Vec::new();
        if let Some(p) = self.read_pid() {
            if p != me && is_our_daemon(p, self) {
                found.push(p);
            }
        }
        if let Ok(dir) = fs::read_dir("/proc") {
            for e in dir.flatten() {
                let name = e.file_name();
                let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                if pid != me && !found.contains(&pid) && is_our_daemon(pid, self) {
                    found.push(pid);
                }
            }
        }
        found
    }
}

#[derive(Debug)]
pub enum ClaimError {
    Running(u32),
    Io(io::Error),
}

/// A process exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    match fs::read(format!("/proc/{pid}/stat")) {
        Ok(raw) => proc::pid_stat(&raw).is_some_and(|s| s.state != b'Z' && s.state != b'X'),
        Err(_) => false,
    }
}

fn readlink(p: impl AsRef<Path>) -> Option<PathBuf> {
    fs::read_link(p).ok()
}

/// Is `pid` a live `dftracer_service` daemon (ours, or a reference `start` daemon) serving
/// `state.log_dir`, in our UTS namespace (so a different hostname on the same machine, as with
/// `unshare --uts`, is a different node)?
pub fn is_our_daemon(pid: u32, state: &State) -> bool {
    if pid == 0 || !is_alive(pid) {
        return false;
    }
    let Ok(raw) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let mut args = proc::cmdline_args(&raw);
    let Some(argv0) = args.next() else {
        return false;
    };
    let base = argv0.rsplit(|&b| b == b'/').next().unwrap_or(argv0);
    if base != BIN_NAME.as_bytes() {
        return false;
    }
    let cmd = args.next();
    let mut dir: Option<&[u8]> = None;
    let mut skip_value = false;
    for a in args {
        if skip_value {
            skip_value = false;
        } else if a == b"--ready-fd" {
            skip_value = true;
        } else if !a.starts_with(b"-") && dir.is_none() {
            dir = Some(a);
        }
    }
    let dir = std::str::from_utf8(dir.unwrap_or(b"/tmp")).unwrap_or("");
    match cmd {
        Some(b"run") => {}
        // A reference daemon (or our launcher): only a detached one writing our .out file.
        Some(b"start") => {
            if readlink(format!("/proc/{pid}/fd/1")).as_deref() != Some(state.out_file.as_path()) {
                return false;
            }
        }
        _ => return false,
    }
    let cwd = readlink(format!("/proc/{pid}/cwd")).unwrap_or_else(|| PathBuf::from("/"));
    if normalize_dir(dir, &cwd) != state.log_dir {
        return false;
    }
    let ours = readlink("/proc/self/ns/uts");
    let theirs = readlink(format!("/proc/{pid}/ns/uts"));
    ours.is_some() && ours == theirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirs_are_normalized() {
        let cwd = Path::new("/work");
        assert_eq!(normalize_dir("/tmp/", cwd), PathBuf::from("/tmp"));
        assert_eq!(normalize_dir("/tmp//", cwd), PathBuf::from("/tmp/"));
        assert_eq!(normalize_dir("/", cwd), PathBuf::from("/"));
        assert_eq!(normalize_dir("logs", cwd), PathBuf::from("/work/logs"));
        assert_eq!(normalize_dir("./logs/", cwd), PathBuf::from("/work/logs"));
        assert_eq!(normalize_dir(".", cwd), PathBuf::from("/work"));
    }

    #[test]
    fn this_process_is_not_a_daemon() {
        let st = State::new("/tmp");
        assert!(!is_our_daemon(std::process::id(), &st));
        assert!(!is_our_daemon(1, &st));
        assert!(!is_our_daemon(0, &st));
        assert!(is_alive(std::process::id()));
    }
}
