//! The reference's string hash: bytes 0, 2, ..., 14 of the MD5 of the raw string, as 16
//! lowercase hex digits (reference §2.7).

use md5::{Digest, Md5};

/// 16 ASCII hex digits.
pub type Hash16 = [u8; 16];

pub fn hash16(data: &[u8]) -> Hash16 {
    let digest = Md5::digest(data);
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

    #[test]
    fn matches_reference_samples() {
        // Values seen by running the reference (spec §1.1, §2.7).
        assert_eq!(&hash16(b"vm"), b"6882804a826580cd");
        assert_eq!(&hash16(b"basic2.py-vm-6427"), b"282f6b6ade45643b");
        assert_eq!(&hash16(b"io-vm-12521"), b"79c7d0806f0ad9e5");
        assert_eq!(&hash16(b"mp.py-vm-11898"), b"f42582e9efa39b91");
    }
}
