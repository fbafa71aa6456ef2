//! A validating scanner for one DFTracer JSON line: the top-level fields the tools use, with
//! strings kept as raw (still escaped) slices of the line and `args` as the raw object, so
//! that converting a line copies bytes instead of building values. It accepts exactly the
//! JSON grammar (RFC 8259) for the whole line; the tests compare it with serde_json.

/// A number as written: integer when it is one, else a float.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    U(u64),
    I(i64),
    F(f64),
}

impl Num {
    pub fn as_u64(self) -> Option<u64> {
        match self {
            Num::U(u) => Some(u),
            Num::I(i) => u64::try_from(i).ok(),
            Num::F(f) if (0.0..1.8e19).contains(&f) => Some(f as u64),
            Num::F(_) => None,
        }
    }
    pub fn as_i64(self) -> Option<i64> {
        match self {
            Num::U(u) => i64::try_from(u).ok(),
            Num::I(i) => Some(i),
            Num::F(f) if f.abs() < 9.2e18 => Some(f as i64),
            Num::F(_) => None,
        }
    }
    pub fn as_f64(self) -> f64 {
        match self {
            Num::U(u) => u as f64,
            Num::I(i) => i as f64,
            Num::F(f) => f,
        }
    }
}

/// A JSON value, shallow: strings raw, containers as their raw text.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Val<'a> {
    /// The characters between the quotes, escapes not decoded.
    Str(&'a [u8]),
    Num(Num),
    Bool(bool),
    Null,
    /// The whole object or array text, brackets included.
    Obj(&'a [u8]),
    Arr(&'a [u8]),
}

impl<'a> Val<'a> {
    pub fn num(self) -> Option<Num> {
        match self {
            Val::Num(n) => Some(n),
            _ => None,
        }
    }
    pub fn str(self) -> Option<&'a [u8]> {
        match self {
            Val::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// The record kind: `ph` as an integer (format 2.x) or a letter (1.x, Chrome).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ph {
    Complete,
    Counter,
    Aggregated,
    Metadata,
    Other,
}

/// The fields of one line the tools read.
#[derive(Clone, Copy, Debug, Default)]
pub struct Line<'a> {
    pub has_id: bool,
    pub name: &'a [u8],
    pub cat: &'a [u8],
    pub pid: Option<u64>,
    pub tid: Option<u64>,
    pub ts: Option<u64>,
    pub dur: Option<u64>,
    pub ph: Option<Ph>,
    /// The raw `args` object, braces included.
    pub args: Option<&'a [u8]>,
}

/// Why a line is not JSON (the byte offset where it went wrong).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadLine(pub usize);

struct Cur<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cur<'a> {
    #[inline]
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    #[inline]
    fn eat(&mut self, c: u8) -> Result<(), BadLine> {
        self.ws();
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(BadLine(self.i))
        }
    }
    /// After the opening quote: the raw contents; the cursor ends after the closing quote.
    #[inline]
    fn string(&mut self) -> Result<&'a [u8], BadLine> {
        let start = self.i;
        loop {
            let rest = &self.b[self.i..];
            // Strings are mostly plain: jump to the next quote, backslash or control byte.
            let n = rest
                .iter()
                .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
                .ok_or(BadLine(self.b.len()))?;
            self.i += n;
            match self.b[self.i] {
                b'"' => {
                    let s = &self.b[start..self.i];
                    self.i += 1;
                    return Ok(s);
                }
                b'\\' => {
                    let e = *self.b.get(self.i + 1).ok_or(BadLine(self.i))?;
                    match e {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 2,
                        b'u' => {
                            let hex = self.b.get(self.i + 2..self.i + 6).ok_or(BadLine(self.i))?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return Err(BadLine(self.i));
                            }
                            self.i += 6;
                        }
                        _ => return Err(BadLine(self.i)),
                    }
                }
                _ => return Err(BadLine(self.i)),
            }
        }
    }
    fn number(&mut self) -> Result<Num, BadLine> {
        let start = self.i;
        let b = self.b;
        let mut i = self.i;
        let neg = b.get(i) == Some(&b'-');
        if neg {
            i += 1;
        }
        let int_start = i;
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            _ => return Err(BadLine(i)),
        }
        let int_end = i;
        let mut float = false;
        if b.get(i) == Some(&b'.') {
            float = true;
            i += 1;
            let d = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i == d {
                return Err(BadLine(i));
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            float = true;
            i += 1;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let d = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i == d {
                return Err(BadLine(i));
            }
        }
        self.i = i;
        if !float && int_end - int_start <= 19 {
            let mut v: u64 = 0;
            let mut ok = true;
            for &c in &b[int_start..int_end] {
                match v
                    .checked_mul(10)
                    .and_then(|v| v.checked_add((c - b'0') as u64))
                {
                    Some(n) => v = n,
                    None => {
                        ok = false;
                        break;
                    }
                }
            }
            if ok {
                if !neg {
                    return Ok(Num::U(v));
                }
                if v <= i64::MAX as u64 + 1 {
                    return Ok(Num::I((v as i128).wrapping_neg() as i64));
                }
            }
        }
        // Floats and huge integers: the text is ASCII digits, signs, dots and exponents.
        let text = std::str::from_utf8(&b[start..i]).map_err(|_| BadLine(start))?;
        text.parse::<f64>().map(Num::F).map_err(|_| BadLine(start))
    }
    fn literal(&mut self, word: &[u8]) -> Result<(), BadLine> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(())
        } else {
            Err(BadLine(self.i))
        }
    }
    /// Any value; containers are validated and returned raw.
    fn value(&mut self, depth: u32) -> Result<Val<'a>, BadLine> {
        self.ws();
        if depth > 128 {
            return Err(BadLine(self.i));
        }
        match self.peek() {
            Some(b'"') => {
                self.i += 1;
                Ok(Val::Str(self.string()?))
            }
            Some(b'{') => {
                let start = self.i;
                self.i += 1;
                self.ws();
                if self.peek() == Some(b'}') {
                    self.i += 1;
                } else {
                    loop {
                        self.eat(b'"')?;
                        self.string()?;
                        self.eat(b':')?;
                        self.value(depth + 1)?;
                        self.ws();
                        match self.peek() {
                            Some(b',') => self.i += 1,
                            Some(b'}') => {
                                self.i += 1;
                                break;
                            }
                            _ => return Err(BadLine(self.i)),
                        }
                    }
                }
                Ok(Val::Obj(&self.b[start..self.i]))
            }
            Some(b'[') => {
                let start = self.i;
                self.i += 1;
                self.ws();
                if self.peek() == Some(b']') {
                    self.i += 1;
                } else {
                    loop {
                        self.value(depth + 1)?;
                        self.ws();
                        match self.peek() {
                            Some(b',') => self.i += 1,
                            Some(b']') => {
                                self.i += 1;
                                break;
                            }
                            _ => return Err(BadLine(self.i)),
                        }
                    }
                }
                Ok(Val::Arr(&self.b[start..self.i]))
            }
            Some(b't') => self.literal(b"true").map(|_| Val::Bool(true)),
            Some(b'f') => self.literal(b"false").map(|_| Val::Bool(false)),
            Some(b'n') => self.literal(b"null").map(|_| Val::Null),
            Some(_) => self.number().map(Val::Num),
            None => Err(BadLine(self.i)),
        }
    }
}

