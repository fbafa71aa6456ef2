//! A per-thread, fixed-capacity, single-producer byte ring of variable-length records.
//!
//! Contract:
//! - one producer (the owning thread) calls [`Ring::push`]; it never blocks, never allocates,
//!   and returns `false` when the record does not fit (the caller decides: drain or drop);
//! - one consumer at a time calls [`Ring::drain`]; the tracer serialises consumers with its
//!   writer lock, so "single consumer" holds even when a producer drains its own full ring;
//! - records are contiguous; one that would straddle the end is preceded by a pad record.
//!
//! Positions are monotonically increasing `usize` counters; the slot is `pos & mask`.
//!
//! The atomics and the bytes come from [`crate::sync`]: std's, or loom's under `--cfg loom`
//! (`tests/loom.rs` models a producer and a consumer over a tiny ring).
#![allow(unsafe_code)]

use crate::record::KIND_PAD;
use crate::sync::{AtomicBool, AtomicU32, AtomicUsize, Bytes};
use std::sync::atomic::Ordering;

pub struct Ring {
    buf: Bytes,
    mask: usize,
    /// Kernel tid of the owning thread (changes in a fork child).
    pub tid: AtomicU32,
    /// Set when the owning thread exits: the writer drains it and lets it go.
    pub closed: AtomicBool,
    /// The producer's cache line: written by the producer only.
    prod: Line<Producer>,
    /// The consumer's cache line.
    cons: Line<Consumer>,
}

/// One cache line (128 bytes: adjacent-line prefetch pairs lines on x86), so that the
/// producer's stores never invalidate the line the consumer polls, and vice versa.
#[repr(align(128))]
struct Line<T>(T);

struct Producer {
    /// Next byte the producer writes (published with Release after the bytes).
    head: AtomicUsize,
    /// The producer's last view of `Consumer::tail` (producer-only; relaxed). It only lags
    /// the real tail, so space computed from it is never overestimated; the real tail (the
    /// consumer's line) is read only when this view says the ring is full or half full.
    tail_seen: AtomicUsize,
    /// Where [`Ring::push_quiet`]'s records may end (producer-only; relaxed): the lesser of
    /// the end of the buffer's lap `head` was in and `tail_seen` + half the capacity, as they
    /// were at the last [`Ring::refresh_quiet`]. Both only grow, so a stale value is only
    /// ever too small (a record then takes the cold path, which refreshes it). 0 at first.
    quiet_end: AtomicUsize,
}

struct Consumer {
    /// Next byte the consumer reads (published with Release after reading).
    tail: AtomicUsize,
    /// Set once the producer has asked the writer to drain; cleared by the consumer.
    wake_sent: AtomicBool,
}

// SAFETY: the producer only writes bytes in [head, tail + cap) and the consumer only reads
// bytes in [tail, head); head/tail are published with Release and read with Acquire, so the
// two sides never touch the same byte concurrently. Callers uphold single producer / single
// consumer (documented on push/drain).
unsafe impl Sync for Ring {}
// SAFETY: as above; the buffer is owned heap memory.
unsafe impl Send for Ring {}

impl Ring {
    /// `capacity` is rounded up to a power of two (at least 64 bytes).
    pub fn new(capacity: usize, tid: u32) -> Ring {
        let cap = capacity.max(64).next_power_of_two();
        Ring {
            buf: Bytes::new(cap),
            mask: cap - 1,
            tid: AtomicU32::new(tid),
            closed: AtomicBool::new(false),
            prod: Line(Producer {
                head: AtomicUsize::new(0),
                tail_seen: AtomicUsize::new(0),
                quiet_end: AtomicUsize::new(0),
            }),
            cons: Line(Consumer {
                tail: AtomicUsize::new(0),
                wake_sent: AtomicBool::new(false),
            }),
        }
    }

    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    /// Bytes currently held (approximate from another thread).
    /// The producer's position: bytes ever published.
    pub fn head(&self) -> usize {
        self.prod.0.head.load(Ordering::Acquire)
    }

