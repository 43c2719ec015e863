//! Go's text forms that only the printer needs: `fmt.Sprint` (field-selector values, string
//! cells, `%v` in jsonpath errors), `%v` of a `reflect.Type`, `%#U` (parse errors) and
//! `strconv.Unquote` for quoted path literals. `%q`, `encoding/json.Marshal` and Go's number
//! forms are shared with the rest of the crate in [`crate::gofmt`].

use serde_json::Value;

use crate::gofmt::{go_num, go_num_v, is_print, GoNum};

/// The Go type name of a value decoded by apimachinery's JSON decoder (integers are `int64`,
/// other numbers `float64`), as `%v` of a `reflect.Type` prints it in jsonpath's errors.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) => match go_num(n) {
            GoNum::Int(_) => "int64",
            GoNum::Float(_) => "float64",
        },
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
        Value::Number(n) => out.push_str(&go_num_v(go_num(n))),
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
