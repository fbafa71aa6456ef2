//! The process-wide tracer: thread rings, the writer thread, stats and lifecycle.
//!
//! Hot path ([`record`]): one relaxed load of `STATE` (enabled bit + fork generation), one
//! thread-local read, one ring push (no lock, no allocation, no syscall). A ring more than
//! half full posts the writer's semaphore once (amortised). A full ring is drained by its own
//! producer under the writer lock (bounded work, nothing dropped) unless drop mode is on.
//!
//! Off the hot path, the writer thread wakes every `flush_interval_ms` (or when posted),
//! drains every ring, assigns ids in file order, encodes JSON lines, and cuts a gzip member
//! when `write_buffer_size` bytes are pending or the interval has passed.
//!
//! Lifecycle: [`init`] resolves names and facts; the file is created lazily at the first
//! member. [`finalize`] runs from the API, `atexit`, the frontends' `_exit` hooks and (via the
//! writer thread) from SIGTERM/SIGINT/SIGHUP handlers. A fork child gets a fresh state
//! (`-fork` file, ids from 1, its own HH/FH/SH records, the parent's buffered events
//! discarded) through a `pthread_atfork` child handler.
#![allow(unsafe_code)]

use crate::config::{Config, TimeMetric};
use crate::event::{
    ArgValue, Layer, Pending, Record, Text, KIND_COMPLETE, KIND_COUNTER, KIND_META,
};
use crate::gzip::GzipWriter;
use crate::hash::{hash16, hash_str, Hash16};
use crate::json::{self, Ctx};
use crate::ring::Ring;
use crate::sink::{self, Origin, Sink};
use crate::sys;
use parking_lot::{Mutex, MutexGuard};
use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Once};

/// Bit 0: tracing enabled. Bits 1..: generation, bumped in each fork child so that threads
/// re-attach their ring to the child's state.
static STATE: AtomicU64 = AtomicU64::new(0);
/// The live state; never freed (a fork child leaks its parent's copy).
static SHARED: AtomicPtr<Shared> = AtomicPtr::new(ptr::null_mut());
/// Lifecycle phase.
static PHASE: AtomicU8 = AtomicU8::new(PHASE_NONE);
const PHASE_NONE: u8 = 0;
const PHASE_INIT: u8 = 1;
const PHASE_RUNNING: u8 = 2;
const PHASE_DONE: u8 = 3;
/// Time unit for `now()` without touching SHARED.
static UNIT: AtomicU8 = AtomicU8::new(1);
/// Source of `Writer::epoch` values (0 is never handed out).
static WRITER_EPOCH: AtomicU64 = AtomicU64::new(1);
static HOOKS: Once = Once::new();
/// Bytes of ring drained between two chances for other threads to take the writer lock.
const DRAIN_CHUNK: usize = 128 * 1024;
/// Set when `finish` completed: the trace file is whole.
static FINISHED: AtomicBool = AtomicBool::new(false);

/// A value of `end.args.app`.
#[derive(Clone, Debug, PartialEq)]
pub enum AppValue {
    Int(i64),
    Str(String),
}

/// Why [`init`] did not start tracing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// `DFTRACER_ENABLE` (or the config) says off.
    Disabled,
    /// The tracer already runs in this process.
    AlreadyInitialized,
    /// The tracer was finalized; it does not start twice.
    Finalized,
    /// The trace directory cannot take files.
    LogDir { prefix: String, reason: String },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Disabled => write!(f, "tracing is disabled (DFTRACER_ENABLE is not set)"),
            Error::AlreadyInitialized => write!(f, "the tracer is already initialized"),
            Error::Finalized => write!(f, "the tracer was finalized in this process"),
            Error::LogDir { prefix, reason } => write!(
                f,
                "cannot write trace files with prefix {prefix}: {reason}; tracing disabled"
            ),
        }
    }
}

impl std::error::Error for Error {}

/// Counters of what the tracer did, for `end` records, stderr and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Complete events encoded (user events; not `start`/`end`).
    pub events: u64,
    /// Bytes written to the trace file.
    pub bytes: u64,
    /// Events dropped because a ring was full (drop mode only).
    pub dropped: u64,
    /// Events encoded but not written (the file could not be created or written).
    pub lost: u64,
    /// The trace file, once created.
    pub path: Option<String>,
}

/// Encoder state, under `Shared::writer`: what producers draining their own ring need.
struct Writer {
    json: Vec<u8>,
    /// The previous member's buffer, returned cleared after it was written.
    spare: Vec<u8>,
    header_done: bool,
    next_id: u64,
    paths: HashMap<Box<[u8]>, Hash16, crate::hash::FastBuild>,
    /// Unique per writer: a [`crate::FileRef`] whose `fh_epoch` equals it has its `FH`
    /// record in this writer's file.
    epoch: u64,
    /// Rendered constant middles of lines.
    cache: json::PrefixCache,
    /// `drain_all`'s copy of the ring list, kept to reuse its allocation.
    rings_scratch: Vec<Arc<Ring>>,
    used: [bool; Layer::ALL.len()],
    events: u64,
    pending_events: u64,
    last_member_ns: u64,
    ended: bool,
    /// Open buckets when aggregation is on.
    agg: Option<crate::aggregate::Aggregator>,
}

/// File state, under `Shared::output`: compression and writes happen here, with the encoder
/// lock released, so producers never wait for a compression.
struct Output {
    out: Vec<u8>,
    gz: Option<GzipWriter>,
    sink: Option<Sink>,
    failed: bool,
    lost: u64,
    /// Path and size of the file once closed by finalize.
    closed: Option<(String, u64)>,
}

