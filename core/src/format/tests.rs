//! The format's tests: every cached, reserved and template line equals the generic
//! growable line byte for byte; escaping; line shapes.

use super::cache::PrefixCache;
use super::event::{self, complete_vec};
use super::{records, write_str, Ctx, Line};
use crate::event::{Schema, Slot};

/// A line at stream position 0: `id`, `tid`.
/// The context of a test trace: process `pid`, the tests' host hash.
fn ctx(pid: u32, metadata: bool) -> Ctx<'static> {
    Ctx {
        pid,
        hhash: "6882804a826580cd",
        metadata,
    }
}

fn at0(id: u64, tid: u32) -> Line {
    Line { id, tid, at: 0 }
}

fn meta_str(out: &mut Vec<u8>, ctx: &Ctx, tid: u32, name: &str, k: &[u8], v: &[u8]) {
    records::meta_str(out, ctx, tid, name, k, v);
}

use crate::event::{Arg, Layer, Value};
use crate::record::{Pending, Record};

/// A static record of `schema` as a ring holds it (`Pending::write`), its line written from
/// its template at `line`: the position of the previous line of that template it returns.
#[allow(clippy::too_many_arguments)]
fn static_line(
    out: &mut Vec<u8>,
    cache: &mut PrefixCache,
    ctx: &Ctx,
    schema: &'static Schema,
    ts: u64,
    vals: &[u64],
    file: Option<crate::files::FileHandle>,
    line: Line,
) -> u64 {
    let p = Pending::Static {
        strs: &[],
        schema,
        ts,
        dur: 1,
        vals,
        file,
    };
    let mut buf = vec![0u8; p.len()];
    p.write(&mut buf);
    // SAFETY: written just above by Pending::write in this process.
    #[allow(unsafe_code)]
    let rec = unsafe { Record::decode_trusted(&buf) }.unwrap();
    event::complete_static(out, cache, ctx, line, &rec.static_view().unwrap())
}

