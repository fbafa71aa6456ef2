//! Call sites of the C/C++ API: what a region begun at a known place can skip.
//!
//! - [`site_schema`]: the (name, category) pointers of a call site (string literals, as the
//!   macros pass them) and the interned schema they name, so that a region copies no
//!   strings. The strings are compared with the schema's every time (a word at a time).
//! - [`keyed_schema`]: a region schema with integer args under fixed keys (two
//!   `_UPDATE_INT`s), recorded as the core's keyed static record.
//!
//! Each table slot is filled once and never replaced or freed: a call site that hashes to a
//! slot another site holds takes the general path, with no allocation per call.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicPtr, Ordering};

use dftracer_core::{Layer, Schema};
use libc::c_char;

/// A call site's strings and the schema they intern to. Entries are never freed (at most
/// one per slot), so a reader may hold one without a lock.
struct Site {
    name: usize,
    cat: usize,
    layer: Layer,
    schema: &'static Schema,
    /// The schema's name and category as words, for [`same`].
    name_w: Words,
    cat_w: Words,
    /// Both strings' words lie in their pages at these addresses: [`site_schema`] compares
    /// them a word at a time with no further check.
    words_in_page: bool,
}

/// A string's bytes and its NUL as little-endian words with the masks of their bytes, for
/// strings of up to 31 bytes (`n` 0: longer, compared a byte at a time).
#[derive(Clone, Copy)]
struct Words {
    w: [u64; 4],
    mask: [u64; 4],
    /// Words used: `(len + 1).div_ceil(8)`.
    n: usize,
}

impl Words {
    fn of(s: &[u8]) -> Words {
        let (mut w, mut mask) = ([0u64; 4], [0u64; 4]);
        if s.len() >= 32 {
            return Words { w, mask, n: 0 };
        }
        for i in 0..=s.len() {
            let b = s.get(i).copied().unwrap_or(0);
            w[i / 8] |= (b as u64) << (8 * (i % 8));
            mask[i / 8] |= 0xff << (8 * (i % 8));
        }
        Words {
            w,
            mask,
            n: (s.len() + 1).div_ceil(8),
        }
    }
}

const PAGE: usize = 4096;

/// The 8 bytes at `a`, read by one load outside the language's object model: they may run
/// past the end of the C string there, which is harmless on a mapped page.
///
/// # Safety
/// `a` is the address of a byte of a mapped page, and `a + 8` is not past that page's end.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn load_word(a: usize) -> u64 {
    let v: u64;
    // SAFETY: the caller's contract: the 8 bytes lie in one mapped page; the load changes
    // nothing but `v`.
    unsafe {
        std::arch::asm!("mov {v}, qword ptr [{a}]", v = out(reg) v, a = in(reg) a,
                        options(nostack, readonly, preserves_flags))
    };
    v
}

/// Whether the C string at `p` is exactly `s`, whose words `w` holds: a word at a time when
/// they lie in one page, else (or for a string too long for [`Words`]) a byte at a time. Word
/// i is read only when words 0..i matched `w`'s (no NUL in them), so its first byte is a byte
/// of `p`'s string, on the page of `p`.
#[inline(always)]
fn same(p: *const c_char, w: &Words, s: &[u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let a = p as usize;
        if w.n != 0 && a % PAGE + w.n * 8 <= PAGE {
            for i in 0..w.n {
                // SAFETY: as above: byte `a + 8i` is `p`'s, and the word is within the page.
                if unsafe { load_word(a + 8 * i) } & w.mask[i] != w.w[i] {
                    return false;
                }
            }
            return true;
        }
    }
    same_c_str(p, s)
}

const SITE_SLOTS: usize = 1024;
static SITES: [AtomicPtr<Site>; SITE_SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SITE_SLOTS];

fn site_slot(name: usize, cat: usize, layer: Layer) -> &'static AtomicPtr<Site> {
    let h = (name ^ cat.rotate_left(17) ^ layer as usize).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    &SITES[h >> (usize::BITS - SITE_SLOTS.trailing_zeros())]
}