struct Shared {
    cfg: Config,
    origin: Origin,
    prefix: Mutex<String>,
    host: String,
    hhash: String,
    file_hash: String,
    pid: u32,
    ppid: u32,
    init_tid: u32,
    cwd: String,
    cmd: String,
    exec: String,
    start_ts: u64,
    date: String,
    rings: Mutex<Vec<Arc<Ring>>>,
    writer: Mutex<Writer>,
    output: Mutex<Output>,
    wake: sys::Wake,
    app: Mutex<Vec<(String, AppValue)>>,
    used_names: Mutex<Vec<String>>,
    bind: AtomicBool,
    dropped: AtomicU64,
    writer_started: AtomicBool,
    writer_thread: Mutex<Option<libc::pthread_t>>,
    stop: AtomicBool,
    signal: AtomicI32,
    signal_done: AtomicBool,
}

struct Local {
    ring: Cell<*const Ring>,
    gen: Cell<u64>,
}

impl Drop for Local {
    fn drop(&mut self) {
        let r = self.ring.replace(ptr::null());
        if !r.is_null() {
            // SAFETY: `r` came from Arc::into_raw in attach and is released exactly once here.
            let ring = unsafe { Arc::from_raw(r) };
            ring.closed.store(true, Ordering::Release);
        }
    }
}

thread_local! {
    static LOCAL: Local = const { Local { ring: Cell::new(ptr::null()), gen: Cell::new(u64::MAX) } };
    static INTERNAL: Cell<bool> = const { Cell::new(false) };
}

/// True on threads (or inside sections) where the tracer itself does I/O: interposers must
/// pass such calls straight through.
#[inline]
pub fn is_internal() -> bool {
    INTERNAL.try_with(|c| c.get()).unwrap_or(true)
}

struct InternalGuard(bool);
impl InternalGuard {
    fn new() -> Self {
        InternalGuard(INTERNAL.try_with(|c| c.replace(true)).unwrap_or(true))
    }
}
impl Drop for InternalGuard {
    fn drop(&mut self) {
        let prev = self.0;
        let _ = INTERNAL.try_with(|c| c.set(prev));
    }
}

fn shared() -> Option<&'static Shared> {
    let p = SHARED.load(Ordering::Acquire);
    // SAFETY: SHARED only ever holds pointers from Box::into_raw that are never freed.
    unsafe { p.as_ref() }
}

/// One load: is tracing on?
#[inline]
pub fn is_enabled() -> bool {
    STATE.load(Ordering::Relaxed) & 1 == 1
}

/// Current time in the configured unit; 0 when tracing is off.
#[inline]
pub fn now() -> u64 {
    if !is_enabled() {
        return 0;
    }
    sys::now_in(unit())
}

fn unit() -> TimeMetric {
    match UNIT.load(Ordering::Relaxed) {
        0 => TimeMetric::Ns,
        2 => TimeMetric::Ms,
        3 => TimeMetric::Sec,
        _ => TimeMetric::Us,
    }
}

/// Starts tracing in this process with `cfg`. `api_log_file` is a path given to an
/// `initialize(log_file)` call (its extension is stripped, reference §1.1).
pub fn init(cfg: Config, origin: Origin, api_log_file: Option<&str>) -> Result<(), Error> {
    if !cfg.enable {
        return Err(Error::Disabled);
    }
    match PHASE.compare_exchange(PHASE_NONE, PHASE_INIT, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {}
        Err(PHASE_DONE) => return Err(Error::Finalized),
        Err(_) => return Err(Error::AlreadyInitialized),
    }
    let prefix = resolve_prefix(&cfg, api_log_file);
    if let Err(e) = sink::check_dir(&prefix) {
        PHASE.store(PHASE_NONE, Ordering::Release);
        return Err(Error::LogDir {
            prefix,
            reason: e.to_string(),
        });
    }
    // Children (subprocess, multiprocessing spawn) inherit where to write.
    std::env::set_var("DFTRACER_LOG_FILE", &prefix);
    std::env::set_var("DFTRACER_ENABLE", "1");
    if let Some(d) = &cfg.data_dirs {
        std::env::set_var("DFTRACER_DATA_DIR", d);
    }
    let sh = Shared::new(cfg, origin, prefix, sys::gettid());
    UNIT.store(unit_code(sh.cfg.time_metric), Ordering::Relaxed);
    let bind_signals = sh.cfg.bind_signals;
    SHARED.store(Box::into_raw(Box::new(sh)), Ordering::Release);
    HOOKS.call_once(|| {
        sys::at_exit(at_exit_hook);
        sys::at_fork_child(after_fork_child);
        if bind_signals {
            for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
                sys::install_if_default(s, on_signal);
            }
        }
    });
    let gen = STATE.load(Ordering::Relaxed) & !1;
    STATE.store(gen | 1, Ordering::Release);
    PHASE.store(PHASE_RUNNING, Ordering::Release);
    Ok(())
}

fn unit_code(m: TimeMetric) -> u8 {
    match m {
        TimeMetric::Ns => 0,
        TimeMetric::Us => 1,
        TimeMetric::Ms => 2,
        TimeMetric::Sec => 3,
    }
}

fn resolve_prefix(cfg: &Config, api_log_file: Option<&str>) -> String {
    let p = match api_log_file.filter(|p| !p.is_empty()) {
        Some(path) => sink::prefix_from_api_path(path),
        None => cfg.log_file.clone().unwrap_or_else(|| "./trace".into()),
    };
    if p.starts_with('/') {
        p
    } else {
        // Resolve now: a later chdir must not move the trace.
        let cwd = sys::cwd();
        format!("{}/{}", cwd, p.strip_prefix("./").unwrap_or(&p))
    }
}

