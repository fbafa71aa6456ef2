//! Which fds and `FILE*`s are traced, and the paths they were opened with.
//!
//! - [`Chunked`]: a two-level table indexed by fd, `TOP` lazily allocated chunks of `CHUNK`
//!   slots, covering every fd Linux can hand out (up to 2^30; `nr_open` cannot exceed that).
//!   Lookup is two acquire loads and never locks; a chunk is allocated (zeroed) the first time
//!   a traced fd falls in it and is never freed, so a slot reference is valid forever. The top
//!   array is 2 MiB of zero-initialised `.bss`, which costs no memory until touched (the fd
//!   table's, 8 MiB: it covers every `u32`, so that a lookup above the low fds has no range
//!   check). The fd table's first 4,096 fds are a static array of their own (32 KiB of
//!   `.bss`): a shim's lookup there is a compare and one load.
//! - [`POOL`]: traced paths are interned in the core's bounded pool of reusable file slots
//!   ([`dftracer_core::frontend::FilePool`]): [`POOL_SLOTS`] slots in buckets of
//!   [`dftracer_core::frontend::WAYS`], so memory stays flat however many distinct files the
//!   program opens (a slot whose file is closed, and whose events were all written, is reused
//!   for the next new path of its bucket). An fd or `FILE*` entry is one word, the slot index
//!   and generation ([`Interned`]), and holds one pin on the slot until the entry is
//!   replaced or cleared; hooks read it with one load and never pin on the hot path. If
//!   another thread closes the fd meanwhile and the slot is reused, the generation no longer
//!   matches and the event is written without its file, never with another one. If every
//!   slot of a path's bucket is in use (tens of thousands of files open at once), the open
//!   is recorded with its path but the fd is not tracked (counted, warned once).
//!
//! Nothing here may block: the tables are used from interposed calls, including in fork
//! children of multi-threaded programs, where a lock held by a vanished thread would hang.
#![allow(unsafe_code)]

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use dftracer_core::frontend::FilePool as Pool;
use dftracer_core::{FileHandle, Pinned};

const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;
const TOP: usize = 1 << 18;
/// Fds at or above this are never tracked (Linux caps `nr_open` at 2^30).
pub const MAX_FD: usize = TOP * CHUNK;

/// Slots of the pool of traced files: 128 Ki × (128 B + 9 B) of `.bss` (slots touched as
/// used), plus a heap buffer for each slot whose path is longer than
/// [`dftracer_core::frontend::INLINE`] bytes. Bounds the traced files open at once, or named
/// by events not yet encoded (at most a few rings' worth), not the files ever opened.
pub const POOL_SLOTS: usize = 1 << 17;
pub static POOL: Pool<POOL_SLOTS, { POOL_SLOTS / 8 }> = Pool::new();

/// A traced file as a table entry names it: its pool slot and generation. Holds no pin of
/// its own (the entry it was read from does); pin it to read the path.
#[derive(Clone, Copy, Debug)]
pub struct Interned {
    pub file: FileHandle,
}

impl Interned {
    fn of_bits(bits: u64) -> Option<Interned> {
        decode(bits).map(|file| Interned { file })
    }
}

/// An fd-table entry word as read ([`FdTable::word`]): 0 (not traced) or the bits of the
/// pinned handle the entry held when it was read.
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct Entry(pub u64);

impl Entry {
    /// Whether the fd was traced.
    #[inline(always)]
    pub fn is_traced(self) -> bool {
        self.0 != 0
    }

    /// The file of a traced fd's entry (`self.is_traced()`), without a pin of its own: as
    /// [`FdTable::path`] would have returned when the word was read.
    #[inline(always)]
    pub fn file(self) -> Interned {
        debug_assert!(self.is_traced());
        Interned {
            // SAFETY: an fd entry holds 0 or `POOL.to_bits` of a handle of this pool
            // (`keep`), and this word was not 0.
            file: unsafe { POOL.from_bits_unchecked(self.0) },
        }
    }
}

/// The handle of an entry word (`None` for 0). Every word these tables, [`park`] and their
/// callers hold is 0 or [`keep`]'s, so it is decoded without `Pool::from_bits`'s checks.
#[inline(always)]
fn decode(bits: u64) -> Option<FileHandle> {
    // SAFETY: a non-zero word came from `POOL.to_bits` (`keep`), as above.
    (bits != 0).then(|| unsafe { POOL.from_bits_unchecked(bits) })
}

