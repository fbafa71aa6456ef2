//! The event clock: epoch nanoseconds, read from the CPU's time-stamp counter when the kernel
//! itself trusts it, else from `CLOCK_REALTIME` (vDSO).
//!
//! On a KVM guest `clock_gettime` costs 19–36 ns and a traced I/O call reads the clock twice;
//! `rdtsc` costs about 9 ns. The TSC is used only when the CPU reports an invariant TSC
//! (`constant_tsc` and `nonstop_tsc`) and the kernel's current clocksource is `tsc` (so the
//! kernel found it synchronised across CPUs), and only once the writer thread has calibrated
//! it against `CLOCK_REALTIME` over at least [`MIN_BASELINE_NS`]. Until then, and whenever a
//! check fails, the clock is exactly `clock_gettime(CLOCK_REALTIME)`.
//!
//! Calibration: the writer calls [`recalibrate`] on every wake-up (at least once per flush
//! interval). It reads a (realtime, tsc) pair, computes the tick length from the first pair
//! (a long baseline: the error shrinks as the process lives) and publishes a fresh anchor
//! through a sequence lock. A published anchor is used for at most [`MAX_AGE_TICKS`] ticks
//! (a few seconds); past that (writer stalled or gone) readers fall back to the vDSO. If a
//! new pair disagrees with the published conversion by more than [`MAX_ERROR_NS`]
//! (`settimeofday`, NTP step, VM migration), the TSC is dropped and calibration starts over.
//!
//! Readers: two relaxed loads of the sequence, three of the anchor, one `rdtsc`, one 128-bit
//! multiply. No lock, no syscall.

use std::sync::atomic::{fence, AtomicU64, Ordering};

use crate::config::TimeMetric;
use crate::sys::realtime_ns;

/// Odd while the writer updates the anchor; 0 while the TSC is not in use.
static SEQ: AtomicU64 = AtomicU64::new(0);
static BASE_TSC: AtomicU64 = AtomicU64::new(0);
static BASE_NS: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds per tick, 32.32 fixed point.
static MULT: AtomicU64 = AtomicU64::new(0);

/// Calibration state, touched by the writer thread only.
static ORIGIN_TSC: AtomicU64 = AtomicU64::new(0);
static ORIGIN_NS: AtomicU64 = AtomicU64::new(0);
/// 0: not checked yet, 1: usable, 2: not usable (never retried).
static USABLE: AtomicU64 = AtomicU64::new(0);

