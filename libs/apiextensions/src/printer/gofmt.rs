//! Go's text forms of decoded JSON values, as kube prints them: `fmt.Sprint` (field-selector
//! values, `%v` in messages), `encoding/json.Marshal` (string cells holding objects or lists),
//! `%q` and `%#U` (error messages), and `strconv.Unquote` for quoted path literals. kube's outputs are byte-compared by clients and tests, so
//! the Go rules (sorted map keys, `1e+06` floats, HTML-escaped JSON) are kept here.

use serde_json::{Number, Value};

/// The Go type name of a value decoded by apimachinery's JSON decoder (integers are `int64`,
/// other numbers `float64`), as `%v` of a `reflect.Type` prints it in jsonpath's errors.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.as_i64().is_some() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// `fmt.Sprint(v)` of a decoded JSON value: strings bare, `<nil>` for null, maps as
/// `map[k:v ...]` with sorted keys, lists as `[a b]`.
pub(crate) fn sprint(v: &Value) -> String {
    let mut out = String::new();
    write_sprint(&mut out, v);
    out
}

fn write_sprint(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number_v(n)),
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write_sprint(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push_str("map[");
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(key);
                out.push(':');
                if let Some(value) = map.get(key) {
                    write_sprint(out, value);
                }
            }
            out.push(']');
        }
    }
}

/// `%v` of a number: `int64` in decimal; `float64` in Go's shortest `%g` form, which switches
/// to an exponent (`1e+06`, `1e-05`) below 1e-4 and from 1e6 (integral beyond int64 included).
fn number_v(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    let (mantissa, exp) = shortest_exp(f);
    if !(-4..6).contains(&exp) {
        format!("{mantissa}e{}", exp_suffix(exp, 2))
    } else {
        f.to_string()
    }
}

/// Shortest round-trip digits of `f` as `d.ddd` and its decimal exponent.
fn shortest_exp(f: f64) -> (String, i32) {
    let text = format!("{f:e}");
    match text.split_once('e') {
        Some((mantissa, exp)) => (mantissa.to_owned(), exp.parse().unwrap_or(0)),
        None => (text, 0),
    }
}

/// `+06` / `-05`: Go's exponent sign and at least `min_digits` digits.
fn exp_suffix(exp: i32, min_digits: usize) -> String {
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{sign}{:0min_digits$}", exp.unsigned_abs())
}

/// `encoding/json.Marshal` of a decoded value: compact, map keys sorted, `<`, `>`, `&`,
/// U+2028 and U+2029 escaped, floats in Go's form. jsonpath prints objects and lists this way.
pub(crate) fn marshal(v: &Value) -> String {
    let mut out = String::new();
    write_json(&mut out, v);
    out
}

fn write_json(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&json_number(n)),
        Value::String(s) => write_json_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(out, key);
                out.push(':');
                if let Some(value) = map.get(key) {
                    write_json(out, value);
                }
            }
            out.push('}');
        }
    }
}

/// Go's JSON float form: plain decimals, exponent only below 1e-6 or from 1e21 (`1e-7`,
/// `1e+21`).
fn json_number(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let (mantissa, exp) = shortest_exp(f);
        let digits = if exp < 0 { 1 } else { 2 };
        format!("{mantissa}e{}", exp_suffix(exp, digits))
    } else {
        f.to_string()
    }
}

fn write_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Go's `strconv.IsPrint`, approximated: graphic characters and the ASCII space.
fn is_print(c: char) -> bool {
    c == ' ' || !(c.is_control() || c.is_whitespace() || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{feff}'))
}

/// `%q` of a string, as kube quotes JSONPaths in messages.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::from('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if is_print(c) => out.push(c),
            c if u32::from(c) < 0x80 => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c if u32::from(c) < 0x10000 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push_str(&format!("\\U{:08x}", u32::from(c))),
        }
    }
    out.push('"');
    out
}

/// `%#U` of a character: `U+002A '*'`, or just `U+0009` when not printable.
pub(crate) fn unicode_desc(c: char) -> String {
    if is_print(c) {
        format!("U+{:04X} '{c}'", u32::from(c))
    } else {
        format!("U+{:04X}", u32::from(c))
    }
}

/// Go's `strconv.Unquote`, extended to single-quoted strings as jsonpath does; `None` is
/// Go's `invalid syntax`.
pub(crate) fn unquote(s: &str) -> Option<String> {
    let quote = s.chars().next().filter(|q| matches!(q, '"' | '\''))?;
    if s.len() < 2 || !s.ends_with(quote) {
        return None;
    }
    let inner = &s[1..s.len() - 1];
    if !inner.contains('\\') && !inner.contains(quote) {
        return Some(inner.to_owned());
    }
    let mut out: Vec<u8> = Vec::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == quote {
            return None;
        }
        if c != '\\' {
            push_char(&mut out, c);
            continue;
        }
        match chars.next()? {
            'a' => out.push(7),
            'b' => out.push(8),
            'f' => out.push(12),
            'n' => out.push(b'\n'),
            'r' => out.push(b'\r'),
            't' => out.push(b'\t'),
            'v' => out.push(11),
            '\\' => out.push(b'\\'),
            q @ ('"' | '\'') if q == quote => out.push(q as u8),
            e @ ('x' | 'u' | 'U') => {
                let width = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut v = 0u32;
                for _ in 0..width {
                    v = v * 16 + chars.next()?.to_digit(16)?;
                }
                if e == 'x' {
                    out.push(u8::try_from(v).ok()?);
                } else {
                    push_char(&mut out, char::from_u32(v)?);
                }
            }
            d @ '0'..='7' => {
                let mut v = d.to_digit(8)?;
                for _ in 0..2 {
                    v = v * 8 + chars.next()?.to_digit(8)?;
                }
                out.push(u8::try_from(v).ok()?);
            }
            _ => return None,
        }
    }
    Some(String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

fn push_char(out: &mut Vec<u8>, c: char) {
    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
}
