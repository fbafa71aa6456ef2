//! Loom models of core's two lock-free protocols: the per-thread ring (one producer, one
//! consumer) and the clock's sequence lock (one writer, readers). Loom runs each model under
//! every interleaving (up to `LOOM_MAX_PREEMPTIONS` preemptions) and every outcome the C++11
//! memory model allows for the atomics; each byte of the ring is a loom cell, so a read of a
//! byte that is not yet (or no longer) published is reported as a data race.
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 \
//!     cargo test --release -p dftracer-core --test loom --target-dir target/loom
//! ```
//! (`scripts/test.sh` runs it.) Without `--cfg loom` this file is empty.
#![cfg(loom)]

use dftracer_core::internals::clock::{Anchor, Conversion};
use dftracer_core::internals::ring::Ring;
use loom::sync::Arc;
use loom::thread;

/// Record `i` of length `len`: the ring's header (length, kind 1), then bytes that depend on
/// both, so a record read from the wrong place or half written does not match.
fn fill(i: usize, len: usize) -> impl FnOnce(&mut [u8]) {
    move |s: &mut [u8]| {
        assert_eq!(s.len(), len);
        s[..4].copy_from_slice(&(len as u32).to_le_bytes());
        s[4] = 1;
        for (k, b) in s.iter_mut().enumerate().skip(5) {
            *b = (i * 31 + k * 7) as u8;
        }
    }
}

fn check(i: usize, len: usize, rec: &[u8]) {
    let mut want = vec![0u8; len];
    fill(i, len)(&mut want);
    assert_eq!(rec, &want[..], "record {i} (len {len}) arrived altered");
}

/// Drains what is there, checking each record against `lens[*next]`; `max` bytes at most.
fn drain_checked(r: &Ring, lens: &[usize], next: &mut usize, max: usize) {
    r.drain(max, |rec| {
        assert!(*next < lens.len(), "a record arrived twice or from nowhere");
        check(*next, lens[*next], rec);
        *next += 1;
        false
    });
}

/// One producer pushes records of 24, 16, 32 and 24 bytes into a 64-byte ring (the third
/// does not fit before the end: a pad record, then the record at offset 0), waiting while the
/// ring is full; the consumer drains in chunks of about 24 bytes. Every record arrives once,
/// in order, byte-exact; loom reports any byte read before its record is published or
/// overwritten before it is consumed.
#[test]
fn ring_wraps_with_padding_in_order() {
    const LENS: [usize; 8] = [24, 16, 32, 24, 8, 32, 16, 24];
    loom::model(|| {
        let r = Arc::new(Ring::new(64, 1));
        assert_eq!(r.capacity(), 64);
        let p = {
            let r = r.clone();
            thread::spawn(move || {
                for (i, &len) in LENS.iter().enumerate() {
                    while !r.push(len, fill(i, len)) {
                        thread::yield_now();
                    }
                }
            })
        };
        let mut next = 0;
        while next < LENS.len() {
            drain_checked(&r, &LENS, &mut next, 24);
            if next < LENS.len() {
                thread::yield_now();
            }
        }
        p.join().unwrap();
        assert_eq!(r.used(), 0);
    });
}

/// The producer never waits (the tracer's drop-when-full mode): it tries five records and
/// keeps the ones `push` accepted; after each accepted push it asks `wants_drain` (the
/// "over half full" wake, computed from its cached view of the consumer's index). The
/// consumer, like the writer, clears the wake flag and drains, twice; then whatever is left.
/// Exactly the accepted records arrive, in order, byte-exact; a wake is asked at most once
/// per clear (plus the first). (Counted at the end: a wake and the clear it consumed are
/// relaxed, so the producer cannot be asked to see the consumer's clear count at that time.)
#[test]
fn ring_full_push_fails_and_wakes_once_per_clear() {
    const LENS: [usize; 7] = [32, 24, 16, 32, 8, 24, 32];
    loom::model(|| {
        let r = Arc::new(Ring::new(64, 1));
        let p = {
            let r = r.clone();
            thread::spawn(move || {
                let mut accepted = Vec::new();
                let mut wakes = 0;
                for (i, &len) in LENS.iter().enumerate() {
                    if r.push(len, fill(i, len)) {
                        accepted.push(i);
                        if r.wants_drain() {
                            wakes += 1;
                        }
                    }
                }
                (accepted, wakes)
            })
        };
        let mut got = Vec::new();
        let mut take = |r: &Ring| {
            r.drain(usize::MAX, |rec| {
                got.push(rec.to_vec());
                false
            })
        };
        const CLEARS: usize = 2;
        for _ in 0..CLEARS {
            r.clear_wake();
            take(&r);
        }
        let (accepted, wakes) = p.join().unwrap();
        assert!(
            wakes <= CLEARS + 1,
            "{wakes} wakes asked for {CLEARS} clears"
        );
        take(&r);
        assert_eq!(got.len(), accepted.len(), "records lost or duplicated");
        for (rec, &i) in got.iter().zip(&accepted) {
            check(i, LENS[i], rec);
        }
        assert_eq!(r.used(), 0);
    });
}

fn conv(k: u64) -> Conversion {
    Conversion {
        base_tsc: k,
        base_ns: k * 1_000,
        mult: k * 7,
    }
}

/// The writer publishes anchor 1, withdraws it (TSC check failed), publishes anchor 2, then
/// anchor 3; a reader reads twice. Whatever it gets is one whole published anchor, never a
/// mix of two; and its second read is never older than its first.
#[test]
fn clock_seqlock_never_torn() {
    loom::model(|| {
        let a = Arc::new(Anchor::new());
        let reader = {
            let a = a.clone();
            thread::spawn(move || {
                let mut last = 0;
                for _ in 0..2 {
                    if let Some((c, t)) = a.read(|| 42) {
                        assert_eq!(t, 42);
                        let k = c.base_tsc;
                        assert!((1..=3).contains(&k), "never published: {c:?}");
                        assert_eq!(c, conv(k), "torn anchor");
                        assert!(k >= last, "went back from anchor {last} to {k}");
                        last = k;
                    }
                }
            })
        };
        a.publish(conv(1));
        a.withdraw();
        a.publish(conv(2));
        a.publish(conv(3));
        assert_eq!(a.current(), Some(conv(3)));
        reader.join().unwrap();
    });
}