impl Shared {
    fn new(cfg: Config, origin: Origin, prefix: String, init_tid: u32) -> Shared {
        let host = sys::hostname();
        let pid = sys::getpid();
        let argv = sys::cmdline();
        let exec = sys::exec_name(&argv);
        let file_hash = if origin == Origin::Service {
            host.clone()
        } else {
            hash_str(&hash16(format!("{exec}-{host}-{pid}").as_bytes())).to_string()
        };
        let gz = cfg
            .compression
            .then(|| GzipWriter::new(cfg.compression_level));
        let json_cap = cfg.write_buffer_size.clamp(64 * 1024, 16 * 1024 * 1024);
        Shared {
            hhash: hash_str(&hash16(host.as_bytes())).to_string(),
            host,
            file_hash,
            pid,
            ppid: sys::getppid(),
            init_tid,
            cwd: sys::cwd(),
            cmd: argv.join(";"),
            exec,
            start_ts: sys::now_in(cfg.time_metric),
            date: sys::asctime_now(),
            rings: Mutex::new(Vec::new()),
            writer: Mutex::new(Writer {
                json: Vec::with_capacity(json_cap + crate::event::MAX_RECORD * 8),
                spare: Vec::new(),
                header_done: false,
                next_id: 1,
                paths: HashMap::default(),
                epoch: WRITER_EPOCH.fetch_add(1, Ordering::Relaxed),
                cache: json::PrefixCache::default(),
                rings_scratch: Vec::new(),
                used: [false; Layer::ALL.len()],
                events: 0,
                pending_events: 0,
                last_member_ns: sys::monotonic_ns(),
                ended: false,
                agg: cfg
                    .aggregation_enable
                    .then(crate::aggregate::Aggregator::default),
            }),
            output: Mutex::new(Output {
                out: Vec::new(),
                gz,
                sink: None,
                failed: false,
                lost: 0,
                closed: None,
            }),
            wake: sys::Wake::new(),
            app: Mutex::new(Vec::new()),
            used_names: Mutex::new(Vec::new()),
            bind: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            writer_started: AtomicBool::new(false),
            writer_thread: Mutex::new(None),
            stop: AtomicBool::new(false),
            signal: AtomicI32::new(0),
            signal_done: AtomicBool::new(false),
            prefix: Mutex::new(prefix),
            cfg,
            origin,
        }
    }

    fn tid_of(&self, ring_tid: u32) -> u32 {
        if self.cfg.tids {
            ring_tid
        } else {
            0
        }
    }

    fn ensure_writer(&'static self) {
        if !self.writer_started.swap(true, Ordering::AcqRel) {
            // SAFETY: `self` is a leaked, never-freed Shared: valid for the thread's lifetime.
            let t = unsafe {
                sys::spawn_thread(writer_main, self as *const Shared as *mut libc::c_void)
            };
            *self.writer_thread.lock() = t;
        }
    }

    /// Drains every ring into the JSON buffer; cuts members as needed. Drains in chunks and
    /// yields the lock between them, so a producer draining its own full ring waits little.
    fn drain_all(&self, w: &mut MutexGuard<'_, Writer>, force_member: bool) {
        // The writer's own list (reused: no allocation per wake once grown).
        let mut rings = std::mem::take(&mut w.rings_scratch);
        rings.extend(self.rings.lock().iter().cloned());
        let mut gone = false;
        for ring in &rings {
            let closed = ring.closed.load(Ordering::Acquire);
            // Everything published now (not what producers add meanwhile: bounded work).
            let target = ring.used();
            let mut done = 0;
            while done < target {
                let n = self.drain_ring(w, ring, DRAIN_CHUNK, true);
                if n == 0 {
                    break;
                }
                done += n;
                MutexGuard::bump(w);
            }
            gone |= closed;
        }
        rings.clear();
        w.rings_scratch = rings;
        if gone {
            self.rings
                .lock()
                .retain(|r| !(r.closed.load(Ordering::Acquire) && r.used() == 0));
        }
        let interval_ns = self.cfg.flush_interval_ms * 1_000_000;
        // Producers that drained their own ring only encoded: a full buffer is cut here.
        let full = w.json.len() >= self.cfg.write_buffer_size.max(1);
        if force_member
            || full
            || sys::monotonic_ns().saturating_sub(w.last_member_ns) >= interval_ns
        {
            self.flush_buckets(w, false);
            self.member(w);
        }
    }

    /// Encodes up to about `max_bytes` of `ring`; returns the bytes drained. Only the writer
    /// (`may_cut`) cuts members; a producer draining its own ring only encodes.
    fn drain_ring(
        &self,
        w: &mut MutexGuard<'_, Writer>,
        ring: &Ring,
        max_bytes: usize,
        may_cut: bool,
    ) -> usize {
        ring.clear_wake();
        let tid = self.tid_of(ring.tid.load(Ordering::Relaxed));
        let threshold = self.cfg.write_buffer_size.max(1);
        let mut cut = false;
        let drained = ring.drain(max_bytes, |bytes| {
            // SAFETY: a ring only ever holds records written by `Pending::write` in this
            // process (a fork child's copy included: same addresses, same static data).
            #[allow(unsafe_code)]
            let rec = unsafe { Record::decode_trusted(bytes) };
            if let Some(rec) = rec {
                self.encode(w, tid, &rec);
                cut |= w.json.len() >= threshold;
            }
            cut && may_cut
        });
        if cut {
            if may_cut {
                self.member(w);
            } else {
                self.wake.post();
            }
        }
        drained
    }

