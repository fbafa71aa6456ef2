//! Events as frontends give them ([`Arg`], [`Value`], [`Layer`]) and their compact binary
//! form inside a thread's ring ([`Record`]). Everything here is bounded: strings are clipped
//! to [`MAX_STR`] bytes (the encoder then writes a visible truncation marker), keys to
//! [`MAX_KEY`], and at most [`MAX_ARGS`] args are kept (the rest are counted and reported as
//! `dft_args_dropped`). The largest record is therefore [`MAX_RECORD`] bytes.

/// Instrumentation layer, the integer `type` of every record (reference §2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Layer {
    Unknown = 0,
    Dftracer = 1,
    CApp = 2,
    LibcIo = 3,
    Hip = 4,
    Hdf5 = 5,
    Python = 6,
    Psutil = 7,
    Finstrument = 8,
    CppApp = 9,
    Mpi = 10,
    Papi = 11,
    Omnistat = 12,
    Variorum = 13,
    Cuda = 14,
}

impl Layer {
    pub const ALL: [Layer; 15] = [
        Layer::Unknown,
        Layer::Dftracer,
        Layer::CApp,
        Layer::LibcIo,
        Layer::Hip,
        Layer::Hdf5,
        Layer::Python,
        Layer::Psutil,
        Layer::Finstrument,
        Layer::CppApp,
        Layer::Mpi,
        Layer::Papi,
        Layer::Omnistat,
        Layer::Variorum,
        Layer::Cuda,
    ];
    pub fn from_u8(v: u8) -> Layer {
        Layer::ALL
            .get(v as usize)
            .copied()
            .unwrap_or(Layer::Unknown)
    }
    /// Name used as a key of `end.args.used`.
    pub fn name(self) -> &'static str {
        match self {
            Layer::Unknown => "UNKNOWN",
            Layer::Dftracer => "DFTRACER",
            Layer::CApp => "C_APP",
            Layer::LibcIo => "LIBC_IO",
            Layer::Hip => "HIP",
            Layer::Hdf5 => "HDF5",
            Layer::Python => "PYTHON",
            Layer::Psutil => "PSUTIL",
            Layer::Finstrument => "FINSTRUMENT",
            Layer::CppApp => "CPP_APP",
            Layer::Mpi => "MPI",
            Layer::Papi => "PAPI",
            Layer::Omnistat => "OMNISTAT",
            Layer::Variorum => "VARIORUM",
            Layer::Cuda => "CUDA",
        }
    }
}

/// An argument value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    Int(i64),
    UInt(u64),
    Float(f64),
    Bool(bool),
    /// Any bytes; invalid UTF-8 is replaced when encoded.
    Str(&'a [u8]),
    /// A file path: written as `"<key>":"<hash>"` with an `FH` record emitted once per file.
    Path(&'a [u8]),
}

/// A named argument. Keys are bytes so that frontends never need to validate them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Arg<'a> {
    pub key: &'a [u8],
    pub value: Value<'a>,
}

impl<'a> Arg<'a> {
    pub fn new(key: &'a str, value: Value<'a>) -> Self {
        Arg {
            key: key.as_bytes(),
            value,
        }
    }
    pub fn int(key: &'a str, v: i64) -> Self {
        Arg::new(key, Value::Int(v))
    }
    pub fn str(key: &'a str, v: &'a str) -> Self {
        Arg::new(key, Value::Str(v.as_bytes()))
    }
}

pub use crate::files::{FileHandle, FileRef, Pinned};

/// How a [`Schema`] value slot is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The slot's `u64` bits as a signed integer.
    Int,
    /// As an unsigned integer.
    UInt,
}

/// The fixed shape of a frequent event: name, category and arg keys known at compile time.
/// A [`Pending::Static`] record of it carries only a pointer to the schema, the values and
/// an optional [`FileHandle`] (a slot address and its generation, see [`crate::files`]): a
/// few stores on the hot path, and the writer copies the names
/// without escaping them (checked plain by [`Schema::new`], at compile time for a `static`).
///
/// The JSON args are the slots in order, then `file_key` with the file's hash when a file
/// is given.
#[derive(Debug)]
pub struct Schema {
    pub layer: Layer,
    pub name: &'static str,
    pub cat: &'static str,
    pub keys: &'static [(&'static str, Slot)],
    pub file_key: &'static str,
}

