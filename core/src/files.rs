//! Files named by static events, in bounded memory however many distinct files a process
//! opens.
//!
//! - [`FileRef`]: one file (path, hash, the writer's `FH` mark) in **type-stable** memory: a
//!   slot of a [`Pool`] (a `static` array, never freed) whose contents are replaced when the
//!   slot is reused for another path. A `(slot, generation)` pair, [`FileHandle`], names one
//!   use of a slot; the generation changes at every reuse.
//! - [`Pool`]: a fixed-capacity, set-associative set of slots keyed by path (`WAYS` slots per
//!   bucket). Looking a path up or claiming a slot for it takes no lock and allocates only
//!   for a path longer than [`INLINE`] bytes (kept in a heap buffer the slot owns; a shorter
//!   one is kept in the slot), when the slot's buffer does not fit it.
//! - [`PathTable`](crate::paths::PathTable) (in `paths`): the writer's bounded `path → hash`
//!   table (which `FH` records its file already has), with CLOCK eviction; an evicted path
//!   gets a new `FH` before its next event.
//!
//! # How a slot is used, and why reuse is sound
//!
//! A slot's `state` word holds `generation (31 bits) | CLAIMED | pins (32 bits)`. A **pin**
//! keeps the slot's generation (and so its path and hash) from changing:
//!
//! 1. The fd and `FILE*` tables of the preload library hold one pin per entry ([`Pinned`]
//!    turned into a [`FileHandle`] with [`Pinned::into_raw`], back with
//!    [`Pinned::from_raw`]). Hooks read an entry's handle without pinning (two loads) and
//!    pass it to [`crate::complete_static`]; the ring record carries the slot address and
//!    the generation, nothing else (no atomic read-modify-write on the hot path).
//! 2. The writer pins the slot while it encodes such a record ([`FileHandle::pin`]: one
//!    `fetch_add`, then a generation check). A record whose generation no longer matches is
//!    *stale* and is written without its file: never with another file's hash.
//! 3. A slot is **reused** only by [`FileRef::try_claim`]: a compare-and-swap from
//!    "no pins, not claimed, generation g" to "claimed", which fails if anyone holds a pin.
//!    While claimed, pinning fails; the claimer rewrites path and hash, then publishes
//!    generation g+1 (release). Readers only read path and hash while pinned, and a pin
//!    (acquire) that succeeds saw the publication, so no read races a write and no freed
//!    buffer is read (the old path buffer is replaced only by the claimer).
//!
//! Pins alone keep memory safe. They do not keep *names* right: a record written while an fd
//! was open may still sit in a ring after the fd was closed. So a slot also records, when a
//! pin that may have published records is released ([`Pinned`]'s drop), the number of writer
//! passes started so far (`retired`), read with an acquire-release RMW on the pass counter.
//! A writer pass ([`begin_pass`] … [`end_pass`]) notes the ring list and each ring's head
//! *after* its own RMW on that counter, and ends once every ring was consumed up to them
//! (the tracer checks after every drain, by the writer or by a producer draining its own
//! full ring, so passes keep ending while the writer thread waits on a slow disk). If a
//! release read
//! pass count `σ`, the pass `σ + 1` synchronizes with it, so it saw every record published
//! before the release (every record naming a slot is published while a pin is held: the
//! fd-table entry's, or the hook's own for `close`/`fclose`). A claim requires
//! `retired ≤ passes done`: every record written under an earlier pin was encoded by then.
//! Hence in a program that does not close an fd while another thread does I/O on it, every
//! event names its own file; in one that does, the racing event may lose its file name,
//! never get a wrong one (generation check).
//!
//! A generation wraps after 2^31 reuses of one slot; a stale record could only be misread
//! if it sat unencoded while its slot was reused exactly 2^31 times, each reuse needing a
//! full writer pass: not reachable. Pins count to 2^31 (fd entries plus in-flight writer
//! pins); beyond that pinning fails (the event loses its file name). A thread that dies
//! while it holds a claim or a transient pin (a fork child inheriting a writer mid-record)
//! leaves that one slot unusable: capacity lost, never safety.
//!
//! Fork: the child inherits the pool with its fd table (the pins match its fds); records
//! of the parent left in rings are never encoded in the child, and the pass counters are
//! process-wide, so nothing leaks and nothing is misnamed.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use crate::hash::{hash16, Hash16};

const PINS: u64 = 0xffff_ffff;
/// Pins above this are refused (no carry into `CLAIMED`).
const PINS_MAX: u64 = 1 << 31;
const CLAIMED: u64 = 1 << 32;
const GEN_SHIFT: u32 = 33;

fn gen_of(state: u64) -> u32 {
    (state >> GEN_SHIFT) as u32
}

/// Writer passes started (see the module docs).
static PASS: crate::sync::Padded<AtomicU64> = crate::sync::Padded(AtomicU64::new(0));
/// Highest writer pass that finished draining every ring.
static DONE: crate::sync::Padded<AtomicU64> = crate::sync::Padded(AtomicU64::new(0));

/// Starts a writer pass: call before reading the ring list and the rings' heads; returns the
/// pass number for [`end_pass`].
pub fn begin_pass() -> u64 {
    PASS.fetch_add(1, Ordering::AcqRel) + 1
}

