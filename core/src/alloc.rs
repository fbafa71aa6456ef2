//! The tracer's own heap: every allocation of the library's Rust code (the binding pass's
//! tables and plans, the interned paths, the writer's buffers) comes from pages mapped for it,
//! never from the program's `malloc` heap. What the tracer allocates and frees then leaves
//! the program's heap exactly as the program made it: the binding pass of a `dlopen`, made
//! while a library loads and frees its temporaries around the program's allocations, left
//! ninety free chunks in glibc's main arena, and every later `malloc` of the program searched
//! its bins (Open MPI's per-call allocations in `MPI_File_read_at` took +350 instructions).
//!
//! Blocks of up to [`MAX_SMALL`] bytes come in size classes (four per doubling) from 1 MiB
//! chunks (a
//! class's freed blocks are kept on its list for the next allocation of that class; the
//! memory is the tracer's until exit, bounded by its peak use); larger blocks are their own
//! mapping, unmapped when freed and grown with `mremap`.
//!
//! One lock word (the holder's `pthread_self`) covers the lists and the chunk: a few dozen
//! instructions held, never across a call. It never hangs the program, and copies mix:
//! - re-entered on the thread that holds it (a signal handler allocating inside the
//!   allocator), or not obtained after a bounded wait, an allocation maps its own pages
//!   instead (and its block joins the lists when freed, or is kept if the lock is busy then);
//! - two copies (the native library and the Python module, which pass Rust values to each
//!   other) may free each other's blocks: a block has no header, and a class list takes any
//!   block of its class;
//! - around `fork` the `pthread_atfork` handlers take it in the parent and reset it in the
//!   child (registered at the first allocation, before any other handler of the tracer, so
//!   the child's is the first to run).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::ptr::{self, null_mut};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The largest block served from the class lists; larger ones are mapped on their own.
pub const MAX_SMALL: usize = 64 << 10;
/// Classes: 16, 32, 48, 64, then four per doubling (80, 96, 112, 128, 160, ...): a block
/// wastes at most a fifth of itself.
const CLASSES: usize = 4 + 4 * (MAX_SMALL.trailing_zeros() as usize - 6);
const CHUNK: usize = 1 << 20;
const PAGE: usize = 4096;

/// The tracer's global allocator (declared once, by the library every frontend links).
pub struct TracerHeap;

struct State {
    /// Free blocks of each class, linked through their first word.
    free: [*mut u8; CLASSES],
    /// The current chunk's unused part.
    next: *mut u8,
    end: *mut u8,
}

struct Shared(std::cell::UnsafeCell<State>);
// SAFETY: `State` is only touched by the thread holding `LOCK`.
unsafe impl Sync for Shared {}

static STATE: Shared = Shared(std::cell::UnsafeCell::new(State {
    free: [null_mut(); CLASSES],
    next: null_mut(),
    end: null_mut(),
}));
/// 0: free; else the holder's `pthread_self()`.
static LOCK: AtomicUsize = AtomicUsize::new(0);
static FORK_HANDLERS: AtomicBool = AtomicBool::new(false);
/// Whether the atfork prepare handler took [`LOCK`] (the parent releases it only then).
static HELD_FOR_FORK: AtomicBool = AtomicBool::new(false);

fn me() -> usize {
    // SAFETY: pthread_self has no preconditions (a register read).
    unsafe { libc::pthread_self() as usize }
}

/// Takes [`LOCK`]; `false` when this thread holds it already or it stayed busy for about
/// 100 ms (the caller does without it).
fn lock() -> bool {
    let me = me();
    let mut spins = 0u32;
    loop {
        match LOCK.compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(holder) if holder == me => return false,
            Err(_) => {}
        }
        spins += 1;
        if spins < 100 {
            std::hint::spin_loop();
        } else if spins < 100 + 100_000 {
            // SAFETY: no preconditions.
            unsafe { libc::sched_yield() };
        } else {
            return false;
        }
    }
}

fn unlock() {
    LOCK.store(0, Ordering::Release);
}

unsafe extern "C" fn fork_prepare() {
    HELD_FOR_FORK.store(lock(), Ordering::Relaxed);
}

unsafe extern "C" fn fork_parent() {
    if HELD_FOR_FORK.swap(false, Ordering::Relaxed) {
        unlock();
    }
}

unsafe extern "C" fn fork_child() {
    // One thread now: whoever held the lock is gone (or is this thread, done with it).
    HELD_FOR_FORK.store(false, Ordering::Relaxed);
    LOCK.store(0, Ordering::Release);
}

