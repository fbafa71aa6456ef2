//! Builders of inputs in the layouts the harnesses read, and the committed seed corpus.
//!
//! `tests/replay.rs` checks that every seed listed here is committed under
//! `seeds/<target>/<name>` (regenerate with
//! `DFTRACER_WRITE_SEEDS=1 cargo test --release --manifest-path fuzz/Cargo.toml`).

use dftracer_core::config::KNOBS;
use dftracer_core::internals::event::{Arg, Layer, Value};
use dftracer_core::internals::record::Pending;

/// Appends fields in the order a harness reads them.
#[derive(Default, Clone)]
pub struct Builder(Vec<u8>);

impl Builder {
    pub fn new() -> Self {
        Builder(Vec::new())
    }
    pub fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    pub fn u16(mut self, v: u16) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn bytes(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
    /// A short string (< 240 bytes) for [`crate::Input::blob`].
    pub fn blob(self, s: &[u8]) -> Self {
        assert!(s.len() < 0xF0, "use long() for long strings");
        self.u8(s.len() as u8).bytes(s)
    }
    /// `pat` (1-8 bytes) repeated to `n` bytes, for [`crate::Input::blob`].
    pub fn long(self, n: u16, pat: &[u8]) -> Self {
        assert!((1..=8).contains(&pat.len()));
        self.u8(0xF0).u16(n).u8(pat.len() as u8 - 1).bytes(pat)
    }
    pub fn finish(self) -> Vec<u8> {
        self.0
    }
}

// json_encoder layout helpers --------------------------------------------------------------

/// Header: flags (bit 0 set = metadata off) and pid.
pub fn enc_header(metadata: bool, pid: u16) -> Builder {
    Builder::new().u8(if metadata { 0 } else { 1 }).u16(pid)
}

fn kind_byte(kind: u8, layer: Layer) -> u8 {
    kind | ((layer as u8) << 2)
}

impl Builder {
    pub fn complete(
        self,
        layer: Layer,
        ts: u64,
        dur: u64,
        name: Builder,
        cat: Builder,
        nargs: u8,
    ) -> Self {
        self.u8(kind_byte(0, layer))
            .u64(ts)
            .u64(dur)
            .bytes(&name.0)
            .bytes(&cat.0)
            .u8(nargs)
    }
    pub fn counter(self, layer: Layer, ts: u64, name: Builder, cat: Builder, nargs: u8) -> Self {
        self.u8(kind_byte(1, layer))
            .u64(ts)
            .bytes(&name.0)
            .bytes(&cat.0)
            .u8(nargs)
    }
    pub fn meta(self, layer: Layer, name: &[u8], key: &[u8], value: &[u8]) -> Self {
        self.u8(kind_byte(2, layer))
            .u64(0)
            .blob(name)
            .blob(key)
            .blob(value)
    }
    /// An arg: key (as a built blob) then a tagged value.
    pub fn arg_int(self, key: &[u8], v: i64) -> Self {
        self.blob(key).u8(0).u64(v as u64)
    }
    pub fn arg_uint(self, key: &[u8], v: u64) -> Self {
        self.blob(key).u8(1).u64(v)
    }
    pub fn arg_float(self, key: &[u8], v: f64) -> Self {
        self.blob(key).u8(2).u64(v.to_bits())
    }
    pub fn arg_bool(self, key: &[u8], v: bool) -> Self {
        self.blob(key).u8(3).u8(v as u8)
    }
    pub fn arg_str(self, key: &[u8], v: Builder) -> Self {
        self.blob(key).u8(4).bytes(&v.0)
    }
    pub fn arg_path(self, key: &[u8], v: Builder) -> Self {
        self.blob(key).u8(5).bytes(&v.0)
    }
}

fn b(s: &[u8]) -> Builder {
    Builder::new().blob(s)
}

fn json_encoder() -> Vec<(&'static str, Vec<u8>)> {
    let typical = enc_header(true, 6427)
        .complete(
            Layer::Python,
            1_795_988_293_894_894,
            12,
            b(b"read"),
            b(b"POSIX"),
            5,
        )
        .arg_path(b"fname", b(b"/data/train/file_0001.npz"))
        .arg_uint(b"size", 65536)
        .arg_int(b"ret", -1)
        .arg_float(b"ratio", 0.25)
        .arg_bool(b"cached", true)
        .counter(
            Layer::Psutil,
            1_795_988_293_894_900,
            b(b"cpu"),
            b(b"sys"),
            2,
        )
        .arg_float(b"percent", 12.5)
        .arg_uint(b"rss", 1 << 33)
        .meta(Layer::Dftracer, b"CM", b"time_metric", b"US")
        .finish();
    let hostile = enc_header(true, 1)
        .complete(
            Layer::CApp,
            0,
            0,
            b(b"q\"uo\\te\n\r\t\x08\x0c\x01\x7f"),
            b(b"p\x86+m\xa5\x7f"),
            4,
        )
        .arg_str(
            b"hh\xffash",
            b(b"\xed\xa0\x80 surrogate \xf4\x90\x80\x80 too big \xc0\xaf overlong"),
        )
        .arg_int(b"hhash", 5)
        .arg_str(b"user_hhash", b(b"dup"))
        .arg_str(b"\x00\x1f", b(b"</script>\\u0000"))
        .finish();
    let long = enc_header(true, 2)
        // 2-byte chars: the cut at MAX_STR falls on a boundary.
        .complete(
            Layer::Python,
            1,
            2,
            Builder::new().long(5000, "é".as_bytes()),
            Builder::new().long(4097, b"c"),
            4,
        )
        // 3-byte chars: the cut falls inside one and backs off.
        .arg_str(b"euro", Builder::new().long(4099, "ab€".as_bytes()))
        .arg_path(b"path", Builder::new().long(9000, b"/dir"))
        .arg_str(b"exact", Builder::new().long(4096, b"x"))
        .arg_str(b"invalid_tail", Builder::new().long(4097, b"\xe2\x82"))
        .counter(
            Layer::Python,
            3,
            Builder::new().long(4096, b"n"),
            b(b"c"),
            1,
        )
        .bytes(&Builder::new().long(300, b"k").0)
        .u8(3)
        .u8(1)
        .finish();
    let numbers = enc_header(true, 3)
        .complete(Layer::Mpi, u64::MAX, u64::MAX, b(b"nums"), b(b"c"), 12)
        .arg_float(b"nan", f64::NAN)
        .arg_float(b"inf", f64::INFINITY)
        .arg_float(b"-inf", f64::NEG_INFINITY)
        .arg_float(b"-0", -0.0)
        .arg_float(b"min", 5e-324)
        .arg_float(b"max", f64::MAX)
        .arg_float(b"one", 1.0)
        .arg_float(b"e16", 1e16)
        .arg_int(b"imin", i64::MIN)
        .arg_int(b"imax", i64::MAX)
        .arg_uint(b"umax", u64::MAX)
        .arg_float(b"third", 1.0 / 3.0)
        .finish();
    let mut many = enc_header(true, 4).counter(Layer::Cuda, 9, b(b"many"), b(b"args"), 40);
    for i in 0..40u8 {
        many = many.arg_int(&[b'k', b'0' + i / 10, b'0' + i % 10], i as i64);
    }
    let no_metadata = enc_header(false, 5)
        .complete(Layer::LibcIo, 10, 20, b(b"open64"), b(b"POSIX"), 1)
        .arg_str(b"fname", b(b"/x"))
        .counter(Layer::Psutil, 11, b(b"mem"), b(b"sys"), 1)
        .arg_uint(b"rss", 1)
        .meta(Layer::Dftracer, b"FH", b"/path/\"q\"", b"0123456789abcdef")
        .finish();
    vec![
        ("typical", typical),
        ("hostile_strings", hostile),
        ("long_strings", long),
        ("numbers", numbers),
        ("many_args", many.finish()),
        ("no_metadata", no_metadata),
    ]
}

fn gzip_member() -> Vec<(&'static str, Vec<u8>)> {
    let line = b"{\"id\":1,\"name\":\"read\",\"cat\":\"POSIX\",\"ts\":1,\"dur\":2,\"ph\":1}\n";
    // op 0x40 | n: pattern of n+1 bytes repeated to 4 × u16 bytes.
    let json = Builder::new()
        .u8(1)
        .u8(0x40 | 0x1F)
        .u16(50_000)
        .bytes(&line[..32])
        .u8(0x00)
        .u16(5)
        .bytes(b"tail\n")
        .finish();
    let levels = Builder::new()
        .u8(0)
        .u8(0x00)
        .u16(11)
        .bytes(b"stored data")
        .u8(0x80 | 10)
        .u16(11)
        .bytes(b"level 10...")
        .u8(0x80 | 11)
        .u16(11)
        .bytes(b"level 11 (clamped)")
        .u8(0xC0 | 9)
        .u16(20_000)
        .bytes(b"abcdefghij")
        .finish();
    let empty = Builder::new()
        .u8(6)
        .u8(0)
        .u16(0)
        .u8(0)
        .u16(0)
        .u8(0x40)
        .u16(0)
        .finish();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let noise: Vec<u8> = (0..6000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let binary = Builder::new().u8(3).u8(0).u16(6000).bytes(&noise).finish();
    vec![
        ("json_lines", json),
        ("levels", levels),
        ("empty_members", empty),
        ("incompressible", binary),
    ]
}

fn ring_model() -> Vec<(&'static str, Vec<u8>)> {
    // cap 256 (slots = 16): op 0 = push 8 × (1 + next % 16), 5 = drain, 6 = discard,
    // 7 | len << 3 = push until full.
    let mut wrap = Builder::new().u16(256);
    for round in 0..20u8 {
        wrap = wrap.u8(0).u8(4).u8(0).u8(2).u8(0).u8(round % 16);
        wrap = wrap.u8(5);
    }
    let burst = Builder::new()
        .u16(200) // rounds up to 256
        .u8(7 | (4 << 3))
        .u8(5)
        .u8(7 | (15 << 3)) // cap/2 records
        .u8(5)
        .u8(0)
        .u8(2)
        .u8(7 | (6 << 3))
        .u8(6) // discard while full
        .u8(7)
        .u8(5)
        .finish();
    let small = Builder::new()
        .u16(0)
        .u8(0)
        .u8(3)
        .u8(0)
        .u8(1)
        .u8(0)
        .u8(0)
        .u8(5)
        .u8(7 | (3 << 3))
        .u8(5)
        .finish();
    let big = Builder::new()
        .u16(4999)
        .u8(7 | (20 << 3))
        .u8(5)
        .u8(0)
        .u8(255)
        .u8(0)
        .u8(255)
        .u8(0)
        .u8(255)
        .u8(5)
        .finish();
    vec![
        ("wrap_pad", wrap.finish()),
        ("burst_full", burst),
        ("min_capacity", small),
        ("big_records", big),
    ]
}

/// Index byte selecting a knob by its variable in the config layout.
pub fn knob(env: &str) -> u8 {
    KNOBS.iter().position(|k| k.env == env).expect("known knob") as u8
}

/// Index byte selecting one of the harness's canned values.
pub fn value(v: &str) -> u8 {
    crate::VALUES
        .iter()
        .position(|x| *x == v)
        .expect("known value") as u8
}

fn config() -> Vec<(&'static str, Vec<u8>)> {
    let yaml = "enable: true\ntracer:\n  log_file: /x/y\n  time_metric: MS\n  compression: false\n  data_dirs: [/a, /b]\nfeatures:\n  metadata: true\n  tid: false\n  io:\n    enable: false\ninternal:\n  write_buffer_size: 1000\n  ring_size: 12\n  compression_level: 99\nprofiler:\n  init: PRELOAD\n";
    let full = Builder::new()
        .u8(1)
        .u8(2)
        .u8(knob("DFTRACER_TIME_METRIC"))
        .u8(value("NS"))
        .u8(knob("DFTRACER_DISABLE_TIDS"))
        .u8(value("off"))
        .bytes(yaml.as_bytes())
        .finish();
    let bad = Builder::new()
        .u8(1)
        .u8(1)
        .u8(knob("DFTRACER_ENABLE"))
        .u8(value("1"))
        .bytes(b"enable: [unclosed\n")
        .finish();
    let words = Builder::new()
        .u8(0)
        .u8(6)
        .u8(knob("DFTRACER_ENABLE"))
        .u8(value("yes"))
        .u8(knob("DFTRACER_INC_METADATA"))
        .u8(value("ON"))
        .u8(knob("DFTRACER_WRITE_BUFFER_SIZE"))
        .u8(value("18446744073709551616"))
        .u8(knob("DFTRACER_RING_SIZE"))
        .u8(value("18446744073709551615"))
        .u8(knob("DFTRACER_LOG_FILE"))
        .u8(255)
        .blob(b"/tmp/trace \xff dir/p")
        .u8(250)
        .blob(b"DFTRACER_NOT_A_KNOB")
        .u8(value("1"))
        .finish();
    let level = Builder::new()
        .u8(0)
        .u8(1)
        .u8(knob("DFTRACER_COMPRESSION_LEVEL"))
        .u8(value("300"))
        .finish();
    let yaml_types = Builder::new()
        .u8(1)
        .u8(0)
        .bytes(b"enable: 1\ntracer: {log_file: ~, time_metric: [NS]}\nfeatures: {metadata: {x: 1}, tid: maybe, interval: -5}\ninternal: {ring_size: 1.5e9, flush_interval_ms: 0}\n---\nsecond: doc\n")
        .finish();
    vec![
        ("yaml_then_env", full),
        ("bad_yaml", bad),
        ("env_words", words),
        ("compression_level_300", level),
        ("yaml_odd_types", yaml_types),
    ]
}

fn record(p: &Pending) -> Vec<u8> {
    let mut buf = vec![0u8; p.len()];
    p.write(&mut buf);
    buf
}

fn record_decode() -> Vec<(&'static str, Vec<u8>)> {
    let args = [
        Arg::int("i", -5),
        Arg::new("u", Value::UInt(u64::MAX)),
        Arg::new("f", Value::Float(f64::NAN)),
        Arg::new("b", Value::Bool(true)),
        Arg::str("s", "hello \"x\""),
        Arg::new("p", Value::Path(b"/a/b")),
    ];
    let complete = record(&Pending::Complete {
        layer: Layer::Python,
        name: b"n\xff",
        cat: b"c",
        ts: 7,
        dur: 9,
        args: &args,
    });
    let counter = record(&Pending::Counter {
        layer: Layer::Psutil,
        name: b"cpu",
        cat: b"sys",
        ts: 1,
        args: &args[..2],
    });
    let meta = record(&Pending::Meta {
        layer: Layer::Dftracer,
        name: b"CM",
        key: b"time_metric",
        value: b"US",
    });
    let mut lying = complete.clone();
    lying[6] = 200; // nargs larger than the args present
    let mut huge_orig = meta.clone();
    huge_orig[8..12].copy_from_slice(&u32::MAX.to_le_bytes()); // name's original length
    vec![
        ("complete", complete.clone()),
        ("counter", counter),
        ("meta", meta),
        ("truncated", complete[..complete.len() / 2].to_vec()),
        ("nargs_lie", lying),
        ("orig_len_max", huge_orig),
    ]
}

/// Every seed: (target, name, bytes).
pub fn all() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let mut out = Vec::new();
    for (target, seeds) in [
        ("json_encoder", json_encoder()),
        ("gzip_member", gzip_member()),
        ("ring_model", ring_model()),
        ("config", config()),
        ("record_decode", record_decode()),
    ] {
        for (name, data) in seeds {
            out.push((target, name, data));
        }
    }
    out
}
