//! The write cursor: a line written into space reserved once ([`reserved`], [`Put`]: every
//! write checked against the line's bound) or, for template lines, through raw pointers
//! (`put_*`: the bound proven once per line by the caller). The format's unsafe code is
//! here, but for the template line's pointer walk over these writes (`event.rs`).

use super::escape::{escape_into, Out};
use crate::event::Slot;
use crate::record::Text;

impl Out for Put<'_> {
    #[inline]
    fn put(&mut self, b: &[u8]) {
        self.bytes(b);
    }
    #[inline]
    fn u64(&mut self, v: u64) {
        self.num(v);
    }
    #[inline]
    fn i64(&mut self, v: i64) {
        self.int(v);
    }
    fn text(&mut self, t: &Text) {
        Put::text(self, t);
    }
}

/// Characters of a decimal 64-bit integer at most, sign included.
pub(super) const NUM_MAX: usize = 21;

/// The decimal digits of `q`, a number's value but its last few digits, as written last
/// time: consecutive lines' ids and timestamps share them. `q == 0`: nothing yet.
#[derive(Default)]
pub(super) struct HighDigits {
    q: u64,
    len: usize,
    /// The digits, then zero bytes (read in one 32-byte move).
    txt: [u8; 32],
}

/// Where a [`LineHead`]'s id ends (and its middle begins): room for `{"id":` and 20 digits.
const ID_END: usize = 6 + 20;

/// The head of a template's lines, `{"id":<id>,"name":...,"ts":<ts's high digits>`, as
/// its last line wrote it: consecutive lines of a template have ids one or a few apart
/// (mostly its last digit or two written in place) and timestamps that share all but their
/// last four digits, so a line's head is mostly one copy.
pub(super) struct LineHead {
    /// `{"id":` and the id's digits, ending at [`ID_END`]; the middle; the high digits of
    /// the last timestamp (`base / 10^4`); room for 20 of them and [`COPY_PAD`] more bytes.
    buf: Vec<u8>,
    mid_len: usize,
    id: u64,
    id_len: usize,
    /// The timestamp's value with its last four digits zeroed, its other digits (`q_len`
    /// of them) written after the middle (0, `q_len` 0: nothing written, a timestamp below
    /// 10,000 is written whole). A timestamp from `base` to `base + 9,999` shares them: one
    /// subtraction tells.
    base: u64,
    q_len: usize,
}

impl LineHead {
    /// A head with this middle, its id 0 and no timestamp digits.
    pub(super) fn new(middle: &[u8]) -> LineHead {
        let mut buf = vec![0; ID_END + middle.len() + 20 + COPY_PAD];
        buf[ID_END - 7..ID_END].copy_from_slice(b"{\"id\":0");
        buf[ID_END..ID_END + middle.len()].copy_from_slice(middle);
        LineHead {
            buf,
            mid_len: middle.len(),
            id: 0,
            id_len: 1,
            base: 0,
            q_len: 0,
        }
    }
}

impl Default for LineHead {
    fn default() -> LineHead {
        LineHead::new(b"")
    }
}

