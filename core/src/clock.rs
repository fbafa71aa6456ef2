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
//! through a sequence lock, at most every [`REANCHOR_NS`], never behind the conversion it
//! replaces at any tick up to the publication ([`not_behind`]), and a reader that races with
//! a publication reads the TSC again instead of the vDSO (so no thread sees time go back
//! across a re-anchoring; `tests/clock_drift.rs`
//! checks this and the drift against `CLOCK_REALTIME` over minutes, FORMAT.md "Clock" gives
//! the bound). A published anchor is used for at most [`MAX_AGE_TICKS`] ticks
//! (a few seconds); past that (writer stalled or gone) readers fall back to the vDSO. If a
//! new pair disagrees with the published conversion by more than [`MAX_ERROR_NS`]
//! (`settimeofday`, NTP step, VM migration), the TSC is dropped and calibration starts over.
//!
//! Readers: two loads of the sequence, three of the anchor, one `rdtsc`, one 128-bit
//! multiply. No lock, no syscall. The sequence lock is [`Anchor`]; `tests/loom.rs` checks
//! under loom that no reader ever gets a torn anchor.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::config::TimeMetric;
use crate::sync;
use crate::sys::realtime_ns;

/// The published tsc → epoch-ns conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conversion {
    pub base_tsc: u64,
    pub base_ns: u64,
    /// Nanoseconds per tick, 32.32 fixed point.
    pub mult: u64,
}

impl Conversion {
    /// Epoch nanoseconds at counter value `tsc`.
    #[inline(always)]
    pub fn predict(&self, tsc: u64) -> u64 {
        let d = tsc.wrapping_sub(self.base_tsc);
        self.base_ns + ((d as u128 * self.mult as u128) >> 32) as u64
    }

    /// As [`Conversion::predict`], or None when the anchor is older than [`MAX_AGE_TICKS`].
    #[inline(always)]
    pub fn at(&self, tsc: u64) -> Option<u64> {
        (tsc.wrapping_sub(self.base_tsc) < MAX_AGE_TICKS).then(|| self.predict(tsc))
    }
}

/// A [`Conversion`] behind a sequence lock: one writer (the tracer's writer thread) publishes,
/// any number of readers read without ever blocking it or each other.
pub struct Anchor {
    /// Even (0 mod 4): a conversion is published. Odd: none yet (it starts at 3) or withdrawn
    /// (3 mod 4), or the writer is publishing one (1 mod 4): readers test one bit, and a
    /// reader that raced with a publication tells it from a withdrawal ([`Anchor::withdrawn`]).
    /// It only grows: a withdrawal moves it to 3 mod 4 rather than back to 3, so a reader that
    /// loaded the old anchor's value before a withdrawal and a new publication cannot find
    /// that same value again and mix the two anchors.
    seq: sync::AtomicU64,
    base_tsc: sync::AtomicU64,
    base_ns: sync::AtomicU64,
    mult: sync::AtomicU64,
}

impl Default for Anchor {
    fn default() -> Anchor {
        Anchor::new()
    }
}

impl Anchor {
    #[cfg(not(loom))]
    pub const fn new() -> Anchor {
        Anchor {
            seq: sync::AtomicU64::new(3),
            base_tsc: sync::AtomicU64::new(0),
            base_ns: sync::AtomicU64::new(0),
            mult: sync::AtomicU64::new(0),
        }
    }

    /// Loom's atomics have no `const fn new`; the global anchor is a `loom::lazy_static`.
    #[cfg(loom)]
    pub fn new() -> Anchor {
        Anchor {
            seq: sync::AtomicU64::new(3),
            base_tsc: sync::AtomicU64::new(0),
            base_ns: sync::AtomicU64::new(0),
            mult: sync::AtomicU64::new(0),
        }
    }

    /// Reader: the published conversion and a `counter()` value read after it (before the
    /// sequence is checked again, so the conversion is never older than the counter), or None
    /// when nothing is published or the writer is updating it.
    #[inline(always)]
    pub fn read(&self, counter: impl FnOnce() -> u64) -> Option<(Conversion, u64)> {
        let s = self.seq.load(Ordering::Acquire);
        if s & 1 != 0 {
            return None;
        }
        let c = Conversion {
            base_tsc: self.base_tsc.load(Ordering::Relaxed),
            base_ns: self.base_ns.load(Ordering::Relaxed),
            mult: self.mult.load(Ordering::Relaxed),
        };
        let t = counter();
        // Orders the three loads above before the check below (pairs with the writer's
        // release fence: a reader that saw any new value sees the sequence moved).
        sync::fence(Ordering::Acquire);
        (self.seq.load(Ordering::Relaxed) == s).then_some((c, t))
    }

