//! The JSON-lines encoder of the DFTracer format, writing into a caller-owned `Vec<u8>`.
//!
//! Guarantees: every line is one valid JSON object ending in `\n`; every string goes through
//! [`write_str`] (the one escaping function): quotes, backslashes and control bytes are
//! escaped, invalid UTF-8 becomes U+FFFD, and a string clipped at record time gets a visible
//! `...[truncated, N bytes]` marker inside its quotes; integers are exact 64-bit; floats are
//! shortest round-trip (`ryu`), non-finite floats are `null`; args keep insertion order with
//! `hhash` first.

use crate::event::{ArgValue, Record, Schema, Slot, StaticView, Text};
use crate::hash::{hash_str, Hash16};

/// Per-file facts every line needs.
pub struct Ctx<'a> {
    pub pid: u32,
    pub hhash: &'a str,
    pub metadata: bool,
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Writes `bytes` as a JSON string (with quotes). `orig_len` > `bytes.len()` marks a clipped
/// string.
pub fn write_str(out: &mut Vec<u8>, bytes: &[u8], orig_len: usize) {
    out.push(b'"');
    // Fast path: printable ASCII without quote or backslash is copied as is.
    if bytes
        .iter()
        .all(|&b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        out.extend_from_slice(bytes);
    } else {
        escape_into(out, bytes);
    }
    if orig_len > bytes.len() {
        out.extend_from_slice(b"...[truncated, ");
        write_u64(out, orig_len as u64);
        out.extend_from_slice(b" bytes]");
    }
    out.push(b'"');
}

/// Where a line goes: a growable buffer or a [`Put`] cursor over reserved space.
trait Sink {
    fn put(&mut self, b: &[u8]);
    fn u64(&mut self, v: u64);
    fn text(&mut self, t: &Text);
    fn i64(&mut self, v: i64) {
        if v < 0 {
            self.put(b"-");
        }
        self.u64(v.unsigned_abs());
    }
    fn f64(&mut self, v: f64) {
        if v.is_finite() {
            self.put(ryu::Buffer::new().format_finite(v).as_bytes());
        } else {
            self.put(b"null");
        }
    }
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
    fn u64(&mut self, v: u64) {
        write_u64(self, v);
    }
    fn text(&mut self, t: &Text) {
        write_str(self, t.bytes, t.orig_len);
    }
}

impl Sink for Put<'_> {
    #[inline]
    fn put(&mut self, b: &[u8]) {
        self.bytes(b);
    }
    #[inline]
    fn u64(&mut self, v: u64) {
        self.num(v);
    }
    #[inline]
    fn i64(&mut self, v: i64) {
        self.int(v);
    }
    fn text(&mut self, t: &Text) {
        Put::text(self, t);
    }
}

/// The escaped form of `bytes` (at most 6 output bytes per input byte): quotes, backslashes
/// and control bytes escaped, invalid UTF-8 replaced by U+FFFD.
fn escape_into(out: &mut impl Sink, bytes: &[u8]) {
    for chunk in bytes.utf8_chunks() {
        let valid = chunk.valid().as_bytes();
        let mut start = 0;
        for (i, &b) in valid.iter().enumerate() {
            let esc: &[u8] = match b {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                b'\n' => b"\\n",
                b'\r' => b"\\r",
                b'\t' => b"\\t",
                0x08 => b"\\b",
                0x0c => b"\\f",
                0..=0x1f | 0x7f => b"",
                _ => continue,
            };
            out.put(&valid[start..i]);
            if esc.is_empty() {
                out.put(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 15) as usize],
                ]);
            } else {
                out.put(esc);
            }
            start = i + 1;
        }
        out.put(&valid[start..]);
        if !chunk.invalid().is_empty() {
            out.put("\u{fffd}".as_bytes());
        }
    }
}

fn text(out: &mut Vec<u8>, t: &Text) {
    write_str(out, t.bytes, t.orig_len);
}

pub fn write_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

pub fn write_f64(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        out.extend_from_slice(ryu::Buffer::new().format_finite(v).as_bytes());
    } else {
        out.extend_from_slice(b"null");
    }
}

/// `"key":` for a plain ASCII key.
fn key(out: &mut Vec<u8>, k: &str) {
    out.push(b'"');
    out.extend_from_slice(k.as_bytes());
    out.extend_from_slice(b"\":");
}

fn kv_u64(out: &mut Vec<u8>, k: &str, v: u64) {
    key(out, k);
    write_u64(out, v);
    out.push(b',');
}

fn hhash_open(out: &mut Vec<u8>, ctx: &Ctx) {
    out.extend_from_slice(b"\"args\":{\"hhash\":\"");
    out.extend_from_slice(ctx.hhash.as_bytes());
    out.push(b'"');
}

/// Writes user args after `hhash` (which is already open). Path args are written as the hash
/// `hash_of` gives.
fn user_args(out: &mut impl Sink, rec: &Record, hash_of: &mut dyn FnMut(&[u8]) -> Hash16) {
    for (k, v) in rec.args() {
        out.put(b",");
        if k.bytes == b"hhash" {
            // Never a duplicate key: the user's own `hhash` is kept under another name.
            out.put(b"\"user_hhash\"");
        } else {
            out.text(&k);
        }
        out.put(b":");
        match v {
            ArgValue::Int(i) => out.i64(i),
            ArgValue::UInt(u) => out.u64(u),
            ArgValue::Float(f) => out.f64(f),
            ArgValue::Bool(b) => out.put(if b { b"true" } else { b"false" }),
            ArgValue::Str(t) => out.text(&t),
            ArgValue::Path(t) => {
                out.put(b"\"");
                out.put(&hash_of(t.bytes));
                out.put(b"\"");
            }
        }
    }
    if rec.args_dropped > 0 {
        out.put(b",\"dft_args_dropped\":");
        out.u64(rec.args_dropped as u64);
    }
}

/// A complete event (ph 1): `id,name,cat,type,pid,tid,ts,dur,ph[,args]`.
///
/// Written into space reserved once: every byte of a record expands to at most 6 bytes of
/// JSON (`\u00XX`), a number's 8 bytes to at most 21 characters, and each string may add a
/// truncation marker, so `LINE_SLACK + 6 × record bytes` bounds the line. Records whose bound
/// exceeds `PUT_MAX` (16 KiB: long strings) take the growable path.
pub fn complete(
    out: &mut Vec<u8>,
    ctx: &Ctx,
    id: u64,
    tid: u32,
    rec: &Record,
    hash_of: &mut dyn FnMut(&[u8]) -> Hash16,
) {
    complete_cached(out, None, ctx, id, tid, rec, hash_of)
}

/// [`complete`], taking the line's constant middle (`,"name":..,"ts":`) from `cache` when
/// the writer has rendered it before for this name, category, layer and thread.
pub fn complete_cached(
    out: &mut Vec<u8>,
    cache: Option<&mut PrefixCache>,
    ctx: &Ctx,
    id: u64,
    tid: u32,
    rec: &Record,
    hash_of: &mut dyn FnMut(&[u8]) -> Hash16,
) {
    complete_cached_at(out, cache, ctx, id, tid, rec, hash_of, 0);
}

/// [`complete_cached`] of a line that starts at stream position `at` (see
/// [`complete_static_at`]); returns the position of the previous line with the same cached
/// middle (0: none, or not cached).
#[allow(clippy::too_many_arguments)]
pub fn complete_cached_at(
    out: &mut Vec<u8>,
    cache: Option<&mut PrefixCache>,
    ctx: &Ctx,
    id: u64,
    tid: u32,
    rec: &Record,
    hash_of: &mut dyn FnMut(&[u8]) -> Hash16,
    at: u64,
) -> u64 {
    let bound = LINE_SLACK
        + ctx.hhash.len()
        + 6 * (rec.name.bytes.len() + rec.cat.bytes.len() + rec.args_len())
        + 64 * (rec.nargs as usize + 2);
    if bound > PUT_MAX {
        complete_vec(out, ctx, id, tid, rec, hash_of);
        return 0;
    }
    let mut prev = 0;
    let (prefix, ts_hi) = match cache {
        Some(c) => {
            let PrefixCache {
                named,
                named_victim,
                named_mru,
                ts_hi,
                ..
            } = c;
            let prefix = named_prefix(named, named_victim, named_mru, ctx, rec, tid);
            (prefix, Some(ts_hi))
        }
        None => (None, None),
    };
    reserved(out, bound, |p| {
        p.lit(b"{\"id\":");
        p.num(id);
        match prefix {
            Some((prefix, n, last_at)) => {
                prev = std::mem::replace(last_at, at);
                p.padded(prefix, n)
            }
            None => middle(p, ctx, &rec.name, &rec.cat, rec.layer as u64, tid),
        }
        match ts_hi {
            Some(hi) => p.num_split(rec.ts, hi),
            None => p.num(rec.ts),
        }
        line_end(p, ctx, rec, |p| user_args(p, rec, hash_of));
    });
    prev
}