/// Ends pass `p`: every record published before it began has been encoded.
pub fn end_pass(p: u64) {
    DONE.fetch_max(p, Ordering::Release);
}

/// One file named by static events: a pool slot (or a standalone, never reused file from
/// [`FileRef::new`]). Its path and hash are only readable through a [`Pinned`].
///
/// Two cache lines, all zero when free (so a pool of them is `.bss`, not `.data`): a path of
/// up to [`INLINE`] bytes is kept in the slot itself (no allocation when a slot is first
/// used, or reused); a longer one in a heap buffer the slot owns while its path is long.
#[repr(C, align(64))]
pub struct FileRef {
    /// `generation << 33 | CLAIMED | pins`.
    state: AtomicU64,
    /// 1 + writer passes started when a pin that may have published records was last
    /// released (0: never). The slot may be claimed once `DONE >= retired`.
    retired: AtomicU64,
    /// The writer's mark: which [`PathTable`](crate::paths::PathTable) entry holds this path's `FH` (0: none).
    pub(crate) fh: AtomicU64,
    hash: UnsafeCell<Hash16>,
    /// The heap buffer of a path longer than [`INLINE`] (null: none), of `cap` bytes.
    heap: UnsafeCell<*mut u8>,
    /// The path's length: its bytes are `inline[..len]` when `len <= INLINE`, else
    /// `heap[..len]`.
    len: UnsafeCell<u32>,
    cap: UnsafeCell<u32>,
    /// Whether `hash` holds the path's hash: [`HASH_NONE`], [`HASH_WRITING`] (one reader
    /// computed it and is storing it) or [`HASH_READY`]. The hash is computed by the first
    /// reader (an encoder: the writer, as a rule), not by the thread that opens the file.
    hash_state: AtomicU8,
    inline: UnsafeCell<[u8; INLINE]>,
}

/// The longest path a slot keeps without a heap buffer: the rest of its two cache lines.
pub const INLINE: usize = 128 - 57;

const HASH_NONE: u8 = 0;
const HASH_WRITING: u8 = 1;
const HASH_READY: u8 = 2;

// SAFETY: `hash` and the path's fields (`heap`, `len`, `cap`, `inline`) are written only by
// the holder of a claim (CLAIMED set, no pins, see `try_claim`) or by `new`/`drop` (owned),
// and read only through a `Pinned` (a pin, taken with acquire after the claim's release
// publication); everything else is atomic. The heap buffer is owned by the slot.
unsafe impl Sync for FileRef {}
// SAFETY: as above (the heap pointer is the slot's own buffer, freed only by its owner).
unsafe impl Send for FileRef {}

impl Drop for FileRef {
    fn drop(&mut self) {
        let (heap, cap) = (*self.heap.get_mut(), *self.cap.get_mut());
        if !heap.is_null() {
            // SAFETY: allocated by `set_path` with this layout, owned by this slot.
            unsafe { std::alloc::dealloc(heap, heap_layout(cap as usize)) };
        }
    }
}

fn heap_layout(cap: usize) -> std::alloc::Layout {
    // `cap` is a path's length (at most u32::MAX, checked when allocated): never too large.
    std::alloc::Layout::from_size_align(cap, 1).unwrap_or(std::alloc::Layout::new::<u8>())
}

