//! Fuzz harnesses of `dftracer-core`, as plain functions over `&[u8]`.
//!
//! Each `pub fn <target>(data: &[u8])` panics when the core breaks its contract and returns
//! normally otherwise. The same function is called by libFuzzer (`fuzz_targets/<target>.rs`,
//! coverage-guided, `cargo +nightly fuzz run <target>`) and by the stable replay
//! (`tests/replay.rs`: the committed seeds in `seeds/<target>/` plus bounded random and
//! mutated inputs). Findings become named tests in `tests/replay.rs`.
//!
//! Inputs are decoded by [`Input`], which never fails: a short input reads as zeros, so every
//! byte string is a valid test case. [`seed`] builds inputs in the same layouts, for the
//! committed corpus and the regression tests.

use dftracer_core::config::{self, Config, KNOBS, MAX_RING_SIZE, MIN_RING_SIZE};
use dftracer_core::internals::event::{self, Arg, Layer, Value, MAX_ARGS, MAX_KEY, MAX_STR};
use dftracer_core::internals::format::{self, Encoder, Line};
use dftracer_core::internals::gzip::GzipWriter;
use dftracer_core::internals::hash::{hash16, hash_str};
use dftracer_core::internals::record::{Pending, Record, KIND_COMPLETE, KIND_COUNTER, KIND_META, MAX_RECORD};
use dftracer_core::internals::ring::Ring;
use std::collections::{HashMap, VecDeque};
use std::io::Read;

pub mod seed;
mod tree;

pub use tree::J;

/// The hhash every encoded line carries (the hash of "vm", as in the reference's samples).
const HHASH: &str = "6882804a826580cd";

/// Reads a fuzz input front to back; past the end every read returns zeros / empty slices.
pub struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data, pos: 0 }
    }
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let end = self.pos.saturating_add(n).min(self.data.len());
        let s = &self.data[self.pos.min(end)..end];
        self.pos = end;
        s
    }
    pub fn rest(&mut self) -> &'a [u8] {
        self.take(usize::MAX)
    }
    pub fn u8(&mut self) -> u8 {
        self.take(1).first().copied().unwrap_or(0)
    }
    fn le<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        let s = self.take(N);
        b[..s.len()].copy_from_slice(s);
        b
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.le())
    }
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.le())
    }

    /// A byte string: a length byte below 0xF0 takes that many raw bytes; 0xF0.. reads a u16
    /// length and a 1-8 byte pattern repeated to that length (long strings from short inputs,
    /// so clipping at MAX_STR/MAX_KEY is reached). `budget` caps the bytes expanded per input.
    pub fn blob(&mut self, budget: &mut usize) -> Vec<u8> {
        let b = self.u8();
        if b < 0xF0 {
            return self.take(b as usize).to_vec();
        }
        let n = (self.u16() as usize).min(*budget);
        let plen = 1 + (self.u8() % 8) as usize;
        let pat = self.take(plen);
        let pat: &[u8] = if pat.is_empty() { b"x" } else { pat };
        *budget -= n;
        pat.iter().copied().cycle().take(n).collect()
    }
}

/// What the encoder must print for a string `s` clipped at `max`: the lossy UTF-8 of the kept
/// bytes, plus the truncation marker with the original length when anything was cut.
pub fn expected_text(s: &[u8], max: usize) -> String {
    let kept = event::clip(s, max);
    let mut out = String::from_utf8_lossy(kept).into_owned();
    if kept.len() < s.len() {
        out.push_str(&format!("...[truncated, {} bytes]", s.len()));
    }
    out
}

/// Parses one encoded line (without its `\n`): must be UTF-8, must parse with serde_json,
/// and is returned as an ordered tree that keeps duplicate keys.
pub fn parse_line(line: &[u8]) -> J {
    let text = match std::str::from_utf8(line) {
        Ok(t) => t,
        Err(e) => panic!(
            "line is not UTF-8 ({e}): {:?}",
            String::from_utf8_lossy(line)
        ),
    };
    if let Err(e) = serde_json::from_str::<serde_json::Value>(text) {
        panic!("line is not JSON ({e}): {text}");
    }
    serde_json::from_str::<J>(text).expect("parsed as Value but not as J")
}

/// Splits encoder output into lines: it must end in `\n` and hold exactly `n` lines.
fn lines(out: &[u8], n: usize) -> Vec<&[u8]> {
    assert!(
        out.last() == Some(&b'\n'),
        "output does not end in a newline"
    );
    let ls: Vec<&[u8]> = out[..out.len() - 1].split(|&b| b == b'\n').collect();
    assert_eq!(
        ls.len(),
        n,
        "a raw newline inside a line: {:?}",
        String::from_utf8_lossy(out)
    );
    ls
}