/// Fixed text of a line besides its strings and numbers, with room to spare.
const LINE_SLACK: usize = 256;
/// Largest line bound written through [`Put`]; longer records use [`complete_vec`].
const PUT_MAX: usize = 16 * 1024;

/// [`complete`] into a growable buffer (records with long strings).
fn complete_vec(
    out: &mut Vec<u8>,
    ctx: &Ctx,
    id: u64,
    tid: u32,
    rec: &Record,
    hash_of: &mut dyn FnMut(&[u8]) -> Hash16,
) {
    out.extend_from_slice(b"{\"id\":");
    write_u64(out, id);
    out.extend_from_slice(b",\"name\":");
    text(out, &rec.name);
    out.extend_from_slice(b",\"cat\":");
    text(out, &rec.cat);
    out.push(b',');
    kv_u64(out, "type", rec.layer as u64);
    kv_u64(out, "pid", ctx.pid as u64);
    kv_u64(out, "tid", tid as u64);
    kv_u64(out, "ts", rec.ts);
    kv_u64(out, "dur", rec.dur);
    out.extend_from_slice(b"\"ph\":1");
    if ctx.metadata {
        out.push(b',');
        hhash_open(out, ctx);
        user_args(out, rec, hash_of);
        out.push(b'}');
    }
    out.extend_from_slice(b"}\n");
}

/// Rendered constant text of lines, in small tables owned by the writer: per (schema, tid,
/// file or not) a [`Template`] of a static record's whole line but its numbers and file hash
/// (two-way: a set holds two templates, a miss replaces the one used less recently, so two
/// kinds of line that hash alike do not evict each other at every line); per (name, category, layer, tid) the middle
/// (`,"name":..,"cat":..,"type":..,"pid":..,"tid":..,"ts":`) of other lines. A hit replaces
/// escaped strings and numbers by whole-block copies.
pub struct PrefixCache {
    statics: Box<[Template; 2 * CACHE_SLOTS]>,
    /// Per set of `statics`: which of its two templates a miss replaces.
    victim: [u8; CACHE_SLOTS],
    /// The key and index in `statics` of the template used last (consecutive lines are
    /// mostly of one kind): no hashing on a repeat. Always the key of that template.
    mru: ([u64; 2], usize),
    named_victim: [u8; CACHE_SLOTS],
    named: Vec<Named>,
    /// Index in `named` of the middle used last (consecutive lines are mostly of one kind):
    /// compared first, without hashing.
    named_mru: usize,
    /// The last static line's id, and the high digits of its ts.
    id: IdText,
    ts_hi: HighDigits,
}

impl Default for PrefixCache {
    fn default() -> PrefixCache {
        PrefixCache {
            statics: Box::new(std::array::from_fn(|_| Template::default())),
            victim: [0; CACHE_SLOTS],
            mru: ([0, 0], 0),
            named_victim: [0; CACHE_SLOTS],
            named: Vec::new(),
            named_mru: 0,
            id: IdText::default(),
            ts_hi: HighDigits::default(),
        }
    }
}

/// The decimal digits of `q`, a number's value but its last few digits, as written last
/// time: consecutive lines' ids and timestamps share them. `q == 0`: nothing yet.
#[derive(Default)]
struct HighDigits {
    q: u64,
    len: usize,
    /// The digits, then zero bytes (read in one 32-byte move).
    txt: [u8; 32],
}

/// The decimal text of the last static line's id: consecutive static lines have ids one
/// apart, so the next id is mostly its last digit incremented in place.
struct IdText {
    last: u64,
    len: usize,
    /// The digits of `last`, then bytes that are never kept (read in one 32-byte move).
    txt: [u8; 32],
}

impl Default for IdText {
    fn default() -> IdText {
        let mut txt = [0; 32];
        txt[0] = b'0';
        IdText {
            last: 0,
            len: 1,
            txt,
        }
    }
}

/// A cached middle for a name and category: the key's bytes are kept and compared.
#[derive(Default)]
struct Named {
    tid: u32,
    layer: u8,
    name_len: usize,
    /// name ++ cat
    key: Vec<u8>,
    /// The middle, then [`COPY_PAD`] zero bytes (for [`Put::padded`]).
    prefix: Vec<u8>,
    /// Stream position of the last line written with this middle (0: none).
    last_at: u64,
}

/// A static record's line as constant pieces around its variable parts, in order: the
/// middle, `ts`, `,"dur":`, `dur`, `,"ph":1` and (with metadata) `,"args":{"hhash":"..."`;
/// with metadata one piece `,"<key>":` per schema key (a record may fill fewer slots: the
/// rest are skipped), then `,"<file_key>":"` before the file hash; the last piece ends the
/// line. Pieces are stored back to back
/// and followed by [`COPY_PAD`] zero bytes, so each is copied in whole 32-byte moves.
#[derive(Default)]
struct Template {
    /// What the template was built for ([`Template::key`]); `[0, 0]`: an empty slot.
    key: [u64; 2],
    text: Vec<u8>,
    /// Start of each piece in `text` (one more entry: the end of the last).
    cuts: Vec<u32>,
    /// Each piece as (start in `text`, length): what a line copies.
    pieces: Vec<(u32, u32)>,
    /// With metadata, pieces 2 and 3 as one (start, length): nothing comes between them
    /// when a record fills every slot (or the schema has none).
    merged: (u32, u32),
    /// Bytes of a line at most: `{"id":`, the pieces, [`NUM_MAX`] per number (id, ts, dur
    /// and one per key), 16 for the file hash.
    bound: usize,
    /// Stream position of the last line written from this template (0: none).
    last_at: u64,
}

/// Characters of a decimal 64-bit integer at most, sign included.
const NUM_MAX: usize = 21;

impl Template {
    /// (schema, file, metadata) and (tid, pid) as two words, compared at every line: a
    /// schema's address is never 0 and its low two bits are free (alignment of 4 or more).
    #[inline(always)]
    fn key(ctx: &Ctx, schema: &Schema, tid: u32, file: bool) -> [u64; 2] {
        const { assert!(std::mem::align_of::<Schema>() >= 4) };
        [
            schema as *const Schema as u64 | file as u64 | (ctx.metadata as u64) << 1,
            tid as u64 | (ctx.pid as u64) << 32,
        ]
    }

    /// Renders the template.
    #[cold]
    #[inline(never)]
    fn build(&mut self, ctx: &Ctx, schema: &Schema, layer: u64, tid: u32, file: bool) {
        let t = |s: &'static str| Text {
            bytes: s.as_bytes(),
            orig_len: s.len(),
        };
        let (text, cuts) = (&mut self.text, &mut self.cuts);
        text.clear();
        cuts.clear();
        cuts.push(0);
        middle(text, ctx, &t(schema.name), &t(schema.cat), layer, tid);
        cuts.push(text.len() as u32);
        text.extend_from_slice(b",\"dur\":");
        cuts.push(text.len() as u32);
        text.extend_from_slice(b",\"ph\":1");
        if ctx.metadata {
            text.extend_from_slice(b",\"args\":{\"hhash\":\"");
            text.extend_from_slice(ctx.hhash.as_bytes());
            text.push(b'"');
            for (k, _) in schema.keys {
                cuts.push(text.len() as u32);
                text.extend_from_slice(b",\"");
                text.extend_from_slice(k.as_bytes());
                text.extend_from_slice(b"\":");
            }
            cuts.push(text.len() as u32);
            if file {
                text.extend_from_slice(b",\"");
                text.extend_from_slice(schema.file_key.as_bytes());
                text.extend_from_slice(b"\":\"");
                cuts.push(text.len() as u32);
                text.push(b'"');
            }
            text.push(b'}');
        }
        text.extend_from_slice(b"}\n");
        cuts.push(text.len() as u32);
        self.pieces.clear();
        self.pieces
            .extend(cuts.windows(2).map(|w| (w[0], w[1] - w[0])));
        self.merged = match cuts.get(4) {
            Some(&end) if ctx.metadata => (cuts[2], end - cuts[2]),
            _ => (0, 0),
        };
        self.bound = ID_OPEN.len() + text.len() + NUM_MAX * (3 + schema.keys.len()) + 16;
        text.extend_from_slice(&[0; COPY_PAD]);
        self.key = Template::key(ctx, schema, tid, file);
        self.last_at = 0;
    }
}

