//! Which fds and `FILE*`s are traced, and the paths they were opened with.
//!
//! - [`Chunked`]: a two-level table indexed by fd, `TOP` lazily allocated chunks of `CHUNK`
//!   slots, covering every fd Linux can hand out (up to 2^30; `nr_open` cannot exceed that).
//!   Lookup is two acquire loads and never locks; a chunk is allocated (zeroed) the first time
//!   a traced fd falls in it and is never freed, so a slot reference is valid forever. The top
//!   array is 2 MiB of zero-initialised `.bss`, which costs no memory until touched.
//! - [`Interned`]: paths are interned in a lock-free open-addressing set and never freed, so a
//!   slot holds a plain pointer that stays valid even if another thread closes the fd while
//!   this one reads it (no use-after-free, no lock, no reference count on the hot path). The
//!   cost is memory proportional to the number of *distinct* traced paths (the core's writer
//!   already keeps one hash per distinct path). When the set is full, paths are still leaked
//!   once per open, not deduplicated.
//!
//! Nothing here may block: the tables are used from interposed calls, including in fork
//! children of multi-threaded programs, where a lock held by a vanished thread would hang.
#![allow(unsafe_code)]

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr;
use std::sync::atomic::{AtomicIsize, AtomicPtr, AtomicUsize, Ordering};

const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;
const TOP: usize = 1 << 18;
/// Fds at or above this are never tracked (Linux caps `nr_open` at 2^30).
pub const MAX_FD: usize = TOP * CHUNK;

/// A traced file: its normalised absolute path and the core's handle on it (path and hash,
/// computed once per distinct path). Never freed.
pub struct Interned {
    hash: u64,
    pub file: dftracer_core::FileRef,
}

/// Types that are valid when all-zero bytes (so chunks can come from `alloc_zeroed`).
///
/// # Safety
/// The all-zero bit pattern must be a valid value of the type.
pub unsafe trait Zeroable {}
// SAFETY: a null pointer is a valid AtomicPtr.
unsafe impl<T> Zeroable for AtomicPtr<T> {}
// SAFETY: 0 is a valid AtomicUsize; FileSlot is two zeroable atomics.
unsafe impl Zeroable for FileSlot {}

/// A fd-indexed table of `T` slots.
pub struct Chunked<T: 'static> {
    top: [AtomicPtr<[T; CHUNK]>; TOP],
}

impl<T: Zeroable + 'static> Chunked<T> {
    // Only ever a `static`: a by-value `Default` would build megabytes on the stack.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Chunked {
            top: [const { AtomicPtr::new(ptr::null_mut()) }; TOP],
        }
    }

    /// The slot of `fd` if its chunk exists (never allocates).
    #[inline(always)]
    pub fn get(&self, fd: i32) -> Option<&'static T> {
        let i = fd as u32 as usize;
        if i >= MAX_FD {
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
    pub fn slot(&self, fd: i32) -> Option<&'static T> {
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

/// fd -> path of the traced file it refers to.
pub struct FdTable(Chunked<AtomicPtr<Interned>>);

impl FdTable {
    // Only ever a `static`: a by-value `Default` would build megabytes on the stack.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        FdTable(Chunked::new())
    }

    /// The traced file behind `fd`, if any. Two loads on the untraced path.
    #[inline(always)]
    pub fn path(&self, fd: i32) -> Option<&'static Interned> {
        let p = self.0.get(fd)?.load(Ordering::Acquire);
        // SAFETY: slots only ever hold null or pointers from `intern`, which are never freed.
        unsafe { p.as_ref() }
    }

    /// Records that `fd` now refers to `what` (`None`: an untraced file).
    pub fn set(&self, fd: i32, what: Option<&'static Interned>) {
        match what {
            Some(i) => {
                if let Some(s) = self.0.slot(fd) {
                    s.store(i as *const Interned as *mut Interned, Ordering::Release);
                }
            }
            None => {
                if let Some(s) = self.0.get(fd) {
                    if !s.load(Ordering::Relaxed).is_null() {
                        s.store(ptr::null_mut(), Ordering::Release);
                    }
                }
            }
        }
    }

    /// Forgets `fd` and returns what it was.
    #[inline]
    pub fn take(&self, fd: i32) -> Option<&'static Interned> {
        let s = self.0.get(fd)?;
        if s.load(Ordering::Relaxed).is_null() {
            return None;
        }
        let p = s.swap(ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: as in `path`.
        unsafe { p.as_ref() }
    }

    /// Forgets every fd in `lo..=hi` (close_range, closefrom).
    pub fn clear_range(&self, lo: u32, hi: u32) {
        self.0.for_range(lo, hi, |s| {
            if !s.load(Ordering::Relaxed).is_null() {
                s.store(ptr::null_mut(), Ordering::Release);
            }
        });
    }
}

/// A traced `FILE*`: keyed by its fd, checked against the stream pointer itself.
#[derive(Default)]
pub struct FileSlot {
    fp: AtomicUsize,
    path: AtomicPtr<Interned>,
}

/// fd -> (FILE*, path) of traced streams.
pub struct FileTable {
    slots: Chunked<FileSlot>,
    /// Traced streams open now; 0 lets every stdio call skip the lookup.
    open: AtomicIsize,
}