/// Gives back the pin an entry held.
fn release(bits: u64) {
    if let Some(h) = decode(bits) {
        // SAFETY: entries only hold bits of `Pinned::into_raw` handles, each swapped out of
        // its entry exactly once (here or by `take`/`remove`).
        drop(unsafe { Pinned::from_raw(h) });
    }
}

/// [`release`] out of line (an entry replaced while it still named a file).
#[cold]
#[inline(never)]
fn release_cold(bits: u64) {
    release(bits);
}

/// The entry word of a pin (kept by the entry until released).
#[inline]
fn keep(p: Pinned) -> u64 {
    POOL.to_bits(p.into_raw())
}

/// A pin kept in one atomic word by state outside the fd tables (a pending AIO request, a
/// live mapping): [`park`] keeps it, [`unpark`] gives it back (exactly once per word),
/// [`peek`] reads the file without pinning. 0 is "none".
pub fn park(p: Pinned) -> u64 {
    keep(p)
}

/// Takes back a pin [`park`]ed in `bits` (the caller swapped `bits` out of its word).
pub fn unpark(bits: u64) -> Option<Pinned> {
    // SAFETY: `bits` came from `park` and was swapped out of its only word by the caller.
    decode(bits).map(|h| unsafe { Pinned::from_raw(h) })
}

/// The file behind a parked word, without a pin of its own.
pub fn peek(bits: u64) -> Option<Interned> {
    Interned::of_bits(bits)
}

/// Types that are valid when all-zero bytes (so chunks can come from `alloc_zeroed`).
///
/// # Safety
/// The all-zero bit pattern must be a valid value of the type.
pub unsafe trait Zeroable {}
// SAFETY: a null pointer is a valid AtomicPtr.
unsafe impl<T> Zeroable for AtomicPtr<T> {}
// SAFETY: 0 is a valid AtomicU64.
unsafe impl Zeroable for AtomicU64 {}
// SAFETY: 0 is a valid AtomicUsize; StreamEntry is two zeroable atomics.
unsafe impl Zeroable for StreamEntry {}

/// Chunk pointers of a top array that covers every `u32` (a negative fd included): the fd
/// table's, whose lookup then needs no range check (8 MiB of `.bss`; pointers of chunks at
/// or above [`MAX_FD`] stay null, as no chunk is ever allocated there).
pub const TOP_ALL: usize = 1 << (32 - CHUNK_BITS);

/// A fd-indexed table of `T` slots, `N` chunk pointers at the top (`TOP` covers every fd
/// Linux hands out, [`TOP_ALL`] every `u32`).
pub struct Chunked<T: 'static, const N: usize = TOP> {
    top: [AtomicPtr<[T; CHUNK]>; N],
}

impl<T: Zeroable + 'static, const N: usize> Chunked<T, N> {
    // Only ever a `static`: a by-value `Default` would build megabytes on the stack.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Chunked {
            top: [const { AtomicPtr::new(ptr::null_mut()) }; N],
        }
    }

    /// The slot of `fd` if its chunk exists (never allocates).
    #[inline(always)]
    pub fn get(&self, fd: i32) -> Option<&'static T> {
        let i = fd as u32 as usize;
        // A constant: false for a top array of every u32, whose index cannot go past it.
        if N < TOP_ALL && i >= MAX_FD.min(N * CHUNK) {
            return None;
        }
        let c = self.top[i >> CHUNK_BITS].load(Ordering::Acquire);
        if c.is_null() {
            return None;
        }
        // SAFETY: chunks are allocated zeroed (valid T per Zeroable), published with Release
        // and never freed, so a non-null pointer is valid for 'static.
        Some(unsafe { &(*c)[i & (CHUNK - 1)] })
    }

    /// The slot of `fd`, allocating its chunk if needed. `None` for out-of-range fds or when
    /// memory is exhausted.
    pub fn entry(&self, fd: i32) -> Option<&'static T> {
        if let Some(s) = self.get(fd) {
            return Some(s);
        }
        let i = fd as u32 as usize;
        if i >= MAX_FD {
            return None;
        }
        let layout = Layout::new::<[T; CHUNK]>();
        // SAFETY: the layout has a non-zero size.
        let fresh = unsafe { alloc_zeroed(layout) } as *mut [T; CHUNK];
        if fresh.is_null() {
            return None;
        }
        let cell = &self.top[i >> CHUNK_BITS];
        if let Err(_winner) =
            cell.compare_exchange(ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire)
        {
            // SAFETY: `fresh` was allocated above with `layout` and never shared.
            unsafe { dealloc(fresh as *mut u8, layout) };
        }
        self.get(fd)
    }

    /// Calls `f` on every slot of existing chunks whose fd is in `lo..=hi`.
    pub fn for_range(&self, lo: u32, hi: u32, mut f: impl FnMut(&T)) {
        let hi = (hi as usize).min(MAX_FD - 1);
        let mut i = lo as usize;
        while i <= hi {
            let c = self.top[i >> CHUNK_BITS].load(Ordering::Acquire);
            let chunk_end = (i | (CHUNK - 1)).min(hi);
            if !c.is_null() {
                for j in i..=chunk_end {
                    // SAFETY: as in `get`.
                    f(unsafe { &(*c)[j & (CHUNK - 1)] });
                }
            }
            i = chunk_end + 1;
        }
    }
}