/// Writes `{"id":<id>`, `h`'s middle and `ts` at `d` (the head updated first: the id's
/// last digit advanced in place when `id` is at most as many more than the last id as that
/// digit is less than 9, else its last two digits when they stay below 100 (a template's
/// lines are one or a few ids apart), else the id rendered again; the timestamp's high
/// digits rendered again when they changed); returns the end.
///
/// # Safety
/// `d` writable for `6 + 20 + middle + 20 + COPY_PAD` bytes (at most `6 + 20 + middle +
/// 20` are kept).
#[allow(unsafe_code)]
#[inline(always)]
pub(super) unsafe fn put_head(d: *mut u8, h: &mut LineHead, id: u64, ts: u64) -> *mut u8 {
    let b = h.buf.as_mut_ptr();
    let mid_end = ID_END + h.mid_len;
    // SAFETY: `buf` holds `ID_END + mid_len + 20 + COPY_PAD` bytes (`new`): the id's digits
    // (`n <= 20`) and `{"id":` lie within `[0, ID_END)`, the timestamp's high digits (at most
    // 16: `q <= u64::MAX / 10^4`) within `[mid_end, mid_end + 20)`. The copy reads `n`
    // rounded up to 32 bytes from `from`: at most `mid_end + 16 + 31 - from` from `from`,
    // within the buffer. On `d`: the copy keeps `6 + id_len + mid_len + q_len` bytes and
    // writes up to 31 past them; then at most 20 digits (`put_num`) or 4 are kept: within
    // the contract.
    unsafe {
        // The last digit advanced by `id - h.id` stays a digit, or else the last two stay
        // below 100 (an id of one digit has no two): the other digits are the same.
        let last = b.add(ID_END - 1);
        let step = id.checked_sub(h.id).unwrap_or(u64::MAX);
        if step <= (b'9' - *last) as u64 {
            *last += step as u8;
        } else if h.id >= 10 && step <= 99 - h.id % 100 {
            let lo = (h.id % 100 + step) as usize;
            std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(lo * 2), b.add(ID_END - 2), 2);
        } else {
            let n = ndigits(id);
            write_digits(b.add(ID_END - n), id, n);
            std::ptr::copy_nonoverlapping(b"{\"id\":".as_ptr(), b.add(ID_END - n - 6), 6);
            h.id_len = n;
        }
        h.id = id;
        if !matches!(ts.checked_sub(h.base), Some(r) if r < 10_000) {
            let q = ts / 10_000;
            let n = if q == 0 { 0 } else { ndigits(q) };
            if n != 0 {
                write_digits(b.add(mid_end), q, n);
            }
            h.base = q * 10_000;
            h.q_len = n;
        }
        let hi = h.q_len;
        let from = ID_END - 6 - h.id_len;
        let d = put_piece(d, b.add(from), mid_end + hi - from);
        // `ts - base` below 10,000 (just made so when it was not).
        let r = ts - h.base;
        if hi == 0 {
            return put_num(d, r);
        }
        let r = r as u32;
        let (a, c) = ((r / 100) as usize * 2, (r % 100) as usize * 2);
        std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(a), d, 2);
        std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(c), d.add(2), 2);
        d.add(4)
    }
}

/// Writes a slot's value at `d` as its kind says; returns the end.
///
/// # Safety
/// `d` writable for [`NUM_MAX`] bytes.
#[allow(unsafe_code)]
#[inline(always)]
pub(super) unsafe fn put_slot(d: *mut u8, slot: Slot, v: u64) -> *mut u8 {
    // SAFETY: at most NUM_MAX bytes (the contract).
    unsafe {
        match slot {
            Slot::Int => put_int(d, v as i64),
            // Only integer slots are written here: a record of a schema with other slots is
            // a mixed one (`record::KIND_MIXED`), rendered through the checked cursor; any
            // other slot would be written as its bits, within the same bound.
            _ => put_num(d, v),
        }
    }
}

/// What a static line that fills every slot writes after its `dur`, as its template's last
/// such line wrote it: pieces 2 and 3, each slot's value and the piece after it, the file
/// hash and the last piece ([`super::event::complete_static`]). Most slots repeat their
/// value from line to line (a descriptor, a request size) and the others mostly keep their
/// number of digits (an offset), so a line's tail is the last one with a few digits written
/// in place, then one copy; a value of another width renders the whole tail again.
#[derive(Default)]
pub(super) struct Tail {
    /// The text (`len` bytes, 0: not rendered yet), then room: `bound + LINE_PAD` bytes in
    /// all for a template of line bound `bound` (the tail is part of a line).
    text: Vec<u8>,
    len: usize,
    /// Per slot of the template: its value in the text and its kind, where its text starts
    /// and its width.
    slots: Vec<TailSlot>,
    /// Where the file hash starts in the text (with a file).
    hash_at: usize,
    /// Lines still to be written without the tail after a value changed its width (see
    /// [`put_tail`]), and how many the next such change waits.
    wait: u8,
    backoff: u8,
}

/// The most lines a template's lines are written without its tail before it is rendered
/// again, after values that keep changing width.
const TAIL_BACKOFF_MAX: u8 = 63;

#[derive(Clone, Copy)]
struct TailSlot {
    v: u64,
    slot: Slot,
    at: u32,
    width: u32,
}

impl Tail {
    /// An empty tail for the lines of a template of `keys` slots and line bound `bound`.
    pub(super) fn new(bound: usize, keys: usize) -> Tail {
        Tail {
            text: vec![0; bound + LINE_PAD],
            len: 0,
            slots: vec![
                TailSlot {
                    v: 0,
                    slot: Slot::Int,
                    at: 0,
                    width: 0,
                };
                keys
            ],
            hash_at: 0,
            wait: 0,
            backoff: 0,
        }
    }

    /// Whether this tail was made for a template of line bound `bound` and `keys` slots
    /// (a template's shape check: it is emptied whenever its template is built).
    pub(super) fn fits(&self, bound: usize, keys: usize) -> bool {
        self.slots.len() == keys && self.text.len() == bound + LINE_PAD && self.len <= bound
    }