/// Calls `f` with each key (raw) and value of the object `obj` (raw, braces included; must
/// have been validated, as [`line()`] does for `args`).
pub fn members<'a>(obj: &'a [u8], mut f: impl FnMut(&'a [u8], Val<'a>)) {
    let mut c = Cur { b: obj, i: 0 };
    if c.eat(b'{').is_err() {
        return;
    }
    c.ws();
    if c.peek() == Some(b'}') {
        return;
    }
    loop {
        if c.eat(b'"').is_err() {
            return;
        }
        let Ok(k) = c.string() else { return };
        if c.eat(b':').is_err() {
            return;
        }
        let Ok(v) = c.value(1) else { return };
        f(k, v);
        c.ws();
        if c.peek() != Some(b',') {
            return;
        }
        c.i += 1;
    }
}

/// The value of `key` in the object `obj` (raw), if any.
pub fn get<'a>(obj: &'a [u8], key: &[u8]) -> Option<Val<'a>> {
    let mut found = None;
    members(obj, |k, v| {
        if found.is_none() && k == key {
            found = Some(v);
        }
    });
    found
}

/// Scans one line (without its newline). The whole line must be one JSON object.
pub fn line(b: &[u8]) -> Result<Line<'_>, BadLine> {
    let mut c = Cur { b, i: 0 };
    let mut l = Line::default();
    c.eat(b'{')?;
    c.ws();
    if c.peek() == Some(b'}') {
        c.i += 1;
    } else {
        loop {
            c.eat(b'"')?;
            let k = c.string()?;
            c.eat(b':')?;
            let v = c.value(1)?;
            match k {
                b"id" => l.has_id = true,
                b"name" => l.name = v.str().unwrap_or(b""),
                b"cat" => l.cat = v.str().unwrap_or(b""),
                b"pid" => l.pid = v.num().and_then(Num::as_u64),
                b"tid" => l.tid = v.num().and_then(Num::as_u64),
                b"ts" => l.ts = v.num().and_then(Num::as_u64),
                b"dur" => l.dur = v.num().and_then(Num::as_u64),
                b"ph" => {
                    l.ph = Some(match v {
                        Val::Num(n) => match n.as_u64() {
                            Some(1) => Ph::Complete,
                            Some(2) => Ph::Counter,
                            Some(3) => Ph::Aggregated,
                            Some(4) => Ph::Metadata,
                            _ => Ph::Other,
                        },
                        Val::Str(b"X") => Ph::Complete,
                        Val::Str(b"C") => Ph::Counter,
                        Val::Str(b"M") => Ph::Metadata,
                        _ => Ph::Other,
                    })
                }
                b"args" => {
                    if let Val::Obj(o) = v {
                        l.args = Some(o)
                    }
                }
                _ => {}
            }
            c.ws();
            match c.peek() {
                Some(b',') => c.i += 1,
                Some(b'}') => {
                    c.i += 1;
                    break;
                }
                _ => return Err(BadLine(c.i)),
            }
        }
    }
    c.ws();
    if c.i != b.len() {
        return Err(BadLine(c.i));
    }
    Ok(l)
}