    /// Whether every record published before the producer reached `head` was consumed.
    pub fn consumed(&self, head: usize) -> bool {
        (self.cons.0.tail.load(Ordering::Acquire).wrapping_sub(head) as isize) >= 0
    }

    pub fn used(&self) -> usize {
        self.prod
            .0
            .head
            .load(Ordering::Acquire)
            .wrapping_sub(self.cons.0.tail.load(Ordering::Acquire))
    }

    /// Producer only, after a push: true the first time since the consumer last drained that
    /// the ring is more than half full (the producer should then wake the consumer). Reads
    /// the consumer's line only when the producer's own view says "over half".
    #[inline]
    pub fn wants_drain(&self) -> bool {
        self.wants_drain_at(self.prod.0.head.load(Ordering::Relaxed))
    }

    /// [`Ring::wants_drain`] given the head the producer just published (from
    /// [`Ring::try_push`]): saves reloading it.
    #[inline(always)]
    pub fn wants_drain_at(&self, head: usize) -> bool {
        let half = self.capacity() / 2;
        if head.wrapping_sub(self.prod.0.tail_seen.load(Ordering::Relaxed)) <= half {
            return false;
        }
        let tail = self.cons.0.tail.load(Ordering::Acquire);
        self.prod.0.tail_seen.store(tail, Ordering::Relaxed);
        head.wrapping_sub(tail) > half
            && !self.cons.0.wake_sent.load(Ordering::Relaxed)
            && !self.cons.0.wake_sent.swap(true, Ordering::Relaxed)
    }

    /// Consumer: a new drain starts; the producer may ask again.
    pub fn clear_wake(&self) {
        self.cons.0.wake_sent.store(false, Ordering::Relaxed);
    }

    /// Appends a record of `len` bytes (8-aligned, ≤ capacity/2) written by `fill`.
    /// Returns false, writing nothing, when it does not fit.
    /// Must only be called by the ring's single producer.
    #[inline]
    pub fn push(&self, len: usize, fill: impl FnOnce(&mut [u8])) -> bool {
        self.try_push(len, fill).is_some()
    }

    /// As [`Ring::push`], returning the new head (for [`Ring::wants_drain_at`]).
    #[inline(always)]
    pub fn try_push(&self, len: usize, fill: impl FnOnce(&mut [u8])) -> Option<usize> {
        debug_assert!(len.is_multiple_of(8) && len >= 8 && len <= self.capacity() / 2);
        let cap = self.capacity();
        let mut head = self.prod.0.head.load(Ordering::Relaxed);
        let idx = head & self.mask;
        let to_end = cap - idx;
        let need = if len <= to_end { len } else { to_end + len };
        if head.wrapping_sub(self.prod.0.tail_seen.load(Ordering::Relaxed)) + need > cap {
            // Only now look at the consumer's line.
            let tail = self.cons.0.tail.load(Ordering::Acquire);
            self.prod.0.tail_seen.store(tail, Ordering::Relaxed);
            if head.wrapping_sub(tail) + need > cap {
                return None;
            }
        }
        if len > to_end {
            // SAFETY: [idx, cap) lies in the free region (checked above) that the consumer
            // does not read until head is published; to_end >= 8 since every record and the
            // capacity are 8-aligned.
            unsafe {
                let [a, b, c, d] = (to_end as u32).to_le_bytes();
                self.buf.put(idx, &[a, b, c, d, KIND_PAD]);
            }
            head = head.wrapping_add(to_end);
        }
        let idx = head & self.mask;
        // SAFETY: [idx, idx + len) is inside the buffer (len <= cap - idx after wrapping) and
        // inside the free region; only this producer writes it until head is published.
        unsafe { self.buf.write(idx, len, fill) };
        let head = head.wrapping_add(len);
        self.prod.0.head.store(head, Ordering::Release);
        Some(head)
    }