// ---------------------------------------------------------------------------------------------
// json_encoder

#[derive(Debug, Clone)]
pub enum OwnedValue {
    Int(i64),
    UInt(u64),
    Float(f64),
    Bool(bool),
    Str(Vec<u8>),
    Path(Vec<u8>),
}

#[derive(Debug, Clone)]
pub struct OwnedEvent {
    /// 0 complete, 1 counter, 2 meta.
    pub kind: u8,
    pub layer: Layer,
    pub ts: u64,
    pub dur: u64,
    pub name: Vec<u8>,
    /// Category; the key for meta.
    pub cat: Vec<u8>,
    /// Meta only.
    pub value: Vec<u8>,
    pub args: Vec<(Vec<u8>, OwnedValue)>,
}

impl OwnedEvent {
    fn read(inp: &mut Input, budget: &mut usize) -> OwnedEvent {
        let k = inp.u8();
        let kind = k % 3;
        let layer = Layer::from_u8((k >> 2) % 16);
        let ts = inp.u64();
        let dur = if kind == 0 { inp.u64() } else { 0 };
        let name = inp.blob(budget);
        let cat = inp.blob(budget);
        let value = if kind == 2 {
            inp.blob(budget)
        } else {
            Vec::new()
        };
        let mut args = Vec::new();
        if kind != 2 {
            let n = inp.u8() % (MAX_ARGS as u8 + 9);
            for _ in 0..n {
                if inp.is_empty() {
                    break;
                }
                let key = inp.blob(budget);
                let v = match inp.u8() % 6 {
                    0 => OwnedValue::Int(inp.u64() as i64),
                    1 => OwnedValue::UInt(inp.u64()),
                    2 => OwnedValue::Float(f64::from_bits(inp.u64())),
                    3 => OwnedValue::Bool(inp.u8() & 1 == 1),
                    4 => OwnedValue::Str(inp.blob(budget)),
                    _ => OwnedValue::Path(inp.blob(budget)),
                };
                args.push((key, v));
            }
        }
        OwnedEvent {
            kind,
            layer,
            ts,
            dur,
            name,
            cat,
            value,
            args,
        }
    }

    fn borrowed_args(&self) -> Vec<Arg<'_>> {
        self.args
            .iter()
            .map(|(k, v)| Arg {
                key: k,
                value: match v {
                    OwnedValue::Int(i) => Value::Int(*i),
                    OwnedValue::UInt(u) => Value::UInt(*u),
                    OwnedValue::Float(f) => Value::Float(*f),
                    OwnedValue::Bool(b) => Value::Bool(*b),
                    OwnedValue::Str(s) => Value::Str(s),
                    OwnedValue::Path(p) => Value::Path(p),
                },
            })
            .collect()
    }
}

fn int_of(j: &J) -> Option<i128> {
    match j {
        J::U(u) => Some(*u as i128),
        J::I(i) => Some(*i as i128),
        _ => None,
    }
}

fn expect_args(got: &J, ev: &OwnedEvent) {
    let J::O(entries) = got else {
        panic!("args is not an object: {got:?}")
    };
    let mut it = entries.iter();
    assert_eq!(
        it.next(),
        Some(&("hhash".to_string(), J::S(HHASH.into()))),
        "hhash first"
    );
    for (k, v) in ev.args.iter().take(MAX_ARGS) {
        let (gk, gv) = it.next().expect("an arg is missing");
        let want_key = if k == b"hhash" {
            "user_hhash".to_string()
        } else {
            expected_text(k, MAX_KEY)
        };
        assert_eq!(gk, &want_key, "arg key");
        match v {
            OwnedValue::Int(i) => assert_eq!(int_of(gv), Some(*i as i128), "int arg {gk}"),
            OwnedValue::UInt(u) => assert_eq!(int_of(gv), Some(*u as i128), "uint arg {gk}"),
            OwnedValue::Float(f) if f.is_finite() => match gv {
                J::F(g) => assert_eq!(g.to_bits(), f.to_bits(), "float arg {gk}: {f:?} -> {g:?}"),
                other => panic!("float arg {gk}: {f:?} written as {other:?}"),
            },
            OwnedValue::Float(_) => assert_eq!(gv, &J::Null, "non-finite float arg {gk}"),
            OwnedValue::Bool(b) => assert_eq!(gv, &J::Bool(*b)),
            OwnedValue::Str(s) => assert_eq!(gv, &J::S(expected_text(s, MAX_STR)), "str arg"),
            OwnedValue::Path(p) => {
                let h = hash16(event::clip(p, MAX_STR));
                assert_eq!(gv, &J::S(hash_str(&h).into()), "path arg {gk}");
            }
        }
    }
    if ev.args.len() > MAX_ARGS {
        let dropped = (ev.args.len() - MAX_ARGS).min(255) as u64;
        assert_eq!(
            it.next(),
            Some(&("dft_args_dropped".to_string(), J::U(dropped))),
            "dropped-args count"
        );
    }
    assert_eq!(it.next(), None, "extra args");
}

