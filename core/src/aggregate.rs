//! Aggregated records (ph 3, `DFTRACER_ENABLE_AGGREGATION=1`, reference §2.6): instead of one
//! line per complete event, one line per (name, cat, type, tid) and time bucket of
//! `DFTRACER_TRACE_INTERVAL_MS`, with `dft_cnt`, and the duration and every numeric arg as
//! `_min`/`_max`/`_sum` whenever `dft_cnt` > 1 (a plain value only for a bucket of one event),
//! as the reference's readers expect: a reader sums `<key>_sum` over buckets, so a plain value
//! in a bucket of many events (even when every event had that value) would count it once.
//! An arg present in only some events of a bucket is summed over those. String args are not
//! aggregated (as in the reference). `dftracer`-category events are never aggregated. Unlike the
//! reference, the last buckets are written before `end`, not after it.
//!
//! Runs on the writer (off the hot path); memory is one entry per live key and bucket.

use crate::format::{Bucket, Encoder, Num};
use crate::record::{ArgValue, Record};
use std::collections::HashMap;

#[derive(Debug)]
struct Stat {
    first: Num,
    min: Num,
    max: Num,
    sum: Num,
}

impl Stat {
    fn new(v: Num) -> Stat {
        Stat {
            first: v,
            min: v,
            max: v,
            sum: v,
        }
    }
    fn add(&mut self, v: Num) {
        match (self.first, v) {
            (Num::Int(_), Num::Int(b)) => {
                let (Num::Int(mn), Num::Int(mx), Num::Int(s)) = (self.min, self.max, self.sum)
                else {
                    return self.add_float(v);
                };
                self.min = Num::Int(mn.min(b));
                self.max = Num::Int(mx.max(b));
                self.sum = match s.checked_add(b) {
                    Some(t) => Num::Int(t),
                    None => Num::Float(s as f64 + b as f64),
                };
            }
            _ => self.add_float(v),
        }
    }
    /// [first, min, max, sum].
    fn nums(&self) -> [Num; 4] {
        [self.first, self.min, self.max, self.sum]
    }
    fn add_float(&mut self, v: Num) {
        let b = v.as_f64();
        self.min = Num::Float(self.min.as_f64().min(b));
        self.max = Num::Float(self.max.as_f64().max(b));
        self.sum = Num::Float(self.sum.as_f64() + b);
    }
}

#[derive(Debug)]
struct Entry {
    layer: u8,
    count: u64,
    dur: Stat,
    args: Vec<(Box<[u8]>, Stat)>,
}

/// Key: name, cat, tid, bucket start.
type Key = (Box<[u8]>, Box<[u8]>, u32, u64);

/// The open buckets of one process.
#[derive(Default)]
pub struct Aggregator {
    /// SELECTIVE: which events are folded (`None`: all).
    pub rules: Option<std::sync::Arc<crate::rules::Rules>>,
    entries: HashMap<Key, Entry, crate::hash::FastBuild>,
    /// Insertion order, so lines come out in a stable order.
    order: Vec<Key>,
    /// Events folded in so far.
    pub folded: u64,
    /// The process's executable name (the rules' `app`).
    pub app: Box<[u8]>,
    /// The process's rank (the rules' `rank`), when a launcher gave it one.
    pub rank: Option<i64>,
}

/// A record's args as the rules' `tags.<key>` see them: the first arg of that name, as the
/// trace writes it (a file as its hash).
struct RecordTags<'r, 'a>(&'r Record<'a>);

