//! The writer's `path → hash` table: which paths already have their `FH` record in the
//! current file.
//!
//! At most `cap` entries (CLOCK eviction: an entry not looked up since the hand last passed
//! is replaced). The index is open addressing with linear probing over slots that hold an
//! entry's number and the high half of its path's hash, so a lookup compares path bytes
//! only at a matching tag, and growing the index or removing a slot (backward shift) never
//! hashes a path again. A path is hashed once per call. Memory: `cap` × (entry ~56 B + at
//! most 16 B of index + the path).

use std::cell::Cell;
use std::hash::Hasher;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::hash::{FastHasher, Hash16};

/// Default capacity of the writer's [`PathTable`].
pub const PATHS_CAP: usize = 1 << 16;
const MARK_IDX_BITS: u32 = 20;
/// Slots of a new index (grown by doubling while entries fill more than half of it).
const FIRST_SLOTS: usize = 1024;

/// Stamps of path-table entries, unique in the process (a fork child continues the count).
static STAMP: AtomicU64 = AtomicU64::new(1);

struct Entry {
    path: Box<[u8]>,
    hash: Hash16,
    stamp: u64,
    used: Cell<bool>,
}

/// See the module docs.
pub struct PathTable {
    /// 0: empty; else `tag << 32 | (entry + 1)`, `tag` the high half of the path's hash
    /// (whose low bits are its home slot).
    slots: Vec<u64>,
    entries: Vec<Entry>,
    hand: usize,
    cap: usize,
}

/// A path's hash, high half: the slot tag (and, masked, its home).
#[inline]
fn tag_of(path: &[u8]) -> u32 {
    let mut h = FastHasher::default();
    h.write(path);
    (h.finish() >> 32) as u32
}

impl PathTable {
    pub fn new(cap: usize) -> PathTable {
        assert!(cap > 0 && cap < 1 << MARK_IDX_BITS);
        PathTable {
            slots: Vec::new(),
            entries: Vec::new(),
            hand: 0,
            cap,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    /// The slot holding `path` (tag `tag`), or the empty slot where it would go.
    #[inline]
    fn probe(&self, path: &[u8], tag: u32) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        let mut s = tag as usize & mask;
        loop {
            let v = self.slots[s];
            if v == 0 {
                return Err(s);
            }
            if (v >> 32) as u32 == tag && *self.entries[(v as u32 - 1) as usize].path == *path {
                return Ok(s);
            }
            s = (s + 1) & mask;
        }
    }

    fn find(&self, path: &[u8]) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let s = self.probe(path, tag_of(path)).ok()?;
        let i = (self.slots[s] as u32 - 1) as usize;
        self.entries[i].used.set(true);
        Some(i)
    }

    fn mark_of(&self, i: usize) -> u64 {
        self.entries[i].stamp << MARK_IDX_BITS | i as u64
    }

    pub fn contains_key(&self, path: &[u8]) -> bool {
        self.find(path).is_some()
    }

    pub fn get(&self, path: &[u8]) -> Option<&Hash16> {
        self.find(path).map(|i| &self.entries[i].hash)
    }

    /// Adds `path` (its `FH` was just written), evicting an entry when full; returns the
    /// entry's mark for [`PathTable::marked`].
    pub fn insert(&mut self, path: &[u8], hash: Hash16) -> u64 {
        // Grown while entries are added (at most half full), not once the table evicts.
        if self.entries.len() < self.cap && 2 * (self.entries.len() + 1) > self.slots.len() {
            self.grow();
        }
        let tag = tag_of(path);
        let free = match self.probe(path, tag) {
            Ok(s) => {
                let i = (self.slots[s] as u32 - 1) as usize;
                self.entries[i].hash = hash;
                self.entries[i].used.set(true);
                return self.mark_of(i);
            }
            Err(s) => s,
        };
        let entry = Entry {
            path: path.into(),
            hash,
            stamp: STAMP.fetch_add(1, Ordering::Relaxed),
            used: Cell::new(true),
        };
        let evicted = self.entries.len() >= self.cap;
        let i = if !evicted {
            self.entries.push(entry);
            self.entries.len() - 1
        } else {
            let i = loop {
                let i = self.hand;
                self.hand = (self.hand + 1) % self.cap;
                if !self.entries[i].used.replace(false) {
                    break i;
                }
            };
            self.remove(i);
            self.entries[i] = entry;
            i
        };
        // An eviction's removal may have opened a hole before `free` on this path's probe
        // chain: probe again.
        let free = if evicted {
            self.probe(path, tag).err().unwrap_or(free)
        } else {
            free
        };
        self.slots[free] = (tag as u64) << 32 | (i as u64 + 1);
        self.mark_of(i)
    }

