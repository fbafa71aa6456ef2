//! Which file paths are traced: the `DFTRACER_DATA_DIR` policy, shared by every frontend that
//! intercepts file I/O (the LD_PRELOAD library today).
//!
//! Rules (where we differ from the reference, ref §6.3 and §8.3 items 24-25):
//! - `DFTRACER_DATA_DIR` is a `:`-separated list of directories. A path is traced when one of
//!   them is a **whole-component** prefix of the path: `/x/data` matches `/x/data` and
//!   `/x/data/f`, never `/x/data2/f`. `/` matches every absolute path.
//! - Paths are compared in **absolute, lexically normalised** form: a relative path is resolved
//!   against a base (the cwd, or the directory of an `openat` dirfd), `.` and empty components
//!   are dropped and `..` removes the previous component (never above `/`). Symlinks are not
//!   followed (that would cost a syscall per call); a data dir reached through a symlink must be
//!   listed under the name the program uses.
//! - Relative data dirs are resolved against the cwd at start-up.
//! - `all` (any case) means every file; **unset or empty also means every file** (our choice:
//!   a user who turns on the preload without saying which files wants to see all of them; the
//!   reference traced nothing and then deleted the file).
//! - Whatever the list says, these are never traced: anything under `/proc`, `/sys` or `/dev`
//!   (pseudo files, devices, terminals), and trace files themselves (`*.pfw`, `*.pfw.gz`), so
//!   that one tracer never traces another's output.
//!
//! Everything here is allocation-free after [`DataDirs::parse`]: [`normalize_into`] writes into
//! a caller-owned buffer, so an interposer can use a stack buffer.
//!
//! ```
//! use dftracer_core::frontend::{normalize_into, DataDirs};
//! let dirs = DataDirs::parse(Some("/x/data:/scratch"), b"/home/u");
//! let mut buf = [0u8; 4096];
//! let n = normalize_into(b"/x/run", b"../data/./f.bin", &mut buf).unwrap();
//! assert_eq!(&buf[..n], b"/x/data/f.bin");
//! assert!(dirs.traces(&buf[..n]));
//! assert!(!dirs.traces(b"/x/data2/f.bin"));
//! ```

/// Directories never traced, whatever `DFTRACER_DATA_DIR` says.
pub const NEVER: [&[u8]; 3] = [b"/proc", b"/sys", b"/dev"];
/// File-name endings never traced (trace files).
pub const NEVER_SUFFIX: [&[u8]; 2] = [b".pfw", b".pfw.gz"];

/// The parsed `DFTRACER_DATA_DIR`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataDirs {
    /// Every file (except [`NEVER`] and trace files).
    All,
    /// Files under one of these normalised absolute directories (no trailing `/`, except `/`).
    Dirs(Vec<Vec<u8>>),
}

impl DataDirs {
    /// Parses a `DFTRACER_DATA_DIR` value. `None`, empty or `all` give [`DataDirs::All`].
    /// Relative entries are resolved against `cwd`; empty entries are ignored.
    pub fn parse(spec: Option<&str>, cwd: &[u8]) -> DataDirs {
        let spec = match spec.map(str::trim) {
            None | Some("") => return DataDirs::All,
            Some(s) if s.eq_ignore_ascii_case("all") => return DataDirs::All,
            Some(s) => s,
        };
        let mut dirs = Vec::new();
        for part in spec.split(':').map(str::trim).filter(|p| !p.is_empty()) {
            if part.eq_ignore_ascii_case("all") {
                return DataDirs::All;
            }
            let mut buf = vec![0u8; part.len() + cwd.len() + 2];
            if let Some(n) = normalize_into(cwd, part.as_bytes(), &mut buf) {
                buf.truncate(n);
                if !dirs.contains(&buf) {
                    dirs.push(buf);
                }
            }
        }
        if dirs.is_empty() {
            // Only separators or blanks: nothing usable was said; behave as unset.
            return DataDirs::All;
        }
        DataDirs::Dirs(dirs)
    }

