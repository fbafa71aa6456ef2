//! Deflate encoders on trace lines: ours (`FastDeflate`, the default level 1), miniz_oxide
//! levels 1 and 6 (ours at other levels), zlib-rs 1 and 6, libdeflate 1, 6 and 9. Every
//! encoder runs in this process on the same data, so the figures compare with each other.
//!
//! Two framings, as the tracer writes them:
//! - `members`: independent raw-deflate streams of `DEFLATE_MEMBER` bytes (default 1 MiB, the
//!   default `DFTRACER_WRITE_BUFFER_SIZE`), each from a fresh dictionary.
//! - `pushes`: one stream fed `DEFLATE_PUSH` bytes at a time (default 4 KiB: a low-rate
//!   process or the node service flushing every second), each push ending flushed (ours:
//!   `stream_push`; zlib-rs: `Z_SYNC_FLUSH`; miniz: `TDEFLFlush::Sync`). libdeflate has no
//!   streaming API: not in this framing.
//!
//! Input: the decompressed trace files named in `DEFLATE_INPUT` (comma-separated, e.g. a
//! `zcat` of a real run's `.pfw.gz`), else generated trace lines. Every output is decoded back
//! and compared before anything is timed. Prints one table: MB/s of input (best of 5 rounds of
//! at least 0.2 s) and the ratio.
//!
//! `DEFLATE_INPUT=/tmp/train.pfw cargo bench -p dftracer-core --bench deflate`

use dftracer_core::internals::deflate::{hint, FastDeflate};
use miniz_oxide::deflate::core::{
    compress, create_comp_flags_from_zip_params, CompressorOxide, TDEFLFlush, TDEFLStatus,
};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// xorshift64: the same data on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// JSON lines like the tracer's: POSIX calls (varying name, tid, ts, dur, fd, mostly
/// sequential offsets) and, one line in ten, a Python-layer event.
fn trace_lines(target: usize) -> Vec<u8> {
    let mut r = Rng(0x9E37_79B9_7F4A_7C15);
    let mut v = Vec::with_capacity(target + 512);
    let mut ts = 1_796_000_779_668_786u64;
    let mut off = 0u64;
    let mut id = 0u64;
    while v.len() < target {
        ts += r.next() % 400;
        let tid = 4321 + r.next() % 4;
        let line = if id % 10 == 9 {
            format!(
                "{{\"id\":{id},\"name\":\"train_step\",\"cat\":\"PY_APP\",\"type\":6,\"pid\":4321,\"tid\":{tid},\"ts\":{ts},\"dur\":{},\"ph\":1,\"args\":{{\"hhash\":\"6882804a826580cd\",\"epoch\":3,\"step\":{}}}}}\n",
                r.next() % 100_000,
                id / 10
            )
        } else {
            let name =
                ["pread", "pwrite", "read", "lseek64", "open64", "close"][(r.next() % 6) as usize];
            off = if r.next() & 15 == 0 {
                (r.next() % 100_000) * 4096
            } else {
                off + 4096
            };
            format!(
                "{{\"id\":{id},\"name\":\"{name}\",\"cat\":\"POSIX\",\"type\":3,\"pid\":4321,\"tid\":{tid},\"ts\":{ts},\"dur\":{},\"ph\":1,\"args\":{{\"hhash\":\"6882804a826580cd\",\"fd\":{},\"count\":4096,\"offset\":{off},\"ret\":4096,\"fhash\":\"4ee99768121448fd\"}}}}\n",
                r.next() % 50,
                3 + r.next() % 5
            )
        };
        v.extend_from_slice(line.as_bytes());
        id += 1;
    }
    v
}

/// Cuts `data` into pieces of about `size` bytes ending on a line boundary (as the tracer
/// cuts members and flushes).
fn line_chunks(data: &[u8], size: usize) -> Vec<&[u8]> {
    let mut v = Vec::new();
    let mut s = 0;
    while s < data.len() {
        let mut e = (s + size).min(data.len());
        while e < data.len() && data[e - 1] != b'\n' {
            e += 1;
        }
        v.push(&data[s..e]);
        s = e;
    }
    v
}

