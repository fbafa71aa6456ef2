//! Metadata records (ph 4: HH, thread_name, CM, FH, SH, ...), the `start` record with the
//! file's header and the `end` record (complete events of category `dftracer`), and the
//! aggregated records (ph 3).

use super::escape::{hhash_open, kv_u64, text, write_f64, write_i64, write_str, write_u64};
use super::Ctx;
use crate::config::Config;
use crate::event::Layer;
use crate::hash::{hash_str, Hash16};
use crate::record::Text;

/// `start.args.version`: the version of the format the reference's readers check.
pub const VERSION: u32 = 20003;

/// A value of `end.args.app`.
#[derive(Clone, Debug, PartialEq)]
pub enum AppValue {
    Int(i64),
    Str(String),
}

/// A number of an aggregated record.
#[derive(Clone, Copy, Debug)]
pub enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

/// What the file's header records and its `start` record say: the process's facts.
pub struct Header<'a> {
    pub pid: u32,
    pub host: &'a str,
    pub time_metric: &'a str,
    pub cwd: &'a str,
    pub cmd: &'a str,
    pub exec: &'a str,
    pub cwd_hash: Hash16,
    pub cmd_hash: Hash16,
    pub exec_hash: Hash16,
    /// `start`'s tid and ts.
    pub tid: u32,
    pub ts: u64,
    pub ppid: u32,
    pub date: &'a str,
}

/// What the `end` record says.
pub struct End<'a> {
    pub id: u64,
    pub tid: u32,
    pub ts: u64,
    pub app: &'a [(String, AppValue)],
    /// Layers that recorded events, and names given to `mark_used`.
    pub used: &'a [bool; Layer::ALL.len()],
    pub used_names: &'a [String],
    pub cfg: &'a Config,
    /// Events folded into aggregated records (`None`: aggregation off).
    pub aggregated: Option<u64>,
    /// Low-information calls counted in ph 3 records (`None`: `DFTRACER_FOLD_CALLS=0`).
    pub folded: Option<u64>,
    pub bind: bool,
    pub tsc: bool,
    pub log_file: &'a str,
    pub dropped: u64,
    pub lost: u64,
    /// The signal the process was dying by when the trace was finished (0: none).
    pub signal: i32,
}

/// An aggregated record's key: one (name, cat, type, tid) in one time bucket.
pub struct Bucket<'a> {
    pub name: &'a [u8],
    pub cat: &'a [u8],
    pub layer: u8,
    pub ts: u64,
    pub tid: u32,
    /// `dft_cnt`: the events folded into it.
    pub count: u64,
}

/// A metadata record (ph 4): `{"name":N,"cat":"dftracer","type":T,"pid","tid","ph":4,
/// "args":{"hhash","name":K,"value":V}}`.
pub(super) fn meta(
    out: &mut Vec<u8>,
    ctx: &Ctx,
    tid: u32,
    layer: u8,
    name: &Text,
    k: &Text,
    v: &Text,
) {
    out.extend_from_slice(b"{\"name\":");
    text(out, name);
    meta_rest(out, ctx, tid, layer);
    text(out, k);
    out.extend_from_slice(b",\"value\":");
    text(out, v);
    out.extend_from_slice(b"}}\n");
}

/// What [`meta`] writes between the record's name and its key.
fn meta_rest(out: &mut Vec<u8>, ctx: &Ctx, tid: u32, layer: u8) {
    out.extend_from_slice(b",\"cat\":\"dftracer\",");
    kv_u64(out, "type", layer as u64);
    kv_u64(out, "pid", ctx.pid as u64);
    kv_u64(out, "tid", tid as u64);
    out.extend_from_slice(b"\"ph\":4,");
    hhash_open(out, ctx);
    out.extend_from_slice(b",\"name\":");
}

/// What [`meta`] writes before the key of a record named `name` (plain ASCII, no escape).
pub(super) fn meta_head(out: &mut Vec<u8>, ctx: &Ctx, tid: u32, layer: u8, name: &[u8]) {
    debug_assert!(name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_'));
    out.extend_from_slice(b"{\"name\":\"");
    out.extend_from_slice(name);
    out.push(b'"');
    meta_rest(out, ctx, tid, layer);
}

/// A metadata line from its `head` ([`meta_head`]), its key `k` and a value of plain hex
/// digits (a hash): the bytes [`meta`] writes for them.
pub(super) fn fh_line(out: &mut Vec<u8>, head: &[u8], k: &Text, hash: &Hash16) {
    out.extend_from_slice(head);
    text(out, k);
    out.extend_from_slice(b",\"value\":\"");
    out.extend_from_slice(hash);
    out.extend_from_slice(b"\"}}\n");
}

/// [`meta`] for plain strings.
pub(super) fn meta_str(out: &mut Vec<u8>, ctx: &Ctx, tid: u32, name: &str, k: &[u8], v: &[u8]) {
    fn t(b: &[u8]) -> Text<'_> {
        Text {
            bytes: b,
            orig_len: b.len(),
        }
    }
    // Metadata keys/values come from the process (paths, argv): clip like any string.
    let k = crate::event::clip(k, crate::event::MAX_STR);
    meta(out, ctx, tid, 1, &t(name.as_bytes()), &t(k), &t(v));
}

