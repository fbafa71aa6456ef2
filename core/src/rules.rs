//! SELECTIVE aggregation rules (`DFTRACER_AGGREGATION_TYPE=SELECTIVE`, the YAML file named by
//! `DFTRACER_AGGREGATION_FILE`): which complete events are folded into ph 3 records; the rest
//! are written one by one.
//!
//! ```yaml
//! inclusion:                 # an event matching any of these is aggregated ...
//!   - "cat == 'POSIX' AND dur < 100"
//!   - "name LIKE 'read*'"
//! exclusion:                 # ... unless it matches any of these
//!   - "name IN {open64, close}"
//! ```
//!
//! The language is the reference's (2.2.0, established by running it; FORMAT.md lists the
//! differences). A rule tests an event's fields:
//! - `name`, `cat` (strings, case-sensitive), `app` (the process's executable name, the one in
//!   the file name's hash) and `tags.<key>` (the event's arg `<key>` as the trace writes it:
//!   a string as is, a number in decimal, a file as its hash; `""` when the event has no such
//!   arg) take `==`, `!=`, `LIKE 'glob'` (`*` matches any run of characters, every other
//!   character itself, the whole value must match) and `IN {a, b}`; `tags.<key>` also takes
//!   `<`, `<=`, `>`, `>=` with a number (false when the arg is not a number);
//! - `dur`, `ts` (integers in the trace's time unit) and `rank` (the launcher's rank, see
//!   `config::launcher_rank`; every test of it is false when the process has none) take
//!   `==`, `!=`, `<`, `<=`, `>`, `>=` and `IN {..}` with numbers (integers or decimals).
//!
//! Rules combine tests with `AND`, `OR`, `NOT` and parentheses. Values are quoted with `'` or
//! `"`, or bare words. Where the reference is undefined or broken, ours is defined here:
//! - keywords are case-insensitive (the reference only knows upper case and otherwise
//!   aggregates everything);
//! - parentheses group (the reference mis-parses them);
//! - `AND` and `OR` at the same level without parentheses is an error (the reference
//!   evaluates left to right, SQL gives `AND` precedence: a rule file must not mean two
//!   things);
//! - `IN` on a number, a decimal compared with `dur`, a numeric tag compared with a number,
//!   spaces inside `{ }`: they compare (the reference's are always false);
//! - `app` is known whatever `DFTRACER_INC_METADATA` says (the reference's only with it);
//! - an absent or empty `inclusion` list means every event (the reference aggregates nothing
//!   when only `exclusion` is given);
//! - anything that does not parse (an unknown field or key, `=`, a string compared with `<`,
//!   bad YAML) makes the whole file an error: one line on stderr and no aggregation at all,
//!   never a guess (the reference aggregates everything on a bad rule and throws on bad YAML).
//!
//! SELECTIVE without a rules file aggregates every event, as the reference does
//! ([`Rules::all`]).
//!
//! Events of category `dftracer` are never aggregated, whatever the rules say.

use std::fmt;

/// The largest rules file read.
pub const MAX_FILE: u64 = 1 << 20;

/// The parsed rules file.
#[derive(Clone, Debug, PartialEq)]
pub struct Rules {
    inclusion: Vec<Expr>,
    exclusion: Vec<Expr>,
}

#[derive(Clone, Debug, PartialEq)]
enum Field {
    Name,
    Cat,
    App,
    /// `tags.<key>`: an arg of the event.
    Tag(Vec<u8>),
    Dur,
    Ts,
    Rank,
}

impl Field {
    fn numeric(&self) -> bool {
        matches!(self, Field::Dur | Field::Ts | Field::Rank)
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Clone, Debug, PartialEq)]
enum Value {
    Str(Vec<u8>),
    Num(Num),
}

