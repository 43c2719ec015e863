//! The texts of Go's `encoding/json` for input that is not JSON.
//!
//! kube-apiserver's messages embed them (`couldn't get version/kind; json parse error:
//! invalid character 'a' looking for beginning of value`), and clients and scripts match on
//! them, so kapi reports a malformed body the way Go's scanner does: the first byte it rejects,
//! in what state, or `unexpected end of JSON input`. serde_json's own messages ("expected value
//! at line 1 column 1") never reach a client.

/// Go's `json.Valid` verdict with its error: None when `data` is one JSON value (surrounded by
/// whitespace at most), else the message Go's `json.Unmarshal` would return.
pub fn syntax_error(data: &[u8]) -> Option<String> {
    let mut scanner = Scanner { data, pos: 0 };
    let result = scanner.value().and_then(|()| {
        scanner.skip_space();
        match scanner.peek() {
            None => Ok(()),
            Some(c) => Err(Invalid(c, "after top-level value")),
        }
    });
    result.err().map(|e| match e {
        Invalid(c, context) => format!("invalid character {} {context}", quote_char(c)),
        UnexpectedEnd => "unexpected end of JSON input".to_owned(),
    })
}

/// Go's `quoteChar`: the offending byte as a Go character literal.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".to_owned(),
        b'"' => "'\"'".to_owned(),
        b'\\' => r"'\\'".to_owned(),
        b'\x07' => r"'\a'".to_owned(),
        b'\x08' => r"'\b'".to_owned(),
        b'\x0c' => r"'\f'".to_owned(),
        b'\n' => r"'\n'".to_owned(),
        b'\r' => r"'\r'".to_owned(),
        b'\t' => r"'\t'".to_owned(),
        b'\x0b' => r"'\v'".to_owned(),
        c if c < 0x20 || c == 0x7f => format!(r"'\x{c:02x}'"),
        // Go quotes `string(c)`: the byte as a code point (Latin-1), printable from U+00A1 on.
        c if (0x80..0xa1).contains(&c) || c == 0xad => format!(r"'\u{:04x}'", c as u32),
        c => format!("'{}'", char::from(c)),
    }
}

/// Why the scanner stopped.
enum Stop {
    /// A byte that cannot continue the value, and what the scanner was looking for.
    Invalid(u8, &'static str),
    /// The input ended inside a value.
    UnexpectedEnd,
}
use Stop::{Invalid, UnexpectedEnd};

/// A container the scanner is inside of.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Container {
    Object,
    Array,
}

struct Scanner<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.data.get(self.pos).copied()
    }

    fn next(&mut self) -> Result<u8, Stop> {
        let c = self.peek().ok_or(UnexpectedEnd)?;
        self.pos += 1;
        Ok(c)
    }

    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// One value after optional whitespace. Nesting is bounded by Go's own limit (10000), and
    /// followed with a stack of open containers rather than recursion: a worker thread's stack
    /// does not hold ten thousand frames of a debug build.
    fn value(&mut self) -> Result<(), Stop> {
        let mut open: Vec<Container> = Vec::new();
        'value: loop {
            self.skip_space();
            match self.next()? {
                c @ (b'{' | b'[') => {
                    self.depth_check(open.len() + 1)?;
                    self.skip_space();
                    let (container, close) = if c == b'{' { (Container::Object, b'}') } else { (Container::Array, b']') };
                    if self.peek() == Some(close) {
                        self.pos += 1;
                    } else {
                        if container == Container::Object {
                            self.object_key()?;
                        }
                        open.push(container);
                        continue 'value;
                    }
                }
                b'"' => self.string()?,
                b'-' => match self.next()? {
                    c @ b'0'..=b'9' => self.number(c)?,
                    c => return Err(Invalid(c, "in numeric literal")),
                },
                c @ b'0'..=b'9' => self.number(c)?,
                b't' => self.literal(b"rue", "true")?,
                b'f' => self.literal(b"alse", "false")?,
                b'n' => self.literal(b"ull", "null")?,
                c => return Err(Invalid(c, "looking for beginning of value")),
            }
            // A value ended: what follows it in each container it closes.
            while let Some(&container) = open.last() {
                self.skip_space();
                match (container, self.next()?) {
                    (Container::Object, b',') => {
                        self.object_key()?;
                        continue 'value;
                    }
                    (Container::Array, b',') => continue 'value,
                    (Container::Object, b'}') | (Container::Array, b']') => {
                        open.pop();
                    }
                    (Container::Object, c) => return Err(Invalid(c, "after object key:value pair")),
                    (Container::Array, c) => return Err(Invalid(c, "after array element")),
                }
            }
            return Ok(());
        }
    }

    /// An object member's key and its colon.
    fn object_key(&mut self) -> Result<(), Stop> {
        self.skip_space();
        match self.next()? {
            b'"' => self.string()?,
            c => return Err(Invalid(c, "looking for beginning of object key string")),
        }
        self.skip_space();
        match self.next()? {
            b':' => Ok(()),
            c => Err(Invalid(c, "after object key")),
        }
    }

    fn depth_check(&self, depth: usize) -> Result<(), Stop> {
        if depth > 10_000 {
            // Go's scanner: "exceeded max depth"; it reports the opening byte.
            return Err(Invalid(self.data[self.pos - 1], "exceeded max depth"));
        }
        Ok(())
    }

    /// The rest of a string after its opening quote.
    fn string(&mut self) -> Result<(), Stop> {
        loop {
            match self.next()? {
                b'"' => return Ok(()),
                b'\\' => match self.next()? {
                    b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {}
                    b'u' => {
                        for _ in 0..4 {
                            let c = self.next()?;
                            if !c.is_ascii_hexdigit() {
                                return Err(Invalid(c, "in \\u hexadecimal character escape"));
                            }
                        }
                    }
                    c => return Err(Invalid(c, "in string escape code")),
                },
                c if c < 0x20 => return Err(Invalid(c, "in string literal")),
                _ => {}
            }
        }
    }

    /// The rest of a number after its first digit.
    fn number(&mut self, first: u8) -> Result<(), Stop> {
        if first != b'0' {
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            match self.next()? {
                b'0'..=b'9' => {}
                c => return Err(Invalid(c, "after decimal point in numeric literal")),
            }
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            let mut c = self.next()?;
            if c == b'+' || c == b'-' {
                c = self.next()?;
            }
            if !c.is_ascii_digit() {
                return Err(Invalid(c, "in exponent of numeric literal"));
            }
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.pos += 1;
            }
        }
        Ok(())
    }

    /// The rest of `true`, `false` or `null` after its first letter.
    fn literal(&mut self, rest: &'static [u8], word: &'static str) -> Result<(), Stop> {
        for &want in rest {
            let c = self.next()?;
            if c != want {
                return Err(Invalid(c, literal_context(word, want)));
            }
        }
        Ok(())
    }
}