    /// Aggregation bucket width in time units.
    fn agg_width(&self) -> u64 {
        (self.cfg.trace_interval_ms * self.cfg.time_metric.per_second() / 1000).max(1)
    }

    /// Writes the aggregation buckets that closed at least one interval ago (all: `all`).
    fn flush_buckets(&self, w: &mut Writer, all: bool) {
        let ctx = self.ctx();
        let width = self.agg_width();
        let Writer { agg, json, .. } = w;
        if let Some(agg) = agg.as_mut() {
            let before = if all {
                u64::MAX
            } else {
                let now = sys::now_in(self.cfg.time_metric);
                (now - now % width).saturating_sub(width)
            };
            agg.flush(json, &ctx, before);
        }
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            pid: self.pid,
            hhash: &self.hhash,
            metadata: self.cfg.metadata,
        }
    }

    fn header(&self, w: &mut Writer) {
        w.header_done = true;
        let ctx = self.ctx();
        let out = &mut w.json;
        let tid = self.pid;
        json::meta_str(
            out,
            &ctx,
            tid,
            "HH",
            self.host.as_bytes(),
            self.hhash.as_bytes(),
        );
        json::meta_str(
            out,
            &ctx,
            tid,
            "thread_name",
            self.pid.to_string().as_bytes(),
            b"thread_name",
        );
        json::meta_str(
            out,
            &ctx,
            tid,
            "CM",
            b"time_metric",
            self.cfg.time_metric.as_str().as_bytes(),
        );
        let cwd_h = hash16(self.cwd.as_bytes());
        let cmd_h = hash16(self.cmd.as_bytes());
        let exec_h = hash16(self.exec.as_bytes());
        if self.cfg.metadata {
            json::meta_str(out, &ctx, tid, "FH", self.cwd.as_bytes(), &cwd_h);
            json::meta_str(out, &ctx, tid, "SH", self.cmd.as_bytes(), &cmd_h);
            json::meta_str(out, &ctx, tid, "SH", self.exec.as_bytes(), &exec_h);
            w.paths.insert(self.cwd.as_bytes().into(), cwd_h);
        }
        json::lifecycle_head(
            out,
            &ctx,
            1,
            self.tid_of(self.init_tid),
            "start",
            self.start_ts,
        );
        if self.cfg.metadata {
            out.extend_from_slice(b",\"args\":{\"hhash\":\"");
            out.extend_from_slice(self.hhash.as_bytes());
            out.extend_from_slice(b"\",\"ppid\":");
            json::write_u64(out, self.ppid as u64);
            out.extend_from_slice(b",\"cmd_hash\":");
            json::hash_value(out, &cmd_h);
            out.extend_from_slice(b",\"exec_hash\":");
            json::hash_value(out, &exec_h);
            out.extend_from_slice(b",\"version\":20003,\"implementation\":\"dftracer-rs ");
            out.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
            out.extend_from_slice(b"\",\"date\":");
            json::write_str(out, self.date.as_bytes(), self.date.len());
            out.extend_from_slice(b",\"cwd\":");
            json::hash_value(out, &cwd_h);
            out.push(b'}');
        }
        out.extend_from_slice(b"}\n");
        w.next_id = 2;
    }

    fn encode(&self, w: &mut Writer, tid: u32, rec: &Record) {
        if !w.header_done {
            self.header(w);
        }
        if rec.kind == KIND_COMPLETE && rec.cat.bytes != b"dftracer" {
            if let Some(agg) = w.agg.as_mut() {
                agg.add(rec, tid, self.agg_width());
                w.used[rec.layer as usize] = true;
                return;
            }
        }
        let ctx = self.ctx();
        if let Some(schema) = rec.schema {
            if let Some(f) = rec.file.filter(|_| self.cfg.metadata) {
                if f.fh_epoch.load(Ordering::Relaxed) != w.epoch {
                    // First time in this file: the FH record, unless a path arg wrote it.
                    if !w.paths.contains_key(&*f.path) {
                        json::meta(
                            &mut w.json,
                            &ctx,
                            tid,
                            1,
                            &plain("FH"),
                            &Text {
                                bytes: &f.path,
                                orig_len: f.path.len(),
                            },
                            &Text {
                                bytes: &f.hash,
                                orig_len: 16,
                            },
                        );
                        w.paths.insert(f.path.clone(), f.hash);
                    }
                    f.fh_epoch.store(w.epoch, Ordering::Relaxed);
                }
            }
            let id = w.next_id;
            let Writer { json, cache, .. } = w;
            json::complete_static(json, cache, &ctx, id, tid, rec, schema);
            w.next_id += 1;
            w.events += 1;
            w.pending_events += 1;
            w.used[rec.layer as usize] = true;
            return;
        }
        if self.cfg.metadata && rec.has_path {
            // FH records precede the first event that names a file.
            for (_, v) in rec.args() {
                if let ArgValue::Path(t) = v {
                    if !w.paths.contains_key(t.bytes) {
                        let h = hash16(t.bytes);
                        json::meta(
                            &mut w.json,
                            &ctx,
                            tid,
                            1,
                            &plain("FH"),
                            &t,
                            &Text {
                                bytes: &h,
                                orig_len: 16,
                            },
                        );
                        w.paths.insert(t.bytes.into(), h);
                    }
                }
            }
        }
        let paths = &w.paths;
        let mut hash_of = |p: &[u8]| paths.get(p).copied().unwrap_or_else(|| hash16(p));
        match rec.kind {
            KIND_COMPLETE => {
                json::complete_cached(
                    &mut w.json,
                    Some(&mut w.cache),
                    &ctx,
                    w.next_id,
                    tid,
                    rec,
                    &mut hash_of,
                );
                w.next_id += 1;
                w.events += 1;
                w.pending_events += 1;
                w.used[rec.layer as usize] = true;
            }
            KIND_COUNTER => {
                json::counter(&mut w.json, &ctx, tid, rec, &mut hash_of);
                w.pending_events += 1;
                w.used[rec.layer as usize] = true;
            }
            KIND_META => {
                json::meta(
                    &mut w.json,
                    &ctx,
                    tid,
                    rec.layer as u8,
                    &rec.name,
                    &rec.cat,
                    &rec.value,
                );
            }
            _ => {}
        }
    }

    fn end_record(&self, w: &mut Writer) {
        if !w.header_done || w.ended {
            return;
        }
        w.ended = true;
        let ctx = self.ctx();
        let id = w.next_id;
        let used = w.used;
        let agg_folded = w.agg.as_ref().map(|a| a.folded);
        let out = &mut w.json;
        json::lifecycle_head(
            out,
            &ctx,
            id,
            sys::gettid(),
            "end",
            sys::now_in(self.cfg.time_metric),
        );
        if self.cfg.metadata {
            out.extend_from_slice(b",\"args\":{\"hhash\":\"");
            out.extend_from_slice(self.hhash.as_bytes());
            out.extend_from_slice(b"\",\"app\":{");
            for (i, (k, v)) in self.app.lock().iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                json::write_str(out, k.as_bytes(), k.len());
                out.push(b':');
                match v {
                    AppValue::Int(n) => json::write_i64(out, *n),
                    AppValue::Str(s) => json::write_str(out, s.as_bytes(), s.len()),
                }
            }
            out.extend_from_slice(b"},\"used\":{");
            let mut first = true;
            let mut sep = |out: &mut Vec<u8>| {
                if !first {
                    out.push(b',');
                }
                first = false;
            };
            for layer in Layer::ALL {
                if used[layer as usize] {
                    sep(out);
                    json::write_str(out, layer.name().as_bytes(), layer.name().len());
                    out.extend_from_slice(b":1");
                }
            }
            for name in self.used_names.lock().iter() {
                // `mark_used("C_APP")` of a layer that also recorded events: one key.
                let is_layer = |l: &Layer| used[*l as usize] && l.name() == name.as_str();
                if Layer::ALL.iter().any(is_layer) {
                    continue;
                }
                sep(out);
                json::write_str(out, name.as_bytes(), name.len());
                out.extend_from_slice(b":1");
            }
            out.extend_from_slice(b"},\"cfg\":{");
            let c = &self.cfg;
            let b = |v: bool| if v { "1" } else { "0" };
            let (log_file, lost) = {
                let o = self.output.lock();
                let path = o
                    .sink
                    .as_ref()
                    .map(|s| s.path.clone())
                    .unwrap_or_else(|| self.expected_path());
                (path, o.lost)
            };
            let fields: [(&str, String); 22] = [
                ("enable", b(c.enable).into()),
                ("metadata", b(c.metadata).into()),
                ("core_affinity", b(c.core_affinity).into()),
                ("time_metric", format!("\"{}\"", c.time_metric.as_str())),
                ("io", b(c.io).into()),
                ("posix", b(c.posix).into()),
                ("stdio", b(c.stdio).into()),
                ("compression", b(c.compression).into()),
                (
                    "trace_all_files",
                    b(c.data_dirs.as_deref() == Some("all")).into(),
                ),
                ("tids", b(c.tids).into()),
                ("bind_signals", b(c.bind_signals).into()),
                ("write_buffer_size", c.write_buffer_size.to_string()),
                ("trace_interval_ms", c.trace_interval_ms.to_string()),
                ("libuv_thread_count", c.libuv_threads.to_string()),
                ("aggregation_enable", b(c.aggregation_enable).into()),
                ("aggregation_type", format!("\"{}\"", c.aggregation_type)),
                ("bind", b(self.bind.load(Ordering::Relaxed)).into()),
                ("flush_interval_ms", c.flush_interval_ms.to_string()),
                ("ring_size", c.ring_size.to_string()),
                ("drop_when_full", b(c.drop_when_full).into()),
                ("tsc", b(crate::clock::tsc_in_use()).into()),
                ("compression_level", c.compression_level.to_string()),
            ];
            for (k, v) in fields {
                out.push(b'"');
                out.extend_from_slice(k.as_bytes());
                out.extend_from_slice(b"\":");
                out.extend_from_slice(v.as_bytes());
                out.push(b',');
            }
            out.extend_from_slice(b"\"log_file\":");
            json::write_str(out, log_file.as_bytes(), log_file.len());
            out.extend_from_slice(b"},\"build\":{\"mpi\":0,\"hdf5\":0,\"hip\":0,\"cuda\":0,\"finstrument\":0,\"variorum\":0},\"dropped\":");
            json::write_u64(out, self.dropped.load(Ordering::Relaxed));
            out.extend_from_slice(b",\"lost\":");
            json::write_u64(out, lost);
            if let Some(a) = &agg_folded {
                out.extend_from_slice(b",\"aggregated\":");
                json::write_u64(out, *a);
            }
            out.extend_from_slice(b",\"num_events\":");
            json::write_u64(out, id - 1);
            out.push(b'}');
        }
        out.extend_from_slice(b"}\n");
    }

    fn expected_path(&self) -> String {
        sink::trace_path(
            &self.prefix.lock(),
            &self.file_hash,
            self.origin,
            0,
            self.cfg.compression,
        )
    }

    /// Cuts one member from the pending JSON and writes it (creating the file on first use).
    /// The encoder lock is released while compressing and writing; the output lock, taken
    /// before releasing it, keeps members in order.
    fn member(&self, w: &mut MutexGuard<'_, Writer>) {
        w.last_member_ns = sys::monotonic_ns();
        if w.json.is_empty() {
            return;
        }
        // Lock order is writer → output. The output lock is taken before the writer lock is
        // released (members stay in order) and dropped before it is taken back (no cycle).
        let o = self.output.lock();
        let spare = std::mem::take(&mut w.spare);
        let mut json = std::mem::replace(&mut w.json, spare);
        let pending = std::mem::take(&mut w.pending_events);
        MutexGuard::unlocked(w, || {
            let mut o = o;
            let _g = InternalGuard::new();
            self.write_member(&mut o, &json, pending);
            drop(o);
        });
        json.clear();
        if json.capacity() <= 64 * 1024 * 1024 {
            w.spare = json;
        }
    }

    fn write_member(&self, o: &mut Output, json: &[u8], pending: u64) {
        if o.sink.is_none() && !o.failed {
            let prefix = self.prefix.lock().clone();
            match Sink::create(&prefix, &self.file_hash, self.origin, self.cfg.compression) {
                Ok(s) => o.sink = Some(s),
                Err(e) => {
                    o.failed = true;
                    sys::eprint_line(&format!(
                        "[DFTRACER ERROR] cannot create trace file {}: {e}; events of pid {} are lost",
                        self.expected_path(),
                        self.pid
                    ));
                }
            }
        }
        if !o.failed {
            let Output { out, gz, sink, .. } = o;
            let data: &[u8] = match gz {
                Some(g) => {
                    out.clear();
                    g.member(json, out);
                    out
                }
                None => json,
            };
            if let Some(s) = sink.as_mut() {
                if let Err(e) = s.write(data) {
                    o.failed = true;
                    sys::eprint_line(&format!(
                        "[DFTRACER ERROR] cannot write trace file {}: {e}; later events of pid {} are lost",
                        s.path, self.pid
                    ));
                }
            }
        }
        if o.failed {
            o.lost += pending;
        }
        if o.out.capacity() > 64 * 1024 * 1024 {
            o.out = Vec::new();
        }
    }

    /// Drains everything, writes `end`, writes the last member and closes the file.
    fn finish(&self) {
        let _g = InternalGuard::new();
        let mut w = self.writer.lock();
        self.drain_all(&mut w, false);
        // The last buckets precede `end` (the reference writes them after it).
        self.flush_buckets(&mut w, true);
        self.end_record(&mut w);
        self.member(&mut w);
        let mut o = self.output.lock();
        if let Some(s) = o.sink.as_mut() {
            s.sync();
        }
        let dropped = self.dropped.load(Ordering::Relaxed);
        if dropped > 0 || o.lost > 0 {
            sys::eprint_line(&format!(
                "[DFTRACER WARN] trace of pid {} ({}): {} events dropped (ring full), {} lost (write errors)",
                self.pid,
                o.sink.as_ref().map(|s| s.path.as_str()).unwrap_or("no file"),
                dropped,
                o.lost
            ));
        }
        o.closed = o.sink.take().map(|s| (s.path, s.bytes));
        FINISHED.store(true, Ordering::Release);
    }

    fn stats(&self) -> Stats {
        let events = self.writer.lock().events;
        let o = self.output.lock();
        let (path, bytes) = match (&o.sink, &o.closed) {
            (Some(s), _) => (Some(s.path.clone()), s.bytes),
            (None, Some((p, b))) => (Some(p.clone()), *b),
            (None, None) => (None, 0),
        };
        Stats {
            events,
            bytes,
            dropped: self.dropped.load(Ordering::Relaxed),
            lost: o.lost,
            path,
        }
    }
}