    /// Writes `vals` (one per slot) into the text in place; false when one's width differs
    /// from the text's (the text is then partly overwritten: render it again).
    #[inline(always)]
    fn patch(&mut self, vals: &[[u8; 8]]) -> bool {
        let b = self.text.as_mut_ptr();
        for (v, s) in vals.iter().zip(self.slots.iter_mut()) {
            let v = u64::from_le_bytes(*v);
            if v == s.v {
                continue;
            }
            let at = s.at as usize;
            let w = s.width as usize;
            // SAFETY: `render` wrote a value of `w` bytes at `at`, followed by its piece:
            // `at + w < len <= bound`, and the text holds `bound + LINE_PAD` bytes, so the
            // NUM_MAX bytes `put_slot` may write from `at` are within it. The byte after the
            // value (the first of its piece) is restored: `put_num` may have written it.
            #[allow(unsafe_code)]
            unsafe {
                let d = b.add(at);
                let after = *d.add(w);
                if put_slot(d, s.slot, v) != d.add(w) {
                    return false;
                }
                *d.add(w) = after;
            }
            s.v = v;
        }
        true
    }

    /// Renders the whole text: pieces 2 and 3 (`merged`), each of `vals` and the piece after
    /// it, then with a file its hash (written by the caller at `hash_at`) and the last piece.
    ///
    /// # Safety
    /// `pieces` and `merged` are the template's (`4 + keys` pieces, one more with a file)
    /// in `text`, each followed by COPY_PAD readable bytes; this tail was made with the
    /// template's bound and `keys` slots.
    #[allow(unsafe_code)]
    #[inline(never)]
    unsafe fn render(
        &mut self,
        text: *const u8,
        pieces: &[(u32, u32)],
        merged: (u32, u32),
        keys: &[(&str, Slot)],
        vals: &[[u8; 8]],
        file: bool,
    ) {
        let b = self.text.as_mut_ptr();
        // SAFETY: the text holds `bound + LINE_PAD` bytes; what is kept here is what the line
        // writes after `dur` (less than its bound) and each write goes at most 31 bytes past
        // what it keeps (see `complete_static`). Piece indexes `4 + i` for `i < keys` and,
        // with a file, `4 + keys` are within `pieces` (the contract).
        unsafe {
            let piece = |d: *mut u8, i: usize| {
                let (a, n) = *pieces.get_unchecked(i);
                put_piece(d, text.add(a as usize), n as usize)
            };
            let mut d = put_piece(b, text.add(merged.0 as usize), merged.1 as usize);
            for (i, ((&(_, slot), v), s)) in
                keys.iter().zip(vals).zip(self.slots.iter_mut()).enumerate()
            {
                let v = u64::from_le_bytes(*v);
                let end = put_slot(d, slot, v);
                *s = TailSlot {
                    v,
                    slot,
                    at: d.offset_from(b) as u32,
                    width: end.offset_from(d) as u32,
                };
                d = piece(end, 4 + i);
            }
            if file {
                self.hash_at = d.offset_from(b) as usize;
                d = piece(d.add(16), 4 + keys.len());
            }
            self.len = d.offset_from(b) as usize;
        }
    }
}

/// Writes the tail of a line that fills every slot at `d` (see [`Tail`]): the template's
/// tail, patched with `vals` (or rendered first), and the file hash `fhash`; returns the
/// end, or `None` when this line is to be written piece by piece instead: a value changed
/// its width (the tail is rendered again only after as many more lines as such changes
/// came in a row, doubling to [`TAIL_BACKOFF_MAX`]: a slot whose width alternates, as a
/// `read`'s `ret` of 65536 then 0 at the end of each file, would otherwise render the whole
/// tail at every line, which costs more than writing the line).
///
/// # Safety
/// As [`Tail::render`], `vals` one per slot, `fhash` given for a template with a file
/// only; `d` writable for the rest of the line's bound plus [`LINE_PAD`] bytes.
#[allow(unsafe_code, clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn put_tail(
    d: *mut u8,
    tail: &mut Tail,
    text: *const u8,
    pieces: &[(u32, u32)],
    merged: (u32, u32),
    keys: &[(&str, Slot)],
    vals: &[[u8; 8]],
    fhash: Option<&[u8; 16]>,
) -> Option<*mut u8> {
    // SAFETY: the contract; the hash goes where `render` left room for it (`hash_at + 16 <=
    // len`); the copy reads `len` rounded up to 64 bytes of the text (it holds LINE_PAD more
    // than the bound, which `len` is within) and keeps `len` bytes at `d`, as many as the
    // line writes for its tail, writing at most 63 more (within LINE_PAD).
    unsafe {
        if tail.len != 0 {
            if !tail.patch(vals) {
                // Partly overwritten: rendered again before its next use.
                tail.len = 0;
                tail.wait = tail.backoff;
                tail.backoff = (2 * tail.backoff + 1).min(TAIL_BACKOFF_MAX);
                return None;
            }
            tail.backoff = 0;
        } else if tail.wait > 0 {
            tail.wait -= 1;
            return None;
        } else {
            tail.render(text, pieces, merged, keys, vals, fhash.is_some());
        }
        if let Some(h) = fhash {
            put16(tail.text.as_mut_ptr().add(tail.hash_at), h);
        }
        Some(put_moves::<4>(d, tail.text.as_ptr(), tail.len))
    }
}

