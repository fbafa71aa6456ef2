//! `FastDeflate` against miniz_oxide level 1 on ~20 MB of generated trace lines, compressed in
//! 128 KiB chunks (the tracer's member size). Both run in the same process on the same data;
//! criterion reports MiB/s, and the compression ratios are printed before the measurements.
//!
//! `cargo bench -p dftracer-core --bench deflate`

use criterion::{Criterion, Throughput};
use dftracer_core::deflate::FastDeflate;
use miniz_oxide::deflate::core::{
    compress, create_comp_flags_from_zip_params, CompressorOxide, TDEFLFlush, TDEFLStatus,
};
use std::hint::black_box;
use std::time::Duration;

const CHUNK: usize = 128 << 10;

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

fn fast_all(d: &mut FastDeflate, data: &[u8], out: &mut Vec<u8>) -> usize {
    out.clear();
    for part in data.chunks(CHUNK) {
        d.compress(part, out);
    }
    out.len()
}

/// Level 1 raw deflate of each chunk, as a complete stream from a reset compressor.
fn miniz_all(c: &mut CompressorOxide, data: &[u8], buf: &mut [u8]) -> usize {
    let mut total = 0;
    for part in data.chunks(CHUNK) {
        c.reset();
        let (status, n_in, n_out) = compress(c, part, buf, TDEFLFlush::Finish);
        assert!(matches!(status, TDEFLStatus::Done) && n_in == part.len());
        total += n_out;
    }
    total
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5))
        .sample_size(10)
        .configure_from_args();

    let data = trace_lines(20 << 20);
    let lines = data.iter().filter(|&&b| b == b'\n').count();
    let mut fast = FastDeflate::new();
    let mut out = Vec::with_capacity(data.len());
    let mut miniz = Box::new(CompressorOxide::new(create_comp_flags_from_zip_params(
        1, -15, 0,
    )));
    let mut buf = vec![0u8; CHUNK * 2 + 1024];

    // Ratios, and a check that the fast output decodes.
    let fast_len = fast_all(&mut fast, &data, &mut out);
    let miniz_len = miniz_all(&mut miniz, &data, &mut buf);
    let mut pos = 0;
    for part in data.chunks(CHUNK).take(8) {
        let mut one = Vec::new();
        fast.compress(part, &mut one);
        let back = miniz_oxide::inflate::decompress_to_vec(&one).expect("valid deflate");
        assert!(back == part, "round trip at {pos}");
        pos += part.len();
    }
    println!(
        "deflate input: {:.1} MiB, {lines} lines ({:.0} bytes/line), {} KiB chunks",
        data.len() as f64 / 1048576.0,
        data.len() as f64 / lines as f64,
        CHUNK >> 10
    );
    println!(
        "ratio: fast {:.2}x, miniz level 1 {:.2}x",
        data.len() as f64 / fast_len as f64,
        data.len() as f64 / miniz_len as f64
    );

    let mut g = c.benchmark_group("deflate");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("fast", |b| {
        b.iter(|| black_box(fast_all(&mut fast, &data, &mut out)))
    });
    g.bench_function("miniz_level1", |b| {
        b.iter(|| black_box(miniz_all(&mut miniz, &data, &mut buf)))
    });
    g.finish();

    // Many small members on one compressor: the per-call cost (no table clearing).
    let line = &data[..data.iter().position(|&b| b == b'\n').unwrap() + 1];
    let mut g = c.benchmark_group("deflate_small");
    g.throughput(Throughput::Bytes(line.len() as u64));
    g.bench_function("fast_one_line", |b| {
        b.iter(|| {
            out.clear();
            fast.compress(black_box(line), &mut out);
            out.len()
        })
    });
    g.finish();

    c.final_summary();
}