    /// Whether a conversion is published.
    #[inline(always)]
    pub fn in_use(&self) -> bool {
        self.seq.load(Ordering::Acquire) & 1 == 0
    }

    /// Writer only: the conversion it last published, if still in use.
    pub fn current(&self) -> Option<Conversion> {
        let s = self.seq.load(Ordering::Relaxed);
        (s & 1 == 0).then(|| Conversion {
            base_tsc: self.base_tsc.load(Ordering::Relaxed),
            base_ns: self.base_ns.load(Ordering::Relaxed),
            mult: self.mult.load(Ordering::Relaxed),
        })
    }

    /// Writer only: publishes `c`.
    pub fn publish(&self, c: Conversion) {
        self.publish_with(|| c);
    }

    /// Writer only: publishes the conversion `make` returns, called once no reader can pass
    /// its check with the conversion published before (the sequence is odd and, after a
    /// full fence, visible to every core): a counter read inside `make` is later than every
    /// counter value a reader of the old conversion returned.
    pub fn publish_with(&self, make: impl FnOnce() -> Conversion) {
        // 1 mod 4 from either a published (0) or a withdrawn (3) value.
        let odd = (self.seq.load(Ordering::Relaxed) | 3) + 2;
        self.seq.store(odd, Ordering::Relaxed);
        // Also when the sequence was odd already (withdrawn): a reader that sees one of the
        // stores below must then see the sequence moved past the value it started with. A
        // full fence: the odd sequence is visible everywhere before `make` runs.
        sync::fence(Ordering::SeqCst);
        let c = make();
        self.base_tsc.store(c.base_tsc, Ordering::Relaxed);
        self.base_ns.store(c.base_ns, Ordering::Relaxed);
        self.mult.store(c.mult, Ordering::Relaxed);
        self.seq.store(odd + 3, Ordering::Release);
    }

    /// Writer only: readers stop using the published conversion.
    pub fn withdraw(&self) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s | 3, Ordering::Release);
    }

    /// Whether no conversion is published and none is being published (none yet, or
    /// withdrawn), as opposed to the few stores of a publication.
    #[inline]
    pub fn withdrawn(&self) -> bool {
        self.seq.load(Ordering::Acquire) & 3 == 3
    }
}

#[cfg(not(loom))]
static ANCHOR: sync::Padded<Anchor> = sync::Padded(Anchor::new());

/// The word behind [`ticks`]'s choice, for code that reads the clock itself (the C header's
/// inline region start, `dftracer_fast_`): while it is even, a [`ticks`] value is
/// `rdtsc | TSC_TAG`; while it is odd, the caller must call [`ticks`].
#[cfg(not(loom))]
pub const fn tsc_word() -> &'static std::sync::atomic::AtomicU64 {
    &ANCHOR.0.seq
}
#[cfg(loom)]
loom::lazy_static! {
    static ref ANCHOR: Anchor = Anchor::new();
}

/// Calibration state, touched by the writer thread only.
static ORIGIN_TSC: AtomicU64 = AtomicU64::new(0);
static ORIGIN_NS: AtomicU64 = AtomicU64::new(0);
/// 0: not checked yet, 1: usable, 2: not usable (never retried).
static USABLE: AtomicU64 = AtomicU64::new(0);

/// Shortest calibration baseline before the TSC is used.
pub const MIN_BASELINE_NS: u64 = 50_000_000;
/// A baseline past which a pair's own error no longer matters (below it, pairs must be
/// within [`TIGHT_GAP_NS`]: 1 us of error at each end of 55 ms is 3.6e-5, 18 us by the next
/// anchor half a second later).
const LONG_BASELINE_NS: u64 = 1_000_000_000;
/// Widest (realtime, tsc, realtime) read accepted while the baseline is short.
const TIGHT_GAP_NS: u64 = 2_000;
/// Shortest time between two published anchors.
pub const REANCHOR_NS: u64 = 500_000_000;
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

