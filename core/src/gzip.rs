//! Gzip members: a 10-byte header (no name, mtime 0, OS unix), raw deflate, CRC-32 and ISIZE.
//! Members concatenate into a valid multi-member gzip file, and each member decodes alone
//! (nothing refers back into an earlier one).
//!
//! [`GzipWriter::push`] (the tracer's path) keeps a member open across flushes: each push
//! continues its deflate stream and ends with a provisional end (the end of the stream and the
//! trailer so far) that the next push replaces, so the file is complete after every write and
//! a flush of a few lines still compresses against the 32 KiB before it. [`GzipWriter::member`]
//! writes one complete member.
//!
//! Level 1 (the default) uses [`FastDeflate`], our encoder specialised for JSON lines.
//! `benches/record/deflate.md` compares it on real traces with miniz_oxide 1 (what it replaced),
//! zlib-rs 1 and libdeflate 1: ours is 1.4-1.75× miniz 1's speed with 26-35 % fewer bytes
//! (train loop, LD_PRELOAD pread, service); zlib-rs 1 is 0.8-1.0× ours' speed with 42-87 % more
//! bytes; libdeflate 1 is 0.4-0.7× ours' speed with 6-26 % more bytes.
//!
//! Other levels use miniz_oxide's deflate core with cheap cuts: instead of resetting the
//! compressor for every member (which clears ~470 KB of tables), each member's data ends with a
//! full flush (byte-aligned, dictionary forgotten) followed by an empty final stored block that
//! ends this member's deflate stream; the next member continues from that clean state. An open
//! member's pushes end with a sync flush instead (window kept).

use miniz_oxide::deflate::core::{
    compress, create_comp_flags_from_zip_params, CompressorOxide, TDEFLFlush, TDEFLStatus,
};

use crate::deflate::FastDeflate;

const HEADER: [u8; 10] = [0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0x03];

pub struct GzipWriter {
    engine: Engine,
    /// The member that [`GzipWriter::push`] continues, if one is open.
    open: Option<Open>,
}

