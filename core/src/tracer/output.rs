//! Output: a member's JSON → gzip → the file ([`Sink`]), under `Shared::output`, with the
//! writer (encoder) lock released; full-disk hold and retry.

use super::Shared;
use crate::gzip::GzipWriter;
use crate::sink::{self, Sink};
use crate::sys;
use std::sync::atomic::Ordering;

/// Members that could not be written (full disk) are kept, in order, up to this many bytes,
/// and written before the next member once writes succeed again; past it, new members are
/// lost (and counted).
const RETRY_CAP: usize = 8 * 1024 * 1024;

/// File state, under `Shared::output`: compression and writes happen here, with the encoder
/// lock released, so producers never wait for a compression.
pub(super) struct Output {
    out: Vec<u8>,
    gz: Option<GzipWriter>,
    sink: Option<Sink>,
    /// The file cannot be created or reopened: every later event is lost.
    failed: bool,
    lost: u64,
    /// Writes waiting to succeed, in file order: (bytes, events, bytes of the file's end they
    /// replace: see [`GzipWriter::push`]).
    retry: std::collections::VecDeque<(Vec<u8>, u64, usize)>,
    retry_bytes: usize,
    /// `lost` when the current run of write errors began (`None`: writes succeed).
    streak: Option<u64>,
    /// Reopens already reported on stderr.
    reopens_told: u32,
    /// Path and size of the file once closed by finalize.
    closed: Option<(String, u64)>,
}

impl Output {
    pub(super) fn new(gz: Option<GzipWriter>) -> Output {
        Output {
            out: Vec::new(),
            gz,
            sink: None,
            failed: false,
            lost: 0,
            retry: Default::default(),
            retry_bytes: 0,
            streak: None,
            reopens_told: 0,
            closed: None,
        }
    }

    /// Events held back for a retry.
    fn held(&self) -> u64 {
        self.retry.iter().map(|(_, n, _)| n).sum()
    }

    /// Events encoded but not written.
    pub(super) fn lost(&self) -> u64 {
        self.lost
    }

    /// The open file's path.
    pub(super) fn open_path(&self) -> Option<&str> {
        self.sink.as_ref().map(|s| s.path.as_str())
    }

    /// The file (open, or closed by finalize) and its size.
    pub(super) fn file(&self) -> Option<(&str, u64)> {
        match (&self.sink, &self.closed) {
            (Some(s), _) => Some((&s.path, s.bytes)),
            (None, Some((p, b))) => Some((p, *b)),
            (None, None) => None,
        }
    }

    /// Tracing broke: `unwritten` events (and those held for a retry) are lost, and so is
    /// everything later. Returns every event lost now.
    pub(super) fn give_up(&mut self, unwritten: u64) -> u64 {
        let unwritten = unwritten + self.held();
        self.lost += unwritten;
        self.failed = true;
        unwritten
    }

