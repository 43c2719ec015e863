//! Field selectors, parsed as `k8s.io/apimachinery/pkg/fields` does.
//!
//! A field selector is a comma-separated conjunction of `field=value`, `field==value` and
//! `field!=value` terms; `\`, `,` and `=` in values are escaped with a backslash. Which fields
//! a kind supports is the caller's business ([`FieldSelector::check_supported`]).

use std::collections::BTreeMap;
use std::fmt;

use crate::status::ApiError;

/// How a term compares the field's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldOp {
    /// `=` or `==`.
    Equals,
    /// `!=`.
    NotEquals,
}

/// One term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// Field path, e.g. `metadata.name`, `spec.nodeName`.
    pub field: String,
    /// Comparison.
    pub op: FieldOp,
    /// Unescaped value.
    pub value: String,
}

impl FieldRequirement {
    fn matches(&self, fields: &BTreeMap<String, String>) -> bool {
        // kube's fields.Set returns "" for a missing field.
        let have = fields.get(&self.field).map(String::as_str).unwrap_or("");
        match self.op {
            FieldOp::Equals => have == self.value,
            FieldOp::NotEquals => have != self.value,
        }
    }
}

impl fmt::Display for FieldRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.op {
            FieldOp::Equals => "=",
            FieldOp::NotEquals => "!=",
        };
        write!(f, "{}{op}{}", self.field, escape_value(&self.value))
    }
}

/// A parsed field selector; the empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses `?fieldSelector=`; errors are 400 BadRequest with kube's text.
    pub fn parse(s: &str) -> Result<FieldSelector, ApiError> {
        let mut parts = split_terms(s);
        parts.sort_unstable();
        let mut requirements = Vec::new();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((lhs, op, rhs)) = split_term(part) else {
                return Err(ApiError::bad_request(format!("invalid selector: '{s}'; can't understand '{part}'")));
            };
            let value = unescape_value(rhs).map_err(ApiError::bad_request)?;
            requirements.push(FieldRequirement { field: lhs.to_string(), op, value });
        }
        Ok(FieldSelector { requirements })
    }

    /// The selector that matches everything.
    pub fn everything() -> FieldSelector {
        FieldSelector::default()
    }

    /// True when nothing is required: callers skip filtering.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The terms, sorted as kube sorts them (by their source text).
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// Rejects a field the kind cannot filter on, as kube's field-label conversion does.
    pub fn check_supported(&self, supported: &[&str]) -> Result<(), ApiError> {
        match self.requirements.iter().find(|r| !supported.contains(&r.field.as_str())) {
            Some(r) => Err(ApiError::bad_request(format!("field label not supported: {}", r.field))),
            None => Ok(()),
        }
    }

    /// Whether an object's selectable fields satisfy every term (missing fields read as "").
    pub fn matches(&self, fields: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(fields))
    }

    /// The value of `metadata.name=<x>` when that is the whole selector, so a watch or list
    /// can go straight to one key.
    pub fn single_name(&self) -> Option<&str> {
        match self.requirements.as_slice() {
            [r] if r.field == "metadata.name" && r.op == FieldOp::Equals => Some(&r.value),
            _ => None,
        }
    }

    /// The value an `=` term requires for `field`, if any (e.g. `spec.nodeName` for kubelets).
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.requirements.iter().find(|r| r.field == field && r.op == FieldOp::Equals).map(|r| r.value.as_str())
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// Escapes `\`, `,` and `=` in a value so it survives [`FieldSelector::parse`].
pub fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Splits on unescaped commas, keeping escapes in the terms.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// Splits at the first operator; the field part has no escaping.
fn split_term(term: &str) -> Option<(&str, FieldOp, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, kind) in [("!=", FieldOp::NotEquals), ("==", FieldOp::Equals), ("=", FieldOp::Equals)] {
            if let Some(rhs) = rest.strip_prefix(op) {
                return Some((&term[..i], kind, rhs));
            }
        }
    }
    None
}

fn unescape_value(s: &str) -> Result<String, String> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                other => {
                    return Err(format!("invalid field selector: invalid escape sequence: \\{other}"));
                }
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            // kube prints the rune with %v, i.e. as its code point number.
            ',' | '=' => return Err(format!("invalid field selector: unescaped character in value: {}", c as u32)),
            other => out.push(other),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn parse(s: &str) -> FieldSelector {
        FieldSelector::parse(s).unwrap_or_else(|e| panic!("{s:?}: {}", e.message))
    }

    #[test]
    fn parses_and_matches() {
        let s = parse("status.phase!=Running,spec.nodeName==node-1");
        assert_eq!(s.requirements().len(), 2);
        assert_eq!(s.to_string(), "spec.nodeName=node-1,status.phase!=Running");
        assert!(s.matches(&fields(&[("spec.nodeName", "node-1"), ("status.phase", "Pending")])));
        assert!(!s.matches(&fields(&[("spec.nodeName", "node-1"), ("status.phase", "Running")])));
        assert!(!s.matches(&fields(&[])));
        assert!(parse("spec.nodeName=").matches(&fields(&[])));
    }

    #[test]
    fn empty_and_single_name() {
        assert!(parse("").is_empty());
        assert!(parse(",").is_empty());
        assert!(FieldSelector::everything().matches(&fields(&[])));
        assert_eq!(parse("metadata.name=web").single_name(), Some("web"));
        assert_eq!(parse("metadata.name!=web").single_name(), None);
        assert_eq!(parse("metadata.name=web,metadata.namespace=d").single_name(), None);
    }

    #[test]
    fn escapes() {
        let s = parse(r"metadata.name=a\,b\=c\\d");
        assert_eq!(s.requirements()[0].value, r"a,b=c\d");
        assert_eq!(s.to_string(), r"metadata.name=a\,b\=c\\d");
        assert_eq!(
            FieldSelector::parse(r"a=b\x").map_err(|e| e.message).err().as_deref(),
            Some(r"invalid field selector: invalid escape sequence: \x")
        );
        assert_eq!(
            FieldSelector::parse("a=b=c").map_err(|e| e.message).err().as_deref(),
            Some("invalid field selector: unescaped character in value: 61")
        );
        assert_eq!(
            FieldSelector::parse("a=b\\").map_err(|e| e.message).err().as_deref(),
            Some("invalid field selector: invalid escape sequence: \\")
        );
    }

    #[test]
    fn bad_terms() {
        let e = FieldSelector::parse("a=b,nonsense").err().map(|e| (e.code, e.message));
        assert_eq!(e, Some((400, "invalid selector: 'a=b,nonsense'; can't understand 'nonsense'".to_string())));
    }

    #[test]
    fn supported_fields() {
        let s = parse("spec.foo=x");
        let e = s.check_supported(&["metadata.name"]).err().map(|e| (e.code, e.message));
        assert_eq!(e, Some((400, "field label not supported: spec.foo".to_string())));
        assert!(s.check_supported(&["metadata.name", "spec.foo"]).is_ok());
        assert_eq!(parse("spec.foo=x,spec.bar!=y").requires_exact_match("spec.foo"), Some("x"));
    }
}
