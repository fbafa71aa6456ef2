//! The binary record codec of the rings: what [`Pending`] (an event as a frontend gives it)
//! looks like in a thread's ring ([`Pending::write`]) and how the writer reads it back
//! ([`Record`], and [`StaticRecord`] for the static records of [`crate::Schema`]s). The
//! bounds are [`crate::event`]'s: strings clipped to [`MAX_STR`], keys to [`MAX_KEY`], at
//! most [`MAX_ARGS`] args.
//!
//! Layout: every record starts with a header word (length u32, kind u8, layer u8, and a
//! kind-specific byte pair) and is 8-byte aligned. A static record ([`write_static`]) is
//! [`STATIC_HEAD`] bytes of whole words (header; schema address; file address and
//! generation; ts; dur) and then one little-endian word per slot value; its times may be
//! raw clock ticks ([`RAW_TIMES`]).

use crate::config::TimeMetric;
use crate::event::{
    clip, Arg, FileHandle, FileRef, Layer, Pinned, Schema, Slot, Value, MAX_ARGS, MAX_KEY, MAX_STR,
};

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
/// A [`Pending::Static`] record of a schema with float, bool or string slots: the static
/// layout, which the writer's fast path ([`StaticRecord::decode_with`]) declines, so that its
/// line is rendered through the checked cursor ([`Record::mixed`]).
pub const KIND_MIXED: u8 = 6;

/// Set on the kind byte when some arg is a [`Value::Path`] (the writer then emits FH records).
const HAS_PATH: u8 = 0x80;

/// A static record's byte 7 ([`write_static`]'s `times`): 0 when `ts` and `dur` are in the
/// trace's unit, else this bit plus the unit's code ([`TimeMetric::code`]) when they are the
/// [`crate::clock::ticks`] at the event's start and end, converted when the record is read
/// back ([`StaticRecord::decode`]): the hot path then reads the clock without converting it.
pub const RAW_TIMES: u8 = 0x80;