    /// True when the absolute, normalised path `abs` is traced.
    pub fn traces(&self, abs: &[u8]) -> bool {
        if abs.first() != Some(&b'/') || is_excluded(abs) {
            return false;
        }
        match self {
            DataDirs::All => true,
            DataDirs::Dirs(dirs) => dirs.iter().any(|d| under(abs, d)),
        }
    }

    /// Resolves `path` against `base` into `buf` and tells whether it is traced; on `true`
    /// the normalised path is `buf[..n]` with `n` returned. `None`: not traced (or too long
    /// for `buf`).
    pub fn resolve(&self, base: &[u8], path: &[u8], buf: &mut [u8]) -> Option<usize> {
        let n = normalize_into(base, path, buf)?;
        self.traces(&buf[..n]).then_some(n)
    }
}

/// True when `path` equals `dir` or lies below it, on whole components.
#[inline]
pub fn under(path: &[u8], dir: &[u8]) -> bool {
    if dir == b"/" {
        return path.first() == Some(&b'/');
    }
    match path.get(..dir.len()) {
        Some(head) => eq_bytes(head, dir) && (path.len() == dir.len() || path[dir.len()] == b'/'),
        None => false,
    }
}

/// `a == b`, eight bytes at a time and inline: a slice comparison is a `bcmp` call, whose
/// entry and size dispatch cost more than the comparison of a path (an `open` made two).
#[inline]
pub(crate) fn eq_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().unwrap_or([0; 8]));
    if n >= 8 {
        let mut i = 0;
        while i + 8 < n {
            if word(a, i) != word(b, i) {
                return false;
            }
            i += 8;
        }
        // The last eight bytes (overlapping the word before when `n` is no multiple of 8).
        return word(a, n - 8) == word(b, n - 8);
    }
    let short = |s: &[u8]| {
        if n >= 4 {
            // Two overlapping halves.
            let lo = u32::from_le_bytes(s[..4].try_into().unwrap_or([0; 4])) as u64;
            let hi = u32::from_le_bytes(s[n - 4..].try_into().unwrap_or([0; 4])) as u64;
            lo | hi << 32
        } else {
            s.iter().fold(0u64, |w, &x| w << 8 | x as u64)
        }
    };
    short(a) == short(b)
}

/// True for paths that are never traced: under `/proc`, `/sys`, `/dev`, or trace files.
#[inline]
pub fn is_excluded(abs: &[u8]) -> bool {
    // The byte after the root and the last byte pick the one rule that can apply, so a
    // traced path pays two loads here, not five prefix and suffix comparisons.
    let never = match abs.get(1) {
        Some(b'p') => under(abs, NEVER[0]),
        Some(b's') => under(abs, NEVER[1]),
        Some(b'd') => under(abs, NEVER[2]),
        _ => false,
    };
    never
        || match abs.last() {
            Some(b'w') => abs.ends_with(NEVER_SUFFIX[0]),
            Some(b'z') => abs.ends_with(NEVER_SUFFIX[1]),
            _ => false,
        }
}

/// Writes the absolute, lexically normalised form of `path` into `out` and returns its
/// length. A relative `path` is taken relative to `base` (itself absolute; it is normalised
/// too). `None` when `out` is too small, or when `path` is relative and `base` is not absolute.
/// Never allocates.
pub fn normalize_into(base: &[u8], path: &[u8], out: &mut [u8]) -> Option<usize> {
    if out.is_empty() {
        return None;
    }
    out[0] = b'/';
    let mut len = 1;
    if !path.starts_with(b"/") {
        if !base.starts_with(b"/") {
            return None;
        }
        len = push_components(base, out, len)?;
    }
    push_components(path, out, len)
}

/// Appends the (relative or absolute: leading `/` is ignored) path `p` to `out[..len]`, an
/// already absolute and normalised path such as a `getcwd` result, normalising as it goes.
/// Returns the new length; `None` when `out[..len]` is not absolute or `out` is too small.
/// This lets a caller build the base in the output buffer itself (one buffer, no copy).
pub fn append_normalized(out: &mut [u8], len: usize, p: &[u8]) -> Option<usize> {
    if len == 0 || len > out.len() || out[0] != b'/' {
        return None;
    }
    // A base with a trailing `/` (only `/` itself, if normalised) must not give `//x`.
    let mut len = len;
    while len > 1 && out[len - 1] == b'/' {
        len -= 1;
    }
    push_components(p, out, len)
}