fn field<'j>(obj: &'j [(String, J)], i: usize, key: &str) -> &'j J {
    match obj.get(i) {
        Some((k, v)) if k == key => v,
        other => panic!("field {i} should be {key:?}, got {other:?}"),
    }
}

/// Encodes one event through the real path (Pending → ring bytes → Record → JSON) and checks
/// the line against the event.
fn check_event(ev: &OwnedEvent, metadata: bool, id: u64, tid: u32, pid: u32, all: &mut Vec<u8>) {
    let args = ev.borrowed_args();
    let p = match ev.kind {
        0 => Pending::Complete {
            layer: ev.layer,
            name: &ev.name,
            cat: &ev.cat,
            ts: ev.ts,
            dur: ev.dur,
            args: &args,
        },
        1 => Pending::Counter {
            layer: ev.layer,
            name: &ev.name,
            cat: &ev.cat,
            ts: ev.ts,
            args: &args,
        },
        _ => Pending::Meta {
            layer: ev.layer,
            name: &ev.name,
            key: &ev.cat,
            value: &ev.value,
        },
    };
    let len = p.len();
    assert!(len % 8 == 0 && len <= MAX_RECORD, "record length {len}");
    let mut buf = vec![0u8; len];
    p.write(&mut buf);
    assert_eq!(
        u32::from_le_bytes(buf[..4].try_into().unwrap()) as usize,
        len
    );
    let rec = Record::decode(&buf).expect("a written record decodes");
    let kind = [KIND_COMPLETE, KIND_COUNTER, KIND_META][ev.kind as usize];
    assert_eq!((rec.kind, rec.layer), (kind, ev.layer));
    assert_eq!(rec.name.bytes, event::clip(&ev.name, MAX_STR));
    assert_eq!(rec.name.orig_len, ev.name.len());
    assert_eq!(rec.cat.bytes, event::clip(&ev.cat, MAX_STR));
    if ev.kind != 2 {
        assert_eq!(rec.ts, ev.ts);
        assert_eq!(rec.nargs as usize, ev.args.len().min(MAX_ARGS));
        assert_eq!(
            rec.args_dropped as usize,
            ev.args.len().saturating_sub(MAX_ARGS).min(255)
        );
        assert_eq!(rec.args().count(), ev.args.len().min(MAX_ARGS));
    }
    if ev.kind == 0 {
        assert_eq!(rec.dur, ev.dur);
    }

    let enc = Encoder::new(pid, HHASH, metadata);
    let mut out = Vec::new();
    let mut hash_of = |b: &[u8]| hash16(b);
    match ev.kind {
        0 => enc.complete_uncached(&mut out, Line { id, tid, at: 0 }, &rec, &mut hash_of),
        1 => enc.counter(&mut out, tid, &rec, &mut hash_of),
        _ => enc.meta(
            &mut out,
            tid,
            ev.layer as u8,
            &rec.name,
            &rec.cat,
            &rec.value,
        ),
    }
    let line = lines(&out, 1)[0];
    let J::O(obj) = parse_line(line) else {
        panic!("line is not an object")
    };
    let name = J::S(expected_text(&ev.name, MAX_STR));
    let cat = J::S(expected_text(&ev.cat, MAX_STR));
    let ty = J::U(ev.layer as u64);
    match ev.kind {
        0 => {
            assert_eq!(field(&obj, 0, "id"), &J::U(id));
            assert_eq!(field(&obj, 1, "name"), &name);
            assert_eq!(field(&obj, 2, "cat"), &cat);
            assert_eq!(field(&obj, 3, "type"), &ty);
            assert_eq!(field(&obj, 4, "pid"), &J::U(pid as u64));
            assert_eq!(field(&obj, 5, "tid"), &J::U(tid as u64));
            assert_eq!(field(&obj, 6, "ts"), &J::U(ev.ts));
            assert_eq!(field(&obj, 7, "dur"), &J::U(ev.dur));
            assert_eq!(field(&obj, 8, "ph"), &J::U(1));
            if metadata {
                expect_args(field(&obj, 9, "args"), ev);
                assert_eq!(obj.len(), 10);
            } else {
                assert_eq!(obj.len(), 9, "no args without metadata");
            }
        }
        1 => {
            assert_eq!(field(&obj, 0, "name"), &name);
            assert_eq!(field(&obj, 1, "cat"), &cat);
            assert_eq!(field(&obj, 2, "type"), &ty);
            assert_eq!(field(&obj, 3, "ts"), &J::U(ev.ts));
            assert_eq!(field(&obj, 4, "ph"), &J::U(2));
            assert_eq!(field(&obj, 5, "pid"), &J::U(pid as u64));
            assert_eq!(field(&obj, 6, "tid"), &J::U(tid as u64));
            expect_args(field(&obj, 7, "args"), ev);
            assert_eq!(obj.len(), 8);
        }
        _ => {
            assert_eq!(field(&obj, 0, "name"), &name);
            assert_eq!(field(&obj, 1, "cat"), &J::S("dftracer".into()));
            assert_eq!(field(&obj, 2, "type"), &ty);
            assert_eq!(field(&obj, 3, "pid"), &J::U(pid as u64));
            assert_eq!(field(&obj, 4, "tid"), &J::U(tid as u64));
            assert_eq!(field(&obj, 5, "ph"), &J::U(4));
            let want = J::O(vec![
                ("hhash".into(), J::S(HHASH.into())),
                ("name".into(), cat),
                ("value".into(), J::S(expected_text(&ev.value, MAX_STR))),
            ]);
            assert_eq!(field(&obj, 6, "args"), &want);
            assert_eq!(obj.len(), 7);
        }
    }
    all.extend_from_slice(&out);
}