/// One encoder: compresses every chunk into `out` (cleared first), as members or pushes.
trait Engine {
    fn name(&self) -> String;
    fn members(&mut self, chunks: &[&[u8]], out: &mut Vec<u8>);
    /// `false`: no streaming API.
    fn pushes(&mut self, chunks: &[&[u8]], out: &mut Vec<u8>) -> bool;
}

struct Ours(Box<FastDeflate>);

impl Engine for Ours {
    fn name(&self) -> String {
        "ours (FastDeflate)".into()
    }
    fn members(&mut self, chunks: &[&[u8]], out: &mut Vec<u8>) {
        out.clear();
        for c in chunks {
            self.0.compress(c, out);
        }
    }
    fn pushes(&mut self, chunks: &[&[u8]], out: &mut Vec<u8>) -> bool {
        out.clear();
        self.0.stream_close();
        for c in chunks {
            self.0.stream_push(c, out);
        }
        self.0.stream_end(out);
        true
    }
}

/// Ours with the line hints the tracer's writer gives (each line of an event names the
/// previous line of its kind: name, category, thread, with a file hash or not; in pushes the
/// distance may reach into earlier pushes). The hints are computed once per framing, outside
/// the timed loop: the writer makes them while rendering (a template remembers its last line).
struct OursHinted {
    d: Box<FastDeflate>,
    /// Per framing (chunk count), the hints of each chunk.
    hints: std::collections::HashMap<(usize, bool), Vec<Vec<u64>>>,
}

fn field<'a>(line: &'a [u8], key: &[u8]) -> &'a [u8] {
    let Some(i) = line.windows(key.len()).position(|w| w == key) else {
        return b"";
    };
    let rest = &line[i + key.len()..];
    &rest[..rest.iter().position(|&b| b == b',').unwrap_or(rest.len())]
}

fn writer_hints(chunks: &[&[u8]], across: bool) -> Vec<Vec<u64>> {
    let mut last: std::collections::HashMap<Vec<u8>, usize> = Default::default();
    let mut base = 0;
    chunks
        .iter()
        .map(|c| {
            if !across {
                last.clear();
                base = 0;
            }
            let mut v = Vec::new();
            let mut at = 0;
            for line in c.split_inclusive(|&b| b == b'\n') {
                if line.starts_with(b"{\"id\":") {
                    let mut key = field(line, b"\"name\":").to_vec();
                    key.extend_from_slice(field(line, b"\"cat\":"));
                    key.extend_from_slice(field(line, b"\"tid\":"));
                    key.push(field(line, b"\"fhash\":").is_empty() as u8);
                    let pos = base + at;
                    if let Some(h) = last.get(&key).and_then(|&p| hint(at, pos - p)) {
                        v.push(h);
                    }
                    last.insert(key, pos);
                }
                at += line.len();
            }
            base += c.len();
            v
        })
        .collect()
}

impl Engine for OursHinted {
    fn name(&self) -> String {
        "ours, writer's hints".into()
    }
    fn members(&mut self, chunks: &[&[u8]], out: &mut Vec<u8>) {
        let h = self
            .hints
            .entry((chunks.len(), false))
            .or_insert_with(|| writer_hints(chunks, false));
        out.clear();
        for (c, h) in chunks.iter().zip(h.iter()) {
            self.d.compress_hinted(c, h, out);
        }
    }
    fn pushes(&mut self, chunks: &[&[u8]], out: &mut Vec<u8>) -> bool {
        let h = self
            .hints
            .entry((chunks.len(), true))
            .or_insert_with(|| writer_hints(chunks, true));
        out.clear();
        self.d.stream_close();
        for (c, h) in chunks.iter().zip(h.iter()) {
            self.d.stream_push_hinted(c, h, out);
        }
        self.d.stream_end(out);
        true
    }
}

struct Miniz {
    level: u8,
    comp: Box<CompressorOxide>,
    buf: Vec<u8>,
}

impl Miniz {
    fn new(level: u8) -> Miniz {
        let flags = create_comp_flags_from_zip_params(level as i32, -15, 0);
        Miniz {
            level,
            comp: Box::new(CompressorOxide::new(flags)),
            buf: Vec::new(),
        }
    }

