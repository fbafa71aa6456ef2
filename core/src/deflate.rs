//! A fast raw-deflate (RFC 1951) encoder specialised for JSON-lines trace data.
//!
//! Trace lines repeat the same keys and punctuation on every line; only numbers change. A
//! greedy LZ77 pass with one hash probe finds most of that redundancy, so the encoder trades
//! the lazy matching and hash chains of a general-purpose level 1 for a few cheap candidates
//! chosen for trace lines:
//!
//! - LZ77: greedy, min match 4, max 258, window 32 KiB, matches extended 16 bytes at a time.
//!   After a match, the next 16 bytes are compared (branch-free: a 13-bit mask of the
//!   positions where 4 bytes agree) at the same distance: a field that differs from the
//!   reference line (a number) is usually followed by the same text at the same offset. When
//!   that distance agrees on every position from its first run on, it is taken (the fast
//!   path: uniform lines, as an LD_PRELOAD pread loop writes, take it almost always).
//!   Otherwise the candidates are: the distance before the last one (a return to the line one
//!   period back after a detour), the last distance ± 1 when the last finds nothing (a number
//!   one digit longer or shorter), and one hash-table candidate at the match's end needing 8
//!   equal bytes (a field the reference line lacks: when consecutive lines are of different
//!   kinds, the name of this line's kind, whose last occurrence is as a rule the same kind of
//!   line one period back). They are chosen by an estimate of their bits: 5 per literal
//!   skipped, the distance's extra bits, a credit for covering more of the 16 bytes, and a
//!   charge on a farther hash candidate for the matches that follow at its distance (without
//!   it, uniform lines drift to far distances whose extra bits every later match pays).
//!   Only when all fail are positions probed one by one: the last distance first, then one
//!   candidate from a 2^15-entry table hashed on the next 6 bytes. (Two positions per hash
//!   bucket were measured and dropped: +0.3-0.6 % bytes on the full traces, a table twice as
//!   large.) Positions inside a match are not inserted (only a match's last position and the
//!   position after it). Misses accelerate: a long run of literals probes every 2nd, 3rd, ...
//!   position, so incompressible data is cheap.
//! - Line hints ([`FastDeflate::compress_hinted`]): for a line the writer rendered from a
//!   template, the distance to the previous line of that template. From a hinted line on, the
//!   LZ compares 64 bytes with the bytes that distance back at once (SSE2 on x86_64, two
//!   32-byte AVX2 compares where the CPU has AVX2, detected at run time: a 64-bit mask of
//!   equal bytes), starts a match at the first 4 equal bytes among the next 16 (else
//!   at the distance ± 1: a number one digit longer or shorter) and takes the run of equal
//!   bytes as its length: no hash probe, no scoring, one room check per match. A mask serves
//!   every match that starts in its first 48 bytes, and a run reaching its end goes on in the
//!   next 64 bytes' mask (kept for the matches after it): on uniform lines one mask per 64
//!   bytes, no byte compared twice. Where none of the three distances has 4 equal bytes in
//!   the next 16 (a field the reference line lacks: each sample of a data loader reads a new
//!   file, whose hash its lines carry), one hash probe looks for the text's last occurrence
//!   (the same hash in the line before, of another kind) and the hinted path goes on at its
//!   distance; else a field of at most 16 bytes followed by the reference's text at the same
//!   distance is written as literals and the hinted path goes on after it; else the general
//!   path above takes over until the next hinted line. A hint that
//!   repeats the current distance changes nothing: they are passed in a tight loop, and the
//!   matches look only for the next hint of another distance. Hints are advice: every match
//!   is of bytes compared equal. (Exact spans from the template encoder,
//!   where each line's fields are, were tried in place of the masks and dropped: measuring
//!   the text between fields costs as much as the masks, and cutting a line at its fields
//!   more: 830-1,000 instructions per line against 355, `benches/record/deflate.md`. Scripts
//!   trusted without a compare, the renderer comparing only the fields with the template's
//!   last line, were dropped too: the emitter alone cost as much as this path, 448 against
//!   412 per pread line, and the renderer +350-650.)
//! - Table reuse: entries hold `generation value + position`; every call starts at a value
//!   above everything stored by earlier calls, so stale entries are recognised without clearing
//!   the table (it is cleared only when the 32-bit values would overflow, once per ~4 GiB).
//! - Blocks: up to [`TOKEN_CAP`] tokens each. For each block the exact size of a dynamic
//!   Huffman block, a fixed block and stored blocks is computed and the smallest is written
//!   (no dynamic code is built for fewer than 256 tokens: small calls stay cheap).
//! - Huffman: two-queue Huffman on sorted frequencies, lengths limited (15, and 7 for the
//!   code-length code) by moving leaves between depths until the Kraft sum is exactly 1, so
//!   every code is complete. A code with fewer than two used symbols gets a second one, so no
//!   decoder has to accept an incomplete code. Leaves of frequency 1 are already in order
//!   (by symbol) and only the others are sorted: a stream's code gives every unused symbol
//!   frequency 1, and sorting all 286 was most of the cost of a small push.
//! - Output: a 64-bit bit buffer written 8 bytes at a time into space reserved for the
//!   block's exact size. A token is a literal or a match whose distance extra bits are in the
//!   token; the writer tables hold each symbol's bits with their count (a length's extra bits
//!   included), so a literal is one lookup, a match two. When the block's longest literal and
//!   longest match (with its distance) fit twice in 57 bits, two tokens are written per flush;
//!   else, when a literal and the longest token do, two tokens of which one is a literal. The
//!   last match's distance code is kept (on hinted lines most matches of a block share one
//!   distance), the room left is checked once per 256 tokens (a block reserves that much past
//!   its exact size), and the writer is compiled with BMI2 where the CPU has it (shifts by any
//!   register).
//!
//! Each [`FastDeflate::compress`] call writes one complete, self-contained stream (last block
//! BFINAL, byte-aligned end), so its output can be the body of a gzip member on its own.
//! [`FastDeflate::stream_push`] instead continues one stream across calls (matches reach into
//! the window of earlier pushes) and [`FastDeflate::stream_end`] gives the bytes that end it
//! where it stands, without changing its state: `gzip.rs` writes them after every push and
//! replaces them by the next one.

const WINDOW: usize = 32 * 1024;
const MIN_MATCH: usize = 4;
const MAX_MATCH: usize = 258;
const HASH_BITS: u32 = 15;
const HASH_LEN: u32 = 6;
const HASH_SIZE: usize = 1 << HASH_BITS;
/// A line hint ([`FastDeflate::compress_hinted`]): `at << HINT_SHIFT | (dist - 1)`.
pub const HINT_SHIFT: u32 = 16;
const HINT_DIST: u64 = (1 << 15) - 1;

/// The hint for a line at `at` whose reference starts `dist` bytes before it; `None` when the
/// distance is out of deflate's reach (0 or over 32 KiB).
#[inline(always)]
pub fn hint(at: usize, dist: usize) -> Option<u64> {
    if (1..=WINDOW).contains(&dist) {
        Some((at as u64) << HINT_SHIFT | (dist - 1) as u64)
    } else {
        None
    }
}

/// Tokens (literals or matches) per block.
pub const TOKEN_CAP: usize = 16 * 1024;
/// The LZ pass handles an input in segments of at most this many bytes so that positions fit
/// the 32-bit table values (matches do not cross a segment boundary).
const SEGMENT: usize = 1 << 30;
/// Literal run length after which the probe step grows by one.
const SKIP_SHIFT: u32 = 6;
/// At a match's end, the bits a hash candidate must save over the rep candidate (the cost
/// estimate is rough: a margin keeps the choice where it is clear).
const PROBE_MARGIN: u32 = 6;
/// Weight of a rep candidate's coverage of the next 16 bytes (in 4-byte runs) against its
/// literals and distance bits: the longer run wins when the costs are close.
const COVER_WEIGHT: i32 = 2;
/// A hash candidate farther than the rep one is charged this many times the difference of
/// their distances' extra bits: the matches that follow at it pay that difference too.
const FAR_WEIGHT: u32 = 3;
/// Blocks with fewer tokens are not worth a dynamic code's header.
const DYN_MIN_TOKENS: usize = 256;
/// Largest stored-block payload.
const STORED_MAX: usize = 65_535;

/// Lengths 3..=258: base of each length symbol 257..=285, and extra bits.
const LEN_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LEN_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
/// Distances 1..=32768: base of each distance symbol, and extra bits.
const DIST_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];
/// Order in which the code-length code lengths are sent.
const CL_ORDER: [usize; 19] = [
    16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
];

/// Match length (index 0..=258) → length symbol index (0..=28, symbol 257 + index).
const LEN_SYM: [u8; 259] = {
    let mut t = [0u8; 259];
    let mut len = 3;
    while len <= 258 {
        let mut s = 0;
        while s + 1 < 29 && LEN_BASE[s + 1] as usize <= len {
            s += 1;
        }
        t[len] = s as u8;
        len += 1;
    }
    t
};

/// Distance symbol of `dist - 1` (0..=32767).
#[inline(always)]
fn dist_sym(d1: u32) -> u32 {
    if d1 < 4 {
        d1
    } else {
        let l = 31 - d1.leading_zeros();
        2 * l + ((d1 >> (l - 1)) & 1)
    }
}

/// Tokens are `sym | extra << 10 | dist_sym << 27`: `sym` is a literal byte, or
/// `256 + length` for a match, `extra` the value of the distance's extra bits. A literal has
/// dist_sym 30, whose code is empty, so literals and matches are written by the same
/// branch-free code.
const LIT: u32 = 30 << 27;

/// The distance part of a match token (`extra << 10 | dist_sym << 27`) for `dist - 1`, and
/// its distance symbol.
#[inline(always)]
fn dist_token(d1: u32) -> (u32, u32) {
    let dc = dist_sym(d1);
    let extra = d1 + 1 - DIST_BASE[dc as usize & 31] as u32;
    (extra << 10 | dc << 27, dc)
}

/// Bit k of `four_run(m)` set iff bits k..k+4 of `m` are (pairs, then pairs of pairs).
#[inline(always)]
fn four_run(m: u64) -> u64 {
    let m2 = m & (m >> 1);
    m2 & (m2 >> 2)
}

/// Writes `input[p..p + k]` (`k <= 16`) as literal tokens into `toks` (16 slots), counted.
///
/// # Safety
/// `p + 16 <= input.len()`.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn skip_literals(
    input: &[u8],
    p: usize,
    k: usize,
    toks: &mut [u32],
    lit_freq: &mut [u32; 288],
) {
    let t: &mut [u32; 16] = toks.try_into().unwrap();
    // SAFETY: `p + 16 <= input.len()` (the contract).
    let src: &[u8; 16] = unsafe { &*input.as_ptr().add(p).cast::<[u8; 16]>() };
    for (t, &b) in t.iter_mut().zip(src).take(k) {
        *t = b as u32 | LIT;
        lit_freq[b as usize] += 1;
    }
}

/// Bit k (k < 13) set iff bytes k..k+4 of `b[i..]` and `b[j..]` agree (no branch per byte).
#[inline(always)]
fn rep_run(b: &[u8], i: usize, j: usize) -> u32 {
    let m = zero_bytes(read64(b, i) ^ read64(b, j))
        | zero_bytes(read64(b, i + 8) ^ read64(b, j + 8)) << 8;
    let m2 = m & (m >> 1);
    m2 & (m2 >> 2) & 0x1fff
}

/// Marks the branch that calls it as the unlikely one (for the register allocator: the
/// values its code uses are the ones spilled).
#[cold]
#[inline]
fn cold() {}

/// Bit k (k < 64) set iff `b[i + k] == b[i - d + k]` (`d <= i`).
#[cfg(test)]
fn eq_mask(b: &[u8], i: usize, d: usize) -> u64 {
    assert!(d <= i && i + 64 <= b.len());
    // SAFETY: `WIDE` is false: no AVX2 instruction; the bytes are in `b` (just checked).
    #[allow(unsafe_code)]
    unsafe {
        eq_mask_w::<false>(b, i, d)
    }
}

/// Bit k (k < 64) set iff `b[i + k] == b[i - d + k]` (`d <= i`); `WIDE`: with two 32-byte
/// AVX2 compares instead of four 16-byte SSE2 ones.
///
/// # Safety
/// `d <= i` and `i + 64 <= b.len()` (the callers have checked both: no bounds checks here,
/// where every mask of the hinted path is made). With `WIDE`, the CPU must have AVX2 (the
/// caller is compiled with it: see [`FastDeflate::hinted`]).
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn eq_mask_w<const WIDE: bool>(b: &[u8], i: usize, d: usize) -> u64 {
    debug_assert!(d <= i && i + 64 <= b.len());
    // One slice of both: its length tells the compiler that the two below are in it.
    // SAFETY: `i - d <= i + 64 <= b.len()` (this function's contract).
    let w = unsafe { b.get_unchecked(i - d..i + 64) };
    let (x, y): (&[u8; 64], &[u8; 64]) = (w[d..].try_into().unwrap(), w[..64].try_into().unwrap());
    #[cfg(target_arch = "x86_64")]
    if WIDE {
        use core::arch::x86_64::{
            __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8,
        };
        // SAFETY: AVX2 is available (this function's contract); the unaligned loads read
        // the 64 bytes of `x` and `y` (arrays of exactly 64 bytes), 32 at a time.
        unsafe {
            let (xp, yp) = (x.as_ptr() as *const __m256i, y.as_ptr() as *const __m256i);
            let lo = _mm256_movemask_epi8(_mm256_cmpeq_epi8(
                _mm256_loadu_si256(xp),
                _mm256_loadu_si256(yp),
            )) as u32 as u64;
            let hi = _mm256_movemask_epi8(_mm256_cmpeq_epi8(
                _mm256_loadu_si256(xp.add(1)),
                _mm256_loadu_si256(yp.add(1)),
            )) as u32 as u64;
            return lo | hi << 32;
        }
    }
    let mut m = 0u64;
    for c in 0..4 {
        m |= (eq16(&x[16 * c..16 * c + 16], &y[16 * c..16 * c + 16]) as u64) << (16 * c);
    }
    m
}

