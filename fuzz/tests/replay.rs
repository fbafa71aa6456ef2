//! The fuzz targets on the stable toolchain: every committed seed in `seeds/<target>/`, then
//! `FUZZ_ITERS` (default 20,000) inputs per target from a fixed-seed PRNG, half fresh random
//! bytes and half mutations of the seeds. Deterministic: a failure reproduces by rerunning.
//! A failing input is saved under `fuzz/artifacts/replay/` and can be fed to the
//! coverage-guided fuzzer (`cargo +nightly fuzz run <target> <file>`).
//!
//! Findings of the coverage-guided runs are the `regression_*` tests at the end.

use dftracer_fuzz as fz;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::PathBuf;

type Target = fn(&[u8]);

fn iters() -> usize {
    std::env::var("FUZZ_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// xorshift64*: small, fast, and the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn seeds(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let d = dir().join("seeds").join(target);
    let mut out: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&d)
        .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let data = std::fs::read(&p).unwrap();
            (p, data)
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no seeds in {}", d.display());
    out
}

/// One mutation step of a seed (what libFuzzer does, without the coverage feedback).
fn mutate(rng: &mut Rng, mut v: Vec<u8>, other: &[u8]) -> Vec<u8> {
    for _ in 0..1 + rng.below(4) {
        let len = v.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = rng.below(len);
                v[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                v[i] = [0, 1, 0x7f, 0x80, 0xef, 0xf0, 0xff, b'"', b'\\', b'\n'][rng.below(10)];
            }
            2 => {
                let i = rng.below(len + 1);
                let n = 1 + rng.below(16);
                let ins = rng.bytes(n);
                v.splice(i..i, ins);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(32));
                v.drain(i..i + n);
            }
            4 => v.truncate(rng.below(len + 1)),
            5 if !other.is_empty() => {
                // Splice: our head, the other seed's tail.
                let cut = rng.below(len + 1);
                let from = rng.below(other.len());
                v.truncate(cut);
                v.extend_from_slice(&other[from..]);
            }
            _ if len >= 8 => {
                // An interesting 64-bit value somewhere.
                let i = rng.below(len - 7);
                let x: u64 = [
                    0,
                    u64::MAX,
                    i64::MIN as u64,
                    0x7ff8_0000_0000_0000,
                    4096,
                    4097,
                ][rng.below(6)];
                v[i..i + 8].copy_from_slice(&x.to_le_bytes());
            }
            _ => v.push(rng.next() as u8),
        }
    }
    v
}

/// Runs `f` on `data`; on a panic saves the input and says how to reproduce it.
fn run_one(target: &str, f: Target, data: &[u8], what: &str) {
    if let Err(e) = catch_unwind(AssertUnwindSafe(|| f(data))) {
        let d = dir().join("artifacts").join("replay");
        let _ = std::fs::create_dir_all(&d);
        let p = d.join(format!("{target}-{}", what.replace(['/', ' '], "_")));
        let _ = std::fs::write(&p, data);
        eprintln!(
            "\n{target} failed on {what} ({} bytes), saved to {}\n  reproduce: cargo +nightly fuzz run {target} {}\n",
            data.len(),
            p.display(),
            p.display()
        );
        resume_unwind(e);
    }
}

fn replay(target: &str, f: Target) {
    let corpus = seeds(target);
    for (p, data) in &corpus {
        run_one(target, f, data, &p.file_name().unwrap().to_string_lossy());
    }
    let mut rng =
        Rng(0x9E37_79B9_7F4A_7C15 ^ target.len() as u64 ^ (target.as_bytes()[0] as u64) << 32);
    let n = iters();
    for i in 0..n {
        let data = if i % 2 == 0 {
            // Mostly short inputs, sometimes long ones.
            let len = if rng.below(8) == 0 {
                rng.below(4096)
            } else {
                rng.below(96)
            };
            rng.bytes(len)
        } else {
            let a = &corpus[rng.below(corpus.len())].1;
            let b = &corpus[rng.below(corpus.len())].1;
            mutate(&mut rng, a.clone(), b)
        };
        run_one(target, f, &data, &format!("iteration {i}"));
    }
    eprintln!(
        "{target}: {} seeds + {n} generated inputs passed",
        corpus.len()
    );
}

#[test]
fn json_encoder() {
    replay("json_encoder", fz::json_encoder);
}

#[test]
fn gzip_member() {
    replay("gzip_member", fz::gzip_member);
}

#[test]
fn ring_model() {
    replay("ring_model", fz::ring_model);
}

#[test]
fn config() {
    replay("config", fz::config);
}

#[test]
fn record_decode() {
    replay("record_decode", fz::record_decode);
}

#[test]
fn proc_parsers() {
    replay("proc_parsers", fz::proc_parsers);
}

#[test]
fn fast_deflate() {
    replay("fast_deflate", fz::fast_deflate);
}

/// The seeds built by `dftracer_fuzz::seed` are the committed files (set
/// DFTRACER_WRITE_SEEDS=1 to write them after changing a builder).
#[test]
fn seeds_are_committed() {
    let write = std::env::var_os("DFTRACER_WRITE_SEEDS").is_some();
    for (target, name, data) in fz::seed::all() {
        let p = dir().join("seeds").join(target).join(name);
        if write {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, &data).unwrap();
        }
        let on_disk = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        // record_decode seeds are core's internal ring format, which core may change at any
        // time; a stale one is still a good arbitrary input, so only its presence is checked.
        if target != "record_decode" {
            assert!(on_disk == data, "{} differs from its builder", p.display());
        }
    }
}

// Findings ------------------------------------------------------------------------------------

/// Found by the replay (mutated seed, `DFTRACER_COMPRESSION_LEVEL="4294967296"`): the
/// integer knob was cast with `as u8`, so 256 became level 0 (stored, no compression) instead
/// of being clamped to 10 like 11..=255.
#[test]
fn regression_compression_level_wraps_modulo_256() {
    use fz::seed::{knob, Builder};
    for v in ["256", "4294967296"] {
        let input = Builder::new()
            .u8(0)
            .u8(1)
            .u8(knob("DFTRACER_COMPRESSION_LEVEL"))
            .u8(255)
            .blob(v.as_bytes())
            .finish();
        fz::config(&input);
    }
    let (cfg, _, _) = dftracer_core::config::resolve(|k| {
        (k == "DFTRACER_COMPRESSION_LEVEL").then(|| "256".to_string())
    });
    assert_eq!(cfg.compression_level, 10);
}
