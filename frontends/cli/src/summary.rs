//! `dftracer summary`: the first numbers a user wants, per process and in total: events by
//! category, time in the top functions, I/O calls, bytes and bandwidth per call family and
//! per file, and the losses that `end` records report.
//!
//! Aggregated records (ph 3) count as `dft_cnt` events with their `_sum` fields, so a trace
//! written with aggregation on gives the same totals as one written without. I/O is the
//! `POSIX` and `STDIO` categories; bytes are `ret` of the read and write families (times
//! `size` for `fread`/`fwrite`, whose `ret` counts items), failed calls (`ret` < 0) move none.
//! Bandwidth is bytes over the time spent in those calls.

use crate::input;
use crate::meta::Meta;
use crate::scan::{self, Line, Num, Ph, Val};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

/// Calls, bytes and time of some I/O.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Io {
    pub calls: u64,
    pub bytes: u64,
    pub ns: u64,
}

impl Io {
    fn add(&mut self, o: &Io) {
        self.calls += o.calls;
        self.bytes += o.bytes;
        self.ns += o.ns;
    }
    fn mb_s(&self) -> f64 {
        if self.ns == 0 {
            0.0
        } else {
            self.bytes as f64 / 1e6 / (self.ns as f64 / 1e9)
        }
    }
}

/// One process (host and pid), or the total.
#[derive(Clone, Debug, Default)]
pub struct Proc {
    pub host: String,
    pub pid: u64,
    pub exec: String,
    pub files: u64,
    /// Events (complete, plus `dft_cnt` of aggregated records), by category.
    pub by_cat: BTreeMap<String, u64>,
    /// Calls and time by function name.
    pub funcs: HashMap<String, (u64, u64)>,
    pub families: BTreeMap<&'static str, Io>,
    pub per_file: HashMap<String, Io>,
    pub counters: u64,
    pub dropped: u64,
    pub lost: u64,
    /// Files of this process with no `end` record.
    pub unended: u64,
    pub first_ns: Option<u64>,
    pub last_ns: u64,
}

impl Proc {
    fn merge(&mut self, o: &Proc) {
        self.files += o.files;
        for (k, v) in &o.by_cat {
            *self.by_cat.entry(k.clone()).or_default() += v;
        }
        for (k, (c, t)) in &o.funcs {
            let e = self.funcs.entry(k.clone()).or_default();
            e.0 += c;
            e.1 += t;
        }
        for (k, v) in &o.families {
            self.families.entry(k).or_default().add(v);
        }
        for (k, v) in &o.per_file {
            self.per_file.entry(k.clone()).or_default().add(v);
        }
        self.counters += o.counters;
        self.dropped += o.dropped;
        self.lost += o.lost;
        self.unended += o.unended;
        if let Some(f) = o.first_ns {
            self.first_ns = Some(self.first_ns.map_or(f, |s| s.min(f)));
        }
        self.last_ns = self.last_ns.max(o.last_ns);
        if self.exec.is_empty() {
            self.exec = o.exec.clone();
        }
    }
    pub fn events(&self) -> u64 {
        self.by_cat.values().sum()
    }
}

/// The summary of a set of traces.
#[derive(Debug, Default)]
pub struct Summary {
    pub files: usize,
    pub bytes: u64,
    pub lines: u64,
    pub bad_lines: u64,
    /// Lines that are JSON objects.
    pub valid_lines: u64,
    pub errors: Vec<(PathBuf, String)>,
    /// Files with lines over the line limit (skipped), and what they were.
    pub long_lines: Vec<(PathBuf, crate::input::LongLines)>,
    /// Files read to the end without one valid line.
    pub no_valid: Vec<PathBuf>,
    /// By (host, pid), sorted.
    pub procs: BTreeMap<(String, u64), Proc>,
}

