//! `dftracer perfetto`: DFTracer traces → Chrome Trace Event JSON that the Perfetto UI (and
//! chrome://tracing) opens.
//!
//! - complete events (ph 1) → `X` slices; `args` copied, plus `file` (the path behind
//!   `fhash`, from the FH records); a process-control call (`dur` 0, its length in
//!   `args.call_dur`) is drawn over that length;
//! - counters (ph 2, the service's telemetry) → `C` events (one track per numeric arg);
//! - aggregated buckets (ph 3) → `X` slices on a track of their own per thread and name
//!   (`"<name> (aggregated)"`): start = bucket start, length = the bucket's `dur_sum` (cut at
//!   the next bucket of the track), `args` with `dft_cnt` and the `_min/_max/_sum` fields;
//! - metadata → `M` process_name (`<exec> @ <host>`, `pid <pid> @ <host>` without SH records)
//!   and thread_name (`<exec>`, `<exec> thread`) records;
//! - `ts`/`dur` in µs whatever the trace's unit (`time_metric`); sub-µs digits are kept as
//!   decimals (a viewer parsing them as doubles keeps about 0.25 µs at today's epoch);
//! - pids and tids unique across all inputs: a process keeps its pid unless another host's
//!   process already has it (then it gets a fresh number above 10,000,000); pid 0 (the
//!   reference service's counters) and tid 0 (tids disabled) are replaced too.
//!
//! Streaming: workers convert files (one per core) into blocks of about 1 MiB that a bounded
//! channel hands to the writer, so memory is bounded by the number of workers, whatever
//! the size of the input.

use crate::input;
use crate::meta::Meta;
use crate::scan::{self, Line, Ph, Val};
use std::collections::{HashMap, HashSet};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Mutex};

const BLOCK: usize = 1 << 20;
const FRESH_BASE: u64 = 10_000_000;

/// What a conversion did.
#[derive(Debug, Default, Clone)]
pub struct Report {
    pub files: usize,
    pub events: u64,
    /// Decompressed bytes read.
    pub bytes: u64,
    /// Lines that are not JSON objects.
    pub bad_lines: u64,
    /// Lines that are.
    pub valid_lines: u64,
    /// Files with lines over the line limit (skipped), and what they were.
    pub long_lines: Vec<(PathBuf, input::LongLines)>,
    /// Files read to the end without one valid line.
    pub no_valid: Vec<PathBuf>,
    /// Files that could not be read to the end, with the reason.
    pub errors: Vec<(PathBuf, String)>,
}

/// pid/tid numbers given out so far: `(host, id)` → the number in the output.
#[derive(Default)]
struct Ids {
    map: HashMap<(Vec<u8>, u64), u64>,
    used: HashSet<u64>,
    fresh: u64,
}

impl Ids {
    fn get(&mut self, host: &[u8], id: u64) -> u64 {
        if let Some(&v) = self.map.get(&(host.to_vec(), id)) {
            return v;
        }
        let v = if id != 0 && id < FRESH_BASE && self.used.insert(id) {
            id
        } else {
            self.fresh += 1;
            FRESH_BASE + self.fresh
        };
        self.map.insert((host.to_vec(), id), v);
        v
    }
}

/// Converts `inputs` into `out` (`.gz`: gzip-compressed). `jobs` worker threads.
pub fn convert(inputs: &[PathBuf], out: &Path, jobs: usize, quiet: bool) -> io::Result<Report> {
    let files = input::collect(inputs)?;
    let file = std::fs::File::create(out)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", out.display())))?;
    let mut sink: Box<dyn Write> = if out.to_string_lossy().ends_with(".gz") {
        Box::new(flate2::write::GzEncoder::new(
            io::BufWriter::with_capacity(1 << 20, file),
            flate2::Compression::fast(),
        ))
    } else {
        Box::new(io::BufWriter::with_capacity(1 << 20, file))
    };
    let ids = Mutex::new(Ids::default());
    let read = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let total = input::total_size(&files);
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(2 * jobs.max(1));
    let mut report = Report {
        files: files.len(),
        ..Report::default()
    };
    let mut write_err: Option<io::Error> = None;
    std::thread::scope(|s| {
        if !quiet {
            input::progress_thread(s, "perfetto", &read, total, &done);
        }
        let worker = s.spawn(|| {
            let tx = tx;
            input::parallel(&files, jobs, |_, path| {
                let mut c = FileConv::new(path, &ids, tx.clone());
                let r = input::for_each_line(path, &read, |_, l| c.line(l));
                c.finish();
                (c.events, c.bad, c.good, r)
            })
        });
        sink.write_all(b"{\"traceEvents\":[\n")
            .unwrap_or_else(|e| write_err = Some(e));
        let mut first = true;
        for block in rx {
            if write_err.is_some() || block.is_empty() {
                continue;
            }
            let r = if first {
                sink.write_all(&block)
            } else {
                sink.write_all(b",\n").and_then(|_| sink.write_all(&block))
            };
            first = false;
            if let Err(e) = r {
                write_err = Some(e);
            }
        }
        let results = worker.join().expect("converter threads");
        done.store(true, Ordering::Relaxed);
        for (path, (events, bad, good, r)) in files.iter().zip(results) {
            report.events += events;
            report.bad_lines += bad;
            report.valid_lines += good;
            match r {
                Ok(st) => {
                    report.bytes += st.bytes;
                    if st.long.count > 0 {
                        report.long_lines.push((path.clone(), st.long));
                    }
                    if good == 0 {
                        report.no_valid.push(path.clone());
                    }
                }
                Err(e) => report.errors.push((path.clone(), e.to_string())),
            }
        }
    });
    if let Some(e) = write_err {
        return Err(io::Error::new(e.kind(), format!("{}: {e}", out.display())));
    }
    sink.write_all(b"\n]}\n")?;
    sink.flush()?;
    drop(sink);
    Ok(report)
}