/// Set on a [`ticks`] value that is a raw TSC reading (clear: epoch nanoseconds). Raw
/// readings stay below 2^63 for a century of uptime at 3 GHz; epoch nanoseconds until 2262.
pub const TSC_TAG: u64 = 1 << 63;

/// The cheapest timestamp, for a record the writer converts later ([`ticks_ns`]): while a
/// conversion is published, the raw TSC (tagged [`TSC_TAG`]): one load, one `rdtsc`, no
/// multiply; otherwise epoch nanoseconds, exactly [`now_ns`]'s value. [`ticks_ns`] maps it
/// to the value [`now_ns`] would have returned at that instant (the conversion that was
/// current at the tick), so ticks and [`now_ns`] readings order and nest together.
#[inline(always)]
pub fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let s = ANCHOR.seq.load(Ordering::Acquire);
        if s & 1 == 0 {
            return rdtsc_tagged();
        }
        if s & 3 == 1 {
            return ticks_slow();
        }
    }
    realtime_ns()
}

/// [`ticks`] for the end of an event that began at `t0` (a [`ticks`] value): the TSC again,
/// without looking at the anchor, when `t0` was a TSC tick. Both ends then convert with the
/// conversions current at their ticks ([`ticks_ns`]), even if the anchor was withdrawn in
/// between (they stay in the history), and the duration is measured on one clock.
#[inline(always)]
pub fn ticks_after(t0: u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if t0 & TSC_TAG != 0 {
        return rdtsc_tagged();
    }
    ticks_no_tsc()
}

/// [`ticks`] out of line: the caller keeps no register for it across its own work (the
/// anchor's address), and pays a call only where its start was not a TSC tick.
#[inline(never)]
fn ticks_no_tsc() -> u64 {
    ticks()
}

/// [`ticks`] while no conversion is published: the vDSO clock, unless a publication is in
/// progress (then the tagged TSC once it is done: a vDSO reading there could be earlier than
/// the tagged ticks just before it on this thread, by the conversion's error).
#[cold]
#[inline(never)]
fn ticks_slow() -> u64 {
    #[cfg(target_arch = "x86_64")]
    for _ in 0..RACE_TRIES {
        if ANCHOR.in_use() {
            return rdtsc_tagged();
        }
        if ANCHOR.withdrawn() {
            break;
        }
        std::hint::spin_loop();
    }
    realtime_ns()
}

/// `rdtsc() | TSC_TAG` in four instructions: the tag is set with `bts`, where LLVM's
/// `or` with the 64-bit constant kept it in a register of its own across a hook's real call
/// (a callee-saved register the hook's values then had to spill for).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdtsc_tagged() -> u64 {
    let v: u64;
    // SAFETY: `rdtsc` is available on every x86_64 CPU and has no memory effects; the rest
    // is arithmetic on the two registers it writes.
    #[allow(unsafe_code)]
    unsafe {
        std::arch::asm!(
            "rdtsc",
            "shl rdx, 32",
            "or rax, rdx",
            "bts rax, 63",
            out("rax") v,
            out("rdx") _,
            options(nomem, nostack),
        )
    };
    debug_assert!(v & TSC_TAG != 0);
    v
}

/// Epoch nanoseconds of a [`ticks`] value.
#[inline]
pub fn ticks_ns(t: u64) -> u64 {
    if t & TSC_TAG == 0 {
        return t;
    }
    let t = t & !TSC_TAG;
    history::ns_newest(t).unwrap_or_else(|| history::ns_at(t))
}

/// Every conversion published, newest last (the last [`history::LEN`]): [`ticks_ns`] finds
/// the one that was current at a raw tick. Written by the publishing (writer) thread before
/// it publishes, so a tick tagged under a conversion always finds it here; each slot is an
/// [`Anchor`] of its own (the same sequence lock), read by the writer and by any thread that
/// records after its ring is gone.
mod history {
    use super::{Anchor, Conversion};
    use std::sync::atomic::{AtomicU64, Ordering};

    /// 64 conversions: at one per [`super::REANCHOR_NS`], the last 32 s at least. A tick
    /// older than the oldest kept (a record held that long in a ring) is extrapolated from it.
    pub const LEN: usize = 64;

