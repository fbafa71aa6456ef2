//! One gzip member per flush: a 10-byte header (no name, mtime 0, OS unix), raw deflate,
//! CRC-32 and ISIZE. Members concatenate into a valid multi-member gzip file, and each member
//! decodes alone (nothing refers back into an earlier one).
//!
//! Level 1 (the default) uses [`FastDeflate`], our encoder specialised for JSON lines (about
//! twice miniz_oxide's level-1 speed on real traces, with a better ratio). Other levels use
//! miniz_oxide's deflate core with cheap cuts: instead of resetting the compressor for every
//! member (which clears ~470 KB of tables), each member's data ends with a full flush
//! (byte-aligned, dictionary forgotten) followed by an empty final stored block that ends
//! this member's deflate stream; the next member continues from that clean state.

use miniz_oxide::deflate::core::{
    compress, create_comp_flags_from_zip_params, CompressorOxide, TDEFLFlush, TDEFLStatus,
};

use crate::deflate::FastDeflate;

const HEADER: [u8; 10] = [0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0x03];

pub struct GzipWriter {
    engine: Engine,
}

enum Engine {
    Fast(Box<FastDeflate>),
    Miniz {
        comp: Box<CompressorOxide>,
        /// Deflate output, zeroed only when it grows (never per member).
        scratch: Vec<u8>,
        /// A compression call failed: reset before the next member.
        broken: bool,
    },
}

/// An empty stored block with BFINAL set: ends a byte-aligned deflate stream.
const FINAL_EMPTY_BLOCK: [u8; 5] = [0x01, 0x00, 0x00, 0xff, 0xff];

impl GzipWriter {
    /// `level` 0 (stored) to 10; 1 is the fast JSON-lines encoder.
    pub fn new(level: u8) -> GzipWriter {
        let engine = if level == 1 {
            Engine::Fast(Box::default())
        } else {
            let flags = create_comp_flags_from_zip_params(level.min(10) as i32, -15, 0);
            Engine::Miniz {
                comp: Box::new(CompressorOxide::new(flags)),
                scratch: Vec::new(),
                broken: false,
            }
        };
        GzipWriter { engine }
    }

    /// Appends one complete gzip member holding `input` to `out`.
    pub fn member(&mut self, input: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(&HEADER);
        match &mut self.engine {
            Engine::Fast(f) => f.compress(input, out),
            Engine::Miniz {
                comp,
                scratch,
                broken,
            } => miniz_member(comp, scratch, broken, input, out),
        }
        let crc = crc32fast::hash(input);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&(input.len() as u32).to_le_bytes());
    }

    /// Releases the miniz scratch buffer if it grew past `keep` bytes.
    pub fn trim(&mut self, keep: usize) {
        if let Engine::Miniz { scratch, .. } = &mut self.engine {
            if scratch.len() > keep {
                *scratch = Vec::new();
            }
        }
    }
}

fn miniz_member(
    comp: &mut CompressorOxide,
    scratch: &mut Vec<u8>,
    broken: &mut bool,
    input: &[u8],
    out: &mut Vec<u8>,
) {
    if *broken {
        comp.reset();
        *broken = false;
    }
    // Deflate never grows data by more than ~0.1% plus a few bytes per block.
    let bound = input.len() + input.len() / 64 + 1024;
    if scratch.len() < bound {
        scratch.resize(bound, 0);
    }
    let mut consumed = 0;
    loop {
        let (status, n_in, n_out) = compress(comp, &input[consumed..], scratch, TDEFLFlush::Full);
        consumed += n_in;
        out.extend_from_slice(&scratch[..n_out]);
        match status {
            // Done: all input taken and the flush fit in the buffer.
            TDEFLStatus::Okay if consumed == input.len() && n_out < scratch.len() => break,
            TDEFLStatus::Okay => continue,
            TDEFLStatus::Done => break,
            // Only reachable on misuse; start the next member from a fresh state.
            TDEFLStatus::BadParam | TDEFLStatus::PutBufFailed => {
                *broken = true;
                break;
            }
        }
    }
    out.extend_from_slice(&FINAL_EMPTY_BLOCK);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn gunzip(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(data)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn members_concatenate() {
        for level in [1, 3] {
            members_concatenate_at(level);
        }
    }

    fn members_concatenate_at(level: u8) {
        let mut g = GzipWriter::new(level);
        let mut file = Vec::new();
        let a: Vec<u8> = (0..200_000u32)
            .flat_map(|i| format!("{{\"i\":{i}}}\n").into_bytes())
            .collect();
        g.member(&a, &mut file);
        g.member(b"", &mut file);
        g.member(b"tail\n", &mut file);
        let mut expect = a.clone();
        expect.extend_from_slice(b"tail\n");
        assert_eq!(gunzip(&file), expect);
        assert_eq!(&file[..10], &HEADER);
    }

    #[test]
    fn each_member_decodes_alone_after_cheap_cuts() {
        for level in [1, 2, 6] {
            each_member_decodes_alone(level);
        }
    }

    fn each_member_decodes_alone(level: u8) {
        let mut g = GzipWriter::new(level);
        let line = b"{\"id\":1,\"name\":\"read\",\"cat\":\"POSIX\"}\n".repeat(500);
        let mut members = Vec::new();
        for _ in 0..4 {
            let mut m = Vec::new();
            g.member(&line, &mut m);
            members.push(m);
        }
        for m in &members {
            // Alone: no back-reference into an earlier member.
            let mut d = flate2::read::GzDecoder::new(&m[..]);
            let mut got = Vec::new();
            d.read_to_end(&mut got).unwrap();
            assert_eq!(got, line);
        }
        assert!(members[1].len() < line.len() / 4, "still compressed");
    }

    #[test]
    fn every_level_roundtrips_random_bytes() {
        let mut x = 0x12345678u64;
        let data: Vec<u8> = (0..100_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for level in 0..=10 {
            let mut g = GzipWriter::new(level);
            let mut out = Vec::new();
            g.member(&data, &mut out);
            assert_eq!(gunzip(&out), data, "level {level}");
        }
    }
}