/// A generic complete record (no args) as a ring holds it, its line written with `cache`
/// at `line`: the position of the previous line of its middle it returns.
fn complete_line(
    out: &mut Vec<u8>,
    cache: &mut PrefixCache,
    ctx: &Ctx,
    name: &[u8],
    args: &[Arg],
    line: Line,
) -> u64 {
    let p = Pending::Complete {
        layer: Layer::Python,
        name,
        cat: b"train",
        ts: 10,
        dur: 1,
        args,
    };
    let mut buf = vec![0u8; p.len()];
    p.write(&mut buf);
    let rec = Record::decode(&buf).unwrap();
    event::complete(out, Some(cache), ctx, line, &rec, &mut |_: &[u8]| {
        *b"0123456789abcdef"
    })
}

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
    use crate::event::FileRef;
    use crate::record::StaticRecord;
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
        let ctx = ctx(77, metadata);
        for schema in &schemas {
            for n in [0, 1, schema.keys.len(), schema.keys.len() + 1] {
                for f in [None, Some(file)] {
                    for (j, &id) in ids.iter().enumerate() {
                        let ts = tss[j % tss.len()];
                        let p = Pending::Static {
                            strs: &[],
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
                        event::complete_static(
                            &mut fast,
                            &mut cache,
                            &ctx,
                            at0(id, 9),
                            &srec.view(),
                        );
                        event::complete(&mut slow, None, &ctx, at0(id, 9), &rec, &mut |_| fhash);
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
    use crate::event::FileRef;
    use crate::record::Record;
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
        let ctx = ctx(4242, metadata);
        for (vals, f) in cases {
            let p = Pending::Static {
                strs: &[],
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
            event::complete_static(
                &mut fast,
                &mut cache,
                &ctx,
                at0(99, 7),
                &rec.static_view().unwrap(),
            );
            event::complete_static(
                &mut fast,
                &mut cache,
                &ctx,
                at0(99, 7),
                &rec.static_view().unwrap(),
            );
            event::complete(&mut slow, None, &ctx, at0(99, 7), &rec, &mut |_| fhash);
            event::complete(&mut slow, None, &ctx, at0(99, 7), &rec, &mut |p| {
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
        let ctx = ctx(7, metadata);
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
            event::complete(&mut a, None, &ctx, at0(12, 34), &rec, &mut |_| {
                *b"0123456789abcdef"
            });
            complete_vec(&mut b, &ctx, 12, 34, &rec, &mut |_| *b"0123456789abcdef");
            assert_eq!(String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
        }
    }
}

#[test]
fn cached_middles_equal_uncached_lines() {
    let ctx = ctx(99, true);
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
                        event::complete(&mut a, Some(&mut cache), &ctx, at0(5, tid), &rec, h);
                        event::complete(&mut b, None, &ctx, at0(5, tid), &rec, h);
                        assert_eq!(String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
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
    let ctx = ctx(1, true);
    let mut cache = PrefixCache::default();
    // Many (schema, tid) pairs into 64 slots: collisions evict and refill slots.
    for round in 0..3u64 {
        for tid in 0..200u32 {
            for schema in [&A, &B] {
                let p = Pending::Static {
                    strs: &[],
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
                event::complete_static(
                    &mut fast,
                    &mut cache,
                    &ctx,
                    at0(3, tid),
                    &rec.static_view().unwrap(),
                );
                event::complete(&mut slow, None, &ctx, at0(3, tid), &rec, &mut |_| fhash);
                assert_eq!(
                    String::from_utf8(fast).unwrap(),
                    String::from_utf8(slow).unwrap()
                );
            }
        }
    }
}

/// The first [`CACHE_WAYS`](super::cache::CACHE_WAYS) of `make(0)`, `make(1)`, ... that
/// `set_of` puts in one set.
fn sharing_a_set<K: Clone>(make: impl Fn(usize) -> K, set_of: impl Fn(&K) -> usize) -> Vec<K> {
    let mut by_set: std::collections::HashMap<usize, Vec<K>> = Default::default();
    for i in 0..100_000 {
        let k = make(i);
        let v = by_set.entry(set_of(&k)).or_default();
        v.push(k);
        if v.len() == super::cache::CACHE_WAYS {
            return v.clone();
        }
    }
    panic!("no keys that share a set");
}

/// Lines of `n` kinds in turn, the first again between the others (a loop's open and its
/// reads), for 10 rounds; `write(out, cache, kind, round, at)` writes one of `kind` at stream
/// position `at` and returns the position it names: every line after the first round must
/// name the previous line of its kind.
fn hinted_in_turn(
    n: usize,
    mut write: impl FnMut(&mut Vec<u8>, &mut PrefixCache, usize, u64, u64) -> u64,
) {
    let mut cache = PrefixCache::default();
    let mut out = Vec::new();
    let mut last = vec![0u64; n];
    for round in 0..10u64 {
        for k in (1..n).flat_map(|k| [0, k]) {
            let at = 100 + out.len() as u64;
            let prev = write(&mut out, &mut cache, k, round, at);
            if round > 0 || (k == 0 && last[0] != 0) {
                assert_eq!(prev, last[k], "kind {k} round {round}: its previous line");
            }
            last[k] = at;
        }
    }
}

/// As many templates as a cache set has ways, all in one set (schemas tried until that many
/// share one), used in turn: none evicts another (with two ways, three kinds of a loop that
/// met in one set rebuilt their templates at every line and lost every hint).
#[test]
fn templates_sharing_a_set_keep_their_hints() {
    use crate::event::FileRef;
    let ctx = ctx(1, true);
    let tid = 5u32;
    let group = sharing_a_set(
        |i| -> &'static Schema {
            let name: &'static str = Box::leak(format!("k{i}").into_boxed_str());
            Box::leak(Box::new(Schema::new(
                Layer::LibcIo,
                name,
                "POSIX",
                &[("fd", Slot::Int)],
                "fhash",
            )))
        },
        |s| super::cache::template_set(&ctx, s, tid, true),
    );
    let file: &'static FileRef = Box::leak(Box::new(FileRef::new(b"/d/x")));
    hinted_in_turn(group.len(), |out, cache, k, round, at| {
        let line = Line { id: round, tid, at };
        let (ts, vals) = (round * 1000 + k as u64, [k as u64]);
        static_line(
            out,
            cache,
            &ctx,
            group[k],
            ts,
            &vals,
            Some(file.handle()),
            line,
        )
    });
}

/// The middles of other lines, the same way.
#[test]
fn middles_sharing_a_set_keep_their_hints() {
    let ctx = ctx(1, true);
    let tid = 5u32;
    let group = sharing_a_set(
        |i| format!("n{i}"),
        |n| super::cache::named_set(n.as_bytes(), b"train", tid),
    );
    hinted_in_turn(group.len(), |out, cache, k, _, at| {
        complete_line(
            out,
            cache,
            &ctx,
            group[k].as_bytes(),
            &[],
            Line { id: 1, tid, at },
        )
    });
}

/// Static and cached complete lines name the previous line of the same
/// template (the compressor's line hint): never another kind's, and for most lines when a
/// dozen kinds alternate (four-way sets: kinds that hash alike do not evict each other).
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
    let ctx = ctx(1, true);
    let mut cache = PrefixCache::default();
    let mut out = Vec::new();
    let mut last: std::collections::HashMap<String, u64> = Default::default();
    // Templates whose cache set holds more than its ways of this test's templates evict one
    // another, as the schemas' addresses fall: every other template is hinted on every round
    // after its first.
    let mut per_set: std::collections::HashMap<usize, usize> = Default::default();
    for schema in &schemas {
        for (tid, with_file) in [(5u32, true), (6, false)] {
            *per_set
                .entry(super::cache::template_set(&ctx, schema, tid, with_file))
                .or_default() += 1;
        }
    }
    let mut want = 0;
    let (mut hinted, mut lines) = (0, 0);
    for round in 0..20u64 {
        for (k, schema) in schemas.iter().enumerate() {
            // Two threads, and every other line without its file: separate templates.
            for (tid, with_file) in [(5u32, true), (6, false)] {
                let at = 100 + out.len() as u64;
                let prev = static_line(
                    &mut out,
                    &mut cache,
                    &ctx,
                    schema,
                    round * 1000 + k as u64,
                    &[k as u64],
                    with_file.then(|| file.handle()),
                    Line { id: round, tid, at },
                );
                let key = format!("{} {tid} {with_file}", schema.name);
                let alone = per_set[&super::cache::template_set(&ctx, schema, tid, with_file)]
                    <= super::cache::CACHE_WAYS;
                if prev != 0 {
                    assert_eq!(Some(&prev), last.get(&key), "{key} round {round}");
                    hinted += 1;
                } else {
                    assert!(round == 0 || !alone, "{key} round {round}: not hinted");
                }
                want += (round > 0 && alone) as usize;
                last.insert(key, at);
                lines += 1;
            }
        }
    }
    assert!(
        hinted >= want && want * 2 >= lines,
        "{hinted} of {lines} lines hinted, {want} sure"
    );
    // Cached middles of other lines, the same way.
    let mut last = std::collections::HashMap::new();
    let (mut hinted, mut lines) = (0, 0);
    for round in 0..20 {
        for name in [
            "compute", "read", "step", "epoch", "load", "save", "fwd", "bwd",
        ] {
            let args = [Arg::int("step", round)];
            let at = 100 + out.len() as u64;
            let prev = complete_line(
                &mut out,
                &mut cache,
                &ctx,
                name.as_bytes(),
                &args,
                Line { id: 1, tid: 5, at },
            );
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
        event::complete(
            &mut out,
            None,
            &ctx,
            Line {
                id: 1,
                tid: 5,
                at: 7
            },
            &rec,
            h
        ),
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
    let ctx = ctx(6427, true);
    let mut out = Vec::new();
    event::complete(&mut out, None, &ctx, at0(2, 6427), &rec, &mut |p| {
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
    event::complete(&mut out, None, &ctx, at0(2, 6427), &rec, &mut |p| {
        crate::hash::hash16(p)
    });
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "{\"id\":2,\"name\":\"ev0\",\"cat\":\"CAT\",\"type\":6,\"pid\":6427,\"tid\":6427,\"ts\":1795988293894894,\"dur\":10,\"ph\":1}\n"
    );
}

#[test]
fn meta_line_shape() {
    let ctx = ctx(6427, true);
    let mut out = Vec::new();
    meta_str(&mut out, &ctx, 6427, "HH", b"vm", b"6882804a826580cd");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "{\"name\":\"HH\",\"cat\":\"dftracer\",\"type\":1,\"pid\":6427,\"tid\":6427,\"ph\":4,\"args\":{\"hhash\":\"6882804a826580cd\",\"name\":\"vm\",\"value\":\"6882804a826580cd\"}}\n"
    );
}

/// An `FH` line from its per-thread head is the line `meta` writes for it, byte for byte:
/// plain, escaped, invalid UTF-8 and clipped paths, two threads in turn (the head follows).
#[test]
fn fh_line_is_the_meta_line() {
    use super::Encoder;
    use crate::record::Text;
    let mut e = Encoder::new(6427, "6882804a826580cd", true);
    let long = vec![b'x'; 300];
    let paths: [(&[u8], usize); 5] = [
        (b"/data/f1.bin", 12),
        (b"/d/with \"quote\" and \\ and \n", 28),
        (b"/bad/\xff\xfe/utf8", 15),
        (&long[..200], 300),
        (b"", 0),
    ];
    for (i, (p, orig)) in paths.iter().enumerate() {
        for tid in [6427u32, 6500 + i as u32] {
            let t = Text {
                bytes: p,
                orig_len: *orig,
            };
            let h = *b"81d306bf2d66a887";
            let mut want = Vec::new();
            let v = Text {
                bytes: &h,
                orig_len: 16,
            };
            let name = Text {
                bytes: b"FH",
                orig_len: 2,
            };
            records::meta(&mut want, &e.ctx(), tid, 1, &name, &t, &v);
            let mut got = Vec::new();
            e.fh(&mut got, tid, &t, &h);
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&want)
            );
            assert_eq!(got, want);
        }
    }
}

/// A long mixed stream through one cache, as the writer feeds it: schemas, threads, files
/// and contexts (pid, metadata) alternating at random and in runs (the template used last
/// hits, other ways hit, misses rebuild and evict), values 0, `u64::MAX`, negative ints and
/// random magnitudes, timestamps at the scale of each time unit: every static line equals
/// the generic line byte for byte, and the position it returns is 0 or that of the last line
/// of its template.
#[test]
fn static_stream_equals_generic_lines() {
    use crate::event::FileRef;
    use crate::record::StaticRecord;
    use std::collections::HashMap;
    let leak = |s: Schema| -> &'static Schema { Box::leak(Box::new(s)) };
    let schemas: Vec<&'static Schema> = vec![
        leak(Schema::new(Layer::CApp, "fn", "C", &[], "fhash")),
        leak(Schema::new(
            Layer::CApp,
            "fn_2int",
            "C",
            &[("step", Slot::Int), ("rank", Slot::Int)],
            "fhash",
        )),
        leak(Schema::new(
            Layer::LibcIo,
            "pread64",
            "POSIX",
            &[
                ("fd", Slot::Int),
                ("count", Slot::UInt),
                ("offset", Slot::UInt),
                ("ret", Slot::Int),
            ],
            "fhash",
        )),
        leak(Schema::new(
            Layer::LibcIo,
            "lseek64",
            "POSIX",
            &[("whence", Slot::Int)],
            "file_hash",
        )),
        leak(Schema::new(
            Layer::Python,
            "a_function_name_long_enough_for_a_middle_of_more_than_64_bytes",
            "py",
            &[("u", Slot::UInt)],
            "fhash",
        )),
        // Pieces past 32 bytes (copied in a loop, not in one move).
        leak(Schema::new(
            Layer::Python,
            "long_keys",
            "py",
            &[
                ("a_key_name_of_more_than_thirty_two_bytes", Slot::Int),
                ("k", Slot::UInt),
                ("another_key_name_of_more_than_thirty_two_bytes", Slot::UInt),
            ],
            "a_file_key_of_more_than_thirty_two_bytes_too",
        )),
    ];
    let paths: [&[u8]; 3] = [b"/data/a.bin", b"/data/\"q\"/b", b"/x"];
    let files: Vec<&'static FileRef> = paths
        .iter()
        .map(|p| &*Box::leak(Box::new(FileRef::new(p))))
        .collect();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Timestamps of 2026 in each unit (ns, us, ms, s), and the extremes.
    let scales = [
        1_796_000_779_668_786_123u64,
        1_796_000_779_668_786,
        1_796_000_779_668,
        1_796_000_779,
    ];
    let ctxs = [ctx(4242, true), ctx(4243, true), ctx(4242, false)];
    let mut cache = PrefixCache::default();
    let mut last: HashMap<(usize, usize, u32, bool), u64> = HashMap::new();
    let (mut id, mut at) = (1u64, 1u64);
    let (mut si, mut tid, mut ci, mut fi) = (0usize, 7u32, 0usize, None::<usize>);
    let mut ts = scales[1];
    for i in 0..60_000u64 {
        // Runs of one kind of line (the template used last), broken at random.
        let r = rnd();
        if r % 8 == 0 {
            si = (rnd() % schemas.len() as u64) as usize;
        }
        if r % 16 == 1 {
            tid = [7, 8, 9, 123_456, u32::MAX][(rnd() % 5) as usize];
        }
        if r % 64 == 2 {
            ci = (rnd() % ctxs.len() as u64) as usize;
        }
        if r % 8 == 3 {
            fi = match rnd() % 4 {
                0 => None,
                k => Some(k as usize - 1),
            };
        }
        if r % 500 == 4 {
            ts = match rnd() % 6 {
                k @ 0..=3 => scales[k as usize],
                4 => 0,
                _ => u64::MAX - 100_000_000,
            };
        }
        ts = ts.saturating_add(rnd() % [3, 100, 20_000, 10_000_000][(i % 4) as usize]);
        id = if r % 1_000 == 5 {
            rnd() >> (rnd() % 64)
        } else {
            id.wrapping_add(1)
        };
        let dur = match rnd() % 5 {
            0 => 0,
            1 => rnd() % 10,
            2 => rnd() % 100_000,
            3 => u64::MAX,
            _ => rnd() >> (rnd() % 64),
        };
        let schema = schemas[si];
        let vals: Vec<u64> = (0..schema.keys.len() + 1)
            .map(|_| match rnd() % 7 {
                0 => 0,
                1 => u64::MAX,
                2 => (-((rnd() % 1_000_000) as i64)) as u64,
                3 => i64::MIN as u64,
                4 => rnd() % 10,
                5 => rnd() % 100_000_000,
                _ => rnd() >> (rnd() % 64),
            })
            .collect();
        // Fewer values than keys at times (slots left out).
        let n = if rnd() % 4 == 0 {
            (rnd() % (schema.keys.len() as u64 + 2)) as usize
        } else {
            schema.keys.len()
        };
        let p = Pending::Static {
            strs: &[],
            schema,
            ts,
            dur,
            vals: &vals[..n],
            file: fi.map(|k| files[k].handle()),
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
        let c = &ctxs[ci];
        let line = Line { id, tid, at };
        let (mut fast, mut slow) = (b"x".to_vec(), b"x".to_vec());
        let prev = event::complete_static(&mut fast, &mut cache, c, line, &srec.view());
        event::complete(&mut slow, None, c, line, &rec, &mut |p| {
            crate::hash::hash16(p)
        });
        assert_eq!(
            String::from_utf8_lossy(&fast),
            String::from_utf8_lossy(&slow),
            "line {i}"
        );
        let key = (si, ci, tid, fi.is_some() && c.metadata);
        let want = last.insert(key, at).unwrap_or(0);
        assert!(
            prev == 0 || prev == want,
            "line {i}: prev {prev}, want {want}"
        );
        at += fast.len() as u64;
    }
}

#[test]
fn plain_text_is_the_bytewise_test_for_every_byte_at_every_position() {
    let bytewise = |b: &[u8]| {
        b.iter()
            .all(|&c| (0x20..0x7f).contains(&c) && c != b'"' && c != b'\\')
    };
    // One byte of every value at every position of strings of 0 to 24 plain bytes, so that
    // each lands in every lane of a word, in the overlapped last word and in the short path.
    for len in 0..25usize {
        let base: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
        assert!(super::plain_text(&base), "{len}");
        for pos in 0..len {
            for v in 0..=255u8 {
                let mut s = base.clone();
                s[pos] = v;
                assert_eq!(
                    super::plain_text(&s),
                    bytewise(&s),
                    "len {len} pos {pos} byte {v:#x}"
                );
            }
        }
    }
    // Random strings mixing plain and other bytes (a bad byte next to others: borrows and
    // carries between lanes).
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 40) as usize;
        let s: Vec<u8> = (0..len)
            .map(|i| {
                let r = x.rotate_left(i as u32 * 7);
                if r.is_multiple_of(9) {
                    (r >> 8) as u8
                } else {
                    0x20 + (r >> 16) as u8 % 0x5f
                }
            })
            .collect();
        assert_eq!(super::plain_text(&s), bytewise(&s), "{s:?}");
    }
}

/// A static record of a schema with float, bool and string slots (`intern_args`, what
/// `log_event` records through) renders the line the generic record of the same args
/// renders, byte for byte: escapes, non-finite floats, empty and 4,096-byte strings, short
/// records, with and without metadata; and the record keeps the strings' bytes itself.
#[test]
fn mixed_slots_equal_generic_lines() {
    use crate::record::StaticRecord;
    let long = "é".repeat(2048); // 4,096 bytes, two per character
    let weird = "quo\"te\\back\nnl\u{1}\u{7f}ünï€";
    let floats = [1.5, f64::NAN, f64::INFINITY, -0.0, 1e300, 5e-324, 0.1 + 0.2];
    let sets: Vec<Vec<Arg>> = vec![
        vec![Arg::int("step", 5), Arg::str("s", "v")],
        vec![
            Arg::int("a", i64::MIN),
            Arg::new("u", Value::UInt(u64::MAX)),
            Arg::new("ok", Value::Bool(true)),
            Arg::new("no", Value::Bool(false)),
        ],
        floats
            .iter()
            .enumerate()
            .map(|(i, &f)| {
                Arg::new(
                    ["f0", "f1", "f2", "f3", "f4", "f5", "f6"][i],
                    Value::Float(f),
                )
            })
            .collect(),
        vec![
            Arg::str("w", weird),
            Arg::str("e", ""),
            Arg::str("l", &long),
            Arg::int("n", -3),
            Arg::str("z", "zz"),
        ],
    ];
    let mut cache = PrefixCache::default();
    for metadata in [true, false] {
        let ctx = ctx(77, metadata);
        for (set, args) in sets.iter().enumerate() {
            let keys: Vec<(&[u8], Slot)> = args
                .iter()
                .map(|a| {
                    let slot = match a.value {
                        Value::Int(_) => Slot::Int,
                        Value::UInt(_) => Slot::UInt,
                        Value::Float(_) => Slot::Float,
                        Value::Bool(_) => Slot::Bool,
                        Value::Str(_) => Slot::Str,
                        Value::Path(_) => unreachable!(),
                    };
                    (a.key, slot)
                })
                .collect();
            let schema = crate::intern_args(Layer::Python, b"ev", b"bench", &keys)
                .unwrap()
                .schema();
            let vals: Vec<u64> = args
                .iter()
                .map(|a| match a.value {
                    Value::Int(i) => i as u64,
                    Value::UInt(u) => u,
                    Value::Float(f) => f.to_bits(),
                    Value::Bool(b) => b as u64,
                    // The record stores the lengths itself: any value will do.
                    _ => 7,
                })
                .collect();
            let strs: Vec<&[u8]> = args
                .iter()
                .filter_map(|a| match a.value {
                    Value::Str(s) => Some(s),
                    _ => None,
                })
                .collect();
            for n in 0..=args.len() {
                for (round, id) in [1u64, 2, 3, 99, 100].into_iter().enumerate() {
                    let ts = 1_796_000_779_668_786 + round as u64 * 7_919;
                    let p = Pending::Static {
                        schema,
                        ts,
                        dur: 10 + n as u64,
                        vals: &vals[..n],
                        file: None,
                        strs: &strs,
                    };
                    let mut buf = vec![0x55u8; p.len()];
                    p.write(&mut buf);
                    let generic = Pending::Complete {
                        layer: Layer::Python,
                        name: b"ev",
                        cat: b"bench",
                        ts,
                        dur: 10 + n as u64,
                        args: &args[..n],
                    };
                    let mut gbuf = vec![0u8; generic.len()];
                    generic.write(&mut gbuf);
                    // SAFETY: written just above by Pending::write in this process.
                    #[allow(unsafe_code)]
                    let (fast_path, back) = unsafe {
                        (
                            StaticRecord::decode(&buf),
                            Record::decode_trusted(&buf).unwrap(),
                        )
                    };
                    // A mixed record: the writer's unchecked path declines it.
                    assert!(fast_path.is_none() && back.mixed);
                    let rec = Record::decode(&gbuf).unwrap();
                    let (mut fast, mut slow) = (b"x".to_vec(), b"x".to_vec());
                    let view = back.static_view().unwrap();
                    event::complete_mixed(&mut fast, &mut cache, &ctx, at0(id, 9), &view);
                    event::complete(
                        &mut slow,
                        None,
                        &ctx,
                        at0(id, 9),
                        &rec,
                        &mut |_| unreachable!(),
                    );
                    assert_eq!(
                        String::from_utf8(fast).unwrap(),
                        String::from_utf8(slow).unwrap(),
                        "set {set}, {n} values, metadata {metadata}"
                    );
                    // The same record read back as a `Record` gives the same args.
                    let got: Vec<_> = back
                        .args()
                        .map(|(k, v)| (k.bytes.to_vec(), format!("{v:?}")))
                        .collect();
                    let want: Vec<_> = rec
                        .args()
                        .map(|(k, v)| (k.bytes.to_vec(), format!("{v:?}")))
                        .collect();
                    assert_eq!(got, want, "set {set}, {n} values");
                }
            }
        }
    }
}

/// A template's tail (the text after `dur` of its last line that filled every slot, patched
/// in place: see `cursor::Tail`) under what it must get right: values repeating, changing
/// at the same width (in the middle and at either end of a slot's run of digits), growing
/// and shrinking across powers of ten, 7 and 8 digits (written as a word), signs coming and
/// going at the same width, extremes; lines with slots left out (not through the tail) in
/// between; two templates alternating with ids a few apart; with and without a file and
/// metadata; keys longer than a move; templates evicted and rebuilt. Every line equals the
/// generic line byte for byte.
#[test]
fn static_tails_keep_lines_exact() {
    use crate::event::FileRef;
    use crate::record::StaticRecord;
    let leak = |s: Schema| -> &'static Schema { Box::leak(Box::new(s)) };
    let pread = leak(Schema::new(
        Layer::LibcIo,
        "pread",
        "POSIX",
        &[
            ("fd", Slot::Int),
            ("count", Slot::UInt),
            ("offset", Slot::UInt),
            ("ret", Slot::Int),
        ],
        "fhash",
    ));
    let close = leak(Schema::new(
        Layer::LibcIo,
        "close",
        "POSIX",
        &[("fd", Slot::Int), ("ret", Slot::Int)],
        "fhash",
    ));
    let long = leak(Schema::new(
        Layer::Python,
        "long_keys",
        "py",
        &[
            ("a_key_name_of_more_than_thirty_two_bytes", Slot::Int),
            ("another_key_name_of_more_than_thirty_two_bytes", Slot::UInt),
        ],
        "a_file_key_of_more_than_thirty_two_bytes_too",
    ));
    let none = leak(Schema::new(Layer::CApp, "step", "C", &[], "fhash"));
    let files: Vec<&'static FileRef> = [&b"/d/a"[..], b"/d/\"b\""]
        .iter()
        .map(|p| &*Box::leak(Box::new(FileRef::new(p))))
        .collect();
    // Values in the order a slot sees them: each differs from the one before it (or repeats
    // it) in one way the patch must handle.
    let mut seq: Vec<u64> = vec![3, 3, 3, 4, 9, 10, 10, 99, 100, 101, 999, 1_000, 999, 5];
    seq.extend([
        4_096, 4_096, 4_097, 8_191, 516_096, 520_192, 999_999, 1_000_000,
    ]);
    seq.extend([
        1_234_567, 7_654_321, 9_999_999, 10_000_000, 12_345_678, 99_999_999,
    ]);
    seq.extend([100_000_000, 123_456_789, 100_000_000, 9_999_999, 1_000_000]);
    // Signs at the same width (`-1` and `10`, `-12` and `123`) and not.
    seq.extend([
        1,
        (-1i64) as u64,
        10,
        (-1i64) as u64,
        (-12i64) as u64,
        123,
        12,
    ]);
    seq.extend([
        (-12i64) as u64,
        (-123i64) as u64,
        1_234,
        (-123i64) as u64,
        0,
    ]);
    seq.extend([
        u64::MAX,
        u64::MAX,
        i64::MIN as u64,
        i64::MAX as u64,
        0,
        0,
        7,
    ]);
    seq.extend([
        10u64.pow(19),
        10u64.pow(19) - 1,
        18_446_744_073_709_551_614,
        1,
    ]);
    // A width that alternates line after line for long (a read's ret of 65536, then 0 at
    // the end of the file): lines written piece by piece, the tail tried again after
    // doubling waits, up to the longest.
    for _ in 0..150 {
        seq.extend([65_536, 0]);
    }
    let mut cache = PrefixCache::default();
    let mut id = 1u64;
    for metadata in [true, false] {
        let ctx = ctx(4242, metadata);
        for (k, &(a, b)) in [(pread, close), (pread, pread), (long, none), (close, long)]
            .iter()
            .enumerate()
        {
            for (i, &v) in seq.iter().enumerate() {
                // Slot `j` of a line takes the value `j` steps further down the list, so
                // each slot sees every change; now and then a line leaves slots out.
                for (m, schema) in [a, b].into_iter().enumerate() {
                    let vals: Vec<u64> = (0..schema.keys.len())
                        .map(|j| seq[(i + j * 3 + m) % seq.len()])
                        .collect();
                    let n = if (i + m) % 11 == 10 {
                        vals.len().saturating_sub(1)
                    } else {
                        vals.len()
                    };
                    let file = match (i / 7 + k) % 3 {
                        0 => None,
                        f => Some(files[f - 1].handle()),
                    };
                    let p = Pending::Static {
                        strs: &[],
                        schema,
                        ts: 1_796_000_779_668_786 + v % 1_000,
                        dur: v % 300,
                        vals: &vals[..n],
                        file,
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
                    // Two templates alternating: their ids two apart, now and then more.
                    id += 1 + (i % 13 == 0) as u64 * 5;
                    let line = Line { id, tid: 7, at: 0 };
                    let (mut fast, mut slow) = (b"x".to_vec(), b"x".to_vec());
                    event::complete_static(&mut fast, &mut cache, &ctx, line, &srec.view());
                    event::complete(&mut slow, None, &ctx, line, &rec, &mut |p| {
                        crate::hash::hash16(p)
                    });
                    assert_eq!(
                        String::from_utf8(fast).unwrap(),
                        String::from_utf8(slow).unwrap(),
                        "{k} {i} {m} {vals:?}"
                    );
                }
            }
        }
    }
}