/// Which call family an I/O function belongs to.
pub fn family(name: &str) -> &'static str {
    let n = name.trim_start_matches('_');
    match n {
        "read" | "pread" | "pread64" | "readv" | "preadv" | "preadv2" | "preadv64" | "fread"
        | "fread_chk" | "fgets" | "fgetc" | "getc" | "fscanf" | "getline" | "getdelim" => "read",
        "write" | "pwrite" | "pwrite64" | "writev" | "pwritev" | "pwritev2" | "pwritev64"
        | "fwrite" | "fputs" | "fputc" | "putc" | "fprintf" | "vfprintf" => "write",
        "open" | "open64" | "openat" | "openat64" | "creat" | "creat64" | "fopen" | "fopen64"
        | "fdopen" | "freopen" => "open",
        "close" | "fclose" => "close",
        "lseek" | "lseek64" | "fseek" | "fseeko" | "fseeko64" | "ftell" | "ftello" | "rewind" => {
            "seek"
        }
        "fsync" | "fdatasync" | "sync" | "syncfs" | "fflush" | "msync" | "sync_file_range" => {
            "sync"
        }
        _ if n.contains("stat") || n.starts_with("access") || n == "faccessat" => "stat",
        _ if n.starts_with("mmap") || n.starts_with("munmap") => "mmap",
        _ => "other",
    }
}

fn is_io(cat: &[u8]) -> bool {
    cat.eq_ignore_ascii_case(b"POSIX") || cat.eq_ignore_ascii_case(b"STDIO")
}

/// Per-file work: one file's processes.
struct FileSum {
    meta: Meta,
    procs: HashMap<u64, Proc>,
    /// pid → `fhash` (raw) → I/O; paths are looked up at the end.
    files: HashMap<u64, HashMap<Vec<u8>, Io>>,
    bad: u64,
    good: u64,
    ended: bool,
}

impl FileSum {
    fn proc(&mut self, pid: u64) -> &mut Proc {
        self.procs.entry(pid).or_insert_with(|| Proc {
            pid,
            ..Proc::default()
        })
    }

    fn line(&mut self, raw: &[u8]) {
        if raw.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let Ok(l) = scan::line(raw) else {
            self.bad += 1;
            return;
        };
        self.good += 1;
        if self.meta.observe(&l) {
            return;
        }
        let unit = self.meta.unit_ns;
        let pid = l.pid.unwrap_or(0);
        match l.ph {
            Some(Ph::Complete) => self.complete(&l, pid, unit),
            Some(Ph::Aggregated) => self.aggregated(&l, pid, unit),
            Some(Ph::Counter) => self.proc(pid).counters += 1,
            _ => {}
        }
    }

    fn span(p: &mut Proc, ts: u64, dur: u64) {
        p.first_ns = Some(p.first_ns.map_or(ts, |f| f.min(ts)));
        p.last_ns = p.last_ns.max(ts + dur);
    }

    fn complete(&mut self, l: &Line<'_>, pid: u64, unit: u64) {
        let ts = l.ts.unwrap_or(0).saturating_mul(unit);
        let dur = l.dur.unwrap_or(0).saturating_mul(unit);
        if l.cat == b"dftracer" {
            if l.name == b"end" {
                self.ended = true;
                let args = l.args.unwrap_or(b"{}");
                let n = |k: &[u8]| {
                    scan::get(args, k)
                        .and_then(Val::num)
                        .and_then(Num::as_u64)
                        .unwrap_or(0)
                };
                let (d, lo) = (n(b"dropped"), n(b"lost"));
                let p = self.proc(pid);
                p.dropped += d;
                p.lost += lo;
            }
            return;
        }
        let io = is_io(l.cat).then(|| {
            let args = l.args.unwrap_or(b"{}");
            let name = std::str::from_utf8(l.name).unwrap_or("");
            let fam = family(name);
            let bytes = bytes_of(fam, name, args, false);
            let fhash = scan::get(args, b"fhash").and_then(Val::str);
            (fam, bytes, fhash)
        });
        let p = self.proc(pid);
        Self::span(p, ts, dur);
        count(p, l, 1, dur);
        if let Some((fam, bytes, fhash)) = io {
            let io = Io {
                calls: 1,
                bytes,
                ns: dur,
            };
            p.families.entry(fam).or_default().add(&io);
            if let Some(h) = fhash {
                let per = self.files.entry(pid).or_default();
                match per.get_mut(h) {
                    Some(v) => v.add(&io),
                    None => {
                        per.insert(h.to_vec(), io);
                    }
                }
            }
        }
    }

