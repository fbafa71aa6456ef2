//! Output: compression and file writes, under `Shared::output`, with the encoder lock
//! released.

use super::*;

/// Members that could not be written (full disk) are kept, in order, up to this many bytes,
/// and written before the next member once writes succeed again; past it, new members are
/// lost (and counted).
const RETRY_CAP: usize = 8 * 1024 * 1024;

/// File state, under `Shared::output`: compression and writes happen here, with the encoder
/// lock released, so producers never wait for a compression.
pub(super) struct Output {
    pub(super) out: Vec<u8>,
    pub(super) gz: Option<GzipWriter>,
    pub(super) sink: Option<Sink>,
    /// The file cannot be created or reopened: every later event is lost.
    pub(super) failed: bool,
    pub(super) lost: u64,
    /// Writes waiting to succeed, in file order: (bytes, events, bytes of the file's end they
    /// replace: see [`GzipWriter::push`]).
    retry: std::collections::VecDeque<(Vec<u8>, u64, usize)>,
    retry_bytes: usize,
    /// `lost` when the current run of write errors began (`None`: writes succeed).
    streak: Option<u64>,
    /// Reopens already reported on stderr.
    reopens_told: u32,
    /// Path and size of the file once closed by finalize.
    pub(super) closed: Option<(String, u64)>,
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
    pub(super) fn held(&self) -> u64 {
        self.retry.iter().map(|(_, n, _)| n).sum()
    }
}

impl Shared {
    pub(super) fn expected_path(&self) -> String {
        sink::trace_path(
            &self.prefix.lock(),
            &self.file_hash,
            self.origin(),
            0,
            self.cfg.compression,
        )
    }

    /// Compresses `json` and writes it (creating the file on first use): added to the open
    /// gzip member, which stays open across small flushes (a member of a few lines per second
    /// still compresses against the lines before it) and closes once it holds
    /// `write_buffer_size` bytes of JSON; every write leaves the file ending with a complete
    /// member ([`GzipWriter::push`]). Writes held back by earlier write errors go first, so
    /// the file keeps its order.
    pub(super) fn write_member(&self, o: &mut Output, json: &[u8], hints: &[u64], pending: u64) {
        if o.sink.is_none() && !o.failed {
            let prefix = self.prefix.lock().clone();
            match Sink::create(
                &prefix,
                &self.file_hash,
                self.origin(),
                self.cfg.compression,
            ) {
                Ok(s) => {
                    self.publish_fd(&s);
                    o.sink = Some(s);
                }
                Err(e) => {
                    o.failed = true;
                    sys::eprint_line(&format!(
                        "[DFTRACER ERROR] cannot create trace file {}: {e}; events of pid {} are lost",
                        self.expected_path(),
                        self.pid
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
                let r = g.push_hinted(json, hints, out, self.cfg.write_buffer_size.max(1));
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
            if let Some(s) = o.sink.as_ref() {
                self.publish_fd(s);
            }
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
                        self.pid
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
                    self.pid
                ));
            }
        }
        if o.out.capacity() > 64 * 1024 * 1024 {
            o.out = Vec::new();
        }
    }

    /// Makes the file's descriptor known to a fork child (which closes its inherited copy
    /// without taking a lock).
    pub(super) fn publish_fd(&self, s: &Sink) {
        let (dev, ino) = s.identity();
        self.file_dev.store(dev, Ordering::Relaxed);
        self.file_ino.store(ino, Ordering::Relaxed);
        self.file_fd.store(s.fd(), Ordering::Release);
    }

    /// Drains everything, writes `end`, writes the last member and closes the file.
    pub(super) fn finish(&self) {
        let _g = InternalGuard::new();
        let mut w = self.writer.lock();
        self.drain_all(&mut w, false);
        // The last buckets precede `end` (the reference writes them after it).
        self.flush_buckets(&mut w, true);
        self.end_record(&mut w);
        self.member(&mut w);
        let mut o = self.output.lock();
        // Whatever is still held after the last attempt is lost.
        let held = o.held();
        o.lost += held;
        o.retry.clear();
        o.retry_bytes = 0;
        if let Some(s) = o.sink.as_mut() {
            s.sync();
        }
        let dropped = self.dropped.load(Ordering::Relaxed);
        if dropped > 0 || o.lost > 0 {
            sys::eprint_line(&format!(
                "[DFTRACER WARN] trace of pid {} ({}): {} events dropped (ring full), {} lost (write errors)",
                self.pid,
                o.sink.as_ref().map(|s| s.path.as_str()).unwrap_or("no file"),
                dropped,
                o.lost
            ));
        }
        self.file_fd.store(-1, Ordering::Release);
        o.closed = o.sink.take().map(|s| (s.path.clone(), s.bytes));
        // A process that recorded nothing has no file: its reserved slot goes back to it.
        sink::release_reserve();
        FINISHED.store(true, Ordering::Release);
    }
}
