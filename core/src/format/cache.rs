//! Line caching: per (schema, tid, file) a [`Template`] of a static record's whole line as
//! padded constant pieces, per (name, cat, layer, tid) the middle of other complete lines;
//! both tables four-way set-associative, owned by the [`super::Encoder`].

use super::cursor::{HighDigits, LineHead, Tail, COPY_PAD, NUM_MAX};
use super::escape::Out;
use super::Ctx;
use crate::event::Schema;
use crate::record::{Record, Text};

/// Rendered constant text of lines, in small tables owned by the writer: per (schema, tid,
/// file or not) a [`Template`] of a static record's whole line but its numbers and file hash
/// (four-way: a set holds four templates, so the few kinds of line of a loop that hash alike
/// do not evict each other at every line); per (name, category, layer, tid) the middle
/// (`,"name":..,"cat":..,"type":..,"pid":..,"tid":..,"ts":`) of other lines. A hit replaces
/// escaped strings and numbers by whole-block copies.
pub struct PrefixCache {
    pub(super) statics: Box<[Template; CACHE_WAYS * CACHE_SETS]>,
    /// Per set of `statics`: which of its templates a miss replaces next (in turn, but
    /// never the template used last).
    pub(super) victim: [u8; CACHE_SETS],
    /// The keys and indexes in `statics` of the template used last and of the one used
    /// before it (consecutive lines are mostly of one kind, or of two alternating: an open
    /// and its close): no hashing on a repeat. Always the keys of those templates (`[0, 0]`:
    /// none).
    pub(super) mru: [([u64; 2], usize); 2],
    pub(super) named_victim: [u8; CACHE_SETS],
    pub(super) named: Vec<Named>,
    /// Index in `named` of the middle used last (consecutive lines are mostly of one kind):
    /// compared first, without hashing.
    pub(super) named_mru: usize,
    /// The high digits of the last cached-middle line's ts (a static line's are its
    /// template's [`LineHead`]).
    pub(super) ts_hi: HighDigits,
}

impl Default for PrefixCache {
    fn default() -> PrefixCache {
        PrefixCache {
            statics: Box::new(std::array::from_fn(|_| Template::default())),
            victim: [0; CACHE_SETS],
            mru: [([0, 0], 0); 2],
            named_victim: [0; CACHE_SETS],
            named: Vec::new(),
            named_mru: 0,
            ts_hi: HighDigits::default(),
        }
    }
}

/// A cached middle for a name and category: the key's bytes are kept and compared.
#[derive(Default)]
pub(super) struct Named {
    tid: u32,
    layer: u8,
    name_len: usize,
    /// name ++ cat
    pub(super) key: Vec<u8>,
    /// The middle, then [`COPY_PAD`] zero bytes (for [`Put::padded`](super::cursor::Put::padded)).
    prefix: Vec<u8>,
    /// Stream position of the last line written with this middle (0: none).
    pub(super) last_at: u64,
}

/// A static record's line as constant pieces around its variable parts, in order: the
/// middle, `ts`, `,"dur":`, `dur`, `,"ph":1` and (with metadata) `,"args":{"hhash":"..."`;
/// with metadata one piece `,"<key>":` per schema key (a record may fill fewer slots: the
/// rest are skipped), then `,"<file_key>":"` before the file hash; the last piece ends the
/// line. A line's id, middle and ts come from its [`LineHead`] (piece 0 is not copied).
/// Pieces are stored back to back
/// and followed by [`COPY_PAD`] zero bytes, so each is copied in whole 32-byte moves.
#[derive(Default)]
pub(super) struct Template {
    /// What the template was built for ([`Template::key`]); `[0, 0]`: an empty slot.
    pub(super) key: [u64; 2],
    pub(super) text: Vec<u8>,
    /// Start of each piece in `text` (one more entry: the end of the last).
    pub(super) cuts: Vec<u32>,
    /// Each piece as (start in `text`, length): what a line copies.
    pub(super) pieces: Vec<(u32, u32)>,
    /// With metadata, pieces 2 and 3 as one (start, length): nothing comes between them
    /// when a record fills every slot (or the schema has none).
    pub(super) merged: (u32, u32),
    /// Bytes of a line at most: `{"id":`, the pieces, [`NUM_MAX`] per number (id, ts, dur
    /// and one per key), 16 for the file hash.
    pub(super) bound: usize,
    /// Stream position of the last line written from this template (0: none).
    pub(super) last_at: u64,
    /// `{"id":`, the id, the middle (piece 0) and the ts's high digits of the last line
    /// written from this template: a line's head is mostly one copy of it.
    pub(super) head: LineHead,
    /// With metadata, the text after `dur` of the last line that filled every slot.
    pub(super) tail: Tail,
}

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
        // An empty slot until built whole (a build that panics leaves no half template).
        self.key = [0, 0];
        let (text, cuts) = (&mut self.text, &mut self.cuts);
        text.clear();
        cuts.clear();
        cuts.push(0);
        middle(text, ctx, &t(schema.name), &t(schema.cat), layer, tid);
        cuts.push(text.len() as u32);
        self.head = LineHead::new(text);
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
        self.tail = if ctx.metadata {
            Tail::new(self.bound, schema.keys.len())
        } else {
            Tail::default()
        };
        self.key = Template::key(ctx, schema, tid, file);
        self.last_at = 0;
    }
}

