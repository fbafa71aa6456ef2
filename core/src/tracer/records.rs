//! The `start` (with its header records) and `end` records of a trace file.

use super::*;

impl Shared {
    pub(super) fn header(&self, w: &mut Writer) {
        w.header_done = true;
        let ctx = self.ctx();
        let out = &mut w.json;
        let tid = self.pid;
        json::meta_str(
            out,
            &ctx,
            tid,
            "HH",
            self.host.as_bytes(),
            self.hhash.as_bytes(),
        );
        json::meta_str(
            out,
            &ctx,
            tid,
            "thread_name",
            self.pid.to_string().as_bytes(),
            b"thread_name",
        );
        json::meta_str(
            out,
            &ctx,
            tid,
            "CM",
            b"time_metric",
            self.cfg.time_metric.as_str().as_bytes(),
        );
        let cwd_h = hash16(self.cwd.as_bytes());
        let cmd_h = hash16(self.cmd.as_bytes());
        let exec_h = hash16(self.exec.as_bytes());
        if self.cfg.metadata {
            json::meta_str(out, &ctx, tid, "FH", self.cwd.as_bytes(), &cwd_h);
            json::meta_str(out, &ctx, tid, "SH", self.cmd.as_bytes(), &cmd_h);
            json::meta_str(out, &ctx, tid, "SH", self.exec.as_bytes(), &exec_h);
            w.paths.insert(self.cwd.as_bytes().into(), cwd_h);
        }
        json::lifecycle_head(
            out,
            &ctx,
            1,
            self.tid_of(self.init_tid),
            "start",
            self.start_ts,
        );
        if self.cfg.metadata {
            out.extend_from_slice(b",\"args\":{\"hhash\":\"");
            out.extend_from_slice(self.hhash.as_bytes());
            out.extend_from_slice(b"\",\"ppid\":");
            json::write_u64(out, self.ppid as u64);
            out.extend_from_slice(b",\"cmd_hash\":");
            json::hash_value(out, &cmd_h);
            out.extend_from_slice(b",\"exec_hash\":");
            json::hash_value(out, &exec_h);
            out.extend_from_slice(b",\"version\":20003,\"implementation\":\"dftracer-rs ");
            out.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
            out.extend_from_slice(b"\",\"date\":");
            json::write_str(out, self.date.as_bytes(), self.date.len());
            out.extend_from_slice(b",\"cwd\":");
            json::hash_value(out, &cwd_h);
            out.push(b'}');
        }
        out.extend_from_slice(b"}\n");
        w.next_id = 2;
    }