#[cfg(test)]
thread_local! {
    /// Test hook: the baseline paths (SSE2 masks, emission without BMI2) even where the CPU
    /// has AVX2 and BMI2, so that the tests cover both.
    static BASELINE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the paths compiled for AVX2 / BMI2 may be taken (where the CPU has them).
#[inline(always)]
fn wide_ok() -> bool {
    #[cfg(test)]
    if BASELINE.with(|b| b.get()) {
        return false;
    }
    true
}

/// Bit k (k < 16) set iff `x[k] == y[k]` (16-byte slices).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(unsafe_code)]
fn eq16(x: &[u8], y: &[u8]) -> u32 {
    use core::arch::x86_64::{__m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8};
    let (x, y): (&[u8; 16], &[u8; 16]) = (x.try_into().unwrap(), y.try_into().unwrap());
    // SAFETY: SSE2 is part of the x86_64 baseline; the unaligned loads read the 16 bytes of
    // `x` and `y` (arrays of exactly 16 bytes).
    unsafe {
        let a = _mm_loadu_si128(x.as_ptr() as *const __m128i);
        let b = _mm_loadu_si128(y.as_ptr() as *const __m128i);
        _mm_movemask_epi8(_mm_cmpeq_epi8(a, b)) as u32
    }
}

/// Bit k (k < 16) set iff `x[k] == y[k]` (16-byte slices).
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn eq16(x: &[u8], y: &[u8]) -> u32 {
    let z = |o: usize| zero_bytes(read64(x, o) ^ read64(y, o));
    z(0) | z(8) << 8
}

/// Bit k (k < 8) set iff byte k of `x` is zero: the high bit of each zero byte (exact, no
/// carries between bytes), gathered into one byte by a multiply.
#[inline(always)]
fn zero_bytes(x: u64) -> u32 {
    let z = zero_byte_mask(x);
    ((z >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u32
}

/// The high bit of each zero byte of `x`, in place (exact: no carries between bytes).
#[inline(always)]
pub(crate) fn zero_byte_mask(x: u64) -> u64 {
    const L: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    !(((x & L) + L) | x) & !L
}

#[inline(always)]
fn read64(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().unwrap())
}

/// `b[i..i + N]` with no bounds check (the general path's probes, which run at nearly every
/// position of the text the hints do not cover).
///
/// # Safety
/// `i + N <= b.len()`.
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn load<const N: usize>(b: &[u8], i: usize) -> [u8; N] {
    debug_assert!(i + N <= b.len());
    // SAFETY: the `N` bytes are in `b` (this function's contract); `[u8; N]` has alignment 1.
    unsafe { b.as_ptr().add(i).cast::<[u8; N]>().read() }
}

/// Hash of the first [`HASH_LEN`] bytes of `x` (little-endian).
#[inline(always)]
fn hash(x: u64, shift: u32) -> usize {
    // (`shift` is at least `64 - HASH_BITS`: the mask only tells the compiler so, which then
    // indexes the table without a bounds check.)
    ((x << (64 - 8 * HASH_LEN)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
        & (HASH_SIZE - 1)
}

/// Length of the common prefix of `b[a..]` and `b[p..]`, not reaching `end` on the `p` side
/// (`a < p`, `end <= b.len()`).
#[inline(always)]
fn extend(b: &[u8], a: usize, p: usize, end: usize) -> usize {
    let x = &b[p..end];
    let y = &b[a..a + x.len()];
    let mut l = 0;
    for (cx, cy) in x.chunks_exact(16).zip(y.chunks_exact(16)) {
        let m = eq16(cx, cy);
        if m != 0xffff {
            return l + (!m).trailing_zeros() as usize;
        }
        l += 16;
    }
    if l + 8 <= x.len() {
        let v = read64(x, l) ^ read64(y, l);
        if v != 0 {
            return l + (v.trailing_zeros() / 8) as usize;
        }
        l += 8;
    }
    while l < x.len() && x[l] == y[l] {
        l += 1;
    }
    l
}

/// Reusable deflate state: hash table, token buffer, frequencies, Huffman scratch.
pub struct FastDeflate {
    table: Box<[u32; HASH_SIZE]>,
    /// The table value of the LZ pass's `lo` (see [`FastDeflate::lz`]), for the hinted
    /// path's probe where a line differs from its reference.
    hint_floor: u32,
    /// Test builds: the hinted path's misses taken by the hash probe and by literals.
    #[cfg(test)]
    misses: [u64; 2],
    /// Test builds: no hash probe on a miss (to measure what it finds).
    #[cfg(test)]
    probe_off: bool,
    /// `64 - bits` of this call's hash: small inputs use only the first `2^bits` entries of
    /// the table (a 3 KB member probing 128 KiB of cold table costs more than compressing).
    shift: u32,
    /// Table value of the next position: values below a segment's start value are stale.
    next: u32,
    /// The pending block's tokens: `tokens[..ntok]`.
    tokens: Box<[u32; TOKEN_CAP]>,
    ntok: usize,
    lit_freq: [u32; 288],
    dist_freq: [u32; 32],
    /// Input offset where the pending block starts.
    blk_start: usize,
    /// Bits not yet written (fewer than 8 between blocks).
    bb: u64,
    bc: u32,
    lit: Code<288>,
    dist: Code<32>,
    fixed_lit: Code<288>,
    fixed_dist: Code<32>,
    /// Writer tables of the current dynamic code and of the fixed code.
    tabs: Tabs,
    fixed_tabs: Tabs,
    /// An open stream ([`FastDeflate::stream_push`]): the last [`WINDOW`] to 1.5 × [`WINDOW`]
    /// bytes pushed, then the input being pushed; `hist_val` is the table value of `hist[0]`.
    stream_open: bool,
    hist: Vec<u8>,
    hist_val: u32,
    /// The block that an open stream's pushes continue (its end-of-block code is only in the
    /// provisional end), and the code lengths of an open dynamic block (its writer tables
    /// are `tabs`).
    open_blk: OpenBlock,
    open_lens: ([u8; 288], [u8; 32]),
}

/// The block a stream's next push may continue.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum OpenBlock {
    None,
    Fixed,
    /// A dynamic code in which every symbol has a code (built from smoothed frequencies), so
    /// that any later push can be written with it.
    Dynamic,
}

/// Writer tables of a code: see [`Tabs::fill`].
struct Tabs {
    /// By token `sym` (literal, 256 = end of block, 256 + length): `nbits | bits << 8`,
    /// length extra bits included.
    sym: Box<[u32; 1024]>,
    /// By distance symbol (30 and 31: none, all zero): `code length | with extra bits << 8 |
    /// code << 16`. (The low byte of an entry is its shift: the writer shifts by the whole
    /// entry, which x86 masks to its low 6 bits.)
    dist: [u32; 32],
}

impl Tabs {
    fn new() -> Tabs {
        Tabs {
            sym: vec![0u32; 1024].into_boxed_slice().try_into().unwrap(),
            dist: [0; 32],
        }
    }

    fn fill(&mut self, lit: &Code<288>, dist: &Code<32>) {
        for i in 0..257 {
            self.sym[i] = lit.lens[i] as u32 | (lit.codes[i] as u32) << 8;
        }
        for (len, &s) in LEN_SYM.iter().enumerate().skip(3) {
            let s = s as usize;
            let cl = lit.lens[257 + s] as u32;
            let x = (len - LEN_BASE[s] as usize) as u32;
            self.sym[256 + len] =
                (cl + LEN_EXTRA[s] as u32) | (lit.codes[257 + s] as u32 | x << cl) << 8;
        }
        for (i, &extra) in DIST_EXTRA.iter().enumerate() {
            let n = dist.lens[i] as u32;
            self.dist[i] = n | (n + extra as u32) << 8 | (dist.codes[i] as u32) << 16;
        }
    }

    /// The end-of-block code: `bits | nbits << 24`.
    fn eob(&self) -> u32 {
        let v = self.sym[256];
        v >> 8 | (v & 0xff) << 24
    }
}

impl Default for FastDeflate {
    fn default() -> Self {
        Self::new()
    }
}

/// A canonical Huffman code: lengths and bit-reversed codes (LSB-first, as deflate sends).
#[derive(Clone, Copy)]
struct Code<const N: usize> {
    lens: [u8; N],
    codes: [u16; N],
}

impl<const N: usize> Code<N> {
    const fn empty() -> Self {
        Code {
            lens: [0; N],
            codes: [0; N],
        }
    }

    /// Canonical codes from `lens` (RFC 1951 3.2.2), reversed for LSB-first output.
    fn assign(&mut self) {
        let mut count = [0u16; 16];
        for &l in &self.lens {
            count[l as usize] += 1;
        }
        count[0] = 0;
        let mut next = [0u16; 16];
        let mut code = 0u16;
        for bits in 1..16 {
            code = (code + count[bits - 1]) << 1;
            next[bits] = code;
        }
        for s in 0..N {
            let l = self.lens[s] as usize;
            if l != 0 {
                self.codes[s] = next[l].reverse_bits() >> (16 - l);
                next[l] += 1;
            } else {
                self.codes[s] = 0;
            }
        }
    }
}

/// Fills `lens[..freq.len()]` with length-limited Huffman code lengths for `freq`. The code is
/// always complete (Kraft sum exactly 1) and has at least two symbols: with fewer than two used
/// symbols, symbol 0 or 1 gets a length of 1 too.
fn huffman_lengths(freq: &[u32], limit: usize, lens: &mut [u8]) {
    // Scratch arrays sized for the alphabet: the distance and code-length codes (30 and 19
    // symbols) do not zero the literal code's (a small push builds all three).
    if freq.len() <= 32 {
        huffman_lengths_in::<32, 64>(freq, limit, lens)
    } else {
        huffman_lengths_in::<288, 576>(freq, limit, lens)
    }
}

/// Writes the used symbols of `freq` to `leaves` as `(frequency, symbol)` in ascending order;
/// returns their count. Those of frequency 1 are put first, already in that order, and only the
/// others are sorted: in a stream's code (from frequencies × 64 + 1, see
/// [`FastDeflate::dynamic_header_from`]) every unused symbol has frequency 1, most of the 286,
/// and sorting them was most of the cost of a small push.
fn sorted_leaves(freq: &[u32], leaves: &mut [(u32, u16)]) -> usize {
    let mut n = 0;
    for (s, &f) in freq.iter().enumerate() {
        if f == 1 {
            leaves[n] = (f, s as u16);
            n += 1;
        }
    }
    let ones = n;
    for (s, &f) in freq.iter().enumerate() {
        if f > 1 {
            leaves[n] = (f, s as u16);
            n += 1;
        }
    }
    leaves[ones..n].sort_unstable();
    n
}

/// [`huffman_lengths`] with scratch for up to `N` symbols (`N2 = 2 * N`).
fn huffman_lengths_in<const N: usize, const N2: usize>(
    freq: &[u32],
    limit: usize,
    lens: &mut [u8],
) {
    let n_sym = freq.len();
    debug_assert!(n_sym <= N && N2 == 2 * N);
    debug_assert!((2..=288).contains(&n_sym) && (1..=15).contains(&limit));
    debug_assert!(n_sym <= 1 << limit);
    lens[..n_sym].fill(0);
    let mut leaves = [(0u32, 0u16); N];
    let n = sorted_leaves(freq, &mut leaves);
    if n < 2 {
        let used = if n == 1 { leaves[0].1 as usize } else { 1 };
        lens[used] = 1;
        lens[if used == 0 { 1 } else { 0 }] = 1;
        return;
    }
    let leaves = &mut leaves[..n];
    // Two-queue Huffman: leaves ascending, internal nodes created in ascending weight order.
    // parent[i] for leaf i, parent[n + k] for internal node k; the root is internal n - 2.
    let mut w_int = [0u64; N];
    let mut parent = [0u16; N2];
    let (mut li, mut ii) = (0, 0);
    for k in 0..n - 1 {
        let mut w = 0u64;
        for _ in 0..2 {
            if li < n && (ii >= k || leaves[li].0 as u64 <= w_int[ii]) {
                w += leaves[li].0 as u64;
                parent[li] = k as u16;
                li += 1;
            } else {
                w += w_int[ii];
                parent[n + ii] = k as u16;
                ii += 1;
            }
        }
        w_int[k] = w;
    }
    let mut depth = [0u16; N];
    for k in (0..n - 2).rev() {
        depth[k] = depth[parent[n + k] as usize] + 1;
    }
    let mut count = [0u32; 16];
    for i in 0..n {
        let d = (depth[parent[i] as usize] as usize + 1).min(limit);
        count[d] += 1;
    }
    // Kraft sum in units of 2^-limit: must end exactly at 2^limit.
    let full = 1u32 << limit;
    let mut k: u32 = (1..=limit).map(|l| count[l] << (limit - l)).sum();
    while k > full {
        // Deepen a leaf from the deepest level that is not at the limit yet.
        let mut l = limit - 1;
        while count[l] == 0 {
            l -= 1;
        }
        count[l] -= 1;
        count[l + 1] += 1;
        k -= 1 << (limit - l - 1);
    }
    while k < full {
        // Raise a leaf from the deepest level; the deficit is a multiple of its weight.
        let mut l = limit;
        while count[l] == 0 {
            l -= 1;
        }
        count[l] -= 1;
        count[l - 1] += 1;
        k += 1 << (limit - l);
    }
    // Least frequent leaves get the longest codes.
    let mut i = 0;
    for l in (1..=limit).rev() {
        for _ in 0..count[l] {
            lens[leaves[i].1 as usize] = l as u8;
            i += 1;
        }
    }
}

/// Bit writer into a slice with at least 8 bytes of slack past the last byte written.
struct Bits<'a> {
    buf: &'a mut [u8],
    pos: usize,
    bb: u64,
    bc: u32,
}

impl Bits<'_> {
    /// Adds `n` bits (`v < 2^n`); at most 56 bits between flushes.
    #[inline(always)]
    fn put(&mut self, v: u32, n: u32) {
        self.bb |= (v as u64) << self.bc;
        self.bc += n;
    }

    /// Writes the whole bytes; fewer than 8 bits stay buffered.
    #[inline(always)]
    fn flush(&mut self) {
        self.buf[self.pos..self.pos + 8].copy_from_slice(&self.bb.to_le_bytes());
        let k = self.bc >> 3;
        self.pos += k as usize;
        self.bb >>= k * 8;
        self.bc &= 7;
    }

    /// Pads to a byte boundary and flushes.
    fn align(&mut self) {
        self.bc = (self.bc + 7) & !7;
        self.flush();
    }
}

/// Bits that a stored-block encoding of `len` bytes occupies when it starts at bit `bc`
/// (0..8) of the current byte.
fn stored_bits(bc: u32, len: usize) -> u64 {
    let chunks = len.div_ceil(STORED_MAX).max(1) as u64;
    // First chunk: 3 header bits, pad to a byte; later chunks start aligned (8 bits).
    let first = ((bc as u64 + 3 + 7) & !7) - bc as u64;
    first + (chunks - 1) * 8 + chunks * 32 + len as u64 * 8
}

impl FastDeflate {
    pub fn new() -> FastDeflate {
        let table: Box<[u32; HASH_SIZE]> =
            vec![0u32; HASH_SIZE].into_boxed_slice().try_into().unwrap();
        let mut fixed_lit = Code::<288>::empty();
        for (s, l) in fixed_lit.lens.iter_mut().enumerate() {
            *l = match s {
                0..=143 => 8,
                144..=255 => 9,
                256..=279 => 7,
                _ => 8,
            };
        }
        fixed_lit.assign();
        let mut fixed_dist = Code::<32>::empty();
        fixed_dist.lens = [5; 32];
        fixed_dist.assign();
        let mut fixed_tabs = Tabs::new();
        fixed_tabs.fill(&fixed_lit, &fixed_dist);
        FastDeflate {
            table,
            hint_floor: 0,
            #[cfg(test)]
            misses: [0; 2],
            #[cfg(test)]
            probe_off: false,
            shift: 64 - HASH_BITS,
            next: 1,
            tokens: vec![0u32; TOKEN_CAP].into_boxed_slice().try_into().unwrap(),
            ntok: 0,
            lit_freq: [0; 288],
            dist_freq: [0; 32],
            blk_start: 0,
            bb: 0,
            bc: 0,
            lit: Code::empty(),
            dist: Code::empty(),
            fixed_lit,
            fixed_dist,
            tabs: Tabs::new(),
            fixed_tabs,
            stream_open: false,
            hist: Vec::new(),
            hist_val: 0,
            open_blk: OpenBlock::None,
            open_lens: ([0; 288], [0; 32]),
        }
    }

    /// Appends to `out` one complete, self-contained raw deflate stream holding `input`: the
    /// last block has BFINAL set, the stream ends byte-aligned, and it refers to nothing
    /// outside `input` (each call is independent: a decoder can decode it alone).
    ///
    /// Output bound: at most `input.len() + input.len() / 2048 + 16` bytes are appended (every
    /// block is at most as large as storing it: 5 bytes per 64 KiB stored chunk, and a block
    /// ends only after [`TOKEN_CAP`] tokens, i.e. at least 16 KiB of input, or at the end).
    pub fn compress(&mut self, input: &[u8], out: &mut Vec<u8>) {
        self.compress_hinted(input, &[], out)
    }

    /// [`FastDeflate::compress`] with line hints: each entry, [`hint`]`(at, dist)`, says that
    /// the line starting at `input[at]` is most like the bytes `dist` before it (the previous
    /// line rendered from the same template). Hints are sorted by `at`. They are only advice:
    /// every match is compared byte for byte, so a wrong hint costs ratio, never correctness.
    pub fn compress_hinted(&mut self, input: &[u8], hints: &[u64], out: &mut Vec<u8>) {
        // Tokens and frequencies are empty between calls (flush_block clears them).
        debug_assert!(self.ntok == 0);
        // An open stream is abandoned (its table entries become stale below).
        self.stream_open = false;
        self.blk_start = 0;
        self.bb = 0;
        self.bc = 0;
        // About one table entry per two input bytes, between 2^10 and 2^HASH_BITS entries.
        // Entries written under another size are older than this call's floor: stale.
        let bits = (usize::BITS - input.len().leading_zeros()).clamp(11, HASH_BITS + 1) - 1;
        self.shift = 64 - bits;
        let mut s = 0;
        while s < input.len() {
            let e = (s + SEGMENT).min(input.len());
            let n = (e - s) as u64;
            if self.next as u64 + n + 1 >= u32::MAX as u64 {
                self.table.fill(0);
                self.next = 1;
            }
            let floor = self.next;
            self.lz(input, s, s, e, floor, (hints, 0), out);
            self.next = floor + n as u32;
            s = e;
        }
        self.flush_block(input, input.len(), out, true);
        debug_assert!(self.bc == 0);
    }

    /// Appends `input` to the open stream (opening one if none is): writes non-final blocks
    /// whose matches may reach into the last [`WINDOW`] bytes pushed before, and keeps up to 7
    /// bits pending. What is written so far becomes a complete stream once followed by
    /// [`FastDeflate::stream_end`]'s bytes; the next push continues from the pending bits, so
    /// those end bytes are provisional: a caller that wrote them replaces them by the next
    /// push's output (see `gzip.rs`).
    ///
    /// Output bound: as [`FastDeflate::compress`]; history is copied (at most 1.5 × [`WINDOW`]
    /// bytes plus `input`), held until [`FastDeflate::trim`].
    pub fn stream_push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        self.stream_push_hinted(input, &[], out)
    }

    /// [`FastDeflate::stream_push`] with line hints (see [`FastDeflate::compress_hinted`]:
    /// `at` counts from the start of `input`; `dist` may reach into earlier pushes).
    pub fn stream_push_hinted(&mut self, input: &[u8], hints: &[u64], out: &mut Vec<u8>) {
        debug_assert!(self.ntok == 0);
        if !self.stream_open {
            self.stream_open = true;
            self.open_blk = OpenBlock::None;
            self.hist.clear();
            self.hist_val = self.next;
            self.bb = 0;
            self.bc = 0;
            // The table size is chosen once per stream (entries hashed under another size
            // would be in the wrong slots): about one entry per two bytes of a full window,
            // fewer for a stream that starts small (a daemon's few KB per second).
            let bits = (usize::BITS - input.len().leading_zeros()).clamp(13, HASH_BITS + 1) - 1;
            self.shift = 64 - bits;
        }
        // Pieces small enough for the 32-bit table values.
        for (k, piece) in input.chunks(SEGMENT / 2).enumerate() {
            let n = piece.len();
            // Hints count from the input's start: only the first piece (of up to 512 MiB,
            // so in practice the whole input) takes them.
            let hints = if k == 0 { hints } else { &[][..] };
            if self.hist.is_empty() {
                // Nothing to reach back to: compress from the input itself and keep only its
                // last window (a large first push is not copied whole).
                if self.hist_val as u64 + n as u64 + 1 >= u32::MAX as u64 {
                    self.table.fill(0);
                    self.hist_val = 1;
                }
                self.blk_start = 0;
                self.lz(piece, 0, 0, n, self.hist_val, (hints, 0), out);
                self.flush_block(piece, n, out, false);
                let kept = n.min(WINDOW);
                self.hist.extend_from_slice(&piece[n - kept..]);
                self.hist_val += (n - kept) as u32;
                self.next = self.hist_val + kept as u32;
                continue;
            }
            // History is cut back to the window only once it holds 1.5 windows, so that
            // at most two bytes are moved per byte pushed (matches check the distance), and
            // the buffer stays under 48 KiB plus a push (a daemon's RSS).
            if self.hist.len() > WINDOW + WINDOW / 2 {
                let drop = self.hist.len() - WINDOW;
                self.hist.drain(..drop);
                self.hist_val += drop as u32;
            }
            let keep = self.hist.len();
            self.hist.extend_from_slice(piece);
            let total = self.hist.len();
            if self.hist_val as u64 + total as u64 + 1 >= u32::MAX as u64 {
                // Forget the history's positions (its matches only) rather than overflow.
                self.table.fill(0);
                self.hist_val = 1;
            }
            let hist = std::mem::take(&mut self.hist);
            self.blk_start = keep;
            // Offsets in `hist` are `keep` further on than in the piece.
            self.lz(&hist, 0, keep, total, self.hist_val, (hints, keep), out);
            self.flush_block(&hist, total, out, false);
            self.hist = hist;
            self.next = self.hist_val + total as u32;
        }
    }

    /// Appends the pending bits of the open stream and an empty final block (fixed code,
    /// 10 bits), padded to a byte: the end of a complete stream. Changes nothing: a later
    /// [`FastDeflate::stream_push`] continues the stream as if these bytes were not written.
    /// With no stream open, appends an empty stream.
    pub fn stream_end(&self, out: &mut Vec<u8>) {
        let (mut bb, mut bc) = if self.stream_open {
            (self.bb, self.bc)
        } else {
            (0, 0)
        };
        // The open block's end-of-block code.
        let eob = self.open_eob();
        bb |= ((eob & 0xff_ffff) as u64) << bc;
        bc += eob >> 24;
        // BFINAL 1, BTYPE 01 (fixed), then the 7-bit all-zero end-of-block code.
        let bb = bb | 3 << bc;
        let n = (bc + 10).div_ceil(8) as usize;
        out.extend_from_slice(&bb.to_le_bytes()[..n]);
    }

    /// Bytes [`FastDeflate::stream_end`] appends now (at most 4).
    pub fn stream_end_len(&self) -> usize {
        let bc = if self.stream_open { self.bc } else { 0 };
        (bc + (self.open_eob() >> 24) + 10).div_ceil(8) as usize
    }

    /// End-of-block code of the open block (`bits | nbits << 24`; 0 bits when none).
    fn open_eob(&self) -> u32 {
        if !self.stream_open {
            return 0;
        }
        match self.open_blk {
            OpenBlock::None => 0,
            OpenBlock::Fixed => self.fixed_tabs.eob(),
            OpenBlock::Dynamic => self.tabs.eob(),
        }
    }

    /// Closes the open stream: the next push starts a new one that refers to nothing before.
    pub fn stream_close(&mut self) {
        self.stream_open = false;
    }

    /// Releases the stream history if its buffer grew past `keep` bytes.
    pub fn trim(&mut self, keep: usize) {
        if self.hist.capacity() > keep {
            let mut v = Vec::with_capacity(WINDOW.max(self.hist.len().min(keep)));
            v.extend_from_slice(&self.hist[self.hist.len().saturating_sub(WINDOW)..]);
            // The dropped bytes are before the kept ones: keep the values consistent.
            self.hist_val += (self.hist.len() - v.len()) as u32;
            self.hist = v;
        }
    }

    /// Greedy LZ77 over `input[s..e]`, with matches reaching back to `lo` (`lo <= s`); table
    /// value of position `p` is `floor + (p - lo)`. `hints.0` are line hints (see
    /// [`FastDeflate::compress_hinted`]) whose line starts at `input[at + hints.1]`.
    #[allow(clippy::too_many_arguments)]
    fn lz(
        &mut self,
        input: &[u8],
        lo: usize,
        s: usize,
        e: usize,
        floor: u32,
        (hints, base): (&[u64], usize),
        out: &mut Vec<u8>,
    ) {
        // Nothing past `e` is read (the compiler then knows that reads before `e - 8` are in
        // the slice).
        let input = &input[..e];
        let shift = self.shift;
        self.hint_floor = floor;
        let mut p = s;
        let mut lit = s;
        let mut last_dist = 0usize;
        let mut dist2 = 0usize;
        // The next hint's position in `input` (usize::MAX: none left) and its index.
        let pos_of = |h: u64| (h >> HINT_SHIFT) as usize + base;
        let mut hi = hints.partition_point(|&h| pos_of(h) < s);
        let mut next_at = hints.get(hi).map_or(usize::MAX, |&h| pos_of(h));
        if e - s >= 8 {
            let last = e - 8;
            while p <= last {
                if p >= next_at {
                    // Hinted lines: the reference line is known; match at its distance, with
                    // no hash probes and no scoring (see [`FastDeflate::hinted`]). When it
                    // finds nothing, the general path takes over from `p` until the next
                    // hinted line.
                    let mut d = 0;
                    while hi < hints.len() && pos_of(hints[hi]) <= p {
                        d = (hints[hi] & HINT_DIST) as usize + 1;
                        hi += 1;
                    }
                    if d != 0 {
                        self.literals(input, lit, p, out);
                        let (np, nd) = self.hinted(input, lo, p, e, d, (hints, base, &mut hi), out);
                        p = np;
                        lit = p;
                        if nd != last_dist {
                            dist2 = last_dist;
                            last_dist = nd;
                        }
                    }
                    next_at = hints.get(hi).map_or(usize::MAX, |&h| pos_of(h));
                    if p > last {
                        break;
                    }
                }
                // SAFETY: `p <= last = e - 8`, and `input` ends at `e`.
                #[allow(unsafe_code)]
                let x8 = u64::from_le_bytes(unsafe { load(input, p) });
                let x = x8 as u32;
                let h = hash(x8, shift);
                let cv = self.table[h];
                self.table[h] = floor + (p - lo) as u32;
                // The previous match distance first: in trace lines the same field of the
                // previous line is usually at that offset. (The 4 bytes read below start
                // before `p`, so they end before `e`.)
                let mut dist = 0;
                #[allow(unsafe_code)]
                let at_last = last_dist != 0 && p - lo >= last_dist && {
                    // SAFETY: `last_dist <= p - lo`: the read starts at or after `lo`, before
                    // `p`.
                    u32::from_le_bytes(unsafe { load(input, p - last_dist) }) == x
                };
                if at_last {
                    dist = last_dist;
                } else if cv >= floor {
                    let cand = lo + (cv - floor) as usize;
                    let d = p - cand;
                    // SAFETY: `d <= WINDOW` is tested first, so `lo <= cand <= p`.
                    #[allow(unsafe_code)]
                    if d <= WINDOW && u32::from_le_bytes(unsafe { load(input, cand) }) == x {
                        dist = d;
                    }
                }
                if dist == 0 {
                    p += 1 + ((p - lit) >> SKIP_SHIFT);
                    continue;
                }
                // Length of the match at `p`, when already measured.
                let mut known = 0;
                loop {
                    let end = e.min(p + MAX_MATCH);
                    let len = if known != 0 {
                        known
                    } else {
                        MIN_MATCH + extend(input, p - dist + MIN_MATCH, p + MIN_MATCH, end)
                    };
                    known = 0;
                    self.literals(input, lit, p, out);
                    self.push_match(input, p, len, dist, out);
                    if dist != last_dist {
                        dist2 = last_dist;
                    }
                    last_dist = dist;
                    p += len;
                    lit = p;
                    if p > last || p >= next_at {
                        break;
                    }
                    // Insert the match's last position, so the next line finds the position
                    // that follows this field in this line rather than in an older one.
                    if len > 8 {
                        let q = p - 1;
                        self.table[hash(read64(input, q), shift)] = floor + (q - lo) as u32;
                    }
                    if p + 12 > last {
                        break;
                    }
                    // A field that differs (a number) is usually followed by the same text at
                    // the same distance: look for 4 equal bytes at that distance in the next
                    // 16, without branching per position and without the hash table. When
                    // they agree on every position from the first run on, that is taken
                    // (the fast path, as uniform lines take it almost always).
                    let first = rep_run(input, p, p - dist);
                    let tq = first.trailing_zeros();
                    if first != 0 && first >> tq == 0x1fff >> tq {
                        self.table[hash(read64(input, p), shift)] = floor + (p - lo) as u32;
                        p += tq as usize;
                        continue;
                    }
                    // Else the choice is between: the hash candidate at `p` (a field that
                    // this line's previous-line reference lacks, as a name when consecutive
                    // lines are of different kinds: the table gives its last occurrence, as
                    // a rule the same kind of line one period back), needing 8 equal bytes;
                    // and the rep candidates: the last distance, the one before it (a
                    // return to the period after a detour), and when the last finds
                    // nothing, the last ± 1 (a number one digit longer or shorter).
                    let x8 = read64(input, p);
                    let h = hash(x8, shift);
                    let cv = self.table[h];
                    self.table[h] = floor + (p - lo) as u32;
                    let mut hd = 0;
                    if cv >= floor {
                        let cand = lo + (cv - floor) as usize;
                        let d = p - cand;
                        if d <= WINDOW && d != dist && read64(input, cand) == x8 {
                            hd = d;
                        }
                    }
                    // Estimated bits: 5 per literal, the distance's extra bits; a rep
                    // candidate's run covering more of the 16 bytes is credited (`r != 0`).
                    let ebits = |d: usize| 31 - ((d as u32) | 1).leading_zeros();
                    let score = |r: u32, nd: usize| {
                        let cover = 31 - r.leading_zeros() - r.trailing_zeros();
                        (5 * r.trailing_zeros() + ebits(nd)) as i32 - COVER_WEIGHT * cover as i32
                    };
                    let (mut run, mut rd, mut best) = (first, dist, i32::MAX);
                    if first != 0 {
                        best = score(first, dist);
                    }
                    for nd in [dist2, dist - 1, dist + 1] {
                        if (first == 0 || nd == dist2) && (1..=WINDOW).contains(&nd) && nd <= p - lo
                        {
                            let r = rep_run(input, p, p - nd);
                            if r != 0 {
                                let c = score(r, nd);
                                if c < best {
                                    (run, rd, best) = (r, nd, c);
                                }
                            }
                        }
                    }
                    if run == 0 {
                        if hd != 0 {
                            dist = hd;
                            continue;
                        }
                        // Nothing: `p` was probed above; go on from the next position.
                        p += 1;
                        break;
                    }
                    let q = p + run.trailing_zeros() as usize;
                    // The hash candidate wins when it saves the rep's literals and distance
                    // bits by a margin; measured only when it can (two extends).
                    let far = FAR_WEIGHT * ebits(hd).saturating_sub(ebits(rd));
                    let cost_r = 5 * (q - p) as u32 + ebits(rd);
                    if hd != 0 && ebits(hd) + far + PROBE_MARGIN < cost_r {
                        let end = e.min(p + MAX_MATCH);
                        let lh = 8 + extend(input, p - hd + 8, p + 8, end);
                        let qend = e.min(q + MAX_MATCH);
                        let lr = MIN_MATCH + extend(input, q - rd + MIN_MATCH, q + MIN_MATCH, qend);
                        // One more match (about 20 bits) when the probe covers less.
                        let cost_h = ebits(hd) + far + if lh < (q - p) + lr { 20 } else { 0 };
                        if cost_h + PROBE_MARGIN < cost_r {
                            dist = hd;
                            known = lh;
                            continue;
                        }
                        known = lr;
                    }
                    dist = rd;
                    p = q;
                }
            }
        }
        self.literals(input, lit, e, out);
    }

    /// The hinted path of [`FastDeflate::lz`]: from `p` (no literals pending), matches at the
    /// hint's distance `d` (or at one more or less: a number one digit longer or shorter),
    /// found in a mask of 64 bytes' equality at that distance (a match starts at the first 4
    /// equal bytes among the next 16; its length is the run of equal bytes). A mask serves
    /// every step that starts in its first 48 bytes, and a run that reaches its end goes on
    /// in the next 64 bytes' mask, which the steps after it use in turn: one mask per 64
    /// bytes of uniform lines, no byte compared twice. The hints `hints.0[*hints.2..]` that
    /// a match passes give the distance from there on. Stops where none of the three
    /// distances has 4 equal bytes in the next 16, or less than 64 bytes before `e`: returns
    /// the position reached (no literals pending) and the last distance used (0: none).
    ///
    /// On x86_64 CPUs with AVX2 (detected at run time), the masks are two 32-byte compares.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn hinted(
        &mut self,
        input: &[u8],
        lo: usize,
        p: usize,
        e: usize,
        d: usize,
        hints: (&[u64], usize, &mut usize),
        out: &mut Vec<u8>,
    ) -> (usize, usize) {
        #[cfg(target_arch = "x86_64")]
        if wide_ok() && std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (just detected).
            #[allow(unsafe_code)]
            return unsafe { self.hinted_avx2(input, lo, p, e, d, hints, out) };
        }
        // SAFETY: not `WIDE`: no AVX2 instruction.
        #[allow(unsafe_code)]
        unsafe {
            self.hinted_with::<false>(input, lo, p, e, d, hints, out)
        }
    }

    /// [`FastDeflate::hinted`] compiled with AVX2.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[cfg(target_arch = "x86_64")]
    #[allow(clippy::too_many_arguments, unsafe_code)]
    #[target_feature(enable = "avx2")]
    unsafe fn hinted_avx2(
        &mut self,
        input: &[u8],
        lo: usize,
        p: usize,
        e: usize,
        d: usize,
        hints: (&[u64], usize, &mut usize),
        out: &mut Vec<u8>,
    ) -> (usize, usize) {
        // SAFETY: this function runs only where AVX2 is available (its contract).
        unsafe { self.hinted_with::<true>(input, lo, p, e, d, hints, out) }
    }

    /// The body of [`FastDeflate::hinted`]; `WIDE`: masks by [`eq_mask_w`] with AVX2.
    ///
    /// # Safety
    /// With `WIDE`, the CPU must have AVX2.
    #[allow(clippy::too_many_arguments, unsafe_code)]
    #[inline(always)]
    unsafe fn hinted_with<const WIDE: bool>(
        &mut self,
        input: &[u8],
        lo: usize,
        mut p: usize,
        e: usize,
        mut d: usize,
        (hints, base, hint_idx): (&[u64], usize, &mut usize),
        out: &mut Vec<u8>,
    ) -> (usize, usize) {
        // `eq_mask_w::<WIDE>` below: with `WIDE`, AVX2 is available (this function's
        // contract); each call says why its bytes are in `input`.
        let input = &input[..e];
        // The hints not passed yet.
        let mut rest = &hints[(*hint_idx).min(hints.len())..];
        let pos_of = |h: u64| (h >> HINT_SHIFT) as usize + base;
        let mut next_at = rest.first().map_or(usize::MAX, |&h| pos_of(h));
        // The match token for distance `td` (0: no match yet, the last distance used
        // otherwise): its distance part, length 0; its distance symbol is `tok >> 27`.
        let (mut td, mut tok) = (0, 0u32);
        let four = four_run;
        // The mask: bit i set iff `input[w + i] == input[w + i - d]`; none when `w > p`
        // (`NONE`, or a match cut at its longest before the last mask's start): then
        // `p.wrapping_sub(w)` is over 2^62 (inputs are shorter than 2^62 bytes).
        const NONE: usize = usize::MAX >> 1;
        let (mut w, mut m) = (NONE, 0u64);
        // The hints that `p` has passed: the last one's distance from here on (usually one
        // hint, the next line's; `rest[0]` is at `next_at`).
        macro_rules! pass_hints {
            () => {
                if p >= next_at {
                    let d0 = d;
                    loop {
                        let (&h, r) = rest.split_first().unwrap();
                        d = (h & HINT_DIST) as usize + 1;
                        rest = r;
                        next_at = rest.first().map_or(usize::MAX, |&h| pos_of(h));
                        if next_at > p {
                            break;
                        }
                    }
                    if d != d0 {
                        cold();
                        w = NONE;
                    }
                }
            };
        }
        // `d` is in 1..=WINDOW (a hint's distance); `d <= p - lo` is checked below.
        'blocks: loop {
            if self.ntok + 16 > TOKEN_CAP {
                self.flush_block(input, p, out, false);
            }
            let mut n = self.ntok;
            let (toks, lit_freq, dist_freq) =
                (&mut *self.tokens, &mut self.lit_freq, &mut self.dist_freq);
            // Each step writes at most 13 literals (k < 13) and a match.
            // (Written as a bound on `n`, not `n + 16`: the compiler then knows that `n + 16`
            // below does not overflow, and the token slice needs no check of its own.)
            while n <= TOKEN_CAP - 16 {
                // The next 16 positions (and the 3 after them) must be in the mask.
                if p.wrapping_sub(w) > 48 {
                    if p + 64 > e {
                        self.ntok = n;
                        break 'blocks;
                    }
                    w = p;
                    m = if d <= p - lo {
                        // SAFETY: `d <= p` (just checked), `p + 64 <= e` (above).
                        unsafe { eq_mask_w::<WIDE>(input, p, d) }
                    } else {
                        0
                    };
                }
                let mut s = p - w;
                let mut mp = m >> s;
                let mut m4 = four(mp) & 0x1fff;
                if m4 == 0 {
                    cold();
                    // Not in the next 16 bytes: a number one digit longer or shorter?
                    if p + 64 > e {
                        self.ntok = n;
                        break 'blocks;
                    }
                    let mut found = false;
                    for nd in [d - 1, d + 1] {
                        if (1..=WINDOW).contains(&nd) && nd <= p - lo {
                            // SAFETY: `nd <= p` (just checked), `p + 64 <= e` (above).
                            let mm = unsafe { eq_mask_w::<WIDE>(input, p, nd) };
                            if four(mm) & 0x1fff != 0 {
                                (w, s, m, mp, d) = (p, 0, mm, mm, nd);
                                (m4, found) = (four(mm) & 0x1fff, true);
                                break;
                            }
                        }
                    }
                    if !found {
                        // A field that this line's reference lacks (another file's hash, a
                        // new path's digits). First the text's last occurrence (the general
                        // path's one hash probe, 8 equal bytes): the same file's hash in the
                        // line before, of another kind.
                        let x8 = read64(input, p);
                        let h = hash(x8, self.shift);
                        let floor = self.hint_floor;
                        let cv = self.table[h];
                        self.table[h] = floor + (p - lo) as u32;
                        #[cfg(test)]
                        let cv = if self.probe_off { 0 } else { cv };
                        if cv >= floor {
                            let cand = lo + (cv - floor) as usize;
                            let hd = p - cand;
                            if (1..=WINDOW).contains(&hd) && read64(input, cand) == x8 {
                                #[cfg(test)]
                                {
                                    self.misses[0] += 1;
                                }
                                (d, w) = (hd, NONE);
                                continue;
                            }
                        }
                        // Else a field of at most 16 bytes followed by the reference's text
                        // at the same distance (another file's hash: 16 bytes): its bytes as
                        // literals, and the hinted path goes on from that text. Else the rest
                        // of the line is left to the general path (whose probes cost ~30
                        // instructions a byte).
                        if p - w > 44 {
                            m = if d <= p - lo {
                                // SAFETY: `d <= p - lo` (just checked), `p + 64 <= e` (above).
                                unsafe { eq_mask_w::<WIDE>(input, p, d) }
                            } else {
                                0
                            };
                            w = p;
                        }
                        let run = four(m >> (p - w)) & 0x1_ffff;
                        if run == 0 {
                            self.ntok = n;
                            break 'blocks;
                        }
                        let k = (run.trailing_zeros() as usize).min(16);
                        #[cfg(test)]
                        {
                            self.misses[1] += 1;
                        }
                        // SAFETY: `p + 64 <= e` (checked above); `k <= 16`.
                        unsafe { skip_literals(input, p, k, &mut toks[n..n + 16], lit_freq) };
                        n += k;
                        p += k;
                        pass_hints!();
                        continue;
                    }
                }
                if d != td {
                    td = d;
                    tok = dist_token((d - 1) as u32).0 | 256;
                }
                // `m4` has a bit set among its low 13: `k < 13` (the mask says so to the
                // compiler).
                let k = m4.trailing_zeros() as usize & 15;
                // The run of equal bytes from `k` (the bits above the mask's end are 0 in
                // `mp`: the run stops there at the latest).
                let mut len = (!(mp >> k)).trailing_zeros() as usize;
                if s + k + len == 64 {
                    // On in the next masks (their bytes are `d` back from `w + 64 >= p`,
                    // so at or after `lo` too), the last one kept for the next steps.
                    loop {
                        let q = w + 64;
                        if q + 64 > e || len >= MAX_MATCH {
                            cold();
                            // `q <= e` (the mask's bytes are in `input`), and `len <
                            // MAX_MATCH` or the end is before `q`: `extend` measures 0.
                            let end = e.min(p + k + MAX_MATCH).max(q);
                            len += extend(input, q - d, q, end);
                            w = NONE;
                            break;
                        }
                        w = q;
                        // SAFETY: `q + 64 <= e` (just checked); `d <= q`: the run began in
                        // a mask of `d` made at or before `p` (so `d <= p - lo`), and `q > p`.
                        m = unsafe { eq_mask_w::<WIDE>(input, q, d) };
                        let r = (!m).trailing_zeros() as usize;
                        len += r;
                        if r < 64 {
                            break;
                        }
                    }
                    len = len.min(MAX_MATCH);
                }
                debug_assert!(
                    input[p + k..p + k + len] == input[p + k - d..p + k + len - d],
                    "hinted match of unequal bytes"
                );
                let t: &mut [u32; 16] = (&mut toks[n..n + 16]).try_into().unwrap();
                debug_assert!(p + 16 <= input.len());
                // SAFETY: the 16 bytes are in `input`: this step's mask (before any run
                // extension) was made at a `w` with `p <= w + 48` and `w + 64 <= e`.
                let src: &[u8; 16] = unsafe { &*input.as_ptr().add(p).cast::<[u8; 16]>() };
                for (t, &b) in t[..k].iter_mut().zip(&src[..k]) {
                    *t = b as u32 | LIT;
                    lit_freq[b as usize] += 1;
                }
                t[k] = tok + len as u32;
                n += k + 1;
                lit_freq[257 + LEN_SYM[len] as usize] += 1;
                dist_freq[(tok >> 27) as usize & 31] += 1;
                p += k + len;
                pass_hints!();
            }
            self.ntok = n;
        }
        *hint_idx = hints.len() - rest.len();
        (p, td)
    }

    #[inline(always)]
    fn literals(&mut self, input: &[u8], from: usize, to: usize, out: &mut Vec<u8>) {
        let mut i = from;
        while i < to {
            if self.ntok == TOKEN_CAP {
                self.flush_block(input, i, out, false);
            }
            let n = (to - i).min(TOKEN_CAP - self.ntok);
            for (t, &b) in self.tokens[self.ntok..self.ntok + n]
                .iter_mut()
                .zip(&input[i..i + n])
            {
                *t = b as u32 | LIT;
                self.lit_freq[b as usize] += 1;
            }
            self.ntok += n;
            i += n;
        }
    }

    #[inline(always)]
    fn push_match(&mut self, input: &[u8], p: usize, len: usize, dist: usize, out: &mut Vec<u8>) {
        if self.ntok == TOKEN_CAP {
            self.flush_block(input, p, out, false);
        }
        let (t, dc) = dist_token((dist - 1) as u32);
        self.tokens[self.ntok] = t | (256 + len as u32);
        self.ntok += 1;
        self.lit_freq[257 + LEN_SYM[len] as usize] += 1;
        self.dist_freq[dc as usize] += 1;
    }

    /// Writes the pending tokens (covering `input[blk_start..end]`) as one block, the
    /// smallest of dynamic, fixed and stored.
    fn flush_block(&mut self, input: &[u8], end: usize, out: &mut Vec<u8>, last: bool) {
        if self.stream_open && !last {
            self.stream_block(input, end, out);
            return;
        }
        self.lit_freq[256] = 1;
        let span = &input[self.blk_start..end];

        // Extra bits are the same for dynamic and fixed.
        let dot = |f: &[u32], l: &[u8]| -> u64 {
            f.iter().zip(l).map(|(&f, &l)| f as u64 * l as u64).sum()
        };
        let extra =
            dot(&self.lit_freq[257..286], &LEN_EXTRA) + dot(&self.dist_freq[..30], &DIST_EXTRA);
        let cost = |lit: &Code<288>, dist: &Code<32>, lf: &[u32; 288], df: &[u32; 32]| {
            dot(&lf[..286], &lit.lens[..286]) + dot(&df[..30], &dist.lens[..30])
        };
        let fixed_bits = 3
            + extra
            + cost(
                &self.fixed_lit,
                &self.fixed_dist,
                &self.lit_freq,
                &self.dist_freq,
            );
        let stored = stored_bits(self.bc, span.len());

        // Dynamic code, unless the block is too small for its header to pay off.
        let dynamic = if self.ntok >= DYN_MIN_TOKENS {
            Some(self.dynamic_header())
        } else {
            None
        };
        let dyn_bits = match &dynamic {
            Some(h) => {
                h.bits + extra + cost(&self.lit, &self.dist, &self.lit_freq, &self.dist_freq)
            }
            None => u64::MAX,
        };

        let best = dyn_bits.min(fixed_bits).min(stored);
        let start = out.len();
        out.resize(
            start + ((self.bc as u64 + best) / 8) as usize + EMIT_SLACK,
            0,
        );
        let mut w = Bits {
            buf: &mut out[..],
            pos: start,
            bb: self.bb,
            bc: self.bc,
        };
        let bfinal = last as u32;
        if stored == best {
            let mut chunks = span.chunks(STORED_MAX).peekable();
            if span.is_empty() {
                stored_chunk(&mut w, &[], bfinal);
            }
            while let Some(c) = chunks.next() {
                let fin = if chunks.peek().is_none() { bfinal } else { 0 };
                stored_chunk(&mut w, c, fin);
            }
        } else if fixed_bits == best {
            w.put(bfinal | (1 << 1), 3);
            emit_tokens(
                &mut w,
                &self.tokens[..self.ntok],
                &self.fixed_tabs,
                (&self.lit_freq, &self.dist_freq),
            );
        } else if let Some(h) = &dynamic {
            w.put(bfinal, 1);
            write_dynamic_header(&mut w, h);
            self.tabs.fill(&self.lit, &self.dist);
            emit_tokens(
                &mut w,
                &self.tokens[..self.ntok],
                &self.tabs,
                (&self.lit_freq, &self.dist_freq),
            );
        }
        if last {
            w.align();
        }
        let (pos, bb, bc) = (w.pos, w.bb, w.bc);
        debug_assert_eq!(
            (pos - start) as u64 * 8 + bc as u64,
            self.bc as u64
                + if last {
                    (self.bc as u64 + best).div_ceil(8) * 8 - self.bc as u64
                } else {
                    best
                },
            "block size as computed"
        );
        self.block_written(out, (pos, bb, bc), end);
    }

    /// Writes the pending tokens of an open stream (covering `input[blk_start..end]`) without
    /// ending a block where possible: the tokens continue the open block when its code costs
    /// no more than a new block would, header included (a code fitted to one push of a few
    /// hundred tokens fits the next push little better than the open one, so its header is
    /// charged in full); else the open block is ended and a new fixed or dynamic block is
    /// opened, or the span is stored (which ends it).
    fn stream_block(&mut self, input: &[u8], end: usize, out: &mut Vec<u8>) {
        let span = &input[self.blk_start..end];
        if self.ntok == 0 {
            self.blk_start = end;
            return;
        }
        let dot = |f: &[u32], l: &[u8]| -> u64 {
            f.iter().zip(l).map(|(&f, &l)| f as u64 * l as u64).sum()
        };
        // No end-of-block in the tokens' cost: it is written once, when the block ends.
        self.lit_freq[256] = 0;
        let extra =
            dot(&self.lit_freq[257..286], &LEN_EXTRA) + dot(&self.dist_freq[..30], &DIST_EXTRA);
        let body = |lit: &[u8], dist: &[u8], lf: &[u32; 288], df: &[u32; 32]| {
            extra + dot(&lf[..286], &lit[..286]) + dot(&df[..30], &dist[..30])
        };
        let fixed = body(
            &self.fixed_lit.lens,
            &self.fixed_dist.lens,
            &self.lit_freq,
            &self.dist_freq,
        );
        let eob_bits = (self.open_eob() >> 24) as u64;
        let cont = match self.open_blk {
            OpenBlock::None => u64::MAX,
            OpenBlock::Fixed => fixed,
            OpenBlock::Dynamic => body(
                &self.open_lens.0,
                &self.open_lens.1,
                &self.lit_freq,
                &self.dist_freq,
            ),
        };
        let h = self.dynamic_header_from(true);
        let dyn_body = body(
            &self.lit.lens,
            &self.dist.lens,
            &self.lit_freq,
            &self.dist_freq,
        );
        let new_fixed = eob_bits + 3 + fixed;
        let new_dyn = eob_bits + h.bits + dyn_body;
        // Stored: the span after the end of the open block (padding counted from there).
        let bc_after_eob = ((self.bc as u64 + eob_bits) % 8) as u32;
        let new_stored = eob_bits + stored_bits(bc_after_eob, span.len());
        let best = cont.min(new_fixed).min(new_dyn).min(new_stored);

        // Every option's size counts all it writes (end of the open block, header): `best`
        // bits are written (zeroing room for the largest option would clear a stored span).
        let start = out.len();
        out.resize(
            start + ((self.bc as u64 + best) / 8) as usize + 8 + EMIT_SLACK,
            0,
        );
        let mut w = Bits {
            buf: &mut out[..],
            pos: start,
            bb: self.bb,
            bc: self.bc,
        };
        if best != cont {
            // End the open block.
            let eob = self.open_eob();
            w.put(eob & 0xff_ffff, eob >> 24);
            w.flush();
        }
        if best == cont {
            let tabs = match self.open_blk {
                OpenBlock::Fixed => &self.fixed_tabs,
                _ => &self.tabs,
            };
            emit_body(
                &mut w,
                &self.tokens[..self.ntok],
                tabs,
                (&self.lit_freq, &self.dist_freq),
            );
        } else if best == new_stored {
            for c in span.chunks(STORED_MAX) {
                stored_chunk(&mut w, c, 0);
            }
            self.open_blk = OpenBlock::None;
        } else if best == new_fixed {
            w.put(1 << 1, 3);
            emit_body(
                &mut w,
                &self.tokens[..self.ntok],
                &self.fixed_tabs,
                (&self.lit_freq, &self.dist_freq),
            );
            self.open_blk = OpenBlock::Fixed;
        } else {
            w.put(0, 1);
            write_dynamic_header(&mut w, &h);
            self.tabs.fill(&self.lit, &self.dist);
            self.open_lens = (self.lit.lens, self.dist.lens);
            emit_body(
                &mut w,
                &self.tokens[..self.ntok],
                &self.tabs,
                (&self.lit_freq, &self.dist_freq),
            );
            self.open_blk = OpenBlock::Dynamic;
        }
        let (pos, bb, bc) = (w.pos, w.bb, w.bc);
        self.block_written(out, (pos, bb, bc), end);
    }

    /// After a block's bits up to `pos` (with `bc` bits of `bb` pending): keeps them, and
    /// starts the next block at input offset `end` with no tokens.
    fn block_written(&mut self, out: &mut Vec<u8>, (pos, bb, bc): (usize, u64, u32), end: usize) {
        out.truncate(pos);
        self.bb = bb;
        self.bc = bc;
        self.ntok = 0;
        self.lit_freq = [0; 288];
        self.dist_freq = [0; 32];
        self.blk_start = end;
    }

    /// Builds the dynamic code of the pending block into `self.lit` and `self.dist` and its
    /// header (run-length coded code lengths and their code).
    fn dynamic_header(&mut self) -> Header {
        self.dynamic_header_from(false)
    }

    /// [`FastDeflate::dynamic_header`]; `every_symbol`: from frequencies × 64 + 1, so every
    /// symbol has a code (a few bits longer than a used one's) and the code fits later data.
    fn dynamic_header_from(&mut self, every_symbol: bool) -> Header {
        if every_symbol {
            let mut lf = [0u32; 286];
            for (d, &f) in lf.iter_mut().zip(&self.lit_freq[..286]) {
                *d = f.saturating_mul(64).saturating_add(1);
            }
            let mut df = [0u32; 30];
            for (d, &f) in df.iter_mut().zip(&self.dist_freq[..30]) {
                *d = f.saturating_mul(64).saturating_add(1);
            }
            huffman_lengths(&lf, 15, &mut self.lit.lens);
            huffman_lengths(&df, 15, &mut self.dist.lens);
        } else {
            huffman_lengths(&self.lit_freq[..286], 15, &mut self.lit.lens);
            huffman_lengths(&self.dist_freq[..30], 15, &mut self.dist.lens);
        }
        self.lit.lens[286] = 0;
        self.lit.lens[287] = 0;
        self.dist.lens[30] = 0;
        self.dist.lens[31] = 0;
        self.lit.assign();
        self.dist.assign();
        let hlit = 257
            + self.lit.lens[257..286]
                .iter()
                .rposition(|&l| l != 0)
                .map_or(0, |i| i + 1);
        let hdist = 1 + self.dist.lens[..30]
            .iter()
            .rposition(|&l| l != 0)
            .unwrap_or(0);
        // Run-length code of the code lengths (one sequence over both alphabets).
        let mut seq = [0u8; 316];
        seq[..hlit].copy_from_slice(&self.lit.lens[..hlit]);
        seq[hlit..hlit + hdist].copy_from_slice(&self.dist.lens[..hdist]);
        let seq = &seq[..hlit + hdist];
        let mut h = Header {
            hlit,
            hdist,
            hclen: 0,
            rle: [(0, 0); 316],
            nr: 0,
            cl: Code::empty(),
            bits: 0,
        };
        let mut i = 0;
        while i < seq.len() {
            let l = seq[i];
            let mut run = 1;
            while i + run < seq.len() && seq[i + run] == l {
                run += 1;
            }
            i += run;
            if l == 0 {
                while run >= 11 {
                    let r = run.min(138);
                    h.push(18, r - 11);
                    run -= r;
                }
                if run >= 3 {
                    h.push(17, run - 3);
                    run = 0;
                }
            } else {
                h.push(l, 0);
                run -= 1;
                while run >= 3 {
                    let r = run.min(6);
                    h.push(16, r - 3);
                    run -= r;
                }
            }
            for _ in 0..run {
                h.push(l, 0);
            }
        }
        let mut cl_freq = [0u32; 19];
        for &(s, _) in &h.rle[..h.nr] {
            cl_freq[s as usize] += 1;
        }
        huffman_lengths(&cl_freq, 7, &mut h.cl.lens);
        h.cl.assign();
        h.hclen = 4.max(
            1 + CL_ORDER
                .iter()
                .rposition(|&s| h.cl.lens[s] != 0)
                .unwrap_or(0),
        );
        h.bits = 3 + 5 + 5 + 4 + 3 * h.hclen as u64;
        for &(s, _) in &h.rle[..h.nr] {
            h.bits += h.cl.lens[s as usize] as u64 + cl_extra(s) as u64;
        }
        h
    }

    /// Test hook: the table value of the next position, to reach the overflow path.
    #[cfg(test)]
    fn set_next(&mut self, v: u32) {
        self.next = v;
    }
}