    /// Renames the open file to the first of `name(0)`, `name(1)`, ... that does not exist.
    pub(super) fn rename(&mut self, name: impl Fn(u32) -> String) {
        let Some(s) = self.sink.as_mut() else { return };
        for n in 0..10_000 {
            let new = name(n);
            // Never onto an existing name (no check-then-rename race).
            match sys::rename_noreplace(&s.path, &new) {
                Ok(()) => {
                    s.path = new;
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(_) => break,
            }
        }
    }

    /// Compresses `json` and writes it (creating the file on first use): added to the open
    /// gzip member, which stays open across small flushes (a member of a few lines per second
    /// still compresses against the lines before it) and closes once it holds
    /// `write_buffer_size` bytes of JSON; every write leaves the file ending with a complete
    /// member ([`GzipWriter::push`]). Writes held back by earlier write errors go first, so
    /// the file keeps its order.
    pub(super) fn write_member(&mut self, sh: &Shared, json: &[u8], hints: &[u64], pending: u64) {
        let o = self;
        if o.sink.is_none() && !o.failed {
            let prefix = sh.prefix.lock().clone();
            match Sink::create(&prefix, &sh.file_hash, sh.origin(), sh.cfg.compression) {
                Ok(s) => {
                    o.sink = Some(s);
                }
                Err(e) => {
                    o.failed = true;
                    sys::eprint_line(&format!(
                        "[DFTRACER ERROR] cannot create trace file {}: {e}; events of pid {} are lost",
                        sh.expected_path(),
                        sh.pid
                    ));
                }
            }
        }
        if o.failed {
            o.lost += pending;
            return;
        }
        let Output {
            out,
            gz,
            sink,
            retry,
            retry_bytes,
            ..
        } = o;
        let (data, rewind): (&[u8], usize) = match gz.as_mut() {
            Some(g) => {
                out.clear();
                let r = g.push_hinted(json, hints, out, sh.cfg.write_buffer_size.max(1));
                (out, r)
            }
            None => (json, 0),
        };
        let Some(s) = sink.as_mut() else { return };
        let mut result = Ok(());
        while let Some((m, _, r)) = retry.front() {
            result = s.write_over(m, *r);
            if result.is_err() {
                break;
            }
            *retry_bytes -= m.len();
            retry.pop_front();
        }
        if result.is_ok() {
            result = s.write_over(data, rewind);
        }
        let mut newly_lost = 0;
        match &result {
            Ok(()) => {}
            Err(sink::WriteError::Io(_)) => {
                if *retry_bytes + data.len() <= RETRY_CAP {
                    *retry_bytes += data.len();
                    retry.push_back((data.to_vec(), pending, rewind));
                } else {
                    newly_lost = pending;
                    // The file (with what is held) ends with the member's previous state:
                    // the next write starts a new member rather than continue this one.
                    if let Some(g) = gz.as_mut() {
                        g.close();
                    }
                }
            }
            Err(sink::WriteError::Lost(_)) => {
                newly_lost = pending + retry.iter().map(|(_, n, _)| n).sum::<u64>();
                retry.clear();
                *retry_bytes = 0;
            }
        }
        let reopened = s.reopened;
        let path = s.path.clone();
        if reopened > o.reopens_told {
            o.reopens_told = reopened;
            sys::eprint_line(&format!(
                "[DFTRACER WARN] the program closed or reused the trace file's descriptor; reopened {path}"
            ));
        }
        o.lost += newly_lost;
        match result {
            Ok(()) => {
                if let Some(start) = o.streak.take() {
                    sys::eprint_line(&format!(
                        "[DFTRACER WARN] writing {path} again; {} events of pid {} were lost meanwhile",
                        o.lost - start,
                        sh.pid
                    ));
                }
            }
            Err(sink::WriteError::Io(e)) => {
                if o.streak.is_none() {
                    o.streak = Some(o.lost - newly_lost);
                    sys::eprint_line(&format!(
                        "[DFTRACER WARN] cannot write trace file {path}: {e}; the file keeps its complete members, up to {} MiB more are held and retried, later events are lost and counted",
                        RETRY_CAP >> 20
                    ));
                }
            }
            Err(e @ sink::WriteError::Lost(_)) => {
                o.failed = true;
                sys::eprint_line(&format!(
                    "[DFTRACER ERROR] {path}: {e}; later events of pid {} are lost",
                    sh.pid
                ));
            }
        }
        if o.out.capacity() > 64 * 1024 * 1024 {
            o.out = Vec::new();
        }
    }

    /// Closes the file (finalize, after the last member): whatever is still held after the
    /// last attempt is lost; the counts go to stderr when something was. No `fdatasync`: it
    /// cost every process 0.6-0.7 ms at exit on ext4 (more on a shared file system) and made
    /// the file system commit its journal, the program's dirty data with it; the reference
    /// does not sync either. The file is complete in the page cache from every write on.
    pub(super) fn close(&mut self, sh: &Shared) {
        let o = self;
        let held = o.held();
        o.lost += held;
        o.retry.clear();
        o.retry_bytes = 0;
        let dropped = sh.dropped.load(Ordering::Relaxed);
        if dropped > 0 || o.lost > 0 {
            sys::eprint_line(&format!(
                "[DFTRACER WARN] trace of pid {} ({}): {} events dropped (ring full), {} lost (write errors)",
                sh.pid,
                o.sink.as_ref().map(|s| s.path.as_str()).unwrap_or("no file"),
                dropped,
                o.lost
            ));
        }
        // Before the descriptor closes: a fork child never closes a number reused since.
        sink::unpublish();
        o.closed = o.sink.take().map(|s| (s.path.clone(), s.bytes));
    }
}