/// Copies `n` bytes from `s` to `d` in whole 32-byte moves (at least one); returns `d + n`.
///
/// # Safety
/// `s` readable and `d` writable for `n` rounded up to 32 bytes (at least 32): up to 31
/// bytes past `d + n` may be written, and are overwritten by what follows or dropped.
#[allow(unsafe_code)]
#[inline(always)]
pub(super) unsafe fn put_piece(d: *mut u8, s: *const u8, n: usize) -> *mut u8 {
    // SAFETY: the contract.
    unsafe { put_moves::<2>(d, s, n) }
}

/// [`put_piece`] in whole moves of `16 * W` bytes (64 for a line's tail: fewer turns of the
/// loop).
///
/// # Safety
/// `s` readable and `d` writable for `n` rounded up to `16 * W` bytes (at least `16 * W`): up
/// to `16 * W - 1` bytes past `d + n` may be written.
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn put_moves<const W: usize>(d: *mut u8, s: *const u8, n: usize) -> *mut u8 {
    let mut i = 0;
    loop {
        // SAFETY: `i` is 0 or `< n`, so `i + 16 * W` is at most `n` rounded up to `16 * W`,
        // or `16 * W` (the contract).
        unsafe {
            let x = std::ptr::read_unaligned(s.add(i).cast::<[u128; W]>());
            std::ptr::write_unaligned(d.add(i).cast::<[u128; W]>(), x);
        }
        i += 16 * W;
        if i >= n {
            break;
        }
    }
    // SAFETY: within what the caller made writable.
    unsafe { d.add(n) }
}

/// Writes the 8 bytes of `s` at `d`, keeping the first `n`; returns `d + n`.
///
/// # Safety
/// `d` writable for 8 bytes.
#[allow(unsafe_code)]
#[inline(always)]
pub(super) unsafe fn put_lit8(d: *mut u8, s: &[u8; 8], n: usize) -> *mut u8 {
    // SAFETY: the contract.
    unsafe {
        std::ptr::write_unaligned(d.cast::<[u8; 8]>(), *s);
        d.add(n)
    }
}

/// Copies the 16 bytes of `h` to `d`; returns `d + 16`.
///
/// # Safety
/// `d` writable for 16 bytes.
#[allow(unsafe_code)]
#[inline(always)]
pub(super) unsafe fn put16(d: *mut u8, h: &[u8; 16]) -> *mut u8 {
    // SAFETY: the contract.
    unsafe {
        std::ptr::write_unaligned(d.cast::<[u8; 16]>(), *h);
        d.add(16)
    }
}