    pub(super) fn end_record(&self, w: &mut Writer) {
        if !w.header_done || w.ended {
            return;
        }
        w.ended = true;
        let ctx = self.ctx();
        let id = w.next_id;
        let used = w.used;
        let agg_folded = w.agg.as_ref().map(|a| a.folded);
        let out = &mut w.json;
        json::lifecycle_head(
            out,
            &ctx,
            id,
            sys::gettid(),
            "end",
            crate::clock::now_in(self.cfg.time_metric),
        );
        if self.cfg.metadata {
            out.extend_from_slice(b",\"args\":{\"hhash\":\"");
            out.extend_from_slice(self.hhash.as_bytes());
            out.extend_from_slice(b"\",\"app\":{");
            for (i, (k, v)) in self.app.lock().iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                json::write_str(out, k.as_bytes(), k.len());
                out.push(b':');
                match v {
                    AppValue::Int(n) => json::write_i64(out, *n),
                    AppValue::Str(s) => json::write_str(out, s.as_bytes(), s.len()),
                }
            }
            out.extend_from_slice(b"},\"used\":{");
            let mut first = true;
            let mut sep = |out: &mut Vec<u8>| {
                if !first {
                    out.push(b',');
                }
                first = false;
            };
            for layer in Layer::ALL {
                if used[layer as usize] {
                    sep(out);
                    json::write_str(out, layer.name().as_bytes(), layer.name().len());
                    out.extend_from_slice(b":1");
                }
            }
            for name in self.used_names.lock().iter() {
                // `mark_used("C_APP")` of a layer that also recorded events: one key.
                let is_layer = |l: &Layer| used[*l as usize] && l.name() == name.as_str();
                if Layer::ALL.iter().any(is_layer) {
                    continue;
                }
                sep(out);
                json::write_str(out, name.as_bytes(), name.len());
                out.extend_from_slice(b":1");
            }
            out.extend_from_slice(b"},\"cfg\":{");
            let c = &self.cfg;
            let b = |v: bool| if v { "1" } else { "0" };
            let (log_file, lost) = {
                let o = self.output.lock();
                let path = o
                    .sink
                    .as_ref()
                    .map(|s| s.path.clone())
                    .unwrap_or_else(|| self.expected_path());
                (path, o.lost)
            };
            let fields: [(&str, String); 22] = [
                ("enable", b(c.enable).into()),
                ("metadata", b(c.metadata).into()),
                ("core_affinity", b(c.core_affinity).into()),
                ("time_metric", format!("\"{}\"", c.time_metric.as_str())),
                ("io", b(c.io).into()),
                ("posix", b(c.posix).into()),
                ("stdio", b(c.stdio).into()),
                ("compression", b(c.compression).into()),
                (
                    "trace_all_files",
                    b(c.data_dirs.as_deref() == Some("all")).into(),
                ),
                ("tids", b(c.tids).into()),
                ("bind_signals", b(c.bind_signals).into()),
                ("write_buffer_size", c.write_buffer_size.to_string()),
                ("trace_interval_ms", c.trace_interval_ms.to_string()),
                ("libuv_thread_count", c.libuv_threads.to_string()),
                // What was done: off when a bad rules file turned it off.
                ("aggregation_enable", b(agg_folded.is_some()).into()),
                ("aggregation_type", format!("\"{}\"", c.aggregation_type)),
                ("bind", b(self.bind.load(Ordering::Relaxed)).into()),
                ("flush_interval_ms", c.flush_interval_ms.to_string()),
                ("ring_size", c.ring_size.to_string()),
                ("drop_when_full", b(c.drop_when_full).into()),
                ("tsc", b(crate::clock::tsc_in_use()).into()),
                ("compression_level", c.compression_level.to_string()),
            ];
            for (k, v) in fields {
                out.push(b'"');
                out.extend_from_slice(k.as_bytes());
                out.extend_from_slice(b"\":");
                out.extend_from_slice(v.as_bytes());
                out.push(b',');
            }
            if agg_folded.is_some() && c.aggregation_type == "SELECTIVE" {
                // The rules in force: a file, or "" for the default (every event).
                let f = c.aggregation_file.as_deref().unwrap_or("");
                out.extend_from_slice(b"\"aggregation_file\":");
                json::write_str(out, f.as_bytes(), f.len());
                out.push(b',');
            }
            out.extend_from_slice(b"\"log_file\":");
            json::write_str(out, log_file.as_bytes(), log_file.len());
            out.extend_from_slice(b"},\"build\":{\"mpi\":0,\"hdf5\":0,\"hip\":0,\"cuda\":0,\"finstrument\":0,\"variorum\":0},\"dropped\":");
            json::write_u64(out, self.dropped.load(Ordering::Relaxed));
            out.extend_from_slice(b",\"lost\":");
            json::write_u64(out, lost);
            let sig = self.signal.load(Ordering::Acquire);
            if sig != 0 {
                // The trace was finished because the process was dying by this signal.
                out.extend_from_slice(b",\"signal\":");
                json::write_u64(out, sig as u64);
            }
            if let Some(a) = &agg_folded {
                out.extend_from_slice(b",\"aggregated\":");
                json::write_u64(out, *a);
            }
            out.extend_from_slice(b",\"num_events\":");
            json::write_u64(out, id - 1);
            out.push(b'}');
        }
        out.extend_from_slice(b"}\n");
    }
}