/// An open member: what its provisional end (written after each push) covers.
struct Open {
    crc: crc32fast::Hasher,
    size: u64,
    /// Bytes at the end of what was handed out that the next push replaces: the end of the
    /// deflate stream (pending bits, empty final block) and the trailer.
    tail: usize,
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

/// Pushes of at least this many bytes start a new member ([`GzipWriter::push`]).
pub const FRESH_AT: usize = 64 * 1024;

/// Most bytes [`GzipWriter::push`] asks to replace (end of stream, trailer).
pub const MAX_REWIND: usize = FINAL_EMPTY_BLOCK.len() + 8;

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
        GzipWriter { engine, open: None }
    }

    /// Appends one complete gzip member holding `input` to `out`. Closes the member that
    /// [`GzipWriter::push`] kept open, if any.
    pub fn member(&mut self, input: &[u8], out: &mut Vec<u8>) {
        self.member_hinted(input, &[], out)
    }

    /// [`GzipWriter::member`] with the deflate encoder's line hints
    /// ([`crate::deflate::FastDeflate::compress_hinted`]; other levels ignore them).
    pub fn member_hinted(&mut self, input: &[u8], hints: &[u64], out: &mut Vec<u8>) {
        self.close();
        out.extend_from_slice(&HEADER);
        match &mut self.engine {
            Engine::Fast(f) => f.compress_hinted(input, hints, out),
            Engine::Miniz {
                comp,
                scratch,
                broken,
            } => miniz_member(comp, scratch, broken, input, out, TDEFLFlush::Full),
        }
        let crc = crc32fast::hash(input);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&(input.len() as u32).to_le_bytes());
    }

    /// Adds `input` to the open member (opening one if none is) and appends to `out` the
    /// bytes that follow what earlier pushes handed out once the last `rewind` (the returned
    /// value) of those bytes are removed. Written that way, the file always ends with a
    /// complete member: each push ends with a provisional end of the deflate stream and the
    /// member's trailer (CRC-32 and ISIZE of everything pushed so far), which the next push
    /// replaces while the deflate stream goes on (its window, up to 32 KiB, reaches into
    /// earlier pushes: a small flush per second compresses against the lines before it).
    ///
    /// The member is closed (the next push opens a new one, `rewind` 0) once it holds
    /// `close_at` bytes or more of input, and before a push of [`FRESH_AT`] bytes or more (a
    /// full buffer at a high event rate: no copy of it behind the window); members are then
    /// independent as with [`GzipWriter::member`].
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>, close_at: usize) -> usize {
        self.push_hinted(input, &[], out, close_at)
    }

    /// [`GzipWriter::push`] with the deflate encoder's line hints (offsets in `input`;
    /// distances may reach into earlier pushes of the open member).
    pub fn push_hinted(
        &mut self,
        input: &[u8],
        hints: &[u64],
        out: &mut Vec<u8>,
        close_at: usize,
    ) -> usize {
        if input.len() >= FRESH_AT {
            // A large push gains little from the window before it, and continuing would copy
            // it behind that window: the open member ends where it stands, a new one starts.
            self.close();
        }
        if self.open.is_none() && input.len() >= close_at {
            // Opened and closed at once (a full buffer): a plain member, no history kept.
            self.member_hinted(input, hints, out);
            return 0;
        }
        let (rewind, mut open) = match self.open.take() {
            Some(o) => (o.tail, o),
            None => {
                out.extend_from_slice(&HEADER);
                let open = Open {
                    crc: crc32fast::Hasher::new(),
                    size: 0,
                    tail: 0,
                };
                (0, open)
            }
        };
        open.crc.update(input);
        open.size += input.len() as u64;
        let closing = open.size >= close_at as u64;
        match &mut self.engine {
            Engine::Fast(f) => {
                f.stream_push_hinted(input, hints, out);
                f.stream_end(out);
                if closing {
                    f.stream_close();
                }
            }
            Engine::Miniz {
                comp,
                scratch,
                broken,
            } => {
                // Sync: byte-aligned, window kept; Full when closing: the next member starts
                // from an empty dictionary.
                let flush = if closing {
                    TDEFLFlush::Full
                } else {
                    TDEFLFlush::Sync
                };
                miniz_member(comp, scratch, broken, input, out, flush);
                if *broken {
                    // The stream cannot go on: this member ends here.
                    open.size = u64::MAX;
                }
            }
        }
        let deflate_end = out.len()
            - match &self.engine {
                Engine::Fast(f) => f.stream_end_len(),
                Engine::Miniz { .. } => FINAL_EMPTY_BLOCK.len(),
            };
        out.extend_from_slice(&open.crc.clone().finalize().to_le_bytes());
        out.extend_from_slice(&(open.size as u32).to_le_bytes());
        open.tail = out.len() - deflate_end;
        if !closing && open.size != u64::MAX {
            self.open = Some(open);
        } else if let Engine::Fast(f) = &mut self.engine {
            f.stream_close();
        }
        rewind
    }

    /// Closes the open member where it stands (its provisional end becomes its end): the
    /// next push starts a new member. For a caller that could not write a push's output.
    pub fn close(&mut self) {
        if self.open.take().is_some() {
            match &mut self.engine {
                Engine::Fast(f) => f.stream_close(),
                Engine::Miniz { broken, .. } => *broken = true,
            }
        }
    }

    /// Releases the scratch buffers if they grew past `keep` bytes.
    pub fn trim(&mut self, keep: usize) {
        match &mut self.engine {
            Engine::Miniz { scratch, .. } => {
                if scratch.len() > keep {
                    *scratch = Vec::new();
                }
            }
            Engine::Fast(f) => f.trim(keep),
        }
    }
}

