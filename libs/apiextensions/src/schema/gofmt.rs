//! How Go prints values in kube's messages, and kube's `field.Error` rendering.
//!
//! Custom resources are decoded by kube into `int64`, `float64`, `string`, `bool`, maps and
//! slices; messages print them with `%v`, `%q` or `encoding/json`. Clients show these strings
//! verbatim, so kapi reproduces each printer: Go's shortest `%v` for floats (`1e+06`), Go's
//! `strconv.Quote`, and `json.Marshal` (sorted keys, HTML-safe escaping).

use kapi_apimachinery::Cause;
use serde_json::{Number, Value};

/// A JSON number as kube holds it after decoding: integers fit `int64`, the rest is `float64`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum GoNum {
    Int(i64),
    Float(f64),
}

pub(crate) fn go_num(n: &Number) -> GoNum {
    match n.as_i64() {
        Some(i) => GoNum::Int(i),
        None => GoNum::Float(n.as_f64().unwrap_or(0.0)),
    }
}

impl GoNum {
    pub(crate) fn as_f64(self) -> f64 {
        match self {
            GoNum::Int(i) => i as f64,
            GoNum::Float(f) => f,
        }
    }
}

/// Splits Rust's shortest `{:e}` rendering into mantissa digits and decimal exponent.
fn shortest_exp(f: f64) -> (String, i32) {
    let s = format!("{:e}", f.abs());
    let (mant, exp) = s.split_once('e').unwrap_or((s.as_str(), "0"));
    (mant.to_string(), exp.parse().unwrap_or(0))
}

fn exp_form(f: f64, mant: &str, exp: i32, min_digits: usize) -> String {
    let sign = if f.is_sign_negative() { "-" } else { "" };
    let esign = if exp < 0 { '-' } else { '+' };
    format!(
        "{sign}{mant}e{esign}{:0>width$}",
        exp.unsigned_abs(),
        width = min_digits
    )
}

/// Go's `%v` for a float64 (`strconv.FormatFloat(f, 'g', -1, 64)`).
pub(crate) fn go_float_v(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let (mant, exp) = shortest_exp(f);
    if !(-4..6).contains(&exp) {
        exp_form(f, &mant, exp, 2)
    } else {
        format!("{f}")
    }
}

/// `encoding/json`'s rendering of a float64.
pub(crate) fn go_float_json(f: f64) -> String {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let (mant, exp) = shortest_exp(f);
        exp_form(f, &mant, exp, 1)
    } else {
        format!("{f}")
    }
}

/// Go's `%v` for a decoded JSON number.
pub(crate) fn go_num_v(n: GoNum) -> String {
    match n {
        GoNum::Int(i) => i.to_string(),
        GoNum::Float(f) => go_float_v(f),
    }
}

fn is_go_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(c as u32, 0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x180E | 0x200B..=0x200F | 0x2028..=0x202E
        | 0x2060..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB | 0xE000..=0xF8FF | 0xFFFE | 0xFFFF)
}

/// Go's `strconv.Quote` (and `%q` of a string).
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
            c if is_go_printable(c) => out.push(c),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

fn json_string(s: &str, out: &mut String) {
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
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_into(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match go_num(n) {
            GoNum::Int(i) => out.push_str(&i.to_string()),
            GoNum::Float(f) => out.push_str(&go_float_json(f)),
        },
        Value::String(s) => json_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_into(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_string(k, out);
                out.push(':');
                if let Some(x) = m.get(*k) {
                    json_into(x, out);
                }
            }
            out.push('}');
        }
    }
}

/// Go's `json.Marshal` of a decoded JSON value (keys sorted, `<>&` escaped).
pub(crate) fn go_json(v: &Value) -> String {
    let mut out = String::new();
    json_into(v, &mut out);
    out
}

/// The value of a `field.Error`, with the Go type kube had in hand.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum BadValue {
    /// A Go string (printed with `%q`).
    Str(String),
    /// An int64 or float64 (printed with `%v`).
    Num(GoNum),
    /// A bool.
    Bool(bool),
    /// Anything else, printed as JSON (`null`, maps, slices).
    Json(Value),
    /// `Too many` with an unknown count: the value is left out.
    Omit,
}