/// Events built from the input go through Pending → Record → Encoder::{complete_uncached,counter,meta};
/// every line must parse as JSON, keep field and arg order, and round-trip every string
/// (lossy UTF-8, clipped with the visible marker), integer and float.
pub fn json_encoder(data: &[u8]) {
    let mut inp = Input::new(data);
    let flags = inp.u8();
    let metadata = flags & 1 == 0;
    let pid = inp.u16() as u32 * 7919;
    // 64 KiB of expanded strings per input: enough to cross MAX_STR many times, small
    // enough to keep libFuzzer fast.
    let mut budget = 64 << 10;
    let mut all = Vec::new();
    let mut n = 0;
    while !inp.is_empty() && n < 16 {
        let ev = OwnedEvent::read(&mut inp, &mut budget);
        n += 1;
        check_event(
            &ev,
            metadata,
            n as u64,
            (flags as u32) << 20 | n,
            pid,
            &mut all,
        );
    }
    if n > 0 {
        // The lines of one buffer stay separate lines.
        for line in lines(&all, n as usize) {
            parse_line(line);
        }
    }

    // The escaping function alone, on the raw input with an arbitrary original length.
    let orig = data.len() + (flags as usize % 3) * 17;
    let mut out = Vec::new();
    format::write_str(&mut out, data, orig);
    let want = if orig > data.len() {
        format!(
            "{}...[truncated, {orig} bytes]",
            String::from_utf8_lossy(data)
        )
    } else {
        String::from_utf8_lossy(data).into_owned()
    };
    assert_eq!(parse_line(&out), J::S(want), "write_str");

    // Process metadata (meta_str): key clipped at MAX_STR, name and value written whole.
    let mut out = Vec::new();
    let enc = Encoder::new(pid, HHASH, metadata);
    enc.meta_str(&mut out, 1, "FH", data, data);
    let J::O(obj) = parse_line(lines(&out, 1)[0]) else {
        panic!("meta_str: not an object")
    };
    let want = J::O(vec![
        ("hhash".into(), J::S(HHASH.into())),
        (
            "name".into(),
            J::S(String::from_utf8_lossy(event::clip(data, MAX_STR)).into()),
        ),
        ("value".into(), J::S(String::from_utf8_lossy(data).into())),
    ]);
    assert_eq!(field(&obj, 6, "args"), &want, "meta_str args");
}

// ---------------------------------------------------------------------------------------------
// gzip_member

const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0x03];