    /// The common case of [`Ring::try_push`] followed by [`Ring::wants_drain_at`], for a
    /// record of a constant length: written (returning true) when it fits before the buffer's
    /// end and the ring, in the producer's view of the tail, is at most half full after it,
    /// so that there is no drain to ask for either: one comparison for both. `false`, writing
    /// nothing, otherwise (padding needed at the end, or over half full by the producer's
    /// view): the caller then takes [`Ring::try_push`] and [`Ring::wants_drain_at`], which
    /// decide exactly as they would have. Same contract as [`Ring::push`] otherwise.
    ///
    /// Both conditions are one comparison with `quiet_end` ([`Ring::refresh_quiet`]), which
    /// the caller's cold path refreshes.
    #[inline(always)]
    pub fn push_quiet(&self, len: usize, fill: impl FnOnce(&mut [u8])) -> bool {
        debug_assert!(len.is_multiple_of(8) && len >= 8 && len <= self.capacity() / 2);
        let head = self.prod.0.head.load(Ordering::Relaxed);
        let end = head.wrapping_add(len);
        // Positions are compared as they are: a usize counter does not wrap in practice
        // (2^64 bytes), and `head <= quiet_end` holds whenever this says yes.
        if end > self.prod.0.quiet_end.load(Ordering::Relaxed) {
            return false;
        }
        debug_assert!(head & self.mask <= self.mask + 1 - len);
        let idx = head & self.mask;
        // SAFETY: end <= quiet_end <= the end of head's lap, so [idx, idx + len) is inside
        // the buffer; end <= quiet_end <= tail_seen + capacity / 2, and the producer's view
        // of the tail only lags the real one, so the range is inside the free region (and at
        // most half the ring is in use after this record); only this producer writes it
        // until head is published.
        unsafe { self.buf.write(idx, len, fill) };
        self.prod.0.head.store(end, Ordering::Release);
        true
    }

    /// Producer only: recomputes where [`Ring::push_quiet`]'s records may end, from the
    /// current head and view of the tail (after a push or a tail read on the cold path).
    #[inline]
    pub fn refresh_quiet(&self) {
        let head = self.prod.0.head.load(Ordering::Relaxed);
        let lap_end = (head | self.mask).wrapping_add(1);
        let half = self
            .prod
            .0
            .tail_seen
            .load(Ordering::Relaxed)
            .wrapping_add(self.capacity() / 2);
        self.prod
            .0
            .quiet_end
            .store(lap_end.min(half), Ordering::Relaxed);
    }

    /// Hands complete records to `f`, oldest first, freeing their space, until about
    /// `max_bytes` were drained or `f` returns true. Returns the bytes drained.
    /// Must only be called by one consumer at a time.
    #[inline(always)]
    pub fn drain(&self, max_bytes: usize, mut f: impl FnMut(&[u8]) -> bool) -> usize {
        let head = self.prod.0.head.load(Ordering::Acquire);
        let start = self.cons.0.tail.load(Ordering::Relaxed);
        let mut tail = start;
        while tail != head && tail.wrapping_sub(start) < max_bytes {
            let idx = tail & self.mask;
            // SAFETY: [tail, head) was published by the producer (Acquire above); a record
            // header (8 bytes: the length, then the kind) starts at every record boundary and
            // lies within the buffer.
            let (len, kind) = unsafe {
                self.buf.read(idx, 5, |h| {
                    (u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize, h[4])
                })
            };
            let mut stop = false;
            if kind != KIND_PAD {
                // SAFETY: the producer wrote `len` contiguous bytes here before publishing.
                stop = unsafe { self.buf.read(idx, len, |b| f(b)) };
            }
            tail = tail.wrapping_add(len.max(8));
            // Publish progress as we go so a waiting producer sees space early.
            self.cons.0.tail.store(tail, Ordering::Release);
            if stop {
                break;
            }
        }
        tail.wrapping_sub(start)
    }

