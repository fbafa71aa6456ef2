//! The reference's string hash: bytes 0, 2, ..., 14 of the MD5 of the raw string, as 16
//! lowercase hex digits (reference §2.7). MD5 as RFC 1321 defines it, written here for the
//! short strings hashed (paths, names: one or two 64-byte blocks), without a streaming
//! hasher's buffering: the writer hashes every new path it meets.

/// 16 ASCII hex digits.
pub type Hash16 = [u8; 16];

/// RFC 1321's table: `floor(2^32 × |sin(i + 1)|)`.
const T: [u32; 64] = [
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
];

/// One 64-byte block into the state (RFC 1321 §3.4): four rounds of 16 steps, each round
/// with its function, message word order and rotations.
#[inline(always)]
fn block(state: &mut [u32; 4], b: &[u8; 64]) {
    let mut m = [0u32; 16];
    for (w, c) in m.iter_mut().zip(b.chunks_exact(4)) {
        *w = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    let [mut a, mut bb, mut c, mut d] = *state;
    macro_rules! round {
        ($base:expr, $rot:expr, $word:expr, $f:expr) => {
            for i in 0..16 {
                let f = $f(bb, c, d)
                    .wrapping_add(a)
                    .wrapping_add(T[$base + i])
                    .wrapping_add(m[$word(i) & 15]);
                a = d;
                d = c;
                c = bb;
                bb = bb.wrapping_add(f.rotate_left($rot[i & 3]));
            }
        };
    }
    round!(0, [7, 12, 17, 22], |i| i, |x: u32, y: u32, z: u32| (x & y)
        | (!x & z));
    round!(
        16,
        [5, 9, 14, 20],
        |i| 5 * i + 1,
        |x: u32, y: u32, z: u32| (x & z) | (y & !z)
    );
    round!(
        32,
        [4, 11, 16, 23],
        |i| 3 * i + 5,
        |x: u32, y: u32, z: u32| x ^ y ^ z
    );
    round!(48, [6, 10, 15, 21], |i| 7 * i, |x: u32, y: u32, z: u32| y
        ^ (x | !z));
    for (s, v) in state.iter_mut().zip([a, bb, c, d]) {
        *s = s.wrapping_add(v);
    }
}

/// The MD5 digest of `data`.
pub fn md5(data: &[u8]) -> [u8; 16] {
    let mut state = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];
    let mut blocks = data.chunks_exact(64);
    for b in &mut blocks {
        block(&mut state, b.try_into().unwrap_or(&[0; 64]));
    }
    // The rest, 0x80, zeros, and the length in bits (little-endian) ending a block: one
    // block when the rest leaves 8 bytes for the length after the 0x80, else two.
    let rest = blocks.remainder();
    let mut tail = [0u8; 128];
    tail[..rest.len()].copy_from_slice(rest);
    tail[rest.len()] = 0x80;
    let end = if rest.len() < 56 { 64 } else { 128 };
    tail[end - 8..end].copy_from_slice(&(data.len() as u64).wrapping_mul(8).to_le_bytes());
    for b in tail[..end].chunks_exact(64) {
        block(&mut state, b.try_into().unwrap_or(&[0; 64]));
    }
    let mut out = [0u8; 16];
    for (o, s) in out.chunks_exact_mut(4).zip(state) {
        o.copy_from_slice(&s.to_le_bytes());
    }
    out
}

pub fn hash16(data: &[u8]) -> Hash16 {
    let digest = md5(data);
    let mut out = [0u8; 16];
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, byte) in digest.iter().step_by(2).enumerate() {
        out[2 * i] = HEX[(byte >> 4) as usize];
        out[2 * i + 1] = HEX[(byte & 15) as usize];
    }
    out
}

/// The hash as a `&str` (always ASCII).
pub fn hash_str(h: &Hash16) -> &str {
    std::str::from_utf8(h).unwrap_or("0000000000000000")
}

/// A fast non-cryptographic hasher for the writer's path table (paths are hashed per event;
/// SipHash's DoS resistance buys nothing here).
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

const K: u64 = 0x9e37_79b9_7f4a_7c15;

impl std::hash::Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let v = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            h = (h.rotate_left(5) ^ v).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            h = (h.rotate_left(5) ^ b as u64).wrapping_mul(K);
        }
        self.0 = h;
    }
    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0.rotate_left(5) ^ n as u64).wrapping_mul(K);
    }
    #[inline]
    fn finish(&self) -> u64 {
        // The rounds end in a multiply, whose low bits depend only on the input's low bits:
        // paths differing in their last bytes (the high bytes of the last word) would share
        // their bucket. Fold the high half down.
        self.0 ^ (self.0 >> 29) ^ (self.0 >> 47)
    }
}

/// `HashMap` builder using [`FastHasher`].
pub type FastBuild = std::hash::BuildHasherDefault<FastHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Our MD5 is the md-5 crate's (RustCrypto) for every length to 300 bytes (one, two and
    /// more blocks, the padding's every case) and for random inputs.
    #[test]
    fn md5_matches_an_independent_implementation() {
        use md5_crate::{Digest, Md5};
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut byte = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        };
        for n in 0..300 {
            for _ in 0..8 {
                let data: Vec<u8> = (0..n).map(|_| byte()).collect();
                assert_eq!(md5(&data)[..], Md5::digest(&data)[..], "{n} bytes");
            }
        }
        let big: Vec<u8> = (0..100_000).map(|_| byte()).collect();
        assert_eq!(md5(&big)[..], Md5::digest(&big)[..]);
        // RFC 1321's test suite.
        assert_eq!(hex(&md5(b"")), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(hex(&md5(b"abc")), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(
            hex(&md5(
                b"12345678901234567890123456789012345678901234567890123456789012345678901234567890"
            )),
            "57edf4a22be3c955ac49da2e2107b67a"
        );
    }

    fn hex(d: &[u8]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn matches_reference_samples() {
        // Values seen by running the reference (spec §1.1, §2.7).
        assert_eq!(&hash16(b"vm"), b"6882804a826580cd");
        assert_eq!(&hash16(b"basic2.py-vm-6427"), b"282f6b6ade45643b");
        assert_eq!(&hash16(b"io-vm-12521"), b"79c7d0806f0ad9e5");
        assert_eq!(&hash16(b"mp.py-vm-11898"), b"f42582e9efa39b91");
    }
}
