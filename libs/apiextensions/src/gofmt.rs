//! Go's printers for decoded JSON values, written once for the whole crate.
//!
//! kube decodes custom resources into `int64`, `float64`, `string`, `bool`, maps and slices,
//! and prints them in field errors (`schema`), printer-column cells and jsonpath errors
//! (`printer`) and CEL rule errors (`cel`) with `%v`, `%q` (`strconv.Quote`) or
//! `encoding/json.Marshal`. Clients and kube's own tests compare these strings byte for byte,
//! so each Go rule is kept here: integers vs floats, Go's shortest float forms (`1e+06` for
//! `%v`, `1e+21`/`1e-7` for JSON), Go's printable runes, sorted map keys and HTML-safe escapes.

use serde_json::{Number, Value};

/// A JSON number as kube holds it after decoding: integers that fit `int64` stay integers,
/// everything else (fractions, exponents, integers beyond `int64`) is a `float64`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum GoNum {
    Int(i64),
    Float(f64),
}

/// The Go type apimachinery's JSON decoder gives `n` (see [`GoNum`]).
pub(crate) fn go_num(n: &Number) -> GoNum {
    match n.as_i64() {
        Some(i) => GoNum::Int(i),
        None => GoNum::Float(n.as_f64().unwrap_or(0.0)),
    }
}

impl GoNum {
    /// The value as a `float64`, as Go's conversions `float64(i)` give it.
    pub(crate) fn as_f64(self) -> f64 {
        match self {
            GoNum::Int(i) => i as f64,
            GoNum::Float(f) => f,
        }
    }
}

/// Shortest round-trip digits of `|f|` as `d.ddd` and the decimal exponent: the digits Go's
/// `strconv.FormatFloat(f, _, -1, 64)` picks (Rust's `{:e}` is also shortest round-trip).
fn shortest_exp(f: f64) -> (String, i32) {
    let s = format!("{:e}", f.abs());
    let (mant, exp) = s.split_once('e').unwrap_or((s.as_str(), "0"));
    (mant.to_string(), exp.parse().unwrap_or(0))
}

/// `strconv`'s `'e'` form: sign, mantissa, `e`, exponent sign and at least two exponent digits.
fn exp_form(f: f64) -> String {
    let (mant, exp) = shortest_exp(f);
    let sign = if f.is_sign_negative() { "-" } else { "" };
    let esign = if exp < 0 { '-' } else { '+' };
    format!("{sign}{mant}e{esign}{:02}", exp.unsigned_abs())
}

/// Go's `%v` of a float64 (`strconv.FormatFloat(f, 'g', -1, 64)`): the exponent form below
/// 1e-4 and from 1e6 (`1e-05`, `1e+06`, two exponent digits at least), plain decimals between.
///
/// This differs from [`go_float_json`] on purpose: messages print with `%v`, JSON with the
/// encoder's own ES6-like thresholds.
pub(crate) fn go_float_v(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let (_, exp) = shortest_exp(f);
    if (-4..6).contains(&exp) {
        format!("{f}")
    } else {
        exp_form(f)
    }
}

/// `encoding/json`'s rendering of a (finite) float64: plain decimals, the exponent form only
/// below 1e-6 or from 1e21, and there Go trims `e-07` to `e-7` (but keeps `e+21`).
///
/// Go's encoder refuses NaN and infinities; decoded JSON never holds them.
pub(crate) fn go_float_json(f: f64) -> String {
    let abs = f.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) {
        return format!("{f}");
    }
    let mut s = exp_form(f);
    // Go's `clean up e-09 to e-9`: only a negative exponent with a leading zero.
    if let Some(pos) = s.rfind("e-0") {
        s.remove(pos + 2);
    }
    s
}

/// Go's `%v` of a decoded JSON number.
pub(crate) fn go_num_v(n: GoNum) -> String {
    match n {
        GoNum::Int(i) => i.to_string(),
        GoNum::Float(f) => go_float_v(f),
    }
}