impl std::fmt::Debug for FileRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileRef")
            .field("state", &self.state.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl FileRef {
    /// A free pool slot.
    pub const fn empty() -> FileRef {
        FileRef {
            state: AtomicU64::new(0),
            retired: AtomicU64::new(0),
            fh: AtomicU64::new(0),
            hash: UnsafeCell::new([0; 16]),
            heap: UnsafeCell::new(std::ptr::null_mut()),
            len: UnsafeCell::new(0),
            cap: UnsafeCell::new(0),
            hash_state: AtomicU8::new(HASH_NONE),
            inline: UnsafeCell::new([0; INLINE]),
        }
    }

    /// A standalone file: one pin that is never released, so it is never reused (for callers
    /// that leak one per file, such as tests and the core's own examples).
    pub fn new(path: &[u8]) -> FileRef {
        let f = FileRef {
            state: AtomicU64::new(1),
            retired: AtomicU64::new(0),
            fh: AtomicU64::new(0),
            hash: UnsafeCell::new(hash16(path)),
            heap: UnsafeCell::new(std::ptr::null_mut()),
            len: UnsafeCell::new(0),
            cap: UnsafeCell::new(0),
            hash_state: AtomicU8::new(HASH_READY),
            inline: UnsafeCell::new([0; INLINE]),
        };
        // SAFETY: owned here, not shared yet.
        unsafe { f.set_path(path) };
        f
    }

    /// Stores `path` as this slot's path: in the slot when it fits ([`INLINE`]; a heap buffer
    /// kept from a longer path is freed), else in the slot's heap buffer, kept when it is
    /// large enough and at most twice the path's length (so a slot never holds more than
    /// twice its path), else replaced.
    ///
    /// # Safety
    /// The caller has exclusive access to the path's fields: it owns the slot, or holds its
    /// claim (no pins, see [`FileRef::try_claim`]).
    #[inline(always)]
    unsafe fn set_path(&self, path: &[u8]) {
        let n = path.len();
        // SAFETY: exclusive per the contract; the heap buffer, when there is one, holds
        // `cap` bytes and is the slot's own.
        unsafe {
            if n <= INLINE {
                if !(*self.heap.get()).is_null() {
                    self.free_heap();
                }
                crate::filter::copy_words(&mut (&mut *self.inline.get())[..n], path);
            } else {
                let cap = *self.cap.get() as usize;
                if (*self.heap.get()).is_null() || cap < n || cap > 2 * n {
                    self.grow_heap(n);
                }
                std::ptr::copy_nonoverlapping(path.as_ptr(), *self.heap.get(), n);
            }
            *self.len.get() = n as u32;
        }
    }

    /// Frees the slot's heap buffer. Safety: as [`FileRef::set_path`].
    #[cold]
    unsafe fn free_heap(&self) {
        // SAFETY: exclusive per the contract; the buffer was allocated by `grow_heap` with
        // this layout.
        unsafe {
            let heap = &mut *self.heap.get();
            std::alloc::dealloc(*heap, heap_layout(*self.cap.get() as usize));
            *heap = std::ptr::null_mut();
            *self.cap.get() = 0;
        }
    }

    /// Replaces the slot's heap buffer by one for a path of `n > INLINE` bytes (allocation
    /// failure: [`std::alloc::handle_alloc_error`], as a `Vec` would). Safety: as
    /// [`FileRef::set_path`].
    #[cold]
    #[inline(never)]
    unsafe fn grow_heap(&self, n: usize) {
        // SAFETY: exclusive per the contract.
        unsafe {
            if !(*self.heap.get()).is_null() {
                self.free_heap();
            }
            // Rounded up, so that a slot reused for a slightly longer path keeps its buffer.
            let cap = n.next_multiple_of(32).min(u32::MAX as usize);
            assert!(n <= cap, "a path of {n} bytes");
            let layout = heap_layout(cap);
            let p = std::alloc::alloc(layout);
            if p.is_null() {
                std::alloc::handle_alloc_error(layout);
            }
            *self.heap.get() = p;
            *self.cap.get() = cap as u32;
        }
    }

    /// The path's bytes. Safety: nobody writes them meanwhile (a pin, or ownership).
    #[inline(always)]
    unsafe fn path_bytes(&self) -> &[u8] {
        // SAFETY: per the contract; `len` bytes of the inline buffer or of the heap buffer
        // (`cap >= len`) hold the path.
        unsafe {
            let n = *self.len.get() as usize;
            if n <= INLINE {
                (&*self.inline.get()).get_unchecked(..n)
            } else {
                std::slice::from_raw_parts(*self.heap.get(), n)
            }
        }
    }

    /// Its current use (meaningful while something holds a pin, e.g. a standalone file).
    pub fn handle(&'static self) -> FileHandle {
        FileHandle {
            file: self,
            gen: gen_of(self.state.load(Ordering::Acquire)),
        }
    }

    /// Pins the slot in whatever generation it has (unless it is being claimed).
    fn pin_current(&'static self) -> Option<Pinned> {
        let old = self.state.fetch_add(1, Ordering::Acquire);
        if old & CLAIMED != 0 || old & PINS >= PINS_MAX {
            self.state.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Pinned {
            file: self,
            gen: gen_of(old),
            stamp: true,
        })
    }

    /// Claims a slot nobody pins, whose records were all encoded (`retired <= done`).
    #[inline(always)]
    fn try_claim(&'static self, done: u64) -> Option<Claim> {
        let s = self.state.load(Ordering::Relaxed);
        if s & (PINS | CLAIMED) != 0 || self.retired.load(Ordering::Relaxed) > done {
            return None;
        }
        self.state
            .compare_exchange(s, s | CLAIMED, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        // The CAS read the last release's `fetch_sub`, so this sees its `retired` stamp.
        if self.retired.load(Ordering::Relaxed) > done {
            self.state.fetch_and(!CLAIMED, Ordering::Release);
            return None;
        }
        Some(Claim { file: self })
    }
}

/// Exclusive access to a claimed slot (see [`FileRef::try_claim`]).
struct Claim {
    file: &'static FileRef,
}

impl Claim {
    /// Stores `path`, publishes the next generation and returns the caller's pin.
    #[inline(always)]
    fn publish(self, path: &[u8]) -> Pinned {
        let f = self.file;
        // SAFETY: CLAIMED is set and no pin was held when it was set; pinning fails while it
        // is set, so nothing reads or writes these fields but this thread.
        unsafe { f.set_path(path) };
        // The hash is its first reader's work ([`Pinned::hash`]): md5 is ~800 instructions,
        // which the opening thread (the program's) no longer pays.
        f.hash_state.store(HASH_NONE, Ordering::Relaxed);
        f.fh.store(0, Ordering::Relaxed);
        // Adding CLAIMED to a word that has it clears it and carries into the generation;
        // + 1 is the caller's pin. Release: pins that see the new generation see the path.
        let old = f.state.fetch_add(CLAIMED + 1, Ordering::Release);
        Pinned {
            file: f,
            gen: gen_of(old.wrapping_add(CLAIMED)),
            stamp: true,
        }
    }
}

/// A slot and the generation it had when this handle was made: what ring records and the
/// preload's fd tables carry. Holds no pin by itself.
#[derive(Clone, Copy, Debug)]
pub struct FileHandle {
    file: &'static FileRef,
    gen: u32,
}

impl FileHandle {
    /// Pins the slot if it still holds this generation.
    pub fn pin(self) -> Option<Pinned> {
        let mut p = self.pin_transient()?;
        p.stamp = true;
        Some(p)
    }

    /// A pin for reading only (its release does not stamp `retired`): the writer's.
    pub(crate) fn pin_transient(self) -> Option<Pinned> {
        let f = self.file;
        let old = f.state.fetch_add(1, Ordering::Acquire);
        if old & CLAIMED != 0 || gen_of(old) != self.gen || old & PINS >= PINS_MAX {
            f.state.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Pinned {
            file: f,
            gen: self.gen,
            stamp: false,
        })
    }

    pub fn file(self) -> &'static FileRef {
        self.file
    }

    pub fn generation(self) -> u32 {
        self.gen
    }

    /// The handle a ring record stored (`Pending::write`).
    ///
    /// # Safety
    /// `addr` must be the address of a `FileRef` that is never freed (a pool slot or a
    /// leaked standalone file).
    pub(crate) unsafe fn from_parts(addr: usize, gen: u32) -> FileHandle {
        FileHandle {
            // SAFETY: per the contract.
            file: unsafe { &*(addr as *const FileRef) },
            gen,
        }
    }
}

/// One pin on a slot: its path and hash cannot change until it is dropped.
pub struct Pinned {
    file: &'static FileRef,
    gen: u32,
    /// Released by a holder that may have published records naming the slot.
    stamp: bool,
}

impl std::fmt::Debug for Pinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pinned")
            .field("path", &String::from_utf8_lossy(self.path()))
            .field("gen", &self.gen)
            .finish()
    }
}