/// The header of a dynamic block.
struct Header {
    hlit: usize,
    hdist: usize,
    hclen: usize,
    /// Code-length symbols and their extra-bit values.
    rle: [(u8, u8); 316],
    nr: usize,
    cl: Code<19>,
    /// Size of the header, block type bits included.
    bits: u64,
}

impl Header {
    fn push(&mut self, sym: u8, extra: usize) {
        self.rle[self.nr] = (sym, extra as u8);
        self.nr += 1;
    }
}

/// Extra bits after code-length symbol `s`.
fn cl_extra(s: u8) -> u32 {
    match s {
        16 => 2,
        17 => 3,
        18 => 7,
        _ => 0,
    }
}

fn stored_chunk(w: &mut Bits, c: &[u8], bfinal: u32) {
    w.put(bfinal, 3);
    w.align();
    let n = c.len() as u16;
    w.buf[w.pos..w.pos + 2].copy_from_slice(&n.to_le_bytes());
    w.buf[w.pos + 2..w.pos + 4].copy_from_slice(&(!n).to_le_bytes());
    w.buf[w.pos + 4..w.pos + 4 + c.len()].copy_from_slice(c);
    w.pos += 4 + c.len();
    w.bb = 0;
}

/// A dynamic block's header after its BFINAL bit: BTYPE 10, the counts, the code-length
/// code and the run-length coded code lengths.
fn write_dynamic_header(w: &mut Bits, h: &Header) {
    w.put(2, 2);
    w.put((h.hlit - 257) as u32, 5);
    w.put((h.hdist - 1) as u32, 5);
    w.put((h.hclen - 4) as u32, 4);
    w.flush();
    for &s in &CL_ORDER[..h.hclen] {
        w.put(h.cl.lens[s] as u32, 3);
        w.flush();
    }
    for &(s, x) in &h.rle[..h.nr] {
        w.put(h.cl.codes[s as usize] as u32, h.cl.lens[s as usize] as u32);
        w.put(x as u32, cl_extra(s));
        w.flush();
    }
}