impl Schema {
    /// Panics (at compile time in a `static`) if a string needs JSON escaping, a key is
    /// `hhash`, or there are more than [`MAX_ARGS`] slots.
    pub const fn new(
        layer: Layer,
        name: &'static str,
        cat: &'static str,
        keys: &'static [(&'static str, Slot)],
        file_key: &'static str,
    ) -> Schema {
        assert!(plain(name) && plain(cat) && plain(file_key));
        assert!(keys.len() < MAX_ARGS);
        let mut i = 0;
        while i < keys.len() {
            assert!(plain(keys[i].0));
            assert!(!eq(keys[i].0, "hhash"));
            i += 1;
        }
        assert!(!eq(file_key, "hhash"));
        Schema {
            layer,
            name,
            cat,
            keys,
            file_key,
        }
    }
}

/// Printable ASCII without `"` or `\`: written into JSON as is.
const fn plain(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] < 0x20 || b[i] >= 0x7f || b[i] == b'"' || b[i] == b'\\' {
            return false;
        }
        i += 1;
    }
    true
}

const fn eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Longest string kept (bytes); longer ones are clipped at a character boundary and marked.
pub const MAX_STR: usize = 4096;
/// Longest argument key kept.
pub const MAX_KEY: usize = 256;
/// Most args kept per event.
pub const MAX_ARGS: usize = 32;
/// Largest possible record (header + two strings + MAX_ARGS args), rounded up.
pub const MAX_RECORD: usize =
    align8(HEADER + 16 + 2 * (8 + MAX_STR) + MAX_ARGS * (8 + MAX_KEY + 1 + 8 + MAX_STR));

const HEADER: usize = 8;

const fn align8(n: usize) -> usize {
    (n + 7) & !7
}

/// Record kinds in the ring. 0 is the ring's wrap padding.
pub const KIND_PAD: u8 = 0;
pub const KIND_COMPLETE: u8 = 1;
pub const KIND_COUNTER: u8 = 2;
pub const KIND_META: u8 = 4;
/// A [`Pending::Static`] record: only [`Record::decode_trusted`] reads it.
pub const KIND_STATIC: u8 = 5;

/// Set on the kind byte when some arg is a [`Value::Path`] (the writer then emits FH records).
const HAS_PATH: u8 = 0x80;

const TAG_INT: u8 = 1;
const TAG_UINT: u8 = 2;
const TAG_FLOAT: u8 = 3;
const TAG_BOOL: u8 = 4;
const TAG_STR: u8 = 5;
const TAG_PATH: u8 = 6;

/// Clips `s` to at most `max` bytes, backing off to a UTF-8 character boundary when the cut
/// would split one (invalid input is cut where it is).
pub fn clip(s: &[u8], max: usize) -> &[u8] {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    let mut back = 0;
    while end > 0 && back < 3 && (s[end] & 0xC0) == 0x80 {
        end -= 1;
        back += 1;
    }
    if back == 3 && (s[end] & 0xC0) == 0x80 {
        end = max;
    }
    &s[..end]
}

fn str_len(s: &[u8], max: usize) -> usize {
    8 + clip(s, max).len()
}

fn value_len(v: &Value) -> usize {
    1 + match v {
        Value::Int(_) | Value::UInt(_) | Value::Float(_) => 8,
        Value::Bool(_) => 1,
        Value::Str(s) | Value::Path(s) => str_len(s, MAX_STR),
    }
}

/// What a record to be written looks like (borrowing the caller's data).
pub enum Pending<'a> {
    Complete {
        layer: Layer,
        name: &'a [u8],
        cat: &'a [u8],
        ts: u64,
        dur: u64,
        args: &'a [Arg<'a>],
    },
    Counter {
        layer: Layer,
        name: &'a [u8],
        cat: &'a [u8],
        ts: u64,
        args: &'a [Arg<'a>],
    },
    Meta {
        layer: Layer,
        name: &'a [u8],
        key: &'a [u8],
        value: &'a [u8],
    },
    /// A complete event of a fixed [`Schema`]: `vals` are the slots' values (extra values
    /// are ignored, missing ones are left out).
    Static {
        schema: &'static Schema,
        ts: u64,
        dur: u64,
        vals: &'a [u64],
        file: Option<FileHandle>,
    },
}

