//! kube-apiserver's texts for field problems.

use crate::FieldProblems;

fn strict_items(problems: &FieldProblems) -> Vec<String> {
    // Where kube's decoder meets each field: an unknown field at its first occurrence, a
    // duplicate at its second; without a recorded order, unknown fields come first.
    let position = |path: &str, occurrence: usize| {
        problems.key_order.iter().enumerate().filter(|(_, p)| *p == path).nth(occurrence).map_or(usize::MAX, |(i, _)| i)
    };
    let mut items: Vec<(usize, String)> = problems
        .unknown
        .iter()
        .map(|path| (position(path, 0), format!("unknown field {}", go_quote(path))))
        .chain(problems.duplicate.iter().map(|path| (position(path, 1), format!("duplicate field {}", go_quote(path)))))
        .collect();
    items.sort_by_key(|(at, _)| *at);
    items.into_iter().map(|(_, item)| item).collect()
}

/// The message of the 400 BadRequest kube returns under `fieldValidation=Strict`:
/// `strict decoding error: unknown field "spec.foo", duplicate field "spec.replicas"`.
/// None when there are no unknown or duplicate fields. Type errors are not included: kube
/// fails on those in every mode (see [`first_type_error`]).
pub fn strict_message(problems: &FieldProblems) -> Option<String> {
    let items = strict_items(problems);
    if items.is_empty() {
        None
    } else {
        Some(format!("strict decoding error: {}", items.join(", ")))
    }
}

/// One warning text per problem for `fieldValidation=Warn` (the default), e.g.
/// `unknown field "spec.foo"`. The caller sends each as `Warning: 299 - "<text>"`, escaping
/// quotes as HTTP quoted-strings require.
pub fn warnings(problems: &FieldProblems) -> Vec<String> {
    strict_items(problems)
}

/// The type error kube reports (the first one met while decoding), if any.
pub fn first_type_error(problems: &FieldProblems) -> Option<&str> {
    problems
        .type_errors
        .first()
        .map(|(_, message)| message.as_str())
}

/// kube's wrapping of a decode failure into a 400 message:
/// `Deployment in version "v1" cannot be handled as a Deployment: <detail>`.
pub fn decode_error_message(kind: &str, version: &str, detail: &str) -> String {
    format!(
        "{kind} in version {} cannot be handled as a {kind}: {detail}",
        go_quote(version)
    )
}

/// Go's `%q` for the printable strings field paths are.
fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_texts() {
        let p = FieldProblems {
            unknown: vec!["spec.foo".into(), "spec.bar".into()],
            duplicate: vec!["spec.replicas".into()],
            type_errors: vec![],
            unstructured_errors: vec![],
            key_order: vec![],
        };
        assert_eq!(
            strict_message(&p).as_deref(),
            Some(
                r#"strict decoding error: unknown field "spec.foo", unknown field "spec.bar", duplicate field "spec.replicas""#
            )
        );
        assert_eq!(
            warnings(&p),
            vec![
                r#"unknown field "spec.foo""#,
                r#"unknown field "spec.bar""#,
                r#"duplicate field "spec.replicas""#
            ]
        );
        assert_eq!(strict_message(&FieldProblems::default()), None);
        // With the body's key order, the decoder's order: a duplicate met before an unknown
        // field comes first.
        let ordered = FieldProblems {
            unknown: vec!["bogus".into()],
            duplicate: vec!["data.k".into()],
            key_order: ["apiVersion", "data", "data.k", "data.k", "bogus"].map(String::from).to_vec(),
            ..FieldProblems::default()
        };
        assert_eq!(strict_message(&ordered).as_deref(), Some(r#"strict decoding error: duplicate field "data.k", unknown field "bogus""#));
        assert_eq!(
            decode_error_message("Deployment", "v1", "x"),
            r#"Deployment in version "v1" cannot be handled as a Deployment: x"#
        );
    }
}