impl crate::rules::Tags for RecordTags<'_, '_> {
    fn tag(&self, key: &[u8]) -> Option<crate::rules::Tag<'_>> {
        use crate::rules::Tag;
        use std::borrow::Cow;
        let (_, v) = self.0.args().find(|(k, _)| k.bytes == key)?;
        Some(match v {
            ArgValue::Int(i) => Tag::Int(i as i128),
            ArgValue::UInt(u) => Tag::Int(u as i128),
            ArgValue::Float(f) => Tag::Float(f),
            ArgValue::Bool(b) => Tag::Text(Cow::Borrowed(if b { b"true" } else { b"false" })),
            ArgValue::Str(t) => Tag::Text(Cow::Borrowed(t.bytes)),
            ArgValue::Path(t) => Tag::Text(Cow::Owned(
                crate::hash::hash_str(&crate::hash::hash16(t.bytes))
                    .as_bytes()
                    .to_vec(),
            )),
        })
    }
}

fn num_of(v: ArgValue) -> Option<Num> {
    match v {
        ArgValue::Int(i) => Some(Num::Int(i)),
        ArgValue::UInt(u) => Some(
            i64::try_from(u)
                .map(Num::Int)
                .unwrap_or(Num::Float(u as f64)),
        ),
        ArgValue::Float(f) => Some(Num::Float(f)),
        ArgValue::Bool(b) => Some(Num::Int(b as i64)),
        ArgValue::Str(_) | ArgValue::Path(_) => None,
    }
}

impl Aggregator {
    pub fn new(rules: Option<std::sync::Arc<crate::rules::Rules>>) -> Aggregator {
        Aggregator {
            rules,
            ..Aggregator::default()
        }
    }

    /// `true` when `rec` (a complete event) is to be folded rather than written.
    pub fn wants(&self, rec: &Record) -> bool {
        if rec.cat.bytes == b"dftracer" {
            return false;
        }
        match &self.rules {
            None => true,
            Some(r) => r.matches(&crate::rules::Subject {
                name: rec.name.bytes,
                cat: rec.cat.bytes,
                ts: rec.ts,
                dur: rec.dur,
                app: &self.app,
                rank: self.rank,
                tags: &RecordTags(rec),
            }),
        }
    }

