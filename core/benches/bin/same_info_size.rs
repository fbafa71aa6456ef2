//! Bytes of a trace restricted to the events another tracer records ("the same
//! information"), compressed as our writer would write them: 1 MiB gzip members, each line
//! hinted with the previous line of its kind (name, category, thread, file or not), as the
//! writer's templates do. Used by `benches/size` for the training loop, whose reference trace
//! lacks some of our event kinds (`fstat64`, `isatty`, `readdir64`).
//!
//! `cargo run --release -p dftracer-core --example same_info_size -- <json lines> [name ...]`
//! (the JSON lines: a `zcat` of our trace; names: event kinds to drop). Prints
//! `lines <n> events <n> bytes <n>`. Ids are renumbered so that the kept events count 1, 2, ...
//! as a tracer that never saw the dropped ones would write them.

use dftracer_core::internals::deflate::{hint, FastDeflate};
use std::collections::HashMap;

const MEMBER: usize = 1 << 20;

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let k = format!("\"{key}\":");
    line.find(&k).map_or("", |i| {
        let rest = &line[i + k.len()..];
        &rest[..rest.find(',').unwrap_or(rest.len())]
    })
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .expect("usage: same_info_size <json lines> [name to drop ...]");
    let drop: Vec<String> = args.map(|n| format!("\"{n}\"")).collect();
    let text = std::fs::read_to_string(&path).expect("readable JSON lines");
    let mut json = String::new();
    let mut id = 0u64;
    let (mut lines, mut events) = (0, 0);
    for line in text.lines() {
        if drop.iter().any(|d| field(line, "name") == d) {
            continue;
        }
        lines += 1;
        if let Some(rest) = line.strip_prefix("{\"id\":") {
            id += 1;
            events += 1;
            let digits = rest.find(',').expect("an id then more fields");
            json.push_str(&format!("{{\"id\":{id}{}", &rest[digits..]));
        } else {
            json.push_str(line);
        }
        json.push('\n');
    }
    let json = json.as_bytes();
    let mut d = FastDeflate::new();
    let (mut total, mut start) = (0, 0);
    while start < json.len() {
        let mut end = (start + MEMBER).min(json.len());
        while json[end - 1] != b'\n' {
            end += 1;
        }
        let member = &json[start..end];
        let mut last: HashMap<String, usize> = HashMap::new();
        let mut hints = Vec::new();
        let mut at = 0;
        for line in member.split_inclusive(|&b| b == b'\n') {
            let l = std::str::from_utf8(line).unwrap();
            if l.starts_with("{\"id\":") {
                let key = format!(
                    "{} {} {} {}",
                    field(l, "name"),
                    field(l, "cat"),
                    field(l, "tid"),
                    l.contains("\"fhash\":")
                );
                if let Some(h) = last.get(&key).and_then(|&p| hint(at, at - p)) {
                    hints.push(h);
                }
                last.insert(key, at);
            }
            at += line.len();
        }
        let mut out = Vec::new();
        d.compress_hinted(member, &hints, &mut out);
        total += out.len() + 18;
        start = end;
    }
    println!("lines {lines} events {events} bytes {total}");
}