    #[cfg(not(loom))]
    static SLOTS: [Anchor; LEN] = [const { Anchor::new() }; LEN];
    #[cfg(loom)]
    loom::lazy_static! {
        static ref SLOTS: [Anchor; LEN] = std::array::from_fn(|_| Anchor::new());
    }
    /// Conversions ever recorded.
    static COUNT: AtomicU64 = AtomicU64::new(0);

    /// Publisher only: appends `c`.
    pub fn push(c: Conversion) {
        let n = COUNT.load(Ordering::Relaxed);
        SLOTS[n as usize % LEN].publish(c);
        COUNT.store(n + 1, Ordering::Release);
    }

    /// Slot `i`'s conversion, or None while the publisher is writing it (or never did).
    #[inline(always)]
    fn read_once(i: u64) -> Option<Conversion> {
        SLOTS[i as usize % LEN].read(|| 0).map(|(c, _)| c)
    }

    fn read(i: u64) -> Option<Conversion> {
        for _ in 0..64 {
            if let Some(c) = read_once(i) {
                return Some(c);
            }
            std::hint::spin_loop();
        }
        None
    }

    /// [`ns_at`] when the newest conversion is based at or before `t` (a tick just read: the
    /// common case), in one read of its slot; else None.
    #[inline(always)]
    pub fn ns_newest(t: u64) -> Option<u64> {
        let n = COUNT.load(Ordering::Acquire);
        let c = read_once(n.checked_sub(1)?)?;
        (t >= c.base_tsc).then(|| c.predict(t))
    }

    /// Epoch ns at raw tick `t`: the newest conversion based at or before it, else the
    /// oldest one kept, extrapolated back; the vDSO clock if none was ever published.
    #[inline(never)]
    pub fn ns_at(t: u64) -> u64 {
        let n = COUNT.load(Ordering::Acquire);
        let mut oldest = None;
        for i in (n.saturating_sub(LEN as u64 - 1)..n).rev() {
            let Some(c) = read(i) else { continue };
            if t >= c.base_tsc {
                return c.predict(t);
            }
            oldest = Some(c);
        }
        match oldest {
            Some(c) => {
                let back = ((c.base_tsc - t) as u128 * c.mult as u128) >> 32;
                c.base_ns.saturating_sub(back as u64)
            }
            None => crate::sys::realtime_ns(),
        }
    }

    /// [`ns_at`] of `t0` and of `t1 >= t0`: one look-up when both are under the newest
    /// conversion (the common case: the writer converts what was just recorded), none when
    /// `last` holds it: `last` keeps the newest conversion read and the count it was read
    /// at. While the count is the same, that conversion is still the newest, and its slot
    /// unchanged (the publisher writes slot `n % LEN` before the count becomes `n + 1`, and
    /// slot `n - 1` again only at count `n - 1 + LEN`): the same values as a fresh read.
    #[inline(always)]
    pub fn ns_pair(t0: u64, t1: u64, last: &mut super::Newest) -> (u64, u64) {
        let n = COUNT.load(Ordering::Acquire);
        if n != 0 && t1 >= t0 {
            if n == last.count && t0 >= last.conv.base_tsc {
                return (last.conv.predict(t0), last.conv.predict(t1));
            }
            if let Some(c) = read_once(n - 1) {
                *last = super::Newest { count: n, conv: c };
                if t0 >= c.base_tsc {
                    return (c.predict(t0), c.predict(t1));
                }
            }
        }
        (ns_at(t0), ns_at(t1))
    }
}

/// The newest published conversion as a reader last read it ([`span_with`]), and the
/// count of conversions then (0: none read).
#[derive(Clone, Copy, Debug)]
pub struct Newest {
    count: u64,
    conv: Conversion,
}

impl Default for Newest {
    fn default() -> Newest {
        Newest {
            count: 0,
            conv: Conversion {
                base_tsc: 0,
                base_ns: 0,
                mult: 0,
            },
        }
    }
}

/// Nanoseconds since the epoch.
#[inline]
pub fn now_ns() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if let Some(ns) = ANCHOR.read(rdtsc).and_then(|(c, t)| c.at(t)) {
        return ns;
    }
    vdso_ns()
}