const TAG_INT: u8 = 1;
const TAG_UINT: u8 = 2;
const TAG_FLOAT: u8 = 3;
const TAG_BOOL: u8 = 4;
const TAG_STR: u8 = 5;
const TAG_PATH: u8 = 6;

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
    /// are ignored, missing ones are left out); `strs` the strings of its [`Slot::Str`] slots
    /// in order (the record stores each slot's length itself; a missing string is empty).
    Static {
        schema: &'static Schema,
        ts: u64,
        dur: u64,
        vals: &'a [u64],
        file: Option<FileHandle>,
        strs: &'a [&'a [u8]],
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
            Pending::Static {
                schema, vals, strs, ..
            } => return static_len(vals.len().min(schema.keys.len()), strs),
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
            strs,
        } = self
        {
            let n = vals.len().min(schema.keys.len());
            if schema.is_mixed() {
                write_mixed(out, schema, *ts, *dur, &vals[..n], strs);
            } else {
                write_static(out, schema, *ts, *dur, &vals[..n], *file, 0);
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
    /// A static record's strings ([`StaticRecord::strs`]; empty for others).
    strs: &'a [u8],
    /// A [`KIND_MIXED`] record (its schema has float, bool or string slots).
    pub mixed: bool,
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
    /// The strings of the [`Slot::Str`] slots, one after another (each slot's value is its
    /// length), then padding.
    pub strs: &'a [u8],
}

/// Bytes of a static record before its slot values: the header word (length, kind, layer,
/// value count), the schema, the file and its generation, `ts`, `dur` ([`write_static`]).
pub const STATIC_HEAD: usize = 48;

/// Writes a static record: [`STATIC_HEAD`] bytes of whole words, then the values (`out` is
/// exactly `STATIC_HEAD + 8 * vals.len()` bytes; `vals` at most the schema's keys). The one
/// definition of the layout: the hot path writes it in place in the ring, [`Pending::write`]
/// through it, [`StaticRecord::decode`] reads it.
#[inline(always)]
pub fn write_static(
    out: &mut [u8],
    schema: &'static Schema,
    ts: u64,
    dur: u64,
    vals: &[u64],
    file: Option<FileHandle>,
    times: u8,
) {
    write_static_head(out, schema, ts, dur, vals.len(), file, times);
    for (d, v) in out[STATIC_HEAD..].chunks_exact_mut(8).zip(vals) {
        d.copy_from_slice(&v.to_le_bytes());
    }
}

/// [`write_static`]'s first [`STATIC_HEAD`] bytes, for `n` values.
#[inline(always)]
fn write_static_head(
    out: &mut [u8],
    schema: &'static Schema,
    ts: u64,
    dur: u64,
    n: usize,
    file: Option<FileHandle>,
    times: u8,
) {
    let head = out.len() as u64
        | (KIND_STATIC as u64) << 32
        | (schema.layer as u64) << 40
        | (n as u64) << 48
        | (times as u64) << 56;
    let words = [
        head,
        schema as *const Schema as usize as u64,
        file.map_or(0, |f| f.file() as *const FileRef as usize as u64),
        file.map_or(0, |f| f.generation() as u64),
        ts,
        dur,
    ];
    for (d, w) in out[..STATIC_HEAD].chunks_exact_mut(8).zip(words) {
        d.copy_from_slice(&w.to_le_bytes());
    }
}

/// Bytes of a static record of `n` values (at most its schema's keys) and, for a mixed
/// schema, the strings `strs` ([`write_mixed`]): [`Pending::len`] of a [`Pending::Static`].
#[inline(always)]
pub fn static_len(n: usize, strs: &[&[u8]]) -> usize {
    align8(STATIC_HEAD + 8 * n + strs.iter().map(|s| s.len()).sum::<usize>())
}

/// Writes a [`KIND_MIXED`] record, a static record of a schema with float, bool or string
/// slots: [`write_static`]'s layout (no file, times in the unit) whose [`Slot::Str`] slots
/// hold the length of their string (the next of `strs`, empty when none is left; the value
/// given for such a slot is ignored), the strings after the values, in slot order, then
/// zeros. `out` is exactly [`static_len`]`(vals.len(), strs)` bytes; `vals` at most the
/// schema's keys. The hot path ([`crate::complete_strs`]) writes it in place,
/// [`Pending::write`] through it.
#[inline(always)]
pub fn write_mixed(
    out: &mut [u8],
    schema: &'static Schema,
    ts: u64,
    dur: u64,
    vals: &[u64],
    strs: &[&[u8]],
) {
    write_static_head(out, schema, ts, dur, vals.len(), None, 0);
    out[4] = KIND_MIXED;
    let (words, tail) = out[STATIC_HEAD..].split_at_mut(8 * vals.len());
    // The padding first, as one word: `tail` is whole words (the record and its head are),
    // and the strings below overwrite what of it they cover.
    let end = tail.len();
    if end >= 8 {
        tail[end - 8..].copy_from_slice(&[0; 8]);
    }
    let mut next = strs.iter();
    let mut at = 0;
    for ((w, &v), &(_, slot)) in words.chunks_exact_mut(8).zip(vals).zip(schema.keys) {
        let v = if slot == Slot::Str {
            let s = next.next().copied().unwrap_or_default();
            crate::filter::copy_words(&mut tail[at..at + s.len()], s);
            at += s.len();
            s.len() as u64
        } else {
            v
        };
        w.copy_from_slice(&v.to_le_bytes());
    }
    if end - at > 8 {
        // More strings than string slots: the rest of the record is zeros too.
        tail[at..].fill(0);
    }
}

impl<'a> StaticRecord<'a> {
    /// Reads a static record; `None` for any other record or a short buffer.
    ///
    /// # Safety
    /// As [`Record::decode_trusted`]: `buf` must hold a record written by [`Pending::write`]
    /// in this process (the schema and file addresses it holds are dereferenced here).
    #[allow(unsafe_code)]
    #[inline]
    pub unsafe fn decode(buf: &'a [u8]) -> Option<StaticRecord<'a>> {
        // SAFETY: this function's contract.
        unsafe { StaticRecord::decode_with(buf, &mut crate::clock::Newest::default()) }
    }

    /// [`StaticRecord::decode`], converting raw times with the conversion `clock` keeps
    /// ([`crate::clock::span_with`]): the writer's, kept across records.
    ///
    /// # Safety
    /// As [`StaticRecord::decode`].
    #[allow(unsafe_code)]
    #[inline(always)]
    pub unsafe fn decode_with(
        buf: &'a [u8],
        clock: &mut crate::clock::Newest,
    ) -> Option<StaticRecord<'a>> {
        if buf.get(4) != Some(&KIND_STATIC) {
            return None;
        }
        // SAFETY: this function's contract.
        unsafe { StaticRecord::decode_body(buf, clock) }
    }

    /// [`StaticRecord::decode_with`] of a [`KIND_MIXED`] record (`None` for any other).
    ///
    /// # Safety
    /// As [`StaticRecord::decode`].
    #[allow(unsafe_code)]
    #[inline]
    pub unsafe fn decode_mixed_with(
        buf: &'a [u8],
        clock: &mut crate::clock::Newest,
    ) -> Option<StaticRecord<'a>> {
        if buf.get(4) != Some(&KIND_MIXED) {
            return None;
        }
        // SAFETY: this function's contract.
        unsafe { StaticRecord::decode_body(buf, clock) }
    }

    /// [`StaticRecord::decode_with`] of a static or mixed record, whichever its kind.
    ///
    /// # Safety
    /// As [`StaticRecord::decode`].
    #[allow(unsafe_code)]
    #[inline(always)]
    unsafe fn decode_body(
        buf: &'a [u8],
        clock: &mut crate::clock::Newest,
    ) -> Option<StaticRecord<'a>> {
        let head: &[u8; STATIC_HEAD] = buf.get(..STATIC_HEAD)?.try_into().ok()?;
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
        let strs = buf.get(STATIC_HEAD + 8 * n..).unwrap_or_default();
        let file = if fp == 0 {
            None
        } else {
            // SAFETY: as above. A stale handle (slot reused since) fails to pin.
            unsafe { FileHandle::from_parts(fp, gen) }.pin_transient()
        };
        let (ts, dur) = match head[7] {
            0 => (word(4), word(5)),
            t => crate::clock::span_with(TimeMetric::from_code(t), word(4), word(5), clock),
        };
        Some(StaticRecord {
            // The writer of a static record stores its schema's layer (byte 5).
            layer: schema.layer,
            schema,
            ts,
            dur,
            file,
            vals,
            strs,
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
            strs: self.strs,
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
    /// The strings of the [`Slot::Str`] slots ([`StaticRecord::strs`]).
    pub strs: &'a [u8],
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
            strs: &[],
            mixed: false,
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
        let mixed = match buf.get(4) {
            Some(&KIND_STATIC) => false,
            Some(&KIND_MIXED) => true,
            _ => return Record::decode(buf),
        };
        // SAFETY: this function's contract is `StaticRecord::decode`'s.
        let s = unsafe { StaticRecord::decode_body(buf, &mut crate::clock::Newest::default()) }?;
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
            strs: s.strs,
            mixed,
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
            strs: self.strs,
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
            strs: self.strs,
        }
    }
}