/// Entries per set of both tables ([`PrefixCache::statics`], [`PrefixCache::named`]). A
/// set's entries are those whose keys hash alike, and the keys hold the schemas' addresses
/// (templates) or the thread ids (middles): with two ways in 64 sets, three of a loop's ten
/// kinds of line met in one set in about 3 % of processes (as the addresses and ids fell),
/// and then evicted one another at every line (each line built its template again and lost
/// its hint: the `kinds` test's trace came out at 98-102 % of its unhinted size instead of
/// ~82 %). Five of ten in one set of 32 is about a hundred times rarer.
pub(super) const CACHE_WAYS: usize = 4;
/// Sets of each table: 128 entries in all.
pub(super) const CACHE_SETS: usize = 32;

/// The line's middle from `,"name":` to `"ts":`, as [`super::event::complete`] writes it.
pub(super) fn middle(v: &mut impl Out, ctx: &Ctx, name: &Text, cat: &Text, layer: u64, tid: u32) {
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

/// The middle of `rec`'s line from `PrefixCache::named`, padded (its length is the second
/// value); `None` for clipped names or categories (not cached).
#[inline(always)]
pub(super) fn named_prefix<'c>(
    named: &'c mut Vec<Named>,
    named_victim: &mut [u8; CACHE_SETS],
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
        *named = (0..CACHE_WAYS * CACHE_SETS)
            .map(|_| Named::default())
            .collect();
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
    // The middle used last.
    let i = if fits(&named[*mru]) {
        *mru
    } else {
        let set = named_set(name.bytes, cat.bytes, tid);
        let first = CACHE_WAYS * set;
        // Four-way, replaced in turn but never the middle used last, as the static templates
        // (the sets depend on the thread ids: with two ways, three kinds of one thread met in
        // one set in a few processes in a hundred and evicted one another at every line).
        let (hit, way) = match named[first..first + CACHE_WAYS].iter().position(fits) {
            Some(w) => (true, w),
            None => {
                let mut w = named_victim[set] as usize % CACHE_WAYS;
                if first + w == *mru {
                    w = (w + 1) % CACHE_WAYS;
                }
                named_victim[set] = ((w + 1) % CACHE_WAYS) as u8;
                (false, w)
            }
        };
        let slot = &mut named[first + way];
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
        *mru = first + way;
        *mru
    };
    let slot = &mut named[i];
    let n = slot.prefix.len() - COPY_PAD;
    Some((&slot.prefix, n, &mut slot.last_at))
}