fn plain(s: &str) -> Text<'_> {
    Text {
        bytes: s.as_bytes(),
        orig_len: s.len(),
    }
}

extern "C" fn writer_main(arg: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: arg is the &'static Shared passed by ensure_writer (never freed).
    let sh: &'static Shared = unsafe { &*(arg as *const Shared) };
    let _ = INTERNAL.try_with(|c| c.set(true));
    crate::clock::recalibrate(sh.cfg.tsc);
    loop {
        sh.wake.wait_ms(sh.cfg.flush_interval_ms.min(1000));
        let sig = sh.signal.load(Ordering::Acquire);
        if sig != 0 {
            if PHASE.swap(PHASE_DONE, Ordering::AcqRel) == PHASE_RUNNING {
                sh.finish();
            }
            sh.signal_done.store(true, Ordering::Release);
            break;
        }
        if sh.stop.load(Ordering::Acquire) {
            break;
        }
        // Not on the way out: a process that ends never pays for a calibration.
        crate::clock::recalibrate(sh.cfg.tsc);
        let mut w = sh.writer.lock();
        sh.drain_all(&mut w, false);
    }
    ptr::null_mut()
}

/// Records a complete event (ph 1). No-op when tracing is off.
#[inline]
pub fn complete(layer: Layer, name: &[u8], cat: &[u8], ts: u64, dur: u64, args: &[crate::Arg]) {
    record(&Pending::Complete {
        layer,
        name,
        cat,
        ts,
        dur,
        args,
    });
}