impl Pinned {
    pub fn path(&self) -> &[u8] {
        // SAFETY: pinned: only a claimer writes the path, and no claim succeeds while a pin
        // is held (see the module docs).
        unsafe { self.file.path_bytes() }
    }

    /// The path's hash (`hash16`), computed by the first caller for this generation of the
    /// slot and kept for the others.
    pub fn hash(&self) -> Hash16 {
        let f = self.file;
        if f.hash_state.load(Ordering::Acquire) == HASH_READY {
            // SAFETY: READY was stored (Release) after the hash was written, by the one
            // caller that moved NONE to WRITING; it is written again only after a new claim
            // (no pins then), and this caller holds a pin.
            return unsafe { *f.hash.get() };
        }
        let h = hash16(self.path());
        if f.hash_state
            .compare_exchange(
                HASH_NONE,
                HASH_WRITING,
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            // SAFETY: only the caller that moved NONE to WRITING writes, and nobody reads
            // until READY.
            unsafe { *f.hash.get() = h };
            f.hash_state.store(HASH_READY, Ordering::Release);
        }
        h
    }

    pub fn handle(&self) -> FileHandle {
        FileHandle {
            file: self.file,
            gen: self.gen,
        }
    }

    pub(crate) fn file(&self) -> &'static FileRef {
        self.file
    }

    /// Keeps the pin without this value (an fd-table entry holds it): give the handle back
    /// to [`Pinned::from_raw`] exactly once.
    pub fn into_raw(self) -> FileHandle {
        let h = self.handle();
        std::mem::forget(self);
        h
    }

    /// Takes back a pin kept by [`Pinned::into_raw`].
    ///
    /// # Safety
    /// `h` must come from `into_raw`, and be given back at most once.
    pub unsafe fn from_raw(h: FileHandle) -> Pinned {
        Pinned {
            file: h.file,
            gen: h.gen,
            stamp: true,
        }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if self.stamp {
            // Records published under this pin are in rings: the slot may be claimed once a
            // pass that began after this point has drained them (see the module docs).
            let started = PASS.fetch_add(0, Ordering::AcqRel);
            // `retired` only grows: a value already this high needs no read-modify-write (a
            // claimer that synchronises with the release below reads it or a later, higher
            // value: read-read coherence). Every `close` of a file whose slot was stamped in
            // this pass already (a loop reopening one file) skips the compare-and-swap loop.
            let r = &self.file.retired;
            if r.load(Ordering::Relaxed) <= started {
                r.fetch_max(started + 1, Ordering::Relaxed);
            }
        }
        self.file.state.fetch_sub(1, Ordering::Release);
    }
}

/// Slots per bucket: a path is looked up in one bucket of `WAYS` slots (keys in 4 cache
/// lines).
pub const WAYS: usize = 32;
/// Buckets after a full home bucket where a new path may take a slot.
const SPILL: usize = 64;

