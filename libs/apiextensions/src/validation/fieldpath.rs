//! kube's `cel.ValidFieldPath`: a path such as `.spec.replicas` or `.spec['a.b']` resolved
//! against a schema, used for `x-kubernetes-validations[].fieldPath` and `selectableFields`.

use serde_json::Value;

use super::schema_walk::{or_bool, properties_map};

/// The resolved path: its first element (kube's `Path.Root()`) and its rendering.
#[derive(Debug, Default)]
pub(crate) struct FoundPath {
    pub root: String,
    pub rendered: String,
}

/// Splits like kube's scanner: `.`, `[`, `]` alone, single-quoted strings whole, text between.
fn tokens(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut start = 0;
    while start < b.len() {
        if b[start] == b'\'' {
            let mut end = b.len();
            let mut i = start + 1;
            while i < b.len() {
                if b[i] == b'\'' && b[i - 1] != b'\\' {
                    end = i + 1;
                    break;
                }
                i += 1;
            }
            out.push(&s[start..end]);
            start = end;
            continue;
        }
        if matches!(b[start], b'.' | b'[' | b']') {
            out.push(&s[start..start + 1]);
            start += 1;
            continue;
        }
        let end = b[start..].iter().position(|c| matches!(c, b'.' | b'[' | b']')).map_or(b.len(), |p| start + p);
        out.push(&s[start..end]);
        start = end;
    }
    out
}

fn unescape_single_quote(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(d) = chars.next() else {
            out.push(c);
            break;
        };
        out.push(match d {
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            '\'' => '\'',
            '\\' => '\\',
            other => return Err(format!("invalid escape char \\{other}")),
        });
    }
    Ok(out)
}

/// Resolves `json_path` in `schema`; the error strings are kube's.
pub(crate) fn valid_field_path<'a>(
    json_path: &str,
    schema: Option<&'a Value>,
    allow_array_notation: bool,
) -> Result<(FoundPath, Option<&'a Value>), String> {
    let mut found = FoundPath::default();
    let mut schema = schema;
    let toks = tokens(json_path);
    let mut it = toks.into_iter();
    let not_valid = || "does not refer to a valid field".to_string();
    while let Some(tok) = it.next() {
        let name = match tok {
            "[" => {
                if !allow_array_notation {
                    return Err("array notation is not allowed".into());
                }
                let t = it.next().ok_or("unexpected end of JSON path")?;
                if t.len() < 2 || !t.starts_with('\'') || !t.ends_with('\'') {
                    return Err(format!("expected single quoted string but got {t}"));
                }
                let name =
                    unescape_single_quote(&t[1..t.len() - 1]).map_err(|e| format!("invalid string literal: {e}"))?;
                let close = it.next().ok_or("unexpected end of JSON path")?;
                if close != "]" {
                    return Err(format!("expected ] but got {close}"));
                }
                name
            }
            "." => it.next().ok_or("unexpected end of JSON path")?.to_string(),
            other => return Err(format!("expected [ or . but got: {other}")),
        };
        let s = schema.ok_or_else(not_valid)?;
        if properties_map(s).is_some() {
            schema = Some(properties_map(s).and_then(|p| p.get(&name)).ok_or_else(not_valid)?);
            if found.rendered.is_empty() {
                found.root = name.clone();
                found.rendered = name;
            } else {
                found.rendered = format!("{}.{name}", found.rendered);
            }
        } else if let Some(ap) = or_bool(s, "additionalProperties") {
            schema = ap.schema();
            found.rendered = format!("{}[{name}]", found.rendered);
            if found.root.is_empty() {
                found.root = found.rendered.clone();
            }
        } else {
            return Err(not_valid());
        }
    }
    Ok((found, schema))
}