    fn run(&mut self, c: &[u8], out: &mut Vec<u8>, flush: TDEFLFlush) {
        let need = c.len() + c.len() / 64 + 1024;
        if self.buf.len() < need {
            self.buf.resize(need, 0);
        }
        let (status, n_in, n_out) = compress(&mut self.comp, c, &mut self.buf, flush);
        assert!(!matches!(
            status,
            TDEFLStatus::BadParam | TDEFLStatus::PutBufFailed
        ));
        assert_eq!(n_in, c.len());
        out.extend_from_slice(&self.buf[..n_out]);
    }
}

impl Engine for Miniz {
    fn name(&self) -> String {
        format!("miniz_oxide {}", self.level)
    }
    fn members(&mut self, chunks: &[&[u8]], out: &mut Vec<u8>) {
        out.clear();
        for c in chunks {
            self.comp.reset();
            self.run(c, out, TDEFLFlush::Finish);
        }
    }
    fn pushes(&mut self, chunks: &[&[u8]], out: &mut Vec<u8>) -> bool {
        out.clear();
        self.comp.reset();
        for c in chunks {
            self.run(c, out, TDEFLFlush::Sync);
        }
        self.run(&[], out, TDEFLFlush::Finish);
        true
    }
}

struct Zlib {
    level: i32,
    z: zlib_rs::Deflate,
    buf: Vec<u8>,
}

impl Zlib {
    fn new(level: i32) -> Zlib {
        Zlib {
            level,
            z: zlib_rs::Deflate::new(level, false, 15),
            buf: Vec::new(),
        }
    }

    fn run(&mut self, c: &[u8], out: &mut Vec<u8>, flush: zlib_rs::DeflateFlush) {
        let need = c.len() + c.len() / 64 + 1024;
        if self.buf.len() < need {
            self.buf.resize(need, 0);
        }
        let before = (self.z.total_in(), self.z.total_out());
        self.z.compress(c, &mut self.buf, flush).expect("zlib-rs");
        assert_eq!(self.z.total_in() - before.0, c.len() as u64);
        let n = (self.z.total_out() - before.1) as usize;
        out.extend_from_slice(&self.buf[..n]);
    }
}

impl Engine for Zlib {
    fn name(&self) -> String {
        format!("zlib-rs {}", self.level)
    }
    fn members(&mut self, chunks: &[&[u8]], out: &mut Vec<u8>) {
        out.clear();
        for c in chunks {
            self.z.reset();
            self.run(c, out, zlib_rs::DeflateFlush::Finish);
        }
    }
    fn pushes(&mut self, chunks: &[&[u8]], out: &mut Vec<u8>) -> bool {
        out.clear();
        self.z.reset();
        for c in chunks {
            self.run(c, out, zlib_rs::DeflateFlush::SyncFlush);
        }
        self.run(&[], out, zlib_rs::DeflateFlush::Finish);
        true
    }
}

struct Libdeflate {
    level: i32,
    c: libdeflater::Compressor,
}

impl Engine for Libdeflate {
    fn name(&self) -> String {
        format!("libdeflate {}", self.level)
    }
    fn members(&mut self, chunks: &[&[u8]], out: &mut Vec<u8>) {
        out.clear();
        for c in chunks {
            let start = out.len();
            out.resize(start + self.c.deflate_compress_bound(c.len()), 0);
            let n = self
                .c
                .deflate_compress(c, &mut out[start..])
                .expect("libdeflate");
            out.truncate(start + n);
        }
    }
    fn pushes(&mut self, _: &[&[u8]], _: &mut Vec<u8>) -> bool {
        false
    }
}

