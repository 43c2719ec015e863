//! The number validator of kube-openapi (`numberValidator`): range checks against the
//! type's format, `multipleOf`, `minimum`, `maximum`.
//!
//! kube-openapi compares integers as integers (truncating fractional bounds) when the bound
//! fits the type, and as floats otherwise; the messages print the bound the way that path
//! holds it (`10` or `1e+06`), so both paths are kept.

use super::node::Schema;
use super::openapi::{OaErr, OaResult};
use crate::gofmt::GoNum;

/// go-openapi's `IsFloat64AJSONInteger` (swag/conv 0.27: integral within 1e-9 relative error).
pub(crate) fn is_json_integer(f: f64) -> bool {
    const MAX: f64 = 9_007_199_254_740_991.0;
    if !f.is_finite() || !(-MAX..=MAX).contains(&f) {
        return false;
    }
    let rounded = f.round();
    if f == rounded {
        return true;
    }
    if rounded == 0.0 {
        return false;
    }
    (f - rounded).abs() < 1e-9 * rounded.abs()
}

/// `IsValueValidAgainstRange`: whether a number fits the node's type and format.
fn range_check(
    val: GoNum,
    type_name: &str,
    format: &str,
    prefix: &str,
    path: &str,
) -> Option<OaErr> {
    let rep = match val {
        GoNum::Int(i) => i.to_string(),
        GoNum::Float(f) => format!("{f}"),
    };
    let bad = match (type_name, format) {
        ("integer", "int32") => rep.parse::<i32>().is_err(),
        ("integer", _) => rep.parse::<i64>().is_err(),
        (_, "float") => rep
            .parse::<f64>()
            .is_ok_and(|v| v.is_finite() && (v as f32).is_infinite()),
        _ => false,
    };
    bad.then(|| {
        OaErr::Plain(if format.is_empty() {
            format!("{prefix} value must be of type {type_name} (default format) in {path}")
        } else {
            format!("{prefix} value must be of type {type_name} with format {format} in {path}")
        })
    })
}

fn multiple_of(path: &str, data: f64, factor: f64) -> Option<OaErr> {
    if factor <= 0.0 {
        return Some(OaErr::multiple_of_must_be_positive(
            path,
            GoNum::Float(factor),
        ));
    }
    let mult = if factor < 1.0 {
        1.0 / factor * data
    } else {
        data / factor
    };
    (!is_json_integer(mult))
        .then(|| OaErr::not_multiple_of(path, GoNum::Float(factor), GoNum::Float(data)))
}

fn multiple_of_native(path: &str, val: GoNum, factor: f64) -> Option<OaErr> {
    match val {
        GoNum::Int(i) => {
            let f = factor as i64;
            if f <= 0 {
                return Some(OaErr::multiple_of_must_be_positive(path, GoNum::Int(f)));
            }
            (i.wrapping_div(f).wrapping_mul(f) != i)
                .then(|| OaErr::not_multiple_of(path, GoNum::Int(f), val))
        }
        GoNum::Float(d) => multiple_of(path, d, factor),
    }
}

fn maximum(path: &str, data: f64, max: f64, excl: bool) -> Option<OaErr> {
    ((!excl && data > max) || (excl && data >= max))
        .then(|| OaErr::exceeds_maximum(path, GoNum::Float(max), excl, GoNum::Float(data)))
}

fn maximum_native(path: &str, val: GoNum, max: f64, excl: bool) -> Option<OaErr> {
    match val {
        GoNum::Int(i) => {
            let m = max as i64;
            ((!excl && i > m) || (excl && i >= m))
                .then(|| OaErr::exceeds_maximum(path, GoNum::Int(m), excl, val))
        }
        GoNum::Float(d) => maximum(path, d, max, excl),
    }
}

fn minimum(path: &str, data: f64, min: f64, excl: bool) -> Option<OaErr> {
    ((!excl && data < min) || (excl && data <= min))
        .then(|| OaErr::exceeds_minimum(path, GoNum::Float(min), excl, GoNum::Float(data)))
}

fn minimum_native(path: &str, val: GoNum, min: f64, excl: bool) -> Option<OaErr> {
    match val {
        GoNum::Int(i) => {
            let m = min as i64;
            ((!excl && i < m) || (excl && i <= m))
                .then(|| OaErr::exceeds_minimum(path, GoNum::Int(m), excl, val))
        }
        GoNum::Float(d) => minimum(path, d, min, excl),
    }
}

/// One bound of the number validator: the bound's own range check decides whether the native
/// (integer) comparison or the float one is used.
fn bound(
    type_name: &str,
    format: &str,
    prefix: &str,
    path: &str,
    limit: f64,
    native: impl FnOnce() -> Option<OaErr>,
    float: impl FnOnce() -> Option<OaErr>,
) -> OaResult {
    let mut r = OaResult::default();
    match range_check(GoNum::Float(limit), type_name, format, prefix, path) {
        None => r.errors.extend(native()),
        Some(e) => {
            r.add(e);
            r.errors.extend(float());
        }
    }
    r
}

pub(crate) fn number_validate(
    s: &Schema,
    types: &[&str],
    format: Option<&str>,
    path: &str,
    val: GoNum,
) -> OaResult {
    let (type_name, fmt) = match (types, format) {
        (["integer"], Some(f @ ("int32" | "int64"))) => ("integer", f),
        (["integer"], _) => ("integer", ""),
        (["number"], Some(f @ ("float" | "double"))) => ("number", f),
        (["number"], _) => ("number", ""),
        _ => ("", ""),
    };
    let mut res = OaResult::default();
    res.errors
        .extend(range_check(val, type_name, fmt, "Checked", path));
    let data = val.as_f64();
    let mut parts = Vec::new();
    if let Some(m) = s.multiple_of {
        parts.push(bound(
            type_name,
            fmt,
            "MultipleOf",
            path,
            m,
            || multiple_of_native(path, val, m),
            || multiple_of(path, data, m),
        ));
    }
    if let Some(min) = s.minimum {
        let ex = s.exclusive_minimum;
        parts.push(bound(
            type_name,
            fmt,
            "Minimum boundary",
            path,
            min,
            || minimum_native(path, val, min, ex),
            || minimum(path, data, min, ex),
        ));
    }
    if let Some(max) = s.maximum {
        let ex = s.exclusive_maximum;
        parts.push(bound(
            type_name,
            fmt,
            "Maximum boundary",
            path,
            max,
            || maximum_native(path, val, max, ex),
            || maximum(path, data, max, ex),
        ));
    }
    for p in parts {
        res.merge(p);
    }
    res.inc();
    res
}

