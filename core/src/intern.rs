//! [`Schema`]s made at run time, for names a frontend knows before the events: a decorated
//! Python function's name and category, fixed when the decorator is applied.
//!
//! An event of such a schema is a [`crate::complete_static`] record: the ring carries the
//! schema's address instead of copies of the two strings, and the writer renders the line
//! from the schema's cached template instead of escaping and hashing the strings again
//! (the same line [`crate::complete`] writes for that name and category without args).
//!
//! The table is fixed (no lock, no allocation on a lookup): [`SLOTS`] entries, each set once
//! with a compare-and-swap and never freed, so a schema handed out stays valid for the
//! process's life (fork children included). A name or category that would need escaping,
//! a long one, or a full neighbourhood of the table gives `None`: the caller records with
//! [`crate::complete`] as before. At most [`SLOTS`] schemas (and their strings, at most
//! 2 × [`MAX_LEN`] bytes each) are ever allocated.

#![allow(unsafe_code)]

use crate::event::{ArgsSchema, Layer, Schema, Slot};
use std::sync::atomic::{AtomicPtr, Ordering};

/// Entries of the table.
pub const SLOTS: usize = 4096;
/// Entries looked at from a name's home slot.
const PROBES: usize = 8;
/// Longest name or category interned (bytes).
pub const MAX_LEN: usize = 256;

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: AtomicPtr<Schema> = AtomicPtr::new(std::ptr::null_mut());
static TABLE: [AtomicPtr<Schema>; SLOTS] = [EMPTY; SLOTS];

/// Printable ASCII without `"` or `\` (what [`Schema::new`] requires).
fn plain(s: &[u8]) -> bool {
    crate::format::plain_text(s)
}

/// A word of `s` for hashing: its first and last 8 bytes (4 below 8 bytes, overlapping; the
/// bytes themselves below 4), folded with its length. Cheap for the short names this table holds; collisions
/// only cost a probe (every hit compares the bytes).
#[inline(always)]
fn word(s: &[u8]) -> u64 {
    let n = s.len();
    let (a, b) = if n >= 8 {
        let a = u64::from_le_bytes(s[..8].try_into().unwrap_or_default());
        let b = u64::from_le_bytes(s[n - 8..].try_into().unwrap_or_default());
        (a, b)
    } else if n >= 4 {
        let a = u32::from_le_bytes(s[..4].try_into().unwrap_or_default());
        let b = u32::from_le_bytes(s[n - 4..].try_into().unwrap_or_default());
        (a as u64 | (b as u64) << 32, 0)
    } else {
        let a = s.iter().fold(0u64, |h, &c| h << 8 | c as u64);
        (a, 0)
    };
    (a ^ b.rotate_left(29) ^ n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Arg keys of a keyed schema: `(key, slot)` in order.
pub type Keys = &'static [(&'static str, Slot)];

#[inline(always)]
fn home(layer: Layer, name: &[u8], cat: &[u8], n: usize, first: Option<&[u8]>) -> usize {
    let (keys, first) = (n, first.map_or(0, word));
    let h = word(name)
        ^ word(cat).rotate_left(17)
        ^ layer as u64
        ^ (keys as u64) << 8
        ^ first.rotate_left(41);
    let h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    (h ^ (h >> 32)) as usize
}

#[inline(always)]
fn same(s: &Schema, layer: Layer, name: &[u8], cat: &[u8]) -> bool {
    s.layer == layer && eq(s.name.as_bytes(), name) && eq(s.cat.as_bytes(), cat)
}

/// `a == b`, without a call for the short strings this table holds: up to 16 bytes as two
/// overlapping words.
#[inline(always)]
fn eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let w8 = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().unwrap_or_default());
    let w4 = |s: &[u8], i: usize| u32::from_le_bytes(s[i..i + 4].try_into().unwrap_or_default());
    let short = |s: &[u8]| s.iter().fold(0u32, |w, &c| w << 8 | c as u32);
    match n {
        0..=3 => short(a) == short(b),
        4..=7 => w4(a, 0) == w4(b, 0) && w4(a, n - 4) == w4(b, n - 4),
        8..=16 => w8(a, 0) == w8(b, 0) && w8(a, n - 8) == w8(b, n - 8),
        _ => a == b,
    }
}