/// A fixed-capacity set of `N` file slots keyed by path (`N` a power of two, at least
/// [`WAYS`]). Memory: `N` × 9 B of keys and tags, and `N` × 128 B of slots, in `.bss` (all
/// zero when free); slots are laid out way-major and taken lowest way first, so the slot
/// pages touched grow with the most files *in use at once* in a bucket, not with the files
/// ever seen. Plus, for each slot whose path is longer than [`INLINE`] bytes, a heap buffer
/// of at most twice its length.
///
/// [`Pool::intern`] returns a pinned slot for a path: the slot of its bucket that holds it,
/// else the first slot of its bucket (or, when that is full, of the next [`SPILL`] buckets)
/// that nobody pins and whose events were all written, claimed for it (a cached path is
/// evicted); `None` when none is free (more files open, or named by events not yet written,
/// than those slots).
///
/// `G` is `N / 8` (the words of tags; stable Rust cannot write it in the type).
pub struct Pool<const N: usize, const G: usize> {
    /// Bucket-major: `keys[b * WAYS + w]` filters slot `slots[w * buckets + b]`.
    keys: [AtomicU64; N],
    /// One byte per key, bucket-major as `keys` (eight to a word): [`tag_of`] its key, or 0.
    /// A lookup compares a bucket's 32 tags in four words, and loads a key only where its tag
    /// matched: a new path's miss was 32 key loads and compares.
    tags: [AtomicU64; G],
    slots: [FileRef; N],
    full: AtomicU64,
}

/// A key's tag: seven of its bits (not those that pick the bucket) and the high bit, so that
/// no key's tag is 0 (an empty or spilled way).
#[inline(always)]
fn tag_of(key: u64) -> u64 {
    (key >> 1) & 0x7f | 0x80
}

/// A path's key: eight bytes a round (a byte-at-a-time FNV-1a was a tenth of a new file's
/// first `open` on the calling thread), the last word read where the path ends (overlapping
/// the one before), the length mixed in; then folded so that its high bits, which pick the
/// bucket, depend on every byte.
#[inline(always)]
fn path_key(b: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
    let mut h = b.len() as u64;
    if b.len() >= 8 {
        let mut i = 0;
        while i + 8 < b.len() {
            h = (h.rotate_left(23) ^ word(i)).wrapping_mul(K);
            i += 8;
        }
        h = (h.rotate_left(23) ^ word(b.len() - 8)).wrapping_mul(K);
    } else {
        let mut t = 0u64;
        for (k, &x) in b.iter().enumerate() {
            t |= (x as u64) << (8 * k);
        }
        h = (h.rotate_left(23) ^ t).wrapping_mul(K);
    }
    h ^ (h >> 32) ^ (h >> 47)
}

impl<const N: usize, const G: usize> Pool<N, G> {
    const BUCKETS: usize = N / WAYS;

    // Only ever a `static` (megabytes).
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        assert!(N.is_power_of_two() && N >= WAYS && N < u32::MAX as usize && G * 8 == N);
        Pool {
            keys: [const { AtomicU64::new(0) }; N],
            tags: [const { AtomicU64::new(0) }; G],
            slots: [const { FileRef::empty() }; N],
            full: AtomicU64::new(0),
        }
    }

    fn slot(&self, bucket: usize, way: usize) -> &FileRef {
        &self.slots[way * Self::BUCKETS + bucket]
    }

    /// The slot of `path`, pinned (see the type's docs).
    pub fn intern(&'static self, path: &[u8]) -> Option<Pinned> {
        let key = path_key(path) | 1;
        // Multiply (Fibonacci hashing) so every bit of the key counts in the bucket.
        let home = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize & (Self::BUCKETS - 1);
        // Way 0 first, by its key: where a bucket's one file in use lives (the common case
        // of a program with fewer files open than buckets), found without the tags.
        if self.keys[home * WAYS].load(Ordering::Acquire) == key {
            if let Some(p) = self.slot(home, 0).pin_current() {
                if crate::filter::eq_bytes(p.path(), path) {
                    return Some(p);
                }
            }
        }
        let pattern = tag_of(key) * 0x0101_0101_0101_0101;
        for g in 0..WAYS / 8 {
            let tags = self.tags[home * (WAYS / 8) + g].load(Ordering::Acquire);
            // The high bit of each byte equal to the tag (exact: no false positives).
            let mut hits = crate::deflate::zero_byte_mask(tags ^ pattern);
            while hits != 0 {
                let w = g * 8 + (hits.trailing_zeros() / 8) as usize;
                hits &= hits - 1;
                if self.keys[home * WAYS + w].load(Ordering::Acquire) == key {
                    if let Some(p) = self.slot(home, w).pin_current() {
                        if crate::filter::eq_bytes(p.path(), path) {
                            return Some(p);
                        }
                    }
                }
            }
        }
        let done = DONE.load(Ordering::Acquire);
        for b in 0..SPILL.min(Self::BUCKETS) {
            let bucket = (home + b) & (Self::BUCKETS - 1);
            for w in 0..WAYS {
                let slot: &'static FileRef = &self.slots[w * Self::BUCKETS + bucket];
                if let Some(c) = slot.try_claim(done) {
                    // The key is only a filter: a lookup that reads it early fails its pin
                    // (or its path comparison) and looks on. A path spilled into another
                    // bucket is not found by lookups (its next open claims again).
                    let k = &self.keys[bucket * WAYS + w];
                    let (t, shift) = (&self.tags[(bucket * WAYS + w) / 8], 8 * (w % 8));
                    if t.load(Ordering::Relaxed) >> shift & 0xff != 0 {
                        t.fetch_and(!(0xff << shift), Ordering::Relaxed);
                    }
                    k.store(0, Ordering::Relaxed);
                    let p = c.publish(path);
                    if b == 0 {
                        k.store(key, Ordering::Release);
                        // Other ways' tags share the word: a read-modify-write, after the key.
                        t.fetch_or(tag_of(key) << shift, Ordering::Release);
                    }
                    return Some(p);
                }
            }
        }
        self.full.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// Times [`Pool::intern`] found its bucket full.
    pub fn full_count(&self) -> u64 {
        self.full.load(Ordering::Relaxed)
    }

    /// A handle as one word for a table entry (`0` is never returned): the slot's byte
    /// offset in the pool plus one slot's size in the low half (so that decoding is an add
    /// to the pool's address, not a multiply), the generation in the high half.
    pub fn to_bits(&self, h: FileHandle) -> u64 {
        const {
            assert!(
                (N + 1) * SLOT <= u32::MAX as usize,
                "pool offsets fit 32 bits"
            )
        };
        let base = self.slots.as_ptr() as usize;
        let off = (h.file as *const FileRef as usize).wrapping_sub(base);
        assert!(
            off < N * SLOT && off.is_multiple_of(SLOT),
            "a handle of another pool"
        );
        (off + SLOT) as u64 | (h.gen as u64) << 32
    }

    /// The handle of a word from [`Pool::to_bits`] (`None` for 0).
    pub fn from_bits(&'static self, bits: u64) -> Option<FileHandle> {
        let off = (bits as u32 as usize).checked_sub(SLOT)?;
        if !off.is_multiple_of(SLOT) {
            return None;
        }
        Some(FileHandle {
            file: self.slots.get(off / SLOT)?,
            gen: (bits >> 32) as u32,
        })
    }

    /// [`Pool::from_bits`] of a word known to be one: no checks (a preload hook decodes the
    /// fd table's word this way, after the real call: an add and a shift).
    ///
    /// # Safety
    /// `bits` was returned by [`Pool::to_bits`] of this pool.
    #[inline(always)]
    pub unsafe fn from_bits_unchecked(&'static self, bits: u64) -> FileHandle {
        let off = (bits as u32 as usize).wrapping_sub(SLOT);
        FileHandle {
            // SAFETY: `to_bits` stored the byte offset of a slot of this pool, plus SLOT (the
            // caller's contract).
            file: unsafe { &*self.slots.as_ptr().byte_add(off) },
            gen: (bits >> 32) as u32,
        }
    }
}