/// Appends the components of `p` to the normalised path `out[..len]` (which starts with `/`).
#[inline]
fn push_components(p: &[u8], out: &mut [u8], len: usize) -> Option<usize> {
    // Most paths programs pass are already normal: one copy.
    let q = p.strip_prefix(b"/").unwrap_or(p);
    if let Some(n) = append_if_plain(out, len, q) {
        return Some(n);
    }
    push_components_slow(p, q, out, len)
}

/// [`push_components`] of a path that is not plain, or near the end of `out`.
#[inline(never)]
fn push_components_slow(p: &[u8], q: &[u8], out: &mut [u8], len: usize) -> Option<usize> {
    if plain_components(q) {
        return append_component(out, len, q);
    }
    push_components_each(p, out, len)
}

/// Room [`append_if_plain`] needs after the path it writes: a sentinel `/` and the 32-byte
/// reads of [`pairs32`].
const PLAIN_SLACK: usize = 32;

/// Positions [`pairs32`] answers for per read.
const PAIRS: usize = 31;

/// Appends `/q` to `out[..len]` when `q` is plain (see [`plain_components`]), checking it where
/// it was copied to: the copy is whole words, and the check reads 32 bytes of `out` at a time,
/// past the path's end (a sentinel `/` there ends the last component), so no byte is handled
/// alone (a path of up to 30 bytes is one read). `None`: not plain, or too close to `out`'s
/// end (the caller then takes the general path, which gives the same answer).
#[inline]
fn append_if_plain(out: &mut [u8], len: usize, q: &[u8]) -> Option<usize> {
    let n = q.len();
    // `out[len - 1]` is `/` (the root) when `len == 1`; else a separator is written there.
    let start = if len > 1 { len + 1 } else { len };
    if len == 0 || n == 0 || start + n + PLAIN_SLACK > out.len() {
        return None;
    }
    out[start - 1] = b'/';
    copy_words(&mut out[start..start + n], q);
    out[start + n] = b'/';
    // `s = out[start - 1..=start + n]`: `/q/`. `q` is plain iff no `/` of `s` but its last
    // is followed by `/`, `./` or `../`; candidates are the `/`s followed by `/` or `.`.
    let s = &out[start - 1..];
    let last = n + 1;
    let mut i = 0;
    while i < last {
        let mut cand = pairs32(s, i);
        if last - i < PAIRS {
            // Positions at or past the sentinel (bytes beyond it are stale buffer contents).
            cand &= (1u32 << (last - i)) - 1;
        }
        while cand != 0 {
            let k = i + cand.trailing_zeros() as usize;
            // `s[k + 1]` is `/` or `.`; `s[last]` is `/`, so `k + 3` is read only when
            // `s[k + 2]` is a `.` before it.
            if s[k + 1] == b'/' || s[k + 2] == b'/' || (s[k + 2] == b'.' && s[k + 3] == b'/') {
                // `//`, `/./` or `/../`.
                return None;
            }
            cand &= cand - 1;
        }
        i += PAIRS;
    }
    Some(start + n)
}

/// Bit `k` (0..31) set when `s[i + k]` is `/` and `s[i + k + 1]` is `/` or `.`; reads
/// `s[i..i + 32]`. SSE2 (in every x86-64): four compares and four masks for 31 positions.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn pairs32(s: &[u8], i: usize) -> u32 {
    // SAFETY: SSE2 is enabled for the whole build (`target_feature = "sse2"`: the x86-64
    // baseline), so every CPU this code runs on has it; `pairs32_sse2` touches memory only
    // through bounds-checked slice reads.
    #[allow(unsafe_code)]
    unsafe {
        pairs32_sse2(s, i)
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
#[inline]
fn pairs32_sse2(s: &[u8], i: usize) -> u32 {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_movemask_epi8, _mm_set1_epi8, _mm_set_epi64x};
    let s = &s[i..i + 32];
    let word = |j: usize| u64::from_le_bytes(s[j..j + 8].try_into().unwrap_or([0; 8]));
    let lo = _mm_set_epi64x(word(8) as i64, word(0) as i64);
    let hi = _mm_set_epi64x(word(24) as i64, word(16) as i64);
    let mask = |v, b: u8| _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(b as i8))) as u32;
    let slash = mask(lo, b'/') | mask(hi, b'/') << 16;
    let dot = mask(lo, b'.') | mask(hi, b'.') << 16;
    slash & (slash | dot) >> 1
}