    fn aggregated(&mut self, l: &Line<'_>, pid: u64, unit: u64) {
        let args = l.args.unwrap_or(b"{}");
        let n = |k: &str| {
            scan::get(args, k.as_bytes())
                .and_then(Val::num)
                .and_then(Num::as_u64)
        };
        let cnt = n("dft_cnt").unwrap_or(1);
        let dur = n("dur_sum")
            .or_else(|| n("dur"))
            .unwrap_or(0)
            .saturating_mul(unit);
        let ts = l.ts.unwrap_or(0).saturating_mul(unit);
        let io = is_io(l.cat).then(|| {
            let name = std::str::from_utf8(l.name).unwrap_or("");
            let fam = family(name);
            (fam, bytes_of(fam, name, args, true))
        });
        let p = self.proc(pid);
        Self::span(p, ts, 0);
        count(p, l, cnt, dur);
        if let Some((fam, bytes)) = io {
            p.families.entry(fam).or_default().add(&Io {
                calls: cnt,
                bytes,
                ns: dur,
            });
        }
    }
}

fn count(p: &mut Proc, l: &Line<'_>, n: u64, dur: u64) {
    match p.by_cat.get_mut(std::str::from_utf8(l.cat).unwrap_or("")) {
        Some(c) => *c += n,
        None => {
            p.by_cat.insert(scan::text(l.cat), n);
        }
    }
    match p.funcs.get_mut(std::str::from_utf8(l.name).unwrap_or("")) {
        Some(f) => {
            f.0 += n;
            f.1 += dur;
        }
        None => {
            p.funcs.insert(scan::text(l.name), (n, dur));
        }
    }
}

/// Bytes moved by one event (or one aggregated bucket).
fn bytes_of(fam: &str, name: &str, args: &[u8], aggregated: bool) -> u64 {
    if fam != "read" && fam != "write" {
        return 0;
    }
    let get = |k: &str| scan::get(args, k.as_bytes()).and_then(Val::num);
    let ret = if aggregated {
        get("ret_sum").or_else(|| get("ret"))
    } else {
        get("ret")
    };
    let ret = ret.and_then(Num::as_i64).unwrap_or(0).max(0) as u64;
    if name.trim_start_matches('_').starts_with("fread") || name == "fwrite" {
        // ret counts items of `size` bytes.
        let size = get("size")
            .or_else(|| get("size_max"))
            .and_then(Num::as_u64)
            .unwrap_or(1);
        return ret.saturating_mul(size);
    }
    ret
}

/// Reads `inputs` with `jobs` threads.
pub fn summarize(inputs: &[PathBuf], jobs: usize, quiet: bool) -> std::io::Result<Summary> {
    let files = input::collect(inputs)?;
    let read = AtomicU64::new(0);
    let done = std::sync::atomic::AtomicBool::new(false);
    let total = input::total_size(&files);
    let results = std::thread::scope(|s| {
        if !quiet {
            input::progress_thread(s, "summary", &read, total, &done);
        }
        let r = input::parallel(&files, jobs, |_, path: &Path| {
            let mut f = FileSum {
                meta: Meta::new(),
                procs: HashMap::new(),
                files: HashMap::new(),
                bad: 0,
                good: 0,
                ended: false,
            };
            let r = input::for_each_line(path, &read, |_, l| f.line(l));
            (f, r)
        });
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        r
    });
    let mut sum = Summary {
        files: files.len(),
        ..Summary::default()
    };
    for (path, (mut f, r)) in files.iter().zip(results) {
        match r {
            Ok(st) => {
                sum.bytes += st.bytes;
                sum.lines += st.lines;
                if st.long.count > 0 {
                    sum.long_lines.push((path.clone(), st.long));
                }
                if f.good == 0 {
                    sum.no_valid.push(path.clone());
                }
            }
            Err(e) => sum.errors.push((path.clone(), e.to_string())),
        }
        sum.bad_lines += f.bad;
        sum.valid_lines += f.good;
        let host = scan::text(&f.meta.host);
        let exec = f.meta.exec().map(|e| scan::text(&e)).unwrap_or_default();
        let ended = f.ended;
        for (pid, per) in f.files {
            let p = f.procs.entry(pid).or_default();
            for (h, io) in per {
                let name = match f.meta.paths.get(&h) {
                    Some(path) => scan::text(path),
                    None => format!("fhash {}", scan::text(&h)),
                };
                p.per_file.entry(name).or_default().add(&io);
            }
        }
        for (pid, mut p) in f.procs {
            p.host = host.clone();
            p.exec = exec.clone();
            p.files = 1;
            p.unended = u64::from(!ended);
            sum.procs
                .entry((host.clone(), pid))
                .or_insert_with(|| Proc {
                    host: host.clone(),
                    pid,
                    ..Proc::default()
                })
                .merge(&p);
        }
    }
    Ok(sum)
}