/// Token frequencies of a block: literals and lengths, distances.
type Freqs<'a> = (&'a [u32; 288], &'a [u32; 32]);

/// The tokens and end-of-block with the given codes.
fn emit_tokens(w: &mut Bits, tokens: &[u32], tabs: &Tabs, freq: Freqs) {
    emit_body(w, tokens, tabs, freq);
    let eob = tabs.eob();
    w.put(eob & 0xff_ffff, eob >> 24);
    w.flush();
}

/// Which two of the tokens counted in `freq` fit in the bit buffer after 7 pending bits (at
/// most 57 bits), so that the writer can write them with one flush: any two, or any two but
/// two matches, or (`Pairs::None`) not every two with a literal.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pairs {
    All,
    WithLiteral,
    None,
}

fn pairs_fit(tabs: &Tabs, (lit_freq, dist_freq): Freqs) -> Pairs {
    let used = |f: &[u32], bits: &mut dyn FnMut(usize) -> u32| {
        f.iter()
            .enumerate()
            .filter(|&(_, &f)| f != 0)
            .map(|(s, _)| bits(s))
            .max()
            .unwrap_or(0)
    };
    let lit = used(&lit_freq[..256], &mut |s| tabs.sym[s] & 0xff);
    let len = used(&lit_freq[257..286], &mut |s| {
        tabs.sym[256 + LEN_BASE[s] as usize] & 0xff
    });
    let dist = used(&dist_freq[..30], &mut |s| (tabs.dist[s] >> 8) & 0xff);
    let (lit, mat) = (lit, len + dist);
    if 2 * lit.max(mat) + 7 <= 64 {
        Pairs::All
    } else if lit + lit.max(mat) + 7 <= 64 {
        Pairs::WithLiteral
    } else {
        Pairs::None
    }
}

