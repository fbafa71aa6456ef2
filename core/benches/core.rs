//! Microbenchmarks of the core's hot path and of the writer's work per event.
//!
//! The tracer is process-global, so the order is fixed: first what needs tracing off
//! (`disabled/*`), then the pieces that need no tracer (`encode/*`, `compress/*`), then
//! `init` once into a temporary directory and everything that records, then the stall
//! probe and the 1-vs-4-thread scaling figure (printed, not through criterion), then
//! `finalize`. See `README.md` beside this file for what each figure means.

use criterion::{Criterion, Throughput};
use dftracer_core::frontend::hash16;
use dftracer_core::internals::format::{Encoder, Line};
use dftracer_core::internals::gzip::GzipWriter;
use dftracer_core::internals::record::{Pending, Record};
use dftracer_core::{Arg, Config, Layer, Origin, Value};
use std::hint::black_box;
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Events per timed batch in the `burst` benches: 2048 × ≤ 176 bytes (the 4-arg record)
/// stays under half of the default 1 MiB ring, so neither the writer wake-up nor a full ring
/// falls in the batch.
const BURST: u64 = 2048;

/// The benches' line: id `id` of thread 6427, at stream position 0 (no line hint).
fn line(id: u64) -> Line {
    Line {
        id,
        tid: 6427,
        at: 0,
    }
}

fn args4() -> [Arg<'static>; 4] {
    [
        Arg::new("fname", Value::Path(b"/data/train/file_0001.npz")),
        Arg::new("size", Value::UInt(65536)),
        Arg::int("offset", 1 << 20),
        Arg::str("mode", "rb"),
    ]
}

#[inline(always)]
fn record0(i: u64) {
    dftracer_core::complete(Layer::CppApp, b"read", b"POSIX", black_box(i), 10, &[]);
}

#[inline(always)]
fn record4(i: u64, args: &[Arg]) {
    dftracer_core::complete(Layer::CppApp, b"read", b"POSIX", black_box(i), 10, args);
}

fn disabled(c: &mut Criterion) {
    assert!(!dftracer_core::is_enabled(), "must run before init");
    let mut g = c.benchmark_group("disabled");
    g.throughput(Throughput::Elements(1));
    g.bench_function("is_enabled", |b| {
        b.iter(|| black_box(dftracer_core::is_enabled()))
    });
    let args = args4();
    g.bench_function("complete_4args", |b| {
        let mut i = 0u64;
        b.iter(|| {
            i += 1;
            record4(i, &args)
        })
    });
    g.finish();
}

fn one_record(args: &[Arg]) -> Vec<u8> {
    let p = Pending::Complete {
        layer: Layer::CppApp,
        name: b"read",
        cat: b"POSIX",
        ts: 1_795_988_293_894_894,
        dur: 12,
        args,
    };
    let mut buf = vec![0u8; p.len()];
    p.write(&mut buf);
    buf
}

const HHASH: &str = "6882804a826580cd";

fn encode(c: &mut Criterion) {
    let enc = Encoder::new(6427, HHASH, true);
    let fname_hash = hash16(b"/data/train/file_0001.npz");
    let mut g = c.benchmark_group("encode");
    g.throughput(Throughput::Elements(1));
    for (label, args) in [
        ("complete_0args", &[][..]),
        ("complete_4args", &args4()[..]),
    ] {
        let buf = one_record(args);
        let rec = Record::decode(&buf).unwrap();
        let mut out = Vec::with_capacity(1 << 20);
        g.bench_function(label, |b| {
            let mut id = 0u64;
            b.iter(|| {
                if out.len() > (1 << 20) - 1024 {
                    out.clear();
                }
                id += 1;
                // The writer looks paths up in its map; a fixed hash stands in for that.
                enc.complete_uncached(&mut out, line(id), &rec, &mut |_| fname_hash);
            })
        });
    }
    // The whole writer path per event: decode from ring bytes, then encode.
    let buf = one_record(&args4());
    let mut out = Vec::with_capacity(1 << 20);
    g.bench_function("decode_encode_4args", |b| {
        let mut id = 0u64;
        b.iter(|| {
            if out.len() > (1 << 20) - 1024 {
                out.clear();
            }
            id += 1;
            let rec = Record::decode(black_box(&buf)).unwrap();
            enc.complete_uncached(&mut out, line(id), &rec, &mut |_| fname_hash);
        })
    });
    g.finish();
}

