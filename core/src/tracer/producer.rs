//! The producer side: the hot path that pushes records into this thread's ring.

use super::*;

pub(super) struct Local {
    pub(super) ring: Cell<*const Ring>,
    pub(super) gen: Cell<u64>,
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
    pub(super) static LOCAL: Local = const { Local { ring: Cell::new(ptr::null()), gen: Cell::new(u64::MAX) } };
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
    crate::clock::now_in(unit())
}

fn unit() -> TimeMetric {
    match UNIT.load(Ordering::Relaxed) {
        0 => TimeMetric::Ns,
        2 => TimeMetric::Ms,
        3 => TimeMetric::Sec,
        _ => TimeMetric::Us,
    }
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
/// `file_key`, with its `FH` record before the first event that names it. The caller keeps
/// `file`'s slot pinned until this returns (see [`crate::files`]); a stale handle makes an
/// event without its file, never with another one.
#[inline]
pub fn complete_static(
    schema: &'static crate::Schema,
    ts: u64,
    dur: u64,
    vals: &[u64],
    file: Option<crate::FileHandle>,
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
    let local = LOCAL.try_with(|l| {
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
    if local.is_err() {
        record_orphan(p);
    }
}

/// An event of a thread whose thread-local state is gone: glibc runs the main thread's TLS
/// destructors before `atexit` handlers, where programs still do I/O (coreutils closes
/// `stdout` there). Encoded at once under the writer lock: rare, and never lost.
#[cold]
fn record_orphan(p: &Pending) {
    let Some(sh) = shared() else { return };
    if PHASE.load(Ordering::Acquire) != PHASE_RUNNING {
        return;
    }
    let len = p.len();
    // 8-byte aligned, as ring records are.
    let mut words = vec![0u64; len.div_ceil(8)];
    // SAFETY: `words` owns at least `len` initialised bytes; u8 has no alignment needs.
    let bytes = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), len) };
    p.write(bytes);
    let _s = Section::new();
    let mut w = sh.writer.lock();
    // SAFETY: `bytes` was just written by `Pending::write` in this process.
    if let Some(rec) = unsafe { Record::decode_trusted(bytes) } {
        sh.encode(&mut w, sh.tid_of(sys::gettid()), &rec);
    }
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
        let _s = Section::new();
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
    let handed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for _ in 0..8 {
            {
                let _s = Section::new();
                let mut w = sh.writer.lock();
                sh.drain_ring(&mut w, ring, DRAIN_CHUNK.min(ring.capacity() / 4), false);
            }
            if ring.push(len, |buf| p.write(buf)) {
                return true;
            }
        }
        false
    }));
    match handed {
        Ok(true) => {}
        Ok(false) => {
            sh.dropped.fetch_add(1, Ordering::Relaxed);
        }
        Err(_) => sh.broken("hand-over of a full ring"),
    }
}