/// Writes `v` in decimal at `d`; returns the end (at most 20 bytes on).
///
/// # Safety
/// `d` writable for 20 bytes.
#[allow(unsafe_code)]
#[inline(always)]
pub(super) unsafe fn put_num(d: *mut u8, v: u64) -> *mut u8 {
    // Small values (durations, descriptors) without counting digits.
    if v < 100 {
        // SAFETY: at most 2 bytes at `d` (the contract).
        unsafe {
            if v < 10 {
                *d = b'0' + v as u8;
                return d.add(1);
            }
            std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(v as usize * 2), d, 2);
            return d.add(2);
        }
    }
    // 3 or 4 digits (sizes, counts): two pairs, the first one's leading zero dropped.
    if v < 10_000 {
        let (hi, lo) = ((v / 100) as usize, (v % 100) as usize);
        // SAFETY: at most 4 bytes at `d` (the contract).
        unsafe {
            // `hi` in 1..=99. One digit: its pair is `0h`; the two bytes from the `h` (`h` and
            // the next pair's first, in the table) are written, and `lo`'s pair overwrites the
            // second.
            let skip = (hi < 10) as usize;
            std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(hi * 2 + skip), d, 2);
            let d = d.add(2 - skip);
            std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(lo * 2), d, 2);
            return d.add(2);
        }
    }
    // 5 or 6 digits (offsets, counters): three pairs, the first one's leading zero dropped
    // as above.
    if v < 1_000_000 {
        let (hi, lo) = ((v / 10_000) as usize, (v % 10_000) as usize);
        let (mid, lo) = (lo / 100, lo % 100);
        // SAFETY: at most 6 bytes at `d` (the contract).
        unsafe {
            let skip = (hi < 10) as usize;
            std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(hi * 2 + skip), d, 2);
            let d = d.add(2 - skip);
            std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(mid * 2), d, 2);
            std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(lo * 2), d.add(2), 2);
            return d.add(4);
        }
    }
    // 7 or 8 digits: all eight at once (leading zeros dropped by a shift), one store.
    if v < 100_000_000 {
        let z = digits8(v as u32);
        // `v >= 10^6`: `z` has a nonzero digit, and at most 1 leading zero.
        let lead = (z.trailing_zeros() / 8) as usize;
        let s = (z | 0x3030_3030_3030_3030) >> (8 * lead);
        // SAFETY: 8 bytes at `d` written (the contract: 20), `8 - lead` kept.
        unsafe {
            std::ptr::write_unaligned(d.cast::<[u8; 8]>(), s.to_le_bytes());
            return d.add(8 - lead);
        }
    }
    let n = ndigits(v);
    // SAFETY: `n <= 20` bytes at `d` are writable (the contract).
    unsafe {
        write_digits(d, v, n);
        d.add(n)
    }
}

/// The 8 decimal digits of `v < 10^8` (leading zeros included) as the bytes of a
/// little-endian word, the first digit in the lowest byte, values 0..=9 (not ASCII): the
/// two halves' 4 digits in 32-bit lanes, split into 2-digit numbers in 16-bit lanes, then
/// into digits in bytes (each lane's quotient by a multiply and shift, exact in range; no
/// product carries into the next lane).
#[inline(always)]
fn digits8(v: u32) -> u64 {
    debug_assert!(v < 100_000_000);
    let x = (v / 10_000) as u64 | ((v % 10_000) as u64) << 32;
    // x / 100 per 32-bit lane (x < 10^4: (x * 5243) >> 19 is exact).
    let q = ((x * 5243) >> 19) & 0x0000_007F_0000_007F;
    let y = q | (x - q * 100) << 16;
    // y / 10 per 16-bit lane (y < 100: (y * 103) >> 10 is exact).
    let t = ((y * 103) >> 10) & 0x000F_000F_000F_000F;
    t | (y - t * 10) << 8
}

/// Writes the `n` (= `ndigits(v)`) decimal digits of `v` at `d`, back to front, two at a time.
///
/// # Safety
/// `d` writable for `n` bytes.
#[allow(unsafe_code)]
#[inline(always)]
pub(super) unsafe fn write_digits(d: *mut u8, v: u64, n: usize) {
    // SAFETY: every index below is `< n` (the contract).
    unsafe {
        let mut end = d.add(n);
        let mut v = v;
        while v >= 100 {
            let r = (v % 100) as usize * 2;
            v /= 100;
            end = end.sub(2);
            std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(r), end, 2);
        }
        if v >= 10 {
            std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(v as usize * 2), end.sub(2), 2);
        } else {
            *end.sub(1) = b'0' + v as u8;
        }
    }
}

/// [`put_num`] for a value that shares its digits but the last `LOW` with the value `hd`
/// last saw (ids, timestamps): those digits are copied, only the last `LOW` are computed.
///
/// # Safety
/// `d` writable for 32 bytes (20 are kept at most).
#[allow(unsafe_code)]
#[inline(always)]
pub(super) unsafe fn put_split<const LOW: u32>(d: *mut u8, v: u64, hd: &mut HighDigits) -> *mut u8 {
    const { assert!(LOW.is_multiple_of(2) && LOW >= 2 && LOW <= 8) };
    let p = 10u64.pow(LOW);
    let q = v / p;
    // SAFETY: every write below is within the contract: `put_num` keeps at most 20 bytes;
    // otherwise the high digits (`len` of them, at most 18 as `q <= u64::MAX / 100`) are
    // copied in one 32-byte move (32 bytes written, read from `txt`'s 32) and
    // `LOW` digits follow, `len + LOW` bytes kept: the digits of `v`, at most 20.
    unsafe {
        if q == 0 {
            return put_num(d, v);
        }
        if q != hd.q {
            let end = put_num(hd.txt.as_mut_ptr(), q);
            hd.len = end.offset_from(hd.txt.as_ptr()) as usize;
            hd.q = q;
        }
        std::ptr::write_unaligned(d.cast::<[u8; 32]>(), hd.txt);
        let d = d.add(hd.len);
        let mut r = (v - q * p) as u32;
        let mut k = LOW as usize;
        while k > 0 {
            k -= 2;
            let pair = (r % 100) as usize * 2;
            r /= 100;
            std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(pair), d.add(k), 2);
        }
        d.add(LOW as usize)
    }
}

