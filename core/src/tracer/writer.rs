//! The writer: drains the rings, assigns ids in file order, encodes JSON lines (with the
//! file's header and `end` records) and cuts them into members for [`super::output`] (see the
//! crate docs for the thread model). Producers reach it through two doors: [`hand_over`] (a
//! full ring) and [`encode_orphan`] (a thread whose ring is gone).

use super::{shared, InternalGuard, Section, Shared, INTERNAL, PHASE, PHASE_DONE, PHASE_RUNNING};
use crate::aggregate::Aggregator;
use crate::config::Config;
use crate::event::Layer;
use crate::files;
use crate::fold::Folds;
use crate::format::{Encoder, End, Header, Line};
use crate::hash::{hash16, Hash16};
use crate::paths::{PathTable, PATHS_CAP};
use crate::record::{
    ArgValue, Record, StaticRecord, StaticView, Text, KIND_COMPLETE, KIND_COUNTER, KIND_META,
    KIND_MIXED, MAX_RECORD,
};
use crate::ring::Ring;
use crate::signals;
use crate::sys;
use parking_lot::MutexGuard;
use std::ptr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Bytes of ring drained between two chances for other threads to take the writer lock.
const DRAIN_CHUNK: usize = 128 * 1024;

/// Encoder state, under `Shared::writer`: what producers draining their own ring need.
pub(super) struct Writer {
    json: Vec<u8>,
    /// The previous member's buffer, returned cleared after it was written.
    spare: Vec<u8>,
    /// Line hints for the compressor ([`crate::deflate::hint`]) of the lines in `json`, and
    /// the previous member's list, returned cleared.
    hints: Vec<u64>,
    spare_hints: Vec<u64>,
    /// Stream position of `json[0]`: the JSON bytes of every member cut before.
    stream_pos: u64,
    /// Stream position of the last `FH` line (its successor's line hint).
    last_fh: Option<u64>,
    header_done: bool,
    next_id: u64,
    /// Paths whose `FH` record is in this writer's file (bounded: an evicted path gets its
    /// `FH` again); a [`crate::FileRef`]'s `fh` mark caches its lookup.
    paths: PathTable,
    /// The writer pass in progress ([`crate::files`]; 0: none yet) and the ring heads it
    /// waits to see consumed.
    pass: u64,
    pass_targets: Vec<(Arc<Ring>, usize)>,
    /// The file's encoder (with its caches of rendered line text).
    enc: Encoder,
    /// `drain_all`'s copy of the ring list, kept to reuse its allocation.
    rings_scratch: Vec<Arc<Ring>>,
    used: [bool; Layer::ALL.len()],
    events: u64,
    pending_events: u64,
    last_member_ns: u64,
    ended: bool,
    /// Open buckets when aggregation is on.
    agg: Option<Aggregator>,
    /// Open buckets of folded calls (`DFTRACER_FOLD_CALLS`, on by default).
    folds: Folds,
    /// The clock conversion static records' raw times were last converted with.
    clock: crate::clock::Newest,
}

/// The door of a producer whose ring is full: encodes a bounded part of `ring` under the
/// writer lock (no compression, no I/O: the writer thread cuts members).
pub(super) fn hand_over(sh: &Shared, ring: &Ring) {
    let _s = Section::new();
    let mut w = sh.writer.lock();
    Writer::drain_ring(
        &mut w,
        sh,
        ring,
        DRAIN_CHUNK.min(ring.capacity() / 4),
        false,
    );
}

/// The door of a thread without a ring (its thread-local state is gone): encodes the record
/// `bytes` (just written by `Pending::write`) at once, under the writer lock.
pub(super) fn encode_orphan(sh: &Shared, bytes: &[u8]) {
    let _s = Section::new();
    let mut w = sh.writer.lock();
    // SAFETY: `bytes` was just written by `Pending::write` in this process.
    #[allow(unsafe_code)]
    if let Some(rec) = unsafe { Record::decode_trusted(bytes) } {
        w.encode(sh, sh.tid_of(sys::gettid()), &rec);
    }
}