impl BadValue {
    /// The Go type a decoded JSON value has in kube.
    pub(crate) fn of(v: &Value) -> BadValue {
        match v {
            Value::String(s) => BadValue::Str(s.clone()),
            Value::Number(n) => BadValue::Num(go_num(n)),
            Value::Bool(b) => BadValue::Bool(*b),
            other => BadValue::Json(other.clone()),
        }
    }

    fn render(&self) -> String {
        match self {
            BadValue::Str(s) => go_quote(s),
            BadValue::Num(n) => go_num_v(*n),
            BadValue::Bool(b) => b.to_string(),
            BadValue::Json(v) => go_json(v),
            BadValue::Omit => String::new(),
        }
    }
}

/// kube's `field.ErrorType`s used by custom-resource validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorType {
    Required,
    Invalid,
    TypeInvalid,
    NotSupported,
    Duplicate,
    TooLong,
    TooMany,
}

impl ErrorType {
    fn reason(self) -> &'static str {
        match self {
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
        }
    }

    fn label(self) -> &'static str {
        match self {
            ErrorType::Required => "Required value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
        }
    }
}

/// Builds a [`Cause`] the way kube's `field.Error.Error()` renders it.
pub(crate) fn field_error(kind: ErrorType, field: &str, value: &BadValue, detail: &str) -> Cause {
    let mut body = kind.label().to_string();
    let shows_value =
        !matches!(kind, ErrorType::Required | ErrorType::TooLong) && *value != BadValue::Omit;
    if shows_value {
        body.push_str(": ");
        body.push_str(&value.render());
    }
    if !detail.is_empty() {
        body.push_str(": ");
        body.push_str(detail);
    }
    Cause {
        reason: kind.reason().into(),
        message: format!("{field}: {body}"),
        field: field.into(),
    }
}

/// `field.Invalid`.
pub(crate) fn invalid(field: &str, value: &BadValue, detail: &str) -> Cause {
    field_error(ErrorType::Invalid, field, value, detail)
}

/// `field.Required` with no detail.
pub(crate) fn required(field: &str) -> Cause {
    field_error(
        ErrorType::Required,
        field,
        &BadValue::Str(String::new()),
        "",
    )
}

/// `field.Duplicate`.
pub(crate) fn duplicate(field: &str, value: &BadValue) -> Cause {
    field_error(ErrorType::Duplicate, field, value, "")
}

/// `field.TooMany(actual, max)`: `Too many: 3: must have at most 2 items`.
pub(crate) fn too_many(field: &str, actual: i64, max: i64) -> Cause {
    let detail = if max >= 0 {
        format!(
            "must have at most {max} {}",
            if max == 1 { "item" } else { "items" }
        )
    } else {
        "has too many items".to_string()
    };
    let value = if actual >= 0 {
        BadValue::Num(GoNum::Int(actual))
    } else {
        BadValue::Omit
    };
    field_error(ErrorType::TooMany, field, &value, &detail)
}

/// `field.TooLong(max)`: `Too long: may not be more than 2 bytes`.
pub(crate) fn too_long(field: &str, max: i64) -> Cause {
    let detail = if max >= 0 {
        format!(
            "may not be more than {max} {}",
            if max == 1 { "byte" } else { "bytes" }
        )
    } else {
        "value is too long".to_string()
    };
    field_error(ErrorType::TooLong, field, &BadValue::Omit, &detail)
}

/// `field.NotSupported(value, supported)`.
pub(crate) fn not_supported(field: &str, value: &BadValue, supported: &[String]) -> Cause {
    let detail = if supported.is_empty() {
        String::new()
    } else {
        let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        format!("supported values: {}", quoted.join(", "))
    };
    field_error(ErrorType::NotSupported, field, value, &detail)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let v: Value =
            serde_json::from_str(r#"{"b":1,"a":"<x>","c":[1.5,null,true]}"#).unwrap_or_default();
        assert_eq!(
            go_json(&v),
            r#"{"a":"\u003cx\u003e","b":1,"c":[1.5,null,true]}"#
        );
    }
}