/// [`put_num`] with a sign: at most [`NUM_MAX`] bytes.
///
/// # Safety
/// `d` writable for [`NUM_MAX`] bytes.
#[allow(unsafe_code)]
#[inline(always)]
pub(super) unsafe fn put_int(d: *mut u8, v: i64) -> *mut u8 {
    // A branch on the sign: values are mostly not negative, and then nothing is stored or
    // computed for it.
    // SAFETY: at most one sign byte, then at most 20 digits: within the contract.
    unsafe {
        let (d, u) = if v < 0 {
            *d = b'-';
            (d.add(1), v.unsigned_abs())
        } else {
            (d, v as u64)
        };
        put_num(d, u)
    }
}

/// Runs `f` on a cursor over `bound` bytes reserved at the end of `out`, then keeps what it
/// wrote. The reserved bytes are not initialised first: the cursor only writes.
#[inline(always)]
pub(super) fn reserved(out: &mut Vec<u8>, bound: usize, f: impl FnOnce(&mut Put)) {
    // COPY_PAD more than the bound: whole 16-byte copies may run past what they keep.
    out.reserve(bound + COPY_PAD);
    let spare = out.spare_capacity_mut();
    let mut p = Put {
        buf: spare.as_mut_ptr().cast::<u8>(),
        cap: bound,
        pos: 0,
        _out: std::marker::PhantomData,
    };
    f(&mut p);
    let n = p.pos;
    // SAFETY: the cursor wrote (initialised) exactly the first `n <= bound` spare bytes.
    #[allow(unsafe_code)]
    unsafe {
        out.set_len(out.len() + n)
    };
}

/// Bytes past a cursor's bound that whole 16- or 32-byte copies may write (and later overwrite or
/// drop): reserved by [`reserved`], never kept.
pub(super) const COPY_PAD: usize = 32;

/// Bytes past a template line's bound that its writes may go (a line's tail is copied in
/// 64-byte moves, [`put_tail`]): reserved before the line, never kept.
pub(super) const LINE_PAD: usize = 64;

/// A write-only cursor over `cap` bytes (plus [`COPY_PAD`]) of a vector's spare capacity.
/// Every write checks that it ends within `cap` (an overrun panics, never corrupts).
pub(super) struct Put<'a> {
    buf: *mut u8,
    cap: usize,
    pos: usize,
    _out: std::marker::PhantomData<&'a mut Vec<u8>>,
}

const DIGITS2: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Decimal digits of `v` (1 for 0).
#[inline(always)]
fn ndigits(v: u64) -> usize {
    const POW10: [u64; 20] = {
        let mut t = [1u64; 20];
        let mut i = 1;
        while i < 20 {
            t[i] = t[i - 1] * 10;
            i += 1;
        }
        t
    };
    // floor(log10(2) * bits) is the digit count or one less.
    let bits = 64 - (v | 1).leading_zeros() as usize;
    let d = (bits * 1233) >> 12;
    d + ((v | 1) >= POW10[d]) as usize
}