/// Chunks of the input become gzip members (one writer reused across members, sometimes
/// replaced at another level, levels 0..=11 to cover the clamp); each member must decode
/// alone to its chunk and the whole file must decode with MultiGzDecoder to the concatenation.
pub fn gzip_member(data: &[u8]) {
    let mut inp = Input::new(data);
    let mut g = GzipWriter::new(inp.u8() % 12);
    let mut file = Vec::new();
    let mut expect = Vec::new();
    let mut budget: usize = 512 * 1024;
    let mut members = 0;
    // At least one member, even for an empty input.
    while members == 0 || (!inp.is_empty() && members < 24) {
        let op = inp.u8();
        if op & 0x80 != 0 {
            g = GzipWriter::new(op % 12);
        }
        let chunk: Vec<u8> = if op & 0x40 != 0 {
            // A short pattern repeated: long, compressible input (JSON-like in practice).
            let n = (inp.u16() as usize * 4).min(budget);
            let pat = inp.take(1 + inp_len(op));
            let pat: &[u8] = if pat.is_empty() { b"{}\n" } else { pat };
            budget -= n;
            pat.iter().copied().cycle().take(n).collect()
        } else {
            let n = inp.u16() as usize % 8192;
            inp.take(n).to_vec()
        };
        let start = file.len();
        g.member(&chunk, &mut file);
        members += 1;
        let m = &file[start..];
        assert!(m.len() >= 18, "member too short");
        assert_eq!(m[..10], GZIP_HEADER, "member header");
        let tail = &m[m.len() - 8..];
        assert_eq!(tail[..4], crc32(&chunk).to_le_bytes(), "crc32");
        assert_eq!(tail[4..], (chunk.len() as u32).to_le_bytes(), "isize");
        let mut one = Vec::new();
        flate2::read::GzDecoder::new(m)
            .read_to_end(&mut one)
            .expect("member decodes alone");
        assert!(one == chunk, "member {members} decodes to other bytes");
        expect.extend_from_slice(&chunk);
    }
    let mut got = Vec::new();
    flate2::read::MultiGzDecoder::new(&file[..])
        .read_to_end(&mut got)
        .expect("file decodes");
    assert!(got == expect, "the file decodes to other bytes");
}

fn inp_len(op: u8) -> usize {
    (op & 0x1F) as usize
}

/// Reference CRC-32 (IEEE, reflected), bit by bit: independent of the crate the core uses.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

// ---------------------------------------------------------------------------------------------
// ring_model

/// Fills a record of `len` bytes with content derived from `seq` (kind byte nonzero).
fn fill_record(buf: &mut [u8], seq: u64) {
    let len = buf.len();
    buf[..4].copy_from_slice(&(len as u32).to_le_bytes());
    buf[4] = 1;
    buf[5..8].copy_from_slice(&seq.to_le_bytes()[..3]);
    for (i, b) in buf[8..].iter_mut().enumerate() {
        *b = (seq as u8).wrapping_mul(31).wrapping_add(i as u8) | 1;
    }
}

/// Single-threaded differential test of `ring::Ring` against a model: a VecDeque of records
/// and the ring's position arithmetic (a record that would straddle the end is preceded by a
/// pad up to the end). Ops: push of length L (8-aligned, ≤ capacity/2, the contract), drain,
/// discard (fork child), and a burst of pushes until full.
pub fn ring_model(data: &[u8]) {
    let mut inp = Input::new(data);
    let req = inp.u16() as usize % 5000;
    let ring = Ring::new(req, 7);
    let cap = ring.capacity();
    assert_eq!(cap, req.max(64).next_power_of_two(), "capacity");
    let (mut head, mut tail) = (0usize, 0usize);
    let mut model: VecDeque<(u64, usize)> = VecDeque::new();
    let mut seq = 0u64;
    let slots = cap / 16; // lengths 8..=cap/2 in steps of 8
    let mut push =
        |len: usize, head: &mut usize, tail: usize, model: &mut VecDeque<(u64, usize)>| {
            let idx = *head % cap;
            let to_end = cap - idx;
            let need = if len <= to_end { len } else { to_end + len };
            let fits = *head - tail + need <= cap;
            let s = seq;
            let mut called = false;
            let ok = ring.push(len, |buf| {
                assert_eq!(buf.len(), len, "slot length");
                called = true;
                fill_record(buf, s);
            });
            assert_eq!(ok, fits, "push({len}) at head {head} tail {tail} cap {cap}");
            assert_eq!(called, ok, "fill called iff the push succeeded");
            if ok {
                *head += need;
                model.push_back((s, len));
                seq += 1;
            }
            ok
        };
    let mut ops = 0;
    while !inp.is_empty() && ops < 4096 {
        ops += 1;
        let op = inp.u8();
        match op % 8 {
            0..=4 => {
                let len = 8 * (1 + inp.u8() as usize % slots);
                push(len, &mut head, tail, &mut model);
            }
            5 => {
                let mut got = Vec::new();
                let used = ring.used();
                let n = ring.drain(usize::MAX, |rec| {
                    got.push(rec.to_vec());
                    false
                });
                assert_eq!(n, used, "drained bytes");
                assert_eq!(got.len(), model.len(), "drained record count");
                for (rec, (s, len)) in got.iter().zip(model.drain(..)) {
                    let mut want = vec![0u8; len];
                    fill_record(&mut want, s);
                    assert!(rec == &want, "record {s} changed in the ring");
                }
                tail = head;
            }
            6 => {
                ring.discard();
                model.clear();
                tail = head;
            }
            _ => {
                let len = 8 * (1 + (op >> 3) as usize % slots);
                while push(len, &mut head, tail, &mut model) {}
            }
        }
        assert_eq!(ring.used(), head - tail, "used bytes");
        assert!(ring.used() <= cap);
    }
}