    /// Folds a complete event into its bucket (`width` in time units, ≥ 1).
    pub fn add(&mut self, rec: &Record, tid: u32, width: u64) {
        let bucket = rec.ts - rec.ts % width.max(1);
        let key: Key = (rec.name.bytes.into(), rec.cat.bytes.into(), tid, bucket);
        let dur = Num::Int(i64::try_from(rec.dur).unwrap_or(i64::MAX));
        self.folded += 1;
        let e = match self.entries.get_mut(&key) {
            Some(e) => {
                e.count += 1;
                e.dur.add(dur);
                e
            }
            None => {
                self.order.push(key.clone());
                self.entries.entry(key).or_insert(Entry {
                    layer: rec.layer as u8,
                    count: 1,
                    dur: Stat::new(dur),
                    args: Vec::new(),
                })
            }
        };
        for (k, v) in rec.args() {
            let Some(n) = num_of(v) else { continue };
            match e.args.iter_mut().find(|(name, _)| &name[..] == k.bytes) {
                Some((_, s)) => s.add(n),
                None => e.args.push((k.bytes.into(), Stat::new(n))),
            }
        }
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Writes (and forgets) every bucket starting before `before` (all with `u64::MAX`).
    pub fn flush(&mut self, out: &mut Vec<u8>, enc: &Encoder, before: u64) {
        let mut keep = Vec::new();
        for key in std::mem::take(&mut self.order) {
            if key.3 >= before {
                keep.push(key);
                continue;
            }
            if let Some(e) = self.entries.remove(&key) {
                let b = Bucket {
                    name: &key.0,
                    cat: &key.1,
                    layer: e.layer,
                    ts: key.3,
                    tid: key.2,
                    count: e.count,
                };
                let dur = std::iter::once((&b"dur"[..], e.dur.nums()));
                let args = e.args.iter().map(|(k, s)| (&k[..], s.nums()));
                enc.aggregated(out, &b, dur.chain(args));
            }
        }
        self.order = keep;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Arg, Layer, Value};
    use crate::record::Pending;

    fn rec_bytes(name: &[u8], ts: u64, dur: u64, args: &[Arg]) -> Vec<u8> {
        let p = Pending::Complete {
            layer: Layer::Python,
            name,
            cat: b"CAT",
            ts,
            dur,
            args,
        };
        let mut b = vec![0; p.len()];
        p.write(&mut b);
        b
    }

    #[test]
    fn buckets_fold_and_vary() {
        let mut a = Aggregator::default();
        for (i, d) in [10u64, 6, 8, 10, 6].iter().enumerate() {
            let b = rec_bytes(
                b"ev",
                1_000_000 + i as u64,
                *d,
                &[
                    Arg::int("size", 5),
                    Arg::int("step", i as i64),
                    Arg::str("s", "x"),
                ],
            );
            a.add(&Record::decode(&b).unwrap(), 7, 250_000);
        }
        let b = rec_bytes(b"ev", 1_250_001, 5, &[]);
        a.add(&Record::decode(&b).unwrap(), 7, 250_000);
        let enc = Encoder::new(1, "h", false);
        let mut out = Vec::new();
        a.flush(&mut out, &enc, 1_250_000);
        let text = String::from_utf8(out).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["ph"], 3);
        assert_eq!(v["ts"], 1_000_000);
        assert_eq!(v["args"]["dft_cnt"], 5);
        assert_eq!(v["args"]["dur_min"], 6);
        assert_eq!(v["args"]["dur_max"], 10);
        assert_eq!(v["args"]["dur_sum"], 40);
        // Same value in all five events: still _min/_max/_sum (a reader sums `size_sum`).
        assert!(v["args"].get("size").is_none());
        assert_eq!(v["args"]["size_min"], 5);
        assert_eq!(v["args"]["size_max"], 5);
        assert_eq!(v["args"]["size_sum"], 25);
        assert_eq!(v["args"]["step_sum"], 10);
        assert!(v["args"].get("s").is_none());
        assert!(!a.is_empty());
        let mut out = Vec::new();
        a.flush(&mut out, &enc, u64::MAX);
        let v: serde_json::Value = serde_json::from_slice(out.trim_ascii()).unwrap();
        assert_eq!(v["args"]["dur"], 5);
        assert_eq!(v["args"]["dft_cnt"], 1);
        assert!(a.is_empty());
        let _ = Value::Int(0);
    }

    #[test]
    fn identical_values_are_summed_not_collapsed() {
        // 48 reads of 65,536 bytes, all 3 units long: a reader summing `count_sum` and
        // `dur_sum` must get what it gets from the 48 complete events.
        let mut a = Aggregator::default();
        for i in 0..48u64 {
            let args = if i % 2 == 0 {
                vec![Arg::int("count", 65536), Arg::int("ret", 65536)]
            } else {
                vec![Arg::int("count", 65536)]
            };
            let b = rec_bytes(b"read", 2_000_000 + i, 3, &args);
            a.add(&Record::decode(&b).unwrap(), 9, 1_000_000);
        }
        let enc = Encoder::new(1, "h", true);
        let mut out = Vec::new();
        a.flush(&mut out, &enc, u64::MAX);
        let v: serde_json::Value = serde_json::from_slice(out.trim_ascii()).unwrap();
        let args = &v["args"];
        assert_eq!(args["dft_cnt"], 48);
        for plain in ["dur", "count", "ret"] {
            assert!(args.get(plain).is_none(), "{plain} written plain: {args}");
        }
        assert_eq!(args["count_sum"], 48 * 65536);
        assert_eq!(args["count_min"], 65536);
        assert_eq!(args["count_max"], 65536);
        // Present in half the events: summed over those.
        assert_eq!(args["ret_sum"], 24 * 65536);
        assert_eq!(args["dur_sum"], 144);
        assert_eq!(args["dur_min"], 3);
        assert_eq!(args["dur_max"], 3);
    }
}