/// Records a complete event of a fixed shape (see [`crate::Schema`]): the cheapest record,
/// a pointer and a few integers in the ring. `file`'s hash is written under the schema's
/// `file_key`, with its `FH` record before the first event that names it.
#[inline]
pub fn complete_static(
    schema: &'static crate::Schema,
    ts: u64,
    dur: u64,
    vals: &[u64],
    file: Option<&'static crate::FileRef>,
) {
    record(&Pending::Static {
        schema,
        ts,
        dur,
        vals,
        file,
    });
}

/// Records a counter event (ph 2).
#[inline]
pub fn counter(layer: Layer, name: &[u8], cat: &[u8], ts: u64, args: &[crate::Arg]) {
    record(&Pending::Counter {
        layer,
        name,
        cat,
        ts,
        args,
    });
}

/// Records a metadata record `name` (e.g. `CM`) with `key`/`value`.
pub fn metadata(layer: Layer, name: &[u8], key: &[u8], value: &[u8]) {
    record(&Pending::Meta {
        layer,
        name,
        key,
        value,
    });
}

/// The hot path.
#[inline]
pub fn record(p: &Pending) {
    let s = STATE.load(Ordering::Relaxed);
    if s & 1 == 0 {
        return;
    }
    let _ = LOCAL.try_with(|l| {
        let mut ring = l.ring.get();
        if l.gen.get() != s || ring.is_null() {
            ring = attach(l, s);
            if ring.is_null() {
                return;
            }
        }
        // SAFETY: the ring is kept alive by the Arc this thread holds (released only in
        // Local::drop, on this thread).
        let ring = unsafe { &*ring };
        let len = p.len();
        if !ring.push(len, |buf| p.write(buf)) {
            ring_full(ring, p, len);
        } else if ring.wants_drain() {
            if let Some(sh) = shared() {
                sh.wake.post();
            }
        }
    });
}