/// A bucket held back until the next one of its track (so its length can be cut there).
struct Held {
    ts_ns: u64,
    dur_ns: u64,
    name: Vec<u8>,
    cat: Vec<u8>,
    args: Vec<u8>,
}

struct AggTrack {
    tid: u64,
    held: Option<Held>,
}

struct FileConv<'a> {
    path: &'a Path,
    meta: Meta,
    ids: &'a Mutex<Ids>,
    /// Trace pid/tid → output number, for this file's host.
    local: HashMap<u64, u64>,
    /// Output (pid, tid) pairs seen, with the trace pid (for names at the end).
    threads: HashSet<(u64, u64)>,
    /// Output (pid, tid) → the name of a `thread_name` record on another tid than the pid's
    /// (a Python thread's name).
    names: HashMap<(u64, u64), Vec<u8>>,
    procs: HashMap<u64, u64>,
    agg: HashMap<(u64, u64, Vec<u8>), AggTrack>,
    block: Vec<u8>,
    tx: mpsc::SyncSender<Vec<u8>>,
    events: u64,
    bad: u64,
    good: u64,
}

/// Writes `ns` as µs: an integer when whole, else with 3 decimals.
fn us(out: &mut Vec<u8>, ns: u64) {
    let mut b = itoa::Buffer::new();
    out.extend_from_slice(b.format(ns / 1000).as_bytes());
    let frac = ns % 1000;
    if frac != 0 {
        out.push(b'.');
        let f = b.format(frac + 1000);
        out.extend_from_slice(&f.as_bytes()[1..]);
    }
}

