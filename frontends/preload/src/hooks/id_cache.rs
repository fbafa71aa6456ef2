//! A direct-mapped, lock-free cache of one word per id of a traced library (the HDF5 and
//! MPI-IO layers: an id's file, a datatype's size, a selection's points).

use std::sync::atomic::{fence, AtomicI64, AtomicU64, Ordering};

/// A direct-mapped, lock-free table of one word per library id (HDF5's `hid_t`, an MPI
/// file handle). Each entry: a sequence (odd
/// while written), the id, the word (0: none). Readers never wait; a writer that finds an
/// entry being written gives up (the value is simply not cached).
pub(crate) struct IdCache<const N: usize> {
    entries: [Entry; N],
}

pub(crate) struct Entry {
    seq: AtomicU64,
    key: AtomicI64,
    val: AtomicU64,
}

impl<const N: usize> IdCache<N> {
    pub(crate) const fn new() -> Self {
        IdCache {
            entries: [const {
                Entry {
                    seq: AtomicU64::new(0),
                    key: AtomicI64::new(0),
                    val: AtomicU64::new(0),
                }
            }; N],
        }
    }

    #[inline(always)]
    fn entry(&self, id: i64) -> &Entry {
        // ids are a type tag in the high bits and a counter below: spread the counter's bits.
        let h = (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        &self.entries[h as usize % N]
    }

    /// The word cached for `id`; `None` on a miss or while the entry is being written.
    #[inline(always)]
    pub(crate) fn get(&self, id: i64) -> Option<u64> {
        let e = self.entry(id);
        let s = e.seq.load(Ordering::Acquire);
        if s & 1 != 0 {
            return None;
        }
        let k = e.key.load(Ordering::Relaxed);
        let v = e.val.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        (e.seq.load(Ordering::Relaxed) == s && k == id && v != 0).then_some(v)
    }

    /// Replaces the entry's word with `val` for `id` (`only_if` Some(id): only when the entry
    /// holds that id, to forget it). Returns the word to give back: the one replaced, or
    /// `val` itself when the entry was busy.
    pub(crate) fn put(&self, id: i64, val: u64, only_if_same: bool) -> u64 {
        let e = self.entry(id);
        let s = e.seq.load(Ordering::Relaxed);
        if s & 1 != 0
            || only_if_same && e.key.load(Ordering::Relaxed) != id
            || e
                .seq
                .compare_exchange(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            return val;
        }
        fence(Ordering::Release);
        let old = if only_if_same && e.key.load(Ordering::Relaxed) != id {
            val
        } else {
            e.key.store(id, Ordering::Relaxed);
            e.val.swap(val, Ordering::Relaxed)
        };
        e.seq.store(s + 2, Ordering::Release);
        old
    }

    /// The ids held now (nonzero keys; an entry being written may show its old or new one).
    pub(crate) fn keys(&self) -> impl Iterator<Item = i64> + '_ {
        self.entries
            .iter()
            .map(|e| e.key.load(Ordering::Relaxed))
            .filter(|&k| k != 0)
    }
}