/// Decodes concatenated raw-deflate streams (each ends with a BFINAL block).
fn inflate_all(mut data: &[u8]) -> Vec<u8> {
    use miniz_oxide::inflate::core::{decompress, inflate_flags, DecompressorOxide};
    use miniz_oxide::inflate::TINFLStatus;
    let mut all = Vec::new();
    while !data.is_empty() {
        let mut d = DecompressorOxide::new();
        let mut buf = vec![0u8; 1 << 16];
        let mut pos = 0;
        loop {
            if pos == buf.len() {
                buf.resize(buf.len() * 2, 0);
            }
            let (st, n_in, n_out) = decompress(
                &mut d,
                data,
                &mut buf,
                pos,
                inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF,
            );
            data = &data[n_in..];
            pos += n_out;
            match st {
                TINFLStatus::Done => break,
                TINFLStatus::HasMoreOutput => continue,
                s => panic!("inflate: {s:?}"),
            }
        }
        all.extend_from_slice(&buf[..pos]);
    }
    all
}

/// Best MB/s of 5 rounds, each at least 0.2 s.
fn speed(bytes: usize, mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        let mut n = 0u32;
        while n == 0 || t.elapsed() < Duration::from_millis(200) {
            f();
            n += 1;
        }
        best = best.min(t.elapsed().as_secs_f64() / n as f64);
    }
    bytes as f64 / best / 1e6
}

fn env_usize(k: &str, default: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // `cargo bench` passes `--bench`; a criterion-style filter is not supported here.
    let (label, data) = match std::env::var("DEFLATE_INPUT") {
        Ok(files) => {
            let mut v = Vec::new();
            for f in files.split(',') {
                v.extend(std::fs::read(f).unwrap_or_else(|e| panic!("{f}: {e}")));
            }
            (files, v)
        }
        Err(_) => ("generated trace lines".to_string(), trace_lines(20 << 20)),
    };
    let member = env_usize("DEFLATE_MEMBER", 1 << 20);
    let push = env_usize("DEFLATE_PUSH", 4 << 10);
    let lines = data.iter().filter(|&&b| b == b'\n').count();
    println!(
        "input: {label}: {:.1} MB, {lines} lines ({:.0} B/line); members of {} KiB, pushes of {} KiB",
        data.len() as f64 / 1e6,
        data.len() as f64 / lines.max(1) as f64,
        member >> 10,
        push >> 10
    );
    let members = line_chunks(&data, member);
    let pushes = line_chunks(&data, push);

    let mut engines: Vec<Box<dyn Engine>> = vec![
        Box::new(Ours(Box::default())),
        Box::new(OursHinted {
            d: Box::default(),
            hints: Default::default(),
        }),
        Box::new(Miniz::new(1)),
        Box::new(Miniz::new(6)),
        Box::new(Zlib::new(1)),
        Box::new(Zlib::new(6)),
    ];
    for level in [1, 6, 9] {
        engines.push(Box::new(Libdeflate {
            level,
            c: libdeflater::Compressor::new(libdeflater::CompressionLvl::new(level).unwrap()),
        }));
    }

    println!(
        "{:<20} {:>11} {:>8} {:>9} {:>11} {:>8} {:>9}",
        "encoder", "members MB/s", "ratio", "B/line", "pushes MB/s", "ratio", "B/line"
    );
    let mut out = Vec::with_capacity(data.len());
    for e in engines.iter_mut() {
        e.members(&members, &mut out);
        assert!(
            inflate_all(&out) == data,
            "{}: members round trip",
            e.name()
        );
        let m_len = out.len();
        let m_speed = speed(data.len(), || {
            e.members(black_box(&members), &mut out);
        });
        let p = if e.pushes(&pushes, &mut out) {
            assert!(inflate_all(&out) == data, "{}: pushes round trip", e.name());
            let p_len = out.len();
            let s = speed(data.len(), || {
                e.pushes(black_box(&pushes), &mut out);
            });
            format!(
                "{:>11.0} {:>8.2} {:>9.2}",
                s,
                data.len() as f64 / p_len as f64,
                p_len as f64 / lines as f64
            )
        } else {
            format!("{:>11} {:>8} {:>9}", "-", "-", "-")
        };
        println!(
            "{:<20} {:>11.0} {:>8.2} {:>9.2} {p}",
            e.name(),
            m_speed,
            data.len() as f64 / m_len as f64,
            m_len as f64 / lines as f64,
        );
    }
}
