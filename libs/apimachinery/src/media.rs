//! `Accept` and `Content-Type` parsing for content negotiation.
//!
//! Kubernetes clients ask for JSON, YAML, protobuf and Table/PartialObjectMetadata renderings
//! through media-type parameters (`application/json;as=Table;v=v1;g=meta.k8s.io`), so the
//! parameters are kept in order and their values keep their case.

/// One media range of an `Accept` header, or a parsed `Content-Type`.
#[derive(Debug, Clone, PartialEq)]
pub struct MediaRange {
    /// Lowercased type (`application`, `*`).
    pub type_: String,
    /// Lowercased subtype (`json`, `*`).
    pub subtype: String,
    /// Parameters other than `q`, names lowercased, values unquoted and case preserved.
    pub params: Vec<(String, String)>,
    /// Quality, 0.0 to 1.0 (1.0 when absent).
    pub q: f32,
}

impl MediaRange {
    /// `type/subtype` without parameters.
    pub fn essence(&self) -> String {
        format!("{}/{}", self.type_, self.subtype)
    }

    /// A parameter's value by (case-insensitive) name.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Whether this range accepts the concrete `type/subtype` (wildcards honoured).
    pub fn matches(&self, type_: &str, subtype: &str) -> bool {
        (self.type_ == "*" || self.type_.eq_ignore_ascii_case(type_))
            && (self.subtype == "*" || self.subtype.eq_ignore_ascii_case(subtype))
    }

    fn specificity(&self) -> u8 {
        match (self.type_.as_str(), self.subtype.as_str()) {
            ("*", _) => 0,
            (_, "*") => 1,
            _ => 2,
        }
    }
}

/// Splits on `sep` outside double quotes.
fn split_unquoted(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if c == sep && !quoted {
            out.push(&s[start..i]);
            start = i + c.len_utf8();
        }
    }
    out.push(&s[start..]);
    out
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    match v.strip_prefix('"').and_then(|x| x.strip_suffix('"')) {
        Some(inner) => {
            let mut out = String::with_capacity(inner.len());
            let mut escaped = false;
            for c in inner.chars() {
                if escaped || c != '\\' {
                    out.push(c);
                    escaped = false;
                } else {
                    escaped = true;
                }
            }
            out
        }
        None => v.to_string(),
    }
}

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses one `type/subtype;k=v;...` element; `None` when it is not a media range.
fn parse_one(s: &str) -> Option<MediaRange> {
    let mut parts = split_unquoted(s, ';').into_iter();
    let essence = parts.next()?.trim();
    let (t, st) = essence.split_once('/')?;
    let (t, st) = (t.trim(), st.trim());
    if !is_token(t) || !is_token(st) || (t == "*" && st != "*") {
        return None;
    }
    let mut params = Vec::new();
    let mut q = 1.0f32;
    for p in parts {
        let p = p.trim();
        if p.is_empty() {
            continue;
        }
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        let k = k.trim().to_ascii_lowercase();
        let v = unquote(v);
        if k == "q" {
            q = v.parse::<f32>().ok().filter(|q| q.is_finite()).unwrap_or(1.0).clamp(0.0, 1.0);
        } else {
            params.push((k, v));
        }
    }
    Some(MediaRange { type_: t.to_ascii_lowercase(), subtype: st.to_ascii_lowercase(), params, q })
}

/// Parses an `Accept` header into ranges, most preferred first: by `q`, then concrete types
/// before `type/*` before `*/*`, then header order. Malformed elements and `q=0` (explicitly
/// unacceptable) ranges are dropped; an empty header yields no ranges (callers treat that as
/// "anything").
pub fn parse_accept(h: &str) -> Vec<MediaRange> {
    let mut ranges: Vec<MediaRange> =
        split_unquoted(h, ',').into_iter().filter_map(parse_one).filter(|r| r.q > 0.0).collect();
    ranges.sort_by(|a, b| b.q.total_cmp(&a.q).then(b.specificity().cmp(&a.specificity())));
    ranges
}

/// Parses a `Content-Type`; `None` when it is absent or not `type/subtype`. Wildcards are not
/// content types and are refused.
pub fn parse_content_type(h: &str) -> Option<MediaRange> {
    parse_one(h).filter(|r| r.type_ != "*" && r.subtype != "*")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_table_accept() {
        let r = parse_accept("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json");
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].essence(), "application/json");
        assert_eq!(r[0].param("as"), Some("Table"));
        assert_eq!(r[0].param("v"), Some("v1"));
        assert_eq!(r[1].param("v"), Some("v1beta1"));
        assert!(r[2].params.is_empty());
    }

    #[test]
    fn q_values_and_wildcards_order() {
        let r = parse_accept("*/*;q=0.8, application/yaml;q=0.9, text/*, application/json, application/xml;q=0");
        let order: Vec<String> = r.iter().map(MediaRange::essence).collect();
        assert_eq!(order, vec!["application/json", "text/*", "application/yaml", "*/*"]);
        assert!((r[3].q - 0.8).abs() < 1e-6);
        assert!(r[1].matches("text", "plain"));
        assert!(r[3].matches("application", "vnd.kubernetes.protobuf"));
        assert!(!r[0].matches("application", "yaml"));
    }

    #[test]
    fn malformed_elements_are_skipped() {
        let r = parse_accept("garbage, , application/JSON ; Charset=\"utf-8\" , */json");
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].essence(), "application/json");
        assert_eq!(r[0].params, vec![("charset".to_string(), "utf-8".to_string())]);
        assert!(parse_accept("").is_empty());
    }

    #[test]
    fn content_types() {
        let c = parse_content_type("application/merge-patch+json; charset=utf-8");
        assert_eq!(c.as_ref().map(MediaRange::essence).as_deref(), Some("application/merge-patch+json"));
        assert_eq!(c.as_ref().and_then(|c| c.param("charset")), Some("utf-8"));
        assert!(parse_content_type("application/*").is_none());
        assert!(parse_content_type("json").is_none());
        assert!(parse_content_type("").is_none());
    }
}
