//! The DFTracer trace format: every byte of a trace's JSON lines is written here, by the
//! [`Encoder`] (the writer and the aggregator call it; nothing else builds trace JSON).
//!
//! Guarantees: every line is one valid JSON object ending in `\n`; every string goes through
//! [`write_str`] (the one escaping function): quotes, backslashes and control bytes are
//! escaped, invalid UTF-8 becomes U+FFFD, and a string clipped at record time gets a visible
//! `...[truncated, N bytes]` marker inside its quotes; integers are exact 64-bit; floats are
//! shortest round-trip (`ryu`), non-finite floats are `null`; args keep insertion order with
//! `hhash` first.
//!
//! Files: `escape.rs` strings and numbers (and [`escape::Out`], what a line is written
//! into); `cursor.rs` the write cursor over reserved space and the raw writes of template
//! lines (all of the format's unsafe code); `cache.rs` line caching (static records'
//! templates, other lines' middles); `event.rs` complete events (ph 1) and counters (ph 2);
//! `records.rs` metadata (ph 4), the header and `start`, `end`, aggregated records (ph 3).

mod cache;
mod cursor;
mod escape;
pub(crate) use escape::plain_text;
mod event;
mod records;
#[cfg(test)]
mod tests;

use crate::hash::Hash16;
use crate::record::{Record, StaticView, Text};
pub use cache::PrefixCache;
pub use escape::{write_f64, write_i64, write_str, write_u64};
pub use records::{AppValue, Bucket, End, Header, Num, VERSION};

/// Per-file facts every line needs.
pub struct Ctx<'a> {
    pub pid: u32,
    pub hhash: &'a str,
    pub metadata: bool,
}

/// Where a complete event's line goes: its id, its thread (as written), and `at`, the
/// stream position the line starts at (every JSON byte written to the file before it: see
/// [`Encoder::complete_static`]).
#[derive(Clone, Copy, Debug)]
pub struct Line {
    pub id: u64,
    pub tid: u32,
    pub at: u64,
}

/// The encoder of one trace file: its facts (pid, host hash, metadata on or off) and the
/// caches of rendered line text. Every record kind of the format is one method.
pub struct Encoder {
    pid: u32,
    hhash: String,
    metadata: bool,
    cache: PrefixCache,
    /// The text of an `FH` line before its path, and the thread it names (`None`: not
    /// rendered yet): [`Encoder::fh`].
    fh_head: Vec<u8>,
    fh_tid: Option<u32>,
}

impl Encoder {
    pub fn new(pid: u32, hhash: &str, metadata: bool) -> Encoder {
        Encoder {
            pid,
            hhash: hhash.to_string(),
            metadata,
            cache: PrefixCache::default(),
            fh_head: Vec::new(),
            fh_tid: None,
        }
    }