/// The code of token `t`, and its length in bits (at most 48). `dist` caches the code of the
/// last match's distance part (`t >> 10`: its symbol and extra bits) and its length: on
/// hinted lines most matches of a block are at one distance, so that part is one compare.
#[inline(always)]
fn token_code(
    t: u32,
    sym_tab: &[u32; 1024],
    dist_tab: &[u32; 32],
    dist: &mut (u32, u64, u32),
) -> (u64, u32) {
    let sv = sym_tab[(t & 0x3ff) as usize];
    if t >= LIT {
        ((sv >> 8) as u64, sv & 0xff)
    } else {
        let dp = t >> 10;
        if dp != dist.0 {
            let dv = dist_tab[(t >> 27) as usize];
            let x = (dp & 0x1fff) as u64;
            // Shifts by a table entry shift by its low byte (see `Tabs`), masked to 6 bits.
            *dist = (dp, (dv >> 16) as u64 | x.wrapping_shl(dv), (dv >> 8) & 0xff);
        }
        (
            (sv >> 8) as u64 | dist.1.wrapping_shl(sv),
            (sv & 0xff) + dist.2,
        )
    }
}

/// Tokens written between two checks of the room left in the output: at most 48 bits each,
/// so a run writes at most `6 * EMIT_RUN + 1` bytes and stores 8 bytes at its last position.
const EMIT_RUN: usize = 256;
/// Bytes reserved past a block's exact size: 16 for the last stores, and the room of one run
/// (so that the runs at a block's end need no bounds checks either).
const EMIT_SLACK: usize = 16 + 6 * EMIT_RUN + 9;