impl Summary {
    pub fn total(&self) -> Proc {
        let mut t = Proc::default();
        for p in self.procs.values() {
            t.merge(p);
        }
        t.files = self.files as u64;
        t
    }

    /// The summary as JSON (`--json`).
    pub fn to_json(&self, top: usize) -> Value {
        let proc_json = |p: &Proc| {
            let mut funcs: Vec<_> = p.funcs.iter().collect();
            funcs.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(a.0.cmp(b.0)));
            let mut files: Vec<_> = p.per_file.iter().collect();
            files.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then(a.0.cmp(b.0)));
            let io = |i: &Io| json!({"calls": i.calls, "bytes": i.bytes, "seconds": i.ns as f64 / 1e9, "mb_per_s": i.mb_s()});
            json!({
                "host": p.host, "pid": p.pid, "exec": p.exec, "files": p.files,
                "events": p.events(), "counters": p.counters,
                "events_by_category": p.by_cat,
                "wall_seconds": p.first_ns.map_or(0.0, |f| (p.last_ns - f) as f64 / 1e9),
                "top_functions": funcs.iter().take(top).map(|(n, (c, t))| json!({"name": n, "calls": c, "seconds": *t as f64 / 1e9})).collect::<Vec<_>>(),
                "io_by_family": p.families.iter().map(|(k, v)| (k.to_string(), io(v))).collect::<serde_json::Map<_, _>>(),
                "io_by_file": files.iter().take(top).map(|(n, v)| { let mut o = io(v); o["file"] = json!(n); o }).collect::<Vec<_>>(),
                "dropped": p.dropped, "lost": p.lost, "files_without_end": p.unended,
            })
        };
        let total = self.total();
        let mut t = proc_json(&total);
        if let Some(o) = t.as_object_mut() {
            o.remove("host");
            o.remove("pid");
            o.remove("exec");
        }
        json!({
            "files": self.files, "decompressed_bytes": self.bytes, "lines": self.lines,
            "bad_lines": self.bad_lines, "valid_lines": self.valid_lines,
            "read_errors": self.errors.iter().map(|(p, e)| json!({"file": p.display().to_string(), "error": e})).collect::<Vec<_>>(),
            "long_lines": self.long_lines.iter().map(|(p, l)| json!({"file": p.display().to_string(), "count": l.count, "first": l.first.iter().map(|(n, b)| json!({"line": n, "bytes": b})).collect::<Vec<_>>()})).collect::<Vec<_>>(),
            "files_without_valid_lines": self.no_valid.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "processes": self.procs.values().map(proc_json).collect::<Vec<_>>(),
            "total": t,
        })
    }

    /// The summary for a terminal.
    pub fn to_text(&self, top: usize) -> String {
        let mut o = String::new();
        let total = self.total();
        let _ = writeln!(
            o,
            "{} file(s), {} process(es), {} events, {} MB of trace",
            self.files,
            self.procs.len(),
            total.events(),
            self.bytes / 1_000_000
        );
        if self.bad_lines > 0 {
            let _ = writeln!(
                o,
                "warning: {} line(s) are not JSON (skipped)",
                self.bad_lines
            );
        }
        for (p, e) in &self.errors {
            let _ = writeln!(o, "warning: {}: {e}", p.display());
        }
        for (p, l) in &self.long_lines {
            if let Some(d) = l.describe() {
                let _ = writeln!(o, "warning: {}: {d}", p.display());
            }
        }
        for p in &self.no_valid {
            let _ = writeln!(o, "warning: {}: no valid line", p.display());
        }
        let multi = self.procs.len() > 1;
        if multi {
            for p in self.procs.values() {
                let _ = writeln!(
                    o,
                    "\n== {} (pid {}) @ {}",
                    or(&p.exec, "?"),
                    p.pid,
                    or(&p.host, "?")
                );
                section(&mut o, p, top.min(5));
            }
            let _ = writeln!(o, "\n== total");
        } else if let Some(p) = self.procs.values().next() {
            let _ = writeln!(
                o,
                "\n== {} (pid {}) @ {}",
                or(&p.exec, "?"),
                p.pid,
                or(&p.host, "?")
            );
        }
        section(&mut o, &total, top);
        o
    }
}