impl Pending<'_> {
    /// Total bytes of the record (8-aligned).
    pub fn len(&self) -> usize {
        let body = match self {
            Pending::Complete {
                name, cat, args, ..
            } => 16 + str_len(name, MAX_STR) + str_len(cat, MAX_STR) + args_len(args),
            Pending::Counter {
                name, cat, args, ..
            } => 8 + str_len(name, MAX_STR) + str_len(cat, MAX_STR) + args_len(args),
            Pending::Meta {
                name, key, value, ..
            } => str_len(name, MAX_STR) + str_len(key, MAX_STR) + str_len(value, MAX_STR),
            Pending::Static { schema, vals, .. } => 40 + 8 * vals.len().min(schema.keys.len()),
        };
        align8(HEADER + body)
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the record into `out`, which is exactly `self.len()` bytes.
    pub fn write(&self, out: &mut [u8]) {
        let total = out.len();
        if let Pending::Static {
            schema,
            ts,
            dur,
            vals,
            file,
        } = self
        {
            // Whole words: a handful of stores.
            let n = vals.len().min(schema.keys.len());
            let head = total as u64
                | (KIND_STATIC as u64) << 32
                | (schema.layer as u64) << 40
                | (n as u64) << 48;
            let words = [
                head,
                *schema as *const Schema as usize as u64,
                file.map_or(0, |f| f.file() as *const FileRef as usize as u64),
                file.map_or(0, |f| f.generation() as u64),
                *ts,
                *dur,
            ];
            let (fixed, rest) = out.split_at_mut(48);
            for (d, w) in fixed.chunks_exact_mut(8).zip(words) {
                d.copy_from_slice(&w.to_le_bytes());
            }
            for (d, v) in rest.chunks_exact_mut(8).zip(&vals[..n]) {
                d.copy_from_slice(&v.to_le_bytes());
            }
            return;
        }
        let mut w = Cursor { buf: out, pos: 0 };
        w.u32(total as u32);
        match self {
            Pending::Complete {
                layer,
                name,
                cat,
                ts,
                dur,
                args,
            } => {
                w.header(KIND_COMPLETE, *layer, args);
                w.u64(*ts);
                w.u64(*dur);
                w.str(name, MAX_STR);
                w.str(cat, MAX_STR);
                w.args(args);
            }
            Pending::Counter {
                layer,
                name,
                cat,
                ts,
                args,
            } => {
                w.header(KIND_COUNTER, *layer, args);
                w.u64(*ts);
                w.str(name, MAX_STR);
                w.str(cat, MAX_STR);
                w.args(args);
            }
            Pending::Meta {
                layer,
                name,
                key,
                value,
            } => {
                w.header(KIND_META, *layer, &[]);
                w.str(name, MAX_STR);
                w.str(key, MAX_STR);
                w.str(value, MAX_STR);
            }
            Pending::Static { .. } => {}
        }
    }
}

fn args_len(args: &[Arg]) -> usize {
    args.iter()
        .take(MAX_ARGS)
        .map(|a| str_len(a.key, MAX_KEY) + value_len(&a.value))
        .sum()
}

struct Cursor<'b> {
    buf: &'b mut [u8],
    pos: usize,
}

impl Cursor<'_> {
    #[inline(always)]
    fn bytes(&mut self, b: &[u8]) {
        self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }
    #[inline(always)]
    fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }
    #[inline(always)]
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    fn header(&mut self, kind: u8, layer: Layer, args: &[Arg]) {
        // HAS_PATH is or-ed into the kind byte (offset 4) by `args` when it writes a path.
        let dropped = args.len().saturating_sub(MAX_ARGS).min(255) as u8;
        self.bytes(&[kind, layer as u8, args.len().min(MAX_ARGS) as u8, dropped]);
    }
    #[inline(always)]
    fn str(&mut self, s: &[u8], max: usize) {
        let kept = clip(s, max);
        let head = (s.len().min(u32::MAX as usize) as u64) | ((kept.len() as u64) << 32);
        self.u64(head);
        let n = kept.len();
        let dst = &mut self.buf[self.pos..self.pos + n];
        if n <= 16 {
            // Short keys and names: a byte loop beats a memcpy call.
            for (d, b) in dst.iter_mut().zip(kept) {
                *d = *b;
            }
        } else {
            dst.copy_from_slice(kept);
        }
        self.pos += n;
    }
    fn args(&mut self, args: &[Arg]) {
        for a in args.iter().take(MAX_ARGS) {
            self.str(a.key, MAX_KEY);
            match a.value {
                Value::Int(v) => {
                    self.bytes(&[TAG_INT]);
                    self.u64(v as u64)
                }
                Value::UInt(v) => {
                    self.bytes(&[TAG_UINT]);
                    self.u64(v)
                }
                Value::Float(v) => {
                    self.bytes(&[TAG_FLOAT]);
                    self.u64(v.to_bits())
                }
                Value::Bool(v) => self.bytes(&[TAG_BOOL, v as u8]),
                Value::Str(s) => {
                    self.bytes(&[TAG_STR]);
                    self.str(s, MAX_STR)
                }
                Value::Path(s) => {
                    self.buf[4] |= HAS_PATH;
                    self.bytes(&[TAG_PATH]);
                    self.str(s, MAX_STR)
                }
            }
        }
    }
}