/// The schema of events named `name` in `cat` on `layer`, with no args: the same one for the
/// same three values, or `None` (see the module docs) when the caller must record with
/// [`crate::complete`].
pub fn intern(layer: Layer, name: &[u8], cat: &[u8]) -> Option<&'static Schema> {
    intern_keyed(layer, name, cat, &[])
}

/// The schema of events named `name` in `cat` on `layer` whose args are integer values under
/// `keys` (in this order, each rendered as its [`Slot`] says, no file): a decorated Python
/// function's captured `step`, `epoch`, ... The same one for the same values (keys compared
/// by content), or `None` as for [`intern`], and also for keys that need escaping, a key
/// `hhash`, a slot that is not an integer (see [`intern_args`]), or
/// [`crate::event::MAX_ARGS`] keys or more.
pub fn intern_keyed(layer: Layer, name: &[u8], cat: &[u8], keys: Keys) -> Option<&'static Schema> {
    if !keys.iter().all(|k| k.1.is_int()) {
        return None;
    }
    let first = keys.first().map(|k| k.0.as_bytes());
    lookup(
        layer,
        name,
        cat,
        (keys.len(), first),
        |s| s.keys == keys,
        || keys_ok(keys).then_some(keys),
    )
}

/// The schema of events named `name` in `cat` on `layer` whose args are `keys`, in this
/// order, each with the kind of its value ([`Slot::Float`], [`Slot::Bool`] and
/// [`Slot::Str`] included): a `log_event` call's dicts. As [`intern_keyed`], with the keys
/// compared by content and copied once, when their schema is made (at most [`SLOTS`]
/// schemas, so at most that many copies); also `None` for keys longer than [`MAX_LEN`]
/// bytes together (so the table's strings stay under `SLOTS` × 3 × `MAX_LEN` bytes).
/// Whether its events are static or mixed records is decided here, once, by its slots.
pub fn intern_args(
    layer: Layer,
    name: &[u8],
    cat: &[u8],
    keys: &[(&[u8], Slot)],
) -> Option<ArgsSchema> {
    lookup(
        layer,
        name,
        cat,
        (keys.len(), keys.first().map(|k| k.0)),
        |s| {
            s.keys.len() == keys.len()
                && s.keys
                    .iter()
                    .zip(keys)
                    .all(|(a, b)| a.1 == b.1 && eq(a.0.as_bytes(), b.0))
        },
        || {
            let ok = keys.len() < crate::event::MAX_ARGS
                && keys.iter().map(|k| k.0.len()).sum::<usize>() <= MAX_LEN
                && keys.iter().all(|(k, _)| plain(k) && *k != b"hhash");
            ok.then(|| leak_keys(keys))
        },
    )
    .map(ArgsSchema::of)
}

/// A leaked copy of `keys` (plain ASCII, checked by the caller): one allocation for the
/// strings, one for the list.
fn leak_keys(keys: &[(&[u8], Slot)]) -> Keys {
    let text: Vec<u8> = keys.iter().flat_map(|k| k.0.iter().copied()).collect();
    let mut text: &'static str = Box::leak(
        String::from_utf8(text)
            .expect("plain ASCII")
            .into_boxed_str(),
    );
    let list: Vec<(&'static str, Slot)> = keys
        .iter()
        .map(|&(k, slot)| {
            let (key, rest) = text.split_at(k.len());
            text = rest;
            (key, slot)
        })
        .collect();
    Box::leak(list.into_boxed_slice())
}

