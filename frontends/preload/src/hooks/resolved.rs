//! The last path a thread's `open` resolved, kept with what it depended on, so that opening
//! the same path again skips the cwd copy, the normalisation, the data-dir check and the
//! pool's look-up (a program that reopens one file, or `stat`s then opens it).
//!
//! Exact, not a heuristic: an entry is used only when everything its answer was computed
//! from is unchanged.
//! - the path's bytes as the program passed them (compared whole, last word first);
//! - whether it was absolute (then nothing else counts but the filter), or relative to the
//!   cwd: then the cwd cache's [`Stamp`] (generation and seqlock value) of the text it was
//!   resolved against, which every `chdir`/`fchdir` hook and every walker that changes
//!   directory inside libc moves ([`super::cwd`]); a relative path resolved against a
//!   `getcwd` answer (no stamp) is not kept, nor one relative to a dirfd;
//! - the filter in force (its address: a late `initialize` swaps it);
//! - the pool slot the path was interned in, kept as a handle: a slot's generation changes
//!   whenever it is claimed for another path, and [`FileHandle::pin`] checks it, so a reused
//!   slot is never taken for this path (the look-up is then made again).
//!
//! Resolution is lexical, so renames do not change an answer; the cwd text a stamp names is
//! the one [`super::cwd::cwd_into`] returns for as long as the stamp holds.
//!
//! Per thread (in the scratch space), one entry. A path is kept only when it comes twice in a
//! row: a miss notes the path's length and last eight bytes (two stores), and the answer is
//! copied in only when the next miss has the same note, so a program that opens a new file
//! each time (a data loader) pays a comparison and two stores per `open`, not two copies.
use dftracer_core::frontend::copy_words;
use dftracer_core::FileHandle;

use super::cwd::{self, Stamp};

/// Longest path kept (bytes as passed, and normalised).
pub const KEEP_MAX: usize = 256;

/// One thread's last resolution (see the module docs).
pub struct Last {
    /// Bytes of the path as passed; `raw_len` 0: nothing kept (no path is empty here).
    raw: [u8; KEEP_MAX],
    raw_len: usize,
    /// `Some`: relative to the cwd text of this stamp; `None`: absolute.
    stamp: Option<Stamp>,
    /// Address of the filter the answer came from.
    filter: usize,
    /// The normalised path when traced (`out_len` > 0), else `out_len` 0: not traced.
    out: [u8; KEEP_MAX],
    out_len: usize,
    /// The pool slot it was interned in, once an `open` of it succeeded.
    file: Option<FileHandle>,
    /// The last miss's length and last word ([`note`]).
    noted: (usize, u64),
}

/// A path's length and its last eight bytes (fewer, zero-extended, for a shorter path).
#[inline(always)]
fn note(p: &[u8]) -> (usize, u64) {
    let n = p.len();
    let w = match p.get(n.wrapping_sub(8)..) {
        Some(w) => u64::from_le_bytes(w.try_into().unwrap_or([0; 8])),
        None => p.iter().fold(0u64, |w, &b| w << 8 | b as u64),
    };
    (n, w)
}

/// What [`Last::lookup`] found.
pub enum Found {
    /// The same path as last time, untraced.
    Untraced,
    /// The same path, traced: the length of its normalised form ([`Last::kept_path`]).
    Traced(usize),
    /// Not the last path (or the last one's answer no longer holds).
    Miss,
}

impl Last {
    pub const EMPTY: Last = Last {
        raw: [0; KEEP_MAX],
        raw_len: 0,
        stamp: None,
        filter: 0,
        out: [0; KEEP_MAX],
        out_len: 0,
        file: None,
        noted: (0, 0),
    };

    /// The answer for path bytes `p` (relative to the cwd unless absolute; callers pass
    /// only `AT_FDCWD` paths or absolute ones) under `filter`, if it is the kept one.
    #[inline]
    pub fn lookup(&self, p: &[u8], filter: usize) -> Found {
        let n = p.len();
        if n != self.raw_len || n == 0 || !same(p, &self.raw[..n]) || filter != self.filter {
            return Found::Miss;
        }
        // A kept entry's stamp says whether it was relative: its bytes say the same.
        if let Some(s) = self.stamp {
            if !cwd::still(s) {
                return Found::Miss;
            }
        }
        if self.out_len == 0 {
            Found::Untraced
        } else {
            Found::Traced(self.out_len)
        }
    }

    /// Keeps the answer for `p`: `traced` its normalised path (`None`: not traced), `stamp`
    /// the cwd text's for a relative `p` (a relative `p` without one is not kept).
    /// Notes a missed path; true when the previous miss had the same [`note`] (the path
    /// came twice in a row, most likely: its answer is then worth keeping).
    #[inline]
    pub fn noted_again(&mut self, p: &[u8]) -> bool {
        let noted = note(p);
        let again = noted == self.noted;
        self.noted = noted;
        again
    }

