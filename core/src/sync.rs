//! The atomics and byte cells of the ring ([`crate::ring`]) and of the clock's seqlock
//! ([`crate::clock`]), swappable for loom's.
//!
//! Normal builds: std's atomics, re-exported as they are, and [`Bytes`], whose accessors are
//! `#[inline(always)]` pointer casts (checked on the release `libdftracer_preload.so`: every
//! inlined `Ring::push` is instruction for instruction what it was with raw pointers). Under `RUSTFLAGS="--cfg loom"` (`tests/loom.rs`, run by
//! `scripts/test.sh`): loom's atomics and cells, so loom can explore the interleavings of one
//! producer and one consumer, or of the clock's writer and its readers, and report a torn
//! read or a data race on the ring's bytes (every byte is a loom cell there: the accessors
//! copy through a scratch buffer, so a record is still handed out as one slice).
#![allow(unsafe_code)]

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize};

/// A value alone in its cache lines (128 bytes: adjacent-line prefetch pairs lines on x86),
/// for a word that every event reads (the state word, the clock's anchor) kept apart from words
/// the writer thread writes as it works, which would otherwise evict it from every recording
/// core's cache over and over (false sharing).
#[repr(align(128))]
pub struct Padded<T>(pub T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A fixed run of bytes shared by one writer and one reader, who agree (through atomics) on
/// which ranges each may touch.
pub(crate) struct Bytes {
    cells: Box<[ByteCell]>,
}

#[cfg(not(loom))]
type ByteCell = std::cell::UnsafeCell<u8>;
#[cfg(loom)]
type ByteCell = loom::cell::UnsafeCell<u8>;

impl Bytes {
    /// `len` zero bytes.
    ///
    /// Zeroed by the allocator, not written: a ring's buffer (1 MiB by default) is a fresh
    /// mapping of the tracer's heap, whose pages the kernel supplies as they are first
    /// written, so a thread that records a few events touches a few pages (writing the zeros
    /// touched all 256 at once: +1 MiB of RSS and ~256 page faults per tracing thread).
    #[cfg(not(loom))]
    pub(crate) fn new(len: usize) -> Bytes {
        // SAFETY: an `UnsafeCell<u8>` of all-zero bits is a valid zero byte.
        let cells = unsafe { Box::<[ByteCell]>::new_zeroed_slice(len).assume_init() };
        Bytes { cells }
    }

    /// `len` zero bytes (loom's cells are not plain bytes: made one by one).
    #[cfg(loom)]
    pub(crate) fn new(len: usize) -> Bytes {
        Bytes {
            cells: (0..len).map(|_| ByteCell::new(0)).collect(),
        }
    }

    /// The byte at `idx`, as a pointer that may reach the following bytes: it comes from the
    /// whole buffer, not from the one cell at `idx` (whose borrow would cover one byte only;
    /// Miri's Stacked Borrows rejects reading on from it). Checked in debug builds only: every
    /// caller's contract puts its range inside the buffer, and the ring's hot push has no
    /// panic path (a preload hook records without saving `errno`, which unwinding may change).
    ///
    /// # Safety
    /// `idx` < the buffer's length.
    #[cfg(not(loom))]
    #[inline(always)]
    unsafe fn ptr(&self, idx: usize) -> *mut u8 {
        debug_assert!(idx < self.cells.len());
        // SAFETY: idx < len (the caller's contract).
        std::cell::UnsafeCell::raw_get(unsafe { self.cells.as_ptr().add(idx) })
    }

    /// Hands `[idx, idx + len)` to `f` for writing.
    ///
    /// # Safety
    /// The range is inside the buffer, and nobody reads or writes it until `f` returns.
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) unsafe fn write<R>(
        &self,
        idx: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> R {
        // SAFETY: in bounds and exclusive (the caller's contract); `UnsafeCell<u8>` has the
        // layout of `u8`, and the bytes are behind `UnsafeCell`, so writing through `&self`
        // is allowed.
        f(unsafe { std::slice::from_raw_parts_mut(self.ptr(idx), len) })
    }

    /// Copies `src` to `[idx, idx + src.len())`.
    ///
    /// # Safety
    /// As for [`Bytes::write`].
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) unsafe fn put(&self, idx: usize, src: &[u8]) {
        // SAFETY: in bounds and exclusive (the caller's contract); see `write`.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr(idx), src.len()) }
    }

    /// Hands `[idx, idx + len)` to `f` for reading.
    ///
    /// # Safety
    /// The range is inside the buffer, and nobody writes it until `f` returns.
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) unsafe fn read<R>(&self, idx: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        // SAFETY: in bounds and not written meanwhile (the caller's contract); see `write`.
        f(unsafe { std::slice::from_raw_parts(self.ptr(idx) as *const u8, len) })
    }

    /// Loom: every byte is a cell that records who touched it; `f` writes a zeroed scratch
    /// copy, stored back byte by byte (each store is a tracked write).
    ///
    /// # Safety
    /// As in normal builds; loom checks it.
    #[cfg(loom)]
    pub(crate) unsafe fn write<R>(
        &self,
        idx: usize,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> R {
        let mut scratch = vec![0u8; len];
        let r = f(&mut scratch);
        for (cell, b) in self.cells[idx..idx + len].iter().zip(scratch) {
            // SAFETY: loom reports any access that races with this one.
            cell.with_mut(|p| unsafe { *p = b });
        }
        r
    }

    /// Loom: as `write`.
    ///
    /// # Safety
    /// As in normal builds; loom checks it.
    #[cfg(loom)]
    pub(crate) unsafe fn put(&self, idx: usize, src: &[u8]) {
        // SAFETY: the caller's contract, checked by loom.
        unsafe { self.write(idx, src.len(), |d| d.copy_from_slice(src)) }
    }

    /// Loom: the bytes are read one by one (each a tracked read) into a scratch copy.
    ///
    /// # Safety
    /// As in normal builds; loom checks it.
    #[cfg(loom)]
    pub(crate) unsafe fn read<R>(&self, idx: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        let scratch: Vec<u8> = self.cells[idx..idx + len]
            .iter()
            // SAFETY: loom reports any access that races with this one.
            .map(|cell| cell.with(|p| unsafe { *p }))
            .collect();
        f(&scratch)
    }
}