#[cold]
fn attach(l: &Local, s: u64) -> *const Ring {
    let Some(sh) = shared() else {
        return ptr::null();
    };
    if PHASE.load(Ordering::Acquire) != PHASE_RUNNING {
        return ptr::null();
    }
    if l.ring.get().is_null() {
        let ring = Arc::new(Ring::new(sh.cfg.ring_size, sys::gettid()));
        sh.rings.lock().push(ring.clone());
        l.ring.set(Arc::into_raw(ring));
    }
    sh.ensure_writer();
    l.gen.set(s);
    l.ring.get()
}

#[cold]
fn ring_full(ring: &Ring, p: &Pending, len: usize) {
    let Some(sh) = shared() else { return };
    if sh.cfg.drop_when_full {
        sh.dropped.fetch_add(1, Ordering::Relaxed);
        return;
    }
    // Hand work over: encode a bounded part of our own ring (no compression, no I/O: the
    // writer cuts members), then retry, up to 8 chunks (more than any record needs).
    for _ in 0..8 {
        {
            let _g = InternalGuard::new();
            let mut w = sh.writer.lock();
            sh.drain_ring(&mut w, ring, DRAIN_CHUNK.min(ring.capacity() / 4), false);
        }
        if ring.push(len, |buf| p.write(buf)) {
            return;
        }
    }
    sh.dropped.fetch_add(1, Ordering::Relaxed);
}

/// Writes everything recorded so far to the file now (before `exec`, in tests).
pub fn flush() {
    if let Some(sh) = shared() {
        if PHASE.load(Ordering::Acquire) != PHASE_RUNNING {
            return;
        }
        let _g = InternalGuard::new();
        let mut w = sh.writer.lock();
        sh.drain_all(&mut w, true);
    }
}

