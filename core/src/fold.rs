//! Folded calls (FORMAT.md "Folded calls"): the calls on a traced fd that say nothing about
//! its I/O ([`Schema::folded`]: `isatty`, `fstat` of the fd) and returned 0 are counted, not
//! written: one ph 3 record per (name, thread) and `DFTRACER_TRACE_INTERVAL_MS` bucket, with
//! `dft_cnt` and the durations (`dur`, or `dur_min`/`dur_max`/`dur_sum`), the shape of the
//! aggregated records readers already sum. Python's `open()` makes two `fstat`s and an
//! `isatty` per file: a third of a data loader's calls, and of its trace.
//!
//! On the writer, per static record: a look at the last entry, else a scan of the few open
//! ones (one per folded name and thread in the current bucket); no allocation once the
//! buckets of a process's threads exist.

use crate::event::Schema;
use crate::format::{Bucket, Encoder, Num};

/// One (schema, thread, bucket)'s counts.
struct Entry {
    schema: &'static Schema,
    tid: u32,
    bucket: u64,
    count: u64,
    min: u64,
    max: u64,
    sum: u64,
}

/// The open buckets of folded calls of one process.
#[derive(Default)]
pub struct Folds {
    entries: Vec<Entry>,
    /// The entry the last call went to.
    last: usize,
    /// Calls folded so far (`end.args.folded`).
    pub folded: u64,
}

impl Folds {
    /// Whether a static record of `schema` with slot values `vals` (8 bytes each) is folded:
    /// a folded schema's call that returned 0.
    #[inline(always)]
    pub fn wants(schema: &Schema, vals: &[u8]) -> bool {
        match schema.fold {
            None => false,
            Some(i) => {
                let at = i as usize * 8;
                vals.get(at..at + 8)
                    .is_some_and(|v| v.iter().all(|&b| b == 0))
            }
        }
    }

    /// Counts one call of `schema` on thread `tid` at `ts`, lasting `dur` (trace units), in
    /// the bucket of `width` (≥ 1) units that holds `ts`.
    pub fn add(&mut self, schema: &'static Schema, tid: u32, ts: u64, dur: u64, width: u64) {
        let bucket = ts - ts % width.max(1);
        self.folded += 1;
        let same = |e: &Entry| std::ptr::eq(e.schema, schema) && e.tid == tid && e.bucket == bucket;
        let i = match self.entries.get(self.last) {
            Some(e) if same(e) => self.last,
            _ => match self.entries.iter().position(same) {
                Some(i) => i,
                None => {
                    self.entries.push(Entry {
                        schema,
                        tid,
                        bucket,
                        count: 0,
                        min: dur,
                        max: dur,
                        sum: 0,
                    });
                    self.entries.len() - 1
                }
            },
        };
        self.last = i;
        let e = &mut self.entries[i];
        e.count += 1;
        e.min = e.min.min(dur);
        e.max = e.max.max(dur);
        e.sum = e.sum.saturating_add(dur);
    }

    /// No bucket is open.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Writes (and forgets) every bucket starting before `before` (all with `u64::MAX`), in
    /// the order they were opened.
    pub fn flush(&mut self, out: &mut Vec<u8>, enc: &Encoder, before: u64) {
        let n = |v: u64| Num::Int(i64::try_from(v).unwrap_or(i64::MAX));
        self.entries.retain(|e| {
            if e.bucket >= before {
                return true;
            }
            let b = Bucket {
                name: e.schema.name.as_bytes(),
                cat: e.schema.cat.as_bytes(),
                layer: e.schema.layer as u8,
                ts: e.bucket,
                tid: e.tid,
                count: e.count,
            };
            // [first, min, max, sum]: the first is read only for a bucket of one (the sum).
            let dur = [n(e.sum), n(e.min), n(e.max), n(e.sum)];
            enc.aggregated(out, &b, [(&b"dur"[..], dur)]);
            false
        });
        self.last = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Layer, Slot};

    /// A POSIX fd call's schema with `fd` and `ret` slots.
    const fn fd_call(name: &'static str) -> Schema {
        Schema::new(
            Layer::LibcIo,
            name,
            "POSIX",
            &[("fd", Slot::Int), ("ret", Slot::Int)],
            "fhash",
        )
    }
    static FSTAT: Schema = fd_call("fstat64").folded();
    static ISATTY: Schema = fd_call("isatty").folded();
    static READ: Schema = fd_call("read");

    fn vals(fd: i64, ret: i64) -> Vec<u8> {
        [fd, ret].iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn only_folded_schemas_that_returned_zero() {
        assert_eq!(FSTAT.fold, Some(1));
        assert!(Folds::wants(&FSTAT, &vals(3, 0)));
        assert!(!Folds::wants(&FSTAT, &vals(3, -1)), "an error is an event");
        assert!(
            !Folds::wants(&ISATTY, &vals(0, 1)),
            "a terminal is an event"
        );
        assert!(!Folds::wants(&READ, &vals(3, 0)));
        assert!(!Folds::wants(&FSTAT, &vals(3, 0)[..8]), "a short record");
    }

    #[test]
    fn buckets_per_name_thread_and_interval() {
        let enc = Encoder::new(7, "00000000000000aa", true);
        let mut f = Folds::default();
        f.add(&FSTAT, 1, 1_000, 4, 1_000);
        f.add(&FSTAT, 1, 1_500, 2, 1_000);
        f.add(&ISATTY, 1, 1_600, 1, 1_000);
        f.add(&FSTAT, 2, 1_700, 9, 1_000);
        f.add(&FSTAT, 1, 2_100, 5, 1_000);
        assert_eq!(f.folded, 5);
        let mut out = Vec::new();
        f.flush(&mut out, &enc, 2_000);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with(r#"{"name":"fstat64","cat":"POSIX","type":3,"ts":1000,"ph":3,"pid":7,"tid":1,"args":{"hhash":"00000000000000aa","dur_min":2,"dur_max":4,"dur_sum":6,"dft_cnt":2}}"#), "{}", lines[0]);
        assert!(
            lines[1].contains(r#""name":"isatty""#) && lines[1].contains(r#""dur":1,"dft_cnt":1}"#),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].contains(r#""tid":2,"#) && lines[2].contains(r#""dur":9,"#),
            "{}",
            lines[2]
        );
        // The later bucket stays open until flushed.
        let mut rest = Vec::new();
        f.flush(&mut rest, &enc, u64::MAX);
        let rest = String::from_utf8(rest).unwrap();
        assert!(
            rest.contains(r#""ts":2000,"#) && rest.contains(r#""dur":5,"dft_cnt":1"#),
            "{rest}"
        );
        let mut none = Vec::new();
        f.flush(&mut none, &enc, u64::MAX);
        assert!(none.is_empty());
    }
}