fn or<'a>(s: &'a str, d: &'a str) -> &'a str {
    if s.is_empty() {
        d
    } else {
        s
    }
}

fn section(o: &mut String, p: &Proc, top: usize) {
    let wall = p.first_ns.map_or(0.0, |f| (p.last_ns - f) as f64 / 1e9);
    let _ = writeln!(
        o,
        "events: {} over {:.3} s; counters: {}",
        p.events(),
        wall,
        p.counters
    );
    let cats: Vec<String> = p.by_cat.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let _ = writeln!(o, "  by category: {}", cats.join(", "));
    let mut funcs: Vec<_> = p.funcs.iter().collect();
    funcs.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(a.0.cmp(b.0)));
    if !funcs.is_empty() {
        let _ = writeln!(
            o,
            "  top functions by time:      calls    total s     mean us"
        );
        for (n, (c, t)) in funcs.iter().take(top) {
            let _ = writeln!(
                o,
                "    {:<24} {:>9} {:>10.3} {:>11.1}",
                clip(n, 24),
                c,
                *t as f64 / 1e9,
                *t as f64 / 1e3 / (*c).max(1) as f64
            );
        }
    }
    if !p.families.is_empty() {
        let _ = writeln!(
            o,
            "  I/O by call family:            calls         bytes    time s      MB/s"
        );
        let mut all = Io::default();
        for (k, v) in &p.families {
            all.add(v);
            io_row(o, k, v);
        }
        io_row(o, "all", &all);
    }
    if !p.per_file.is_empty() {
        let mut files: Vec<_> = p.per_file.iter().collect();
        files.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then(a.0.cmp(b.0)));
        let _ = writeln!(
            o,
            "  I/O by file (top {top} by bytes, {} files):",
            files.len()
        );
        for (n, v) in files.iter().take(top) {
            io_row(o, &clip_left(n, 24), v);
        }
    }
    let _ = writeln!(
        o,
        "  losses: {} dropped, {} lost; {} of {} file(s) without an end record",
        p.dropped, p.lost, p.unended, p.files
    );
}

fn io_row(o: &mut String, name: &str, v: &Io) {
    let _ = writeln!(
        o,
        "    {:<24} {:>9} {:>13} {:>9.3} {:>9.1}",
        name,
        v.calls,
        v.bytes,
        v.ns as f64 / 1e9,
        v.mb_s()
    );
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

/// Keeps the end of a path (the file name is what tells files apart).
fn clip_left(s: &str, n: usize) -> String {
    let c = s.chars().count();
    if c <= n {
        s.to_string()
    } else {
        let mut t = String::from("…");
        t.extend(s.chars().skip(c - n + 1));
        t
    }
}