/// Go's `strconv.IsPrint` (also `unicode.IsPrint`): letters, marks, numbers, punctuation,
/// symbols and the ASCII space.
///
/// Controls (Cc) and separators (Z*) other than the space come from Rust's `is_control` and
/// `is_whitespace`; format characters (Cf), private use (Co) and the noncharacters U+FFFE/F
/// are listed. Unassigned code points (Cn), which Go's tables also reject, are not tracked:
/// a Unicode table is out of proportion for message text, so they print raw.
pub(crate) fn is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(c as u32,
        0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x890..=0x891 | 0x8E2 | 0x180E
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB
        | 0xE000..=0xF8FF | 0xFFFE | 0xFFFF | 0x110BD | 0x110CD | 0x13430..=0x1343F
        | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A | 0xE0001 | 0xE0020..=0xE007F
        | 0xF0000..=0x10FFFF)
}

/// Go's `strconv.Quote` (and `%q` of a string): the short escapes, runes that are not
/// [`is_print`] as `\x`, `\u` or `\U`, everything else as is.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
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
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// Appends `s` as `encoding/json` writes a string: `\b` and `\f` short (Go 1.22 and later),
/// other controls as `\u00XX`, and the HTML-unsafe `<`, `>`, `&`, U+2028, U+2029 as `\uXXXX`.
pub(crate) fn write_json_string(out: &mut String, s: &str) {
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
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `json.Marshal` of a Go string (see [`write_json_string`]).
pub(crate) fn go_json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_json_string(&mut out, s);
    out
}