/// Shortest calibration baseline before the TSC is used.
pub const MIN_BASELINE_NS: u64 = 50_000_000;
/// Largest disagreement between a fresh (realtime, tsc) pair and the published conversion.
pub const MAX_ERROR_NS: u64 = 50_000;
/// Age of an anchor past which readers stop trusting it (2^34 ticks: 5.7 s at 3 GHz).
pub const MAX_AGE_TICKS: u64 = 1 << 34;

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` is available on every x86_64 CPU and has no memory effects.
    #[allow(unsafe_code)]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
}

/// Nanoseconds since the epoch.
#[inline]
pub fn now_ns() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let s = SEQ.load(Ordering::Acquire);
        if s != 0 && s & 1 == 0 {
            let bt = BASE_TSC.load(Ordering::Relaxed);
            let bn = BASE_NS.load(Ordering::Relaxed);
            let m = MULT.load(Ordering::Relaxed);
            let t = rdtsc();
            fence(Ordering::Acquire);
            let d = t.wrapping_sub(bt);
            if SEQ.load(Ordering::Relaxed) == s && d < MAX_AGE_TICKS {
                return bn + ((d as u128 * m as u128) >> 32) as u64;
            }
        }
    }
    realtime_ns()
}

/// Whether the TSC is in use right now.
pub fn tsc_in_use() -> bool {
    let s = SEQ.load(Ordering::Acquire);
    s != 0 && s & 1 == 0
}

/// Stops using the TSC (a fork child keeps the parent's anchor until its writer recalibrates:
/// same machine, same counter; this is for tests and for a failed check).
fn drop_tsc() {
    SEQ.store(0, Ordering::Release);
    ORIGIN_TSC.store(0, Ordering::Relaxed);
    ORIGIN_NS.store(0, Ordering::Relaxed);
}

/// The writer's calibration step (cheap; call it on every wake-up). `allowed`: the
/// configuration permits the TSC.
pub fn recalibrate(allowed: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        if !allowed {
            if SEQ.load(Ordering::Relaxed) != 0 {
                drop_tsc();
            }
            return;
        }
        if USABLE.load(Ordering::Relaxed) == 2 {
            return;
        }
        let Some((ns, tsc)) = paired_read() else {
            return;
        };
        let (ot, on) = (
            ORIGIN_TSC.load(Ordering::Relaxed),
            ORIGIN_NS.load(Ordering::Relaxed),
        );
        if ot == 0 || tsc <= ot || ns <= on {
            ORIGIN_TSC.store(tsc, Ordering::Relaxed);
            ORIGIN_NS.store(ns, Ordering::Relaxed);
            return;
        }
        let s = SEQ.load(Ordering::Relaxed);
        if s != 0 {
            // Check the published conversion against this pair before trusting it further.
            let d = tsc.wrapping_sub(BASE_TSC.load(Ordering::Relaxed));
            let m = MULT.load(Ordering::Relaxed);
            let predicted =
                BASE_NS.load(Ordering::Relaxed) + ((d as u128 * m as u128) >> 32) as u64;
            if predicted.abs_diff(ns) > MAX_ERROR_NS {
                drop_tsc();
                ORIGIN_TSC.store(tsc, Ordering::Relaxed);
                ORIGIN_NS.store(ns, Ordering::Relaxed);
                return;
            }
        }
        let (dn, dt) = (ns - on, tsc - ot);
        if dn < MIN_BASELINE_NS {
            return;
        }
        // Checked once, and only by processes that live past the baseline: short-lived ones
        // (every exec'd tool under the preload library) never read /proc/cpuinfo.
        if USABLE.load(Ordering::Relaxed) == 0 {
            let ok = tsc_trusted();
            USABLE.store(if ok { 1 } else { 2 }, Ordering::Relaxed);
            if !ok {
                return;
            }
        }
        let mult = ((dn as u128) << 32) / dt as u128;
        // Between 100 MHz and 20 GHz, or something is wrong.
        if !((1u128 << 32) / 20..=10u128 << 32).contains(&mult) {
            return;
        }
        let next = if s == 0 { 2 } else { s + 2 };
        SEQ.store(next - 1, Ordering::Relaxed);
        fence(Ordering::Release);
        BASE_TSC.store(tsc, Ordering::Relaxed);
        BASE_NS.store(ns, Ordering::Relaxed);
        MULT.store(mult as u64, Ordering::Relaxed);
        SEQ.store(next, Ordering::Release);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = allowed;
}

/// A (realtime ns, tsc) pair read close together: the realtime midpoint around one `rdtsc`,
/// from the tightest of a few tries.
#[cfg(target_arch = "x86_64")]
fn paired_read() -> Option<(u64, u64)> {
    let mut best: Option<(u64, u64, u64)> = None;
    for _ in 0..5 {
        let a = realtime_ns();
        let t = rdtsc();
        let b = realtime_ns();
        if b < a {
            continue;
        }
        let gap = b - a;
        if best.is_none_or(|(g, _, _)| gap < g) {
            best = Some((gap, a + gap / 2, t));
        }
    }
    let (gap, ns, t) = best?;
    (gap < 20_000).then_some((ns, t))
}

/// Invariant TSC reported by the CPU and chosen by the kernel as its clocksource.
#[cfg(target_arch = "x86_64")]
fn tsc_trusted() -> bool {
    let source =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .unwrap_or_default();
    if source.trim() != "tsc" {
        return false;
    }
    // The first CPU's block is enough (all CPUs report the same flags); on a large machine
    // the whole file is megabytes.
    let mut head = vec![0u8; 64 * 1024];
    let n = std::fs::File::open("/proc/cpuinfo")
        .and_then(|mut f| {
            use std::io::Read;
            let mut n = 0;
            while n < head.len() {
                match f.read(&mut head[n..])? {
                    0 => break,
                    k => n += k,
                }
            }
            Ok(n)
        })
        .unwrap_or(0);
    let info = String::from_utf8_lossy(&head[..n]);
    let Some(flags) = info.lines().find(|l| l.starts_with("flags")) else {
        return false;
    };
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

/// Epoch time in `unit` (true nanosecond resolution for NS).
#[inline]
pub fn now_in(unit: TimeMetric) -> u64 {
    let ns = now_ns();
    match unit {
        TimeMetric::Ns => ns,
        TimeMetric::Us => ns / 1_000,
        TimeMetric::Ms => ns / 1_000_000,
        TimeMetric::Sec => ns / 1_000_000_000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_realtime_once_calibrated() {
        // Not calibrated: exactly the vDSO clock.
        let (a, b, c) = (realtime_ns(), now_ns(), realtime_ns());
        assert!(a <= b && b <= c);
        recalibrate(true);
        std::thread::sleep(std::time::Duration::from_millis(250));
        recalibrate(true);
        if !tsc_in_use() {
            // No trusted TSC on this machine: nothing more to check.
            return;
        }
        for _ in 0..1000 {
            let (a, b, c) = (realtime_ns(), now_ns(), realtime_ns());
            assert!(
                b + 20_000 >= a && b <= c + 20_000,
                "tsc time {b} outside [{a}, {c}] by more than 20 us"
            );
        }
        let (x, y) = (now_ns(), now_ns());
        assert!(y >= x);
        recalibrate(false);
        assert!(!tsc_in_use());
    }

    #[test]
    fn clock_units() {
        let us = now_in(TimeMetric::Us);
        let ns = now_in(TimeMetric::Ns);
        assert!(ns / 1000 >= us && ns / 1000 - us < 1_000_000);
        assert!(now_in(TimeMetric::Sec) > 1_700_000_000);
    }
}