    /// Removes entry `i`'s slot, shifting back the slots after it that may not stay
    /// (linear probing's deletion: no tombstones).
    fn remove(&mut self, i: usize) {
        let path = &self.entries[i].path;
        let Ok(mut hole) = self.probe(path, tag_of(path)) else {
            return;
        };
        let mask = self.slots.len() - 1;
        let mut s = hole;
        loop {
            s = (s + 1) & mask;
            let v = self.slots[s];
            if v == 0 {
                break;
            }
            let home = (v >> 32) as usize & mask;
            // The slot stays when its home lies cyclically in (hole, s].
            let stays = if hole < s {
                hole < home && home <= s
            } else {
                hole < home || home <= s
            };
            if !stays {
                self.slots[hole] = v;
                hole = s;
            }
        }
        self.slots[hole] = 0;
    }

    /// Doubles the index (re-placing each slot by its tag).
    #[cold]
    fn grow(&mut self) {
        let n = (self.slots.len() * 2).max(FIRST_SLOTS);
        let old = std::mem::replace(&mut self.slots, vec![0; n]);
        for v in old.into_iter().filter(|&v| v != 0) {
            let mut s = (v >> 32) as usize & (n - 1);
            while self.slots[s] != 0 {
                s = (s + 1) & (n - 1);
            }
            self.slots[s] = v;
        }
    }

    /// Whether `mark` (from [`PathTable::insert`] or [`PathTable::mark_for`]) still names an
    /// entry of this table (its `FH` is in this file); counts as a use of the entry.
    pub fn marked(&self, mark: u64) -> bool {
        let i = (mark & ((1 << MARK_IDX_BITS) - 1)) as usize;
        match self.entries.get(i) {
            Some(e) if mark != 0 && e.stamp == mark >> MARK_IDX_BITS => {
                e.used.set(true);
                true
            }
            _ => false,
        }
    }

    /// The mark of `path`'s entry, if it has one.
    pub fn mark_for(&self, path: &[u8]) -> Option<u64> {
        self.find(path).map(|i| self.mark_of(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_table_capacity_eviction_and_marks() {
        let mut t = PathTable::new(4);
        let marks: Vec<u64> = (0..4)
            .map(|i| t.insert(format!("/p/{i}").as_bytes(), [b'a'; 16]))
            .collect();
        assert!(marks.iter().all(|&m| t.marked(m)));
        // All used: the hand clears every bit, then evicts /p/0.
        let m4 = t.insert(b"/p/4", [b'b'; 16]);
        assert_eq!(t.len(), 4);
        assert!(!t.contains_key(b"/p/0") && !t.marked(marks[0]));
        assert!(t.marked(m4) && t.get(b"/p/4") == Some(&[b'b'; 16]));
        // /p/1 was looked up (marked) since the hand passed; /p/2 and /p/3 were not.
        assert!(t.marked(marks[1]));
        t.insert(b"/p/5", [b'c'; 16]);
        assert!(t.contains_key(b"/p/1") && !t.contains_key(b"/p/2"));
        // Coming back: a new entry, a new mark; the old mark stays invalid.
        let again = t.insert(b"/p/0", [b'a'; 16]);
        assert!(t.marked(again) && again != marks[0] && !t.marked(marks[0]));
        assert_eq!(t.len(), 4);
        assert_eq!(t.slots.iter().filter(|&&v| v != 0).count(), 4);
    }

    /// Against a model (a `HashMap` of what the table keeps), through growth and many
    /// evictions (each a backward shift in the index), one slot per entry throughout.
    #[test]
    fn path_table_agrees_with_a_model() {
        use std::collections::HashMap;
        for cap in [1, 3, 64, 512, 700, 5000] {
            let mut t = PathTable::new(cap);
            let mut model: HashMap<Vec<u8>, Hash16> = HashMap::new();
            let mut x = 0x9e37_79b9u64 ^ cap as u64;
            for step in 0..20_000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let p = format!("/data/{}/f{:05}.bin", x % 7, x % (3 * cap as u64 + 11));
                let h = crate::hash::hash16(p.as_bytes());
                match t.get(p.as_bytes()) {
                    Some(got) => assert_eq!(Some(got), model.get(p.as_bytes()), "{p}"),
                    None => {
                        let m = t.insert(p.as_bytes(), h);
                        assert!(t.marked(m) && t.mark_for(p.as_bytes()) == Some(m));
                        model.insert(p.into_bytes(), h);
                        // The model keeps what the table keeps.
                        model.retain(|k, _| t.contains_key(k));
                    }
                }
                assert!(t.len() <= cap && model.len() == t.len(), "step {step}");
                let filled = t.slots.iter().filter(|&&v| v != 0).count();
                assert_eq!(filled, t.len(), "step {step}: one slot per entry");
            }
            // Every entry is found by its path, and every slot names a distinct entry; the
            // index is at most half full and no larger than the capacity needs.
            for (i, e) in t.entries.iter().enumerate() {
                assert_eq!(t.find(&e.path), Some(i));
            }
            let need = (2 * cap).next_power_of_two().max(FIRST_SLOTS);
            assert!(t.slots.len() == need, "{} slots for {cap}", t.slots.len());
        }
    }
}