/// The buffer reached a member's size while draining: noted in `cut`; whether to stop
/// (`may_cut`). Out of line: the drain loop's test is then a branch not taken.
#[cold]
#[inline(never)]
fn buffer_full(cut: &mut bool, may_cut: bool) -> bool {
    *cut = true;
    may_cut
}

/// Aggregation bucket width in time units.
fn agg_width(sh: &Shared) -> u64 {
    (sh.cfg.trace_interval_ms * sh.cfg.time_metric.per_second() / 1000).max(1)
}

impl Writer {
    pub(super) fn new(cfg: &Config, enc: Encoder, agg: Option<Aggregator>) -> Writer {
        let json_cap = cfg.write_buffer_size.clamp(64 * 1024, 16 * 1024 * 1024);
        Writer {
            // Both buffers at full size from the start (pages are touched only as they
            // fill): growing the second one at the first cut copied every byte once more.
            json: Vec::with_capacity(json_cap + MAX_RECORD * 8),
            spare: Vec::with_capacity(json_cap + MAX_RECORD * 8),
            hints: Vec::with_capacity(json_cap / 64),
            spare_hints: Vec::with_capacity(json_cap / 64),
            stream_pos: 0,
            last_fh: None,
            header_done: false,
            next_id: 1,
            paths: PathTable::new(PATHS_CAP),
            pass: 0,
            pass_targets: Vec::new(),
            enc,
            rings_scratch: Vec::new(),
            used: [false; Layer::ALL.len()],
            events: 0,
            pending_events: 0,
            last_member_ns: sys::monotonic_ns(),
            ended: false,
            agg,
            folds: Folds::default(),
            clock: crate::clock::Newest::default(),
        }
    }

    /// Complete events encoded so far.
    pub(super) fn events(&self) -> u64 {
        self.events
    }

    /// Takes the count of events encoded but not yet cut into a member.
    pub(super) fn take_pending(&mut self) -> u64 {
        std::mem::take(&mut self.pending_events)
    }

    /// The file's last records: everything recorded drained, the last aggregation buckets,
    /// `end`, and the last member.
    pub(super) fn finish(w: &mut MutexGuard<'_, Writer>, sh: &Shared) {
        Writer::drain_all(w, sh, false);
        // The last buckets precede `end` (the reference writes them after it).
        w.flush_buckets(sh, true);
        w.end_record(sh);
        Writer::member(w, sh);
    }