/// Go's `in literal true (expecting 'r')` and friends.
fn literal_context(word: &str, want: u8) -> &'static str {
    match (word, want) {
        ("true", b'r') => "in literal true (expecting 'r')",
        ("true", b'u') => "in literal true (expecting 'u')",
        ("true", _) => "in literal true (expecting 'e')",
        ("false", b'a') => "in literal false (expecting 'a')",
        ("false", b'l') => "in literal false (expecting 'l')",
        ("false", b's') => "in literal false (expecting 's')",
        ("false", _) => "in literal false (expecting 'e')",
        (_, b'u') => "in literal null (expecting 'u')",
        _ => "in literal null (expecting 'l')",
    }
}

/// Go's `json.Marshal` of a value decoded into `interface{}`: object keys sorted, and `<`, `>`,
/// `&`, U+2028 and U+2029 escaped (Go escapes them for HTML). kube shows JSON patched this way
/// (evanphx/json-patch re-marshals documents) in its errors.
pub fn marshal_sorted(value: &serde_json::Value) -> String {
    escape_html(&serde_json::to_string(&sorted(value)).unwrap_or_default())
}

/// Go's `json.Marshal` HTML escaping of JSON text: `<`, `>`, `&`, U+2028 and U+2029.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str(r"\u003c"),
            '>' => out.push_str(r"\u003e"),
            '&' => out.push_str(r"\u0026"),
            '\u{2028}' => out.push_str(r"\u2028"),
            '\u{2029}' => out.push_str(r"\u2029"),
            c => out.push(c),
        }
    }
    out
}

fn sorted(value: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&map[k]))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// Go's `fmt.Sprintf("%+v", v)` of JSON decoded into `map[string]interface{}` with integers
/// kept as int64 (kube shows a strategic merge patch this way in its errors):
/// `map[metadata:map[labels:x]]`, `[a b]`, `<nil>`, keys sorted.
pub fn go_format(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Null => "<nil>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => go_float(n.as_f64().unwrap_or_default()),
        },
        Value::Array(items) => format!("[{}]", items.iter().map(go_format).collect::<Vec<_>>().join(" ")),
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let members: Vec<String> = keys.into_iter().map(|k| format!("{k}:{}", go_format(&map[k]))).collect();
            format!("map[{}]", members.join(" "))
        }
    }
}

