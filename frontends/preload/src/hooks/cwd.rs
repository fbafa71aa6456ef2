//! The current directory, cached: resolving a relative path (to decide whether it is under a
//! data dir) must not cost a `getcwd` system call per `open`.
//!
//! The cache is process-wide (the cwd is) and lock-free. It is valid for one generation of
//! [`GEN`], which moves on every change of the cwd this library can see:
//! - our `chdir`/`fchdir` hooks bump it before and after the real call ([`changing`]), so a
//!   `getcwd` that raced with the change is never published;
//! - while a libc walker that changes directory internally runs (`nftw` with `FTW_CHDIR`,
//!   `fts` without `FTS_NOCHDIR`: their `fchdir` calls stay inside libc, unhooked), [`WALKS`]
//!   is non-zero and every lookup calls `getcwd`.
//!
//! Not seen: a cwd changed by a raw `syscall(SYS_chdir)`, by an object the in-process binder
//! could not bind, or per thread after `unshare(CLONE_FS)`. Relative paths are then resolved
//! against the directory of the last change we saw (the events' paths, never the program's
//! calls, are affected). Tested by `relative_opens_follow_every_cwd_change` (tests/preload.rs).
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use libc::c_char;

use crate::PATH_MAX;

/// Even: the cwd is stable; odd: a `chdir` is in progress.
static GEN: AtomicU64 = AtomicU64::new(0);
/// `GEN` value the cached text belongs to (`u64::MAX`: none).
static CACHED_GEN: AtomicU64 = AtomicU64::new(u64::MAX);
/// Seqlock over `TEXT`/`LEN`: odd while a thread writes them.
static SEQ: AtomicU64 = AtomicU64::new(0);
const WORDS: usize = PATH_MAX / 8;
/// The cwd's bytes, eight per word (atomics: readers may race with a writer; the seqlock
/// tells them to retry).
static TEXT: [AtomicU64; WORDS] = [const { AtomicU64::new(0) }; WORDS];
static LEN: AtomicUsize = AtomicUsize::new(0);
/// Walkers in progress that change directory inside libc.
pub static WALKS: AtomicUsize = AtomicUsize::new(0);

/// Runs a call that may change the cwd (`chdir`, `fchdir`): the cache is invalid from
/// before it starts until after it returned.
#[inline]
pub fn changing<R>(call: impl FnOnce() -> R) -> R {
    GEN.fetch_add(1, Ordering::AcqRel);
    let r = call();
    GEN.fetch_add(1, Ordering::AcqRel);
    r
}

/// Runs a walker that changes directory inside libc (`active`: it will).
#[inline]
pub fn walking<R>(active: bool, call: impl FnOnce() -> R) -> R {
    if !active {
        return call();
    }
    WALKS.fetch_add(1, Ordering::AcqRel);
    let r = call();
    WALKS.fetch_sub(1, Ordering::AcqRel);
    // The walker may have left the cwd elsewhere (a callback's early stop).
    GEN.fetch_add(2, Ordering::AcqRel);
    r
}

/// `fts` streams opened without `FTS_NOCHDIR` and not closed yet (0: free slot).
static OPEN_WALKS: [AtomicUsize; 64] = [const { AtomicUsize::new(0) }; 64];

