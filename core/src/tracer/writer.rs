//! The writer: drains the rings, assigns ids in file order, encodes JSON lines and cuts
//! gzip members (see the crate docs for the thread model).

use super::*;
use crate::event::{StaticRecord, StaticView, KIND_STATIC};

/// Encoder state, under `Shared::writer`: what producers draining their own ring need.
pub(super) struct Writer {
    pub(super) json: Vec<u8>,
    /// The previous member's buffer, returned cleared after it was written.
    pub(super) spare: Vec<u8>,
    /// Line hints for the compressor ([`crate::deflate::hint`]) of the lines in `json`, and
    /// the previous member's list, returned cleared.
    pub(super) hints: Vec<u64>,
    pub(super) spare_hints: Vec<u64>,
    /// Stream position of `json[0]`: the JSON bytes of every member cut before.
    pub(super) stream_pos: u64,
    pub(super) header_done: bool,
    pub(super) next_id: u64,
    /// Paths whose `FH` record is in this writer's file (bounded: an evicted path gets its
    /// `FH` again); a [`crate::FileRef`]'s `fh` mark caches its lookup.
    pub(super) paths: crate::files::PathTable,
    /// The writer pass in progress ([`crate::files`]; 0: none yet) and the ring heads it
    /// waits to see consumed.
    pub(super) pass: u64,
    pub(super) pass_targets: Vec<(Arc<Ring>, usize)>,
    /// Rendered constant middles of lines.
    pub(super) cache: json::PrefixCache,
    /// `drain_all`'s copy of the ring list, kept to reuse its allocation.
    pub(super) rings_scratch: Vec<Arc<Ring>>,
    pub(super) used: [bool; Layer::ALL.len()],
    pub(super) events: u64,
    pub(super) pending_events: u64,
    pub(super) last_member_ns: u64,
    pub(super) ended: bool,
    /// Open buckets when aggregation is on.
    pub(super) agg: Option<crate::aggregate::Aggregator>,
}