    /// The file's facts.
    #[inline(always)]
    pub fn ctx(&self) -> Ctx<'_> {
        Ctx {
            pid: self.pid,
            hhash: &self.hhash,
            metadata: self.metadata,
        }
    }

    /// A complete event (ph 1): `id,name,cat,type,pid,tid,ts,dur,ph[,args]`, its middle
    /// cached; path args are written as the hash `hash_of` gives. Returns the stream position
    /// of the previous line with the same middle (0: none, or not cached), for the
    /// compressor's line hint.
    pub fn complete(
        &mut self,
        out: &mut Vec<u8>,
        line: Line,
        rec: &Record,
        hash_of: &mut dyn FnMut(&[u8]) -> Hash16,
    ) -> u64 {
        let ctx = Ctx {
            pid: self.pid,
            hhash: &self.hhash,
            metadata: self.metadata,
        };
        event::complete(out, Some(&mut self.cache), &ctx, line, rec, hash_of)
    }

    /// [`Encoder::complete`] without the cache (the same bytes; `line.at` unused).
    pub fn complete_uncached(
        &self,
        out: &mut Vec<u8>,
        line: Line,
        rec: &Record,
        hash_of: &mut dyn FnMut(&[u8]) -> Hash16,
    ) {
        event::complete(out, None, &self.ctx(), line, rec, hash_of);
    }

    /// A static record's complete event: the line [`Encoder::complete`] writes for it, from
    /// its schema's template. Returns the stream position of the previous line written from
    /// the same template (0: none): that line differs from this one in its numbers only
    /// ([`crate::deflate::hint`]).
    #[inline(always)]
    pub fn complete_static(&mut self, out: &mut Vec<u8>, line: Line, rec: &StaticView) -> u64 {
        let (ctx, cache) = self.ctx_and_cache();
        event::complete_static(out, cache, &ctx, line, rec)
    }

    /// The line context and the template cache, borrowed together.
    #[inline(always)]
    fn ctx_and_cache(&mut self) -> (Ctx<'_>, &mut PrefixCache) {
        let ctx = Ctx {
            pid: self.pid,
            hhash: &self.hhash,
            metadata: self.metadata,
        };
        (ctx, &mut self.cache)
    }

    /// A mixed static record's complete event: its float, bool and string slots written
    /// through the checked cursor (see [`event::complete_mixed`]).
    pub fn complete_mixed(&mut self, out: &mut Vec<u8>, line: Line, rec: &StaticView) -> u64 {
        let (ctx, cache) = self.ctx_and_cache();
        event::complete_mixed(out, cache, &ctx, line, rec)
    }

    /// A counter event (ph 2): `name,cat,type,ts,ph,pid,tid,args` (args always written).
    pub fn counter(
        &self,
        out: &mut Vec<u8>,
        tid: u32,
        rec: &Record,
        hash_of: &mut dyn FnMut(&[u8]) -> Hash16,
    ) {
        event::counter(out, &self.ctx(), tid, rec, hash_of);
    }

    /// A metadata record (ph 4): `{"name":N,"cat":"dftracer","type":T,"pid","tid","ph":4,
    /// "args":{"hhash","name":K,"value":V}}`.
    pub fn meta(&self, out: &mut Vec<u8>, tid: u32, layer: u8, name: &Text, k: &Text, v: &Text) {
        records::meta(out, &self.ctx(), tid, layer, name, k, v);
    }

    /// The `FH` record of `path` (its hash `hash`, 16 hex digits): the line [`Encoder::meta`]
    /// writes for `FH`, type 1, from a head rendered once per thread (a process's new files
    /// each have one, so a training loop writes one per sample).
    pub fn fh(&mut self, out: &mut Vec<u8>, tid: u32, path: &Text, hash: &Hash16) {
        debug_assert!(hash.iter().all(u8::is_ascii_hexdigit));
        if self.fh_tid != Some(tid) {
            let ctx = Ctx {
                pid: self.pid,
                hhash: &self.hhash,
                metadata: self.metadata,
            };
            self.fh_head.clear();
            records::meta_head(&mut self.fh_head, &ctx, tid, 1, b"FH");
            self.fh_tid = Some(tid);
        }
        records::fh_line(out, &self.fh_head, path, hash);
    }

    /// [`Encoder::meta`] of type 1 for plain strings (`k` clipped as any string).
    pub fn meta_str(&self, out: &mut Vec<u8>, tid: u32, name: &str, k: &[u8], v: &[u8]) {
        records::meta_str(out, &self.ctx(), tid, name, k, v);
    }

    /// The file's header records and its `start` record (id 1).
    pub fn header(&self, out: &mut Vec<u8>, h: &Header) {
        records::header(out, &self.ctx(), h);
    }

    /// The file's `end` record.
    pub fn end(&self, out: &mut Vec<u8>, e: &End) {
        records::end(out, &self.ctx(), e);
    }

    /// An aggregated record (ph 3) of bucket `b`, with `stats`: (name, [first, min, max,
    /// sum]) for `dur` and each numeric arg.
    pub fn aggregated<'s>(
        &self,
        out: &mut Vec<u8>,
        b: &Bucket,
        stats: impl IntoIterator<Item = (&'s [u8], [Num; 4])>,
    ) {
        records::aggregated(out, &self.ctx(), b, stats);
    }
}
