//! kube-openapi's error values and results (`pkg/validation/errors`, `validate.Result`), and
//! their conversion to field errors by apiextensions (`kubeOpenAPIResultToFieldErrors`).
//!
//! The messages (`spec.x in body must be of type integer: "string"`) and the conversion rules
//! (which codes become `Required value`, `Unsupported value`, `Too long`, `Too many`, and which
//! stay `Invalid value` with the kube-openapi text as detail) are what clients see.

use kapi_apimachinery::Cause;
use serde_json::Value;

use super::gofmt::{self, BadValue, ErrorType};
use crate::gofmt::{go_json, go_num_v, go_quote, GoNum};

/// kube-openapi's error codes that the conversion distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    InvalidType,
    Required,
    TooLong,
    Enum,
    MaxItems,
    TooManyProperties,
    Other,
}

/// One kube-openapi error: a `*errors.Validation` (with a name) or a plain error.
#[derive(Debug, Clone)]
pub(crate) enum OaErr {
    Validation {
        code: Code,
        name: String,
        value: Option<BadValue>,
        valid: Option<i64>,
        values: Vec<Value>,
        message: String,
    },
    Plain(String),
}

impl OaErr {
    fn message(&self) -> &str {
        match self {
            OaErr::Validation { message, .. } | OaErr::Plain(message) => message,
        }
    }

    fn v(code: Code, name: &str, value: Option<BadValue>, message: String) -> OaErr {
        OaErr::Validation {
            code,
            name: name.to_string(),
            value,
            valid: None,
            values: Vec::new(),
            message,
        }
    }

    /// `InvalidType`: `<path> in body must be of type <t>: "<got>"`.
    pub(crate) fn invalid_type(name: &str, type_name: &str, got: &str) -> OaErr {
        Self::v(
            Code::InvalidType,
            name,
            Some(BadValue::Str(got.into())),
            format!(
                "{name} in body must be of type {type_name}: {}",
                go_quote(got)
            ),
        )
    }

    pub(crate) fn required(name: &str) -> OaErr {
        Self::v(
            Code::Required,
            name,
            None,
            format!("{name} in body is required"),
        )
    }

    pub(crate) fn too_long(name: &str, max: i64, data: &str) -> OaErr {
        OaErr::Validation {
            code: Code::TooLong,
            name: name.into(),
            value: Some(BadValue::Str(data.into())),
            valid: Some(max),
            values: Vec::new(),
            message: format!("{name} in body should be at most {max} chars long"),
        }
    }

    pub(crate) fn too_short(name: &str, min: i64, data: &str) -> OaErr {
        Self::v(
            Code::Other,
            name,
            Some(BadValue::Str(data.into())),
            format!("{name} in body should be at least {min} chars long"),
        )
    }

    pub(crate) fn failed_pattern(name: &str, pattern: &str, data: &str) -> OaErr {
        Self::v(
            Code::Other,
            name,
            Some(BadValue::Str(data.into())),
            format!("{name} in body should match '{pattern}'"),
        )
    }

    pub(crate) fn enum_fail(name: &str, data: &Value, values: &[Value]) -> OaErr {
        let shown: Vec<String> = values.iter().map(go_json).collect();
        OaErr::Validation {
            code: Code::Enum,
            name: name.into(),
            value: Some(BadValue::of(data)),
            valid: None,
            values: values.to_vec(),
            message: format!("{name} in body should be one of [{}]", shown.join(" ")),
        }
    }

    pub(crate) fn not_multiple_of(name: &str, factor: GoNum, data: GoNum) -> OaErr {
        Self::v(
            Code::Other,
            name,
            Some(BadValue::Num(data)),
            format!(
                "{name} in body should be a multiple of {}",
                go_num_v(factor)
            ),
        )
    }

    pub(crate) fn multiple_of_must_be_positive(name: &str, factor: GoNum) -> OaErr {
        Self::v(
            Code::Other,
            name,
            Some(BadValue::Num(factor)),
            format!(
                "factor MultipleOf declared for {name} must be positive: {}",
                go_num_v(factor)
            ),
        )
    }

    pub(crate) fn exceeds_maximum(name: &str, max: GoNum, exclusive: bool, data: GoNum) -> OaErr {
        let rel = if exclusive {
            "less than"
        } else {
            "less than or equal to"
        };
        Self::v(
            Code::Other,
            name,
            Some(BadValue::Num(data)),
            format!("{name} in body should be {rel} {}", go_num_v(max)),
        )
    }

    pub(crate) fn exceeds_minimum(name: &str, min: GoNum, exclusive: bool, data: GoNum) -> OaErr {
        let rel = if exclusive {
            "greater than"
        } else {
            "greater than or equal to"
        };
        Self::v(
            Code::Other,
            name,
            Some(BadValue::Num(data)),
            format!("{name} in body should be {rel} {}", go_num_v(min)),
        )
    }