    /// Keeps the answer for `p` (see [`Last::lookup`]); false when it cannot be kept (too
    /// long, or relative without a stamp), and then nothing is kept.
    pub fn keep(
        &mut self,
        p: &[u8],
        filter: usize,
        stamp: Option<Stamp>,
        traced: Option<&[u8]>,
    ) -> bool {
        let relative = p.first() != Some(&b'/');
        let out_len = traced.map_or(0, <[u8]>::len);
        // Empty while it is rewritten (a panic half way leaves nothing kept).
        self.raw_len = 0;
        if p.is_empty() || p.len() > KEEP_MAX || out_len > KEEP_MAX || (relative && stamp.is_none())
        {
            return false;
        }
        copy_words(&mut self.raw[..p.len()], p);
        self.stamp = if relative { stamp } else { None };
        self.filter = filter;
        if let Some(t) = traced {
            copy_words(&mut self.out[..t.len()], t);
        }
        self.out_len = out_len;
        self.file = None;
        self.raw_len = p.len();
        true
    }

    /// The kept normalised path's first `n` bytes (`n` from [`Found::Traced`]).
    #[inline]
    pub fn kept_path(&self, n: usize) -> &[u8] {
        &self.out[..n]
    }

    /// The slot the kept path was interned in by the last `open` of it, if any.
    #[inline]
    pub fn file(&self) -> Option<FileHandle> {
        self.file
    }

    /// The slot the kept path was interned in (after an `open` of it succeeded).
    #[inline]
    pub fn set_file(&mut self, f: Option<FileHandle>) {
        self.file = f;
    }

    /// Forgets the entry.
    pub fn clear(&mut self) {
        self.raw_len = 0;
    }
}

/// `a == b` for slices of one length, the last eight bytes first: paths that differ (numbered
/// files) differ there, so a miss is one comparison.
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    debug_assert_eq!(n, b.len());
    if n < 8 {
        return a == b;
    }
    let word = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().unwrap_or([0; 8]));
    if word(a, n - 8) != word(b, n - 8) {
        return false;
    }
    let mut i = 0;
    while i + 8 < n {
        if word(a, i) != word(b, i) {
            return false;
        }
        i += 8;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traced(l: &Last, f: Found) -> Option<Vec<u8>> {
        match f {
            Found::Traced(n) => Some(l.kept_path(n).to_vec()),
            _ => None,
        }
    }

    #[test]
    fn same_compares_every_byte() {
        let a = b"/tmp/wo/data/f0001.bin/and/more/bytes";
        for n in 0..a.len() {
            assert!(same(&a[..n], &a[..n]));
            for k in 0..n {
                let mut b = a[..n].to_vec();
                b[k] ^= 1;
                assert!(!same(&a[..n], &b), "{n} {k}");
            }
        }
    }

    #[test]
    fn absolute_paths_are_kept_per_filter() {
        let mut l = Last::EMPTY;
        assert!(matches!(l.lookup(b"/d/f", 1), Found::Miss));
        assert!(!l.noted_again(b"/d/./f") && l.noted_again(b"/d/./f"));
        assert!(!l.noted_again(b"/d/./g"), "another last word");
        assert!(
            !l.noted_again(b"/d/./f") && !l.noted_again(b"/d/f"),
            "another length"
        );
        assert!(l.keep(b"/d/./f", 1, None, Some(b"/d/f")));
        assert_eq!(
            traced(&l, l.lookup(b"/d/./f", 1)).as_deref(),
            Some(&b"/d/f"[..])
        );
        assert!(
            matches!(l.lookup(b"/d/./f", 2), Found::Miss),
            "another filter"
        );
        assert!(matches!(l.lookup(b"/d/./g", 1), Found::Miss));
        assert!(matches!(l.lookup(b"/d/.", 1), Found::Miss));
        assert!(l.keep(b"/x/f", 1, None, None));
        assert!(matches!(l.lookup(b"/x/f", 1), Found::Untraced));
        l.clear();
        assert!(matches!(l.lookup(b"/x/f", 1), Found::Miss));
    }

    #[test]
    fn relative_paths_need_a_stamp_and_too_long_ones_are_not_kept() {
        let mut l = Last::EMPTY;
        assert!(!l.keep(b"f", 1, None, Some(b"/c/f")));
        assert!(
            matches!(l.lookup(b"f", 1), Found::Miss),
            "no stamp: not kept"
        );
        let long = vec![b'a'; KEEP_MAX + 1];
        let mut abs = long.clone();
        abs[0] = b'/';
        assert!(!l.keep(&abs, 1, None, Some(&abs[..KEEP_MAX])));
        assert!(matches!(l.lookup(&abs, 1), Found::Miss));
    }
}