/// Stops tracing: drains every ring, writes `end`, flushes and closes the file. Idempotent;
/// later events are ignored. Called by the API, `atexit` and the frontends' `_exit` hooks.
pub fn finalize() {
    if PHASE
        .compare_exchange(
            PHASE_RUNNING,
            PHASE_DONE,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_err()
    {
        return;
    }
    STATE.fetch_and(!1, Ordering::AcqRel);
    let Some(sh) = shared() else { return };
    // A TERM/INT/HUP arriving now (a pool's terminate() racing a worker's own exit) stays
    // pending on this thread until the file is whole; then it acts as usual.
    let _mask = sys::SignalBlock::new();
    sh.stop.store(true, Ordering::Release);
    sh.wake.post();
    if let Some(t) = sh.writer_thread.lock().take() {
        // SAFETY: pthread_self is always valid.
        if t != unsafe { libc::pthread_self() } {
            sys::join_thread(t);
        }
    }
    sh.finish();
}

extern "C" fn at_exit_hook() {
    finalize();
}

extern "C" fn on_signal(sig: i32) {
    let saved = sys::errno();
    if let Some(sh) = shared() {
        if PHASE.load(Ordering::Acquire) == PHASE_RUNNING
            && sh.writer_started.load(Ordering::Acquire)
        {
            STATE.fetch_and(!1, Ordering::AcqRel);
            sh.signal.store(sig, Ordering::Release);
            sh.wake.post();
            // Bounded wait for the writer thread to finish the trace.
            for _ in 0..500 {
                if sh.signal_done.load(Ordering::Acquire) {
                    break;
                }
                sys::sleep_ms(10);
            }
        } else if PHASE.load(Ordering::Acquire) == PHASE_DONE {
            // Another thread is finalizing (with these signals blocked there): let it finish.
            for _ in 0..500 {
                if FINISHED.load(Ordering::Acquire) {
                    break;
                }
                sys::sleep_ms(10);
            }
        }
    }
    sys::set_errno(saved);
    // SA_RESETHAND restored the default action: the process now dies by this signal.
    sys::raise(sig);
}

unsafe extern "C" fn after_fork_child() {
    let Some(old) = shared() else { return };
    if PHASE.load(Ordering::Acquire) != PHASE_RUNNING {
        // Finalizing or finalized in the parent: the child stays off.
        STATE.fetch_and(!1, Ordering::AcqRel);
        PHASE.store(PHASE_DONE, Ordering::Release);
        return;
    }
    let tid = sys::gettid();
    FINISHED.store(false, Ordering::Release);
    let sh: &'static Shared = Box::leak(Box::new(Shared::new(
        old.cfg.clone(),
        Origin::Fork,
        old.prefix.lock_arc_free(),
        tid,
    )));
    sh.bind
        .store(old.bind.load(Ordering::Relaxed), Ordering::Relaxed);
    *sh.used_names.lock() = old
        .used_names
        .try_lock()
        .map(|g| g.clone())
        .unwrap_or_default();
    *sh.app.lock() = old.app.try_lock().map(|g| g.clone()).unwrap_or_default();
    let _ = LOCAL.try_with(|l| {
        let r = l.ring.get();
        if !r.is_null() {
            // SAFETY: the thread's own ring is alive (held by its Arc); no other thread exists
            // in the child, so nobody produces or consumes concurrently.
            let ring = unsafe { &*r };
            ring.discard();
            ring.tid.store(tid, Ordering::Relaxed);
            // SAFETY: r came from Arc::into_raw; we add one strong count for the registry.
            unsafe { Arc::increment_strong_count(r) };
            // SAFETY: as above, the registry owns the new count.
            sh.rings.lock().push(unsafe { Arc::from_raw(r) });
        }
    });
    SHARED.store(sh as *const Shared as *mut Shared, Ordering::Release);
    // New generation: every thread (the only one left) re-attaches and starts the writer.
    let gen = (STATE.load(Ordering::Relaxed) | 1).wrapping_add(2);
    STATE.store(gen, Ordering::Release);
}

trait LockFree {
    fn lock_arc_free(&self) -> String;
}

impl LockFree for Mutex<String> {
    /// Reads the prefix in a fork child, where the lock may be held by a thread that no
    /// longer exists.
    fn lock_arc_free(&self) -> String {
        match self.try_lock() {
            Some(g) => g.clone(),
            // SAFETY: only reached in a fork child where the holder thread is gone; the
            // String is not being mutated (the mutating thread does not exist).
            None => unsafe { (*self.data_ptr()).clone() },
        }
    }
}

/// Adds `name` to `end.args.used`.
pub fn mark_used(name: &str) {
    if let Some(sh) = shared() {
        let mut u = sh.used_names.lock();
        if !u.iter().any(|n| n == name) {
            u.push(name.to_string());
        }
    }
}

/// Sets `end.args.app.<key>` (last write wins).
pub fn set_app_metadata(key: &str, value: AppValue) {
    if let Some(sh) = shared() {
        let mut app = sh.app.lock();
        match app.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => app.push((key.to_string(), value)),
        }
    }
}

/// Records whether I/O interception is bound (`cfg.bind` in the end record).
pub fn set_bind(bound: bool) {
    if let Some(sh) = shared() {
        sh.bind.store(bound, Ordering::Relaxed);
    }
}

/// Changes the file prefix (an `initialize(path)` that arrives after events were already
/// recorded). An existing file is renamed, so its events stay with the new name.
pub fn retarget(api_log_file: &str) -> Result<String, Error> {
    let Some(sh) = shared() else {
        return Err(Error::Disabled);
    };
    let mut cfg = sh.cfg.clone();
    cfg.log_file = None;
    let prefix = resolve_prefix(&cfg, Some(api_log_file));
    if let Err(e) = sink::check_dir(&prefix) {
        return Err(Error::LogDir {
            prefix,
            reason: e.to_string(),
        });
    }
    std::env::set_var("DFTRACER_LOG_FILE", &prefix);
    let _g = InternalGuard::new();
    let _w = sh.writer.lock();
    let mut o = sh.output.lock();
    *sh.prefix.lock() = prefix.clone();
    if let Some(s) = o.sink.as_mut() {
        for n in 0..10_000 {
            let new = sink::trace_path(&prefix, &sh.file_hash, sh.origin, n, sh.cfg.compression);
            if std::path::Path::new(&new).exists() {
                continue;
            }
            if std::fs::rename(&s.path, &new).is_ok() {
                s.path = new;
            }
            break;
        }
    }
    Ok(prefix)
}

/// What the tracer has done so far in this process.
pub fn stats() -> Stats {
    shared().map(|s| s.stats()).unwrap_or_default()
}

/// The configuration in force (None before `init`).
pub fn config() -> Option<Config> {
    shared().map(|s| s.cfg.clone())
}

/// Where this process's trace goes (the actual file once created).
pub fn trace_path() -> Option<String> {
    let sh = shared()?;
    let o = sh.output.lock();
    Some(match (&o.sink, &o.closed) {
        (Some(s), _) => s.path.clone(),
        (None, Some((p, _))) => p.clone(),
        (None, None) => sh.expected_path(),
    })
}

/// True once `init` succeeded and `finalize` has not run.
pub fn is_running() -> bool {
    PHASE.load(Ordering::Acquire) == PHASE_RUNNING
}

/// True once `finalize` ran in this process.
pub fn is_finalized() -> bool {
    PHASE.load(Ordering::Acquire) == PHASE_DONE
}