/// The vDSO clock, unless a read of the TSC raced with a publication (the sequence moved
/// or is odd for the few stores of one): then the TSC again, a few times first. Falling back
/// to the vDSO there could read an earlier time than the TSC just gave on this thread (by
/// the conversion's error). A withdrawn anchor stays odd: the vDSO. Out of line where the
/// TSC is read first, so that the TSC path of its callers needs no stack frame.
#[cfg_attr(target_arch = "x86_64", cold, inline(never))]
fn vdso_ns() -> u64 {
    #[cfg(target_arch = "x86_64")]
    if ANCHOR.withdrawn() {
        return realtime_ns();
    }
    #[cfg(target_arch = "x86_64")]
    for _ in 0..RACE_TRIES {
        match ANCHOR.read(rdtsc) {
            Some((c, t)) => match c.at(t) {
                Some(ns) => return ns,
                None => break, // an anchor too old to trust
            },
            None if ANCHOR.withdrawn() => break,
            None => std::hint::spin_loop(),
        }
    }
    realtime_ns()
}

/// Reads of the TSC made again while a publication is in progress before the vDSO is read
/// instead (the publication's stores take well under a microsecond unless the writer is
/// preempted among them).
#[cfg(target_arch = "x86_64")]
const RACE_TRIES: usize = 64;

/// How long the writer may sleep before its next [`recalibrate`], in ms: a first anchor is
/// published one baseline after calibration began (the writer wakes for it, rather than at its
/// first flush interval: a short process, or one whose writer started late, gets the TSC
/// within [`MIN_BASELINE_NS`]), else `usual`.
pub fn next_calibration_ms(allowed: bool, usual: u64) -> u64 {
    if allowed && USABLE.load(Ordering::Relaxed) == 1 && !ANCHOR.in_use() {
        usual.min(MIN_BASELINE_NS / 1_000_000 + 5)
    } else {
        usual
    }
}

/// Whether the TSC is in use right now.
pub fn tsc_in_use() -> bool {
    ANCHOR.in_use()
}

/// Stops using the TSC (a fork child keeps the parent's anchor until its writer recalibrates:
/// same machine, same counter; this is for tests and for a failed check).
fn drop_tsc() {
    ANCHOR.withdraw();
    ORIGIN_TSC.store(0, Ordering::Relaxed);
    ORIGIN_NS.store(0, Ordering::Relaxed);
}

/// The writer's calibration step (cheap; call it on every wake-up). `allowed`: the
/// configuration permits the TSC.
pub fn recalibrate(allowed: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        if !allowed {
            if ANCHOR.current().is_some() {
                drop_tsc();
            }
            return;
        }
        if USABLE.load(Ordering::Relaxed) == 2 {
            return;
        }
        let Some((ns, tsc, gap)) = paired_read() else {
            return;
        };
        let (ot, on) = (
            ORIGIN_TSC.load(Ordering::Relaxed),
            ORIGIN_NS.load(Ordering::Relaxed),
        );
        // The first anchor comes one short baseline after the origin (next_calibration_ms):
        // until the baseline is long, its ends must be tight pairs, or the tick length is off
        // by their error over the baseline (10 us at each end of 55 ms: 3.6e-4, 180 us by the
        // next anchor half a second later).
        if gap > TIGHT_GAP_NS && (ot == 0 || ns.saturating_sub(on) < LONG_BASELINE_NS) {
            return;
        }
        if ot == 0 || tsc <= ot || ns <= on {
            ORIGIN_TSC.store(tsc, Ordering::Relaxed);
            ORIGIN_NS.store(ns, Ordering::Relaxed);
            return;
        }
        let current = ANCHOR.current();
        if let Some(c) = current {
            // Check the published conversion against this pair before trusting it further.
            if c.predict(tsc).abs_diff(ns) > MAX_ERROR_NS {
                drop_tsc();
                ORIGIN_TSC.store(tsc, Ordering::Relaxed);
                ORIGIN_NS.store(ns, Ordering::Relaxed);
                return;
            }
            // Re-anchored at most every REANCHOR_NS: every publish takes the anchor's cache
            // line from every core that reads the clock, and a busy writer wakes often.
            if ns.saturating_sub(c.base_ns) < REANCHOR_NS {
                return;
            }
        }
        let (dn, dt) = (ns - on, tsc - ot);
        if dn < MIN_BASELINE_NS {
            return;
        }
        // Decided at `init` ([`check_tsc`]); a process that never ran the check keeps the
        // vDSO clock.
        if USABLE.load(Ordering::Relaxed) != 1 {
            return;
        }
        let mult = ((dn as u128) << 32) / dt as u128;
        // Between 100 MHz and 20 GHz, or something is wrong.
        if !((1u128 << 32) / 20..=10u128 << 32).contains(&mult) {
            return;
        }
        // Never behind what the published conversion says for this instant: a thread that
        // read the clock just before the switch must not read an earlier time just after it
        // (an event nested in another would end before its parent began). The difference is
        // the old conversion's error at this instant (below MAX_ERROR_NS, checked above); the
        // tick length comes from the whole baseline, so these steps do not add up.
        let base_ns = match current {
            Some(c) => ns.max(c.predict(tsc)),
            None => ns,
        };
        let fresh = Conversion {
            base_tsc: tsc,
            base_ns,
            mult: mult as u64,
        };
        ANCHOR.publish_with(|| {
            // A flatter line than the old one falls behind it after `tsc`, and readers used
            // the old one until the sequence went odd, which may be long after the pair was
            // read (the writer preempted in between): raised so that it is not behind the old
            // one now, so not at any instant since `tsc` either (the gap grows with time), and
            // no reader reads an earlier time after the switch.
            let c = match current {
                Some(old) => not_behind(fresh, old, rdtsc()),
                None => fresh,
            };
            // Kept before it is published: a tick tagged under it must find it (ticks_ns).
            history::push(c);
            c
        });
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = allowed;
}