    pub(crate) fn duplicate_items(name: &str) -> OaErr {
        Self::v(
            Code::Other,
            name,
            None,
            format!("{name} in body shouldn't contain duplicates"),
        )
    }

    pub(crate) fn too_many_items(name: &str, max: i64, size: i64) -> OaErr {
        OaErr::Validation {
            code: Code::MaxItems,
            name: name.into(),
            value: Some(BadValue::Num(GoNum::Int(size))),
            valid: Some(max),
            values: Vec::new(),
            message: format!("{name} in body should have at most {max} items"),
        }
    }

    pub(crate) fn too_few_items(name: &str, min: i64, size: i64) -> OaErr {
        Self::v(
            Code::Other,
            name,
            Some(BadValue::Num(GoNum::Int(size))),
            format!("{name} in body should have at least {min} items"),
        )
    }

    pub(crate) fn too_few_properties(name: &str, min: i64, size: i64) -> OaErr {
        Self::v(
            Code::Other,
            name,
            Some(BadValue::Num(GoNum::Int(size))),
            format!("{name} in body should have at least {min} properties"),
        )
    }

    pub(crate) fn too_many_properties(name: &str, max: i64, size: i64) -> OaErr {
        OaErr::Validation {
            code: Code::TooManyProperties,
            name: name.into(),
            value: Some(BadValue::Num(GoNum::Int(size))),
            valid: Some(max),
            values: Vec::new(),
            message: format!("{name} in body should have at most {max} properties"),
        }
    }

    pub(crate) fn property_not_allowed(name: &str, key: &str) -> OaErr {
        Self::v(
            Code::Other,
            name,
            Some(BadValue::Str(key.into())),
            format!("{name}.{key} in body is a forbidden property"),
        )
    }
}

/// kube-openapi's `validate.Result`: errors (deduplicated by message) and a match count that
/// picks the "best" failing branch of `anyOf`/`oneOf`.
#[derive(Debug, Clone, Default)]
pub(crate) struct OaResult {
    pub(crate) errors: Vec<OaErr>,
    pub(crate) match_count: usize,
}

impl OaResult {
    pub(crate) fn error(e: OaErr) -> OaResult {
        OaResult {
            errors: vec![e],
            match_count: 0,
        }
    }

    pub(crate) fn add(&mut self, e: OaErr) {
        if !self.errors.iter().any(|x| x.message() == e.message()) {
            self.errors.push(e);
        }
    }

    pub(crate) fn merge(&mut self, other: OaResult) {
        for e in other.errors {
            self.add(e);
        }
        self.match_count += other.match_count;
    }

    pub(crate) fn inc(&mut self) {
        self.match_count += 1;
    }

    pub(crate) fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

fn child_path(prefix: Option<&str>, name: &str) -> String {
    match prefix {
        Some(p) => format!("{p}.{name}"),
        None => name.to_string(),
    }
}

/// apiextensions' `kubeOpenAPIResultToFieldErrors`, with `prefix` the `fldPath` (`None` is
/// Go's nil path, printed `<nil>`).
pub(crate) fn to_causes(prefix: Option<&str>, errors: &[OaErr]) -> Vec<Cause> {
    let base = prefix.unwrap_or("<nil>").to_string();
    errors
        .iter()
        .map(|err| match err {
            OaErr::Plain(msg) => gofmt::invalid(&base, &BadValue::Str(String::new()), msg),
            OaErr::Validation {
                code,
                name,
                value,
                valid,
                values,
                message,
            } => {
                let path = if !name.is_empty() && name != "." {
                    child_path(prefix, name.strip_prefix('.').unwrap_or(name))
                } else {
                    base.clone()
                };
                let shown = value.clone().unwrap_or(BadValue::Str(String::new()));
                let count = |v: &Option<BadValue>| match v {
                    Some(BadValue::Num(GoNum::Int(i))) => *i,
                    _ => -1,
                };
                match code {
                    Code::Required => gofmt::required(&path),
                    Code::Enum => {
                        let supported: Vec<String> = values
                            .iter()
                            .map(|v| v.as_str().map_or_else(|| go_json(v), str::to_string))
                            .collect();
                        gofmt::not_supported(
                            &path,
                            &value.clone().unwrap_or(BadValue::Json(Value::Null)),
                            &supported,
                        )
                    }
                    Code::TooLong => gofmt::too_long(&path, valid.unwrap_or(-1)),
                    Code::MaxItems | Code::TooManyProperties => {
                        gofmt::too_many(&path, count(value), valid.unwrap_or(-1))
                    }
                    Code::InvalidType => {
                        gofmt::field_error(ErrorType::TypeInvalid, &path, &shown, message)
                    }
                    Code::Other => gofmt::invalid(&path, &shown, message),
                }
            }
        })
        .collect()
}