/// [`pairs32`] a byte at a time (other targets; and the reference of its test).
#[cfg_attr(
    all(target_arch = "x86_64", target_feature = "sse2", not(test)),
    allow(dead_code)
)]
#[inline]
fn pairs32_bytes(s: &[u8], i: usize) -> u32 {
    let s = &s[i..i + 32];
    (0..PAIRS).fold(0, |m, k| {
        m | u32::from(s[k] == b'/' && matches!(s[k + 1], b'/' | b'.')) << k
    })
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
#[inline]
fn pairs32(s: &[u8], i: usize) -> u32 {
    pairs32_bytes(s, i)
}

/// `dst.copy_from_slice(src)` as two overlapping moves of a power of two bytes, inline: a
/// path is a few words, and the `memcpy` call cost more than its copy. (A loop of word copies
/// is turned back into a `memcpy` call by the compiler; paths over 32 bytes take that call.)
#[inline]
pub fn copy_words(dst: &mut [u8], src: &[u8]) {
    fn two<const K: usize>(dst: &mut [u8], src: &[u8]) {
        let n = src.len();
        let head: [u8; K] = src[..K].try_into().unwrap_or([0; K]);
        let tail: [u8; K] = src[n - K..].try_into().unwrap_or([0; K]);
        dst[..K].copy_from_slice(&head);
        dst[n - K..n].copy_from_slice(&tail);
    }
    let n = src.len();
    debug_assert_eq!(n, dst.len());
    match n {
        33.. => dst.copy_from_slice(src),
        16.. => two::<16>(dst, src),
        8.. => two::<8>(dst, src),
        4.. => two::<4>(dst, src),
        2.. => two::<2>(dst, src),
        1 => dst[0] = src[0],
        0 => {}
    }
}

/// Appends `/c` (just `c` after the root) to `out[..len]`; `None` when it does not fit.
#[inline]
fn append_component(out: &mut [u8], mut len: usize, c: &[u8]) -> Option<usize> {
    let need = usize::from(len > 1) + c.len();
    if len + need > out.len() {
        return None;
    }
    if len > 1 {
        out[len] = b'/';
        len += 1;
    }
    out[len..len + c.len()].copy_from_slice(c);
    Some(len + c.len())
}

/// Whether `q` is one or more components, none of them empty, `.` or `..` (`a/b.c/d`): only
/// the bytes after each `/` are looked at, the `/`s found 8 bytes at a time.
#[inline]
fn plain_components(q: &[u8]) -> bool {
    let n = q.len();
    // A component starting at `i` (after a `/`, or at 0) is empty, `.` or `..`.
    let bad_at = |i: usize| match q.get(i) {
        None | Some(b'/') => true,
        Some(b'.') => match q.get(i + 1) {
            None | Some(b'/') => true,
            Some(b'.') => matches!(q.get(i + 2), None | Some(b'/')),
            _ => false,
        },
        _ => false,
    };
    if bad_at(0) {
        return false;
    }
    let mut i = 0;
    while i < n {
        let w = match q.get(i..i + 8) {
            Some(w) => u64::from_le_bytes(w.try_into().unwrap_or_default()),
            // The last bytes, zeros after them (not `/`).
            None => q[i..].iter().rev().fold(0u64, |w, &b| w << 8 | b as u64),
        };
        // High bit of each byte equal to `/`.
        let mut slashes = crate::deflate::zero_byte_mask(w ^ 0x2f2f_2f2f_2f2f_2f2f);
        while slashes != 0 {
            let at = i + (slashes.trailing_zeros() / 8) as usize;
            if at < n && bad_at(at + 1) {
                return false;
            }
            slashes &= slashes - 1;
        }
        i += 8;
    }
    true
}

/// [`push_components`], one component at a time.
fn push_components_each(p: &[u8], out: &mut [u8], mut len: usize) -> Option<usize> {
    for comp in p.split(|&b| b == b'/') {
        match comp {
            b"" | b"." => {}
            b".." => {
                // Drop the last component; `/..` is `/`.
                while len > 1 && out[len - 1] != b'/' {
                    len -= 1;
                }
                if len > 1 {
                    len -= 1;
                }
            }
            c => len = append_component(out, len, c)?,
        }
    }
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(base: &str, p: &str) -> Option<String> {
        let mut buf = [0u8; 256];
        normalize_into(base.as_bytes(), p.as_bytes(), &mut buf)
            .map(|n| String::from_utf8(buf[..n].to_vec()).unwrap())
    }

    /// Every concatenation of up to `n` of `pieces`, sorted, without repeats.
    fn joined(pieces: &[&[u8]], n: usize) -> Vec<Vec<u8>> {
        let mut paths: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..n {
            let next: Vec<Vec<u8>> = paths
                .iter()
                .flat_map(|p| pieces.iter().map(move |q| [&p[..], q].concat()))
                .collect();
            paths.extend(next);
            paths.sort();
            paths.dedup();
        }
        paths
    }

    #[test]
    fn the_one_copy_path_agrees_with_component_by_component() {
        // Every path of up to 5 pieces from this alphabet, appended to two bases.
        let pieces: [&[u8]; 7] = [b"", b"/", b".", b"..", b"a", b".b", b"cd."];
        let paths = joined(&pieces, 5);
        for base in [&b"/"[..], b"/x/y"] {
            for p in &paths {
                for cap in [64, 6] {
                    let (mut a, mut b) = (vec![0u8; cap], vec![0u8; cap]);
                    a[..base.len().min(cap)].copy_from_slice(&base[..base.len().min(cap)]);
                    b[..base.len().min(cap)].copy_from_slice(&base[..base.len().min(cap)]);
                    let n = base.len().min(cap);
                    let fast = push_components(p, &mut a, n);
                    let each = push_components_each(p, &mut b, n);
                    assert_eq!(fast, each, "{:?} + {:?}", base, String::from_utf8_lossy(p));
                    if let Some(k) = fast {
                        assert_eq!(a[..k], b[..k], "{:?}", String::from_utf8_lossy(p));
                    }
                }
            }
        }
    }

    #[test]
    fn the_word_checked_copy_agrees_with_the_byte_check() {
        // Pieces that put `/`, `.` and `..` on every side of a word boundary; the buffers'
        // bytes past the path are stale `/../` (what a scratch buffer holds after a longer
        // path), which the check must not read as part of the path.
        let pieces: [&[u8]; 9] = [
            b"",
            b"/",
            b".",
            b"..",
            b"a",
            b".b",
            b"cd.",
            b"efghijk",
            b"lmnopqrstu",
        ];
        let paths = joined(&pieces, 4);
        let mut plain = 0;
        for base in [&b"/"[..], b"/x/y", b"/abcdefg"] {
            for p in &paths {
                let q = p.strip_prefix(b"/").unwrap_or(p);
                let need = base.len() + 1 + q.len() + PLAIN_SLACK;
                for cap in [need - 1, need, need + 7] {
                    let mut a: Vec<u8> = b"/../".iter().copied().cycle().take(cap).collect();
                    a[..base.len()].copy_from_slice(base);
                    let got = append_if_plain(&mut a, base.len(), q);
                    let room =
                        base.len() + usize::from(base.len() > 1) + q.len() + PLAIN_SLACK <= cap;
                    let want = (room && plain_components(q)).then(|| {
                        let mut b = vec![0u8; cap];
                        b[..base.len()].copy_from_slice(base);
                        push_components_each(p, &mut b, base.len()).unwrap()
                    });
                    assert_eq!(
                        got,
                        want,
                        "{:?} + {:?} in {cap}",
                        base,
                        String::from_utf8_lossy(p)
                    );
                    if let Some(k) = got {
                        plain += 1;
                        let mut b = vec![0u8; cap];
                        b[..base.len()].copy_from_slice(base);
                        push_components_each(p, &mut b, base.len());
                        assert_eq!(a[..k], b[..k], "{:?}", String::from_utf8_lossy(p));
                    }
                }
            }
        }
        assert!(plain > 1000, "the word path was taken {plain} times");
    }

    #[test]
    fn pairs_of_thirty_two_bytes_as_byte_by_byte() {
        // Every placement of `/` and `.` around the other bytes, from a fixed generator.
        let mut x = 0x1234_5678_9abc_def0u64;
        let alphabet = *b"/./a/.";
        for _ in 0..20_000 {
            let mut s = [0u8; 36];
            for b in s.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = alphabet[(x % 6) as usize];
            }
            for i in 0..4 {
                assert_eq!(pairs32(&s, i), pairs32_bytes(&s, i), "{s:?} {i}");
            }
        }
    }

    #[test]
    fn copies_every_length() {
        let src: Vec<u8> = (0..80u8).collect();
        for n in 0..=80 {
            let mut dst = vec![0xffu8; n];
            copy_words(&mut dst, &src[..n]);
            assert_eq!(dst, src[..n], "{n}");
        }
    }

    #[test]
    fn bytes_compare_as_slices_do() {
        let text = b"/tmp/wo/data/f.bin/tmp/wo/data/g.bin";
        for n in 0..=18 {
            for m in 0..=18 {
                for off in [0, 18] {
                    let (a, b) = (&text[..n], &text[off..off + m]);
                    assert_eq!(eq_bytes(a, b), a == b, "{a:?} {b:?}");
                }
            }
        }
        // One differing byte anywhere.
        for n in 1..=20 {
            let a = vec![b'x'; n];
            for k in 0..n {
                let mut b = a.clone();
                b[k] = b'y';
                assert!(!eq_bytes(&a, &b) && eq_bytes(&a, &a.clone()), "{n} {k}");
            }
        }
    }

    #[test]
    fn exclusions_by_first_and_last_byte() {
        let excluded = "/proc /proc/1/fd /sys /sys/x /dev /dev/null /x/t.pfw /x/t.pfw.gz /proc.pfw";
        let kept = "/ /p /pro /procs /process/x /system /devices/x /s /x/pfw /x/t.pfw.g /x/t.gz \
                    /x/tpfw /x/proc";
        for (paths, want) in [(excluded, true), (kept, false)] {
            for p in paths.split_whitespace() {
                assert_eq!(is_excluded(p.as_bytes()), want, "{p}");
            }
        }
    }

    #[test]
    fn normalises_lexically() {
        assert_eq!(norm("/", "/a/b").as_deref(), Some("/a/b"));
        assert_eq!(norm("/cwd", "a/b").as_deref(), Some("/cwd/a/b"));
        assert_eq!(norm("/cwd/", "./a//b/").as_deref(), Some("/cwd/a/b"));
        assert_eq!(norm("/c/d", "../x").as_deref(), Some("/c/x"));
        assert_eq!(norm("/c", "../../../x").as_deref(), Some("/x"));
        assert_eq!(norm("/c", "..").as_deref(), Some("/"));
        assert_eq!(norm("/c", "").as_deref(), Some("/c"));
        assert_eq!(norm("/", "/").as_deref(), Some("/"));
        assert_eq!(norm("/a/./b/../", "c").as_deref(), Some("/a/c"));
        assert_eq!(norm("//a", "/x/./y/../z").as_deref(), Some("/x/z"));
        assert_eq!(norm("relative", "x"), None);
        assert_eq!(norm("relative", "/abs").as_deref(), Some("/abs"));
        // dot-names are names, not `.`/`..`
        assert_eq!(norm("/a", "...").as_deref(), Some("/a/..."));
        assert_eq!(norm("/a", ".hidden/..x").as_deref(), Some("/a/.hidden/..x"));
    }

    #[test]
    fn append_onto_a_base_in_the_buffer() {
        let mut buf = [0u8; 64];
        buf[..6].copy_from_slice(b"/x/dat");
        assert_eq!(append_normalized(&mut buf, 6, b"../data/f"), Some(9));
        assert_eq!(&buf[..9], b"/x/data/f");
        buf[..1].copy_from_slice(b"/");
        assert_eq!(append_normalized(&mut buf, 1, b"a"), Some(2));
        assert_eq!(&buf[..2], b"/a");
        buf[..3].copy_from_slice(b"/a/");
        assert_eq!(append_normalized(&mut buf, 3, b"b"), Some(4));
        assert_eq!(&buf[..4], b"/a/b");
        buf[..3].copy_from_slice(b"rel");
        assert_eq!(append_normalized(&mut buf, 3, b"b"), None);
        assert_eq!(append_normalized(&mut buf, 0, b"b"), None);
        assert_eq!(append_normalized(&mut buf, 65, b"b"), None);
    }

    #[test]
    fn too_long_is_none_never_a_panic() {
        let mut buf = [0u8; 8];
        assert_eq!(normalize_into(b"/", b"/abcdefgh", &mut buf), None);
        assert_eq!(normalize_into(b"/", b"/abcdefg", &mut buf), Some(8));
        assert_eq!(normalize_into(b"/", b"/a", &mut []), None);
    }

    #[test]
    fn whole_components_only() {
        let d = DataDirs::parse(Some("/x/data"), b"/");
        assert!(d.traces(b"/x/data"));
        assert!(d.traces(b"/x/data/f"));
        assert!(d.traces(b"/x/data/sub/f"));
        assert!(!d.traces(b"/x/data2/f"));
        assert!(!d.traces(b"/x/dat"));
        assert!(!d.traces(b"/x"));
        assert!(!d.traces(b"x/data/f"));
    }

    #[test]
    fn lists_trailing_slashes_and_relative_dirs() {
        let d = DataDirs::parse(Some("/a/:rel/dir/::/b/./c/.."), b"/home/u");
        assert_eq!(
            d,
            DataDirs::Dirs(vec![
                b"/a".to_vec(),
                b"/home/u/rel/dir".to_vec(),
                b"/b".to_vec()
            ])
        );
        assert!(d.traces(b"/home/u/rel/dir/f"));
        assert!(d.traces(b"/b/f"));
        assert!(!d.traces(b"/home/u/f"));
    }

    #[test]
    fn all_and_unset_trace_everything_but_the_excluded() {
        for spec in [
            None,
            Some(""),
            Some("all"),
            Some("ALL"),
            Some("/x:all"),
            Some(" : "),
        ] {
            let d = DataDirs::parse(spec, b"/");
            assert_eq!(d, DataDirs::All, "{spec:?}");
            assert!(d.traces(b"/any/file"));
            assert!(d.traces(b"/process/x"), "component, not string prefix");
            assert!(!d.traces(b"/proc/self/status"));
            assert!(!d.traces(b"/proc"));
            assert!(!d.traces(b"/sys/kernel/x"));
            assert!(!d.traces(b"/dev/null"));
            assert!(!d.traces(b"/out/t-0123456789abcdef-preload.pfw.gz"));
            assert!(!d.traces(b"/out/t.pfw"));
        }
    }

    #[test]
    fn root_data_dir_still_excludes_pseudo_files() {
        let d = DataDirs::parse(Some("/"), b"/");
        assert!(d.traces(b"/etc/hosts"));
        assert!(!d.traces(b"/proc/self/status"));
        assert!(!d.traces(b"/dev/zero"));
        // the reference's reversed-prefix bug excluded names ending in `corp/`
        assert!(d.traces(b"/x/corp"));
    }

    #[test]
    fn resolve_combines_both() {
        let d = DataDirs::parse(Some("/x/data"), b"/");
        let mut buf = [0u8; 64];
        assert_eq!(d.resolve(b"/x/data/sub", b"../f", &mut buf), Some(9));
        assert_eq!(&buf[..9], b"/x/data/f");
        assert_eq!(d.resolve(b"/x/data", b"../data2/f", &mut buf), None);
        assert_eq!(d.resolve(b"/x", b"data/f", &mut buf), Some(9));
    }
}