fn register_fork_handlers() {
    if !FORK_HANDLERS.load(Ordering::Relaxed) && !FORK_HANDLERS.swap(true, Ordering::Relaxed) {
        // SAFETY: static handlers; glibc keeps its own record of them.
        unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child)) };
    }
}

fn class_of(layout: &Layout) -> Option<usize> {
    let mut size = layout.size().max(1);
    if layout.align() > 16 {
        // A power of two at least the alignment: such a class's blocks are aligned to it.
        size = size.max(layout.align()).next_power_of_two();
    }
    if size > MAX_SMALL || layout.align() > PAGE {
        return None;
    }
    if size <= 64 {
        return Some(size.div_ceil(16) - 1);
    }
    // 2^e < size <= 2^(e+1), in quarters of 2^e.
    let e = (usize::BITS - 1 - (size - 1).leading_zeros()) as usize;
    let k = (size - (1 << e)).div_ceil(1 << (e - 2));
    Some(4 + (e - 6) * 4 + k - 1)
}

fn class_size(c: usize) -> usize {
    if c < 4 {
        return 16 * (c + 1);
    }
    let (e, k) = (6 + (c - 4) / 4, (c - 4) % 4 + 1);
    (1 << e) + k * (1 << (e - 2))
}

/// What a class's blocks are aligned to: the lowest set bit of its size, at most a page.
fn class_align(c: usize) -> usize {
    let s = class_size(c);
    (s & s.wrapping_neg()).min(PAGE)
}

fn pages(n: usize) -> usize {
    n.div_ceil(PAGE) * PAGE
}