/// The table's entry for (`layer`, `name`, `cat`) and keys that `same_keys` recognises
/// (`shape`: their count and first key, for the home slot); at an empty slot, a schema made
/// with the keys `new_keys` gives (`None`: keys that cannot be a schema's).
#[inline(always)]
fn lookup(
    layer: Layer,
    name: &[u8],
    cat: &[u8],
    shape: (usize, Option<&[u8]>),
    same_keys: impl Fn(&Schema) -> bool,
    new_keys: impl FnOnce() -> Option<Keys>,
) -> Option<&'static Schema> {
    if name.len() > MAX_LEN || cat.len() > MAX_LEN {
        return None;
    }
    let h = home(layer, name, cat, shape.0, shape.1);
    let (mut new_keys, mut keys) = (Some(new_keys), None);
    for i in 0..PROBES {
        let slot = &TABLE[(h + i) & (SLOTS - 1)];
        let mut p = slot.load(Ordering::Acquire);
        if p.is_null() {
            // Only plain strings are stored, so a hit (equal bytes) is plain too.
            if !plain(name) || !plain(cat) {
                return None;
            }
            // The keys are made (copied, for `intern_args`) once per call: a lost race below
            // probes on, and may use them at the next empty slot. A slot is filled once, so
            // copies lost to races are bounded too.
            let k = match keys {
                Some(k) => k,
                None => *keys.insert(new_keys.take().and_then(|f| f())?),
            };
            let made = make(layer, name, cat, k);
            match slot.compare_exchange(
                std::ptr::null_mut(),
                made,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                // SAFETY: `made` is now the slot's, never freed.
                Ok(_) => return Some(unsafe { &*made }),
                Err(other) => {
                    // Another thread filled the slot first: ours was never shared.
                    unmake(made);
                    p = other;
                }
            }
        }
        // SAFETY: a non-null slot holds a leaked, never-freed schema.
        let s: &'static Schema = unsafe { &*p };
        if same(s, layer, name, cat) && same_keys(s) {
            return Some(s);
        }
    }
    None
}

/// What [`Schema::new`] requires of keys.
fn keys_ok(keys: Keys) -> bool {
    keys.len() < crate::event::MAX_ARGS
        && keys
            .iter()
            .all(|(k, _)| plain(k.as_bytes()) && *k != "hhash")
}

/// A leaked schema whose name and category are one leaked allocation.
fn make(layer: Layer, name: &[u8], cat: &[u8], keys: Keys) -> *mut Schema {
    let mut both = Vec::with_capacity(name.len() + cat.len());
    both.extend_from_slice(name);
    both.extend_from_slice(cat);
    // `plain` bytes are ASCII: valid UTF-8.
    let both: &'static str = Box::leak(
        String::from_utf8(both)
            .expect("plain ASCII")
            .into_boxed_str(),
    );
    let (n, c) = both.split_at(name.len());
    Box::into_raw(Box::new(Schema {
        layer,
        name: n,
        cat: c,
        keys,
        file_key: "",
        fold: None,
        mixed: keys.iter().any(|k| !k.1.is_int()),
    }))
}