/// Whether the C string at `p` is exactly `s` (`s` holds no NUL: interned strings are plain).
/// Reads `p` no further than its first byte that differs from `s`, or its NUL.
#[inline]
fn same_c_str(p: *const c_char, s: &[u8]) -> bool {
    for (i, &b) in s.iter().enumerate() {
        // SAFETY: bytes 0..i of `p` equal `s`'s, none of them NUL, so `p`'s string goes on at
        // least to byte i.
        if unsafe { *p.add(i) } as u8 != b {
            return false;
        }
    }
    // SAFETY: as above, for byte `s.len()`.
    unsafe { *p.add(s.len()) == 0 }
}

/// The schema a region begun at this call site records, when an earlier region of the same
/// `name` and `cat` pointers (string literals, as the macros pass them) found one. The strings
/// are compared with the schema's every time, so a buffer reused for another name, or a library
/// unloaded and another mapped in its place, never gets a stale name: it misses.
#[inline(always)]
pub fn site_schema(
    name: *const c_char,
    cat: *const c_char,
    layer: Layer,
) -> Option<&'static Schema> {
    if name.is_null() || cat.is_null() {
        return None;
    }
    let e = site_slot(name as usize, cat as usize, layer).load(Ordering::Acquire);
    if e.is_null() {
        return None;
    }
    // SAFETY: published entries are never freed.
    let e = unsafe { &*e };
    if e.name != name as usize || e.cat != cat as usize || e.layer != layer {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    if e.words_in_page {
        // SAFETY: the entry's addresses are these; their words lie in their pages (checked
        // when the entry was made), and word i is read only when words 0..i matched (no NUL
        // in them), so it starts inside the string.
        let ok = unsafe { same_words(e.name, &e.name_w) && same_words(e.cat, &e.cat_w) };
        return ok.then_some(e.schema);
    }
    (same(name, &e.name_w, e.schema.name().as_bytes())
        && same(cat, &e.cat_w, e.schema.cat().as_bytes()))
    .then_some(e.schema)
}

/// Whether the string at `a` holds `w`'s words (the first one unrolled: most names fit it).
///
/// # Safety
/// `w.n >= 1`, and the `w.n` words from `a` lie in the page of `a`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn same_words(a: usize, w: &Words) -> bool {
    // SAFETY: the caller's contract.
    if unsafe { load_word(a) } & w.mask[0] != w.w[0] {
        return false;
    }
    let mut i = 1;
    while i < w.n {
        // SAFETY: the caller's contract; words 0..i matched (no NUL in them).
        if unsafe { load_word(a + 8 * i) } & w.mask[i] != w.w[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether the `w.n` words from `a` lie in its page (`w.n` 0: no words).
fn in_page(a: usize, w: &Words) -> bool {
    w.n != 0 && a % PAGE + w.n * 8 <= PAGE
}

/// Remembers that this call site's strings intern to `schema` (see [`site_schema`]).
pub fn remember_site(
    name: *const c_char,
    cat: *const c_char,
    layer: Layer,
    schema: &'static Schema,
) {
    let slot = site_slot(name as usize, cat as usize, layer);
    if name.is_null() || cat.is_null() || !slot.load(Ordering::Relaxed).is_null() {
        return;
    }
    let name_w = Words::of(schema.name().as_bytes());
    let cat_w = Words::of(schema.cat().as_bytes());
    publish_once(
        slot,
        Site {
            name: name as usize,
            cat: cat as usize,
            layer,
            schema,
            name_w,
            cat_w,
            words_in_page: in_page(name as usize, &name_w) && in_page(cat as usize, &cat_w),
        },
    );
}

/// Publishes `v` in the empty `slot` (filled once, never replaced or freed); dropped if
/// another thread filled it first.
pub fn publish_once<T>(slot: &AtomicPtr<T>, v: T) {
    let e = Box::into_raw(Box::new(v));
    if slot
        .compare_exchange(
            std::ptr::null_mut(),
            e,
            Ordering::Release,
            Ordering::Relaxed,
        )
        .is_err()
    {
        // SAFETY: `e` came from Box::into_raw above and was never published.
        drop(unsafe { Box::from_raw(e) });
    }
}

/// Integer args a region may have and still be recorded through a keyed schema.
pub const MAX_KEYED: usize = 4;

/// A region schema with integer args under fixed keys, `base`'s name and category and these
/// `keys`: the core's keyed schema, or `None` when the core refused them (keys that need
/// escaping, `hhash`, its table full), remembered too so that a refused key set costs no
/// allocation per call.
struct KeyedSite {
    base: usize,
    keys: &'static [(&'static str, dftracer_core::Slot)],
    keyed: Option<&'static Schema>,
}