/// Go's `%v` of a float64 (`strconv` 'g', shortest): an exponent (at least two digits) below
/// 1e-4 and from 1e6 on.
fn go_float(x: f64) -> String {
    let scientific = format!("{x:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if x != 0.0 && !(-4..6).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    } else {
        x.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the decode_json and decode_yaml fuzz targets: long numbers parsed to a float
    /// one ulp off the nearest, so re-reading kapi's own JSON changed them (the workspace's
    /// serde_json has `float_roundtrip` since).
    #[test]
    fn long_numbers_parse_to_the_nearest_float_and_round_trip() {
        for text in ["555555555555555555555555555555555555555", "4440908555555555555558", "0.30000000000000004", "1e308"] {
            let v: serde_json::Value = serde_json::from_str(text).expect("a number");
            let printed = serde_json::to_string(&v).expect("encode");
            let again: serde_json::Value = serde_json::from_str(&printed).expect("a number");
            assert_eq!(again, v, "{text} printed as {printed}");
            assert_eq!(v.as_f64(), text.parse::<f64>().ok(), "{text} is not the nearest float");
        }
    }

    fn err(s: &str) -> String {
        syntax_error(s.as_bytes()).unwrap_or_else(|| "valid".into())
    }

    #[test]
    fn go_scanner_texts() {
        assert_eq!(err(r#"{"a": [1, 2.5e-3, true, null, "x\u00e9"]}"#), "valid");
        assert_eq!(err(" 0 "), "valid");
        assert_eq!(err(""), "unexpected end of JSON input");
        assert_eq!(err("  "), "unexpected end of JSON input");
        assert_eq!(err(r#"{"apiVersion":"#), "unexpected end of JSON input");
        assert_eq!(err("apiVersion: v1\nkind: Namespace\n"), "invalid character 'a' looking for beginning of value");
        assert_eq!(err(r#"{"a" 1}"#), "invalid character '1' after object key");
        assert_eq!(err(r#"{"a":1 "b":2}"#), "invalid character '\"' after object key:value pair");
        assert_eq!(err("{a:1}"), "invalid character 'a' looking for beginning of object key string");
        assert_eq!(err("{\"a\":1,}"), "invalid character '}' looking for beginning of object key string");
        assert_eq!(err("[1 2]"), "invalid character '2' after array element");
        assert_eq!(err("[1,]"), "invalid character ']' looking for beginning of value");
        assert_eq!(err("{} x"), "invalid character 'x' after top-level value");
        assert_eq!(err("012"), "invalid character '1' after top-level value");
        assert_eq!(err("-x"), "invalid character 'x' in numeric literal");
        assert_eq!(err("1.e5"), "invalid character 'e' after decimal point in numeric literal");
        assert_eq!(err("1e+"), "unexpected end of JSON input");
        assert_eq!(err("1ex"), "invalid character 'x' in exponent of numeric literal");
        assert_eq!(err("tru"), "unexpected end of JSON input");
        assert_eq!(err("trUe"), "invalid character 'U' in literal true (expecting 'u')");
        assert_eq!(err("nul1"), "invalid character '1' in literal null (expecting 'l')");
        assert_eq!(err("\"a\nb\""), r"invalid character '\n' in string literal");
        assert_eq!(err(r#""\q""#), "invalid character 'q' in string escape code");
        assert_eq!(err(r#""\u12g4""#), r"invalid character 'g' in \u hexadecimal character escape");
        assert_eq!(err("'a'"), r"invalid character '\'' looking for beginning of value");
        assert_eq!(err("\x00"), r"invalid character '\x00' looking for beginning of value");
        assert_eq!(err(r#"{"a":{},"b":[[],{}],"c":[1,{"d":[]}]}"#), "valid");
        assert_eq!(err(r#"{"a":1,"b"}"#), "invalid character '}' after object key");
        assert_eq!(err("[[1],[2}"), "invalid character '}' after array element");
    }

    #[test]
    fn nesting_is_bounded_by_go_s_limit_without_recursion() {
        // On the test thread's 2 MiB stack, which ten thousand recursive frames overflowed.
        let nested = |open: &str, close: &str, depth: usize| format!("{}{}", open.repeat(depth), close.repeat(depth));
        assert_eq!(err(&nested("[", "]", 10_000)), "valid");
        assert_eq!(err(&nested(r#"{"a":"#, "}", 9_999).replace(r#"{"a":}"#, r#"{"a":{}}"#)), "valid");
        assert_eq!(err(&nested("[", "]", 10_001)), "invalid character '[' exceeded max depth");
        assert_eq!(err(&nested("[", "]", 100_000)), "invalid character '[' exceeded max depth");
        assert_eq!(err(&nested(r#"{"a":"#, "}", 100_000)), "invalid character '{' exceeded max depth");
        assert_eq!(err(&format!("{}{{}}{}", "[".repeat(9_999), "]".repeat(9_999))), "valid");
        assert_eq!(err(&format!("{}{{}}{}", "[".repeat(10_000), "]".repeat(10_000))), "invalid character '{' exceeded max depth");
    }

    #[test]
    fn go_printing() {
        let v = serde_json::json!({"metadata": {"labels": "x", "b": [1, 2.5, null, true]}, "a": {}, "z": 0.00001, "y": 1234567.5});
        assert_eq!(go_format(&v), "map[a:map[] metadata:map[b:[1 2.5 <nil> true] labels:x] y:1.2345675e+06 z:1e-05]");
        assert_eq!(marshal_sorted(&serde_json::json!({"b": "<&>", "a": 1})), r#"{"a":1,"b":"\u003c\u0026\u003e"}"#);
    }
}
