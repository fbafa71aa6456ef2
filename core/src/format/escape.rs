//! Strings and numbers: [`write_str`], the one JSON string escaper, the number writers, and
//! [`Out`], what a line is written into (a growable buffer here; the reserved-space cursor of
//! [`super::cursor`]).

use super::Ctx;
use crate::record::Text;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Writes `bytes` as a JSON string (with quotes). `orig_len` > `bytes.len()` marks a clipped
/// string.
pub fn write_str(out: &mut Vec<u8>, bytes: &[u8], orig_len: usize) {
    out.push(b'"');
    // Fast path: printable ASCII without quote or backslash is copied as is.
    if plain_text(bytes) {
        out.extend_from_slice(bytes);
    } else {
        escape_into(out, bytes);
    }
    if orig_len > bytes.len() {
        out.extend_from_slice(b"...[truncated, ");
        write_u64(out, orig_len as u64);
        out.extend_from_slice(b" bytes]");
    }
    out.push(b'"');
}

/// Whether `b` is printable ASCII without `"` or `\` (written in a JSON string as is):
/// eight bytes at a time (a byte at a time, the test was most of an `FH` line's path).
#[inline]
pub(crate) fn plain_text(b: &[u8]) -> bool {
    const L: u64 = 0x0101_0101_0101_0101;
    const H: u64 = 0x8080_8080_8080_8080;
    // Nonzero iff some byte of `x` is below 0x20, above 0x7e, `"` or `\` (each test exact
    // for "some byte": bytes below n, `(x - n) & !x`, n <= 128; above n, `(x + 127 - n) | x`,
    // n <= 127; equal to c, a zero byte of `x ^ c`).
    let bad = |x: u64| {
        let below = x.wrapping_sub(L * 0x20) & !x;
        // Above 0x7e: n = 0x7e, 127 - n = 1.
        let above = x.wrapping_add(L) | x;
        let zero = |v: u64| v.wrapping_sub(L) & !v;
        (below | above | zero(x ^ (L * b'"' as u64)) | zero(x ^ (L * b'\\' as u64))) & H
    };
    let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
    let n = b.len();
    if n < 8 {
        return b
            .iter()
            .all(|&c| (0x20..0x7f).contains(&c) && c != b'"' && c != b'\\');
    }
    let mut i = 0;
    while i + 8 < n {
        if bad(word(i)) != 0 {
            return false;
        }
        i += 8;
    }
    // The last eight bytes (overlapping the word before).
    bad(word(n - 8)) == 0
}

/// Where a line goes: a growable buffer or a [`super::cursor::Put`] over reserved space.
pub(super) trait Out {
    fn put(&mut self, b: &[u8]);
    fn u64(&mut self, v: u64);
    fn text(&mut self, t: &Text);
    fn i64(&mut self, v: i64) {
        if v < 0 {
            self.put(b"-");
        }
        self.u64(v.unsigned_abs());
    }
    fn f64(&mut self, v: f64) {
        if v.is_finite() {
            self.put(ryu::Buffer::new().format_finite(v).as_bytes());
        } else {
            self.put(b"null");
        }
    }
}

impl Out for Vec<u8> {
    #[inline]
    fn put(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
    fn u64(&mut self, v: u64) {
        write_u64(self, v);
    }
    fn text(&mut self, t: &Text) {
        write_str(self, t.bytes, t.orig_len);
    }
}

/// The escaped form of `bytes` (at most 6 output bytes per input byte): quotes, backslashes
/// and control bytes escaped, invalid UTF-8 replaced by U+FFFD.
pub(super) fn escape_into(out: &mut impl Out, bytes: &[u8]) {
    for chunk in bytes.utf8_chunks() {
        let valid = chunk.valid().as_bytes();
        let mut start = 0;
        for (i, &b) in valid.iter().enumerate() {
            let esc: &[u8] = match b {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                b'\n' => b"\\n",
                b'\r' => b"\\r",
                b'\t' => b"\\t",
                0x08 => b"\\b",
                0x0c => b"\\f",
                0..=0x1f | 0x7f => b"",
                _ => continue,
            };
            out.put(&valid[start..i]);
            if esc.is_empty() {
                out.put(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 15) as usize],
                ]);
            } else {
                out.put(esc);
            }
            start = i + 1;
        }
        out.put(&valid[start..]);
        if !chunk.invalid().is_empty() {
            out.put("\u{fffd}".as_bytes());
        }
    }
}

pub(super) fn text(out: &mut Vec<u8>, t: &Text) {
    write_str(out, t.bytes, t.orig_len);
}

pub fn write_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

pub fn write_f64(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        out.extend_from_slice(ryu::Buffer::new().format_finite(v).as_bytes());
    } else {
        out.extend_from_slice(b"null");
    }
}

/// `"key":` for a plain ASCII key.
pub(super) fn key(out: &mut Vec<u8>, k: &str) {
    out.push(b'"');
    out.extend_from_slice(k.as_bytes());
    out.extend_from_slice(b"\":");
}

pub(super) fn kv_u64(out: &mut Vec<u8>, k: &str, v: u64) {
    key(out, k);
    write_u64(out, v);
    out.push(b',');
}

pub(super) fn hhash_open(out: &mut Vec<u8>, ctx: &Ctx) {
    out.extend_from_slice(b"\"args\":{\"hhash\":\"");
    out.extend_from_slice(ctx.hhash.as_bytes());
    out.push(b'"');
}
