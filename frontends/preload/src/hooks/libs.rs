//! What the library layers (HDF5, MPI-IO: libraries bound where they are loaded, see
//! `hdf5.rs`) share: their function tables (`reals!`), resolving them from the one object
//! that defines them ([`resolve_in`]), their hook entries ([`entries`]), and a lock-free
//! cache of one word per library id ([`IdCache`]).

use std::ffi::CStr;
use std::sync::atomic::{fence, AtomicI64, AtomicU64, AtomicUsize, Ordering};

use super::HookEntry;

/// A layer's function table: `enum R` (one variant per function, in order), `NAMES` (their
/// C names), `REAL` (their addresses once resolved) and `real::<F>(R::x)` (the address as
/// function type `F`; every use must name `x`'s C signature).
macro_rules! reals {
    ($($name:ident),* $(,)?) => {
        #[derive(Clone, Copy)]
        #[repr(usize)]
        enum R { $($name),* }
        const NAMES: &[&CStr] = &[$(
            match CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
                Ok(c) => c,
                Err(_) => panic!("name"),
            }
        ),*];
        static REAL: [AtomicUsize; NAMES.len()] = [const { AtomicUsize::new(0) }; NAMES.len()];
        #[inline(always)]
        fn real<F: Copy>(r: R) -> Option<F> {
            // SAFETY: REAL[r] is 0 or the address of the function named `NAMES[r]`, whose C
            // signature is `F` at every call site of the module.
            unsafe { $crate::hooks::libs::real_at(&REAL, r as usize) }
        }
    };
}
pub(crate) use reals;

/// The address stored at `table[i]` as function type `F` (`None` before it was resolved).
///
/// # Safety
/// `table[i]` holds 0 or the address of a function whose C signature is `F`.
#[inline(always)]
pub(crate) unsafe fn real_at<F: Copy>(table: &[AtomicUsize], i: usize) -> Option<F> {
    let p = table[i].load(Ordering::Relaxed);
    if p == 0 {
        return None;
    }
    debug_assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<usize>());
    // SAFETY: the caller's contract.
    Some(unsafe { std::mem::transmute_copy::<usize, F>(&p) })
}

/// The addresses of `names` in the object `name` (already loaded: NOLOAD never loads; the
/// handle is kept, so the object is never unloaded under a bound slot), and the handle. `Err`
/// names what is missing (names whose index `optional` accepts may be absent: 0).
pub(crate) fn resolve_in(
    name: &CStr,
    names: &[&CStr],
    optional: impl Fn(usize) -> bool,
) -> Result<(*mut libc::c_void, Vec<usize>), String> {
    // SAFETY: a C string; NOLOAD never loads.
    let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
    if h.is_null() {
        return Err("not found by name".into());
    }
    let mut got = vec![0usize; names.len()];
    let mut missing = Vec::new();
    for (i, n) in names.iter().enumerate() {
        // SAFETY: a live handle and a C string.
        got[i] = unsafe { libc::dlsym(h, n.as_ptr()) } as usize;
        if got[i] == 0 && !optional(i) {
            missing.push(n.to_string_lossy().into_owned());
        }
    }
    if !missing.is_empty() {
        // SAFETY: our own reference from above.
        unsafe { libc::dlclose(h) };
        return Err(format!("missing {}", missing.join(", ")));
    }
    Ok((h, got))
}

/// The hook entries of a layer: `addrs[i]` (our hook) for `names[i]`, forwarding to
/// `real[i]`; names not resolved are left out.
pub(crate) fn entries(
    names: &[&'static CStr],
    addrs: &[*const ()],
    real: &[AtomicUsize],
) -> Vec<HookEntry> {
    addrs
        .iter()
        .enumerate()
        .map(|(i, &addr)| HookEntry {
            name: names[i],
            addr,
            real: real[i].load(Ordering::Relaxed),
        })
        .filter(|h| h.real != 0)
        .collect()
}

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