/// Decodes a raw JSON string's contents (escapes) into text.
pub fn text(raw: &[u8]) -> String {
    if !raw.contains(&b'\\') {
        return String::from_utf8_lossy(raw).into_owned();
    }
    let mut quoted = Vec::with_capacity(raw.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(raw);
    quoted.push(b'"');
    serde_json::from_slice::<String>(&quoted)
        .unwrap_or_else(|_| String::from_utf8_lossy(raw).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_serde_json_on_what_is_json() {
        let cases: &[&str] = &[
            r#"{"id":2,"name":"open","cat":"POSIX","type":3,"pid":1,"tid":2,"ts":3,"dur":4,"ph":1,"args":{"hhash":"ab","fhash":"cd","ret":-1}}"#,
            r#"{"name":"a\"b\\c\u00e9\n","ph":"X","ts":1.5,"args":{"x":[1,2,{"y":null}],"z":true,"w":false,"f":-0.5e-3}}"#,
            r#" { } "#,
            r#"{"a":18446744073709551615,"b":18446744073709551616,"c":-9223372036854775808}"#,
            r#"{"a":1,}"#,
            r#"{"a":01}"#,
            r#"{"a":1.}"#,
            r#"{"a":-}"#,
            r#"{"a":"x}"#,
            r#"{"a":"\x"}"#,
            r#"{"a":"\u12"}"#,
            "{\"a\":\"tab\there\"}",
            r#"{"a":tru}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":1}x"#,
            r#"{"a" 1}"#,
            r#"{a:1}"#,
            r#"["a"]"#,
            r#"{"a":{"b":1}"#,
            "",
            r#"{"name":"end","args":{"num_events":5}} "#,
        ];
        for c in cases {
            let ours = line(c.as_bytes()).is_ok();
            let theirs =
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(c).is_ok();
            assert_eq!(ours, theirs, "{c}");
        }
    }

    #[test]
    fn reads_the_fields_of_a_line() {
        let l = line(br#"{"id":2,"name":"op\"en","cat":"POSIX","type":3,"pid":11,"tid":12,"ts":1700000000000000,"dur":40,"ph":1,"args":{"hhash":"ab","fhash":"cd","ret":-1,"count_sum":12}}"#).unwrap();
        assert!(l.has_id);
        assert_eq!(l.name, br#"op\"en"#);
        assert_eq!(text(l.name), "op\"en");
        assert_eq!(
            (l.pid, l.tid, l.ts, l.dur),
            (Some(11), Some(12), Some(1700000000000000), Some(40))
        );
        assert_eq!(l.ph, Some(Ph::Complete));
        let args = l.args.unwrap();
        assert_eq!(get(args, b"fhash"), Some(Val::Str(b"cd")));
        assert_eq!(get(args, b"ret").and_then(Val::num), Some(Num::I(-1)));
        assert_eq!(get(args, b"count_sum").and_then(Val::num), Some(Num::U(12)));
        assert_eq!(get(args, b"nope"), None);
        let l = line(br#"{"name":"x","ph":"C","ts":2.5}"#).unwrap();
        assert_eq!(l.ph, Some(Ph::Counter));
        assert_eq!(l.ts, Some(2));
    }
}