static KEYED: [AtomicPtr<KeyedSite>; SITE_SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SITE_SLOTS];

fn keyed_slot(base: &'static Schema, keys: &[&[u8]]) -> &'static AtomicPtr<KeyedSite> {
    let mut h = base as *const Schema as usize ^ keys.len();
    for k in keys {
        let mut w = [0u8; 8];
        let n = k.len().min(8);
        w[..n].copy_from_slice(&k[..n]);
        h = h.rotate_left(13) ^ usize::from_le_bytes(w) ^ k.len();
    }
    let h = h.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    &KEYED[h >> (usize::BITS - SITE_SLOTS.trailing_zeros())]
}

/// The keyed schema of `base` with integer args under `keys` (in this order), or `None`
/// (keys that need escaping, `hhash`, the core's table full: the region takes the general
/// path).
pub fn keyed_schema(base: &'static Schema, keys: &[&[u8]]) -> Option<&'static Schema> {
    let slot = keyed_slot(base, keys);
    let e = slot.load(Ordering::Acquire);
    if !e.is_null() {
        // SAFETY: published entries are never freed.
        let e = unsafe { &*e };
        let same = e.base == base as *const Schema as usize
            && e.keys.len() == keys.len()
            && e.keys.iter().zip(keys).all(|(a, b)| a.0.as_bytes() == *b);
        // Another key set's slot: the general path.
        return if same { e.keyed } else { None };
    }
    // Interning allocates: the program's errno stays its own.
    let _errno = crate::SavedErrno::new();
    let mut owned: Vec<(&'static str, dftracer_core::Slot)> = Vec::with_capacity(keys.len());
    for k in keys {
        let k = std::str::from_utf8(k).ok()?;
        owned.push((
            Box::leak(k.to_owned().into_boxed_str()),
            dftracer_core::Slot::Int,
        ));
    }
    let owned: &'static [(&'static str, dftracer_core::Slot)] = Box::leak(owned.into_boxed_slice());
    let keyed = dftracer_core::intern_keyed(
        base.layer(),
        base.name().as_bytes(),
        base.cat().as_bytes(),
        owned,
    );
    publish_once(
        slot,
        KeyedSite {
            base: base as *const Schema as usize,
            keys: owned,
            keyed,
        },
    );
    keyed
}

/// What a frame's int args under these key pointers record: the keyed schema (`None`: the
/// general path) and whether the two pointers hold one text (one arg, the later value).
#[derive(Clone, Copy)]
pub struct KeyedPtrs {
    pub keyed: Option<&'static Schema>,
    pub dup: bool,
}

/// A frame's key pointers, their texts when first seen, and what they record. Never freed
/// (one per slot).
struct KeyedPtrSite {
    base: usize,
    ptrs: [usize; 2],
    n: usize,
    words: [Words; 2],
    texts: [&'static [u8]; 2],
    found: KeyedPtrs,
    /// Every key's words lie in its page at its address (see [`Site::words_in_page`]).
    words_in_page: bool,
}

static KEYED_PTRS: [AtomicPtr<KeyedPtrSite>; SITE_SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SITE_SLOTS];

fn keyed_ptr_slot(
    base: &'static Schema,
    keys: &[*const c_char],
) -> &'static AtomicPtr<KeyedPtrSite> {
    let mut h = base as *const Schema as usize ^ keys.len();
    for &k in keys {
        h = h.rotate_left(17) ^ k as usize;
    }
    let h = h.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    &KEYED_PTRS[h >> (usize::BITS - SITE_SLOTS.trailing_zeros())]
}

/// [`keyed_schema`] for a frame's key pointers (one or two), when an earlier region of
/// `base` found it under the same pointers and the texts there are still the same (compared
/// a word at a time, as [`site_schema`] does: a buffer reused for another key misses).
#[inline(always)]
pub fn keyed_by_ptrs(base: &'static Schema, keys: &[*const c_char]) -> Option<KeyedPtrs> {
    let e = keyed_ptr_slot(base, keys).load(Ordering::Acquire);
    // SAFETY: published entries are never freed.
    let e = unsafe { e.as_ref() }?;
    if e.base != base as *const Schema as usize || e.n != keys.len() {
        return None;
    }
    #[cfg(target_arch = "x86_64")]
    if e.words_in_page {
        for (i, &k) in keys.iter().enumerate() {
            // SAFETY: as in `site_schema`: the entry's address, its words in its page (checked
            // when the entry was made), each word read only when the ones before matched.
            if e.ptrs[i] != k as usize || !unsafe { same_words(e.ptrs[i], &e.words[i]) } {
                return None;
            }
        }
        return Some(e.found);
    }
    for (i, &k) in keys.iter().enumerate() {
        if e.ptrs[i] != k as usize || k.is_null() || !same(k, &e.words[i], e.texts[i]) {
            return None;
        }
    }
    Some(e.found)
}

/// Remembers what `keys` (pointers, with the texts `texts` they hold now) record under
/// `base` (see [`keyed_by_ptrs`]).
pub fn remember_keyed_ptrs(
    base: &'static Schema,
    keys: &[*const c_char],
    texts: &[&[u8]],
    found: KeyedPtrs,
) {
    let slot = keyed_ptr_slot(base, keys);
    if keys.is_empty() || keys.len() > 2 || !slot.load(Ordering::Relaxed).is_null() {
        return;
    }
    let _errno = crate::SavedErrno::new();
    let mut ptrs = [0usize; 2];
    let mut words = [Words::of(b""); 2];
    let mut owned: [&'static [u8]; 2] = [b""; 2];
    let mut words_in_page = true;
    for i in 0..keys.len() {
        ptrs[i] = keys[i] as usize;
        owned[i] = Box::leak(texts[i].to_vec().into_boxed_slice());
        words[i] = Words::of(owned[i]);
        words_in_page &= !keys[i].is_null() && in_page(ptrs[i], &words[i]);
    }
    publish_once(
        slot,
        KeyedPtrSite {
            base: base as *const Schema as usize,
            ptrs,
            n: keys.len(),
            words,
            texts: owned,
            found,
            words_in_page,
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_compare_as_strings_do() {
        let names: &[&[u8]] = &[
            b"",
            b"a",
            b"fn",
            b"C_APP",
            b"seven77",
            b"eight888",
            b"nine99999",
            b"compute_forces_kernel",
            b"exactly_thirty_one_bytes_long__",
            b"thirty_two_bytes_long_name______",
        ];
        for &a in names {
            let w = Words::of(a);
            assert_eq!(w.n == 0, a.len() >= 32);
            for &b in names {
                let c = std::ffi::CString::new(b).unwrap();
                assert_eq!(same(c.as_ptr(), &w, a), a == b, "{:?} vs {:?}", a, b);
            }
            // A prefix or an extension of it is another string.
            let mut longer = a.to_vec();
            longer.push(b'x');
            let c = std::ffi::CString::new(longer).unwrap();
            assert!(!same(c.as_ptr(), &w, a));
        }
    }

    #[test]
    fn a_string_that_ends_at_a_page_end_is_read_within_it() {
        // Two pages, the second inaccessible: each string ends (its NUL) on the last byte of
        // the first, so reading a word past it would fault.
        // SAFETY: an anonymous mapping of our own, unmapped at the end.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        } as *mut u8;
        assert!(base as *mut libc::c_void != libc::MAP_FAILED);
        // SAFETY: the second page of the mapping above.
        let r =
            unsafe { libc::mprotect(base.add(PAGE) as *mut libc::c_void, PAGE, libc::PROT_NONE) };
        assert_eq!(r, 0);
        for s in [&b"fn"[..], b"C_APP", b"eight888", b"compute_forces_kernel"] {
            for other in [&b"fn"[..], b"fx", b"C_APP", b"compute_forces_kernex"] {
                // SAFETY: within the first page; the NUL is its last byte.
                let p = unsafe {
                    let p = base.add(PAGE - other.len() - 1);
                    std::ptr::copy_nonoverlapping(other.as_ptr(), p, other.len());
                    *base.add(PAGE - 1) = 0;
                    p
                };
                let w = Words::of(s);
                assert_eq!(
                    same(p as *const c_char, &w, s),
                    s == other,
                    "{:?} at a page end vs {:?}",
                    other,
                    s
                );
            }
        }
        // SAFETY: our own mapping.
        unsafe { libc::munmap(base as *mut libc::c_void, 2 * PAGE) };
    }
}