fn write_json(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match go_num(n) {
            GoNum::Int(i) => out.push_str(&i.to_string()),
            GoNum::Float(f) => out.push_str(&go_float_json(f)),
        },
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
            // Go sorts map keys; serde_json's map order is not relied on.
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
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

/// Go's `json.Marshal` of a decoded JSON value: compact, map keys sorted, strings as
/// [`write_json_string`], numbers as `int64` or [`go_float_json`].
pub(crate) fn go_json(v: &Value) -> String {
    let mut out = String::new();
    write_json(&mut out, v);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    // The schema's field errors print floats with `%v` and values with `%q`/`json.Marshal`.
    #[test]
    fn floats_print_like_go() {
        assert_eq!(go_float_v(1e6), "1e+06");
        assert_eq!(go_float_v(100000.0), "100000");
        assert_eq!(go_float_v(1.5), "1.5");
        assert_eq!(go_float_v(0.0001), "0.0001");
        assert_eq!(go_float_v(0.00001), "1e-05");
        assert_eq!(go_float_v(-123456789.0), "-1.23456789e+08");
        assert_eq!(go_float_json(1e21), "1e+21");
        assert_eq!(go_float_json(1e20), "100000000000000000000");
        assert_eq!(go_float_json(1e-7), "1e-7");
        assert_eq!(go_float_json(2.5), "2.5");
    }

    #[test]
    fn quote_and_json_like_go() {
        assert_eq!(go_quote("a\"b\\c\n\u{1}é"), "\"a\\\"b\\\\c\\n\\x01é\"");
        let v: Value = serde_json::from_str(r#"{"b":1,"a":"<x>","c":[1.5,null,true]}"#).unwrap_or_default();
        assert_eq!(go_json(&v), r#"{"a":"\u003cx\u003e","b":1,"c":[1.5,null,true]}"#);
    }

    #[test]
    fn special_floats_print_like_go_v() {
        assert_eq!(go_float_v(f64::NAN), "NaN");
        assert_eq!(go_float_v(f64::INFINITY), "+Inf");
        assert_eq!(go_float_v(f64::NEG_INFINITY), "-Inf");
        assert_eq!(go_float_v(-0.0), "-0");
        assert_eq!(go_float_v(0.0), "0");
        assert_eq!(go_float_v(1.5e-5), "1.5e-05");
        assert_eq!(go_float_v(999999.0), "999999");
        assert_eq!(go_float_v(1e100), "1e+100");
        assert_eq!(go_float_v(-2.5), "-2.5");
        // Beyond int64 a JSON integer is a float64 in kube.
        assert_eq!(go_num_v(go_num(&Number::from(u64::MAX))), "1.8446744073709552e+19");
    }

    #[test]
    fn json_floats_keep_go_exponent_digits() {
        assert_eq!(go_float_json(-1e21), "-1e+21");
        assert_eq!(go_float_json(1.5e300), "1.5e+300");
        assert_eq!(go_float_json(1e-6), "0.000001");
        assert_eq!(go_float_json(-2.5e-7), "-2.5e-7");
        assert_eq!(go_float_json(1e-10), "1e-10");
        assert_eq!(go_float_json(5e-324), "5e-324");
        assert_eq!(go_float_json(-0.0), "-0");
        assert_eq!(go_float_json(1e6), "1000000");
    }

    #[test]
    fn numbers_are_int64_or_float64() {
        assert_eq!(go_num(&Number::from(-3)), GoNum::Int(-3));
        assert_eq!(go_num(&Number::from(i64::MAX)), GoNum::Int(i64::MAX));
        assert_eq!(go_num(&Number::from(u64::MAX)), GoNum::Float(u64::MAX as f64));
        let half = json!(0.5);
        assert_eq!(half.as_number().map(go_num), Some(GoNum::Float(0.5)));
        assert_eq!(GoNum::Int(2).as_f64(), 2.0);
        assert_eq!(go_num_v(GoNum::Int(1_000_000)), "1000000");
        assert_eq!(go_num_v(GoNum::Float(1e6)), "1e+06");
    }

    #[test]
    fn quote_escapes_what_go_cannot_print() {
        assert_eq!(go_quote("\u{7}\u{8}\u{c}\r\t\u{b}\u{7f}"), r#""\a\b\f\r\t\v\x7f""#);
        assert_eq!(go_quote("\u{85}\u{a0}\u{2028}\u{3000}"), r#""\u0085\u00a0\u2028\u3000""#);
        assert_eq!(go_quote("\u{ad}\u{200b}\u{202e}\u{feff}\u{e000}"), r#""\u00ad\u200b\u202e\ufeff\ue000""#);
        assert_eq!(go_quote("\u{e0001}\u{f0000}"), r#""\U000e0001\U000f0000""#);
        assert_eq!(go_quote("日本 ✓ 😀 'x'"), "\"日本 ✓ 😀 'x'\"");
        assert!(is_print(' ') && is_print('*') && is_print('é'));
        assert!(!is_print('\t') && !is_print('\u{a0}') && !is_print('\u{2029}') && !is_print('\u{fffe}'));
    }

    #[test]
    fn json_escapes_like_go() {
        // DEL is not escaped by Go's encoder; `\b` and `\f` are short since Go 1.22.
        assert_eq!(go_json_string("\u{8}\u{c}\u{1}\u{1f}\u{7f}"), "\"\\b\\f\\u0001\\u001f\u{7f}\"");
        assert_eq!(go_json_string("<a&b>\u{2028}\u{2029}é"), r#""\u003ca\u0026b\u003e\u2028\u2029é""#);
        assert_eq!(
            go_json(&json!({"b": "<a&b>", "a": "\u{2028}\n\u{1}"})),
            r#"{"a":"\u2028\n\u0001","b":"\u003ca\u0026b\u003e"}"#
        );
        assert_eq!(
            go_json(&json!([1e21, 1e20, 1e-7, 0.5, -1, null, false])),
            "[1e+21,100000000000000000000,1e-7,0.5,-1,null,false]"
        );
        assert_eq!(go_json(&json!({"z": {"y": [], "x": {}}, "": "\"\\"})), r#"{"":"\"\\","z":{"x":{},"y":[]}}"#);
    }
}