fn num(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

impl<'a> FileConv<'a> {
    fn new(path: &'a Path, ids: &'a Mutex<Ids>, tx: mpsc::SyncSender<Vec<u8>>) -> Self {
        FileConv {
            path,
            meta: Meta::new(),
            ids,
            local: HashMap::new(),
            threads: HashSet::new(),
            names: HashMap::new(),
            procs: HashMap::new(),
            agg: HashMap::new(),
            block: Vec::with_capacity(BLOCK + 4096),
            tx,
            events: 0,
            bad: 0,
            good: 0,
        }
    }

    /// The host key: the hostname, or the file itself when it has no HH record.
    fn host(&self) -> Vec<u8> {
        if self.meta.host.is_empty() {
            format!("file:{}", self.path.display()).into_bytes()
        } else {
            self.meta.host.clone()
        }
    }

    fn id(&mut self, id: u64) -> u64 {
        if let Some(&v) = self.local.get(&id) {
            return v;
        }
        let host = self.host();
        let v = self
            .ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&host, id);
        self.local.insert(id, v);
        v
    }

    /// A fresh number for a synthetic track.
    fn fresh(&mut self) -> u64 {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        ids.fresh += 1;
        FRESH_BASE + ids.fresh
    }

    fn begin(&mut self) {
        if !self.block.is_empty() {
            self.block.extend_from_slice(b",\n");
        }
    }

    fn end_event(&mut self) {
        self.events += 1;
        if self.block.len() >= BLOCK {
            self.send();
        }
    }

    fn send(&mut self) {
        if !self.block.is_empty() {
            let b = std::mem::replace(&mut self.block, Vec::with_capacity(BLOCK + 4096));
            let _ = self.tx.send(b);
        }
    }

    fn line(&mut self, raw: &[u8]) {
        if raw.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let owned;
        let raw = match std::str::from_utf8(raw) {
            Ok(_) => raw,
            Err(_) => {
                owned = String::from_utf8_lossy(raw).into_owned();
                owned.as_bytes()
            }
        };
        let Ok(l) = scan::line(raw) else {
            self.bad += 1;
            return;
        };
        self.good += 1;
        if l.ph == Some(Ph::Metadata) && l.name == b"thread_name" {
            self.thread_name_record(&l);
        }
        if self.meta.observe(&l) {
            return;
        }
        let pid = l.pid.unwrap_or(0);
        let opid = self.id(pid);
        let otid = match l.tid {
            Some(0) | None => opid,
            Some(t) => self.id(t),
        };
        self.procs.entry(opid).or_insert(pid);
        let unit = self.meta.unit_ns;
        let ts = l.ts.unwrap_or(0).saturating_mul(unit);
        match l.ph {
            Some(Ph::Complete) => {
                self.threads.insert((opid, otid));
                // A process-control call (fork, wait*, spawn...) is written with dur 0 and
                // its real length in args.call_dur (FORMAT.md "Process calls"): drawn over it.
                let dur = match l.dur {
                    Some(0) | None => l
                        .args
                        .and_then(|a| scan::get(a, b"call_dur"))
                        .and_then(Val::num)
                        .and_then(scan::Num::as_u64)
                        .unwrap_or(0),
                    Some(d) => d,
                };
                self.complete(&l, opid, otid, ts, dur.saturating_mul(unit));
            }
            Some(Ph::Counter) => self.counter(&l, opid, otid, ts),
            Some(Ph::Aggregated) => self.aggregated(&l, opid, otid, ts),
            _ => {}
        }
    }

    /// A `thread_name` record naming a thread other than the process's main one (the
    /// header's names the pid with its number, as the reference does).
    fn thread_name_record(&mut self, l: &Line<'_>) {
        let (Some(pid), Some(tid)) = (l.pid, l.tid) else {
            return;
        };
        if tid == pid || tid == 0 {
            return;
        }
        let mut name = None;
        if let Some(args) = l.args {
            scan::members(args, |k, v| {
                if k == b"name" {
                    name = v.str().map(<[u8]>::to_vec);
                }
            });
        }
        if let Some(n) = name.filter(|n| !n.is_empty()) {
            let key = (self.id(pid), self.id(tid));
            self.names.insert(key, n);
        }
    }

    fn head(&mut self, ph: &[u8], name: &[u8], pid: u64, tid: u64, ts_ns: u64) {
        self.begin();
        let b = &mut self.block;
        b.extend_from_slice(b"{\"ph\":\"");
        b.extend_from_slice(ph);
        b.extend_from_slice(b"\",\"name\":\"");
        b.extend_from_slice(name);
        b.extend_from_slice(b"\",\"pid\":");
        num(b, pid);
        b.extend_from_slice(b",\"tid\":");
        num(b, tid);
        b.extend_from_slice(b",\"ts\":");
        us(b, ts_ns);
    }

    fn complete(&mut self, l: &Line<'_>, pid: u64, tid: u64, ts: u64, dur: u64) {
        self.head(b"X", l.name, pid, tid, ts);
        let path = l
            .args
            .and_then(|a| self.meta.path_of(a))
            .map(<[u8]>::to_vec);
        let b = &mut self.block;
        b.extend_from_slice(b",\"dur\":");
        us(b, dur);
        b.extend_from_slice(b",\"cat\":\"");
        b.extend_from_slice(l.cat);
        b.push(b'"');
        if let Some(args) = l.args {
            b.extend_from_slice(b",\"args\":");
            match path {
                Some(p) => {
                    b.extend_from_slice(b"{\"file\":\"");
                    b.extend_from_slice(&p);
                    b.push(b'"');
                    let inner = args[1..].trim_ascii_start();
                    if inner.first() != Some(&b'}') {
                        b.push(b',');
                    }
                    b.extend_from_slice(inner);
                }
                None => b.extend_from_slice(args),
            }
        }
        b.push(b'}');
        self.end_event();
    }

    fn counter(&mut self, l: &Line<'_>, pid: u64, tid: u64, ts: u64) {
        let Some(args) = l.args else { return };
        let mut vals = Vec::new();
        scan::members(args, |k, v| {
            if let Val::Num(_) = v {
                vals.push((k, v));
            }
        });
        if vals.is_empty() {
            return;
        }
        self.head(b"C", l.name, pid, tid, ts);
        let b = &mut self.block;
        b.extend_from_slice(b",\"args\":{");
        for (i, (k, v)) in vals.iter().enumerate() {
            if i > 0 {
                b.push(b',');
            }
            b.push(b'"');
            b.extend_from_slice(k);
            b.extend_from_slice(b"\":");
            match v {
                Val::Num(scan::Num::U(u)) => num(b, *u),
                Val::Num(scan::Num::I(i)) => b.extend_from_slice(i.to_string().as_bytes()),
                Val::Num(scan::Num::F(f)) if f.is_finite() => {
                    b.extend_from_slice(ryu::Buffer::new().format(*f).as_bytes())
                }
                _ => b.push(b'0'),
            }
        }
        b.extend_from_slice(b"}}");
        self.end_event();
    }

    fn aggregated(&mut self, l: &Line<'_>, pid: u64, tid: u64, ts: u64) {
        let args = l.args.unwrap_or(b"{}");
        let dur = ["dur_sum", "dur"]
            .iter()
            .find_map(|k| scan::get(args, k.as_bytes()).and_then(Val::num))
            .and_then(scan::Num::as_u64)
            .unwrap_or(0)
            .saturating_mul(self.meta.unit_ns);
        let key = (pid, tid, l.name.to_vec());
        if !self.agg.contains_key(&key) {
            let t = self.fresh();
            self.agg
                .insert(key.clone(), AggTrack { tid: t, held: None });
            let mut name = l.name.to_vec();
            name.extend_from_slice(b" (aggregated)");
            self.thread_name(pid, t, &name);
        }
        let held = Held {
            ts_ns: ts,
            dur_ns: dur,
            name: l.name.to_vec(),
            cat: l.cat.to_vec(),
            args: args.to_vec(),
        };
        let track = self.agg.get_mut(&key).expect("inserted");
        let atid = track.tid;
        if let Some(prev) = track.held.replace(held) {
            let cut = ts.saturating_sub(prev.ts_ns);
            self.bucket(pid, atid, prev, Some(cut));
        }
    }

    fn bucket(&mut self, pid: u64, tid: u64, h: Held, cut: Option<u64>) {
        let dur = match cut {
            Some(c) if c > 0 => h.dur_ns.min(c),
            _ => h.dur_ns,
        };
        self.head(b"X", &h.name, pid, tid, h.ts_ns);
        let b = &mut self.block;
        b.extend_from_slice(b",\"dur\":");
        us(b, dur);
        b.extend_from_slice(b",\"cat\":\"");
        b.extend_from_slice(&h.cat);
        b.extend_from_slice(b"\",\"args\":");
        b.extend_from_slice(&h.args);
        b.push(b'}');
        self.end_event();
    }

    fn meta_event(&mut self, what: &[u8], pid: u64, tid: Option<u64>, name: &[u8]) {
        self.begin();
        let b = &mut self.block;
        b.extend_from_slice(b"{\"ph\":\"M\",\"name\":\"");
        b.extend_from_slice(what);
        b.extend_from_slice(b"\",\"pid\":");
        num(b, pid);
        if let Some(t) = tid {
            b.extend_from_slice(b",\"tid\":");
            num(b, t);
        }
        b.extend_from_slice(b",\"args\":{\"name\":\"");
        b.extend_from_slice(name);
        b.extend_from_slice(b"\"}}");
    }

    fn thread_name(&mut self, pid: u64, tid: u64, name: &[u8]) {
        self.meta_event(b"thread_name", pid, Some(tid), name);
    }

    fn finish(&mut self) {
        let held: Vec<_> = self
            .agg
            .iter_mut()
            .filter_map(|((pid, _, _), t)| t.held.take().map(|h| (*pid, t.tid, h)))
            .collect();
        for (pid, tid, h) in held {
            self.bucket(pid, tid, h, None);
        }
        let exec = self.meta.exec();
        let host = self.meta.host.clone();
        let mut procs: Vec<_> = self.procs.iter().map(|(&o, &p)| (o, p)).collect();
        procs.sort();
        for (opid, pid) in procs {
            // The UI shows the pid after the name itself.
            let mut name = exec
                .clone()
                .unwrap_or_else(|| format!("pid {pid}").into_bytes());
            if !host.is_empty() {
                name.extend_from_slice(b" @ ");
                name.extend_from_slice(&host);
            }
            self.meta_event(b"process_name", opid, None, &name);
        }
        let mut threads: Vec<_> = self.threads.iter().copied().collect();
        threads.sort();
        for (opid, otid) in threads {
            let name = match &exec {
                _ if self.names.contains_key(&(opid, otid)) => self.names[&(opid, otid)].clone(),
                Some(e) if opid == otid => e.clone(),
                Some(e) => {
                    let mut n = e.clone();
                    n.extend_from_slice(b" thread");
                    n
                }
                None if opid == otid => b"main".to_vec(),
                None => b"thread".to_vec(),
            };
            self.thread_name(opid, otid, &name);
        }
        self.send();
    }
}