/// An `fts_open` returned `fts` (null: failed); `chdirs`: it may change directory.
pub fn walk_opened(fts: usize, chdirs: bool) {
    if fts == 0 || !chdirs {
        return;
    }
    WALKS.fetch_add(1, Ordering::AcqRel);
    // Remembered so that its close ends it; with every slot taken the cache stays off.
    for s in &OPEN_WALKS {
        if s.compare_exchange(0, fts, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
    }
}

/// `fts_close(fts)` returned.
pub fn walk_closed(fts: usize) {
    if fts == 0 {
        return;
    }
    for s in &OPEN_WALKS {
        if s.compare_exchange(fts, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            WALKS.fetch_sub(1, Ordering::AcqRel);
            GEN.fetch_add(2, Ordering::AcqRel);
            return;
        }
    }
}

/// The current directory into `buf` (absolute, no NUL); `None` when it cannot be known.
pub fn cwd_into(buf: &mut [u8; PATH_MAX]) -> Option<usize> {
    let g = GEN.load(Ordering::Acquire);
    let stable = g & 1 == 0 && WALKS.load(Ordering::Acquire) == 0;
    if stable && CACHED_GEN.load(Ordering::Acquire) == g {
        if let Some(n) = read_cached(buf) {
            // Still the generation read above: the text is the cwd of that generation.
            if CACHED_GEN.load(Ordering::Acquire) == g && GEN.load(Ordering::Acquire) == g {
                return Some(n);
            }
        }
    }
    // SAFETY: buf is writable for its length; getcwd NUL-terminates on success.
    let r = unsafe { libc::getcwd(buf.as_mut_ptr() as *mut c_char, buf.len()) };
    if r.is_null() {
        return None;
    }
    let n = buf.iter().position(|&b| b == 0)?;
    if buf[0] != b'/' {
        return None;
    }
    // Published only when nothing moved the cwd since `g` was read (a chdir that started
    // after getcwd returned bumps GEN after this check and so invalidates it).
    if stable && GEN.load(Ordering::Acquire) == g && WALKS.load(Ordering::Acquire) == 0 {
        publish(&buf[..n], g);
    }
    Some(n)
}

/// Which cached text [`cwd_into`] would copy now: its generation and the seqlock's value
/// (a publication moves `SEQ`, and both only grow, so equal stamps mean the same text).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    gen: u64,
    seq: u64,
}

/// The [`Stamp`] of the text [`cwd_into`] would copy now (`None`: it would ask the kernel).
/// A `cwd_into` between `stamp_now()` and a [`still`] of its answer copied that very text:
/// `GEN` and `SEQ` only grow, `CACHED_GEN` changes only with `SEQ`, and a walker that left
/// `WALKS` at 0 again moved `GEN`.
#[inline]
pub fn stamp_now() -> Option<Stamp> {
    let g = GEN.load(Ordering::Acquire);
    if g & 1 != 0 || WALKS.load(Ordering::Acquire) != 0 || CACHED_GEN.load(Ordering::Acquire) != g {
        return None;
    }
    let seq = SEQ.load(Ordering::Acquire);
    (seq & 1 == 0).then_some(Stamp { gen: g, seq })
}

/// Whether [`cwd_into`] would still copy the text `stamp` names. Loads only.
#[inline]
pub fn still(stamp: Stamp) -> bool {
    stamp_now() == Some(stamp)
}

fn read_cached(buf: &mut [u8; PATH_MAX]) -> Option<usize> {
    let s0 = SEQ.load(Ordering::Acquire);
    if s0 & 1 != 0 {
        return None;
    }
    let n = LEN.load(Ordering::Relaxed);
    if n == 0 || n >= PATH_MAX {
        return None;
    }
    // Whole words (the last one's bytes past `n` are zeros, and `buf` is `WORDS` words
    // long): no per-word length, no `memcpy` call.
    for (w, out) in TEXT[..n.div_ceil(8)].iter().zip(buf.chunks_exact_mut(8)) {
        out.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
    }
    std::sync::atomic::fence(Ordering::Acquire);
    (SEQ.load(Ordering::Relaxed) == s0).then_some(n)
}

fn publish(text: &[u8], g: u64) {
    let s0 = SEQ.load(Ordering::Relaxed);
    // One writer at a time; a thread that loses the race leaves it to the winner.
    if s0 & 1 != 0
        || SEQ
            .compare_exchange(s0, s0 + 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    std::sync::atomic::fence(Ordering::Release);
    for (i, chunk) in text.chunks(8).enumerate() {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        TEXT[i].store(u64::from_le_bytes(b), Ordering::Relaxed);
    }
    LEN.store(text.len(), Ordering::Relaxed);
    CACHED_GEN.store(g, Ordering::Release);
    SEQ.store(s0 + 2, Ordering::Release);
}