/// A string read back from a record: the kept bytes and the original length.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Text<'a> {
    pub bytes: &'a [u8],
    pub orig_len: usize,
}

impl Text<'_> {
    pub fn truncated(&self) -> bool {
        self.orig_len > self.bytes.len()
    }
}

/// A decoded argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgValue<'a> {
    Int(i64),
    UInt(u64),
    Float(f64),
    Bool(bool),
    Str(Text<'a>),
    Path(Text<'a>),
}

/// A record decoded from a ring slice (zero-copy).
#[derive(Debug)]
pub struct Record<'a> {
    pub kind: u8,
    pub layer: Layer,
    pub ts: u64,
    pub dur: u64,
    /// Complete/counter: event name; meta: record name (e.g. `CM`).
    pub name: Text<'a>,
    /// Complete/counter: category; meta: key.
    pub cat: Text<'a>,
    /// Meta only: value.
    pub value: Text<'a>,
    pub nargs: u8,
    pub args_dropped: u8,
    /// Some arg is a path (binary records; a static record's file is [`Record::file`]).
    pub has_path: bool,
    /// A [`Pending::Static`] record's schema.
    pub schema: Option<&'static Schema>,
    /// A [`Pending::Static`] record's file, pinned while the record lives (`None` also when
    /// the record was stale: its slot was reused, see [`crate::files`]).
    pub file: Option<Pinned>,
    args: &'a [u8],
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.buf.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn text(&mut self) -> Option<Text<'a>> {
        let orig_len = self.u32()? as usize;
        let kept = self.u32()? as usize;
        Some(Text {
            bytes: self.take(kept)?,
            orig_len,
        })
    }
}

/// A [`Pending::Static`] record read back: the writer's fast path (no strings to decode, no
/// [`Record`] to build).
pub struct StaticRecord<'a> {
    pub layer: Layer,
    pub schema: &'static Schema,
    pub ts: u64,
    pub dur: u64,
    /// The record's file, pinned while the record lives (`None` also when the record was
    /// stale: its slot was reused, see [`crate::files`]).
    pub file: Option<Pinned>,
    /// The slot values, 8 little-endian bytes each: at most `schema.keys.len()` of them.
    pub vals: &'a [u8],
}

/// Bytes of a static record before its slot values (see [`Pending::write`]).
const STATIC_HEAD: usize = 48;

impl<'a> StaticRecord<'a> {
    /// Reads a static record; `None` for any other record or a short buffer.
    ///
    /// # Safety
    /// As [`Record::decode_trusted`]: `buf` must hold a record written by [`Pending::write`]
    /// in this process (the schema and file addresses it holds are dereferenced here).
    #[allow(unsafe_code)]
    #[inline]
    pub unsafe fn decode(buf: &'a [u8]) -> Option<StaticRecord<'a>> {
        let head: &[u8; STATIC_HEAD] = buf.get(..STATIC_HEAD)?.try_into().ok()?;
        if head[4] != KIND_STATIC {
            return None;
        }
        let word = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&head[8 * i..8 * i + 8]);
            u64::from_le_bytes(b)
        };
        let (sp, fp, gen) = (word(1) as usize, word(2) as usize, word(3) as u32);
        // SAFETY: per this function's contract, `sp` is the address of a `&'static Schema`
        // and `fp` is 0 or the address of a never-freed `FileRef` (Pending::write).
        let schema: &'static Schema = unsafe { &*(sp as *const Schema) };
        let n = (head[6] as usize).min(schema.keys.len());
        let vals = buf.get(STATIC_HEAD..STATIC_HEAD + 8 * n)?;
        let file = if fp == 0 {
            None
        } else {
            // SAFETY: as above. A stale handle (slot reused since) fails to pin.
            unsafe { FileHandle::from_parts(fp, gen) }.pin_transient()
        };
        Some(StaticRecord {
            // The writer of a static record stores its schema's layer (byte 5).
            layer: schema.layer,
            schema,
            ts: word(4),
            dur: word(5),
            file,
            vals,
        })
    }

    /// The record's parts, borrowed.
    #[inline]
    pub fn view(&self) -> StaticView<'_> {
        StaticView {
            schema: self.schema,
            layer: self.layer,
            ts: self.ts,
            dur: self.dur,
            vals: self.vals,
            file: self.file.as_ref(),
        }
    }
}