/// The set of `named` where the middle of (`name`, `cat`) on thread `tid` lives.
#[inline(always)]
pub(super) fn named_set(name: &[u8], cat: &[u8], tid: u32) -> usize {
    let mut h = crate::hash::FastHasher::default();
    std::hash::Hasher::write(&mut h, name);
    std::hash::Hasher::write(&mut h, cat);
    let set = (std::hash::Hasher::finish(&h) ^ tid as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        >> (64 - CACHE_SETS.trailing_zeros());
    set as usize & (CACHE_SETS - 1)
}

/// The set of `statics` ([`CACHE_WAYS`] ways) where the template of `key` (on thread `tid`)
/// lives.
#[inline(always)]
fn set_of(key: [u64; 2], tid: u32) -> usize {
    let set = ((key[0] ^ (tid as u64) << 2).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        >> (64 - CACHE_SETS.trailing_zeros())) as usize;
    set & (CACHE_SETS - 1)
}

/// The set [`template`] uses for (`schema`, `tid`, `file`): tests tell which templates share
/// one (more than [`CACHE_WAYS`] in a set evict one another).
#[cfg(test)]
pub(super) fn template_set(ctx: &Ctx, schema: &Schema, tid: u32, file: bool) -> usize {
    set_of(Template::key(ctx, schema, tid, file), tid)
}

impl PrefixCache {
    /// [`template`] of (schema, tid, file) in this cache, and the timestamps' high digits
    /// (borrowed together: a mixed line writes both).
    #[inline(always)]
    pub(super) fn template_for(
        &mut self,
        ctx: &Ctx,
        schema: &Schema,
        layer: u64,
        tid: u32,
        file: bool,
    ) -> (&mut Template, &mut HighDigits) {
        let t = template(
            &mut self.statics,
            &mut self.victim,
            &mut self.mru,
            ctx,
            schema,
            layer,
            tid,
            file,
        );
        (t, &mut self.ts_hi)
    }
}

/// The template of (schema, tid, file) for this file's context, built on a miss. Its
/// `pieces` hold `4 + keys + file` pieces with metadata, else 3, and with metadata its
/// tail was made for it (checked whenever it
/// becomes the template used last, which a repeat returns without a check).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn template<'c>(
    statics: &'c mut [Template; CACHE_WAYS * CACHE_SETS],
    victim: &mut [u8; CACHE_SETS],
    mru: &mut [([u64; 2], usize); 2],
    ctx: &Ctx,
    schema: &Schema,
    layer: u64,
    tid: u32,
    file: bool,
) -> &'c mut Template {
    let key = Template::key(ctx, schema, tid, file);
    const ALL: usize = CACHE_WAYS * CACHE_SETS;
    // The template used last, or the one before it. (An empty slot's key `[0, 0]` never
    // equals a schema's key.) Each had its shape checked below when it was found, and is
    // unchanged since: only a miss (which sets `mru` again, keeping the other entry only if
    // its template was not rebuilt) builds.
    if key == mru[0].0 {
        return &mut statics[mru[0].1 & (ALL - 1)];
    }
    if key == mru[1].0 {
        return &mut statics[mru[1].1 & (ALL - 1)];
    }
    // No template is one used last while a miss may rebuild it.
    let before = std::mem::take(mru)[0];
    let set = set_of(key, tid);
    let first = CACHE_WAYS * set;
    let way = if let Some(w) = statics[first..first + CACHE_WAYS]
        .iter()
        .position(|t| t.key == key)
    {
        w
    } else {
        // The set's templates are replaced in turn, skipping the one used last (the line
        // before this one, often of the same thread: it comes back next).
        let mut w = victim[set] as usize % CACHE_WAYS;
        if first + w == before.1 && before.0 != [0, 0] {
            w = (w + 1) % CACHE_WAYS;
        }
        victim[set] = ((w + 1) % CACHE_WAYS) as u8;
        // A copy made here: the caller's context then never has its address taken, and
        // stays in registers on the hot path.
        let ctx = Ctx {
            pid: ctx.pid,
            hhash: ctx.hhash,
            metadata: ctx.metadata,
        };
        statics[first + w].build(&ctx, schema, layer, tid, file);
        w
    };
    let t = &statics[first + way];
    // The shape check the line's piece indexes rely on (see `complete_static`): the
    // template was built for this (schema, file, metadata).
    let want = if ctx.metadata {
        4 + schema.keys.len() + file as usize
    } else {
        3
    };
    assert!(t.pieces.len() == want, "json: template shape");
    // With metadata, the tail the line's end may be copied from: made for this template
    // (emptied when it was built).
    assert!(
        !ctx.metadata || t.tail.fits(t.bound, schema.keys.len()),
        "json: template tail"
    );
    let i = first + way;
    // The template used last until now is kept as the one used before, unless this miss
    // rebuilt it (it cannot: a miss skips it; the check keeps the invariant local).
    let before = if statics[before.1 & (ALL - 1)].key == before.0 {
        before
    } else {
        ([0, 0], 0)
    };
    *mru = [(key, i), before];
    &mut statics[i]
}

/// The start of every complete line.
pub(super) const ID_OPEN: &[u8; 6] = b"{\"id\":";