/// fd -> the traced file it refers to (0: none). The first [`CHUNK`] fds (those programs
/// use) are a static array: a shim's lookup is a compare, one load and its test. Above them
/// a [`Chunked`] table whose top array covers every `u32` (no range check there either).
#[repr(C)] // `low` first: at the table's own address, no offset to add
pub struct FdTable {
    low: [AtomicU64; CHUNK],
    high: Chunked<AtomicU64, TOP_ALL>,
}

impl FdTable {
    // Only ever a `static`: a by-value `Default` would build megabytes on the stack.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        FdTable {
            low: [const { AtomicU64::new(0) }; CHUNK],
            high: Chunked::new(),
        }
    }

    /// `fd`'s slot if it exists (never allocates).
    #[inline(always)]
    fn slot(&'static self, fd: i32) -> Option<&'static AtomicU64> {
        match self.low.get(fd as u32 as usize) {
            Some(s) => Some(s),
            None => self.high.get(fd),
        }
    }

    /// `fd`'s slot, allocating its chunk if needed (`None`: out of range, or no memory).
    fn slot_entry(&'static self, fd: i32) -> Option<&'static AtomicU64> {
        match self.low.get(fd as u32 as usize) {
            Some(s) => Some(s),
            None => self.high.entry(fd),
        }
    }

    /// The traced file behind `fd`, if any. Two loads on the untraced path.
    #[inline(always)]
    pub fn path(&'static self, fd: i32) -> Option<Interned> {
        Interned::of_bits(self.slot(fd)?.load(Ordering::Acquire))
    }

    /// `fd`'s entry word: 0 when it is not traced, else an [`Entry`] to decode when the call
    /// is recorded (one register from the shim to its traced path, and across the call).
    /// Only fds of POSIX tracing are ever entered here, so a non-zero word also says that
    /// POSIX tracing was turned on.
    #[inline(always)]
    pub fn word(&'static self, fd: i32) -> Entry {
        let i = fd as u32 as usize;
        if i < CHUNK {
            return Entry(self.low[i].load(Ordering::Acquire));
        }
        Entry(self.high.get(fd).map_or(0, |s| s.load(Ordering::Acquire)))
    }

    /// Records that `fd` now refers to `what` (`None`: an untraced file); the entry keeps
    /// `what`'s pin, and gives back the one of the file it named before.
    pub fn set(&'static self, fd: i32, what: Option<Pinned>) {
        match what {
            Some(p) => {
                if let Some(s) = self.slot_entry(fd) {
                    release(s.swap(keep(p), Ordering::AcqRel));
                }
            }
            None => {
                if let Some(s) = self.slot(fd) {
                    if s.load(Ordering::Relaxed) != 0 {
                        release(s.swap(0, Ordering::AcqRel));
                    }
                }
            }
        }
    }

    /// `set(fd, Some(p))` inline, for an `open` that just made `fd`: a low fd's entry is a
    /// swap (the word it held is 0 unless the fd was closed behind this library's back).
    #[inline(always)]
    pub fn set_file(&'static self, fd: i32, p: Pinned) {
        match self.low.get(fd as u32 as usize) {
            Some(s) => {
                let old = s.swap(keep(p), Ordering::AcqRel);
                if old != 0 {
                    release_cold(old);
                }
            }
            None => self.set(fd, Some(p)),
        }
    }

    /// Forgets `fd` and returns what it was (with the entry's pin).
    #[inline]
    pub fn take(&'static self, fd: i32) -> Option<Pinned> {
        let s = self.slot(fd)?;
        if s.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let h = decode(s.swap(0, Ordering::AcqRel))?;
        // SAFETY: swapped out of its entry just now, so given back once.
        Some(unsafe { Pinned::from_raw(h) })
    }

    /// Forgets every fd in `lo..=hi` (close_range, closefrom).
    pub fn clear_range(&'static self, lo: u32, hi: u32) {
        let clear = |s: &AtomicU64| {
            if s.load(Ordering::Relaxed) != 0 {
                release(s.swap(0, Ordering::AcqRel));
            }
        };
        let low_end = (hi as usize).min(CHUNK - 1);
        for s in self.low.get(lo as usize..=low_end).into_iter().flatten() {
            clear(s);
        }
        if hi as usize >= CHUNK {
            self.high.for_range(lo.max(CHUNK as u32), hi, clear);
        }
    }
}

/// A traced `FILE*`: keyed by its fd, checked against the stream pointer itself.
#[derive(Default)]
pub struct StreamEntry {
    fp: AtomicUsize,
    path: AtomicU64,
}

/// fd -> (FILE*, file) of traced streams.
pub struct FileTable {
    streams: Chunked<StreamEntry>,
    /// Traced streams open now; 0 lets every stdio call skip the lookup.
    open: AtomicIsize,
}

impl FileTable {
    // Only ever a `static`: a by-value `Default` would build megabytes on the stack.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        FileTable {
            streams: Chunked::new(),
            open: AtomicIsize::new(0),
        }
    }

    #[inline(always)]
    pub fn any_open(&self) -> bool {
        self.open.load(Ordering::Relaxed) > 0
    }

    /// The traced file of stream `fp` (whose fd is `fd`), if any.
    #[inline]
    pub fn path(&self, fd: i32, fp: usize) -> Option<Interned> {
        let s = self.streams.get(fd)?;
        if s.fp.load(Ordering::Acquire) != fp || fp == 0 {
            return None;
        }
        Interned::of_bits(s.path.load(Ordering::Acquire))
    }

    /// Starts tracing stream `fp` on `fd`; the entry keeps `what`'s pin.
    pub fn insert(&self, fd: i32, fp: usize, what: Pinned) {
        if let Some(s) = self.streams.entry(fd) {
            let was = s.fp.swap(0, Ordering::AcqRel);
            release(s.path.swap(keep(what), Ordering::AcqRel));
            s.fp.store(fp, Ordering::Release);
            if was == 0 {
                self.open.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Stops tracing stream `fp` on `fd` (fclose); returns its file (with the entry's pin)
    /// if it was traced.
    pub fn remove(&self, fd: i32, fp: usize) -> Option<Pinned> {
        let s = self.streams.get(fd)?;
        if fp == 0
            || s.fp
                .compare_exchange(fp, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return None;
        }
        self.open.fetch_sub(1, Ordering::Relaxed);
        let h = decode(s.path.swap(0, Ordering::AcqRel))?;
        // SAFETY: swapped out of its entry just now, so given back once.
        Some(unsafe { Pinned::from_raw(h) })
    }
}

static WARNED: AtomicBool = AtomicBool::new(false);

/// `path`'s pool slot, pinned for the caller (allocates only for a path longer than a slot
/// keeps inline, when the slot's buffer does not fit it). `None` when every slot of its bucket is in use: the caller records
/// the event with the path itself and does not track the fd.
pub fn intern(path: &[u8]) -> Option<Pinned> {
    touch();
    let p = POOL.intern(path);
    if p.is_none() && !WARNED.swap(true, Ordering::Relaxed) {
        dftracer_core::frontend::eprint_line(
            "[DFTRACER WARNING] preload: too many traced files open at once in one table \
             bucket; some fds are not tracked (their open is still recorded)",
        );
    }
    p
}

/// Set once this process has traced a file (opened or named one under a data dir).
static TOUCHED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Notes that a traced file was seen (cheap when already set: one load).
#[inline]
pub fn touch() {
    if !TOUCHED.load(Ordering::Relaxed) {
        TOUCHED.store(true, Ordering::Relaxed);
    }
}

/// True once any traced file was seen in this process.
#[inline]
pub fn touched() -> bool {
    TOUCHED.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(h: FileHandle) -> usize {
        h.file() as *const dftracer_core::FileRef as usize
    }

    #[test]
    fn interning_dedups() {
        let a = intern(b"/x/a").unwrap();
        let b = intern(b"/x/a").unwrap();
        let c = intern(b"/x/b").unwrap();
        assert_eq!(addr(a.handle()), addr(b.handle()));
        assert_ne!(addr(a.handle()), addr(c.handle()));
        assert_eq!(c.path(), b"/x/b");
        assert_eq!(a.hash(), dftracer_core::frontend::hash16(b"/x/a"));
    }

    #[test]
    fn fd_table_beyond_1024_and_huge() {
        static T: FdTable = FdTable::new();
        let p = intern(b"/data/f").unwrap();
        let pin = || p.handle().pin();
        for fd in [
            0,
            5,
            1023,
            1024,
            4095,
            4096,
            5000,
            1 << 20,
            (MAX_FD - 1) as i32,
        ] {
            assert!(T.path(fd).is_none());
            T.set(fd, pin());
            assert_eq!(addr(T.path(fd).unwrap().file), addr(p.handle()));
        }
        assert!(T.path(1025).is_none());
        T.set(-1, pin());
        assert!(T.path(-1).is_none());
        T.set(MAX_FD as i32, pin());
        assert!(T.path(MAX_FD as i32).is_none());
        let taken = T.take(1024).unwrap();
        assert_eq!(taken.path(), b"/data/f");
        assert!(T.take(1024).is_none());
        // Replacing an entry keeps the new file.
        T.set(5, intern(b"/data/g"));
        assert_eq!(T.path(5).unwrap().file.pin().unwrap().path(), b"/data/g");
        // A range within the low fds, one across the boundary, one above it.
        T.clear_range(6, 1023);
        assert!(T.path(5).is_some() && T.path(1023).is_none() && T.path(4095).is_some());
        T.clear_range(4095, 4096);
        assert!(T.path(4095).is_none() && T.path(4096).is_none() && T.path(5000).is_some());
        T.clear_range(4097, 5000);
        assert!(T.path(5000).is_none() && T.path(5).is_some());
        T.clear_range(0, u32::MAX);
        assert!(T.path(5).is_none() && T.path((MAX_FD - 1) as i32).is_none());
    }

    #[test]
    fn set_file_enters_low_and_high_fds_and_replaces() {
        static T: FdTable = FdTable::new();
        let path = |fd| T.path(fd).map(|i| i.file.pin().unwrap().path().to_vec());
        T.set_file(7, intern(b"/sf/a").unwrap());
        assert_eq!(path(7).as_deref(), Some(&b"/sf/a"[..]));
        // An entry that still names a file (closed behind the library's back) is replaced.
        T.set_file(7, intern(b"/sf/b").unwrap());
        assert_eq!(path(7).as_deref(), Some(&b"/sf/b"[..]));
        assert_eq!(T.take(7).unwrap().path(), b"/sf/b");
        // Above the low fds (a chunk), and out of range (not entered).
        T.set_file(5000, intern(b"/sf/c").unwrap());
        assert_eq!(path(5000).as_deref(), Some(&b"/sf/c"[..]));
        T.set_file(-1, intern(b"/sf/d").unwrap());
        assert!(T.path(-1).is_none());
        T.clear_range(0, u32::MAX);
        assert!(path(5000).is_none());
    }

    #[test]
    fn file_table_checks_the_stream() {
        static F: FileTable = FileTable::new();
        let p = intern(b"/data/g").unwrap();
        assert!(!F.any_open());
        F.insert(7, 0x1000, p);
        assert!(F.any_open());
        assert!(F.path(7, 0x2000).is_none());
        assert!(F.path(7, 0x1000).is_some());
        assert!(F.remove(7, 0x2000).is_none());
        assert_eq!(F.remove(7, 0x1000).unwrap().path(), b"/data/g");
        assert!(!F.any_open());
        assert!(F.path(7, 0x1000).is_none());
    }

    #[test]
    fn concurrent_interning_is_consistent() {
        // Miri (`make sanitize`) interprets every step: fewer paths, the same races.
        let n = if cfg!(miri) { 60 } else { 2000 };
        let hs: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    (0..n)
                        .map(|i| {
                            let p = intern(format!("/c/{i}").as_bytes()).unwrap();
                            assert_eq!(p.path(), format!("/c/{i}").as_bytes());
                            p
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let all: Vec<Vec<Pinned>> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        // Two threads interning a new path at once may each claim a slot; afterwards the
        // path resolves to one of them.
        for i in 0..n {
            let again = intern(format!("/c/{i}").as_bytes()).unwrap();
            assert!(all
                .iter()
                .any(|v| addr(v[i].handle()) == addr(again.handle())));
        }
    }
}