/// What a static record's line is rendered from ([`crate::format::Encoder::complete_static`]).
#[derive(Clone, Copy)]
pub struct StaticView<'a> {
    pub schema: &'static Schema,
    pub layer: Layer,
    pub ts: u64,
    pub dur: u64,
    /// The slot values, 8 little-endian bytes each (the schema's first keys).
    pub vals: &'a [u8],
    pub file: Option<&'a Pinned>,
}

impl<'a> Record<'a> {
    /// Decodes one record; `None` if the bytes are not a well-formed record.
    pub fn decode(buf: &'a [u8]) -> Option<Record<'a>> {
        let mut r = Reader { buf, pos: 0 };
        let _len = r.u32()?;
        let raw_kind = r.u8()?;
        let kind = raw_kind & !HAS_PATH;
        let layer = Layer::from_u8(r.u8()?);
        let nargs = r.u8()?;
        let args_dropped = r.u8()?;
        let empty = Text {
            bytes: &[],
            orig_len: 0,
        };
        let (ts, dur, name, cat, value) = match kind {
            KIND_COMPLETE => (r.u64()?, r.u64()?, r.text()?, r.text()?, empty),
            KIND_COUNTER => (r.u64()?, 0, r.text()?, r.text()?, empty),
            KIND_META => (0, 0, r.text()?, r.text()?, r.text()?),
            _ => return None,
        };
        Some(Record {
            kind,
            layer,
            ts,
            dur,
            name,
            cat,
            value,
            nargs,
            args_dropped,
            has_path: raw_kind & HAS_PATH != 0,
            schema: None,
            file: None,
            args: &buf[r.pos..],
        })
    }

    /// Like [`Record::decode`], and also reads [`Pending::Static`] records.
    ///
    /// # Safety
    /// `buf` must hold a record written by [`Pending::write`] in this process: a static
    /// record holds the addresses of a `&'static Schema` and of a never-freed `FileRef`
    /// (with the generation it names), which are dereferenced here.
    #[allow(unsafe_code)]
    pub unsafe fn decode_trusted(buf: &'a [u8]) -> Option<Record<'a>> {
        if buf.get(4) != Some(&KIND_STATIC) {
            return Record::decode(buf);
        }
        // SAFETY: this function's contract is `StaticRecord::decode`'s.
        let s = unsafe { StaticRecord::decode(buf) }?;
        let text = |s: &'static str| Text {
            bytes: s.as_bytes(),
            orig_len: s.len(),
        };
        Some(Record {
            kind: KIND_COMPLETE,
            layer: s.layer,
            ts: s.ts,
            dur: s.dur,
            name: text(s.schema.name),
            cat: text(s.schema.cat),
            value: text(""),
            nargs: (s.vals.len() / 8) as u8 + s.file.is_some() as u8,
            args_dropped: 0,
            has_path: false,
            schema: Some(s.schema),
            file: s.file,
            args: s.vals,
        })
    }

    /// A static record's parts, borrowed (`None` for other records).
    pub fn static_view(&self) -> Option<StaticView<'_>> {
        Some(StaticView {
            schema: self.schema?,
            layer: self.layer,
            ts: self.ts,
            dur: self.dur,
            vals: self.args,
            file: self.file.as_ref(),
        })
    }

    /// A static record's slot values with their keys (empty for other records).
    pub fn slots(&self) -> impl Iterator<Item = (&'static str, Slot, u64)> + 'a {
        let keys: &'static [(&'static str, Slot)] = self.schema.map_or(&[], |s| s.keys);
        let vals = if self.schema.is_some() {
            self.args
        } else {
            &[]
        };
        keys.iter()
            .zip(vals.chunks_exact(8))
            .map(|(&(k, slot), v)| {
                let mut b = [0u8; 8];
                b.copy_from_slice(v);
                (k, slot, u64::from_le_bytes(b))
            })
    }

    /// Bytes of the record's encoded args (a bound on what they expand to, see `json`).
    pub fn args_len(&self) -> usize {
        self.args.len()
    }

    /// The record's args in order.
    pub fn args(&self) -> ArgIter<'_> {
        ArgIter {
            r: Reader {
                buf: self.args,
                pos: 0,
            },
            left: self.nargs,
            schema: self.schema,
            file: self.file.as_ref(),
        }
    }
}

