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
//! The syntax is the reference's (2.2.0, established by running it; FORMAT.md lists the
//! differences): a rule compares the event's `name`, `cat` (strings, case-sensitive) or
//! `dur`, `ts` (integers in the trace's time unit) with `==`, `!=` (all fields), `<`, `<=`,
//! `>`, `>=` (integers), `LIKE 'glob'` (strings; `*` matches any run of characters, every
//! other character itself, the whole value must match) or `IN {a, b}`; combined with `AND`,
//! `OR`, `NOT` and parentheses. Values are quoted with `'` or `"`, or bare words. Where the
//! reference is undefined or broken, ours is defined here:
//! - keywords are case-insensitive (the reference only knows upper case and otherwise
//!   aggregates everything);
//! - parentheses group (the reference mis-parses them);
//! - `AND` and `OR` at the same level without parentheses is an error (the reference
//!   evaluates left to right, SQL gives `AND` precedence: a rule file must not mean two
//!   things);
//! - an absent or empty `inclusion` list means every event (the reference aggregates nothing
//!   when only `exclusion` is given);
//! - anything that does not parse (an unknown field or key, `=`, a string compared with `<`,
//!   bad YAML) makes the whole file an error: one line on stderr and no aggregation at all,
//!   never a guess (the reference aggregates everything on a bad rule and throws on bad YAML).
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

#[derive(Clone, Copy, Debug, PartialEq)]
enum Field {
    Name,
    Cat,
    Dur,
    Ts,
}

impl Field {
    fn numeric(self) -> bool {
        matches!(self, Field::Dur | Field::Ts)
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
    Num(i128),
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
#[derive(Clone, Copy, Debug)]
pub struct Subject<'a> {
    pub name: &'a [u8],
    pub cat: &'a [u8],
    pub ts: u64,
    pub dur: u64,
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
        fn get(f: Field, s: &Subject<'_>) -> Value {
            match f {
                Field::Name => Value::Str(s.name.to_vec()),
                Field::Cat => Value::Str(s.cat.to_vec()),
                Field::Dur => Value::Num(s.dur as i128),
                Field::Ts => Value::Num(s.ts as i128),
            }
        }
        fn text<'a>(f: Field, s: &Subject<'a>) -> &'a [u8] {
            match f {
                Field::Name => s.name,
                _ => s.cat,
            }
        }
        match self {
            Expr::Cmp(f, op, v) => match (v, f.numeric()) {
                (Value::Num(n), true) => {
                    let x = match *f {
                        Field::Dur => s.dur as i128,
                        _ => s.ts as i128,
                    };
                    match op {
                        Op::Eq => x == *n,
                        Op::Ne => x != *n,
                        Op::Lt => x < *n,
                        Op::Le => x <= *n,
                        Op::Gt => x > *n,
                        Op::Ge => x >= *n,
                    }
                }
                (Value::Str(t), false) => {
                    let eq = text(*f, s) == &t[..];
                    if *op == Op::Ne {
                        !eq
                    } else {
                        eq
                    }
                }
                _ => false,
            },
            Expr::Like(f, pat) => glob(pat, text(*f, s)),
            Expr::In(f, vals) => {
                let x = get(*f, s);
                vals.contains(&x)
            }
            Expr::Not(e) => !e.eval(s),
            Expr::And(es) => es.iter().all(|e| e.eval(s)),
            Expr::Or(es) => es.iter().any(|e| e.eval(s)),
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
                "dur" => Field::Dur,
                "ts" => Field::Ts,
                _ => {
                    return Err(format!(
                        "unknown field `{w}` at {at} (fields: name, cat, dur, ts)"
                    ))
                }
            },
            Some(t) => return Err(format!("expected a field at {at}, found {}", show(&t))),
            None => return Err("expected a field at the end".into()),
        };
        let at = self.column();
        match self.next() {
            Some(Tok::Op(op)) => {
                if !field.numeric() && !matches!(op, Op::Eq | Op::Ne) {
                    return Err(format!(
                        "{} at {at}: `name` and `cat` take ==, !=, LIKE or IN",
                        show(&Tok::Op(op))
                    ));
                }
                let v = self.value(field)?;
                Ok(Expr::Cmp(field, op, v))
            }
            Some(Tok::Assign) => Err(format!("`=` at {at}: write `==`")),
            Some(Tok::Word(w)) if w.eq_ignore_ascii_case("LIKE") => {
                if field.numeric() {
                    return Err(format!("LIKE at {at} takes `name` or `cat`"));
                }
                match self.value(field)? {
                    Value::Str(p) => Ok(Expr::Like(field, p)),
                    Value::Num(_) => unreachable!("string field"),
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
                let mut vals = vec![self.value(field)?];
                loop {
                    match self.next() {
                        Some(Tok::Comma) => vals.push(self.value(field)?),
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

    fn value(&mut self, field: Field) -> Result<Value, String> {
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
        if field.numeric() {
            raw.trim()
                .parse::<i64>()
                .map(|n| Value::Num(n as i128))
                .map_err(|_| format!("`{raw}` at {at} is not an integer (dur and ts are)"))
        } else {
            Ok(Value::Str(raw.into_bytes()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev<'a>(name: &'a str, cat: &'a str, dur: u64) -> Subject<'a> {
        Subject {
            name: name.as_bytes(),
            cat: cat.as_bytes(),
            ts: 1_000,
            dur,
        }
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
        assert!(rule("dur < 1e3").contains("not an integer"));
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
