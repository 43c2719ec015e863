//! The checks kube makes on `x-kubernetes-validations` entries before compiling them: the
//! shape of rule, message, messageExpression, reason and fieldPath, and (lexically) where
//! transition rules may use `oldSelf`. Compiling and cost estimation are [`crate::cel`]'s.

use kapi_apimachinery::Cause;
use serde_json::Value;

use super::fieldpath::valid_field_path;
use super::{get_arr, get_some, get_str, invalid, invalid_str, not_supported, required, structural, Path};

const VALIDATION_REASONS: &[&str] =
    &["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"];

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// The checks kube makes on `x-kubernetes-validations` entries before compiling them.
pub(crate) fn validation_rule_shapes(s: &Value, path: &Path) -> Vec<Cause> {
    let mut errs = Vec::new();
    for (i, rule) in get_arr(s, "x-kubernetes-validations").iter().enumerate() {
        let rpath = path.child("x-kubernetes-validations").index(i);
        let (r, msg, msg_expr) = (get_str(rule, "rule"), get_str(rule, "message"), get_str(rule, "messageExpression"));
        let (tr, tm) = (r.trim(), msg.trim());
        if tr.is_empty() {
            errs.push(required(&rpath.child("rule"), "rule is not specified"));
        } else if !msg.is_empty() && tm.is_empty() {
            errs.push(invalid_str(&rpath.child("message"), msg, "must be non-empty if specified"));
        } else if has_newlines(tm) {
            errs.push(invalid_str(&rpath.child("message"), msg, "must not contain line breaks"));
        } else if has_newlines(tr) && tm.is_empty() {
            errs.push(required(&rpath.child("message"), "message must be specified if rule contains line breaks"));
        }
        if !msg_expr.is_empty() && msg_expr.trim().is_empty() {
            errs.push(required(&rpath.child("messageExpression"), "messageExpression must be non-empty if specified"));
        }
        if let Some(reason) = get_some(rule, "reason") {
            let reason = reason.as_str().unwrap_or("");
            if !VALIDATION_REASONS.contains(&reason) {
                errs.push(not_supported(&rpath.child("reason"), reason, VALIDATION_REASONS));
            }
        }
        let field_path = get_str(rule, "fieldPath");
        if !field_path.is_empty() && field_path.trim().is_empty() {
            errs.push(invalid_str(&rpath.child("fieldPath"), field_path, "must be non-empty if specified"));
        }
        if has_newlines(field_path) {
            errs.push(invalid_str(&rpath.child("fieldPath"), field_path, "must not contain line breaks"));
        }
        if !field_path.is_empty()
            && structural::new_structural_error(s).is_none()
            && valid_field_path(field_path, Some(s), true).is_err()
        {
            errs.push(invalid_str(&rpath.child("fieldPath"), field_path, "must be a valid path"));
        }
    }
    errs
}

/// Whether a CEL rule refers to `oldSelf` (a lexical check standing in for the compiler's).
fn uses_old_self(rule: &str) -> bool {
    let b = rule.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    rule.match_indices("oldSelf")
        .any(|(i, m)| (i == 0 || !ident(b[i - 1])) && b.get(i + m.len()).is_none_or(|c| !ident(*c)))
}

/// The transition-rule checks kube makes after compiling: `oldSelf` only where old and new
/// values correlate, `optionalOldSelf` only with `oldSelf`.
pub(crate) fn old_self_rules(s: &Value, path: &Path, uncorrelatable: Option<&Path>) -> Vec<Cause> {
    let mut errs = Vec::new();
    for (i, rule) in get_arr(s, "x-kubernetes-validations").iter().enumerate() {
        let rpath = path.child("x-kubernetes-validations").index(i);
        let r = get_str(rule, "rule");
        if uses_old_self(r) {
            if let Some(p) = uncorrelatable {
                errs.push(invalid_str(
                    &rpath.child("rule"),
                    r,
                    &format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {p}"),
                ));
            }
        } else if let Some(o) = get_some(rule, "optionalOldSelf") {
            errs.push(invalid(&rpath.child("optionalOldSelf"), o, "may not be set if oldSelf is not used in rule"));
        }
    }
    errs
}