/// `fresh` (based at or after `old`'s value at its base tick), raised where needed so that
/// at no tick from its base to `now` does it give an earlier time than `old`: the gap
/// between the two lines is largest at `now` when `fresh` is the flatter one.
fn not_behind(fresh: Conversion, old: Conversion, now: u64) -> Conversion {
    if fresh.mult >= old.mult || now < fresh.base_tsc {
        return fresh;
    }
    let behind = old.predict(now).saturating_sub(fresh.predict(now));
    Conversion {
        base_ns: fresh.base_ns + behind,
        ..fresh
    }
}

/// A (realtime ns, tsc) pair read close together: the realtime midpoint around one `rdtsc`,
/// from the tightest of a few tries.
#[cfg(target_arch = "x86_64")]
fn paired_read() -> Option<(u64, u64, u64)> {
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
    (gap < 20_000).then_some((ns, t, gap))
}

/// Decides once per process whether the TSC may be used (`allowed`: the configuration
/// permits it); called by `init` on the thread that starts the tracer, never by the writer: it
/// opens a file for a moment, and a descriptor held by another thread while the program fills
/// its table would cost the program one more descriptor than the documented one (FORMAT.md
/// "Files"). A fork child inherits the answer (same machine, same counter).
pub fn check_tsc(allowed: bool) {
    if !allowed || USABLE.load(Ordering::Relaxed) != 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let ok = tsc_trusted();
        USABLE.store(if ok { 1 } else { 2 }, Ordering::Relaxed);
    }
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
    if cpuid_invariant_tsc() {
        return true;
    }
    // Where CPUID does not say so (an emulator such as valgrind hides the bit), the kernel's
    // view of the CPU. The first CPU's block is enough (all CPUs report the same flags); on a
    // large machine the whole file is megabytes.
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

/// CPUID's invariant-TSC bit (leaf 0x8000_0007, EDX bit 8: the counter runs at a constant
/// rate in every P-, C- and T-state; the kernel's `constant_tsc` + `nonstop_tsc`).
#[cfg(target_arch = "x86_64")]
fn cpuid_invariant_tsc() -> bool {
    use core::arch::x86_64::__cpuid;
    #[allow(unused_unsafe, unsafe_code)]
    // SAFETY: CPUID exists on every x86_64 CPU; the leaf is checked against the maximum first.
    let max = unsafe { __cpuid(0x8000_0000) }.eax;
    if max < 0x8000_0007 {
        return false;
    }
    #[allow(unused_unsafe, unsafe_code)]
    // SAFETY: as above, the leaf is supported.
    let edx = unsafe { __cpuid(0x8000_0007) }.edx;
    edx & (1 << 8) != 0
}