fn miniz_member(
    comp: &mut CompressorOxide,
    scratch: &mut Vec<u8>,
    broken: &mut bool,
    input: &[u8],
    out: &mut Vec<u8>,
    flush: TDEFLFlush,
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
        let (status, n_in, n_out) = compress(comp, &input[consumed..], scratch, flush);
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
    // Ends the stream here (byte-aligned after the flush); provisional after a sync flush.
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

    /// Applies a push's output to `file` as the sink does (replacing the last `rewind` bytes).
    fn apply(file: &mut Vec<u8>, out: &[u8], rewind: usize) {
        assert!(rewind <= MAX_REWIND && rewind <= file.len());
        file.truncate(file.len() - rewind);
        file.extend_from_slice(out);
    }

    fn trace_lines(n: usize, seed: u64) -> Vec<u8> {
        let mut v = Vec::new();
        let mut ts = 1_796_046_049_369_022u64 + seed;
        for i in 0..n as u64 {
            ts += (i * 7919 + seed) % 1000;
            v.extend_from_slice(
                format!(
                    "{{\"id\":{i},\"name\":\"cpu\",\"cat\":\"sys\",\"type\":7,\"ts\":{ts},\"ph\":2,\"args\":{{\"user_pct\":{}.{}}}}}\n",
                    (i * 31 + seed) % 100,
                    (i * 17) % 10
                )
                .as_bytes(),
            );
        }
        v
    }

    #[test]
    fn every_push_leaves_a_complete_file() {
        for level in [1, 0, 2, 6] {
            let mut g = GzipWriter::new(level);
            let mut file = Vec::new();
            let mut all = Vec::new();
            let mut out = Vec::new();
            let mut x = 1u64;
            for k in 0..300 {
                // Sizes from empty to 70 KB (larger than the window), a few closing members.
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let n = [0, 1, 3, 12, 40][(x >> 60) as usize % 5] + usize::from(k % 97 == 0) * 400;
                let input = trace_lines(n, k);
                out.clear();
                let r = g.push(&input, &mut out, 200_000);
                apply(&mut file, &out, r);
                all.extend_from_slice(&input);
                assert_eq!(gunzip(&file), all, "level {level}, push {k}");
            }
            // A complete member in between, then pushes again.
            g.member(b"alone\n", &mut file);
            all.extend_from_slice(b"alone\n");
            out.clear();
            let r = g.push(b"after\n", &mut out, 1 << 20);
            assert_eq!(r, 0, "member() closed the open member");
            apply(&mut file, &out, r);
            all.extend_from_slice(b"after\n");
            assert_eq!(gunzip(&file), all, "level {level}");
        }
    }

    /// Splits a multi-member file into its members (each a complete gzip stream).
    fn split_members(file: &[u8]) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        let mut pos = 0;
        while pos < file.len() {
            let mut d = flate2::bufread::GzDecoder::new(&file[pos..]);
            d.read_to_end(&mut Vec::new()).unwrap();
            let rest = d.into_inner().len();
            v.push(file[pos..file.len() - rest].to_vec());
            pos = file.len() - rest;
        }
        v
    }

    #[test]
    fn members_close_at_the_size_and_decode_alone() {
        for level in [1, 6] {
            let mut g = GzipWriter::new(level);
            let mut file = Vec::new();
            let mut out = Vec::new();
            let chunk = trace_lines(50, 1);
            let mut rewinds = Vec::new();
            for _ in 0..40 {
                out.clear();
                let r = g.push(&chunk, &mut out, chunk.len() * 10);
                rewinds.push(r);
                apply(&mut file, &out, r);
            }
            // Every 10th push opens a new member.
            for (k, &r) in rewinds.iter().enumerate() {
                assert_eq!(r == 0, k % 10 == 0, "push {k}: rewind {r}");
            }
            let members = split_members(&file);
            assert_eq!(members.len(), 4, "level {level}");
            for m in &members {
                let mut d = flate2::read::GzDecoder::new(&m[..]);
                let mut got = Vec::new();
                d.read_to_end(&mut got).unwrap();
                assert_eq!(got, chunk.repeat(10));
            }
        }
    }

    #[test]
    fn small_pushes_compress_against_earlier_ones() {
        // A daemon's flush per second: a dozen lines, each like one of the second before.
        let ticks: Vec<Vec<u8>> = (0..60).map(|k| trace_lines(12, k)).collect();
        let mut alone = 0;
        let mut g = GzipWriter::new(1);
        for t in &ticks {
            let mut out = Vec::new();
            g.member(t, &mut out);
            alone += out.len();
        }
        let mut file = Vec::new();
        for t in &ticks {
            let mut out = Vec::new();
            let r = g.push(t, &mut out, 1 << 20);
            apply(&mut file, &out, r);
        }
        assert_eq!(gunzip(&file), ticks.concat());
        assert!(
            file.len() * 2 < alone,
            "one open member {} B, a member per push {alone} B",
            file.len()
        );
    }

    #[test]
    fn a_large_push_starts_a_new_member() {
        let mut g = GzipWriter::new(1);
        let mut file = Vec::new();
        let small = trace_lines(20, 3);
        let large = trace_lines(FRESH_AT / 50, 4);
        assert!(large.len() >= FRESH_AT);
        let mut rewinds = Vec::new();
        for input in [&small, &small, &large, &small] {
            let mut out = Vec::new();
            let r = g.push(input, &mut out, 10 << 20);
            rewinds.push(r);
            apply(&mut file, &out, r);
        }
        // small opens, small continues, large closes it and opens its own, small continues.
        assert_eq!(rewinds[0], 0);
        assert!(rewinds[1] > 0);
        assert_eq!(rewinds[2], 0);
        assert!(rewinds[3] > 0);
        assert_eq!(split_members(&file).len(), 2);
        assert_eq!(gunzip(&file), [&small[..], &small, &large, &small].concat());
    }
}
