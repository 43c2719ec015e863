//! kube's `field.Error` rendering for custom-resource validation.
//!
//! The bad value is printed as kube's `field.Error.Error()` prints it for the Go type it has:
//! `%q` for strings, `%v` for numbers and bools, `encoding/json` for the rest. The Go printers
//! themselves are shared with the other modules in [`crate::gofmt`].

use kapi_apimachinery::Cause;
use serde_json::Value;

use crate::gofmt::{go_json, go_num, go_num_v, go_quote, GoNum};

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
    let shows_value = !matches!(kind, ErrorType::Required | ErrorType::TooLong) && *value != BadValue::Omit;
    if shows_value {
        body.push_str(": ");
        body.push_str(&value.render());
    }
    if !detail.is_empty() {
        body.push_str(": ");
        body.push_str(detail);
    }
    Cause { reason: kind.reason().into(), message: format!("{field}: {body}"), field: field.into() }
}

/// `field.Invalid`.
pub(crate) fn invalid(field: &str, value: &BadValue, detail: &str) -> Cause {
    field_error(ErrorType::Invalid, field, value, detail)
}

/// `field.Required` with no detail.
pub(crate) fn required(field: &str) -> Cause {
    field_error(ErrorType::Required, field, &BadValue::Str(String::new()), "")
}

/// `field.Duplicate`.
pub(crate) fn duplicate(field: &str, value: &BadValue) -> Cause {
    field_error(ErrorType::Duplicate, field, value, "")
}

/// `field.TooMany(actual, max)`: `Too many: 3: must have at most 2 items`.
pub(crate) fn too_many(field: &str, actual: i64, max: i64) -> Cause {
    let detail = if max >= 0 {
        format!("must have at most {max} {}", if max == 1 { "item" } else { "items" })
    } else {
        "has too many items".to_string()
    };
    let value = if actual >= 0 { BadValue::Num(GoNum::Int(actual)) } else { BadValue::Omit };
    field_error(ErrorType::TooMany, field, &value, &detail)
}

/// `field.TooLong(max)`: `Too long: may not be more than 2 bytes`.
pub(crate) fn too_long(field: &str, max: i64) -> Cause {
    let detail = if max >= 0 {
        format!("may not be more than {max} {}", if max == 1 { "byte" } else { "bytes" })
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