/// Frees a schema from [`make`] that no other thread has seen.
fn unmake(s: *mut Schema) {
    // SAFETY: `s` came from `make` (Box::into_raw) and was never published.
    let s = unsafe { Box::from_raw(s) };
    let len = s.name.len() + s.cat.len();
    let ptr = s.name.as_ptr() as *mut u8;
    // SAFETY: name and cat are the two halves of one leaked `Box<str>` of `len` bytes.
    drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_values_give_the_same_schema() {
        let a = intern(Layer::Python, b"train_step", b"app").unwrap();
        let b = intern(Layer::Python, b"train_step", b"app").unwrap();
        assert!(std::ptr::eq(a, b));
        assert_eq!(
            (a.name, a.cat, a.layer),
            ("train_step", "app", Layer::Python)
        );
        assert!(a.keys.is_empty());
        let c = intern(Layer::CApp, b"train_step", b"app").unwrap();
        assert!(!std::ptr::eq(a, c));
        // A split of the same bytes is another name.
        let d = intern(Layer::Python, b"train_ste", b"papp").unwrap();
        assert_eq!((d.name, d.cat), ("train_ste", "papp"));
    }

    #[test]
    fn keyed_schemas_are_told_apart_by_their_keys() {
        static STEP: [(&str, Slot); 1] = [("step", Slot::Int)];
        static STEP_EPOCH: [(&str, Slot); 2] = [("step", Slot::Int), ("epoch", Slot::Int)];
        static EPOCH_STEP: [(&str, Slot); 2] = [("epoch", Slot::Int), ("step", Slot::Int)];
        let plain = intern(Layer::Python, b"keyed", b"app").unwrap();
        let a = intern_keyed(Layer::Python, b"keyed", b"app", &STEP).unwrap();
        let b = intern_keyed(Layer::Python, b"keyed", b"app", &STEP_EPOCH).unwrap();
        let c = intern_keyed(Layer::Python, b"keyed", b"app", &EPOCH_STEP).unwrap();
        for (x, y) in [(plain, a), (a, b), (b, c), (plain, c)] {
            assert!(!std::ptr::eq(x, y));
        }
        assert_eq!(b.keys, &STEP_EPOCH[..]);
        assert_eq!((b.name, b.cat, b.file_key), ("keyed", "app", ""));
        // Keys compared by content: another slice with the same keys finds the same schema.
        let again: &'static [(&str, Slot)] = Box::leak(Box::new([("step", Slot::Int)]));
        assert!(std::ptr::eq(
            intern_keyed(Layer::Python, b"keyed", b"app", again).unwrap(),
            a
        ));
        static BAD: [(&str, Slot); 1] = [("q\"", Slot::Int)];
        static HHASH: [(&str, Slot); 1] = [("hhash", Slot::Int)];
        assert!(intern_keyed(Layer::Python, b"keyed2", b"app", &BAD).is_none());
        assert!(intern_keyed(Layer::Python, b"keyed2", b"app", &HHASH).is_none());
    }

    #[test]
    fn names_needing_escapes_or_too_long_are_refused() {
        assert!(intern(Layer::Python, b"a\"b", b"c").is_none());
        assert!(intern(Layer::Python, b"a", b"c\\").is_none());
        assert!(intern(Layer::Python, "caf\u{e9}".as_bytes(), b"c").is_none());
        assert!(intern(Layer::Python, b"a\n", b"c").is_none());
        assert!(intern(Layer::Python, &[b'x'; MAX_LEN + 1], b"c").is_none());
        assert!(intern(Layer::Python, &[b'x'; MAX_LEN], b"c").is_some());
    }

    /// `intern_args` compares keys by content and kind (a copy of the caller's bytes is
    /// kept), tells its schemas from `intern_keyed`'s only by the keys, and refuses what
    /// `intern_keyed` refuses, and keys over MAX_LEN bytes together.
    #[test]
    fn arg_schemas_copy_their_keys_and_tell_kinds_apart() {
        let mut k1 = b"step".to_vec();
        let k2 = b"s".to_vec();
        let a = intern_args(
            Layer::Python,
            b"ev_args",
            b"c",
            &[(&k1, Slot::Int), (&k2, Slot::Str)],
        )
        .unwrap();
        assert!(matches!(a, ArgsSchema::Mixed(_)));
        let a = a.schema();
        k1[0] = b'X'; // the schema kept its own copy
        assert_eq!(a.keys, &[("step", Slot::Int), ("s", Slot::Str)][..]);
        let again = intern_args(
            Layer::Python,
            b"ev_args",
            b"c",
            &[(b"step", Slot::Int), (b"s", Slot::Str)],
        );
        assert!(std::ptr::eq(a, again.unwrap().schema()));
        for other in [
            &[(&b"step"[..], Slot::Int), (&b"s"[..], Slot::Float)][..],
            &[(b"step", Slot::Int)],
            &[(b"s", Slot::Str), (b"step", Slot::Int)],
            &[(b"stepp", Slot::Int), (b"s", Slot::Str)],
        ] {
            let b = intern_args(Layer::Python, b"ev_args", b"c", other).unwrap();
            // Mixed exactly when a slot is not an integer.
            let ints = other.iter().all(|k| k.1.is_int());
            assert_eq!(matches!(b, ArgsSchema::Ints(_)), ints);
            let b = b.schema();
            assert!(!std::ptr::eq(a, b));
            assert_eq!(b.keys.len(), other.len());
        }
        // The same keys of integers only: `intern_keyed`'s schema is the same one.
        static STEP: [(&str, Slot); 1] = [("step", Slot::Int)];
        let i = intern_args(Layer::Python, b"ev_args", b"c", &[(b"step", Slot::Int)]).unwrap();
        assert!(std::ptr::eq(
            i.schema(),
            intern_keyed(Layer::Python, b"ev_args", b"c", &STEP).unwrap()
        ));
        // `intern_keyed` never gives a schema with other slots, even one `intern_args` made.
        static MIXED: [(&str, Slot); 2] = [("step", Slot::Int), ("s", Slot::Str)];
        assert!(intern_keyed(Layer::Python, b"ev_args", b"c", &MIXED).is_none());
        let long = [b'k'; MAX_LEN + 1];
        for bad in [
            &[(&b"hhash"[..], Slot::Int)][..],
            &[(b"a\"b", Slot::Int)],
            &[(&long[..], Slot::Int)],
        ] {
            assert!(intern_args(Layer::Python, b"ev_args", b"c", bad).is_none());
        }
        let half = [b'h'; MAX_LEN / 2 + 1];
        let two = [(&half[..], Slot::Int), (&long[..MAX_LEN / 2], Slot::Int)];
        assert!(intern_args(Layer::Python, b"ev_args", b"c", &two).is_none());
        assert!(intern_args(Layer::Python, b"ev_args", b"c", &two[1..]).is_some());
        let many: Vec<Vec<u8>> = (0..crate::event::MAX_ARGS)
            .map(|i| format!("k{i}").into_bytes())
            .collect();
        let keys: Vec<(&[u8], Slot)> = many.iter().map(|k| (&k[..], Slot::Int)).collect();
        assert!(intern_args(Layer::Python, b"ev_args", b"c", &keys).is_none());
        assert!(intern_args(Layer::Python, b"ev_args", b"c", &keys[1..]).is_some());
    }

    /// Short and long names compare exactly (the word-wise compare).
    #[test]
    fn word_compare_is_exact() {
        let s: Vec<u8> = (0..40u8).map(|i| b'a' + i % 26).collect();
        for n in 0..s.len() {
            for i in 0..n {
                let mut t = s[..n].to_vec();
                t[i] ^= 1;
                assert!(!eq(&s[..n], &t), "{n} bytes, byte {i}");
            }
            let copy = s[..n].to_vec(); // equal bytes elsewhere
            assert!(eq(&s[..n], &copy));
            assert!(n == 0 || !eq(&s[..n], &s[..n - 1]));
        }
    }

    #[test]
    fn the_table_is_bounded_and_threads_agree() {
        let names: Vec<String> = (0..SLOTS + 500).map(|i| format!("bound_{i}")).collect();
        let got: Vec<Vec<Option<usize>>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        names
                            .iter()
                            .map(|n| {
                                intern(Layer::Python, n.as_bytes(), b"bound")
                                    .map(|s| s as *const Schema as usize)
                            })
                            .collect()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        // Every thread got the same answer for every name, and not everything fit.
        for g in &got[1..] {
            assert_eq!(g, &got[0]);
        }
        let kept = got[0].iter().filter(|x| x.is_some()).count();
        assert!(kept < names.len() && kept > SLOTS / 2, "{kept}");
        let filled = TABLE
            .iter()
            .filter(|s| !s.load(Ordering::Relaxed).is_null())
            .count();
        assert!(filled <= SLOTS);
    }
}