/// A number of a rule or an event: integers compare exactly, a decimal as `f64`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    fn cmp(self, other: Num) -> Option<std::cmp::Ordering> {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => Some(a.cmp(&b)),
            (a, b) => a.as_f64().partial_cmp(&b.as_f64()),
        }
    }
    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
    /// A number as a rule or an arg's text writes it (`-5`, `1.5`, `1e3`).
    fn parse(s: &str) -> Option<Num> {
        let s = s.trim();
        if let Ok(i) = s.parse::<i128>() {
            return Some(Num::Int(i));
        }
        // Only what reads as a number: not `inf`, `nan`, `infinity`.
        if !s.bytes().any(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Num::Float)
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Expr {
    Cmp(Field, Op, Value),
    Like(Field, Vec<u8>),
    In(Field, Vec<Value>),
    Not(Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
}

/// What the rules look at in an event.
#[derive(Clone, Copy)]
pub struct Subject<'a> {
    pub name: &'a [u8],
    pub cat: &'a [u8],
    pub ts: u64,
    pub dur: u64,
    /// The process's executable name (`app`).
    pub app: &'a [u8],
    /// The process's rank (`rank`), when a launcher gave it one.
    pub rank: Option<i64>,
    /// The event's args (`tags.<key>`).
    pub tags: &'a dyn Tags,
}

/// An event's args, as `tags.<key>` sees them.
pub trait Tags {
    /// The arg `key` (the first of that name), `None` when the event has none.
    fn tag(&self, key: &[u8]) -> Option<Tag<'_>>;
}

/// No args.
impl Tags for () {
    fn tag(&self, _: &[u8]) -> Option<Tag<'_>> {
        None
    }
}

/// An arg's value for a rule: its text as the trace writes it, and its number when it is one.
pub enum Tag<'a> {
    Text(std::borrow::Cow<'a, [u8]>),
    Int(i128),
    Float(f64),
}

impl Tag<'_> {
    fn text(&self) -> std::borrow::Cow<'_, [u8]> {
        match self {
            Tag::Text(t) => std::borrow::Cow::Borrowed(&t[..]),
            Tag::Int(i) => std::borrow::Cow::Owned(i.to_string().into_bytes()),
            Tag::Float(f) => {
                let mut v = Vec::new();
                crate::format::write_f64(&mut v, *f);
                std::borrow::Cow::Owned(v)
            }
        }
    }
    fn num(&self) -> Option<Num> {
        match self {
            Tag::Int(i) => Some(Num::Int(*i)),
            Tag::Float(f) => f.is_finite().then_some(Num::Float(*f)),
            Tag::Text(t) => std::str::from_utf8(t).ok().and_then(Num::parse),
        }
    }
}

impl std::fmt::Debug for Subject<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subject")
            .field("name", &String::from_utf8_lossy(self.name))
            .field("cat", &String::from_utf8_lossy(self.cat))
            .field("ts", &self.ts)
            .field("dur", &self.dur)
            .finish_non_exhaustive()
    }
}

/// Why a rules file was refused.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleError(String);

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Rules {
    /// The rule of SELECTIVE without a rules file: every event (as the reference).
    pub fn all() -> Rules {
        Rules {
            inclusion: Vec::new(),
            exclusion: Vec::new(),
        }
    }

    /// Reads and parses the rules file at `path`.
    /// Only a regular file of at most [`MAX_FILE`] bytes is read (a FIFO or `/dev/zero` must
    /// not hang the traced program's start).
    pub fn load(path: &str) -> Result<Rules, RuleError> {
        let cannot = |e: &dyn fmt::Display| RuleError(format!("cannot read {path}: {e}"));
        let meta = std::fs::metadata(path).map_err(|e| cannot(&e))?;
        if !meta.is_file() {
            return Err(cannot(&"not a regular file"));
        }
        if meta.len() > MAX_FILE {
            return Err(cannot(&format!("larger than {MAX_FILE} bytes")));
        }
        let text = std::fs::read_to_string(path).map_err(|e| cannot(&e))?;
        Rules::parse_yaml(&text)
    }

    /// Parses the YAML text of a rules file.
    pub fn parse_yaml(text: &str) -> Result<Rules, RuleError> {
        use yaml_rust2::{Yaml, YamlLoader};
        let docs = YamlLoader::load_from_str(text)
            .map_err(|e| RuleError(format!("not valid YAML: {e}")))?;
        let mut rules = Rules {
            inclusion: Vec::new(),
            exclusion: Vec::new(),
        };
        let Some(doc) = docs.first() else {
            return Ok(rules);
        };
        let map = match doc {
            Yaml::Hash(h) => h,
            Yaml::Null => return Ok(rules),
            _ => {
                return Err(RuleError(
                    "the top level must be a mapping with `inclusion:` and `exclusion:` lists"
                        .into(),
                ))
            }
        };
        for (k, v) in map {
            let key = k.as_str().unwrap_or("");
            let list = match key {
                "inclusion" => &mut rules.inclusion,
                "exclusion" => &mut rules.exclusion,
                _ => {
                    return Err(RuleError(format!(
                        "unknown key {k:?} (expected `inclusion` and `exclusion`)"
                    )))
                }
            };
            let items: &[Yaml] = match v {
                Yaml::Array(a) => a,
                Yaml::Null => &[],
                _ => return Err(RuleError(format!("`{key}` must be a list of rule strings"))),
            };
            for (i, item) in items.iter().enumerate() {
                let Some(text) = item.as_str() else {
                    return Err(RuleError(format!("{key}[{i}] is not a string")));
                };
                let e =
                    parse_rule(text).map_err(|e| RuleError(format!("{key}[{i}] {text:?}: {e}")))?;
                list.push(e);
            }
        }
        Ok(rules)
    }

    /// `true` when the event is to be aggregated.
    pub fn matches(&self, s: &Subject<'_>) -> bool {
        (self.inclusion.is_empty() || self.inclusion.iter().any(|e| e.eval(s)))
            && !self.exclusion.iter().any(|e| e.eval(s))
    }
}