// ---------------------------------------------------------------------------------------------
// config

/// Values worth trying for any knob (the fuzzer mutates from these too).
const VALUES: &[&str] = &[
    "",
    "0",
    "1",
    "yes",
    "no",
    "ON",
    "off",
    "True",
    "y",
    "2",
    "-1",
    " 42 ",
    "300",
    "256",
    "18446744073709551615",
    "18446744073709551616",
    "4294967296",
    "NS",
    "us",
    "SEC",
    "PRELOAD",
    "function",
    "SELECTIVE",
    "/tmp/x",
    "all",
    "1e3",
    "0x10",
];

/// The boolean knobs (their getters answer "0"/"1" in the variable's sense).
const BOOL_KNOBS: &[&str] = &[
    "DFTRACER_ENABLE",
    "DFTRACER_INC_METADATA",
    "DFTRACER_SET_CORE_AFFINITY",
    "DFTRACER_DISABLE_IO",
    "DFTRACER_DISABLE_POSIX",
    "DFTRACER_DISABLE_STDIO",
    "DFTRACER_DISABLE_HDF5",
    "DFTRACER_DISABLE_MPIIO",
    "DFTRACER_TRACE_COMPRESSION",
    "DFTRACER_DISABLE_TIDS",
    "DFTRACER_BIND_SIGNALS",
    "DFTRACER_ENABLE_AGGREGATION",
    "DFTRACER_ERROR",
    "DFTRACER_DROP_WHEN_FULL",
];

/// `DFTRACER_FUZZ_IGNORE=name,name` skips the check of a known, reported and still open core
/// bug, so that a long run is not stopped by it over and over (the `regression_*` test still
/// fails until it is fixed).
fn ignored(name: &str) -> bool {
    std::env::var("DFTRACER_FUZZ_IGNORE").is_ok_and(|v| v.split(',').any(|n| n.trim() == name))
}