/// Fresh zeroed pages, or null.
fn map(len: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping: no memory of anyone's is touched.
    let p = unsafe {
        libc::mmap(
            null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        null_mut()
    } else {
        p as *mut u8
    }
}

/// A block of class `c` (lock held), and whether it is fresh: carved from a mapping's
/// never-used rest, so still all zero bytes (a freed block is not).
///
/// # Safety
/// The caller holds [`LOCK`].
unsafe fn take(st: &mut State, c: usize) -> (*mut u8, bool) {
    let head = st.free[c];
    if !head.is_null() {
        // SAFETY: a free block of this class holds the next one's address in its first word.
        st.free[c] = unsafe { *(head as *mut *mut u8) };
        return (head, false);
    }
    let size = class_size(c);
    let align = class_align(c);
    let mut p = (st.next as usize).next_multiple_of(align);
    if st.next.is_null() || p + size > st.end as usize {
        let chunk = map(CHUNK);
        if chunk.is_null() {
            return (null_mut(), false);
        }
        st.next = chunk;
        // SAFETY: within the mapping just made.
        st.end = unsafe { chunk.add(CHUNK) };
        p = chunk as usize;
    }
    st.next = (p + size) as *mut u8;
    (p as *mut u8, true)
}

/// Gives a block of class `c` back (lock held).
///
/// # Safety
/// The caller holds [`LOCK`]; `p` is a block of at least `class_size(c)` bytes no one uses.
unsafe fn give(st: &mut State, c: usize, p: *mut u8) {
    // SAFETY: the block is ours and at least a pointer wide.
    unsafe { *(p as *mut *mut u8) = st.free[c] };
    st.free[c] = p;
}

/// Maps `layout` on its own (sizes over [`MAX_SMALL`], or alignments over a page).
fn map_large(layout: &Layout) -> *mut u8 {
    if layout.align() <= PAGE {
        return map(pages(layout.size()));
    }
    // Over-map, keep the aligned part (the rest is unmapped; `unmap_large` finds the same span).
    let len = pages(layout.size());
    let p = map(len + layout.align());
    if p.is_null() {
        return p;
    }
    let start = (p as usize).next_multiple_of(layout.align());
    // SAFETY: both pieces lie inside the mapping just made and are no one's.
    unsafe {
        if start > p as usize {
            libc::munmap(p as *mut libc::c_void, start - p as usize);
        }
        let tail = start + len;
        let map_end = p as usize + len + layout.align();
        if map_end > tail {
            libc::munmap(tail as *mut libc::c_void, map_end - tail);
        }
    }
    start as *mut u8
}

fn unmap_large(p: *mut u8, layout: &Layout) {
    // SAFETY: `p` came from `map_large` for this layout: a mapping of exactly this span.
    unsafe { libc::munmap(p as *mut libc::c_void, pages(layout.size())) };
}

/// A block for `layout` and whether it is fresh (all zero bytes, never handed out).
fn alloc_block(layout: &Layout) -> (*mut u8, bool) {
    let Some(c) = class_of(layout) else {
        return (map_large(layout), true);
    };
    register_fork_handlers();
    if !lock() {
        // Re-entered or contended for too long: pages of its own (zeroed), which join
        // class `c` when freed.
        return (map(pages(class_size(c))), true);
    }
    // SAFETY: the lock is held.
    let b = unsafe { take(&mut *STATE.0.get(), c) };
    unlock();
    b
}

// SAFETY: every block is either a mapping of its own (size rounded up to pages, page
// aligned or aligned as asked) or a block of a class at least its size, aligned to the
// class's `class_align` (>= 16, and >= the alignment asked: `class_of` takes a power-of-two
// class for an alignment over 16); a block is handed out to one owner at a time.
unsafe impl GlobalAlloc for TracerHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        alloc_block(&layout).0
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // Fresh mappings and fresh blocks are zero already: not written (writing the zeros
        // would touch their pages, e.g. the deflate's tables of a short process).
        let (p, fresh) = alloc_block(&layout);
        if !p.is_null() && !fresh {
            // SAFETY: a block of at least the asked size, ours until freed.
            unsafe { ptr::write_bytes(p, 0, layout.size()) };
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        let Some(c) = class_of(&layout) else {
            return unmap_large(p, &layout);
        };
        if lock() {
            // SAFETY: the lock is held; the block is the caller's, given up.
            unsafe { give(&mut *STATE.0.get(), c, p) };
            unlock();
        }
        // Else the block is kept out of use (re-entered, or a lock never obtained).
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract: `new_size` > 0, and rounded up it stays a valid
        // size for this alignment.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class_of(&layout), class_of(&new)) {
            (Some(a), Some(b)) if a == b => p,
            (None, None) if layout.align() <= PAGE => {
                let (old_len, new_len) = (pages(layout.size()), pages(new_size));
                if old_len == new_len {
                    return p;
                }
                // SAFETY: `p` is a mapping of `old_len` bytes of our own.
                let q = unsafe {
                    libc::mremap(
                        p as *mut libc::c_void,
                        old_len,
                        new_len,
                        libc::MREMAP_MAYMOVE,
                    )
                };
                if q == libc::MAP_FAILED {
                    null_mut()
                } else {
                    q as *mut u8
                }
            }
            _ => {
                // SAFETY: a new block, the old one's bytes copied, the old one given back.
                unsafe {
                    let q = self.alloc(new);
                    if !q.is_null() {
                        ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
                        self.dealloc(p, layout);
                    }
                    q
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_sizes_and_alignments() {
        for (size, align, want) in [
            (1, 1, Some(0)),
            (16, 8, Some(0)),
            (17, 8, Some(1)),
            (24, 16, Some(1)),
            (33, 8, Some(2)),
            (64, 8, Some(3)),
            (65, 8, Some(4)),
            (80, 8, Some(4)),
            (81, 8, Some(5)),
            (128, 8, Some(7)),
            (129, 8, Some(8)),
            (24, 32, Some(1)),
            (40, 64, Some(3)),
            (4096, 4096, Some(27)),
            (MAX_SMALL, 8, Some(CLASSES - 1)),
            (MAX_SMALL + 1, 8, None),
            (64, 8192, None),
        ] {
            let l = Layout::from_size_align(size, align).unwrap();
            assert_eq!(class_of(&l), want, "size {size} align {align}");
        }
        // Every size and alignment: the smallest class that holds it, aligned enough.
        for align in [1, 8, 16, 32, 64, 4096] {
            for size in (1..=MAX_SMALL).step_by(7).chain([MAX_SMALL]) {
                let l = Layout::from_size_align(size, align).unwrap();
                let c = class_of(&l).unwrap();
                assert!(class_size(c) >= size, "size {size} align {align}");
                assert!(
                    class_align(c) >= align.min(16).max(align),
                    "size {size} align {align}"
                );
                if align <= 16 && c > 0 {
                    assert!(
                        class_size(c - 1) < size,
                        "size {size}: a smaller class holds it"
                    );
                }
            }
        }
        assert_eq!(class_size(CLASSES - 1), MAX_SMALL);
        assert!((0..CLASSES).all(|c| class_align(c) >= 16));
    }

    #[test]
    fn blocks_are_aligned_distinct_and_reused() {
        let h = TracerHeap;
        let mut seen = Vec::new();
        for &(size, align) in &[
            (8, 8),
            (100, 16),
            (3000, 64),
            (5000, 4096),
            (40_000, 8),
            (70_000, 8),
            (70, 16384),
        ] {
            let l = Layout::from_size_align(size, align).unwrap();
            // SAFETY: a nonzero layout; the block is written within its size and freed once.
            unsafe {
                let a = h.alloc(l);
                let b = h.alloc_zeroed(l);
                assert!(!a.is_null() && !b.is_null());
                assert_eq!(a as usize % align, 0);
                assert_eq!(b as usize % align, 0);
                assert!(std::slice::from_raw_parts(b, size).iter().all(|&x| x == 0));
                ptr::write_bytes(a, 0xa5, size);
                ptr::write_bytes(b, 0x5a, size);
                assert!(std::slice::from_raw_parts(a, size)
                    .iter()
                    .all(|&x| x == 0xa5));
                seen.push((a as usize, size));
                h.dealloc(b, l);
            }
        }
        seen.sort();
        for w in seen.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "live blocks overlap");
        }
    }

    #[test]
    fn freed_blocks_are_taken_again() {
        // The 48-56 KiB class: no other test allocates in it.
        let h = TracerHeap;
        let l = Layout::from_size_align(50_000, 8).unwrap();
        // SAFETY: nonzero layouts, each block freed once.
        unsafe {
            let a = h.alloc(l);
            h.dealloc(a, l);
            let b = h.alloc(l);
            assert_eq!(a, b, "a freed block of the class is taken next");
            h.dealloc(b, l);
        }
    }

    #[test]
    fn zeroed_blocks_are_zero_fresh_or_reused() {
        // The 24-28 KiB class: no other test allocates in it. A block taken again after it
        // was written and freed is zeroed; a fresh one (never handed out) is zero unwritten.
        let h = TracerHeap;
        let l = Layout::from_size_align(25_000, 8).unwrap();
        // SAFETY: nonzero layouts, each block written within its size and freed once.
        unsafe {
            let a = h.alloc_zeroed(l);
            assert!(std::slice::from_raw_parts(a, l.size())
                .iter()
                .all(|&x| x == 0));
            ptr::write_bytes(a, 0xee, l.size());
            h.dealloc(a, l);
            let b = h.alloc_zeroed(l);
            assert_eq!(a, b, "the freed block is taken again");
            assert!(std::slice::from_raw_parts(b, l.size())
                .iter()
                .all(|&x| x == 0));
            let c = h.alloc_zeroed(l);
            assert!(std::slice::from_raw_parts(c, l.size())
                .iter()
                .all(|&x| x == 0));
            h.dealloc(b, l);
            h.dealloc(c, l);
        }
    }

    #[test]
    fn realloc_keeps_bytes_across_classes_and_mappings() {
        let h = TracerHeap;
        let l = Layout::from_size_align(10, 8).unwrap();
        // SAFETY: each pointer is the live block of the layout it is passed with.
        unsafe {
            let mut p = h.alloc(l);
            for i in 0..10 {
                *p.add(i) = i as u8;
            }
            let mut cur = l;
            for &n in &[12, 100, 40_000, 300_000, 900_000, 50, 5] {
                p = h.realloc(p, cur, n);
                assert!(!p.is_null());
                for i in 0..cur.size().min(n).min(10) {
                    assert_eq!(*p.add(i), i as u8, "byte {i} after realloc to {n}");
                }
                ptr::write_bytes(p.add(10.min(n)), 0xee, n - 10.min(n));
                cur = Layout::from_size_align(n, 8).unwrap();
            }
            h.dealloc(p, cur);
        }
    }

    #[test]
    fn re_entered_lock_maps_its_own_pages() {
        let h = TracerHeap;
        assert!(lock());
        let l = Layout::from_size_align(64, 8).unwrap();
        // SAFETY: a nonzero layout; freed while the lock is held (kept out of use).
        unsafe {
            let p = h.alloc(l);
            assert!(!p.is_null());
            assert_eq!(p as usize % PAGE, 0, "its own mapping");
            h.dealloc(p, l);
        }
        unlock();
    }

    #[test]
    fn threads_share_the_heap() {
        let ts: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    let h = TracerHeap;
                    for i in 0..20_000usize {
                        let l = Layout::from_size_align(8 + (i * 7 + t) % 2000, 8).unwrap();
                        // SAFETY: written within its size, checked, freed once.
                        unsafe {
                            let p = h.alloc(l);
                            *p = t as u8;
                            *p.add(l.size() - 1) = i as u8;
                            assert_eq!(*p, t as u8);
                            assert_eq!(*p.add(l.size() - 1), i as u8);
                            h.dealloc(p, l);
                        }
                    }
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
    }
}
