//! Output: compression and file writes, under `Shared::output`, with the encoder lock
//! released.

use super::*;

/// File state, under `Shared::output`: compression and writes happen here, with the encoder
/// lock released, so producers never wait for a compression.
pub(super) struct Output {
    pub(super) out: Vec<u8>,
    pub(super) gz: Option<GzipWriter>,
    pub(super) sink: Option<Sink>,
    pub(super) failed: bool,
    pub(super) lost: u64,
    /// Path and size of the file once closed by finalize.
    pub(super) closed: Option<(String, u64)>,
}

impl Shared {
    pub(super) fn expected_path(&self) -> String {
        sink::trace_path(
            &self.prefix.lock(),
            &self.file_hash,
            self.origin,
            0,
            self.cfg.compression,
        )
    }

    pub(super) fn write_member(&self, o: &mut Output, json: &[u8], pending: u64) {
        if o.sink.is_none() && !o.failed {
            let prefix = self.prefix.lock().clone();
            match Sink::create(&prefix, &self.file_hash, self.origin, self.cfg.compression) {
                Ok(s) => o.sink = Some(s),
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
        if !o.failed {
            let Output { out, gz, sink, .. } = o;
            let data: &[u8] = match gz {
                Some(g) => {
                    out.clear();
                    g.member(json, out);
                    out
                }
                None => json,
            };
            if let Some(s) = sink.as_mut() {
                if let Err(e) = s.write(data) {
                    o.failed = true;
                    sys::eprint_line(&format!(
                        "[DFTRACER ERROR] cannot write trace file {}: {e}; later events of pid {} are lost",
                        s.path, self.pid
                    ));
                }
            }
        }
        if o.failed {
            o.lost += pending;
        }
        if o.out.capacity() > 64 * 1024 * 1024 {
            o.out = Vec::new();
        }
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
        o.closed = o.sink.take().map(|s| (s.path, s.bytes));
        FINISHED.store(true, Ordering::Release);
    }
}