const CACHE_SLOTS: usize = 64;

/// The line's middle from `,"name":` to `"ts":`, as [`complete`] writes it.
fn middle(v: &mut impl Sink, ctx: &Ctx, name: &Text, cat: &Text, layer: u64, tid: u32) {
    v.put(b",\"name\":");
    v.text(name);
    v.put(b",\"cat\":");
    v.text(cat);
    v.put(b",\"type\":");
    v.u64(layer);
    v.put(b",\"pid\":");
    v.u64(ctx.pid as u64);
    v.put(b",\"tid\":");
    v.u64(tid as u64);
    v.put(b",\"ts\":");
}

/// Everything after the middle: `ts`, `dur`, `ph` and, with metadata, the args that `args`
/// writes after `hhash`.
fn line_end(p: &mut Put, ctx: &Ctx, rec: &Record, args: impl FnOnce(&mut Put)) {
    p.lit(b",\"dur\":");
    p.num(rec.dur);
    p.lit(b",\"ph\":1");
    if ctx.metadata {
        p.lit(b",\"args\":{\"hhash\":\"");
        p.bytes(ctx.hhash.as_bytes());
        p.lit(b"\"");
        args(p);
        p.lit(b"}");
    }
    p.lit(b"}\n");
}

/// The middle of `rec`'s line from `PrefixCache::named`, padded (its length is the second
/// value); `None` for clipped names or categories (not cached).
fn named_prefix<'c>(
    named: &'c mut Vec<Named>,
    named_victim: &mut [u8; CACHE_SLOTS],
    mru: &mut usize,
    ctx: &Ctx,
    rec: &Record,
    tid: u32,
) -> Option<(&'c [u8], usize, &'c mut u64)> {
    let (name, cat) = (&rec.name, &rec.cat);
    if name.truncated() || cat.truncated() || name.bytes.len() + cat.bytes.len() > 512 {
        return None;
    }
    if named.is_empty() {
        *named = (0..2 * CACHE_SLOTS).map(|_| Named::default()).collect();
    }
    let layer = rec.layer as u8;
    let fits = |slot: &Named| {
        !slot.prefix.is_empty()
            && slot.tid == tid
            && slot.layer == layer
            && slot.name_len == name.bytes.len()
            && slot.key.len() == name.bytes.len() + cat.bytes.len()
            && slot.key[..name.bytes.len()] == *name.bytes
            && slot.key[name.bytes.len()..] == *cat.bytes
    };
    // The middle used last: its set's victim is already the other way.
    let i = if fits(&named[*mru]) {
        *mru
    } else {
        let mut h = crate::hash::FastHasher::default();
        std::hash::Hasher::write(&mut h, name.bytes);
        std::hash::Hasher::write(&mut h, cat.bytes);
        let set = (std::hash::Hasher::finish(&h) ^ tid as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            >> (64 - CACHE_SLOTS.trailing_zeros());
        let set = set as usize & (CACHE_SLOTS - 1);
        // Two-way, as the static templates.
        let (hit, way) = if fits(&named[2 * set]) {
            (true, 0)
        } else if fits(&named[2 * set + 1]) {
            (true, 1)
        } else {
            (false, named_victim[set] as usize & 1)
        };
        named_victim[set] = 1 - way as u8;
        let slot = &mut named[2 * set + way];
        if !hit {
            slot.prefix.clear();
            middle(&mut slot.prefix, ctx, name, cat, layer as u64, tid);
            slot.prefix.extend_from_slice(&[0; COPY_PAD]);
            slot.key.clear();
            slot.key.extend_from_slice(name.bytes);
            slot.key.extend_from_slice(cat.bytes);
            slot.name_len = name.bytes.len();
            slot.tid = tid;
            slot.layer = layer;
            slot.last_at = 0;
        }
        *mru = 2 * set + way;
        *mru
    };
    let slot = &mut named[i];
    let n = slot.prefix.len() - COPY_PAD;
    Some((&slot.prefix, n, &mut slot.last_at))
}

/// The template of (schema, tid, file) for this file's context, built on a miss.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn template<'c>(
    statics: &'c mut [Template; 2 * CACHE_SLOTS],
    victim: &mut [u8; CACHE_SLOTS],
    mru: &mut ([u64; 2], usize),
    ctx: &Ctx,
    schema: &Schema,
    layer: u64,
    tid: u32,
    file: bool,
) -> &'c mut Template {
    let key = Template::key(ctx, schema, tid, file);
    // The template used last: its set's victim is already the other way. (An empty slot's
    // key `[0, 0]` never equals a schema's key.)
    if key == mru.0 {
        return &mut statics[mru.1 & (2 * CACHE_SLOTS - 1)];
    }
    let set = ((key[0] ^ (tid as u64) << 2).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        >> (64 - CACHE_SLOTS.trailing_zeros())) as usize;
    let set = set & (CACHE_SLOTS - 1);
    let fits = |t: &Template| t.key == key;
    let way = if fits(&statics[2 * set]) {
        0
    } else if fits(&statics[2 * set + 1]) {
        1
    } else {
        let w = victim[set] as usize & 1;
        statics[2 * set + w].build(ctx, schema, layer, tid, file);
        w
    };
    // The other way is replaced next.
    victim[set] = 1 - way as u8;
    *mru = (key, 2 * set + way);
    &mut statics[2 * set + way]
}

/// The start of every complete line.
const ID_OPEN: &[u8; 6] = b"{\"id\":";

/// A complete event of a static record ([`Record::schema`]): the same line [`complete`]
/// writes, from the schema's [`Template`] and the record's numbers (no escaping, no decoding
/// of args).
///
/// The line is written through a raw cursor without a check per write. The bound is proven
/// once per line instead: the template's `bound` counts `{"id":`, every piece, [`NUM_MAX`]
/// bytes for each of the `3 + keys` numbers and 16 for the file hash; the line writes
/// `{"id":`, each piece at most once, the id, ts and dur, at most `keys` slot values (the
/// loop runs over the schema's keys) and the hash only with the file piece. `bound +
/// COPY_PAD` bytes are reserved (and checked) before the first write, and the piece
/// count the indexes rely on is checked against the record's shape.
#[inline]
pub fn complete_static(
    out: &mut Vec<u8>,
    cache: &mut PrefixCache,
    ctx: &Ctx,
    id: u64,
    tid: u32,
    rec: &StaticView,
) {
    complete_static_at(out, cache, ctx, id, tid, rec, 0);
}