impl Expr {
    fn eval(&self, s: &Subject<'_>) -> bool {
        match self {
            Expr::Cmp(f, op, v) => cmp(f, *op, v, s),
            Expr::Like(f, pat) => text_of(f, s).is_some_and(|t| glob(pat, &t)),
            Expr::In(f, vals) => vals.iter().any(|v| cmp(f, Op::Eq, v, s)),
            Expr::Not(e) => !e.eval(s),
            Expr::And(es) => es.iter().all(|e| e.eval(s)),
            Expr::Or(es) => es.iter().any(|e| e.eval(s)),
        }
    }
}

/// A string field's value (`None` for a numeric field).
fn text_of<'a>(f: &Field, s: &Subject<'a>) -> Option<std::borrow::Cow<'a, [u8]>> {
    use std::borrow::Cow;
    Some(match f {
        Field::Name => Cow::Borrowed(s.name),
        Field::Cat => Cow::Borrowed(s.cat),
        Field::App => Cow::Borrowed(s.app),
        // An event without the arg: the empty string (as the reference).
        Field::Tag(k) => match s.tags.tag(k) {
            Some(t) => Cow::Owned(t.text().into_owned()),
            None => Cow::Borrowed(&b""[..]),
        },
        Field::Dur | Field::Ts | Field::Rank => return None,
    })
}

/// A numeric field's value (`None`: the event or process has none).
fn num_of(f: &Field, s: &Subject<'_>) -> Option<Num> {
    match f {
        Field::Dur => Some(Num::Int(s.dur as i128)),
        Field::Ts => Some(Num::Int(s.ts as i128)),
        Field::Rank => s.rank.map(|r| Num::Int(r as i128)),
        Field::Tag(k) => s.tags.tag(k).and_then(|t| t.num()),
        Field::Name | Field::Cat | Field::App => None,
    }
}

fn cmp(f: &Field, op: Op, v: &Value, s: &Subject<'_>) -> bool {
    use std::cmp::Ordering::*;
    match v {
        Value::Num(n) => {
            let Some(x) = num_of(f, s).and_then(|x| x.cmp(*n)) else {
                return false;
            };
            match op {
                Op::Eq => x == Equal,
                Op::Ne => x != Equal,
                Op::Lt => x == Less,
                Op::Le => x != Greater,
                Op::Gt => x == Greater,
                Op::Ge => x != Less,
            }
        }
        Value::Str(t) => {
            let Some(x) = text_of(f, s) else { return false };
            match op {
                Op::Eq => x[..] == t[..],
                Op::Ne => x[..] != t[..],
                _ => false,
            }
        }
    }
}