/// A hash as a JSON string value.
fn hash_value(out: &mut Vec<u8>, h: &Hash16) {
    out.push(b'"');
    out.extend_from_slice(hash_str(h).as_bytes());
    out.push(b'"');
}

/// Starts a `dftracer`-category complete event (`start`/`end`) up to and including `"ph":1`.
fn lifecycle_head(out: &mut Vec<u8>, ctx: &Ctx, id: u64, tid: u32, name: &str, ts: u64) {
    out.extend_from_slice(b"{\"id\":");
    write_u64(out, id);
    out.extend_from_slice(b",\"name\":\"");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\",\"cat\":\"dftracer\",\"type\":1,");
    kv_u64(out, "pid", ctx.pid as u64);
    kv_u64(out, "tid", tid as u64);
    kv_u64(out, "ts", ts);
    out.extend_from_slice(b"\"dur\":0,\"ph\":1");
}

/// The header records (HH, thread_name, CM; with metadata FH of the cwd, SH of the command
/// line and of the executable) and `start` (id 1).
pub(super) fn header(out: &mut Vec<u8>, ctx: &Ctx, h: &Header) {
    let tid = h.pid;
    meta_str(out, ctx, tid, "HH", h.host.as_bytes(), ctx.hhash.as_bytes());
    meta_str(
        out,
        ctx,
        tid,
        "thread_name",
        h.pid.to_string().as_bytes(),
        b"thread_name",
    );
    meta_str(
        out,
        ctx,
        tid,
        "CM",
        b"time_metric",
        h.time_metric.as_bytes(),
    );
    if ctx.metadata {
        meta_str(out, ctx, tid, "FH", h.cwd.as_bytes(), &h.cwd_hash);
        meta_str(out, ctx, tid, "SH", h.cmd.as_bytes(), &h.cmd_hash);
        meta_str(out, ctx, tid, "SH", h.exec.as_bytes(), &h.exec_hash);
    }
    lifecycle_head(out, ctx, 1, h.tid, "start", h.ts);
    if ctx.metadata {
        out.extend_from_slice(b",\"args\":{\"hhash\":\"");
        out.extend_from_slice(ctx.hhash.as_bytes());
        out.extend_from_slice(b"\",\"ppid\":");
        write_u64(out, h.ppid as u64);
        out.extend_from_slice(b",\"cmd_hash\":");
        hash_value(out, &h.cmd_hash);
        out.extend_from_slice(b",\"exec_hash\":");
        hash_value(out, &h.exec_hash);
        out.extend_from_slice(b",\"version\":");
        write_u64(out, VERSION as u64);
        out.extend_from_slice(b",\"implementation\":\"dftracer-rs ");
        out.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
        out.extend_from_slice(b"\",\"date\":");
        write_str(out, h.date.as_bytes(), h.date.len());
        out.extend_from_slice(b",\"cwd\":");
        hash_value(out, &h.cwd_hash);
        out.push(b'}');
    }
    out.extend_from_slice(b"}\n");
}

