//! `dftracer validate`: every line of every file is JSON (checked by serde_json, not by our own
//! scanner), every gzip member is complete, the last line ends with a newline, every file
//! ends with an `end` record (the reference writes its aggregated ph 3 records after `end`:
//! those are allowed), and the counts agree: `end.args.num_events` = the complete records
//! with an `id` before `end` (plus the events folded into ph 3 records, for the reference,
//! whose folded events take ids), `end.args.aggregated` = the sum of `dft_cnt` over ph 3
//! records (ours, when `end` says it).

use crate::input;
use crate::scan::{self, Num, Ph, Val};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;

/// The verdict on one file.
#[derive(Debug, Clone, Default)]
pub struct FileReport {
    pub path: PathBuf,
    pub lines: u64,
    pub events: u64,
    /// Empty when the file passed.
    pub problems: Vec<String>,
}

#[derive(Default)]
struct Check {
    lines: u64,
    /// Lines that are JSON objects.
    good: u64,
    bad: Vec<u64>,
    bad_count: u64,
    with_id: u64,
    dft_cnt: u64,
    /// `end`'s counts, once seen.
    end: Option<(Option<u64>, Option<u64>)>,
    /// Records other than ph 3 after `end`.
    after_end: u64,
}

impl Check {
    fn line(&mut self, n: u64, raw: &[u8]) {
        self.lines = n;
        if raw.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        if serde_json::from_slice::<serde::de::IgnoredAny>(raw).is_err() {
            self.bad_count += 1;
            if self.bad.len() < 3 {
                self.bad.push(n);
            }
            return;
        }
        let Ok(l) = scan::line(raw) else {
            // Valid JSON but not an object.
            self.bad_count += 1;
            if self.bad.len() < 3 {
                self.bad.push(n);
            }
            return;
        };
        self.good += 1;
        if self.end.is_some() && l.ph != Some(Ph::Aggregated) {
            self.after_end += 1;
        }
        match l.ph {
            Some(Ph::Complete) if l.has_id => {
                if l.name == b"end" && l.cat == b"dftracer" {
                    let args = l.args.unwrap_or(b"{}");
                    let n = |k: &[u8]| scan::get(args, k).and_then(Val::num).and_then(Num::as_u64);
                    self.end = Some((n(b"num_events"), n(b"aggregated")));
                } else {
                    // `num_events` counts the records before `end` (start included).
                    self.with_id += 1;
                }
            }
            Some(Ph::Aggregated) => {
                let n = l
                    .args
                    .and_then(|a| scan::get(a, b"dft_cnt"))
                    .and_then(Val::num)
                    .and_then(Num::as_u64)
                    .unwrap_or(0);
                self.dft_cnt += n;
            }
            _ => {}
        }
    }
}

fn check(path: &Path, read: &AtomicU64) -> FileReport {
    let mut c = Check::default();
    let r = input::for_each_line(path, read, |n, l| c.line(n, l));
    let mut problems = Vec::new();
    match &r {
        Err(e) => problems.push(e.to_string()),
        Ok(st) => {
            c.lines = st.lines;
            if let Some(long) = st.long.describe() {
                problems.push(long);
            }
            if st.unterminated {
                problems.push("the last line has no newline".into());
            }
        }
    }
    if c.good == 0 && r.is_ok() {
        problems.push(if c.lines == 0 {
            "empty: no line at all".into()
        } else {
            "no valid line (not a trace file)".into()
        });
    }
    if c.bad_count > 0 {
        let at: Vec<String> = c.bad.iter().map(u64::to_string).collect();
        problems.push(format!(
            "{} line(s) are not JSON objects (line {}{})",
            c.bad_count,
            at.join(", "),
            if c.bad_count > 3 { ", ..." } else { "" }
        ));
    }
    match c.end {
        None => problems.push("no end record (the process did not finish its trace)".into()),
        Some((num, agg)) => {
            if c.after_end > 0 {
                problems.push(format!("{} record(s) after end", c.after_end));
            }
            if let Some(n) = num {
                // Ours: folded events take no id (`end.args.aggregated` counts them). The
                // reference: they take ids, so num_events counts them too.
                let reference = agg.is_none() && c.dft_cnt > 0 && n == c.with_id + c.dft_cnt;
                if n != c.with_id && !reference {
                    problems.push(format!(
                        "end says num_events {n}, the file has {} complete records with an id{}",
                        c.with_id,
                        if c.dft_cnt > 0 {
                            format!(" and {} aggregated", c.dft_cnt)
                        } else {
                            String::new()
                        }
                    ));
                }
            }
            if let Some(a) = agg {
                if a != c.dft_cnt {
                    problems.push(format!(
                        "end says aggregated {a}, the ph 3 records hold dft_cnt {}",
                        c.dft_cnt
                    ));
                }
            }
        }
    }
    FileReport {
        path: path.to_path_buf(),
        lines: c.lines,
        events: c.with_id + c.dft_cnt,
        problems,
    }
}

/// Checks every file of `inputs` with `jobs` threads.
pub fn validate(inputs: &[PathBuf], jobs: usize) -> std::io::Result<Vec<FileReport>> {
    let files = input::collect(inputs)?;
    let read = AtomicU64::new(0);
    Ok(input::parallel(&files, jobs, |_, p| check(p, &read)))
}