/// Whole-value glob match: `*` is any run of bytes (possibly empty), every other byte itself.
fn glob(pat: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Position after the last `*` in the pattern and the text position it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pat.len() && pat[p] == b'*' {
            p += 1;
            star = Some((p, t));
        } else if p < pat.len() && pat[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            // Let the last `*` swallow one more byte and retry.
            p = sp;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pat[p..].iter().all(|&b| b == b'*')
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    /// A bare word (`name`, `AND`, `POSIX`, `read*`, `100`).
    Word(String),
    /// A quoted string.
    Quoted(String),
    Op(Op),
    /// `=` alone: a common mistake, refused with a hint.
    Assign,
    LParen,
    RParen,
    LBrace,
    RBrace,
    Comma,
}

fn lex(src: &str) -> Result<Vec<(usize, Tok)>, String> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let at = i + 1;
        let two = |s: &str| src[i..].starts_with(s);
        let tok = match c {
            b' ' | b'\t' | b'\r' | b'\n' => {
                i += 1;
                continue;
            }
            b'(' => Tok::LParen,
            b')' => Tok::RParen,
            b'{' => Tok::LBrace,
            b'}' => Tok::RBrace,
            b',' => Tok::Comma,
            b'\'' | b'"' => {
                let end = src[i + 1..]
                    .find(c as char)
                    .ok_or_else(|| format!("unterminated string at column {at}"))?;
                let s = src[i + 1..i + 1 + end].to_string();
                i += end + 2;
                out.push((at, Tok::Quoted(s)));
                continue;
            }
            _ if two("==") => {
                i += 1;
                Tok::Op(Op::Eq)
            }
            _ if two("!=") => {
                i += 1;
                Tok::Op(Op::Ne)
            }
            _ if two("<=") => {
                i += 1;
                Tok::Op(Op::Le)
            }
            _ if two(">=") => {
                i += 1;
                Tok::Op(Op::Ge)
            }
            b'<' => Tok::Op(Op::Lt),
            b'>' => Tok::Op(Op::Gt),
            b'=' => Tok::Assign,
            b'!' => return Err(format!("unexpected `!` at column {at}")),
            _ => {
                let start = i;
                while i < b.len() && !b" \t\r\n(){},'\"=!<>".contains(&b[i]) {
                    i += 1;
                }
                out.push((at, Tok::Word(src[start..i].to_string())));
                continue;
            }
        };
        i += 1;
        out.push((at, tok));
    }
    Ok(out)
}

/// Parses one rule string.
fn parse_rule(src: &str) -> Result<Expr, String> {
    let toks = lex(src)?;
    if toks.is_empty() {
        return Err("empty rule".into());
    }
    let mut p = Parser { toks, pos: 0 };
    let e = p.expr()?;
    if let Some((at, t)) = p.toks.get(p.pos) {
        return Err(format!("unexpected {} at column {at}", show(t)));
    }
    Ok(e)
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    pos: usize,
}

fn show(t: &Tok) -> String {
    match t {
        Tok::Word(w) => format!("`{w}`"),
        Tok::Quoted(s) => format!("'{s}'"),
        Tok::Op(o) => format!(
            "`{}`",
            match o {
                Op::Eq => "==",
                Op::Ne => "!=",
                Op::Lt => "<",
                Op::Le => "<=",
                Op::Gt => ">",
                Op::Ge => ">=",
            }
        ),
        Tok::Assign => "`=`".into(),
        Tok::LParen => "`(`".into(),
        Tok::RParen => "`)`".into(),
        Tok::LBrace => "`{`".into(),
        Tok::RBrace => "`}`".into(),
        Tok::Comma => "`,`".into(),
    }
}