/// The `end` record: what the process used, its configuration, and its counts.
pub(super) fn end(out: &mut Vec<u8>, ctx: &Ctx, e: &End) {
    lifecycle_head(out, ctx, e.id, e.tid, "end", e.ts);
    if ctx.metadata {
        out.extend_from_slice(b",\"args\":{\"hhash\":\"");
        out.extend_from_slice(ctx.hhash.as_bytes());
        out.extend_from_slice(b"\",\"app\":{");
        for (i, (k, v)) in e.app.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_str(out, k.as_bytes(), k.len());
            out.push(b':');
            match v {
                AppValue::Int(n) => write_i64(out, *n),
                AppValue::Str(s) => write_str(out, s.as_bytes(), s.len()),
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
            if e.used[layer as usize] {
                sep(out);
                write_str(out, layer.name().as_bytes(), layer.name().len());
                out.extend_from_slice(b":1");
            }
        }
        for name in e.used_names {
            // `mark_used("C_APP")` of a layer that also recorded events: one key.
            let is_layer = |l: &Layer| e.used[*l as usize] && l.name() == name.as_str();
            if Layer::ALL.iter().any(is_layer) {
                continue;
            }
            sep(out);
            write_str(out, name.as_bytes(), name.len());
            out.extend_from_slice(b":1");
        }
        out.extend_from_slice(b"},\"cfg\":{");
        let c = e.cfg;
        let b = |v: bool| if v { "1" } else { "0" };
        let fields: [(&str, String); 25] = [
            ("enable", b(c.enable).into()),
            ("metadata", b(c.metadata).into()),
            ("core_affinity", b(c.core_affinity).into()),
            ("time_metric", format!("\"{}\"", c.time_metric.as_str())),
            ("io", b(c.io).into()),
            ("posix", b(c.posix).into()),
            ("stdio", b(c.stdio).into()),
            ("hdf5", b(c.hdf5).into()),
            ("mpiio", b(c.mpiio).into()),
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
            ("aggregation_enable", b(e.aggregated.is_some()).into()),
            ("aggregation_type", format!("\"{}\"", c.aggregation_type)),
            ("fold_calls", b(c.fold_calls).into()),
            ("bind", b(e.bind).into()),
            ("flush_interval_ms", c.flush_interval_ms.to_string()),
            ("ring_size", c.ring_size.to_string()),
            ("drop_when_full", b(c.drop_when_full).into()),
            ("tsc", b(e.tsc).into()),
            ("compression_level", c.compression_level.to_string()),
        ];
        for (k, v) in fields {
            out.push(b'"');
            out.extend_from_slice(k.as_bytes());
            out.extend_from_slice(b"\":");
            out.extend_from_slice(v.as_bytes());
            out.push(b',');
        }
        if e.aggregated.is_some() && c.aggregation_type == "SELECTIVE" {
            // The rules in force: a file, or "" for the default (every event).
            let f = c.aggregation_file.as_deref().unwrap_or("");
            out.extend_from_slice(b"\"aggregation_file\":");
            write_str(out, f.as_bytes(), f.len());
            out.push(b',');
        }
        out.extend_from_slice(b"\"log_file\":");
        write_str(out, e.log_file.as_bytes(), e.log_file.len());
        out.extend_from_slice(b"},\"build\":{\"mpi\":0,\"hdf5\":0,\"hip\":0,\"cuda\":0,\"finstrument\":0,\"variorum\":0},\"dropped\":");
        write_u64(out, e.dropped);
        out.extend_from_slice(b",\"lost\":");
        write_u64(out, e.lost);
        let sig = e.signal;
        if sig != 0 {
            // The trace was finished because the process was dying by this signal.
            out.extend_from_slice(b",\"signal\":");
            write_u64(out, sig as u64);
        }
        if let Some(a) = &e.aggregated {
            out.extend_from_slice(b",\"aggregated\":");
            write_u64(out, *a);
        }
        if let Some(f) = &e.folded {
            out.extend_from_slice(b",\"folded\":");
            write_u64(out, *f);
        }
        out.extend_from_slice(b",\"num_events\":");
        write_u64(out, e.id - 1);
        out.push(b'}');
    }
    out.extend_from_slice(b"}\n");
}

/// An aggregated record (ph 3): `name,cat,type,ts,ph,pid,tid,args` with `dft_cnt` and each
/// of `stats` (name, [first, min, max, sum]) plain for a bucket of one event, else as
/// `_min`, `_max`, `_sum`.
pub(super) fn aggregated<'s>(
    out: &mut Vec<u8>,
    ctx: &Ctx,
    b: &Bucket,
    stats: impl IntoIterator<Item = (&'s [u8], [Num; 4])>,
) {
    out.extend_from_slice(b"{\"name\":");
    write_str(out, b.name, b.name.len());
    out.extend_from_slice(b",\"cat\":");
    write_str(out, b.cat, b.cat.len());
    out.extend_from_slice(b",\"type\":");
    write_u64(out, b.layer as u64);
    out.extend_from_slice(b",\"ts\":");
    write_u64(out, b.ts);
    out.extend_from_slice(b",\"ph\":3,\"pid\":");
    write_u64(out, ctx.pid as u64);
    out.extend_from_slice(b",\"tid\":");
    write_u64(out, b.tid as u64);
    out.extend_from_slice(b",\"args\":{\"hhash\":\"");
    out.extend_from_slice(ctx.hhash.as_bytes());
    out.push(b'"');
    for (k, s) in stats {
        let k: &[u8] = if k == b"hhash" { b"user_hhash" } else { k };
        stat(out, k, s, b.count);
    }
    out.extend_from_slice(b",\"dft_cnt\":");
    write_u64(out, b.count);
    out.extend_from_slice(b"}}\n");
}

/// One aggregated field: plain for a bucket of one event, else `_min`, `_max`, `_sum`.
fn stat(out: &mut Vec<u8>, name: &[u8], s: [Num; 4], count: u64) {
    let num = |out: &mut Vec<u8>, n: Num| match n {
        Num::Int(i) => write_i64(out, i),
        Num::Float(f) => write_f64(out, f),
    };
    let [first, min, max, sum] = s;
    if count <= 1 {
        out.push(b',');
        write_str(out, name, name.len());
        out.push(b':');
        num(out, first);
        return;
    }
    for (suffix, v) in [("_min", min), ("_max", max), ("_sum", sum)] {
        let mut k = name.to_vec();
        k.extend_from_slice(suffix.as_bytes());
        out.push(b',');
        write_str(out, &k, k.len());
        out.push(b':');
        num(out, v);
    }
}