impl Shared {
    pub(super) fn ensure_writer(&'static self) {
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
    pub(super) fn drain_all(&self, w: &mut MutexGuard<'_, Writer>, force_member: bool) {
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
        self.advance_pass(w);
        self.thread_names(w);
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

    /// Writes the `thread_name` records of [`name_thread`] once the file has its header
    /// (names of threads are kept for a file that events will make).
    pub(super) fn thread_names(&self, w: &mut Writer) {
        if !w.header_done || !self.cfg.tids {
            return;
        }
        let names = std::mem::take(&mut *self.thread_names.lock());
        let ctx = self.ctx();
        for (tid, name) in &names {
            json::meta_str(
                &mut w.json,
                &ctx,
                self.tid_of(*tid),
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
    pub(super) fn drain_ring(
        &self,
        w: &mut MutexGuard<'_, Writer>,
        ring: &Ring,
        max_bytes: usize,
        may_cut: bool,
    ) -> usize {
        ring.clear_wake();
        let tid = self.tid_of(ring.tid.load(Ordering::Relaxed));
        let threshold = self.cfg.write_buffer_size.max(1);
        let ctx = self.ctx();
        let mut cut = false;
        let wr: &mut Writer = w;
        // Static records (most) skip building a `Record`, unless aggregation may want them.
        let statics = wr.agg.is_none();
        let drained = ring.drain(max_bytes, |bytes| {
            if statics && bytes.get(4) == Some(&KIND_STATIC) {
                // SAFETY: a ring only ever holds records written by `Pending::write` in
                // this process (a fork child's copy included: same addresses, same static
                // data).
                #[allow(unsafe_code)]
                if let Some(rec) = unsafe { StaticRecord::decode(bytes) } {
                    self.encode_static_in(wr, &ctx, tid, &rec.view());
                }
            } else {
                self.encode_bytes(wr, tid, bytes);
            }
            if wr.json.len() >= threshold {
                cut = true;
                return may_cut;
            }
            false
        });
        self.advance_pass(w);
        if cut {
            if may_cut {
                self.member(w);
            } else {
                self.wake.post();
            }
        }
        drained
    }

    /// Ends the writer pass in progress once every ring was consumed up to the heads it
    /// noted, and begins the next (see [`crate::files`]: a file slot is reused only after a
    /// pass that began after its release ended). Called after every drain, by the writer or
    /// by a producer draining its own full ring, so passes keep ending while the writer
    /// thread waits on a slow disk.
    pub(super) fn advance_pass(&self, w: &mut Writer) {
        if w.pass != 0 {
            if !w.pass_targets.iter().all(|(r, head)| r.consumed(*head)) {
                return;
            }
            crate::files::end_pass(w.pass);
        }
        // Heads and the ring list are read after the pass began (acquire-release RMW).
        w.pass = crate::files::begin_pass();
        w.pass_targets.clear();
        for r in self.rings.lock().iter() {
            w.pass_targets.push((r.clone(), r.head()));
        }
    }

    /// Aggregation bucket width in time units.
    pub(super) fn agg_width(&self) -> u64 {
        (self.cfg.trace_interval_ms * self.cfg.time_metric.per_second() / 1000).max(1)
    }

    /// Writes the aggregation buckets that closed at least one interval ago (all: `all`).
    pub(super) fn flush_buckets(&self, w: &mut Writer, all: bool) {
        let ctx = self.ctx();
        let width = self.agg_width();
        let Writer { agg, json, .. } = w;
        if let Some(agg) = agg.as_mut() {
            let before = if all {
                u64::MAX
            } else {
                let now = crate::clock::now_in(self.cfg.time_metric);
                (now - now % width).saturating_sub(width)
            };
            agg.flush(json, &ctx, before);
        }
    }

    /// Decodes and encodes a record other than a static one taken by the fast path.
    #[inline(never)]
    fn encode_bytes(&self, w: &mut Writer, tid: u32, bytes: &[u8]) {
        // SAFETY: as in `drain_ring`: written by `Pending::write` in this process.
        #[allow(unsafe_code)]
        if let Some(rec) = unsafe { Record::decode_trusted(bytes) } {
            self.encode(w, tid, &rec);
        }
    }

    /// Encodes a static record (aggregation already declined it, or is off).
    pub(super) fn encode_static(&self, w: &mut Writer, tid: u32, rec: &StaticView) {
        self.encode_static_in(w, &self.ctx(), tid, rec)
    }

    /// [`Shared::encode_static`] with the file's context built by the caller.
    #[inline(always)]
    fn encode_static_in(&self, w: &mut Writer, ctx: &Ctx, tid: u32, rec: &StaticView) {
        if !w.header_done {
            self.header(w);
        }
        if let Some(f) = rec.file.filter(|_| self.cfg.metadata) {
            let fh = &f.file().fh;
            if !w.paths.marked(fh.load(Ordering::Relaxed)) {
                // First time in this file (or its entry was evicted since): the FH record,
                // unless a path arg or another slot wrote it and it is still in the table.
                // Only the writer writes `fh` while the slot is pinned.
                let mark = match w.paths.mark_for(f.path()) {
                    Some(m) => m,
                    None => {
                        json::meta(
                            &mut w.json,
                            ctx,
                            tid,
                            1,
                            &plain("FH"),
                            &Text {
                                bytes: f.path(),
                                orig_len: f.path().len(),
                            },
                            &Text {
                                bytes: f.hash(),
                                orig_len: 16,
                            },
                        );
                        w.paths.insert(f.path().into(), *f.hash())
                    }
                };
                fh.store(mark, Ordering::Relaxed);
            }
        }
        let Writer {
            json, cache, hints, ..
        } = w;
        let start = json.len();
        let at = w.stream_pos + start as u64;
        let prev = json::complete_static_at(json, cache, ctx, w.next_id, tid, rec, at);
        if let Some(h) = crate::deflate::hint(start, at.wrapping_sub(prev) as usize) {
            if prev != 0 {
                hints.push(h);
            }
        }
        w.next_id += 1;
        w.events += 1;
        w.pending_events += 1;
        w.used[rec.layer as usize] = true;
    }

    pub(super) fn encode(&self, w: &mut Writer, tid: u32, rec: &Record) {
        if !w.header_done {
            self.header(w);
        }
        if rec.kind == KIND_COMPLETE {
            if let Some(agg) = w.agg.as_mut().filter(|a| a.wants(rec)) {
                agg.add(rec, tid, self.agg_width());
                w.used[rec.layer as usize] = true;
                return;
            }
        }
        if let Some(v) = rec.static_view() {
            return self.encode_static(w, tid, &v);
        }
        let ctx = self.ctx();
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
                let start = w.json.len();
                let at = w.stream_pos + start as u64;
                let prev = json::complete_cached_at(
                    &mut w.json,
                    Some(&mut w.cache),
                    &ctx,
                    w.next_id,
                    tid,
                    rec,
                    &mut hash_of,
                    at,
                );
                if let Some(h) = crate::deflate::hint(start, at.wrapping_sub(prev) as usize) {
                    if prev != 0 {
                        w.hints.push(h);
                    }
                }
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

    /// Cuts one member from the pending JSON and writes it (creating the file on first use).
    /// The encoder lock is released while compressing and writing; the output lock, taken
    /// before releasing it, keeps members in order.
    pub(super) fn member(&self, w: &mut MutexGuard<'_, Writer>) {
        w.last_member_ns = sys::monotonic_ns();
        if w.json.is_empty() {
            return;
        }
        // Lock order is writer → output. The output lock is taken before the writer lock is
        // released (members stay in order) and dropped before it is taken back (no cycle).
        let o = self.output.lock();
        let spare = std::mem::take(&mut w.spare);
        let mut json = std::mem::replace(&mut w.json, spare);
        let spare_hints = std::mem::take(&mut w.spare_hints);
        let mut hints = std::mem::replace(&mut w.hints, spare_hints);
        w.stream_pos += json.len() as u64;
        let pending = std::mem::take(&mut w.pending_events);
        MutexGuard::unlocked(w, || {
            let mut o = o;
            let _g = InternalGuard::new();
            self.write_member(&mut o, &json, &hints, pending);
            drop(o);
        });
        json.clear();
        hints.clear();
        if json.capacity() <= 64 * 1024 * 1024 {
            w.spare = json;
            w.spare_hints = hints;
        }
    }
}

pub(super) extern "C" fn writer_main(arg: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: arg is the &'static Shared passed by ensure_writer (never freed).
    let sh: &'static Shared = unsafe { &*(arg as *const Shared) };
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
        if fault && sh.output.lock().sink.is_some() {
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
        sh.drain_all(&mut w, true);
    }
}
