//! Harness shared by the preload and C API tests: the library of this build, scratch
//! directories, compiling C, and reading trace files back (every gzip member with flate2's
//! `MultiGzDecoder`, every line with serde_json).
#![allow(dead_code)]

pub mod reference;

pub use serde_json::Value as J;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

// ---------------------------------------------------------------- harness

/// The preload library of this build. Cargo does not build a cdylib-only package's library
/// for its integration tests, so the first caller builds it (same target dir and profile as
/// this test binary; cargo's own up-to-date check makes that a no-op when nothing changed).
pub fn lib() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            // target/<profile>/deps/<test-binary> -> target/<profile>/libdftracer_preload.so
            let exe = std::env::current_exe().unwrap();
            let profile_dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
            let target_dir = profile_dir.parent().unwrap();
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut cmd = Command::new(cargo);
            cmd.args(["build", "-p", "dftracer-preload", "--target-dir"])
                .arg(target_dir)
                .current_dir(env!("CARGO_MANIFEST_DIR"));
            if profile_dir.file_name().unwrap() == "release" {
                cmd.arg("--release");
            }
            let out = cmd.output().expect("cargo build -p dftracer-preload");
            assert!(
                out.status.success(),
                "building the preload library failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let so = profile_dir.join("libdftracer_preload.so");
            assert!(so.exists(), "{} missing after cargo build", so.display());
            // Its link name and its SONAME, which programs linked against it look for
            // (scripts/native-lib.sh makes the same links).
            for name in ["libdftracer_core.so", "libdftracer_core.so.4.3.0"] {
                let core = profile_dir.join(name);
                if std::fs::symlink_metadata(&core).is_err() {
                    let _ = std::os::unix::fs::symlink("libdftracer_preload.so", &core);
                }
            }
            so
        })
        .clone()
}

pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "dft-preload-{}-{}-{}",
            name,
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["o", "data", "data2", "other"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        Scratch { dir }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    pub fn s(&self, rel: &str) -> String {
        self.path(rel).to_string_lossy().into_owned()
    }

    /// Compiles C source `src` into an executable named `name`.
    pub fn compile(&self, name: &str, src: &str) -> PathBuf {
        self.compile_with(name, src, &[])
    }

    /// Compiles C source `src` into `name` with `extra` gcc arguments after the source
    /// (`-shared -fPIC`, `-L...`, `-l...`, `-Wl,...`).
    pub fn compile_with(&self, name: &str, src: &str, extra: &[&str]) -> PathBuf {
        let c = self.path(&format!("{name}.c"));
        std::fs::write(&c, src).unwrap();
        let exe = self.path(name);
        let out = Command::new("gcc")
            .args(["-O1", "-fno-builtin", "-pthread", "-o"])
            .arg(&exe)
            .arg(&c)
            .args(extra)
            .output()
            .expect("gcc");
        assert!(
            out.status.success(),
            "gcc failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        exe
    }

    /// A command under the preload with tracing on, writing traces to `o/`.
    pub fn cmd(&self, exe: impl AsRef<std::ffi::OsStr>, data_dir: Option<&str>) -> Command {
        let mut c = Command::new(exe);
        c.current_dir(&self.dir)
            .env("LD_PRELOAD", lib())
            .env("DFTRACER_ENABLE", "1")
            .env("DFTRACER_INIT", "PRELOAD")
            .env("DFTRACER_LOG_FILE", self.path("o/trace"))
            .env_remove("DFTRACER_CONFIGURATION")
            .env_remove("DFTRACER_DATA_DIR")
            .env_remove("DFTRACER_INC_METADATA")
            .stdin(Stdio::null());
        if let Some(d) = data_dir {
            c.env("DFTRACER_DATA_DIR", d);
        }
        c
    }

    pub fn traces(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.path("o"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    }

    /// The only trace file, parsed.
    pub fn only_trace(&self) -> Trace {
        let t = self.traces();
        assert_eq!(t.len(), 1, "expected one trace file, got {t:?}");
        Trace::read(&t[0])
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

pub fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub struct Trace {
    pub path: PathBuf,
    pub lines: Vec<J>,
}

impl Trace {
    /// Every line of a trace file, each parsed as JSON (a bad line fails the test).
    pub fn read(path: &Path) -> Trace {
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
            text.ends_with(b"\n"),
            "{}: last line unterminated",
            path.display()
        );
        let lines = text
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| {
                serde_json::from_slice(l).unwrap_or_else(|e| {
                    panic!("bad JSON line {:?}: {e}", String::from_utf8_lossy(l))
                })
            })
            .collect();
        Trace {
            path: path.to_path_buf(),
            lines,
        }
    }

    /// LIBC_IO events (type 3), in file order.
    pub fn io(&self) -> Vec<&J> {
        self.lines
            .iter()
            .filter(|l| l["ph"] == 1 && l["type"] == 3)
            .collect()
    }

    pub fn names(&self) -> Vec<String> {
        self.io()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// FH records: hash -> path.
    pub fn files(&self) -> HashMap<String, String> {
        self.lines
            .iter()
            .filter(|l| l["name"] == "FH" && l["ph"] == 4)
            .map(|l| {
                (
                    l["args"]["value"].as_str().unwrap().to_string(),
                    l["args"]["name"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    /// The path behind an event's `fhash`.
    pub fn file_of(&self, ev: &J) -> String {
        let h = ev["args"]["fhash"].as_str().expect("fhash");
        self.files()
            .get(h)
            .cloned()
            .unwrap_or_else(|| panic!("no FH for {h}"))
    }

    pub fn has_end(&self) -> bool {
        self.lines
            .iter()
            .any(|l| l["name"] == "end" && l["cat"] == "dftracer")
    }
}

/// Headers and a CHECK macro for the C programs the tests compile.
pub const PRELUDE: &str = r#"
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sys/resource.h>
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "CHECK failed line %d: %s (errno %d)\n", __LINE__, #c, errno); exit(90); } } while (0)
"#;

/// Spawns `cmd` with stdout piped and waits for its first line, which must be `ready`.
pub fn spawn_ready(cmd: &mut Command) -> std::process::Child {
    use std::io::BufRead;
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "ready\n");
    child
}

pub fn prog(body: &str) -> String {
    format!("{PRELUDE}\n{body}")
}

// ---------------------------------------------------------------- strace's text

/// Whether `prog` is on PATH.
pub fn have(prog: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {prog}")])
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Top-level arguments of a strace call, split on commas outside quotes and brackets.
pub fn split_args(s: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur = String::new();
    let (mut depth, mut quote, mut esc) = (0i32, false, false);
    for c in s.chars() {
        if quote {
            cur.push(c);
            if esc {
                esc = false;
            } else if c == '\\' {
                esc = true;
            } else if c == '"' {
                quote = false;
            }
            continue;
        }
        match c {
            '"' => {
                quote = true;
                cur.push(c)
            }
            '(' | '[' | '{' | '<' => {
                depth += 1;
                cur.push(c)
            }
            ')' | ']' | '}' | '>' => {
                depth -= 1;
                if depth < 0 {
                    break;
                }
                cur.push(c)
            }
            ',' if depth == 0 => {
                out.push(cur.trim().to_string());
                cur.clear();
            }
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

/// The path in an fd annotation `3</a/b>` or `AT_FDCWD</a>`.
pub fn annotated(a: &str) -> Option<String> {
    let i = a.find('<')?;
    let j = a.rfind('>')?;
    (j > i).then(|| a[i + 1..j].to_string())
}

pub fn unquote(a: &str) -> Option<String> {
    let a = a.strip_suffix("...").unwrap_or(a);
    (a.len() >= 2 && a.starts_with('"') && a.ends_with('"')).then(|| a[1..a.len() - 1].to_string())
}

pub fn join(base: &str, p: &str) -> String {
    let full = if p.starts_with('/') {
        p.to_string()
    } else {
        format!("{base}/{p}")
    };
    let mut parts: Vec<&str> = vec![];
    for c in full.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}