    /// Drains every ring into the JSON buffer; cuts members as needed. Drains in chunks and
    /// yields the lock between them, so a producer draining its own full ring waits little.
    pub(super) fn drain_all(w: &mut MutexGuard<'_, Writer>, sh: &Shared, force_member: bool) {
        // The writer's own list (reused: no allocation per wake once grown).
        let mut rings = std::mem::take(&mut w.rings_scratch);
        rings.extend(sh.rings.lock().iter().cloned());
        let mut gone = false;
        for ring in &rings {
            let closed = ring.closed.load(Ordering::Acquire);
            // Everything published now (not what producers add meanwhile: bounded work).
            let target = ring.used();
            let mut done = 0;
            while done < target {
                let n = Writer::drain_ring(w, sh, ring, DRAIN_CHUNK, true);
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
        w.advance_pass(sh);
        w.thread_names(sh);
        if gone {
            sh.rings
                .lock()
                .retain(|r| !(r.closed.load(Ordering::Acquire) && r.used() == 0));
        }
        let interval_ns = sh.cfg.flush_interval_ms * 1_000_000;
        // Producers that drained their own ring only encoded: a full buffer is cut here.
        let full = w.json.len() >= sh.cfg.write_buffer_size.max(1);
        if force_member
            || full
            || sys::monotonic_ns().saturating_sub(w.last_member_ns) >= interval_ns
        {
            w.flush_buckets(sh, false);
            Writer::member(w, sh);
        }
    }

    /// Writes the `thread_name` records of [`name_thread`](crate::name_thread) once the file has its header
    /// (names of threads are kept for a file that events will make).
    fn thread_names(&mut self, sh: &Shared) {
        if !self.header_done || !sh.cfg.tids {
            return;
        }
        let names = std::mem::take(&mut *sh.thread_names.lock());
        for (tid, name) in &names {
            self.enc.meta_str(
                &mut self.json,
                sh.tid_of(*tid),
                "thread_name",
                name.as_bytes(),
                b"thread_name",
            );
        }
    }

    /// Encodes up to about `max_bytes` of `ring`; returns the bytes drained. Only the writer
    /// (`may_cut`) cuts members; a producer draining its own ring only encodes.
    ///
    /// Not inlined into its callers: the per-record closure then has one call site and is
    /// inlined into the drain loop (no call and register saves per record).
    #[inline(never)]
    fn drain_ring(
        w: &mut MutexGuard<'_, Writer>,
        sh: &Shared,
        ring: &Ring,
        max_bytes: usize,
        may_cut: bool,
    ) -> usize {
        ring.clear_wake();
        let tid = sh.tid_of(ring.tid.load(Ordering::Relaxed));
        let threshold = sh.cfg.write_buffer_size.max(1);
        let mut cut = false;
        let wr: &mut Writer = w;
        // Static records (most) skip building a `Record`, unless aggregation may want them.
        let statics = wr.agg.is_none();
        let drained = ring.drain(max_bytes, |bytes| {
            #[allow(unsafe_code)]
            let rec = if statics {
                // SAFETY: a ring only ever holds records written by `Pending::write` in this
                // process (a fork child's copy included: same addresses, same static data).
                unsafe { StaticRecord::decode_with(bytes, &mut wr.clock) }
            } else {
                None
            };
            // Any other kind is declined by `decode_with` (as is a malformed static record,
            // which `encode_bytes` declines too).
            match rec {
                Some(rec) => wr.encode_static(sh, tid, &rec.view()),
                None => wr.encode_bytes(sh, tid, bytes),
            }
            if wr.json.len() >= threshold {
                return buffer_full(&mut cut, may_cut);
            }
            false
        });
        w.advance_pass(sh);
        if cut {
            if may_cut {
                Writer::member(w, sh);
            } else {
                sh.wake.post();
            }
        }
        drained
    }

    /// Ends the writer pass in progress once every ring was consumed up to the heads it
    /// noted, and begins the next (see [`crate::files`]: a file slot is reused only after a
    /// pass that began after its release ended). Called after every drain, by the writer or
    /// by a producer draining its own full ring, so passes keep ending while the writer
    /// thread waits on a slow disk.
    fn advance_pass(&mut self, sh: &Shared) {
        if self.pass != 0 {
            if !self.pass_targets.iter().all(|(r, head)| r.consumed(*head)) {
                return;
            }
            files::end_pass(self.pass);
        }
        // Heads and the ring list are read after the pass began (acquire-release RMW).
        self.pass = files::begin_pass();
        self.pass_targets.clear();
        for r in sh.rings.lock().iter() {
            self.pass_targets.push((r.clone(), r.head()));
        }
    }

    /// Writes the aggregation buckets that closed at least one interval ago (all: `all`).
    fn flush_buckets(&mut self, sh: &Shared, all: bool) {
        let Writer {
            agg,
            folds,
            json,
            enc,
            ..
        } = self;
        if agg.is_none() && folds.is_empty() {
            return;
        }
        let before = if all {
            u64::MAX
        } else {
            let width = agg_width(sh);
            let now = crate::clock::now_in(sh.cfg.time_metric);
            (now - now % width).saturating_sub(width)
        };
        if let Some(agg) = agg.as_mut() {
            agg.flush(json, enc, before);
        }
        folds.flush(json, enc, before);
    }

    /// Decodes and encodes a record other than a static one taken by the fast path. Out of
    /// line: the drain loop's static path stays as it is (a test for mixed records there cost
    /// the static lines more than it saved the mixed ones).
    #[inline(never)]
    fn encode_bytes(&mut self, sh: &Shared, tid: u32, bytes: &[u8]) {
        // A mixed static record (log_event's args), aggregation off: straight to its line,
        // not through a `Record`.
        if self.agg.is_none() && bytes.get(4) == Some(&KIND_MIXED) {
            return self.encode_mixed_bytes(sh, tid, bytes);
        }
        // SAFETY: as in `drain_ring`: written by `Pending::write` in this process.
        #[allow(unsafe_code)]
        if let Some(rec) = unsafe { Record::decode_trusted(bytes) } {
            self.encode(sh, tid, &rec);
        }
    }

    /// Encodes a static record (aggregation already declined it, or is off).
    #[inline(always)]
    fn encode_static(&mut self, sh: &Shared, tid: u32, rec: &StaticView) {
        if !self.header_done {
            self.header(sh);
        }
        if sh.cfg.fold_calls && Folds::wants(rec.schema, rec.vals) {
            self.folds
                .add(rec.schema, tid, rec.ts, rec.dur, agg_width(sh));
            self.used[rec.layer as usize] = true;
            return;
        }
        if let Some(f) = rec.file.filter(|_| sh.cfg.metadata) {
            let fh = &f.file().fh;
            if !self.paths.marked(fh.load(Ordering::Relaxed)) {
                // First time in this file (or its entry was evicted since): the FH record,
                // unless a path arg or another slot wrote it and it is still in the table.
                // Only the writer writes `fh` while the slot is pinned.
                let mark = match self.paths.mark_for(f.path()) {
                    Some(m) => m,
                    None => {
                        let path = Text {
                            bytes: f.path(),
                            orig_len: f.path().len(),
                        };
                        let hash = f.hash();
                        self.fh_line(tid, &path, &hash);
                        self.paths.insert(f.path(), hash)
                    }
                };
                fh.store(mark, Ordering::Relaxed);
            }
        }
        let (start, at, line) = self.next_line(tid);
        let prev = self.enc.complete_static(&mut self.json, line, rec);
        self.complete_done(start, at, prev, rec.layer as usize);
    }

    /// A [`KIND_MIXED`] record from the ring (aggregation off).
    fn encode_mixed_bytes(&mut self, sh: &Shared, tid: u32, bytes: &[u8]) {
        // SAFETY: as in `drain_ring`: written by `Pending::write` in this process.
        #[allow(unsafe_code)]
        if let Some(rec) = unsafe { StaticRecord::decode_mixed_with(bytes, &mut self.clock) } {
            if !self.header_done {
                self.header(sh);
            }
            self.encode_mixed(tid, &rec.view());
        }
    }

    /// A [`crate::record::KIND_MIXED`] record's line (its schema has float, bool or string
    /// slots, and neither a file nor folding; `encode` wrote the header).
    fn encode_mixed(&mut self, tid: u32, rec: &StaticView) {
        let (start, at, line) = self.next_line(tid);
        let prev = self.enc.complete_mixed(&mut self.json, line, rec);
        self.complete_done(start, at, prev, rec.layer as usize);
    }

    /// Where the next event line goes: its offset in the buffer, its position in the stream
    /// (the line hint's unit) and its `Line` (the next id, `tid`).
    #[inline(always)]
    fn next_line(&self, tid: u32) -> (usize, u64, Line) {
        let start = self.json.len();
        let at = self.stream_pos + start as u64;
        let line = Line {
            id: self.next_id,
            tid,
            at,
        };
        (start, at, line)
    }

    /// The `FH` record of `path` (hash `hash`), hinted with the previous `FH` line: the two
    /// share their text up to the path, and often most of the path.
    fn fh_line(&mut self, tid: u32, path: &Text, hash: &Hash16) {
        let (start, at, _) = self.next_line(tid);
        self.enc.fh(&mut self.json, tid, path, hash);
        if let Some(h) = self
            .last_fh
            .and_then(|prev| crate::deflate::hint(start, at.wrapping_sub(prev) as usize))
        {
            self.hints.push(h);
        }
        self.last_fh = Some(at);
    }

    /// After a complete event's line (from `start` in `json`, at stream position `at`): its
    /// line hint when the encoder named the previous line of its kind (`prev`, 0: none), the
    /// next id, the counts.
    #[inline(always)]
    fn complete_done(&mut self, start: usize, at: u64, prev: u64, layer: usize) {
        if let Some(h) = crate::deflate::hint(start, at.wrapping_sub(prev) as usize) {
            if prev != 0 {
                self.hints.push(h);
            }
        }
        self.next_id += 1;
        self.events += 1;
        self.pending_events += 1;
        self.used[layer] = true;
    }

    fn encode(&mut self, sh: &Shared, tid: u32, rec: &Record) {
        if !self.header_done {
            self.header(sh);
        }
        if rec.kind == KIND_COMPLETE {
            if let Some(agg) = self.agg.as_mut().filter(|a| a.wants(rec)) {
                agg.add(rec, tid, agg_width(sh));
                self.used[rec.layer as usize] = true;
                return;
            }
        }
        if let Some(v) = rec.static_view() {
            if rec.mixed {
                return self.encode_mixed(tid, &v);
            }
            return self.encode_static(sh, tid, &v);
        }
        if sh.cfg.metadata && rec.has_path {
            // FH records precede the first event that names a file.
            for (_, v) in rec.args() {
                if let ArgValue::Path(t) = v {
                    if !self.paths.contains_key(t.bytes) {
                        let h = hash16(t.bytes);
                        self.fh_line(tid, &t, &h);
                        self.paths.insert(t.bytes, h);
                    }
                }
            }
        }
        let paths = &self.paths;
        let mut hash_of = |p: &[u8]| paths.get(p).copied().unwrap_or_else(|| hash16(p));
        match rec.kind {
            KIND_COMPLETE => {
                let (start, at, line) = self.next_line(tid);
                let prev = self.enc.complete(&mut self.json, line, rec, &mut hash_of);
                self.complete_done(start, at, prev, rec.layer as usize);
            }
            KIND_COUNTER => {
                self.enc.counter(&mut self.json, tid, rec, &mut hash_of);
                self.pending_events += 1;
                self.used[rec.layer as usize] = true;
            }
            KIND_META => {
                self.enc.meta(
                    &mut self.json,
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

    /// Cuts one member from the pending JSON and writes it (creating the file on first use).
    /// The encoder lock is released while compressing and writing; the output lock, taken
    /// before releasing it, keeps members in order.
    fn member(w: &mut MutexGuard<'_, Writer>, sh: &Shared) {
        w.last_member_ns = sys::monotonic_ns();
        if w.json.is_empty() {
            return;
        }
        // Lock order is writer → output. The output lock is taken before the writer lock is
        // released (members stay in order) and dropped before it is taken back (no cycle).
        let o = sh.output.lock();
        let spare = std::mem::take(&mut w.spare);
        let mut json = std::mem::replace(&mut w.json, spare);
        let spare_hints = std::mem::take(&mut w.spare_hints);
        let mut hints = std::mem::replace(&mut w.hints, spare_hints);
        w.stream_pos += json.len() as u64;
        let pending = std::mem::take(&mut w.pending_events);
        MutexGuard::unlocked(w, || {
            let mut o = o;
            let _g = InternalGuard::new();
            o.write_member(sh, &json, &hints, pending);
            drop(o);
        });
        json.clear();
        hints.clear();
        if json.capacity() <= 64 * 1024 * 1024 {
            w.spare = json;
            w.spare_hints = hints;
        }
    }

    /// The file's header records (HH, thread_name, CM, FH/SH) and its `start` record.
    fn header(&mut self, sh: &Shared) {
        self.header_done = true;
        let h = Header {
            pid: sh.pid,
            host: &sh.host,
            time_metric: sh.cfg.time_metric.as_str(),
            cwd: &sh.cwd,
            cmd: &sh.cmd,
            exec: &sh.exec,
            cwd_hash: hash16(sh.cwd.as_bytes()),
            cmd_hash: hash16(sh.cmd.as_bytes()),
            exec_hash: hash16(sh.exec.as_bytes()),
            tid: sh.tid_of(sh.init_tid),
            ts: sh.start_ts,
            ppid: sh.ppid,
            date: &sh.date,
        };
        self.enc.header(&mut self.json, &h);
        if sh.cfg.metadata {
            self.paths.insert(sh.cwd.as_bytes(), h.cwd_hash);
        }
        self.next_id = 2;
    }

    /// The file's `end` record (once).
    fn end_record(&mut self, sh: &Shared) {
        if !self.header_done || self.ended {
            return;
        }
        self.ended = true;
        let tid = sys::gettid();
        let ts = crate::clock::now_in(sh.cfg.time_metric);
        let (log_file, lost) = {
            let o = sh.output.lock();
            let path = o
                .open_path()
                .map(str::to_string)
                .unwrap_or_else(|| sh.expected_path());
            (path, o.lost())
        };
        let app = sh.app.lock();
        let used_names = sh.used_names.lock();
        let e = End {
            id: self.next_id,
            tid,
            ts,
            app: &app,
            used: &self.used,
            used_names: &used_names,
            cfg: &sh.cfg,
            aggregated: self.agg.as_ref().map(|a| a.folded),
            folded: sh.cfg.fold_calls.then_some(self.folds.folded),
            bind: sh.bind.load(Ordering::Relaxed),
            tsc: crate::clock::tsc_in_use(),
            log_file: &log_file,
            dropped: sh.dropped.load(Ordering::Relaxed),
            lost,
            signal: sh.signal.load(Ordering::Acquire),
        };
        self.enc.end(&mut self.json, &e);
    }
}

/// Starts the writer thread (once).
pub(super) fn ensure_thread(sh: &'static Shared) {
    if !sh.writer_started.swap(true, Ordering::AcqRel) {
        // SAFETY: `sh` is a leaked, never-freed Shared: valid for the thread's lifetime.
        #[allow(unsafe_code)]
        let t = unsafe {
            sys::spawn_thread(
                writer_main,
                sh as *const Shared as *mut libc::c_void,
                signals::async_set(),
            )
        };
        *sh.writer_thread.lock() = t;
    }
}

/// [`Shared::writer_begun`]: the thread has not run yet; it runs its loop; a finalize that came
/// first called it off (it returns at once, touching nothing else, and is detached).
pub(super) const NOT_BEGUN: u8 = 0;
pub(super) const BEGUN: u8 = 1;
pub(super) const CALLED_OFF: u8 = 2;

extern "C" fn writer_main(arg: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: arg is the &'static Shared passed by ensure_thread (never freed).
    let sh: &'static Shared = unsafe { &*(arg as *const Shared) };
    if sh
        .writer_begun
        .compare_exchange(NOT_BEGUN, BEGUN, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return ptr::null_mut();
    }
    let _ = INTERNAL.try_with(|c| c.set(true));
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| writer_loop(sh))).is_err() {
        sh.broken("writer thread");
    }
    ptr::null_mut()
}

fn writer_loop(sh: &'static Shared) {
    // Fault injection for the tests (not a knob): the writer fails after its first member.
    let fault = std::env::var_os("DFTRACER_FAULT").is_some_and(|v| v == "writer");
    crate::clock::recalibrate(sh.cfg.tsc);
    let mut drained_at = sys::monotonic_ns();
    loop {
        let usual = sh.cfg.flush_interval_ms.min(1000);
        let wait = crate::clock::next_calibration_ms(sh.cfg.tsc, usual);
        let posted = sh.wake.wait_ms(wait);
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
        // A wake early for the clock's calibration only: the rings are drained at the usual
        // pace (no encoding or file I/O then, in a process that may be timing its calls).
        let now = sys::monotonic_ns();
        if !posted && wait < usual && now.saturating_sub(drained_at) < usual * 1_000_000 {
            continue;
        }
        drained_at = now;
        let mut w = sh.writer.lock();
        Writer::drain_all(&mut w, sh, false);
        if fault && sh.output.lock().open_path().is_some() {
            panic!("injected writer fault (DFTRACER_FAULT=writer)");
        }
    }
}

/// Writes everything recorded so far to the file now (before `exec`, in tests).
pub fn flush() {
    if let Some(sh) = shared() {
        if PHASE.load(Ordering::Acquire) != PHASE_RUNNING {
            return;
        }
        let _s = Section::new();
        let mut w = sh.writer.lock();
        Writer::drain_all(&mut w, sh, true);
    }
}