/// Epoch time in `unit` (true nanosecond resolution for NS).
#[inline]
pub fn now_in(unit: TimeMetric) -> u64 {
    in_unit(unit, now_ns())
}

/// The (timestamp, duration) in `unit` of an event from [`ticks`] `t0` to `t1`: what
/// [`now_in`] at both ends would have given (the duration is the difference of the two
/// truncated times, never negative).
#[inline]
pub fn span(unit: TimeMetric, t0: u64, t1: u64) -> (u64, u64) {
    span_with(unit, t0, t1, &mut Newest::default())
}

/// [`span`], with `last` keeping the newest conversion between calls (a reader converting
/// many spans, the writer: no look-up while no conversion was published since).
#[inline(always)]
pub fn span_with(unit: TimeMetric, t0: u64, t1: u64, last: &mut Newest) -> (u64, u64) {
    let (n0, n1) = if t0 & t1 & TSC_TAG != 0 {
        history::ns_pair(t0 & !TSC_TAG, t1 & !TSC_TAG, last)
    } else {
        (ticks_ns(t0), ticks_ns(t1))
    };
    // The default unit inline (one compare, not a jump table on the unit), the others out
    // of line.
    let (a, b) = match unit {
        TimeMetric::Us => (n0 / 1_000, n1 / 1_000),
        _ => in_unit_pair(unit, n0, n1),
    };
    (a, b.saturating_sub(a))
}

/// [`in_unit`] of `n0` and `n1`.
#[inline(never)]
fn in_unit_pair(unit: TimeMetric, n0: u64, n1: u64) -> (u64, u64) {
    (in_unit(unit, n0), in_unit(unit, n1))
}

/// [`ticks`] value `t` in `unit`: what [`now_in`] gave at that instant.
pub fn now_at(unit: TimeMetric, t: u64) -> u64 {
    in_unit(unit, ticks_ns(t))
}