/// 1 MiB of JSON lines as the writer produces them (varying ids, timestamps, sizes).
fn typical_json() -> Vec<u8> {
    let enc = Encoder::new(6427, HHASH, true);
    let fname_hash = hash16(b"/data/train/file_0001.npz");
    let mut out = Vec::with_capacity(1 << 20);
    let mut i = 0u64;
    while out.len() < 1 << 20 {
        i += 1;
        let args = [
            Arg::new("fname", Value::Path(b"/data/train/file_0001.npz")),
            Arg::new("size", Value::UInt(4096 * (i % 17))),
            Arg::int("offset", (i * 65536) as i64),
            Arg::str("mode", ["rb", "wb", "wb"][(i % 3) as usize]),
        ];
        let p = Pending::Complete {
            layer: Layer::LibcIo,
            name: [&b"read"[..], b"write", b"open64", b"close"][(i % 4) as usize],
            cat: b"POSIX",
            ts: 1_795_988_293_894_894 + i * 37,
            dur: i % 101,
            args: &args,
        };
        let mut buf = vec![0u8; p.len()];
        p.write(&mut buf);
        let rec = Record::decode(&buf).unwrap();
        enc.complete_uncached(
            &mut out,
            Line {
                id: i,
                tid: 6427 + (i % 4) as u32,
                at: 0,
            },
            &rec,
            &mut |_| fname_hash,
        );
    }
    out.truncate(1 << 20);
    out
}

fn compress(c: &mut Criterion) {
    let input = typical_json();
    let mut g = c.benchmark_group("compress_1MiB_json");
    g.throughput(Throughput::Bytes(input.len() as u64));
    for level in [1u8, 6] {
        let mut gz = GzipWriter::new(level);
        let mut out = Vec::with_capacity(1 << 20);
        gz.member(&input, &mut out);
        eprintln!(
            "compress level {level}: 1 MiB of JSON -> {} bytes (ratio {:.1})",
            out.len(),
            input.len() as f64 / out.len() as f64
        );
        g.bench_function(format!("level_{level}"), |b| {
            b.iter(|| {
                out.clear();
                gz.member(black_box(&input), &mut out);
            })
        });
    }
    g.finish();
}

fn record(c: &mut Criterion) {
    let args = args4();
    let mut g = c.benchmark_group("record");
    g.throughput(Throughput::Elements(1));
    // Hot path only: batches that fit the ring, the ring drained between batches (untimed).
    for (label, n) in [("burst_0args", 0), ("burst_4args", 4)] {
        g.bench_function(label, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let k = left.min(BURST);
                    let t = Instant::now();
                    for i in 0..k {
                        if n == 0 {
                            record0(i)
                        } else {
                            record4(i, &args)
                        }
                    }
                    total += t.elapsed();
                    left -= k;
                    dftracer_core::flush();
                }
                total
            })
        });
    }
    // Realistic call: two clock reads (start, end) around the record.
    g.bench_function("burst_4args_with_clock", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let k = left.min(BURST);
                let t = Instant::now();
                for _ in 0..k {
                    let start = dftracer_core::now();
                    let end = dftracer_core::now();
                    dftracer_core::complete(
                        Layer::CppApp,
                        b"read",
                        b"POSIX",
                        start,
                        end - start,
                        &args,
                    );
                }
                total += t.elapsed();
                left -= k;
                dftracer_core::flush();
            }
            total
        })
    });
    // Sustained: recording without pause, so the cost of getting events out of the ring
    // (writer thread on the other core, or the producer draining its own full ring) counts.
    for (label, n) in [("sustained_0args", 0), ("sustained_4args", 4)] {
        g.bench_function(label, |b| {
            let mut i = 0u64;
            b.iter(|| {
                i += 1;
                if n == 0 {
                    record0(i)
                } else {
                    record4(i, &args)
                }
            })
        });
    }
    g.finish();
}

/// Persistent recording threads: each `run(n)` has every thread record `n` events, and
/// returns the wall time until the last one is done.
struct Pool {
    go: Vec<mpsc::Sender<u64>>,
    done: mpsc::Receiver<()>,
}

impl Pool {
    fn new(threads: usize) -> Pool {
        let (done_tx, done) = mpsc::channel();
        let ready = Arc::new(Barrier::new(threads + 1));
        let go = (0..threads)
            .map(|_| {
                let (tx, rx) = mpsc::channel::<u64>();
                let done_tx = done_tx.clone();
                let ready = ready.clone();
                std::thread::spawn(move || {
                    let args = args4();
                    record4(0, &args); // attach the ring before timing
                    ready.wait();
                    for n in rx {
                        for i in 0..n {
                            record4(i, &args);
                        }
                        done_tx.send(()).unwrap();
                    }
                });
                tx
            })
            .collect();
        ready.wait();
        Pool { go, done }
    }