/// [`complete_static`] of a line that starts at position `at` of the writer's stream (all
/// JSON bytes it wrote so far); returns the position of the previous line written from the
/// same template (0: none). The difference is the compressor's line hint
/// ([`crate::deflate::hint`]): that line differs from this one in its numbers only.
#[inline(always)]
pub fn complete_static_at(
    out: &mut Vec<u8>,
    cache: &mut PrefixCache,
    ctx: &Ctx,
    id: u64,
    tid: u32,
    rec: &StaticView,
    at: u64,
) -> u64 {
    let schema = rec.schema;
    let fhash = rec.file.filter(|_| ctx.metadata).map(|f| f.hash());
    let file = fhash.is_some();
    let t = template(
        &mut cache.statics,
        &mut cache.victim,
        &mut cache.mru,
        ctx,
        schema,
        rec.layer as u64,
        tid,
        file,
    );
    let prev = std::mem::replace(&mut t.last_at, at);
    let t = &*t;
    let (id_text, ts_hi) = (&mut cache.id, &mut cache.ts_hi);
    let keys = schema.keys.len();
    let pieces = &t.pieces[..];
    // The one shape check: the template was built for this (schema, file, metadata).
    let want = if ctx.metadata {
        4 + keys + file as usize
    } else {
        3
    };
    assert!(pieces.len() == want, "json: template shape");
    // `reserve` leaves at least `t.bound + COPY_PAD` spare bytes (or panics).
    out.reserve(t.bound + COPY_PAD);
    let text = t.text.as_ptr();
    let start = out.len();
    let vals = rec.vals.chunks_exact(8);
    // Every slot filled: pieces 2 and 3 are copied as one (`merged`).
    let full = vals.len() == keys;
    #[allow(unsafe_code)]
    // SAFETY: `t.bound + COPY_PAD` spare bytes are reserved and the writes below stay within
    // `t.bound` (see above; each `put_*` says how far it may write past what it keeps, at
    // most COPY_PAD). Piece indexes are `< want == pieces.len()`: 0..=2, `3 + i` for
    // `i < keys`, `3 + keys` and, with a file, `4 + keys`; when every slot is filled, `4 + i`
    // for `i < keys` and, with a file, `4 + keys`. `merged` (pieces 2 and 3, built with
    // metadata, where `want >= 4`) lies in `text` as every piece does, and every piece is
    // followed by COPY_PAD readable bytes. Each piece is written at most once: `merged`
    // replaces pieces 2 and 3.
    unsafe {
        let base = out.as_mut_ptr().add(start);
        let piece = |d: *mut u8, i: usize| {
            let (a, n) = *pieces.get_unchecked(i);
            put_piece(d, text.add(a as usize), n as usize)
        };
        std::ptr::copy_nonoverlapping(ID_OPEN.as_ptr(), base, ID_OPEN.len());
        let mut d = put_id(base.add(ID_OPEN.len()), id, id_text);
        d = piece(d, 0);
        d = put_split::<4>(d, rec.ts, ts_hi);
        d = piece(d, 1);
        d = put_num(d, rec.dur);
        if !ctx.metadata {
            d = piece(d, 2);
        } else if full {
            let (a, n) = t.merged;
            d = put_piece(d, text.add(a as usize), n as usize);
            for (i, (&(_, slot), v)) in schema.keys.iter().zip(vals).enumerate() {
                d = put_slot(d, slot, v);
                d = piece(d, 4 + i);
            }
            if let Some(h) = fhash {
                d = put16(d, h);
                d = piece(d, 4 + keys);
            }
        } else {
            d = piece(d, 2);
            for (i, (&(_, slot), v)) in schema.keys.iter().zip(vals).enumerate() {
                d = piece(d, 3 + i);
                d = put_slot(d, slot, v);
            }
            let mut end = 3 + keys;
            if let Some(h) = fhash {
                d = piece(d, end);
                d = put16(d, h);
                end += 1;
            }
            d = piece(d, end);
        }
        let n = d.offset_from(base) as usize;
        assert!(n <= t.bound, "json: line bound exceeded");
        out.set_len(start + n);
    }
    prev
}

/// Writes a slot's value (8 little-endian bytes) at `d` as its kind says; returns the end.
///
/// # Safety
/// `d` writable for [`NUM_MAX`] bytes.
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn put_slot(d: *mut u8, slot: Slot, v: &[u8]) -> *mut u8 {
    let mut b = [0u8; 8];
    b.copy_from_slice(v);
    let v = u64::from_le_bytes(b);
    // SAFETY: at most NUM_MAX bytes (the contract).
    unsafe {
        match slot {
            Slot::Int => put_int(d, v as i64),
            Slot::UInt => put_num(d, v),
        }
    }
}

/// Writes `id` in decimal at `d` from the text of the last id `it` wrote (one more than it
/// and not ending in 9: its last digit incremented in place); returns the end.
///
/// # Safety
/// `d` writable for 32 bytes (20 are kept at most).
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn put_id(d: *mut u8, id: u64, it: &mut IdText) -> *mut u8 {
    // `len` is 1..=20: the mask only spares a bounds check.
    let last = (it.len - 1) & 31;
    if it.last.checked_add(1) == Some(id) && it.txt[last] != b'9' {
        it.txt[last] += 1;
        it.last = id;
    } else if id != it.last {
        // SAFETY: at most 20 digits into the 32-byte text.
        let end = unsafe { put_num(it.txt.as_mut_ptr(), id) };
        // SAFETY: `end` is within `txt`, after its start.
        it.len = unsafe { end.offset_from(it.txt.as_ptr()) } as usize;
        it.last = id;
    }
    // SAFETY: `txt`'s 32 bytes are read and `d`'s 32 written (the contract); `it.len <= 20`
    // of them are kept.
    unsafe {
        let x = std::ptr::read_unaligned(it.txt.as_ptr().cast::<[u128; 2]>());
        std::ptr::write_unaligned(d.cast::<[u128; 2]>(), x);
        d.add(it.len)
    }
}

/// Copies `n` bytes from `s` to `d` in whole 32-byte moves (at least one); returns `d + n`.
///
/// # Safety
/// `s` readable and `d` writable for `n` rounded up to 32 bytes (at least 32): up to 31
/// bytes past `d + n` may be written, and are overwritten by what follows or dropped.
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn put_piece(d: *mut u8, s: *const u8, n: usize) -> *mut u8 {
    let mut i = 0;
    loop {
        // SAFETY: `i` is 0 or `< n`, so `i + 32` is at most `n` rounded up to 32, or 32
        // (the contract).
        unsafe {
            let x = std::ptr::read_unaligned(s.add(i).cast::<[u128; 2]>());
            std::ptr::write_unaligned(d.add(i).cast::<[u128; 2]>(), x);
        }
        i += 32;
        if i >= n {
            break;
        }
    }
    // SAFETY: within what the caller made writable.
    unsafe { d.add(n) }
}

/// Copies the 16 bytes of `h` to `d`; returns `d + 16`.
///
/// # Safety
/// `d` writable for 16 bytes.
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn put16(d: *mut u8, h: &[u8; 16]) -> *mut u8 {
    // SAFETY: the contract.
    unsafe {
        std::ptr::write_unaligned(d.cast::<[u8; 16]>(), *h);
        d.add(16)
    }
}

/// Writes `v` in decimal at `d`; returns the end (at most 20 bytes on).
///
/// # Safety
/// `d` writable for 20 bytes.
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn put_num(d: *mut u8, v: u64) -> *mut u8 {
    // Small values (durations, descriptors) without counting digits.
    if v < 100 {
        // SAFETY: at most 2 bytes at `d` (the contract).
        unsafe {
            if v < 10 {
                *d = b'0' + v as u8;
                return d.add(1);
            }
            std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(v as usize * 2), d, 2);
            return d.add(2);
        }
    }
    let n = ndigits(v);
    // SAFETY: `n <= 20` bytes at `d` are writable (the contract).
    unsafe {
        write_digits(d, v, n);
        d.add(n)
    }
}

/// Writes the `n` (= `ndigits(v)`) decimal digits of `v` at `d`, back to front, two at a time.
///
/// # Safety
/// `d` writable for `n` bytes.
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn write_digits(d: *mut u8, v: u64, n: usize) {
    // SAFETY: every index below is `< n` (the contract).
    unsafe {
        let mut end = d.add(n);
        let mut v = v;
        while v >= 100 {
            let r = (v % 100) as usize * 2;
            v /= 100;
            end = end.sub(2);
            std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(r), end, 2);
        }
        if v >= 10 {
            std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(v as usize * 2), end.sub(2), 2);
        } else {
            *end.sub(1) = b'0' + v as u8;
        }
    }
}