/// The tokens with the given codes (no end-of-block); `freq` counts them.
fn emit_body(w: &mut Bits, tokens: &[u32], tabs: &Tabs, freq: Freqs) {
    let fit = pairs_fit(tabs, freq);
    let mut st = (w.pos, w.bb, w.bc);
    let mut dist = (u32::MAX, 0u64, 0u32);
    let buf = &mut *w.buf;
    assert!(buf.len() >= 8);
    #[cfg(target_arch = "x86_64")]
    if wide_ok() && std::is_x86_feature_detected!("bmi2") {
        // SAFETY: the CPU has BMI2 (just detected).
        #[allow(unsafe_code)]
        unsafe {
            st = emit_runs_bmi2(buf, st, tokens, tabs, fit, &mut dist);
        }
        (w.pos, w.bb, w.bc) = st;
        return;
    }
    st = emit_runs(buf, st, tokens, tabs, fit, &mut dist);
    (w.pos, w.bb, w.bc) = st;
}

/// [`emit_runs`] compiled with BMI2 (shifts by any register: fewer moves to `cl`).
///
/// # Safety
/// The CPU must have BMI2.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
#[target_feature(enable = "bmi1,bmi2")]
unsafe fn emit_runs_bmi2(
    buf: &mut [u8],
    st: (usize, u64, u32),
    tokens: &[u32],
    tabs: &Tabs,
    fit: Pairs,
    dist: &mut (u32, u64, u32),
) -> (usize, u64, u32) {
    emit_runs(buf, st, tokens, tabs, fit, dist)
}

/// The tokens in runs of [`EMIT_RUN`] (see [`emit_body`]).
#[inline(always)]
fn emit_runs(
    buf: &mut [u8],
    mut st: (usize, u64, u32),
    tokens: &[u32],
    tabs: &Tabs,
    fit: Pairs,
    dist: &mut (u32, u64, u32),
) -> (usize, u64, u32) {
    for run in tokens.chunks(EMIT_RUN) {
        // The room is as computed for the block (`flush_block`): the check only decides
        // whether the stores need their own bounds checks.
        if st.0 + 6 * EMIT_RUN + 9 <= buf.len() {
            st = emit_run::<true>(buf, st, run, tabs, fit, dist);
        } else {
            st = emit_run::<false>(buf, st, run, tabs, fit, dist);
        }
    }
    st
}