static CONFIG_FILES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// An env map and YAML text from the input go through `config::resolve` and
/// `config::apply_yaml`: no panic, every knob's getter answers by env name and by short name,
/// a resolved config re-resolves to itself from its own getters, accepted env values win
/// over YAML, and numeric knobs are clamped into their documented ranges.
pub fn config(data: &[u8]) {
    let mut inp = Input::new(data);
    let flags = inp.u8();
    let mut env: HashMap<String, String> = HashMap::new();
    let mut budget = 64 * 1024;
    for _ in 0..inp.u8() % 16 {
        let sel = inp.u8();
        let name = if sel < 224 {
            KNOBS[sel as usize % KNOBS.len()].env.to_string()
        } else {
            String::from_utf8_lossy(&inp.blob(&mut budget)).into_owned()
        };
        let vsel = inp.u8();
        let value = if (vsel as usize) < VALUES.len() * 8 {
            VALUES[vsel as usize % VALUES.len()].to_string()
        } else {
            String::from_utf8_lossy(&inp.blob(&mut budget)).into_owned()
        };
        env.insert(name, value);
    }
    // Never let the input name a file to read (/dev/zero would hang the harness): the only
    // YAML file is the one written below.
    env.remove("DFTRACER_CONFIGURATION");
    let yaml = String::from_utf8_lossy(inp.rest()).into_owned();

    let mut direct = Config::default();
    let mut warnings = Vec::new();
    let _ = config::apply_yaml(&mut direct, &yaml, &mut warnings);

    let file = (flags & 1 == 1).then(|| {
        let n = CONFIG_FILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!(
            "dftracer-fuzz-config-{}-{}.yaml",
            std::process::id(),
            n
        ));
        std::fs::write(&p, &yaml).expect("write the YAML file");
        p
    });
    if let Some(p) = &file {
        env.insert(
            "DFTRACER_CONFIGURATION".into(),
            p.to_string_lossy().into_owned(),
        );
    }
    let getenv = |k: &str| env.get(k).cloned();
    let (cfg, _warnings, error) = config::resolve(getenv);
    let (again, _, error2) = config::resolve(getenv);
    if let Some(p) = &file {
        let _ = std::fs::remove_file(p);
    }
    assert_eq!(cfg, again, "resolve is deterministic");
    assert_eq!(error.is_some(), error2.is_some());
    if error.is_some() {
        assert!(!cfg.enable, "a YAML error turns tracing off");
    }

    // Documented ranges.
    assert!(cfg.ring_size.is_power_of_two());
    assert!((MIN_RING_SIZE..=MAX_RING_SIZE).contains(&cfg.ring_size));
    assert!(cfg.compression_level <= 10);
    assert!(cfg.flush_interval_ms >= 1 && cfg.trace_interval_ms >= 1 && cfg.libuv_threads >= 1);

    // Getters: by full and short name, any case for the short name.
    let mut from_getters = HashMap::new();
    for knob in KNOBS {
        let v = cfg.get(knob.env);
        let short = &knob.env["DFTRACER_".len()..];
        assert_eq!(cfg.get(short), v, "get({short})");
        assert_eq!(
            cfg.get(&short.to_ascii_lowercase()),
            v,
            "get(lowercase {short})"
        );
        from_getters.insert(knob.env.to_string(), v);
    }
    let _ = cfg.get(&String::from_utf8_lossy(data));
    let _ = cfg.logs(&String::from_utf8_lossy(data));

    // A config is reproduced by feeding its own getters back as the environment.
    let (back, w, e) = config::resolve(|k| from_getters.get(k).cloned());
    assert!(e.is_none());
    assert_eq!(
        back, cfg,
        "getters do not reproduce the config (warnings {w:?})"
    );

    // Accepted env values win over YAML.
    for knob in KNOBS {
        let Some(raw) = env.get(knob.env) else {
            continue;
        };
        let got = cfg.get(knob.env);
        if let Some(b) = config::parse_bool(raw) {
            let is_bool = BOOL_KNOBS.contains(&knob.env);
            if is_bool && !(knob.env == "DFTRACER_ENABLE" && error.is_some()) {
                assert_eq!(got, (b as u8).to_string(), "{}={raw:?}", knob.env);
            }
        }
        if let Ok(v) = raw.trim().parse::<u64>() {
            match knob.env {
                "DFTRACER_COMPRESSION_LEVEL" if !ignored("compression_level_wrap") => {
                    assert_eq!(
                        cfg.compression_level as u64,
                        v.min(10),
                        "{}={raw:?}",
                        knob.env
                    )
                }
                "DFTRACER_RING_SIZE" => {
                    let want = (v.min(MAX_RING_SIZE as u64) as usize)
                        .clamp(MIN_RING_SIZE, MAX_RING_SIZE)
                        .next_power_of_two();
                    assert_eq!(cfg.ring_size, want, "{}={raw:?}", knob.env)
                }
                "DFTRACER_WRITE_BUFFER_SIZE" => {
                    assert_eq!(cfg.write_buffer_size as u64, v, "{}={raw:?}", knob.env)
                }
                _ => {}
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// record_decode

/// Arbitrary bytes as a ring record: decoding and iterating args never panics, and whatever
/// decodes encodes to one valid JSON line.
pub fn record_decode(data: &[u8]) {
    let Some(rec) = Record::decode(data) else {
        return;
    };
    let n = rec.args().count();
    assert!(n <= rec.nargs as usize);
    let enc = Encoder::new(1, HHASH, true);
    let mut out = Vec::new();
    let mut hash_of = |b: &[u8]| hash16(b);
    match rec.kind {
        KIND_COMPLETE => enc.complete_uncached(
            &mut out,
            Line {
                id: 1,
                tid: 2,
                at: 0,
            },
            &rec,
            &mut hash_of,
        ),
        KIND_COUNTER => enc.counter(&mut out, 2, &rec, &mut hash_of),
        KIND_META => enc.meta(
            &mut out,
            2,
            rec.layer as u8,
            &rec.name,
            &rec.cat,
            &rec.value,
        ),
        k => panic!("decode accepted kind {k}"),
    }
    parse_line(lines(&out, 1)[0]);
}

/// The service's `/proc` parsers on arbitrary bytes: they never panic, and every value they
/// return comes from the input (names are sub-slices of it; iteration ends).
pub fn proc_parsers(data: &[u8]) {
    use dftracer_service::proc;
    let inside = |s: &[u8]| {
        s.is_empty() || {
            let (a, b) = (data.as_ptr() as usize, s.as_ptr() as usize);
            b >= a && b + s.len() <= a + data.len()
        }
    };
    let _ = proc::parse_u64(data);
    assert!(inside(proc::trim(data)));
    let lines = data.split(|&b| b == b'\n').count();
    assert!(proc::stat_cpus(data).count() <= lines);
    let _ = proc::stat_counters(data);
    for d in proc::diskstats(data) {
        let _ = format!("{d:?}");
    }
    assert!(proc::net_dev(data).count() <= lines);
    for (k, _) in proc::meminfo(data) {
        assert!(inside(k));
    }
    let _ = proc::loadavg(data);
    for a in proc::cmdline_args(data) {
        assert!(inside(a));
    }
    let _ = proc::pid_stat(data);
}

// fast_deflate ---------------------------------------------------------------------------------

/// `dftracer_core::internals::deflate::FastDeflate` against an independent inflater (flate2): every
/// stream must decode alone to its input and stay within the documented size bound.
///
/// Input: byte 0 = mode, bytes 1..3 = split point (little-endian u16), the rest = payload.
/// Mode bit 0: expand the payload by repeating it (long matches, max length and distance,
/// many blocks); bits 1..: how many times (up to 256 KiB). The payload (or its expansion) is
/// compressed whole, then as two calls on the same compressor split at the split point, then
/// whole again (stale table entries from the earlier calls must not leak in).
pub fn fast_deflate(data: &[u8]) {
    fast_deflate_impl::fast_deflate(data)
}

mod fast_deflate_impl {
    use dftracer_core::internals::deflate::{hint, FastDeflate};
    use std::io::Read;

    fn inflate(stream: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::DeflateDecoder::new(stream)
            .read_to_end(&mut out)
            .expect("valid deflate stream");
        out
    }

    /// Line hints of every kind: at each line start the true previous line, and at every
    /// `step`-th byte a distance derived from `seed` (often wrong, sometimes out of reach).
    fn hints(input: &[u8], seed: usize) -> Vec<u64> {
        let step = 7 + seed % 89;
        let mut v = Vec::new();
        let mut prev_line = None;
        for i in 0..input.len() {
            let start = i == 0 || input[i - 1] == b'\n';
            if start {
                if let Some(h) = prev_line.and_then(|p| hint(i, i - p)) {
                    v.push(h);
                }
                prev_line = Some(i);
            } else if i % step == 0 {
                if let Some(h) = hint(i, (i * 31 + seed) % 40_000) {
                    v.push(h);
                }
            }
        }
        v
    }

    fn check(d: &mut FastDeflate, input: &[u8], seed: usize) {
        check_with(d, input, &[]);
        check_with(d, input, &hints(input, seed));
    }

    fn check_with(d: &mut FastDeflate, input: &[u8], hints: &[u64]) {
        // Appends: whatever is already in `out` stays.
        let mut out = vec![0x5a; 3];
        d.compress_hinted(input, hints, &mut out);
        assert_eq!(out[..3], [0x5a; 3]);
        let stream = &out[3..];
        assert!(
            stream.len() <= input.len() + input.len() / 2048 + 16,
            "bound: {} bytes for {}",
            stream.len(),
            input.len()
        );
        assert!(
            inflate(stream) == input,
            "round trip of {} bytes",
            input.len()
        );
    }

    pub fn fast_deflate(data: &[u8]) {
        if data.len() < 3 {
            check(&mut FastDeflate::new(), data, 0);
            return;
        }
        let mode = data[0];
        let split = u16::from_le_bytes([data[1], data[2]]) as usize;
        let payload = &data[3..];
        let expanded: Vec<u8>;
        let input: &[u8] = if mode & 1 != 0 && !payload.is_empty() {
            let times = 1 + (mode >> 1) as usize * 64;
            let n = (payload.len() * times).min(256 << 10);
            expanded = payload.iter().copied().cycle().take(n).collect();
            &expanded
        } else {
            payload
        };
        let mut d = FastDeflate::new();
        check(&mut d, input, split);
        let cut = if input.is_empty() {
            0
        } else {
            split % (input.len() + 1)
        };
        check(&mut d, &input[..cut], split);
        check(&mut d, &input[cut..], split);
        check(&mut d, input, split);
    }
}