/// [`put_num`] for a value that shares its digits but the last `LOW` with the value `hd`
/// last saw (ids, timestamps): those digits are copied, only the last `LOW` are computed.
///
/// # Safety
/// `d` writable for 32 bytes (20 are kept at most).
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn put_split<const LOW: u32>(d: *mut u8, v: u64, hd: &mut HighDigits) -> *mut u8 {
    const { assert!(LOW.is_multiple_of(2) && LOW >= 2 && LOW <= 8) };
    let p = 10u64.pow(LOW);
    let q = v / p;
    // SAFETY: every write below is within the contract: `put_num` keeps at most 20 bytes;
    // otherwise the high digits (`len` of them, at most 18 as `q <= u64::MAX / 100`) are
    // copied in one 32-byte move (32 bytes written, read from `txt`'s 32) and
    // `LOW` digits follow, `len + LOW` bytes kept: the digits of `v`, at most 20.
    unsafe {
        if q == 0 {
            return put_num(d, v);
        }
        if q != hd.q {
            let end = put_num(hd.txt.as_mut_ptr(), q);
            hd.len = end.offset_from(hd.txt.as_ptr()) as usize;
            hd.q = q;
        }
        std::ptr::write_unaligned(d.cast::<[u8; 32]>(), hd.txt);
        let d = d.add(hd.len);
        let mut r = (v - q * p) as u32;
        let mut k = LOW as usize;
        while k > 0 {
            k -= 2;
            let pair = (r % 100) as usize * 2;
            r /= 100;
            std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(pair), d.add(k), 2);
        }
        d.add(LOW as usize)
    }
}

/// [`put_num`] with a sign: at most [`NUM_MAX`] bytes.
///
/// # Safety
/// `d` writable for [`NUM_MAX`] bytes.
#[allow(unsafe_code)]
#[inline(always)]
unsafe fn put_int(d: *mut u8, v: i64) -> *mut u8 {
    // SAFETY: one sign byte, then at most 20 digits: within the contract.
    unsafe {
        *d = b'-';
        put_num(d.add((v < 0) as usize), v.unsigned_abs())
    }
}

/// Runs `f` on a cursor over `bound` bytes reserved at the end of `out`, then keeps what it
/// wrote. The reserved bytes are not initialised first: the cursor only writes.
fn reserved(out: &mut Vec<u8>, bound: usize, f: impl FnOnce(&mut Put)) {
    // COPY_PAD more than the bound: whole 16-byte copies may run past what they keep.
    out.reserve(bound + COPY_PAD);
    let spare = out.spare_capacity_mut();
    let mut p = Put {
        buf: spare.as_mut_ptr().cast::<u8>(),
        cap: bound,
        pos: 0,
        _out: std::marker::PhantomData,
    };
    f(&mut p);
    let n = p.pos;
    // SAFETY: the cursor wrote (initialised) exactly the first `n <= bound` spare bytes.
    #[allow(unsafe_code)]
    unsafe {
        out.set_len(out.len() + n)
    };
}

/// Bytes past a cursor's bound that whole 16- or 32-byte copies may write (and later overwrite or
/// drop): reserved by [`reserved`], never kept.
const COPY_PAD: usize = 32;

/// A write-only cursor over `cap` bytes (plus [`COPY_PAD`]) of a vector's spare capacity.
/// Every write checks that it ends within `cap` (an overrun panics, never corrupts).
struct Put<'a> {
    buf: *mut u8,
    cap: usize,
    pos: usize,
    _out: std::marker::PhantomData<&'a mut Vec<u8>>,
}

const DIGITS2: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Decimal digits of `v` (1 for 0).
#[inline(always)]
fn ndigits(v: u64) -> usize {
    const POW10: [u64; 20] = {
        let mut t = [1u64; 20];
        let mut i = 1;
        while i < 20 {
            t[i] = t[i - 1] * 10;
            i += 1;
        }
        t
    };
    // floor(log10(2) * bits) is the digit count or one less.
    let bits = 64 - (v | 1).leading_zeros() as usize;
    let d = (bits * 1233) >> 12;
    d + ((v | 1) >= POW10[d]) as usize
}

#[allow(unsafe_code)]
impl Put<'_> {
    /// Room for `n` more bytes, or a panic (bounds were computed by the caller).
    #[inline(always)]
    fn room(&self, n: usize) {
        assert!(self.pos + n <= self.cap, "json: line bound exceeded");
    }
    #[inline(always)]
    fn lit<const N: usize>(&mut self, s: &[u8; N]) {
        self.room(N);
        // SAFETY: `room` checked `pos + N <= cap` of the reserved spare bytes.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), self.buf.add(self.pos), N) };
        self.pos += N;
    }
    #[inline(always)]
    fn bytes(&mut self, s: &[u8]) {
        self.room(s.len());
        // SAFETY: as in `lit`.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), self.buf.add(self.pos), s.len()) };
        self.pos += s.len();
    }
    /// The first `n` bytes of `s`, copied 16 at a time: `s` must hold `n` rounded up to 16
    /// bytes (a [`Template`]'s pieces are padded), so no copy call is made.
    #[inline(always)]
    fn padded(&mut self, s: &[u8], n: usize) {
        self.room(n);
        let whole = n.div_ceil(16) * 16;
        assert!(whole <= s.len() && whole - n < COPY_PAD);
        let mut i = 0;
        while i < n {
            // SAFETY: `i + 16 <= whole <= s.len()` on the source; on the destination
            // `pos + i + 16 <= pos + n + 15 < cap + COPY_PAD` (reserved).
            unsafe {
                let x = std::ptr::read_unaligned(s.as_ptr().add(i).cast::<u128>());
                std::ptr::write_unaligned(self.buf.add(self.pos + i).cast::<u128>(), x);
            }
            i += 16;
        }
        self.pos += n;
    }
    /// A JSON string: the same bytes [`write_str`] writes.
    fn text(&mut self, t: &Text) {
        self.lit(b"\"");
        let b = t.bytes;
        if b.iter()
            .all(|&c| (0x20..0x7f).contains(&c) && c != b'"' && c != b'\\')
        {
            self.bytes(b);
        } else {
            escape_into(self, b);
        }
        if t.orig_len > b.len() {
            self.lit(b"...[truncated, ");
            self.num(t.orig_len as u64);
            self.lit(b" bytes]");
        }
        self.lit(b"\"");
    }

    /// [`Put::num`] with `v`'s high digits taken from `hd` when they are the same as last
    /// time (see [`put_split`]).
    #[inline(always)]
    fn num_split(&mut self, v: u64, hd: &mut HighDigits) {
        self.room(20);
        // SAFETY: `room` checked `pos + 20 <= cap`; `put_split` writes 32 bytes from `pos`
        // (within `cap + COPY_PAD`) and keeps at most 20, ending at the returned pointer.
        unsafe {
            let end = put_split::<4>(self.buf.add(self.pos), v, hd);
            self.pos = end.offset_from(self.buf) as usize;
        }
    }

    /// Decimal digits of `v`, written in place back to front, two at a time.
    #[inline(always)]
    fn num(&mut self, v: u64) {
        let n = ndigits(v);
        self.room(n);
        // SAFETY: `room` checked `pos + n <= cap`.
        unsafe { write_digits(self.buf.add(self.pos), v, n) };
        self.pos += n;
    }

    #[inline(always)]
    fn int(&mut self, v: i64) {
        if v < 0 {
            self.lit(b"-");
        }
        self.num(v.unsigned_abs());
    }
}

/// A counter event (ph 2): `name,cat,type,ts,ph,pid,tid,args` (args always written).
pub fn counter(
    out: &mut Vec<u8>,
    ctx: &Ctx,
    tid: u32,
    rec: &Record,
    hash_of: &mut dyn FnMut(&[u8]) -> Hash16,
) {
    out.extend_from_slice(b"{\"name\":");
    text(out, &rec.name);
    out.extend_from_slice(b",\"cat\":");
    text(out, &rec.cat);
    out.push(b',');
    kv_u64(out, "type", rec.layer as u64);
    kv_u64(out, "ts", rec.ts);
    out.extend_from_slice(b"\"ph\":2,");
    kv_u64(out, "pid", ctx.pid as u64);
    kv_u64(out, "tid", tid as u64);
    hhash_open(out, ctx);
    user_args(out, rec, hash_of);
    out.extend_from_slice(b"}}\n");
}