    /// `per_thread` events per thread in rounds of at most [`BURST`] each, the rings drained
    /// between rounds (untimed): the hot path alone, in parallel.
    fn run_burst(&self, per_thread: u64) -> Duration {
        let mut total = Duration::ZERO;
        let mut left = per_thread;
        while left > 0 {
            let k = left.min(BURST);
            total += self.run(k);
            left -= k;
            dftracer_core::flush();
        }
        total
    }

    fn run(&self, per_thread: u64) -> Duration {
        let t = Instant::now();
        for tx in &self.go {
            tx.send(per_thread).unwrap();
        }
        for _ in &self.go {
            self.done.recv().unwrap();
        }
        t.elapsed()
    }
}

/// Aggregate throughput with 1 and 4 recording threads, as criterion groups and as a printed
/// ratio over a fixed number of events: `(threads, burst events/s, sustained events/s)`.
fn threads(c: &mut Criterion) -> [(usize, f64, f64); 2] {
    let mut rates = [(1, 0.0, 0.0), (4, 0.0, 0.0)];
    let pools: Vec<Pool> = rates.iter().map(|r| Pool::new(r.0)).collect();
    // One criterion iteration = one event, shared out between the threads.
    let group = |c: &mut Criterion, name: &str, run: fn(&Pool, u64) -> Duration| {
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Elements(1));
        for (slot, pool) in rates.iter().zip(&pools) {
            let n = slot.0 as u64;
            g.bench_function(format!("{n}_threads"), |b| {
                b.iter_custom(|iters| run(pool, iters.div_ceil(n)))
            });
        }
        g.finish();
    };
    group(c, "record_threads_burst_4args", Pool::run_burst);
    group(c, "record_threads_sustained_4args", Pool::run);
    // Fixed-size runs for the printed ratios (best of 3, the machine is shared).
    for (slot, pool) in rates.iter_mut().zip(&pools) {
        let n = slot.0 as u64;
        let best = |f: &dyn Fn() -> Duration| (0..3).map(|_| f()).min().unwrap();
        let burst_total = 4_000_000u64;
        slot.1 = burst_total as f64 / best(&|| pool.run_burst(burst_total / n)).as_secs_f64();
        let sustained_total = 4_000_000u64;
        slot.2 = sustained_total as f64 / best(&|| pool.run(sustained_total / n)).as_secs_f64();
    }
    rates
}

/// The longest single `complete` call over `n` events on one thread, with a histogram.
fn stalls(n: u64) {
    let args = args4();
    let mut max = Duration::ZERO;
    let mut over = [0u64; 4]; // > 10 µs, > 100 µs, > 1 ms, > 10 ms
    let mut at = 0;
    let t0 = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        record4(i, &args);
        let d = t.elapsed();
        if d > max {
            max = d;
            at = i;
        }
        for (k, lim) in [10u64, 100, 1000, 10_000].iter().enumerate() {
            if d > Duration::from_micros(*lim) {
                over[k] += 1;
            }
        }
    }
    let wall = t0.elapsed();
    println!(
        "stall probe: {n} events (4 args, 1 thread) in {:.2} s ({:.0} ns/event incl. 2 clock reads); \
         max single call {:.3} ms at event {at}; calls > 10 us: {}, > 100 us: {}, > 1 ms: {}, > 10 ms: {}",
        wall.as_secs_f64(),
        wall.as_nanos() as f64 / n as f64,
        max.as_secs_f64() * 1e3,
        over[0],
        over[1],
        over[2],
        over[3]
    );
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10)
        .configure_from_args();

    disabled(&mut c);
    encode(&mut c);
    compress(&mut c);

    let dir = std::env::temp_dir().join(format!("dftracer-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = Config {
        enable: true,
        log_file: Some(dir.join("bench").to_string_lossy().into_owned()),
        bind_signals: false,
        ..Config::default()
    };
    dftracer_core::init(cfg, Origin::App, None).expect("init");

    record(&mut c);
    let rates = threads(&mut c);
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    for (label, pick) in [("burst", 1), ("sustained", 2)] {
        let r = |i: usize| if pick == 1 { rates[i].1 } else { rates[i].2 };
        println!(
            "scaling ({label}, 4M events, 4 args): 1 thread {:.2} M events/s, 4 threads {:.2} M events/s, ratio {:.2}x on {cores} cores",
            r(0) / 1e6,
            r(1) / 1e6,
            r(1) / r(0),
        );
    }
    let n = std::env::var("STALL_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000_000);
    stalls(n);

    dftracer_core::finalize();
    let s = dftracer_core::stats();
    println!(
        "tracer: {} events written, {} bytes, {} dropped, {} lost, file {:?}",
        s.events, s.bytes, s.dropped, s.lost, s.path
    );
    std::fs::remove_dir_all(&dir).ok();
    c.final_summary();
}
