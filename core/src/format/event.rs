//! Event lines: complete events (ph 1: the generic line, with a cached middle or without,
//! and a static record's line from its template) and counters (ph 2).

use super::cache::{middle, named_prefix, PrefixCache, Template};
use super::cursor::{
    put16, put_head, put_lit8, put_num, put_piece, put_slot, put_tail, reserved, Put, LINE_PAD,
};
use super::escape::{hhash_open, kv_u64, text, write_u64, Out};
use super::{Ctx, Line};
use crate::event::Slot;
use crate::hash::Hash16;
use crate::record::{ArgValue, Record, StaticView, Text};

/// Writes user args after `hhash` (which is already open). Path args are written as the hash
/// `hash_of` gives.
fn user_args(out: &mut impl Out, rec: &Record, hash_of: &mut dyn FnMut(&[u8]) -> Hash16) {
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
///
/// With `cache`, the line's constant middle (`,"name":..,"ts":`) comes from it when this
/// name, category, layer and thread were rendered before, and the return value is the
/// stream position of the previous line with that middle (0: none, or not cached; see
/// [`complete_static`] for the positions).
pub(super) fn complete(
    out: &mut Vec<u8>,
    cache: Option<&mut PrefixCache>,
    ctx: &Ctx,
    line: Line,
    rec: &Record,
    hash_of: &mut dyn FnMut(&[u8]) -> Hash16,
) -> u64 {
    let Line { id, tid, at } = line;
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
pub(super) fn complete_vec(
    out: &mut Vec<u8>,
    ctx: &Ctx,
    id: u64,
    tid: u32,
    rec: &Record,
    hash_of: &mut dyn FnMut(&[u8]) -> Hash16,
) {
    out.extend_from_slice(b"{\"id\":");
    write_u64(out, id);
    out.push(b',');
    name_cat_type(out, rec);
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

/// Everything after the middle: `ts`, `dur`, `ph` and, with metadata, the args that `args`
/// writes after `hhash`.
#[inline(always)]
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

/// A complete event of a static record ([`Record::schema`]): the same line [`complete`]
/// writes, from the schema's [`Template`] and the record's numbers (no escaping, no decoding
/// of args).
///
/// The line is written through a raw cursor without a check per write. The bound is proven
/// once per line instead: the template's `bound` counts `{"id":`, every piece, [`NUM_MAX`](super::cursor::NUM_MAX)
/// bytes for each of the `3 + keys` numbers and 16 for the file hash; the line writes
/// `{"id":`, the id, the middle and the ts (the template's [`LineHead`](super::cursor::LineHead)), each piece but
/// the middle at most once, dur, at most `keys` slot values (the
/// loop runs over the schema's keys) and the hash only with the file piece. `bound +
/// LINE_PAD` bytes are reserved (and checked) before the first write, and the piece
/// count the indexes rely on was checked against the record's shape by
/// [`template`](super::cache::template) (at a miss; a repeat returns the same template).
///
/// The line starts at position `line.at` of the writer's stream (all JSON bytes it wrote so
/// far); returns the position of the previous line written from the
/// same template (0: none). The difference is the compressor's line hint
/// ([`crate::deflate::hint`]): that line differs from this one in its numbers only.
#[inline(always)]
pub(super) fn complete_static(
    out: &mut Vec<u8>,
    cache: &mut PrefixCache,
    ctx: &Ctx,
    line: Line,
    rec: &StaticView,
) -> u64 {
    let Line { id, tid, at } = line;
    let schema = rec.schema;
    let fhash = rec.file.filter(|_| ctx.metadata).map(|f| f.hash());
    let file = fhash.is_some();
    let (t, _) = cache.template_for(ctx, schema, rec.layer as u64, tid, file);
    let prev = std::mem::replace(&mut t.last_at, at);
    let Template {
        text,
        pieces,
        merged,
        bound,
        head,
        tail,
        ..
    } = t;
    let (merged, bound) = (*merged, *bound);
    let keys = schema.keys.len();
    let pieces = &pieces[..];
    // The shape `template` checked: `want` pieces.
    let want = pieces.len();
    debug_assert_eq!(
        want,
        if ctx.metadata {
            4 + keys + file as usize
        } else {
            3
        }
    );
    // `reserve` leaves at least `bound + LINE_PAD` spare bytes (or panics).
    out.reserve(bound + LINE_PAD);
    let text = text.as_ptr();
    let start = out.len();
    let vals = rec.vals.as_chunks::<8>().0;
    // Every slot filled: the line ends with the template's tail (`merged`, pieces 2 and 3,
    // then the slots).
    let full = vals.len() == keys;
    #[allow(unsafe_code)]
    // SAFETY: `t.bound + LINE_PAD` spare bytes are reserved and the writes below stay
    // within `t.bound` (see above; each `put_*` says how far it may write past what it
    // keeps: at most LINE_PAD (the tail's copy), else COPY_PAD; piece 1, `,"dur":`, is
    // written as a literal: 8 bytes, 7 kept, as the template's bound counts). Piece indexes
    // are `< want == pieces.len()`: 2, `3 + i` for `i < keys`, `3 + keys` and, with a file,
    // `4 + keys`; when every slot is filled, the tail (`put_tail`, with metadata: `want >=
    // 4`, and the template's tail made for it, also checked by `template`) holds `merged`
    // (pieces 2 and 3, in `text` as every piece is), `4 + i` for `i < keys` and, with a
    // file, `4 + keys`; every piece is followed by COPY_PAD readable bytes. Each piece is
    // written at most once: `merged` replaces pieces 2 and 3.
    unsafe {
        let base = out.as_mut_ptr().add(start);
        let piece = |d: *mut u8, i: usize| {
            let (a, n) = *pieces.get_unchecked(i);
            put_piece(d, text.add(a as usize), n as usize)
        };
        let mut d = put_head(base, head, id, rec.ts);
        // Piece 1 is `,"dur":` in every template: one 8-byte store (7 bytes kept).
        d = put_lit8(d, b",\"dur\":\0", 7);
        d = put_num(d, rec.dur);
        // The template's tail of such lines, patched (see `Tail`), unless this line is
        // written piece by piece (`put_tail`).
        let tailed = if ctx.metadata && full {
            put_tail(
                d,
                tail,
                text,
                pieces,
                merged,
                schema.keys,
                vals,
                fhash.as_ref(),
            )
        } else {
            None
        };
        if let Some(end) = tailed {
            d = end;
        } else if !ctx.metadata {
            d = piece(d, 2);
        } else {
            d = piece(d, 2);
            for (i, (&(_, slot), v)) in schema.keys.iter().zip(vals).enumerate() {
                d = piece(d, 3 + i);
                d = put_slot(d, slot, u64::from_le_bytes(*v));
            }
            let mut end = 3 + keys;
            if let Some(h) = &fhash {
                d = piece(d, end);
                d = put16(d, h);
                end += 1;
            }
            d = piece(d, end);
        }
        let n = d.offset_from(base) as usize;
        assert!(n <= bound, "json: line bound exceeded");
        out.set_len(start + n);
    }
    prev
}

/// [`complete_static`] for a schema with float, bool or string slots
/// ([`crate::intern_args`], a [`crate::record::KIND_MIXED`] record): the same template's
/// pieces, written through the checked cursor, the values as [`complete`] writes them
/// (strings escaped; a record's strings are whole, at most [`crate::event::MAX_STR`] bytes
/// each). Returns the previous line's position, as [`complete_static`] does.
pub(super) fn complete_mixed(
    out: &mut Vec<u8>,
    cache: &mut PrefixCache,
    ctx: &Ctx,
    line: Line,
    rec: &StaticView,
) -> u64 {
    let fhash = rec.file.filter(|_| ctx.metadata).map(|f| f.hash());
    let fhash = fhash.as_ref();
    let (t, ts_hi) =
        cache.template_for(ctx, rec.schema, rec.layer as u64, line.tid, fhash.is_some());
    let prev = std::mem::replace(&mut t.last_at, line.at);
    let keys = rec.schema.keys;
    // The template's bound counts NUM_MAX bytes per slot; a string takes its quotes and at
    // most 6 bytes a byte (`\u00XX`), a float at most 24 (`ryu`'s longest), a bool 5.
    let bound = t.bound + 6 * rec.strs.len() + 8 * keys.len();
    let (text, pieces) = (&t.text, &t.pieces);
    // Each piece is followed by COPY_PAD bytes of the text: copied 16 bytes at a time.
    let piece = |p: &mut Put, i: usize| {
        let (a, n) = pieces[i];
        p.padded(&text[a as usize..], n as usize)
    };
    let long = |p: &mut Put, i: usize| {
        let (a, n) = pieces[i];
        p.bytes(&text[a as usize..(a + n) as usize])
    };
    let mut strs = rec.strs;
    reserved(out, bound, |p| {
        p.lit(b"{\"id\":");
        p.num(line.id);
        long(p, 0);
        p.num_split(rec.ts, ts_hi);
        p.lit(b",\"dur\":");
        p.num(rec.dur);
        long(p, 2);
        if !ctx.metadata {
            return;
        }
        for (i, (&(_, slot), v)) in keys.iter().zip(rec.vals.chunks_exact(8)).enumerate() {
            piece(p, 3 + i);
            let v = u64::from_le_bytes(v.try_into().unwrap_or_default());
            match slot {
                Slot::Int => p.i64(v as i64),
                Slot::UInt => p.num(v),
                Slot::Float => p.f64(f64::from_bits(v)),
                Slot::Bool => p.put(if v != 0 { b"true" } else { b"false" }),
                Slot::Str => {
                    let (s, rest) = strs.split_at((v as usize).min(strs.len()));
                    strs = rest;
                    p.text(&Text {
                        bytes: s,
                        orig_len: s.len(),
                    });
                }
            }
        }
        // Slots without a value (a short record) are left out, as in `complete_static`.
        let mut end = 3 + keys.len();
        if let Some(h) = fhash {
            piece(p, end);
            p.bytes(h);
            end += 1;
        }
        piece(p, end);
    });
    prev
}

/// `"name":…,"cat":…,"type":…,`: how the lines written into a growable buffer (long
/// complete events, counters) begin after their `{` (and id).
fn name_cat_type(out: &mut Vec<u8>, rec: &Record) {
    out.extend_from_slice(b"\"name\":");
    text(out, &rec.name);
    out.extend_from_slice(b",\"cat\":");
    text(out, &rec.cat);
    out.push(b',');
    kv_u64(out, "type", rec.layer as u64);
}

/// A counter event (ph 2): `name,cat,type,ts,ph,pid,tid,args` (args always written).
pub(super) fn counter(
    out: &mut Vec<u8>,
    ctx: &Ctx,
    tid: u32,
    rec: &Record,
    hash_of: &mut dyn FnMut(&[u8]) -> Hash16,
) {
    out.push(b'{');
    name_cat_type(out, rec);
    kv_u64(out, "ts", rec.ts);
    out.extend_from_slice(b"\"ph\":2,");
    kv_u64(out, "pid", ctx.pid as u64);
    kv_u64(out, "tid", tid as u64);
    hhash_open(out, ctx);
    user_args(out, rec, hash_of);
    out.extend_from_slice(b"}}\n");
}