pub struct ArgIter<'a> {
    r: Reader<'a>,
    left: u8,
    schema: Option<&'static Schema>,
    file: Option<&'a Pinned>,
}

impl<'a> Iterator for ArgIter<'a> {
    type Item = (Text<'a>, ArgValue<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        if let Some(schema) = self.schema {
            let i = self.r.pos / 8;
            if let Some(&(k, slot)) = schema.keys.get(i).filter(|_| self.r.pos < self.r.buf.len()) {
                let v = self.r.u64()?;
                let key = Text {
                    bytes: k.as_bytes(),
                    orig_len: k.len(),
                };
                return Some(match slot {
                    Slot::Int => (key, ArgValue::Int(v as i64)),
                    Slot::UInt => (key, ArgValue::UInt(v)),
                });
            }
            let f = self.file.take()?;
            let key = Text {
                bytes: schema.file_key.as_bytes(),
                orig_len: schema.file_key.len(),
            };
            return Some((
                key,
                ArgValue::Path(Text {
                    bytes: f.path(),
                    orig_len: f.path().len(),
                }),
            ));
        }
        let key = self.r.text()?;
        let v = match self.r.u8()? {
            TAG_INT => ArgValue::Int(self.r.u64()? as i64),
            TAG_UINT => ArgValue::UInt(self.r.u64()?),
            TAG_FLOAT => ArgValue::Float(f64::from_bits(self.r.u64()?)),
            TAG_BOOL => ArgValue::Bool(self.r.u8()? != 0),
            TAG_STR => ArgValue::Str(self.r.text()?),
            TAG_PATH => ArgValue::Path(self.r.text()?),
            _ => return None,
        };
        Some((key, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_complete() {
        let long = vec![b'x'; MAX_STR + 10];
        let args = [
            Arg::int("i", -5),
            Arg::new("u", Value::UInt(u64::MAX)),
            Arg::new("f", Value::Float(1.5)),
            Arg::new("b", Value::Bool(true)),
            Arg::new("s", Value::Str(&long)),
            Arg::new("p", Value::Path(b"/a/b")),
        ];
        let p = Pending::Complete {
            layer: Layer::Python,
            name: b"n",
            cat: b"c",
            ts: 7,
            dur: 9,
            args: &args,
        };
        let mut buf = vec![0u8; p.len()];
        p.write(&mut buf);
        let r = Record::decode(&buf).unwrap();
        assert_eq!(
            (r.kind, r.layer, r.ts, r.dur),
            (KIND_COMPLETE, Layer::Python, 7, 9)
        );
        assert_eq!(r.name.bytes, b"n");
        let got: Vec<_> = r.args().collect();
        assert_eq!(got.len(), 6);
        assert_eq!(got[0].1, ArgValue::Int(-5));
        assert_eq!(got[1].1, ArgValue::UInt(u64::MAX));
        match got[4].1 {
            ArgValue::Str(t) => {
                assert!(t.truncated());
                assert_eq!(t.bytes.len(), MAX_STR);
                assert_eq!(t.orig_len, MAX_STR + 10);
            }
            _ => panic!(),
        }
    }

    #[test]
    fn clip_respects_char_boundaries() {
        let s = "é".repeat(10); // 2 bytes each
        assert_eq!(clip(s.as_bytes(), 5).len(), 4);
        assert_eq!(clip(b"abc", 5), b"abc");
    }

    #[test]
    fn too_many_args_are_counted() {
        let args: Vec<Arg> = (0..40).map(|_| Arg::int("k", 1)).collect();
        let p = Pending::Counter {
            layer: Layer::Psutil,
            name: b"cpu",
            cat: b"sys",
            ts: 1,
            args: &args,
        };
        let mut buf = vec![0u8; p.len()];
        p.write(&mut buf);
        let r = Record::decode(&buf).unwrap();
        assert_eq!(r.args().count(), MAX_ARGS);
        assert_eq!(r.args_dropped, 8);
    }

    #[test]
    fn max_record_bound_holds() {
        let big = vec![b'k'; MAX_STR * 2];
        let args: Vec<Arg> = (0..MAX_ARGS + 3)
            .map(|_| Arg {
                key: &big,
                value: Value::Str(&big),
            })
            .collect();
        let p = Pending::Complete {
            layer: Layer::Python,
            name: &big,
            cat: &big,
            ts: 0,
            dur: 0,
            args: &args,
        };
        assert!(p.len() <= MAX_RECORD);
    }
}