/// [`emit_body`] of up to [`EMIT_RUN`] tokens from `(pos, bb, bc)`; `ROOM`: the buffer has
/// at least `6 * EMIT_RUN + 9` bytes from `pos` on.
#[inline(always)]
fn emit_run<const ROOM: bool>(
    buf: &mut [u8],
    (pos, mut bb, mut bc): (usize, u64, u32),
    tokens: &[u32],
    tabs: &Tabs,
    fit: Pairs,
    dist: &mut (u32, u64, u32),
) -> (usize, u64, u32) {
    debug_assert!(tokens.len() <= EMIT_RUN);
    let (sym_tab, dist_tab) = (&*tabs.sym, &tabs.dist);
    // The bytes go through `at`, the address of `buf[pos]`: one register for the buffer and
    // the position in the loops (with the tables, the tokens and the bits, they fit the
    // registers without spills); the position is worked out from it at the end.
    let base = buf.as_mut_ptr();
    let last = base.wrapping_add(buf.len() - 8);
    let mut at = base.wrapping_add(pos);
    // Writes the whole bytes of `bb`. `at` stays at or below `last` (the buffer has room for
    // the block's exact size and 8 bytes): without `ROOM`, the clamp only spares a check.
    let flush = |at: &mut *mut u8, bb: &mut u64, bc: &mut u32| {
        debug_assert!(*at <= last);
        debug_assert!(!ROOM || *at as usize - base as usize - pos <= 6 * EMIT_RUN + 1);
        // SAFETY: with `ROOM`, the buffer has `6 * EMIT_RUN + 9` bytes from `pos`, and `at`
        // is at most `6 * EMIT_RUN + 1` bytes past it (the run's tokens are at most 48 bits
        // each, fewer than 8 bits were pending); without, the address is clamped to `last`,
        // the start of the last 8 bytes of `buf` (at least 8 long, see `emit_body`): the 8
        // bytes written are inside `buf`, which nothing else borrows while `base` is used.
        #[allow(unsafe_code)]
        unsafe {
            let to = if ROOM || *at <= last { *at } else { last };
            to.cast::<[u8; 8]>().write_unaligned(bb.to_le_bytes());
        }
        *at = at.wrapping_add((*bc >> 3) as usize);
        *bb >>= *bc & !7;
        *bc &= 7;
    };
    let mut single = tokens;
    if fit == Pairs::All {
        let (pairs, rest) = tokens.as_chunks::<2>();
        single = rest;
        for &[t0, t1] in pairs {
            let (v0, n0) = token_code(t0, sym_tab, dist_tab, dist);
            let (v1, n1) = token_code(t1, sym_tab, dist_tab, dist);
            bb |= (v0 | v1 << n0) << bc;
            bc += n0 + n1;
            flush(&mut at, &mut bb, &mut bc);
        }
    } else if fit == Pairs::WithLiteral {
        let (pairs, rest) = tokens.as_chunks::<2>();
        single = rest;
        for &[t0, t1] in pairs {
            let (v0, n0) = token_code(t0, sym_tab, dist_tab, dist);
            let (v1, n1) = token_code(t1, sym_tab, dist_tab, dist);
            if t0 < LIT && t1 < LIT {
                // Two matches: a flush each.
                bb |= v0 << bc;
                bc += n0;
                flush(&mut at, &mut bb, &mut bc);
                bb |= v1 << bc;
                bc += n1;
            } else {
                bb |= (v0 | v1 << n0) << bc;
                bc += n0 + n1;
            }
            flush(&mut at, &mut bb, &mut bc);
        }
    }
    for &t in single {
        let (v, n) = token_code(t, sym_tab, dist_tab, dist);
        bb |= v << bc;
        bc += n;
        flush(&mut at, &mut bb, &mut bc);
    }
    (at as usize - base as usize, bb, bc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use miniz_oxide::inflate::decompress_to_vec;

    fn roundtrip(d: &mut FastDeflate, input: &[u8]) -> Vec<u8> {
        let mut out = vec![0xAA];
        d.compress(input, &mut out);
        assert_eq!(out[0], 0xAA, "appends");
        let got = decompress_to_vec(&out[1..]).expect("valid deflate");
        assert!(got == input, "round trip of {} bytes", input.len());
        assert!(
            out.len() - 1 <= bound(input.len()),
            "bound: {} for {}",
            out.len() - 1,
            input.len()
        );
        out.drain(..1);
        out
    }

    fn bound(n: usize) -> usize {
        n + n / 2048 + 16
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next() as u8).collect()
        }
    }

    fn json_lines(n: usize) -> Vec<u8> {
        let mut r = Rng(42);
        let mut v = Vec::new();
        let mut ts = 1_796_000_779_668_786u64;
        for i in 0..n {
            ts += r.next() % 400;
            let off = (r.next() % 1000) * 4096;
            v.extend_from_slice(
                format!(
                    "{{\"id\":{i},\"name\":\"pread\",\"cat\":\"POSIX\",\"type\":3,\"pid\":1234,\"tid\":1234,\"ts\":{ts},\"dur\":{},\"ph\":1,\"args\":{{\"hhash\":\"6882804a826580cd\",\"fd\":3,\"count\":4096,\"offset\":{off},\"ret\":4096,\"fhash\":\"4ee99768121448fd\"}}}}\n",
                    r.next() % 50
                )
                .as_bytes(),
            );
        }
        v
    }

    /// Lines of a few kinds repeating every sample, consecutive lines of different kinds (as a
    /// training loop's: open, fstat, read, close, the step's own events): the same kind of line
    /// one period back is the reference for names and arguments.
    fn periodic_lines(samples: usize) -> Vec<u8> {
        let mut r = Rng(77);
        let mut v = Vec::new();
        let (mut id, mut ts) = (1u64, 1_796_046_049_386_208u64);
        for step in 0..samples {
            let fhash = format!("{:016x}", r.next());
            let kinds: [(&str, &str, String); 7] = [
                (
                    "open64",
                    "POSIX",
                    "\"flags\":524288,\"fd\":3,\"ret\":3".into(),
                ),
                ("fstat64", "POSIX", "\"fd\":3,\"ret\":0".into()),
                (
                    "lseek64",
                    "POSIX",
                    "\"fd\":3,\"offset\":0,\"whence\":1,\"ret\":0".into(),
                ),
                (
                    "read",
                    "POSIX",
                    "\"fd\":3,\"count\":65537,\"ret\":65536".into(),
                ),
                ("read", "POSIX", "\"fd\":3,\"count\":1,\"ret\":0".into()),
                ("close", "POSIX", "\"fd\":3,\"ret\":0".into()),
                ("compute", "train", format!("\"step\":{step}")),
            ];
            for (name, cat, args) in kinds {
                ts += 1 + r.next() % 9;
                let fh = if cat == "POSIX" {
                    format!(",\"fhash\":\"{fhash}\"")
                } else {
                    String::new()
                };
                v.extend_from_slice(
                    format!(
                        "{{\"id\":{id},\"name\":\"{name}\",\"cat\":\"{cat}\",\"type\":3,\"pid\":5133,\"tid\":5133,\"ts\":{ts},\"dur\":{},\"ph\":1,\"args\":{{\"hhash\":\"6882804a826580cd\",{args}{fh}}}}}\n",
                        r.next() % 12
                    )
                    .as_bytes(),
                );
                id += 1;
            }
        }
        v
    }

    #[test]
    fn deflate_periodic_lines_find_the_line_one_period_back() {
        let mut d = FastDeflate::new();
        let j = periodic_lines(3000);
        let out = roundtrip(&mut d, &j);
        let ratio = j.len() as f64 / out.len() as f64;
        // 14.2 here; 12.7 with the encoder before the match-end candidates (one rep distance).
        assert!(ratio > 13.5, "ratio {ratio}");
        // The same through stream pushes of about 4 KiB.
        let mut stream = Vec::new();
        for c in j.chunks(4096) {
            d.stream_push(c, &mut stream);
        }
        d.stream_end(&mut stream);
        assert_eq!(decompress_to_vec(&stream).unwrap(), j);
        d.stream_close();
    }

    #[test]
    fn deflate_small_inputs() {
        let mut d = FastDeflate::new();
        let empty = roundtrip(&mut d, b"");
        assert!(empty.len() <= 2, "{empty:?}");
        roundtrip(&mut d, b"x");
        roundtrip(&mut d, b"abc");
        for n in 0..64 {
            roundtrip(
                &mut d,
                &b"abcdabcdabcdabcdabcdabcdxyzxyzxyzxyz01234567890123456789012345678901234567890"
                    [..n],
            );
        }
    }

    #[test]
    fn deflate_runs() {
        let mut d = FastDeflate::new();
        let a = vec![b'a'; 100_000];
        let out = roundtrip(&mut d, &a);
        assert!(out.len() < 1000, "{}", out.len());
        let z = vec![0u8; 3 << 20];
        roundtrip(&mut d, &z);
    }

    #[test]
    fn deflate_random_is_bounded() {
        let mut d = FastDeflate::new();
        let r = Rng(0x1234_5678).bytes(1 << 20);
        let out = roundtrip(&mut d, &r);
        assert!(out.len() <= bound(r.len()));
        for n in [1, 7, 8, 9, 100, 65_535, 65_536, 70_000, 200_000] {
            roundtrip(&mut d, &r[..n]);
        }
    }

    #[test]
    fn deflate_json_lines() {
        let mut d = FastDeflate::new();
        let j = json_lines(200_000);
        let out = roundtrip(&mut d, &j);
        let ratio = j.len() as f64 / out.len() as f64;
        assert!(ratio > 8.0, "ratio {ratio}");
        // In 128 KiB members, as the tracer cuts them.
        let mut total = 0;
        for c in j.chunks(128 << 10) {
            total += roundtrip(&mut d, c).len();
        }
        assert!(j.len() as f64 / total as f64 > 8.0);
    }

    #[test]
    fn deflate_many_small_calls_and_generation_overflow() {
        let mut d = FastDeflate::new();
        let j = json_lines(2000);
        for (k, line) in j.split_inclusive(|&b| b == b'\n').enumerate() {
            roundtrip(&mut d, line);
            if k == 1000 {
                // Force the overflow path: the next call must clear the table.
                d.set_next(u32::MAX - 100);
            }
            if k == 1500 {
                d.set_next(u32::MAX - 1000);
            }
        }
        assert!(d.next < 1 << 20, "table was reset");
        // A bigger input right after the base was moved close to the limit.
        d.set_next(u32::MAX - 5000);
        roundtrip(&mut d, &j);
        // Stale entries must not leak across calls: the same input again decodes alone.
        let a = roundtrip(&mut d, &j[..5000]);
        let b = roundtrip(&mut d, &j[..5000]);
        assert_eq!(a, b, "deterministic: no reference to the earlier call");
    }

    #[test]
    fn deflate_large_inputs_and_limits() {
        let mut d = FastDeflate::new();
        // Bigger than the token buffer and the window, with matches at max distance.
        let mut r = Rng(7);
        let block = r.bytes(WINDOW);
        let mut v = block.clone();
        v.extend_from_slice(&block); // distance exactly 32768
        v.extend_from_slice(&r.bytes(1000));
        v.extend_from_slice(&block[..300]); // beyond the window: literals
        let out = roundtrip(&mut d, &v);
        assert!(
            out.len() < v.len() - WINDOW / 2,
            "max-distance matches used"
        );
        // 16+ MiB of mixed content.
        let mut big = json_lines(60_000);
        big.extend_from_slice(&r.bytes(3 << 20));
        big.extend_from_slice(&vec![b'z'; 1 << 20]);
        big.extend_from_slice(&json_lines(20_000));
        while big.len() < 17 << 20 {
            let n = big.len().min(1 << 20);
            let tail = big[big.len() - n..].to_vec();
            big.extend_from_slice(&tail);
        }
        roundtrip(&mut d, &big);
    }

    #[test]
    fn deflate_all_literals_and_max_length() {
        let mut d = FastDeflate::new();
        let all: Vec<u8> = (0..=255u8).collect();
        roundtrip(&mut d, &all);
        let mut v: Vec<u8> = Vec::new();
        for i in 0..4000usize {
            v.push(all[(i * 7) % 256]);
            v.extend_from_slice(&all);
        }
        roundtrip(&mut d, &v);
        // A 300-byte pattern repeated: matches of exactly 258 and odd tails.
        let pat = Rng(9).bytes(300);
        let mut w = Vec::new();
        for k in 0..200 {
            w.extend_from_slice(&pat);
            w.extend_from_slice(&pat[..k % 300]);
        }
        roundtrip(&mut d, &w);
    }

    #[test]
    fn deflate_huffman_lengths_are_complete_and_limited() {
        let mut r = Rng(99);
        for round in 0..2000 {
            let n = [2, 3, 19, 30, 286][round % 5];
            let limit = if n == 19 { 7 } else { 15 };
            let mut f = vec![0u32; n];
            for x in f.iter_mut() {
                *x = match r.next() % 4 {
                    0 => 0,
                    1 => 1 << (r.next() % 20),
                    _ => (r.next() % 1000) as u32,
                };
            }
            if round % 7 == 0 {
                // Fibonacci-like: forces deep trees.
                let (mut a, mut b) = (1u32, 1u32);
                for x in f.iter_mut() {
                    *x = a;
                    let c = a.saturating_add(b);
                    a = b;
                    b = c;
                }
            }
            let mut lens = vec![0u8; n];
            huffman_lengths(&f, limit, &mut lens);
            let kraft: u64 = lens
                .iter()
                .filter(|&&l| l > 0)
                .map(|&l| 1u64 << (15 - l))
                .sum();
            assert_eq!(kraft, 1 << 15, "complete: {f:?} {lens:?}");
            assert!(lens.iter().all(|&l| (l as usize) <= limit));
            assert!(lens.iter().filter(|&&l| l > 0).count() >= 2);
            for (i, &x) in f.iter().enumerate() {
                assert!(x == 0 || lens[i] > 0, "used symbol has a code");
            }
        }
    }

    #[test]
    fn deflate_sorted_leaves_are_a_full_sort_of_the_used_symbols() {
        let mut r = Rng(0x5EED_1EAF);
        for round in 0..400 {
            let n = [2, 19, 30, 32, 286, 288][round % 6];
            let freq: Vec<u32> = (0..n)
                .map(|_| match r.next() % 5 {
                    0 => 0,
                    1 | 2 => 1,
                    3 => (r.next() % 4) as u32,
                    _ => (r.next() % 100_000) as u32,
                })
                .collect();
            let mut want: Vec<(u32, u16)> = freq
                .iter()
                .enumerate()
                .filter(|&(_, &f)| f > 0)
                .map(|(s, &f)| (f, s as u16))
                .collect();
            want.sort();
            let mut got = [(0u32, 0u16); 288];
            let k = sorted_leaves(&freq, &mut got[..n]);
            assert_eq!(&got[..k], &want[..], "{freq:?}");
        }
    }

    #[test]
    fn deflate_fuzzish_roundtrips() {
        let mut r = Rng(5);
        let mut d = FastDeflate::new();
        for _ in 0..300 {
            let n = (r.next() % 20_000) as usize;
            let alpha = 1 + (r.next() % 8) as u8;
            let v: Vec<u8> = (0..n)
                .map(|_| {
                    let x = r.next();
                    if x & 3 == 0 {
                        (x >> 8) as u8
                    } else {
                        b'a' + (x >> 8) as u8 % alpha
                    }
                })
                .collect();
            roundtrip(&mut d, &v);
        }
    }

    #[test]
    fn deflate_inside_gzip_member() {
        use std::io::Read;
        let mut d = FastDeflate::new();
        let j = json_lines(5000);
        let mut file = Vec::new();
        for part in [&j[..100_000], &j[100_000..], b"tail\n".as_slice(), b""] {
            file.extend_from_slice(&[0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0x03]);
            d.compress(part, &mut file);
            file.extend_from_slice(&crc32fast::hash(part).to_le_bytes());
            file.extend_from_slice(&(part.len() as u32).to_le_bytes());
        }
        let mut got = Vec::new();
        flate2::read::MultiGzDecoder::new(&file[..])
            .read_to_end(&mut got)
            .unwrap();
        let mut expect = j.clone();
        expect.extend_from_slice(b"tail\n");
        assert!(got == expect);
        // One member alone through GzDecoder.
        let mut one = vec![0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0x03];
        d.compress(&j, &mut one);
        one.extend_from_slice(&crc32fast::hash(&j).to_le_bytes());
        one.extend_from_slice(&(j.len() as u32).to_le_bytes());
        let mut got = Vec::new();
        flate2::read::GzDecoder::new(&one[..])
            .read_to_end(&mut got)
            .unwrap();
        assert!(got == j);
    }

    /// Hints as the writer makes them: each line points at the previous line of its kind
    /// (name and category), `base` bytes of earlier pushes before `lines[0]`.
    fn template_hints(
        lines: &[u8],
        last: &mut std::collections::HashMap<Vec<u8>, usize>,
        base: usize,
    ) -> Vec<u64> {
        let mut v = Vec::new();
        let mut at = 0;
        for line in lines.split_inclusive(|&b| b == b'\n') {
            let key = line.split(|&b| b == b',').nth(1).unwrap_or(b"").to_vec();
            if let Some(h) = last.get(&key).and_then(|&p| hint(at, base + at - p)) {
                v.push(h);
            }
            last.insert(key, base + at);
            at += line.len();
        }
        v
    }

    /// `input` through stream pushes of whole lines (`min` bytes and up to `spread` more),
    /// each with its template hints, every provisional end decoded and compared: the stream
    /// so far and the bytes pushed.
    fn push_lines(
        d: &mut FastDeflate,
        input: &[u8],
        last: &mut std::collections::HashMap<Vec<u8>, usize>,
        r: &mut Rng,
        min: usize,
        spread: u64,
    ) -> (Vec<u8>, usize) {
        let (mut stream, mut all, mut base, mut at) = (Vec::new(), Vec::new(), 0, 0);
        while at < input.len() {
            let mut end = (at + min + (r.next() % spread) as usize).min(input.len());
            while input[end - 1] != b'\n' {
                end += 1;
            }
            let piece = &input[at..end];
            d.stream_push_hinted(piece, &template_hints(piece, last, base), &mut stream);
            all.extend_from_slice(piece);
            let mut done = stream.clone();
            d.stream_end(&mut done);
            assert!(decompress_to_vec(&done).unwrap() == all, "push at {at}");
            base += piece.len();
            at = end;
        }
        (stream, base)
    }

    #[test]
    fn deflate_hints_find_the_line_of_the_same_kind_and_wrong_ones_cost_only_ratio() {
        let input = periodic_lines(600);
        let mut d = FastDeflate::new();
        let plain = roundtrip(&mut d, &input).len();
        let hints = template_hints(&input, &mut Default::default(), 0);
        assert!(hints.len() > 4000, "{} hints", hints.len());
        let mut out = Vec::new();
        d.compress_hinted(&input, &hints, &mut out);
        assert_eq!(decompress_to_vec(&out).unwrap(), input);
        assert!(
            out.len() * 100 < plain * 97,
            "hinted {} bytes, plain {plain}",
            out.len()
        );
        // Wrong, far, duplicated and out-of-range hints: still exact, and bounded.
        let mut r = Rng(5);
        for round in 0..6 {
            let mut bad: Vec<u64> = (0..input.len())
                .step_by(1 + round * 17)
                .filter_map(|at| hint(at, 1 + (r.next() % 40_000) as usize))
                .collect();
            if round == 5 {
                // Past the input's end, and one line's hint repeated.
                bad.push((input.len() as u64 + 3) << HINT_SHIFT);
                bad.insert(0, hints[0]);
                bad.insert(0, hints[0]);
                bad.sort_unstable_by_key(|h| h >> HINT_SHIFT);
            }
            let mut out = Vec::new();
            d.compress_hinted(&input, &bad, &mut out);
            assert!(decompress_to_vec(&out).unwrap() == input, "round {round}");
            assert!(out.len() <= bound(input.len()));
        }
        // Pushes: hints reach into earlier pushes, and past the start of a new stream.
        let mut last = std::collections::HashMap::new();
        let (stream, base) = push_lines(&mut d, &input, &mut last, &mut r, 700, 5000);
        assert!(stream.len() < plain * 2, "pushes {} bytes", stream.len());
        d.stream_close();
        let mut a = Vec::new();
        // A new stream: the hints' distances point before it.
        let h = template_hints(&input[..9000], &mut last, base);
        d.stream_push_hinted(&input[..9000], &h, &mut a);
        d.stream_end(&mut a);
        assert_eq!(decompress_to_vec(&a).unwrap(), &input[..9000]);
    }

    #[test]
    fn deflate_eq_mask_matches_bytes_at_every_edge() {
        let mut r = Rng(3);
        let base = r.bytes(300);
        for d in [1, 2, 15, 16, 17, 63, 64, 65, 100] {
            for diff in [
                None,
                Some(0),
                Some(15),
                Some(16),
                Some(31),
                Some(32),
                Some(48),
                Some(63),
            ] {
                // `b[i..i + 64]` equals the bytes `d` before except at `diff` (and where the
                // random bytes happen to agree).
                let mut b = base.clone();
                let i = 150;
                b.copy_within(i - d..i - d + 64, i);
                // Overlapping copies (d < 64) repeat the period: rebuild byte by byte.
                for k in 0..64 {
                    b[i + k] = b[i + k - d];
                }
                if let Some(k) = diff {
                    b[i + k] ^= 0x55;
                }
                let m = eq_mask(&b, i, d);
                #[cfg(target_arch = "x86_64")]
                if std::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU has AVX2 (just detected).
                    #[allow(unsafe_code)]
                    let wide = unsafe { eq_mask_w::<true>(&b, i, d) };
                    assert_eq!(wide, m, "d {d}");
                }
                for k in 0..64 {
                    assert_eq!(m >> k & 1 == 1, b[i + k] == b[i + k - d], "d {d} k {k}");
                }
                if let Some(k) = diff {
                    assert_eq!(m >> k & 1, 0);
                    if k < 16 {
                        assert_eq!(eq16(&b[i..i + 16], &b[i - d..i - d + 16]) >> k & 1, 0);
                    }
                }
            }
        }
        // At the very end of the input.
        let b = vec![7u8; 64 + 5];
        assert_eq!(eq_mask(&b, 5, 5), u64::MAX);
    }

    /// Uniform lines (a decorated call's) whose numbers grow a digit now and then, hinted as
    /// the writer hints them (each line: the line before).
    fn uniform_lines(n: usize, start_id: u64, dur: impl Fn(usize) -> u64) -> (Vec<u8>, Vec<u64>) {
        let (mut v, mut hints, mut prev) = (Vec::new(), Vec::new(), None);
        for i in 0..n {
            let at = v.len();
            if let Some(p) = prev {
                hints.extend(hint(at, at - p));
            }
            prev = Some(at);
            v.extend_from_slice(
                format!(
                    "{{\"id\":{},\"name\":\"deco\",\"cat\":\"bench\",\"type\":6,\"pid\":26469,\"tid\":26469,\"ts\":{},\"dur\":{},\"ph\":1,\"args\":{{\"hhash\":\"6882804a826580cd\"}}}}\n",
                    start_id + i as u64,
                    1_796_069_509_788_823u64 + 7 * i as u64 + (i as u64 % 3),
                    dur(i)
                )
                .as_bytes(),
            );
        }
        (v, hints)
    }

    #[test]
    fn deflate_hinted_lines_digit_changes_ends_and_long_runs() {
        let mut d = FastDeflate::new();
        let check = |d: &mut FastDeflate, input: &[u8], hints: &[u64]| -> usize {
            let mut out = Vec::new();
            d.compress_hinted(input, hints, &mut out);
            assert!(decompress_to_vec(&out).unwrap() == input);
            assert!(out.len() <= bound(input.len()));
            out.len()
        };
        // Ids crossing 10, 100, 1000, 10000 (one digit longer: the distance + 1 after it), a
        // `dur` of 1 to 4 digits (the distance ± 1, or the general path after it).
        let dur = |i: usize| {
            let x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
            x % [10, 100, 1000, 10_000][(x >> 20) as usize % 4]
        };
        let (input, hints) = uniform_lines(12_000, 5, dur);
        let plain = roundtrip(&mut d, &input).len();
        let hinted = check(&mut d, &input, &hints);
        // More tokens than a block holds: blocks end inside the hinted path.
        assert!(input.len() > 16 * TOKEN_CAP / 8);
        // Numbers of random lengths: the previous line is the right reference (25 % fewer
        // bytes here than the general path's).
        assert!(hinted * 100 < plain * 80, "hinted {hinted} plain {plain}");
        // Inputs ending anywhere in a line (the last < 64 bytes go the general way), and
        // hints whose lines start near or past the end.
        for cut in [1, 13, 63, 64, 65, 100, 146, 147, 200, 293] {
            let end = input.len() - cut;
            let h: Vec<u64> = hints
                .iter()
                .copied()
                .filter(|&h| ((h >> HINT_SHIFT) as usize) < end + 50)
                .collect();
            check(&mut d, &input[..end], &h);
        }
        // Identical lines longer than a match: matches of 258 one after another at the hint's
        // distance, and a hint pointing at the bytes just before (distance 1: a run).
        let line = [b"x".repeat(600), b"\n".to_vec()].concat();
        let many: Vec<u8> = line.repeat(40);
        let h: Vec<u64> = (1..40)
            .filter_map(|k| hint(k * line.len(), line.len()))
            .collect();
        let n = check(&mut d, &many, &h);
        assert!(n < 400, "{n} bytes");
        let h: Vec<u64> = (1..many.len())
            .step_by(97)
            .filter_map(|at| hint(at, 1))
            .collect();
        check(&mut d, &many, &h);
        // The same through stream pushes, lines split across pushes.
        let mut stream = Vec::new();
        let (mut at, mut k) = (0, 0);
        while at < input.len() {
            let end = (at + 1000 + k * 37 % 3000).min(input.len());
            let h: Vec<u64> = hints
                .iter()
                .filter(|&&h| (at..end).contains(&((h >> HINT_SHIFT) as usize)))
                .map(|&h| h - ((at as u64) << HINT_SHIFT))
                .collect();
            d.stream_push_hinted(&input[at..end], &h, &mut stream);
            at = end;
            k += 1;
        }
        d.stream_end(&mut stream);
        assert!(decompress_to_vec(&stream).unwrap() == input);
        d.stream_close();
    }

    #[test]
    fn deflate_hinted_lines_with_another_files_hash() {
        // Each sample a new file: its lines differ from their reference (the line of the same
        // kind one sample back) in the file's hash, which the line before (another kind, the
        // same file) has: the hinted path's hash probe. The first line of a sample has no such
        // line: its hash is written as literals and the reference's text goes on after it.
        let input = periodic_lines(600);
        let hints = template_hints(&input, &mut Default::default(), 0);
        let mut d = FastDeflate::new();
        let plain = roundtrip(&mut d, &input).len();
        let mut out = Vec::new();
        d.misses = [0; 2];
        d.compress_hinted(&input, &hints, &mut out);
        assert!(decompress_to_vec(&out).unwrap() == input);
        assert!(
            out.len() * 100 < plain * 97,
            "hinted {} plain {plain}",
            out.len()
        );
        let [probe, skip] = d.misses;
        assert!(probe > 500 && skip > 500, "probe {probe} skip {skip}");
        // Without the probe, those hashes are literals (or the general path's): more bytes.
        d.probe_off = true;
        let mut without = Vec::new();
        d.compress_hinted(&input, &hints, &mut without);
        d.probe_off = false;
        assert!(decompress_to_vec(&without).unwrap() == input);
        assert!(
            out.len() < without.len(),
            "probe {} without {}",
            out.len(),
            without.len()
        );

        // A 16-byte field of another value at every offset from the line's start (every
        // position of the miss in its 64-byte mask), longer fields (left to the general path
        // after 16 bytes) and fields at the input's end.
        let mut r = Rng(11);
        for pad in 0..70 {
            for flen in [1, 7, 15, 16, 17, 40] {
                let (mut v, mut h, mut prev) = (Vec::new(), Vec::new(), None);
                for i in 0..40 {
                    let at = v.len();
                    if let Some(p) = prev {
                        h.extend(hint(at, at - p));
                    }
                    prev = Some(at);
                    let field: String = (0..flen)
                        .map(|_| b"0123456789abcdef"[(r.next() % 16) as usize] as char)
                        .collect();
                    let line = format!(
                        "{{\"id\":{i},{}\"fhash\":\"{field}\",\"rest\":\"same text after it\"}}\n",
                        "x".repeat(pad)
                    );
                    v.extend_from_slice(line.as_bytes());
                }
                for end in [v.len(), v.len() - 5, v.len() - 40] {
                    let h: Vec<u64> = h
                        .iter()
                        .copied()
                        .filter(|&x| ((x >> HINT_SHIFT) as usize) < end)
                        .collect();
                    let mut o = Vec::new();
                    d.compress_hinted(&v[..end], &h, &mut o);
                    assert!(
                        decompress_to_vec(&o).unwrap() == v[..end],
                        "pad {pad} field {flen}"
                    );
                    assert!(o.len() <= bound(end));
                }
            }
        }

        // Stream pushes: the hash probe's candidates in earlier pushes (the history's
        // positions), lines split across pushes.
        d.misses = [0; 2];
        push_lines(&mut d, &input, &mut Default::default(), &mut r, 500, 4000);
        assert!(d.misses[0] > 500 && d.misses[1] > 500, "{:?}", d.misses);
        d.stream_close();
    }

    #[test]
    fn deflate_pairs_fit_only_when_two_longest_tokens_do() {
        let d = FastDeflate::new();
        let (mut lf, mut df) = ([0u32; 288], [0u32; 32]);
        lf[b'a' as usize] = 5;
        lf[257] = 3; // length 3: 7 bits in the fixed code
        df[0] = 3; // distance 1: 5 bits
        assert_eq!(pairs_fit(&d.fixed_tabs, (&lf, &df)), Pairs::All);
        // Length 258 (8 bits) at distance 32768 (5 + 13 bits): 26 bits, twice is 52 + 7.
        lf[285] = 1;
        df[29] = 1;
        assert_eq!(pairs_fit(&d.fixed_tabs, (&lf, &df)), Pairs::All);
        // Length 227 (8 + 5 bits) at 32768: 31 bits, twice with 7 pending is 69; with a
        // literal (8 bits) 46.
        lf[284] = 1;
        assert_eq!(pairs_fit(&d.fixed_tabs, (&lf, &df)), Pairs::WithLiteral);
        // Lengths and literals of 15 bits in a dynamic code with distances of 15 + 13: no pair.
        let mut t = Tabs::new();
        let mut lit = Code::<288>::empty();
        lit.lens = [15; 288];
        let mut dist = Code::<32>::empty();
        dist.lens = [15; 32];
        t.fill(&lit, &dist);
        assert_eq!(pairs_fit(&t, (&lf, &df)), Pairs::None);
    }

    /// The hinted and emission tests again on the baseline paths (no AVX2 masks, no BMI2
    /// emission): where the CPU has both, the tests above take the other paths.
    #[test]
    fn deflate_baseline_paths_roundtrip() {
        BASELINE.with(|b| b.set(true));
        deflate_json_lines();
        deflate_fuzzish_roundtrips();
        deflate_hints_find_the_line_of_the_same_kind_and_wrong_ones_cost_only_ratio();
        deflate_hinted_lines_digit_changes_ends_and_long_runs();
        deflate_stream_pushes_roundtrip_with_history();
        BASELINE.with(|b| b.set(false));
    }

    #[test]
    fn deflate_stream_pushes_roundtrip_with_history() {
        let mut r = Rng(11);
        let mut d = FastDeflate::new();
        let j = json_lines(3000);
        let rnd = r.bytes(100_000);
        let mut stream = Vec::new();
        let mut all = Vec::new();
        for k in 0..400 {
            let n = (r.next() % 3000) as usize;
            let at = (r.next() % 90_000) as usize;
            let piece = match k % 4 {
                0 => &rnd[at..at + n.min(5)],
                1 => &j[at..at + n],
                // Larger than the window: history is cut.
                2 if k % 40 == 2 => &j[at..at + 40_000],
                _ => &j[at..at + n / 8],
            };
            if k == 200 {
                // The table values would overflow in this push: the table is cleared.
                d.hist_val = u32::MAX - 1000;
            }
            d.stream_push(piece, &mut stream);
            all.extend_from_slice(piece);
            // Provisional end: what is written so far is a complete stream.
            let mut done = stream.clone();
            d.stream_end(&mut done);
            assert_eq!(done.len() - stream.len(), d.stream_end_len());
            let got = decompress_to_vec(&done).expect("valid deflate");
            assert!(got == all, "push {k}");
        }
        assert!(d.hist_val < 1 << 24, "table was reset");
        // A closed stream: the next one refers to nothing before it.
        d.stream_close();
        let mut a = Vec::new();
        d.stream_push(&j[..5000], &mut a);
        d.stream_end(&mut a);
        assert_eq!(decompress_to_vec(&a).unwrap(), &j[..5000]);
        // compress() in between abandons a stream.
        d.stream_push(&j[..100], &mut Vec::new());
        roundtrip(&mut d, &j[..5000]);
        d.trim(0);
        let mut b = Vec::new();
        d.stream_push(&j[..700], &mut b);
        d.stream_end(&mut b);
        assert_eq!(decompress_to_vec(&b).unwrap(), &j[..700]);
    }
}