/// Bytes of a pool slot ([`Pool::to_bits`]).
const SLOT: usize = std::mem::size_of::<FileRef>();
const _: () = assert!(SLOT == 128 && std::mem::offset_of!(FileRef, inline) + INLINE == SLOT);

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The pass counters are process-wide: pool tests run one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn pass() {
        let p = begin_pass();
        end_pass(p);
    }

    #[test]
    fn path_keys_tell_numbered_paths_apart_and_spread_them() {
        // Data-set paths differ in a few digits, anywhere in the last word or before it.
        let mut keys = std::collections::HashSet::new();
        let buckets = 1 << 11;
        let mut load = vec![0u32; buckets];
        for i in 0..20_000 {
            for p in [
                format!("/lus/data/train/img_{i:06}.jpg"),
                format!("/d/{i}"),
                format!("/data/{i:05}/sample.npz"),
            ] {
                let k = path_key(p.as_bytes()) | 1;
                assert!(keys.insert(k), "{p}");
                let home = (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize & (buckets - 1);
                load[home] += 1;
            }
        }
        // 60,000 keys in 2,048 buckets: ~29 each; no bucket far above (the pool has 32 ways).
        let max = *load.iter().max().unwrap();
        assert!(max < 60, "fullest bucket {max}");
        // Short paths, and lengths around the word size.
        let short: Vec<u64> = ["", "/", "/a", "/abcdefg", "/abcdefgh", "/abcdefghi"]
            .iter()
            .map(|p| path_key(p.as_bytes()))
            .collect();
        let distinct: std::collections::HashSet<_> = short.iter().collect();
        assert_eq!(distinct.len(), short.len());
    }

    #[test]
    fn pool_finds_a_path_in_every_way_of_its_bucket() {
        // One bucket of 32 ways: each path is found again in its own slot, whichever of the
        // four tag words holds its tag, and a slot claimed again for another path is not
        // found by its old path's tag.
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        static P: Pool<32, 4> = Pool::new();
        let first: Vec<Pinned> = (0..32)
            .map(|i| P.intern(format!("/w/{i}").as_bytes()).unwrap())
            .collect();
        for (i, p) in first.iter().enumerate() {
            let again = P.intern(format!("/w/{i}").as_bytes()).unwrap();
            assert!(
                std::ptr::eq(again.file(), p.file()) && again.gen == p.gen,
                "{i}"
            );
        }
        let slots: Vec<*const FileRef> = first.iter().map(|p| p.file() as *const _).collect();
        drop(first);
        pass();
        // Way 20's file stays cached; the others are replaced by new paths.
        let keep = P.intern(b"/w/20").unwrap();
        let fresh: Vec<Pinned> = (0..31)
            .map(|i| P.intern(format!("/v/{i}").as_bytes()).unwrap())
            .collect();
        assert!(std::ptr::eq(keep.file(), slots[20]));
        for (i, p) in fresh.iter().enumerate() {
            let again = P.intern(format!("/v/{i}").as_bytes()).unwrap();
            assert!(std::ptr::eq(again.file(), p.file()), "{i}");
        }
        assert!(
            P.intern(b"/w/3").is_none(),
            "its slot holds another path, all pinned"
        );
    }

    /// A path of `n` bytes whose bytes depend on `seed` (each byte differs between seeds).
    fn path_of(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| {
                if i == 0 {
                    b'/'
                } else {
                    b'!' + ((i as u8).wrapping_mul(7) ^ seed) % 90
                }
            })
            .collect()
    }

    /// What a slot keeps: the path inline up to `INLINE` bytes (no heap buffer), in a heap
    /// buffer of at least its length and at most twice it beyond.
    fn check_storage(f: &FileRef, path: &[u8]) {
        // SAFETY: the test holds a pin on `f` (no claimer writes).
        let (heap, cap, len) =
            unsafe { (*f.heap.get(), *f.cap.get() as usize, *f.len.get() as usize) };
        assert_eq!(len, path.len());
        if path.len() <= INLINE {
            assert!(
                heap.is_null() && cap == 0,
                "{} bytes kept inline",
                path.len()
            );
        } else {
            assert!(!heap.is_null(), "{} bytes", path.len());
            assert!(
                cap >= path.len() && cap <= 2 * path.len(),
                "cap {cap} for {}",
                path.len()
            );
        }
    }

    #[test]
    fn slots_keep_paths_at_and_around_the_inline_limit_and_reused_longer_or_shorter() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        static P: Pool<32, 4> = Pool::new();
        assert_eq!(std::mem::size_of::<FileRef>(), 128);
        // One slot (way 0 of the one bucket) reused for each length in turn: inline to heap,
        // heap to a longer and a shorter heap path, heap back to inline, around the limit.
        let lens = [
            1,
            7,
            8,
            INLINE - 1,
            INLINE,
            INLINE + 1,
            INLINE,
            INLINE + 1,
            INLINE + 2,
            2 * INLINE + 40,
            INLINE + 1,
            3000,
            4095,
            200,
            INLINE - 1,
            0,
            INLINE + 31,
            INLINE + 33,
            9,
        ];
        let mut slot = None;
        let mut stale: Vec<(FileHandle, Vec<u8>)> = Vec::new();
        for (round, &n) in lens.iter().enumerate() {
            let path = path_of(n, round as u8);
            let p = P.intern(&path).unwrap();
            let addr = p.file() as *const FileRef;
            assert!(*slot.get_or_insert(addr) == addr, "the same slot, reused");
            assert_eq!(p.path(), &path[..], "{n} bytes");
            check_storage(p.file(), &path);
            assert_eq!(p.hash(), hash16(&path));
            // Found again (same slot and generation) by a second intern of the same bytes.
            let again = P.intern(&path).unwrap();
            assert!(std::ptr::eq(again.file(), p.file()) && again.gen == p.gen);
            // Every earlier use of the slot is stale: its handle pins nothing.
            for (h, old) in &stale {
                assert!(h.pin().is_none(), "a stale handle of {} bytes", old.len());
            }
            stale.push((p.handle(), path));
            drop((p, again));
            pass();
        }
    }

    #[test]
    fn standalone_files_keep_any_path() {
        for n in [0, 1, INLINE - 1, INLINE, INLINE + 1, 5000] {
            let path = path_of(n, n as u8);
            let f: &'static FileRef = Box::leak(Box::new(FileRef::new(&path)));
            let p = f.handle().pin().unwrap();
            assert_eq!(p.path(), &path[..]);
            check_storage(f, &path);
            assert_eq!(p.hash(), hash16(&path));
            drop(p);
            // Owned again (a test may drop one): its heap buffer is freed with it.
            // SAFETY: leaked above and no longer referenced.
            drop(unsafe { Box::from_raw(f as *const FileRef as *mut FileRef) });
        }
    }

    #[test]
    fn a_free_pool_is_all_zero() {
        // What puts a pool in `.bss`: its free state is zero bytes.
        static P: Pool<32, 4> = Pool::new();
        // SAFETY: reads the static's bytes (no slot of P is ever used).
        let bytes = unsafe {
            std::slice::from_raw_parts(&P as *const _ as *const u8, std::mem::size_of_val(&P))
        };
        assert!(bytes.iter().all(|&b| b == 0));
    }

    #[test]
    fn pool_dedups_pins_and_reuses_only_after_a_pass() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        static P: Pool<32, 4> = Pool::new();
        let a = P.intern(b"/d/a").unwrap();
        let a2 = P.intern(b"/d/a").unwrap();
        assert!(std::ptr::eq(a.file(), a2.file()) && a.gen == a2.gen);
        assert_eq!(a.hash(), hash16(b"/d/a"));
        let h = a.handle();
        drop(a2);
        // 31 more paths fill the (single) bucket while `a` stays pinned.
        let rest: Vec<Pinned> = (0..31)
            .map(|i| P.intern(format!("/d/{i}").as_bytes()).unwrap())
            .collect();
        assert!(P.intern(b"/d/new").is_none(), "every slot is pinned");
        assert_eq!(P.full_count(), 1);
        drop(rest);
        // Unpinned, but their release came after the last finished pass: not reusable yet.
        assert!(P.intern(b"/d/new").is_none());
        pass();
        let n = P.intern(b"/d/new").unwrap();
        assert_ne!(n.path(), b"/d/a");
        // `a` (still pinned) was never reused: its handle still pins the same file.
        let again = h.pin().unwrap();
        assert_eq!(again.path(), b"/d/a");
        drop((a, again));
        // A cached path comes back to the same slot and generation.
        let c = P.intern(b"/d/new").unwrap();
        assert!(std::ptr::eq(c.file(), n.file()) && c.gen == n.gen);
    }

    /// The hash is computed by its first readers, racing: every one gets the path's hash,
    /// and a slot reused for another path hashes that path.
    #[test]
    fn lazy_hash_is_the_paths_under_racing_readers_and_reuse() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        static P: Pool<32, 4> = Pool::new();
        for round in 0..50 {
            let path = format!("/lazy/{round}/file.bin");
            let a = P.intern(path.as_bytes()).unwrap();
            let h = a.handle();
            let seen: Vec<Hash16> = std::thread::scope(|s| {
                let ts: Vec<_> = (0..4)
                    .map(|_| s.spawn(move || h.pin_transient().unwrap().hash()))
                    .collect();
                ts.into_iter().map(|t| t.join().unwrap()).collect()
            });
            for got in seen {
                assert_eq!(got, hash16(path.as_bytes()));
            }
            assert_eq!(a.hash(), hash16(path.as_bytes()));
            drop(a);
            pass();
        }
    }

    #[test]
    fn stale_handles_never_pin_another_file() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        static P: Pool<32, 4> = Pool::new();
        let mut stale = Vec::new();
        for round in 0..50 {
            let ps: Vec<Pinned> = (0..32)
                .map(|i| P.intern(format!("/r{round}/{i}").as_bytes()).unwrap())
                .collect();
            stale.extend(ps.iter().map(|p| (p.handle(), p.path().to_vec())));
            drop(ps);
            pass();
        }
        for (h, path) in stale {
            if let Some(p) = h.pin() {
                assert_eq!(p.path(), &path[..], "a handle pins only its own file");
            }
        }
    }

    /// Random opens, closes, records and writer passes against a model: a record written
    /// while its file was pinned always resolves to that file when the writer encodes it; a
    /// record written after (a racing close) resolves to its own file or to none; no pinned
    /// slot ever changes path.
    #[test]
    fn random_sequences_never_misattribute() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        static P: Pool<64, 8> = Pool::new();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        // Open "fds": (pin, path). Ring: (handle, path, racy) in write order, encoded by
        // a pass. Closed: handles of closed files, for racy records.
        let mut open: Vec<(Pinned, Vec<u8>)> = Vec::new();
        let mut ring: Vec<(FileHandle, Vec<u8>, bool)> = Vec::new();
        let mut closed: Vec<(FileHandle, Vec<u8>)> = Vec::new();
        let (mut full, mut stale) = (0, 0);
        for _ in 0..200_000 {
            // At most ~40 files open: the pool (64 slots) is not the thing under test here.
            let op = if open.len() > 40 { 2 } else { next() % 9 };
            match op {
                0 | 1 => {
                    let path = format!("/f/{}", next() % 300).into_bytes();
                    match P.intern(&path) {
                        Some(p) => {
                            assert_eq!(p.path(), &path[..]);
                            ring.push((p.handle(), path.clone(), false));
                            open.push((p, path));
                        }
                        None => full += 1,
                    }
                }
                2 | 3 if !open.is_empty() => {
                    let i = (next() as usize) % open.len();
                    let (p, path) = open.swap_remove(i);
                    ring.push((p.handle(), path.clone(), false)); // the close record, then unpin
                    closed.push((p.handle(), path));
                    drop(p);
                }
                4 | 5 if !open.is_empty() => {
                    let (p, path) = &open[(next() as usize) % open.len()];
                    ring.push((p.handle(), path.clone(), false));
                }
                6 => {
                    // A writer pass: encodes everything written so far.
                    let pass = begin_pass();
                    for (h, path, racy) in ring.drain(..) {
                        match h.pin_transient() {
                            Some(p) => {
                                assert_eq!(p.path(), &path[..]);
                                assert_eq!(p.hash(), hash16(&path));
                            }
                            None => {
                                assert!(racy, "a record's slot is never reused early");
                                stale += 1;
                            }
                        }
                    }
                    end_pass(pass);
                }
                7 if !closed.is_empty() => {
                    // I/O on an fd another thread closed: a record written after the unpin.
                    let (h, path) = closed[(next() as usize) % closed.len()].clone();
                    ring.push((h, path, true));
                }
                _ => {
                    for (p, path) in &open {
                        assert_eq!(p.path(), &path[..]);
                    }
                }
            }
        }
        assert!(full < 1000, "pool full {full} times");
        assert!(stale > 0, "racy records met reused slots");
    }

    #[test]
    fn concurrent_interning_and_reuse() {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        static P: Pool<64, 8> = Pool::new();
        let hs: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..20_000u32 {
                        let path = format!("/c/{}", (i * 7 + t) % 500);
                        if let Some(p) = P.intern(path.as_bytes()) {
                            assert_eq!(p.path(), path.as_bytes());
                            let h = p.handle();
                            let q = h.pin().unwrap();
                            assert_eq!(q.path(), path.as_bytes());
                        }
                        if i % 64 == 0 {
                            pass();
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }
}