impl FileTable {
    // Only ever a `static`: a by-value `Default` would build megabytes on the stack.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        FileTable {
            slots: Chunked::new(),
            open: AtomicIsize::new(0),
        }
    }

    #[inline(always)]
    pub fn any_open(&self) -> bool {
        self.open.load(Ordering::Relaxed) > 0
    }

    /// The traced file of stream `fp` (whose fd is `fd`), if any.
    #[inline]
    pub fn path(&self, fd: i32, fp: usize) -> Option<&'static Interned> {
        let s = self.slots.get(fd)?;
        if s.fp.load(Ordering::Acquire) != fp || fp == 0 {
            return None;
        }
        let p = s.path.load(Ordering::Acquire);
        // SAFETY: slots only hold null or pointers from `intern`, never freed.
        unsafe { p.as_ref() }
    }

    /// Starts tracing stream `fp` on `fd`.
    pub fn insert(&self, fd: i32, fp: usize, what: &'static Interned) {
        if let Some(s) = self.slots.slot(fd) {
            let was = s.fp.swap(0, Ordering::AcqRel);
            s.path
                .store(what as *const Interned as *mut Interned, Ordering::Release);
            s.fp.store(fp, Ordering::Release);
            if was == 0 {
                self.open.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Stops tracing stream `fp` on `fd` (fclose); returns its file if it was traced.
    pub fn remove(&self, fd: i32, fp: usize) -> Option<&'static Interned> {
        let s = self.slots.get(fd)?;
        if fp == 0
            || s.fp
                .compare_exchange(fp, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return None;
        }
        self.open.fetch_sub(1, Ordering::Relaxed);
        let p = s.path.swap(ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: as in `path`.
        unsafe { p.as_ref() }
    }
}

const SET_BITS: u32 = 16;
const SET: usize = 1 << SET_BITS;
const PROBES: usize = 64;
static PATHS: [AtomicPtr<Interned>; SET] = [const { AtomicPtr::new(ptr::null_mut()) }; SET];

fn fnv1a(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn leak(path: &[u8], hash: u64) -> *mut Interned {
    Box::into_raw(Box::new(Interned {
        hash,
        file: dftracer_core::FileRef::new(path),
    }))
}

/// The interned copy of `path` (allocates only the first time a path is seen).
pub fn intern(path: &[u8]) -> &'static Interned {
    let hash = fnv1a(path);
    let mut mine: *mut Interned = ptr::null_mut();
    for k in 0..PROBES {
        let cell = &PATHS[(hash as usize).wrapping_add(k) & (SET - 1)];
        let mut cur = cell.load(Ordering::Acquire);
        if cur.is_null() {
            if mine.is_null() {
                mine = leak(path, hash);
            }
            match cell.compare_exchange(ptr::null_mut(), mine, Ordering::AcqRel, Ordering::Acquire)
            {
                // SAFETY: `mine` came from Box::into_raw and is now owned by the set forever.
                Ok(_) => return unsafe { &*mine },
                Err(winner) => cur = winner,
            }
        }
        // SAFETY: non-null cells hold never-freed pointers from `leak`.
        let e = unsafe { &*cur };
        if e.hash == hash && *e.file.path == *path {
            if !mine.is_null() {
                // SAFETY: `mine` was never published.
                drop(unsafe { Box::from_raw(mine) });
            }
            return e;
        }
    }
    // The set is full around this hash: keep this copy without deduplication.
    if mine.is_null() {
        mine = leak(path, hash);
    }
    // SAFETY: leaked on purpose; never freed.
    unsafe { &*mine }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_dedups() {
        let a = intern(b"/x/a");
        let b = intern(b"/x/a");
        let c = intern(b"/x/b");
        assert!(std::ptr::eq(a, b));
        assert!(!std::ptr::eq(a, c));
        assert_eq!(&*c.file.path, b"/x/b");
    }

    #[test]
    fn fd_table_beyond_1024_and_huge() {
        static T: FdTable = FdTable::new();
        let p = intern(b"/data/f");
        for fd in [0, 5, 1023, 1024, 5000, 1 << 20, (MAX_FD - 1) as i32] {
            assert!(T.path(fd).is_none());
            T.set(fd, Some(p));
            assert!(std::ptr::eq(T.path(fd).unwrap(), p));
        }
        assert!(T.path(1025).is_none());
        T.set(-1, Some(p));
        assert!(T.path(-1).is_none());
        T.set(MAX_FD as i32, Some(p));
        assert!(T.path(MAX_FD as i32).is_none());
        assert!(T.take(1024).is_some());
        assert!(T.take(1024).is_none());
        T.clear_range(0, u32::MAX);
        assert!(T.path(5).is_none() && T.path((MAX_FD - 1) as i32).is_none());
    }

    #[test]
    fn file_table_checks_the_stream() {
        static F: FileTable = FileTable::new();
        let p = intern(b"/data/g");
        assert!(!F.any_open());
        F.insert(7, 0x1000, p);
        assert!(F.any_open());
        assert!(F.path(7, 0x2000).is_none());
        assert!(F.path(7, 0x1000).is_some());
        assert!(F.remove(7, 0x2000).is_none());
        assert!(F.remove(7, 0x1000).is_some());
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
                        .map(|i| intern(format!("/c/{i}").as_bytes()) as *const Interned as usize)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let all: Vec<Vec<usize>> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        for v in &all[1..] {
            assert_eq!(v, &all[0]);
        }
    }
}