fn keyword(t: Option<&Tok>, kw: &str) -> bool {
    matches!(t, Some(Tok::Word(w)) if w.eq_ignore_ascii_case(kw))
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(_, t)| t)
    }

    fn column(&self) -> String {
        match self.toks.get(self.pos) {
            Some((at, _)) => format!("column {at}"),
            None => "the end".into(),
        }
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|(_, t)| t.clone());
        self.pos += 1;
        t
    }

    /// A chain of terms joined by one kind of connective.
    fn expr(&mut self) -> Result<Expr, String> {
        let mut terms = vec![self.unary()?];
        let mut conn: Option<bool> = None; // Some(true): AND, Some(false): OR
        loop {
            let and = keyword(self.peek(), "AND");
            if !and && !keyword(self.peek(), "OR") {
                break;
            }
            if conn.is_some_and(|c| c != and) {
                return Err(format!(
                    "AND and OR mixed without parentheses at {}: add parentheses (the \
                     reference evaluates left to right, SQL gives AND precedence)",
                    self.column()
                ));
            }
            conn = Some(and);
            self.pos += 1;
            terms.push(self.unary()?);
        }
        Ok(match conn {
            None => terms.pop().expect("one term"),
            Some(true) => Expr::And(terms),
            Some(false) => Expr::Or(terms),
        })
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if keyword(self.peek(), "NOT") {
            self.pos += 1;
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.peek() == Some(&Tok::LParen) {
            self.pos += 1;
            let e = self.expr()?;
            if self.next() != Some(Tok::RParen) {
                self.pos -= 1;
                return Err(format!("expected `)` at {}", self.column()));
            }
            return Ok(e);
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Expr, String> {
        let at = self.column();
        let field = match self.next() {
            Some(Tok::Word(w)) => match w.as_str() {
                "name" => Field::Name,
                "cat" => Field::Cat,
                "app" => Field::App,
                "dur" => Field::Dur,
                "ts" => Field::Ts,
                "rank" => Field::Rank,
                _ if w.starts_with("tags.") && w.len() > "tags.".len() => {
                    Field::Tag(w.as_bytes()["tags.".len()..].to_vec())
                }
                _ => return Err(format!("unknown field `{w}` at {at} (fields: {FIELDS})")),
            },
            Some(t) => return Err(format!("expected a field at {at}, found {}", show(&t))),
            None => return Err("expected a field at the end".into()),
        };
        let at = self.column();
        match self.next() {
            Some(Tok::Op(op)) => {
                let ordering = !matches!(op, Op::Eq | Op::Ne);
                if ordering && matches!(field, Field::Name | Field::Cat | Field::App) {
                    return Err(format!(
                        "{} at {at}: `name`, `cat` and `app` take ==, !=, LIKE or IN",
                        show(&Tok::Op(op))
                    ));
                }
                // A tag compares as text, or as a number with <, <=, >, >=.
                let numeric = field.numeric() || ordering;
                let v = self.value(&field, numeric)?;
                Ok(Expr::Cmp(field, op, v))
            }
            Some(Tok::Assign) => Err(format!("`=` at {at}: write `==`")),
            Some(Tok::Word(w)) if w.eq_ignore_ascii_case("LIKE") => {
                if field.numeric() {
                    return Err(format!(
                        "LIKE at {at} takes `name`, `cat`, `app` or `tags.<key>`"
                    ));
                }
                match self.value(&field, false)? {
                    Value::Str(p) => Ok(Expr::Like(field, p)),
                    Value::Num(_) => unreachable!("a text value"),
                }
            }
            Some(Tok::Word(w)) if w.eq_ignore_ascii_case("IN") => {
                if self.next() != Some(Tok::LBrace) {
                    self.pos -= 1;
                    return Err(format!(
                        "IN takes a list in braces, `IN {{a, b}}`, at {}",
                        self.column()
                    ));
                }
                let numeric = field.numeric();
                let mut vals = vec![self.value(&field, numeric)?];
                loop {
                    match self.next() {
                        Some(Tok::Comma) => vals.push(self.value(&field, numeric)?),
                        Some(Tok::RBrace) => break,
                        _ => {
                            self.pos -= 1;
                            return Err(format!("expected `,` or `}}` at {}", self.column()));
                        }
                    }
                }
                Ok(Expr::In(field, vals))
            }
            Some(t) => Err(format!(
                "expected ==, !=, <, <=, >, >=, LIKE or IN at {at}, found {}",
                show(&t)
            )),
            None => Err("expected ==, !=, <, <=, >, >=, LIKE or IN at the end".into()),
        }
    }

    /// A value for `field`: a number when `numeric`, else text.
    fn value(&mut self, field: &Field, numeric: bool) -> Result<Value, String> {
        let at = self.column();
        let raw = match self.next() {
            Some(Tok::Word(w)) => {
                if ["AND", "OR", "NOT", "LIKE", "IN"]
                    .iter()
                    .any(|k| w.eq_ignore_ascii_case(k))
                {
                    return Err(format!(
                        "expected a value at {at}, found the keyword `{w}` (quote it)"
                    ));
                }
                w
            }
            Some(Tok::Quoted(s)) => s,
            Some(t) => return Err(format!("expected a value at {at}, found {}", show(&t))),
            None => return Err("expected a value at the end".into()),
        };
        if !numeric {
            return Ok(Value::Str(raw.into_bytes()));
        }
        Num::parse(&raw).map(Value::Num).ok_or_else(|| match field {
            Field::Tag(_) => format!(
                "`{raw}` at {at} is not a number (a tag compares with <, <=, >, >= as a number)"
            ),
            _ => format!("`{raw}` at {at} is not a number (dur, ts and rank are numbers)"),
        })
    }
}

/// The fields a rule may test, for error messages.
const FIELDS: &str = "name, cat, app, tags.<key>, dur, ts, rank";

#[cfg(test)]
mod tests {
    use super::*;

    fn ev<'a>(name: &'a str, cat: &'a str, dur: u64) -> Subject<'a> {
        Subject {
            name: name.as_bytes(),
            cat: cat.as_bytes(),
            ts: 1_000,
            dur,
            app: b"agg.py",
            rank: None,
            tags: &(),
        }
    }

    /// Args for `tags.<key>`.
    struct Args(Vec<(&'static str, Tag<'static>)>);

    impl Tags for Args {
        fn tag(&self, key: &[u8]) -> Option<Tag<'_>> {
            self.0
                .iter()
                .find(|(k, _)| k.as_bytes() == key)
                .map(|(_, v)| match v {
                    Tag::Text(t) => Tag::Text(std::borrow::Cow::Borrowed(&t[..])),
                    Tag::Int(i) => Tag::Int(*i),
                    Tag::Float(f) => Tag::Float(*f),
                })
        }
    }

    fn text(s: &'static str) -> Tag<'static> {
        Tag::Text(std::borrow::Cow::Borrowed(s.as_bytes()))
    }

    fn one(rule: &str) -> Rules {
        Rules::parse_yaml(&format!("inclusion:\n  - {rule:?}\n"))
            .unwrap_or_else(|e| panic!("{rule}: {e}"))
    }

    /// The events the reference was run with (see FORMAT.md) and which of them one
    /// inclusion rule aggregates.
    fn picked(rule: &str) -> Vec<&'static str> {
        let r = Rules::parse_yaml(&format!("inclusion:\n  - {rule:?}\n"))
            .unwrap_or_else(|e| panic!("{rule}: {e}"));
        [
            ("read_a", "POSIX", 5),
            ("write_b", "POSIX", 500),
            ("ev", "CAT", 50),
            ("op", "app", 5000),
            ("readx", "posix", 7),
        ]
        .into_iter()
        .filter(|(n, c, d)| r.matches(&ev(n, c, *d)))
        .map(|(n, _, _)| n)
        .collect()
    }

    #[test]
    fn the_reference_s_rules_mean_what_they_meant_there() {
        // Each line: what the reference 2.2.0 aggregated for the same rule.
        assert_eq!(picked("name == 'read_a'"), ["read_a"]);
        assert_eq!(picked("cat == 'posix'"), ["readx"]);
        assert_eq!(picked("name LIKE 'read*'"), ["read_a", "readx"]);
        assert_eq!(picked("name LIKE '*ad*'"), ["read_a", "readx"]);
        assert_eq!(picked("name LIKE '*a'"), ["read_a"]);
        assert!(picked("name LIKE 'read%'").is_empty());
        assert!(picked("name LIKE 'rea?a'").is_empty());
        assert!(picked("name LIKE 'rea_a'").is_empty());
        assert_eq!(picked("name IN {'ev','op'}"), ["ev", "op"]);
        assert_eq!(picked("name IN {ev,op}"), ["ev", "op"]);
        assert_eq!(picked("cat IN {POSIX, app}"), ["read_a", "write_b", "op"]);
        assert_eq!(picked("dur < 100"), ["read_a", "ev", "readx"]);
        assert_eq!(picked("dur<100"), ["read_a", "ev", "readx"]);
        assert_eq!(picked("dur >= 500"), ["write_b", "op"]);
        assert_eq!(picked("dur == 5"), ["read_a"]);
        assert_eq!(picked("dur > 5 AND dur < 100"), ["ev", "readx"]);
        assert_eq!(picked("name == 'ev' OR name == 'op'"), ["ev", "op"]);
        assert_eq!(picked("NOT name == 'ev'").len(), 4);
        assert_eq!(picked("NOT NOT name == 'ev'"), ["ev"]);
        assert_eq!(picked("NOT name LIKE 'read*'"), ["write_b", "ev", "op"]);
        assert_eq!(picked("name == 'ev' AND NOT dur > 100"), ["ev"]);
        assert_eq!(picked("name == \"ev\""), ["ev"]);
        assert_eq!(picked("name == ev"), ["ev"]);
        assert_eq!(picked("name=='ev'"), ["ev"]);
        assert_eq!(picked("name != 'ev'").len(), 4);
        assert_eq!(picked("ts > 0").len(), 5);
    }

    #[test]
    fn app_rank_and_tags_mean_what_they_meant_in_the_reference() {
        // What the reference 2.2.0 aggregated for each rule, run as `python agg.py x` with
        // INC_METADATA=1 (its `app` is the executable name; without metadata it has none).
        let names = [
            ("read_a", "POSIX"),
            ("write_b", "POSIX"),
            ("stat64", "POSIX"),
            ("fstat", "POSIX"),
        ];
        let picked = |rule: &str| -> Vec<&str> {
            let r = one(rule);
            names
                .iter()
                .filter(|(n, c)| r.matches(&ev(n, c, 5)))
                .map(|(n, _)| *n)
                .collect()
        };
        assert_eq!(picked("app LIKE 'agg*'").len(), 4);
        assert_eq!(picked("app == 'agg.py'").len(), 4);
        assert_eq!(picked("app IN {agg.py}").len(), 4);
        assert!(picked("app == 'python'").is_empty());
        assert_eq!(
            picked("name LIKE '*stat*' AND app LIKE 'agg*'"),
            ["stat64", "fstat"]
        );
        assert_eq!(picked("name LIKE '*stat*' AND app LIKE 'test*'").len(), 0);
        // No rank (the reference's wheel has no MPI): every test of it is false, `!=` too.
        for rule in ["rank == 0", "rank != 0", "rank >= 0", "rank IN {0, 1}"] {
            assert!(picked(rule).is_empty(), "{rule}");
        }
        assert_eq!(picked("NOT rank == 0").len(), 4);
        // With a launcher's rank.
        let ranked = |rank: i64, rule: &str| {
            let mut s = ev("read_a", "POSIX", 5);
            s.rank = Some(rank);
            one(rule).matches(&s)
        };
        assert!(ranked(0, "rank == 0"));
        assert!(!ranked(3, "rank == 0"));
        assert!(ranked(3, "rank != 0 AND rank < 4"));
        assert!(ranked(3, "rank IN {1, 3}"));
        // tags.<key>: the event's arg; an event without it has "" (reference: `tags.y == ''`
        // picked every event).
        let args = Args(vec![
            ("x", text("v")),
            ("i", Tag::Int(5)),
            ("f", Tag::Float(1.5)),
            ("n", text("12")),
        ]);
        let tagged = |rule: &str| {
            let mut s = ev("ev", "CAT", 50);
            s.tags = &args;
            one(rule).matches(&s)
        };
        assert!(tagged("tags.x == 'v'"));
        assert!(!tagged("tags.x == 'w'"));
        assert!(tagged("tags.x LIKE 'v*'"));
        assert!(tagged("tags.x IN {u, v}"));
        assert!(tagged("tags.y == ''"));
        assert!(!tagged("tags.y != ''"));
        assert!(!ev_matches("tags.x == 'v'"));
        assert!(ev_matches("tags.x == ''"));
        // Numbers as the trace writes them (the reference: ints unmatched, floats as
        // `1.500000`, ordering never true); ordering compares numbers.
        assert!(tagged("tags.i == 5"));
        assert!(tagged("tags.i == '5'"));
        assert!(tagged("tags.f == 1.5"));
        assert!(tagged("tags.i > 4 AND tags.i <= 5"));
        assert!(tagged("tags.f < 2"));
        assert!(tagged("tags.n > 9"));
        assert!(!tagged("tags.x > 0"));
        assert!(!tagged("tags.y < 1"));
        // `ts` is the event's start, not its bucket's (reference: `ts == <event ts>` picked
        // it, `ts == <bucket start>` did not).
        let mut s = ev("a", "CAT", 5);
        s.ts = 1_700_000_000_500_000;
        assert!(one("ts == 1700000000500000").matches(&s));
        assert!(!one("ts == 1700000000000000").matches(&s));
        // Decimals against integers (the reference's are never true).
        assert!(one("dur > 4.5").matches(&s));
        assert!(!one("dur > 5.5").matches(&s));
        assert!(one("dur == 5.0").matches(&s));
        // SELECTIVE without a file: every event.
        assert!(Rules::all().matches(&s));
    }

    fn ev_matches(rule: &str) -> bool {
        one(rule).matches(&ev("ev", "CAT", 50))
    }

    #[test]
    fn where_the_reference_is_broken_ours_is_defined() {
        // The reference aggregates everything for these three; ours parses them.
        assert_eq!(picked("name like 'read*'"), ["read_a", "readx"]);
        assert_eq!(picked("NOT (name == 'ev')").len(), 4);
        // The reference aggregates nothing here (it mis-parses the parentheses).
        assert_eq!(
            picked("cat == 'CAT' AND (dur < 10 OR name == 'ev')"),
            ["ev"]
        );
        // Spaces in a list (the reference matches nothing).
        assert_eq!(picked("name IN { 'ev' , 'op' }"), ["ev", "op"]);
        assert_eq!(picked("dur IN {5, 7}"), ["read_a", "readx"]);
        // Exclusion alone: everything else (the reference aggregates nothing).
        let r = Rules::parse_yaml("exclusion:\n  - \"name == 'write_b'\"\n").unwrap();
        assert!(r.matches(&ev("read_a", "POSIX", 5)));
        assert!(!r.matches(&ev("write_b", "POSIX", 5)));
        // Both: included and not excluded; several inclusion rules: any.
        let r = Rules::parse_yaml(
            "inclusion:\n  - \"cat == 'POSIX'\"\n  - \"name == 'ev'\"\nexclusion:\n  - \"name == 'write_b'\"\n",
        )
        .unwrap();
        assert!(r.matches(&ev("read_a", "POSIX", 5)));
        assert!(r.matches(&ev("ev", "CAT", 5)));
        assert!(!r.matches(&ev("write_b", "POSIX", 5)));
        assert!(!r.matches(&ev("op", "app", 5)));
        // Empty file, empty lists: everything.
        for text in ["", "inclusion: []\n", "inclusion:\nexclusion:\n"] {
            let r = Rules::parse_yaml(text).unwrap();
            assert!(r.matches(&ev("op", "app", 5)), "{text:?}");
        }
    }

    #[test]
    fn bad_rules_files_are_refused_with_the_reason() {
        let err = |text: &str| Rules::parse_yaml(text).unwrap_err().to_string();
        let rule = |r: &str| err(&format!("inclusion:\n  - {r:?}\n"));
        assert!(
            rule("name = 'ev'").contains("write `==`"),
            "{}",
            rule("name = 'ev'")
        );
        assert!(rule("garbage (((").contains("unknown field `garbage`"));
        assert!(rule("size > 25").contains("unknown field `size`"));
        assert!(rule("name > 'q'").contains("take ==, !=, LIKE or IN"));
        assert!(rule("dur < 'x'").contains("not a number"));
        assert!(rule("rank >= many").contains("not a number"));
        assert!(rule("tags.size > big").contains("not a number"));
        assert!(rule("app > 'q'").contains("take ==, !=, LIKE or IN"));
        assert!(rule("tags. == 'x'").contains("unknown field `tags.`"));
        assert!(rule("rank LIKE '1*'").contains("LIKE at column 6"));
        assert!(rule("size > 25").contains("fields: name, cat, app, tags.<key>, dur, ts, rank"));
        assert!(rule("dur LIKE '5*'").contains("LIKE at column 5"));
        assert!(rule("name IN ('ev','op')").contains("braces"));
        assert!(rule("dur < 100 OR name == 'op' AND cat == 'CAT'").contains("parentheses"));
        assert!(rule("(name == 'ev'").contains("expected `)`"));
        assert!(rule("name == 'ev").contains("unterminated"));
        assert!(rule("name == 'ev' extra").contains("unexpected `extra`"));
        assert!(rule("").contains("empty rule"));
        assert!(rule("name == AND").contains("keyword"));
        assert!(rule("inclusion[0]").starts_with("inclusion[0]"));
        assert!(err("inclusion: [unclosed").contains("not valid YAML"));
        assert!(err("inclusion: \"name == 'ev'\"\n").contains("must be a list"));
        assert!(err("inclusions:\n  - \"name == 'ev'\"\n").contains("unknown key"));
        assert!(err("inclusion:\n  - 5\n").contains("not a string"));
        assert!(err("- a\n").contains("top level"));
        assert!(Rules::load("/nonexistent/rules.yaml")
            .unwrap_err()
            .to_string()
            .contains("cannot read"));
        // Never a device or a directory (a start must not hang on /dev/zero).
        for p in ["/dev/zero", "/"] {
            let e = Rules::load(p).unwrap_err().to_string();
            assert!(e.contains("not a regular file"), "{e}");
        }
    }

    #[test]
    fn glob_matches_whole_values() {
        for (p, t, want) in [
            ("*", "", true),
            ("*", "abc", true),
            ("a*c", "abbbc", true),
            ("a*c", "abcd", false),
            ("*b*b*", "abab", true),
            ("*b*b*", "ab", false),
            ("abc", "abc", true),
            ("abc", "ab", false),
            ("", "", true),
            ("", "a", false),
            ("**a", "ba", true),
        ] {
            assert_eq!(glob(p.as_bytes(), t.as_bytes()), want, "{p} {t}");
        }
    }
}