/// A metadata record (ph 4): `{"name":N,"cat":"dftracer","type":T,"pid","tid","ph":4,
/// "args":{"hhash","name":K,"value":V}}`.
pub fn meta(out: &mut Vec<u8>, ctx: &Ctx, tid: u32, layer: u8, name: &Text, k: &Text, v: &Text) {
    out.extend_from_slice(b"{\"name\":");
    text(out, name);
    out.extend_from_slice(b",\"cat\":\"dftracer\",");
    kv_u64(out, "type", layer as u64);
    kv_u64(out, "pid", ctx.pid as u64);
    kv_u64(out, "tid", tid as u64);
    out.extend_from_slice(b"\"ph\":4,");
    hhash_open(out, ctx);
    out.extend_from_slice(b",\"name\":");
    text(out, k);
    out.extend_from_slice(b",\"value\":");
    text(out, v);
    out.extend_from_slice(b"}}\n");
}

/// [`meta`] for plain strings.
pub fn meta_str(out: &mut Vec<u8>, ctx: &Ctx, tid: u32, name: &str, k: &[u8], v: &[u8]) {
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
pub fn hash_value(out: &mut Vec<u8>, h: &Hash16) {
    out.push(b'"');
    out.extend_from_slice(hash_str(h).as_bytes());
    out.push(b'"');
}

/// Starts a `dftracer`-category complete event (`start`/`end`) up to and including `"ph":1`.
pub fn lifecycle_head(out: &mut Vec<u8>, ctx: &Ctx, id: u64, tid: u32, name: &str, ts: u64) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_num_matches_itoa() {
        let mut cases = vec![0u64, 1, 9, 10, 99, 100, u64::MAX, u64::MAX - 1];
        let mut p = 1u64;
        while let Some(n) = p.checked_mul(10) {
            cases.extend([p - 1, p, p + 1, n - 1]);
            p = n;
        }
        cases.extend([p - 1, p, p + 1]);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push(x >> (x % 64));
        }
        for v in cases {
            let mut out = b"x".to_vec();
            reserved(&mut out, 20, |p| p.num(v));
            assert_eq!(out[1..], *v.to_string().as_bytes(), "{v}");
            let mut out = Vec::new();
            reserved(&mut out, 21, |p| p.int(v as i64));
            assert_eq!(out, (v as i64).to_string().as_bytes(), "{v}");
        }
    }
    /// Runs of nearby values (the cached high digits hit) and jumps (they miss) format as
    /// `to_string` does, for both splits, written after other bytes.
    #[test]
    fn put_split_matches_itoa() {
        let mut cases = vec![0u64, 1, 99, 100, 101, 999_999, 1_000_000, 1_000_001, 5, 100];
        for base in [
            0u64,
            1_796_000_779_668_786,
            99_999_999_999,
            u64::MAX - 2_000,
        ] {
            cases.extend((0..1_500).map(|i| base.saturating_add(i * 7)));
        }
        cases.extend([u64::MAX, 10u64.pow(19), 10u64.pow(19) - 1, 7, u64::MAX]);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..5_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push(x >> (x % 64));
        }
        let (mut h2, mut h4, mut h6) = Default::default();
        for v in cases {
            for low in [2, 4, 6] {
                let mut out = b"ab".to_vec();
                out.reserve(32);
                #[allow(unsafe_code)]
                // SAFETY: 32 spare bytes reserved; `n <= 20` of them are written (kept).
                unsafe {
                    let d = out.as_mut_ptr().add(2);
                    let end = match low {
                        2 => put_split::<2>(d, v, &mut h2),
                        4 => put_split::<4>(d, v, &mut h4),
                        _ => put_split::<6>(d, v, &mut h6),
                    };
                    let n = end.offset_from(d) as usize;
                    assert!(n <= 20);
                    out.set_len(2 + n);
                }
                assert_eq!(out[2..], *v.to_string().as_bytes(), "{v} {low}");
            }
        }
    }

    /// Ids one apart (incremented in place, across 9s and powers of ten), repeated, and
    /// jumps format as `to_string` does.
    #[test]
    fn put_id_matches_itoa() {
        let mut cases: Vec<u64> = (0..2_100).collect();
        cases.extend([
            5,
            5,
            0,
            0,
            1,
            99_999,
            100_000,
            100_001,
            u64::MAX - 1,
            u64::MAX,
        ]);
        cases.extend((0..30).map(|i| 10u64.pow(19) - 15 + i));
        cases.extend([u64::MAX, 0, 9, 10, 11]);
        let mut it = IdText::default();
        for v in cases {
            let mut out = b"ab".to_vec();
            out.reserve(32);
            #[allow(unsafe_code)]
            // SAFETY: 32 spare bytes reserved; `n <= 20` of them are written (kept).
            unsafe {
                let d = out.as_mut_ptr().add(2);
                let n = put_id(d, v, &mut it).offset_from(d) as usize;
                assert!(n <= 20);
                out.set_len(2 + n);
            }
            assert_eq!(out[2..], *v.to_string().as_bytes(), "{v}");
        }
    }

    use crate::event::{Arg, Layer, Pending, Record, Value};

    fn enc(bytes: &[u8]) -> String {
        let mut out = Vec::new();
        write_str(&mut out, bytes, bytes.len());
        String::from_utf8(out).unwrap()
    }

    /// Every template shape (no keys as for interned regions, one key, the most keys; with
    /// and without metadata and file; fewer, as many and more values than keys) and
    /// numbers whose high digits change between lines (ids and timestamps across powers of
    /// ten, extremes): the static line equals the generic line byte for byte.
    #[test]
    fn static_shapes_equal_generic_lines() {
        use crate::event::{FileRef, StaticRecord};
        let many: &'static [(&'static str, Slot)] = Box::leak(
            (0..crate::event::MAX_ARGS - 1)
                .map(|i| {
                    let k: &'static str = Box::leak(format!("k{i}").into_boxed_str());
                    (k, if i % 2 == 0 { Slot::Int } else { Slot::UInt })
                })
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        );
        let schemas: Vec<&'static Schema> = vec![
            Box::leak(Box::new(Schema::new(
                Layer::CApp,
                "step",
                "C",
                &[],
                "fhash",
            ))),
            Box::leak(Box::new(Schema::new(
                Layer::LibcIo,
                "lseek64",
                "POSIX",
                &[("whence", Slot::Int)],
                "file_hash",
            ))),
            Box::leak(Box::new(Schema::new(
                Layer::Python,
                "a_rather_long_function_name_for_a_middle_past_sixty_four_bytes",
                "cat",
                many,
                "fhash",
            ))),
        ];
        let file: &'static FileRef = Box::leak(Box::new(FileRef::new(b"/d/\"x\".bin")));
        let fhash = crate::hash::hash16(b"/d/\"x\".bin");
        let ids = [
            0u64,
            1,
            99,
            100,
            101,
            199,
            200,
            9_999,
            10_000,
            123_456,
            u64::MAX - 1,
        ];
        let tss = [
            0u64,
            999_999,
            1_000_000,
            1_796_000_779_668_786,
            1_796_000_779_668_787,
            1_796_000_780_000_001,
            u64::MAX,
        ];
        let vals: Vec<u64> = (0..40u64)
            .map(|i| match i % 4 {
                0 => u64::MAX,
                1 => i64::MIN as u64,
                2 => 10u64.pow((i % 20) as u32),
                _ => i,
            })
            .collect();
        let mut cache = PrefixCache::default();
        for metadata in [true, false] {
            let ctx = Ctx {
                pid: 77,
                hhash: "6882804a826580cd",
                metadata,
            };
            for schema in &schemas {
                for n in [0, 1, schema.keys.len(), schema.keys.len() + 1] {
                    for f in [None, Some(file)] {
                        for (j, &id) in ids.iter().enumerate() {
                            let ts = tss[j % tss.len()];
                            let p = Pending::Static {
                                schema,
                                ts,
                                dur: ts / 3,
                                vals: &vals[..n.min(vals.len())],
                                file: f.map(|f| f.handle()),
                            };
                            let mut buf = vec![0u8; p.len()];
                            p.write(&mut buf);
                            // SAFETY: written just above by Pending::write in this process.
                            #[allow(unsafe_code)]
                            let (srec, rec) = unsafe {
                                (
                                    StaticRecord::decode(&buf).unwrap(),
                                    Record::decode_trusted(&buf).unwrap(),
                                )
                            };
                            let (mut fast, mut slow) = (b"x".to_vec(), b"x".to_vec());
                            complete_static(&mut fast, &mut cache, &ctx, id, 9, &srec.view());
                            complete(&mut slow, &ctx, id, 9, &rec, &mut |_| fhash);
                            assert_eq!(
                                String::from_utf8(fast).unwrap(),
                                String::from_utf8(slow).unwrap()
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn static_line_equals_the_generic_line() {
        use crate::event::{FileRef, Record};
        static S: Schema = Schema::new(
            Layer::LibcIo,
            "pread64",
            "POSIX",
            &[("fd", Slot::Int), ("count", Slot::UInt), ("ret", Slot::Int)],
            "fhash",
        );
        let file: &'static FileRef = Box::leak(Box::new(FileRef::new(b"/data/x.bin")));
        let fhash = crate::hash::hash16(b"/data/x.bin");
        let cases: [(&[u64], Option<&'static FileRef>); 4] = [
            (&[3, u64::MAX, (-1i64) as u64], Some(file)),
            (&[0, 0, i64::MIN as u64], None),
            (&[7], Some(file)),
            (&[1, 2, 3, 4, 5], None),
        ];
        let mut cache = PrefixCache::default();
        for metadata in [true, false] {
            let ctx = Ctx {
                pid: 4242,
                hhash: "6882804a826580cd",
                metadata,
            };
            for (vals, f) in cases {
                let p = Pending::Static {
                    schema: &S,
                    ts: 1_796_000_779_668_786,
                    dur: 12,
                    vals,
                    file: f.map(|f| f.handle()),
                };
                let mut buf = vec![0u8; p.len()];
                p.write(&mut buf);
                assert!(
                    Record::decode(&buf).is_none(),
                    "untrusted decode refuses pointers"
                );
                // SAFETY: written just above by Pending::write in this process.
                #[allow(unsafe_code)]
                let rec = unsafe { Record::decode_trusted(&buf) }.unwrap();
                let (mut fast, mut slow) = (b"x".to_vec(), b"x".to_vec());
                complete_static(
                    &mut fast,
                    &mut cache,
                    &ctx,
                    99,
                    7,
                    &rec.static_view().unwrap(),
                );
                complete_static(
                    &mut fast,
                    &mut cache,
                    &ctx,
                    99,
                    7,
                    &rec.static_view().unwrap(),
                );
                complete(&mut slow, &ctx, 99, 7, &rec, &mut |_| fhash);
                complete(&mut slow, &ctx, 99, 7, &rec, &mut |p| {
                    assert_eq!(p, b"/data/x.bin");
                    fhash
                });
                assert_eq!(
                    String::from_utf8(fast).unwrap(),
                    String::from_utf8(slow).unwrap()
                );
            }
        }
    }

    #[test]
    fn reserved_line_equals_the_growable_line() {
        let long = "é\u{1}\"\\x".repeat(2000);
        let weird: &[u8] = b"a\x00b\x1f\x7f\xff\xfe\"q\\\n\t\r\x08\x0c\xe2\x82";
        let many: Vec<Arg> = (0..40).map(|i| Arg::int("k", -i)).collect();
        let sets: Vec<(&[u8], Vec<Arg>)> = vec![
            (b"plain", vec![]),
            (
                weird,
                vec![
                    Arg::new("hhash", Value::Str(weird)),
                    Arg::new(weird_key(), Value::Bool(false)),
                ],
            ),
            (
                b"nums",
                vec![
                    Arg::int("i", i64::MIN),
                    Arg::new("u", Value::UInt(u64::MAX)),
                    Arg::new("f", Value::Float(-0.0)),
                    Arg::new("n", Value::Float(f64::NAN)),
                    Arg::new("e", Value::Float(1e300)),
                    Arg::new("b", Value::Bool(true)),
                    Arg::new("p", Value::Path(b"/d/f")),
                ],
            ),
            (
                long.as_bytes(),
                vec![Arg::new("s", Value::Str(long.as_bytes()))],
            ),
            (b"many", many),
        ];
        for metadata in [true, false] {
            let ctx = Ctx {
                pid: 7,
                hhash: "6882804a826580cd",
                metadata,
            };
            for (name, args) in &sets {
                let p = Pending::Complete {
                    layer: Layer::Python,
                    name,
                    cat: weird,
                    ts: u64::MAX,
                    dur: 0,
                    args,
                };
                let mut buf = vec![0u8; p.len()];
                p.write(&mut buf);
                let rec = Record::decode(&buf).unwrap();
                let (mut a, mut b) = (b"prev\n".to_vec(), b"prev\n".to_vec());
                complete(&mut a, &ctx, 12, 34, &rec, &mut |_| *b"0123456789abcdef");
                complete_vec(&mut b, &ctx, 12, 34, &rec, &mut |_| *b"0123456789abcdef");
                assert_eq!(String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
            }
        }
    }

    #[test]
    fn cached_middles_equal_uncached_lines() {
        let ctx = Ctx {
            pid: 99,
            hhash: "6882804a826580cd",
            metadata: true,
        };
        let long = vec![b'n'; crate::event::MAX_STR + 5];
        let names: [&[u8]; 6] = [b"step", b"st\"ep", b"step2", b"\xff\x01", b"", &long];
        let mut cache = PrefixCache::default();
        // Enough names x tids x layers to evict slots and revisit them.
        for round in 0..3 {
            for (i, name) in names.iter().enumerate() {
                for tid in [1u32, 2, 70_000] {
                    for layer in [Layer::Python, Layer::CppApp] {
                        let cat: &[u8] = if i % 2 == 0 { b"train" } else { b"io" };
                        let args = [Arg::int("step", round)];
                        // Small, real (high digits kept or not) and extreme timestamps.
                        let ts = [
                            1_000 + round as u64,
                            1_796_000_779_668_786 + 9_973 * round as u64 + i as u64,
                            99_999_999 + round as u64,
                            u64::MAX - round as u64,
                        ][(i + tid as usize + round as usize) % 4];
                        // Each line twice: the second finds its middle as the last used.
                        for ts in [ts, ts.saturating_add(1)] {
                            let p = Pending::Complete {
                                layer,
                                name,
                                cat,
                                ts,
                                dur: 3,
                                args: &args,
                            };
                            let mut buf = vec![0u8; p.len()];
                            p.write(&mut buf);
                            let rec = Record::decode(&buf).unwrap();
                            let (mut a, mut b) = (Vec::new(), Vec::new());
                            let h = &mut |_: &[u8]| *b"0123456789abcdef";
                            complete_cached(&mut a, Some(&mut cache), &ctx, 5, tid, &rec, h);
                            complete(&mut b, &ctx, 5, tid, &rec, h);
                            assert_eq!(
                                String::from_utf8(a).unwrap(),
                                String::from_utf8(b).unwrap()
                            );
                        }
                    }
                }
            }
        }
    }

    fn weird_key() -> &'static str {
        "k\u{7f}\"y"
    }

    #[test]
    fn static_cache_evictions_keep_lines_exact() {
        use crate::event::FileRef;
        static A: Schema = Schema::new(
            Layer::LibcIo,
            "read",
            "POSIX",
            &[("fd", Slot::Int)],
            "fhash",
        );
        static B: Schema = Schema::new(
            Layer::LibcIo,
            "ftruncate",
            "POSIX",
            &[("ret", Slot::Int)],
            "fhash",
        );
        let file: &'static FileRef = Box::leak(Box::new(FileRef::new(b"/d/x")));
        let fhash = crate::hash::hash16(b"/d/x");
        let ctx = Ctx {
            pid: 1,
            hhash: "6882804a826580cd",
            metadata: true,
        };
        let mut cache = PrefixCache::default();
        // Many (schema, tid) pairs into 64 slots: collisions evict and refill slots.
        for round in 0..3u64 {
            for tid in 0..200u32 {
                for schema in [&A, &B] {
                    let p = Pending::Static {
                        schema,
                        ts: round,
                        dur: 1,
                        vals: &[7],
                        file: Some(file.handle()),
                    };
                    let mut buf = vec![0u8; p.len()];
                    p.write(&mut buf);
                    // SAFETY: written just above by Pending::write in this process.
                    #[allow(unsafe_code)]
                    let rec = unsafe { Record::decode_trusted(&buf) }.unwrap();
                    let (mut fast, mut slow) = (Vec::new(), Vec::new());
                    complete_static(
                        &mut fast,
                        &mut cache,
                        &ctx,
                        3,
                        tid,
                        &rec.static_view().unwrap(),
                    );
                    complete(&mut slow, &ctx, 3, tid, &rec, &mut |_| fhash);
                    assert_eq!(
                        String::from_utf8(fast).unwrap(),
                        String::from_utf8(slow).unwrap()
                    );
                }
            }
        }
    }

    /// `complete_static_at` and `complete_cached_at` name the previous line of the same
    /// template (the compressor's line hint): never another kind's, and for most lines when a
    /// dozen kinds alternate (two-way sets: kinds that hash alike do not evict each other).
    #[test]
    fn line_hints_name_the_previous_line_of_the_same_template() {
        use crate::event::FileRef;
        let schemas: Vec<&'static Schema> = [
            "open64", "fstat64", "isatty", "lseek64", "read", "close", "pread64", "write", "mmap",
            "fsync", "stat", "unlink",
        ]
        .iter()
        .map(|n| {
            &*Box::leak(Box::new(Schema::new(
                Layer::LibcIo,
                n,
                "POSIX",
                &[("fd", Slot::Int)],
                "fhash",
            )))
        })
        .collect();
        let file: &'static FileRef = Box::leak(Box::new(FileRef::new(b"/d/x")));
        let ctx = Ctx {
            pid: 1,
            hhash: "6882804a826580cd",
            metadata: true,
        };
        let mut cache = PrefixCache::default();
        let mut out = Vec::new();
        let mut last: std::collections::HashMap<String, u64> = Default::default();
        let (mut hinted, mut lines) = (0, 0);
        for round in 0..20u64 {
            for (k, schema) in schemas.iter().enumerate() {
                // Two threads, and every other line without its file: separate templates.
                for (tid, with_file) in [(5u32, true), (6, false)] {
                    let p = Pending::Static {
                        schema,
                        ts: round * 1000 + k as u64,
                        dur: 1,
                        vals: &[k as u64],
                        file: with_file.then(|| file.handle()),
                    };
                    let mut buf = vec![0u8; p.len()];
                    p.write(&mut buf);
                    // SAFETY: written just above by Pending::write in this process.
                    #[allow(unsafe_code)]
                    let rec = unsafe { Record::decode_trusted(&buf) }.unwrap();
                    let at = 100 + out.len() as u64;
                    let prev = complete_static_at(
                        &mut out,
                        &mut cache,
                        &ctx,
                        round,
                        tid,
                        &rec.static_view().unwrap(),
                        at,
                    );
                    let key = format!("{} {tid} {with_file}", schema.name);
                    if prev != 0 {
                        assert_eq!(Some(&prev), last.get(&key), "{key} round {round}");
                        hinted += 1;
                    }
                    last.insert(key, at);
                    lines += 1;
                }
            }
        }
        assert!(hinted * 10 >= lines * 8, "{hinted} of {lines} lines hinted");
        // Cached middles of other lines, the same way.
        let mut last = std::collections::HashMap::new();
        let (mut hinted, mut lines) = (0, 0);
        for round in 0..20 {
            for name in [
                "compute", "read", "step", "epoch", "load", "save", "fwd", "bwd",
            ] {
                let args = [Arg::int("step", round)];
                let p = Pending::Complete {
                    layer: Layer::Python,
                    name: name.as_bytes(),
                    cat: b"train",
                    ts: 10,
                    dur: 1,
                    args: &args,
                };
                let mut buf = vec![0u8; p.len()];
                p.write(&mut buf);
                let rec = Record::decode(&buf).unwrap();
                let at = 100 + out.len() as u64;
                let h = &mut |_: &[u8]| *b"0123456789abcdef";
                let prev = complete_cached_at(&mut out, Some(&mut cache), &ctx, 1, 5, &rec, h, at);
                if prev != 0 {
                    assert_eq!(Some(&prev), last.get(name), "{name}");
                    hinted += 1;
                }
                last.insert(name, at);
                lines += 1;
            }
        }
        assert!(
            hinted * 10 >= lines * 8,
            "{hinted} of {lines} cached lines hinted"
        );
        // Without a cache, nothing to name.
        let p = Pending::Complete {
            layer: Layer::Python,
            name: b"x",
            cat: b"y",
            ts: 1,
            dur: 1,
            args: &[],
        };
        let mut buf = vec![0u8; p.len()];
        p.write(&mut buf);
        let rec = Record::decode(&buf).unwrap();
        let h = &mut |_: &[u8]| *b"0123456789abcdef";
        assert_eq!(
            complete_cached_at(&mut out, None, &ctx, 1, 5, &rec, h, 7),
            0
        );
    }

    #[test]
    fn escapes_everything_json_needs() {
        let s = enc(b"q\"uo\\te\n\r\t\x08\x0c\x01\x7f");
        let back: String = serde_json::from_str(&s).unwrap();
        assert_eq!(back, "q\"uo\\te\n\r\t\x08\x0c\x01\x7f");
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        let s = enc(b"p\x86+m\xa5\x7f");
        let back: String = serde_json::from_str(&s).unwrap();
        assert_eq!(back, "p\u{fffd}+m\u{fffd}\x7f");
    }

    #[test]
    fn truncation_marker_is_visible() {
        let mut out = Vec::new();
        write_str(&mut out, b"abc", 10);
        let back: String = serde_json::from_str(std::str::from_utf8(&out).unwrap()).unwrap();
        assert_eq!(back, "abc...[truncated, 10 bytes]");
    }

    #[test]
    fn complete_line_shape() {
        let args = [
            Arg::int("i", 5),
            Arg::new("f", Value::Float(1.5)),
            Arg::str("s", "hello"),
            Arg::new("hhash", Value::Int(1)),
            Arg::new("nan", Value::Float(f64::NAN)),
            Arg::new("big", Value::Int(i64::MIN)),
            Arg::new("p", Value::Path(b"/x")),
        ];
        let p = Pending::Complete {
            layer: Layer::Python,
            name: b"ev0",
            cat: b"CAT",
            ts: 1795988293894894,
            dur: 10,
            args: &args,
        };
        let mut buf = vec![0; p.len()];
        p.write(&mut buf);
        let rec = Record::decode(&buf).unwrap();
        let ctx = Ctx {
            pid: 6427,
            hhash: "6882804a826580cd",
            metadata: true,
        };
        let mut out = Vec::new();
        complete(&mut out, &ctx, 2, 6427, &rec, &mut |p| {
            crate::hash::hash16(p)
        });
        let line = String::from_utf8(out).unwrap();
        assert!(line.starts_with(
            r#"{"id":2,"name":"ev0","cat":"CAT","type":6,"pid":6427,"tid":6427,"ts":1795988293894894,"dur":10,"ph":1,"args":{"hhash":"6882804a826580cd","i":5,"f":1.5,"s":"hello","user_hhash":1,"nan":null,"big":-9223372036854775808,"p":""#
        ), "{line}");
        assert!(line.ends_with("}}\n"));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            v["args"]["p"],
            crate::hash::hash_str(&crate::hash::hash16(b"/x"))
        );
        let ctx = Ctx {
            metadata: false,
            ..ctx
        };
        let mut out = Vec::new();
        complete(&mut out, &ctx, 2, 6427, &rec, &mut |p| {
            crate::hash::hash16(p)
        });
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"id\":2,\"name\":\"ev0\",\"cat\":\"CAT\",\"type\":6,\"pid\":6427,\"tid\":6427,\"ts\":1795988293894894,\"dur\":10,\"ph\":1}\n"
        );
    }

    #[test]
    fn meta_line_shape() {
        let ctx = Ctx {
            pid: 6427,
            hhash: "6882804a826580cd",
            metadata: true,
        };
        let mut out = Vec::new();
        meta_str(&mut out, &ctx, 6427, "HH", b"vm", b"6882804a826580cd");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"name\":\"HH\",\"cat\":\"dftracer\",\"type\":1,\"pid\":6427,\"tid\":6427,\"ph\":4,\"args\":{\"hhash\":\"6882804a826580cd\",\"name\":\"vm\",\"value\":\"6882804a826580cd\"}}\n"
        );
    }
}