#[inline(always)]
fn in_unit(unit: TimeMetric, ns: u64) -> u64 {
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

    /// A flatter conversion published late is raised to the old one's value at the
    /// publication, so a reader never reads an earlier time across the switch; a steeper one,
    /// or one published at once, is left as computed.
    #[test]
    fn a_late_flatter_anchor_is_raised_to_the_old_line() {
        let old = Conversion {
            base_tsc: 1_000,
            base_ns: 5_000_000,
            mult: 1 << 32, // 1 ns a tick
        };
        let tsc = 3_000_000;
        let flatter = Conversion {
            base_tsc: tsc,
            base_ns: old.predict(tsc),
            mult: (1 << 32) - (1 << 12), // 1 - 2^-20 ns a tick
        };
        let now = tsc + 100_000_000; // published 0.1 s (of ticks) after the pair was read
        assert!(
            flatter.predict(now) < old.predict(now),
            "the case this is about"
        );
        let c = not_behind(flatter, old, now);
        for t in [tsc, tsc + 1, (tsc + now) / 2, now - 1, now] {
            assert!(c.predict(t) >= old.predict(t), "behind at tick {t}");
        }
        assert_eq!(
            c.predict(now),
            old.predict(now),
            "raised by just what was missing"
        );
        let steeper = Conversion {
            mult: (1 << 32) + (1 << 12),
            ..flatter
        };
        assert_eq!(not_behind(steeper, old, now), steeper);
        assert_eq!(not_behind(flatter, old, tsc), flatter);
    }

    /// The sequence's states: none yet and withdrawn (readers go to the vDSO at once), a
    /// publication in progress (readers of `now_ns` and `ticks` wait for it), published.
    #[test]
    fn anchor_tells_a_publication_from_a_withdrawal() {
        let a = Anchor::new();
        assert!(a.withdrawn() && !a.in_use() && a.read(|| 7).is_none());
        let c = Conversion {
            base_tsc: 10,
            base_ns: 20,
            mult: 1 << 32,
        };
        a.publish_with(|| {
            assert!(!a.in_use() && !a.withdrawn(), "publishing: neither");
            c
        });
        assert!(a.in_use() && !a.withdrawn() && a.current() == Some(c));
        a.withdraw();
        assert!(a.withdrawn() && !a.in_use());
        a.publish(c);
        a.publish(c);
        assert!(a.in_use() && a.read(|| 7) == Some((c, 7)));
    }

    #[test]
    fn tracks_realtime_once_calibrated() {
        // Not calibrated: exactly the vDSO clock.
        let (a, b, c) = (realtime_ns(), now_ns(), realtime_ns());
        assert!(a <= b && b <= c);
        check_tsc(true);
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
        // Raw ticks convert to what now_ns says at the same instant, in order with it.
        for _ in 0..1000 {
            let (a, t, b) = (now_ns(), ticks(), now_ns());
            assert!(t & TSC_TAG != 0, "a published conversion gives raw ticks");
            let ns = ticks_ns(t);
            assert!(
                a <= ns && ns <= b,
                "tick at {ns} outside the now_ns pair [{a}, {b}]"
            );
        }
        let (t0, t1) = (ticks(), ticks());
        let (ts, dur) = span(TimeMetric::Ns, t0, t1);
        assert!(ts == ticks_ns(t0) && dur == ticks_ns(t1) - ts);
        // A tick before every kept conversion is extrapolated back, not wrapped.
        let early = ticks_ns((t0 & !TSC_TAG).saturating_sub(1 << 40) | TSC_TAG);
        assert!(
            early < ts && ts - early < 2_000_000_000_000,
            "{early} vs {ts}"
        );
        // A kept conversion gives what a fresh look-up gives, in every unit, before and
        // after a new conversion is published (old ticks, ticks under the new one, pairs
        // across it, reversed pairs).
        let mut last = Newest::default();
        let units = [
            TimeMetric::Ns,
            TimeMetric::Us,
            TimeMetric::Ms,
            TimeMetric::Sec,
        ];
        let check = |last: &mut Newest, t0: u64, t1: u64| {
            for u in units {
                assert_eq!(span_with(u, t0, t1, last), span(u, t0, t1), "{t0} {t1}");
            }
        };
        let old: Vec<u64> = (0..100).map(|_| ticks()).collect();
        for w in old.windows(2) {
            check(&mut last, w[0], w[1]);
            check(&mut last, w[1], w[0]);
        }
        std::thread::sleep(std::time::Duration::from_millis(
            REANCHOR_NS / 1_000_000 + 50,
        ));
        recalibrate(true);
        for i in 0..100 {
            let t = ticks();
            check(&mut last, old[i], t);
            check(&mut last, t, ticks());
            check(&mut last, old[i], old[(i + 1) % 100]);
        }
        // A tick under the newest conversion is converted from its slot alone; the result is
        // the full look-up's, and an older tick takes the full look-up.
        let fresh = ticks() & !TSC_TAG;
        assert_eq!(history::ns_newest(fresh), Some(history::ns_at(fresh)));
        for &t in &old {
            let raw = t & !TSC_TAG;
            assert_eq!(ticks_ns(t), history::ns_at(raw));
            if let Some(ns) = history::ns_newest(raw) {
                assert_eq!(ns, history::ns_at(raw));
            }
        }
        // The end of an event begun at a TSC tick is a TSC tick after it.
        let end = ticks_after(t0);
        assert!(end & TSC_TAG != 0 && end > t0 && ticks_ns(end) >= ts);
        recalibrate(false);
        assert!(!tsc_in_use());
        // Withdrawn: ticks are epoch nanoseconds again, and old raw ticks still convert.
        let (a, t, b) = (realtime_ns(), ticks(), realtime_ns());
        assert!(t & TSC_TAG == 0 && a <= t && t <= b);
        assert_eq!(ticks_ns(t0), ts);
        // An event begun on the TSC ends on it, converted by the kept conversions; one
        // begun on the vDSO clock ends on it.
        let end = ticks_after(t0);
        assert!(end & TSC_TAG != 0 && ticks_ns(end) >= ticks_ns(t0));
        let end = ticks_after(t);
        assert!(end & TSC_TAG == 0 && end >= t);
    }

    #[test]
    fn clock_units() {
        let us = now_in(TimeMetric::Us);
        let ns = now_in(TimeMetric::Ns);
        assert!(ns / 1000 >= us && ns / 1000 - us < 1_000_000);
        assert!(now_in(TimeMetric::Sec) > 1_700_000_000);
    }
}