pub struct ArgIter<'a> {
    r: Reader<'a>,
    left: u8,
    schema: Option<&'static Schema>,
    file: Option<&'a Pinned>,
    /// A static record's strings not yet read.
    strs: &'a [u8],
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
                    Slot::Float => (key, ArgValue::Float(f64::from_bits(v))),
                    Slot::Bool => (key, ArgValue::Bool(v != 0)),
                    Slot::Str => {
                        let (s, rest) = self.strs.split_at((v as usize).min(self.strs.len()));
                        self.strs = rest;
                        let t = Text {
                            bytes: s,
                            orig_len: s.len(),
                        };
                        (key, ArgValue::Str(t))
                    }
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

    /// A mixed record ([`write_mixed`], also through [`Pending::write`]) is [`static_len`]
    /// bytes: the values with each string slot's length in its word, the strings in slot
    /// order, then zeros to the end (with fewer, as many as and more strings than string
    /// slots; short and long strings), whatever the buffer held before.
    #[test]
    fn mixed_records_hold_their_strings_then_zeros() {
        let keys: &[(&[u8], Slot)] = &[
            (b"i", Slot::Int),
            (b"s", Slot::Str),
            (b"f", Slot::Float),
            (b"t", Slot::Str),
        ];
        let schema = crate::intern_args(Layer::Python, b"mixed", b"rec", keys)
            .unwrap()
            .schema();
        let long = [b'L'; 37];
        let vals = [5u64, 99, 1.5f64.to_bits(), 98];
        let sets: [&[&[u8]]; 6] = [
            &[],
            &[b"a"],
            &[b"abc", b""],
            &[b"abcdefg", &long],
            &[&long, b"xy", b"extra", b"more"],
            &[b"12345678", b"8765432"],
        ];
        for strs in sets {
            for n in 0..=vals.len() {
                let p = Pending::Static {
                    schema,
                    ts: 11,
                    dur: 22,
                    vals: &vals[..n],
                    file: None,
                    strs,
                };
                assert_eq!(p.len(), static_len(n, strs));
                let mut via_pending = vec![0x55u8; p.len()];
                p.write(&mut via_pending);
                let mut direct = vec![0xaau8; p.len()];
                write_mixed(&mut direct, schema, 11, 22, &vals[..n], strs);
                assert_eq!(via_pending, direct, "{n} values, {strs:?}");
                let buf = direct;
                assert_eq!(buf[4], KIND_MIXED);
                let word = |i: usize| u64::from_le_bytes(buf[8 * i..8 * i + 8].try_into().unwrap());
                let mut next = strs.iter();
                let mut want_tail = Vec::new();
                for (i, &(_, slot)) in schema.keys.iter().take(n).enumerate() {
                    let v = word(STATIC_HEAD / 8 + i);
                    if slot == Slot::Str {
                        let s = next.next().copied().unwrap_or_default();
                        assert_eq!(v, s.len() as u64);
                        want_tail.extend_from_slice(s);
                    } else {
                        assert_eq!(v, vals[i]);
                    }
                }
                let tail = &buf[STATIC_HEAD + 8 * n..];
                assert_eq!(
                    &tail[..want_tail.len()],
                    &want_tail[..],
                    "{n} values, {strs:?}"
                );
                assert!(
                    tail[want_tail.len()..].iter().all(|&b| b == 0),
                    "{n}, {strs:?}"
                );
            }
        }
    }

    static SCHEMA: Schema = Schema::new(
        Layer::LibcIo,
        "pread",
        "POSIX",
        &[
            ("fd", Slot::Int),
            ("count", Slot::UInt),
            ("offset", Slot::Int),
            ("ret", Slot::Int),
        ],
        "fhash",
    );

    /// A static record, written through `Pending::write` (with fewer, as many as and more
    /// values than slots, with and without a file), has `STATIC_HEAD + 8 × kept values`
    /// bytes and reads back as written.
    #[test]
    fn static_records_read_back() {
        let file: &'static FileRef = Box::leak(Box::new(FileRef::new(b"/d/f")));
        let vals = [7u64, u64::MAX, 1 << 40, 3, 99, 5];
        for file in [None, Some(file.handle())] {
            for n in 0..=vals.len() {
                let p = Pending::Static {
                    strs: &[],
                    schema: &SCHEMA,
                    ts: 1_700_000_000_123_456,
                    dur: 42,
                    vals: &vals[..n],
                    file,
                };
                let kept = n.min(SCHEMA.keys.len());
                assert_eq!(p.len(), STATIC_HEAD + 8 * kept, "{n} values");
                let mut buf = vec![0x55u8; p.len()];
                p.write(&mut buf);
                // SAFETY: written by `Pending::write` in this process just now.
                #[allow(unsafe_code)]
                let r = unsafe { StaticRecord::decode(&buf) }.unwrap();
                assert_eq!((r.ts, r.dur), (1_700_000_000_123_456, 42));
                let got: Vec<u64> = r
                    .vals
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                assert_eq!(got, vals[..kept], "{n} values");
                assert_eq!(r.file.is_some(), file.is_some());
            }
        }
    }
}