    /// Drops every held record (fork child: the parent's events are the parent's).
    /// Only sound when no producer or consumer runs concurrently.
    pub fn discard(&self) {
        let head = self.prod.0.head.load(Ordering::Acquire);
        self.cons.0.tail.store(head, Ordering::Release);
        self.cons.0.wake_sent.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn rec(v: u64, len: usize) -> impl FnOnce(&mut [u8]) {
        move |s: &mut [u8]| {
            s[..4].copy_from_slice(&(len as u32).to_le_bytes());
            s[4] = 1;
            s[8..16].copy_from_slice(&v.to_le_bytes());
        }
    }

    #[test]
    fn wraps_and_reports_full() {
        let r = Ring::new(256, 1);
        let mut got = Vec::new();
        let mut next = 0u64;
        for round in 0..50 {
            let len = if round % 3 == 0 { 40 } else { 24 };
            while r.push(len, rec(next, len)) {
                next += 1;
            }
            r.drain(usize::MAX, |b| {
                got.push(u64::from_le_bytes(b[8..16].try_into().unwrap()));
                false
            });
        }
        assert_eq!(got, (0..next).collect::<Vec<_>>());
    }

    /// The static records' path (`push_quiet`, else `try_push` + `wants_drain_at` +
    /// `refresh_quiet`) against `try_push` + `wants_drain_at` alone on a twin ring: the same
    /// records in the same order, the same wake-ups, and the quiet pushes never straddle
    /// the buffer's end nor leave the ring over half full.
    #[test]
    fn quiet_pushes_decide_as_the_general_path() {
        let (q, g) = (Ring::new(512, 1), Ring::new(512, 1));
        let (mut got_q, mut got_g) = (Vec::new(), Vec::new());
        let mut quiet = 0;
        for i in 0..5_000u64 {
            let len = [24, 40, 80, 16][(i % 4) as usize];
            let wake_q = if q.push_quiet(len, rec(i, len)) {
                quiet += 1;
                assert!(q.used() <= q.capacity() / 2);
                false
            } else {
                match q.try_push(len, rec(i, len)) {
                    Some(h) => {
                        let w = q.wants_drain_at(h);
                        q.refresh_quiet();
                        w
                    }
                    None => {
                        assert!(g.try_push(len, rec(i, len)).is_none());
                        continue;
                    }
                }
            };
            let h = g
                .try_push(len, rec(i, len))
                .expect("the twin has the same room");
            assert_eq!(wake_q, g.wants_drain_at(h), "record {i}");
            if wake_q {
                q.clear_wake();
                g.clear_wake();
            }
            if i % 4 == 0 {
                // About what four records take, so the ring's fill wanders over its range.
                let budget = if i % 64 == 0 {
                    usize::MAX
                } else {
                    (i as usize % 9) * 40
                };
                let take = |r: &Ring, out: &mut Vec<u64>| {
                    r.drain(budget, |b| {
                        assert_eq!(
                            b.len(),
                            u32::from_le_bytes(b[..4].try_into().unwrap()) as usize
                        );
                        out.push(u64::from_le_bytes(b[8..16].try_into().unwrap()));
                        false
                    })
                };
                assert_eq!(take(&q, &mut got_q), take(&g, &mut got_g));
            }
        }
        q.drain(usize::MAX, |b| {
            got_q.push(u64::from_le_bytes(b[8..16].try_into().unwrap()));
            false
        });
        g.drain(usize::MAX, |b| {
            got_g.push(u64::from_le_bytes(b[8..16].try_into().unwrap()));
            false
        });
        assert_eq!(got_q, got_g);
        assert!(quiet > 1_000, "the quiet path was taken {quiet} times");
        assert!(
            quiet < 4_500,
            "the cold path was taken {} times",
            5_000 - quiet
        );
    }

    #[test]
    fn concurrent_producer_consumer_loses_nothing() {
        let r = Arc::new(Ring::new(4096, 1));
        // Miri interprets every instruction: a few thousand records still cross many wraps.
        let n: u64 = if cfg!(miri) { 3_000 } else { 200_000 };
        let p = {
            let r = r.clone();
            std::thread::spawn(move || {
                for i in 0..n {
                    let len = 16 + (i as usize % 5) * 8;
                    while !r.push(len, rec(i, len)) {
                        std::hint::spin_loop();
                    }
                }
            })
        };
        let mut expect = 0u64;
        while expect < n {
            r.drain(usize::MAX, |b| {
                let v = u64::from_le_bytes(b[8..16].try_into().unwrap());
                assert_eq!(v, expect);
                expect += 1;
                false
            });
        }
        p.join().unwrap();
    }
}