#[allow(unsafe_code)]
impl Put<'_> {
    /// Room for `n` more bytes, or a panic (bounds were computed by the caller).
    #[inline(always)]
    pub(super) fn room(&self, n: usize) {
        assert!(self.pos + n <= self.cap, "json: line bound exceeded");
    }
    #[inline(always)]
    pub(super) fn lit<const N: usize>(&mut self, s: &[u8; N]) {
        self.room(N);
        // SAFETY: `room` checked `pos + N <= cap` of the reserved spare bytes.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), self.buf.add(self.pos), N) };
        self.pos += N;
    }
    #[inline(always)]
    pub(super) fn bytes(&mut self, s: &[u8]) {
        self.room(s.len());
        // SAFETY: as in `lit`.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), self.buf.add(self.pos), s.len()) };
        self.pos += s.len();
    }
    /// The first `n` bytes of `s`, copied 16 at a time: `s` must hold `n` rounded up to 16
    /// bytes (a [`Template`](super::cache::Template)'s pieces are padded), so no copy call is made.
    #[inline(always)]
    pub(super) fn padded(&mut self, s: &[u8], n: usize) {
        self.room(n);
        let whole = n.div_ceil(16) * 16;
        assert!(whole <= s.len() && whole - n < COPY_PAD);
        let mut i = 0;
        while i < n {
            // SAFETY: `i + 16 <= whole <= s.len()` on the source; on the destination
            // `pos + i + 16 <= pos + n + 15 < cap + COPY_PAD` (reserved).
            unsafe {
                let x = std::ptr::read_unaligned(s.as_ptr().add(i).cast::<u128>());
                std::ptr::write_unaligned(self.buf.add(self.pos + i).cast::<u128>(), x);
            }
            i += 16;
        }
        self.pos += n;
    }
    /// A JSON string: the same bytes [`super::write_str`] writes.
    pub(super) fn text(&mut self, t: &Text) {
        self.lit(b"\"");
        let b = t.bytes;
        if super::escape::plain_text(b) {
            self.bytes(b);
        } else {
            escape_into(self, b);
        }
        if t.orig_len > b.len() {
            self.lit(b"...[truncated, ");
            self.num(t.orig_len as u64);
            self.lit(b" bytes]");
        }
        self.lit(b"\"");
    }

    /// [`Put::num`] with `v`'s high digits taken from `hd` when they are the same as last
    /// time (see [`put_split`]).
    #[inline(always)]
    pub(super) fn num_split(&mut self, v: u64, hd: &mut HighDigits) {
        self.room(20);
        // SAFETY: `room` checked `pos + 20 <= cap`; `put_split` writes 32 bytes from `pos`
        // (within `cap + COPY_PAD`) and keeps at most 20, ending at the returned pointer.
        unsafe {
            let end = put_split::<4>(self.buf.add(self.pos), v, hd);
            self.pos = end.offset_from(self.buf) as usize;
        }
    }

    /// Decimal digits of `v`, written in place back to front, two at a time.
    #[inline(always)]
    pub(super) fn num(&mut self, v: u64) {
        let n = ndigits(v);
        self.room(n);
        // SAFETY: `room` checked `pos + n <= cap`.
        unsafe { write_digits(self.buf.add(self.pos), v, n) };
        self.pos += n;
    }

    #[inline(always)]
    pub(super) fn int(&mut self, v: i64) {
        if v < 0 {
            self.lit(b"-");
        }
        self.num(v.unsigned_abs());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_num_matches_itoa() {
        let mut cases = vec![0u64, 1, 9, 10, 99, 100, u64::MAX, u64::MAX - 1];
        let mut p = 1u64;
        while let Some(n) = p.checked_mul(10) {
            cases.extend([p - 1, p, p + 1, n - 1]);
            p = n;
        }
        cases.extend([p - 1, p, p + 1]);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push(x >> (x % 64));
        }
        for v in cases {
            let mut out = b"x".to_vec();
            reserved(&mut out, 20, |p| p.num(v));
            assert_eq!(out[1..], *v.to_string().as_bytes(), "{v}");
            let mut out = Vec::new();
            reserved(&mut out, 21, |p| p.int(v as i64));
            assert_eq!(out, (v as i64).to_string().as_bytes(), "{v}");
        }
    }
    /// The raw writers [`put_num`] and [`put_int`] (every digit count, both sides of each
    /// power of ten, 0, `u64::MAX`, negative values) write what `to_string` does, after
    /// other bytes, and never more than their bound.
    #[test]
    fn put_num_raw_matches_itoa() {
        let mut cases = vec![0u64, 1, 9, 10, 99, 100, 101, u64::MAX, u64::MAX - 1];
        let mut p = 1u64;
        while let Some(n) = p.checked_mul(10) {
            cases.extend([p - 1, p, p + 1, n - 1, p * 5 + 3]);
            p = n;
        }
        cases.extend([p - 1, p, p + 1, 99_999_999, 100_000_000, 12_345_678]);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push(x >> (x % 64));
        }
        cases.extend(0..20_000);
        for v in cases {
            for signed in [false, true] {
                let want = if signed {
                    (v as i64).to_string()
                } else {
                    v.to_string()
                };
                let mut out = b"ab".to_vec();
                out.reserve(NUM_MAX + COPY_PAD);
                #[allow(unsafe_code)]
                // SAFETY: NUM_MAX spare bytes reserved (both writers' contract).
                unsafe {
                    let d = out.as_mut_ptr().add(2);
                    let end = if signed {
                        put_int(d, v as i64)
                    } else {
                        put_num(d, v)
                    };
                    let n = end.offset_from(d) as usize;
                    assert!(n <= NUM_MAX);
                    out.set_len(2 + n);
                }
                assert_eq!(out[2..], *want.as_bytes(), "{v} {signed}");
            }
        }
    }

    /// Runs of nearby values (the cached high digits hit) and jumps (they miss) format as
    /// `to_string` does, for both splits, written after other bytes.
    #[test]
    fn put_split_matches_itoa() {
        let mut cases = vec![0u64, 1, 99, 100, 101, 999_999, 1_000_000, 1_000_001, 5, 100];
        for base in [
            0u64,
            1_796_000_779_668_786,
            99_999_999_999,
            u64::MAX - 2_000,
        ] {
            cases.extend((0..1_500).map(|i| base.saturating_add(i * 7)));
        }
        cases.extend([u64::MAX, 10u64.pow(19), 10u64.pow(19) - 1, 7, u64::MAX]);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..5_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push(x >> (x % 64));
        }
        let (mut h2, mut h4, mut h6) = Default::default();
        for v in cases {
            for low in [2, 4, 6] {
                let mut out = b"ab".to_vec();
                out.reserve(32);
                #[allow(unsafe_code)]
                // SAFETY: 32 spare bytes reserved; `n <= 20` of them are written (kept).
                unsafe {
                    let d = out.as_mut_ptr().add(2);
                    let end = match low {
                        2 => put_split::<2>(d, v, &mut h2),
                        4 => put_split::<4>(d, v, &mut h4),
                        _ => put_split::<6>(d, v, &mut h6),
                    };
                    let n = end.offset_from(d) as usize;
                    assert!(n <= 20);
                    out.set_len(2 + n);
                }
                assert_eq!(out[2..], *v.to_string().as_bytes(), "{v} {low}");
            }
        }
    }

    /// Heads of lines with ids one and a few apart (advanced in place, across 9s and powers
    /// of ten), repeated, going back and jumping, and timestamps near and far (high digits kept and
    /// rendered again, below 10,000, extremes, small after the largest): `{"id":<id>` +
    /// middle + ts as `to_string`.
    #[test]
    fn put_head_matches_itoa() {
        let mut ids: Vec<u64> = (0..2_100).collect();
        ids.extend([
            5,
            5,
            0,
            0,
            1,
            99_999,
            100_000,
            100_001,
            u64::MAX - 1,
            u64::MAX,
        ]);
        ids.extend((0..30).map(|i| 10u64.pow(19) - 15 + i));
        ids.extend([u64::MAX, 0, 9, 10, 11]);
        // Steps of a few (alternating templates), of 9 and 10 (the most and one more than
        // the last digit may advance), back down, and repeats.
        for step in [2, 3, 5, 9, 10, 11] {
            ids.extend((0..40).map(|i| 985 + i * step));
        }
        ids.extend([1_020, 1_019, 1_019, 1_011, 1_018, 1_009, 1_000, 999, 1_008]);
        let mut tss = vec![
            0u64,
            1,
            9_999,
            10_000,
            10_001,
            99_999_999,
            u64::MAX,
            u64::MAX - 1,
        ];
        tss.extend((0..1_500).map(|i| 1_796_000_779_668_786 + i * 7));
        tss.extend([10u64.pow(19), 10u64.pow(19) - 1, 123, 1_796_000_779_668_786]);
        // Small after the largest: `ts - base` wraps to below 10,000 (the base is
        // 18446744073709550000).
        tss.extend([u64::MAX, 5, u64::MAX - 1, 1_615, u64::MAX, 1_616, 9_999]);
        for middle in [&b""[..], b",\"name\":\"fn\",\"ts\":", &[b'm'; 100][..]] {
            let mut h = LineHead::new(middle);
            for (i, &id) in ids.iter().enumerate() {
                let ts = tss[i % tss.len()];
                let want = format!("{{\"id\":{id}{}{ts}", std::str::from_utf8(middle).unwrap());
                let mut out = b"ab".to_vec();
                let room = 6 + 20 + middle.len() + 20 + COPY_PAD;
                out.reserve(room);
                #[allow(unsafe_code)]
                // SAFETY: `room` spare bytes reserved (put_head's contract); the `n` kept are
                // written.
                unsafe {
                    let d = out.as_mut_ptr().add(2);
                    let n = put_head(d, &mut h, id, ts).offset_from(d) as usize;
                    assert!(n <= room - COPY_PAD);
                    out.set_len(2 + n);
                }
                assert_eq!(out[2..], *want.as_bytes(), "{id} {ts}");
            }
        }
    }
}
