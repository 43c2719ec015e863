//! Duplicate object keys in a raw JSON body. serde_json silently keeps the last of two equal
//! keys, while kube's strict decoder reports `duplicate field "<path>"`, so this scans the bytes.

use std::collections::HashSet;

enum Frame {
    Object {
        path: String,
        keys: HashSet<String>,
        pending_key: Option<String>,
    },
    Array {
        path: String,
        index: usize,
    },
}

/// Paths (`spec.replicas`, `spec.containers[0].name`) of keys that occur twice in their object,
/// in document order, each once. Malformed input yields what was found before the fault.
pub(crate) fn find_duplicates(raw: &[u8]) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut reported: HashSet<String> = HashSet::new();
    scan_keys(raw, |path, repeated| {
        if repeated && reported.insert(path.to_owned()) {
            found.push(path.to_owned());
        }
    });
    found
}

/// The path of every key of `raw` in document order, a repeated key at each occurrence: where
/// kube's decoder, which reads the body once from the start, meets each field.
pub(crate) fn key_occurrences(raw: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    scan_keys(raw, |path, _| out.push(path.to_owned()));
    out
}

/// Calls `seen(path, repeated)` for each object key of `raw`, in document order.
fn scan_keys(raw: &[u8], mut seen: impl FnMut(&str, bool)) {
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'{' => {
                let path = value_path(&stack);
                stack.push(Frame::Object {
                    path,
                    keys: HashSet::new(),
                    pending_key: None,
                });
                i += 1;
            }
            b'[' => {
                let path = value_path(&stack);
                stack.push(Frame::Array { path, index: 0 });
                i += 1;
            }
            b'}' | b']' => {
                stack.pop();
                value_done(&mut stack);
                i += 1;
            }
            b',' => {
                if let Some(Frame::Array { index, .. }) = stack.last_mut() {
                    *index += 1;
                }
                i += 1;
            }
            b'"' => {
                let Some(end) = string_end(raw, i) else { break };
                let is_key = matches!(
                    stack.last(),
                    Some(Frame::Object {
                        pending_key: None,
                        ..
                    })
                );
                if is_key {
                    let key: String = serde_json::from_slice(&raw[i..end]).unwrap_or_default();
                    if let Some(Frame::Object {
                        path,
                        keys,
                        pending_key,
                    }) = stack.last_mut()
                    {
                        let repeated = !keys.insert(key.clone());
                        seen(&join(path, &key), repeated);
                        *pending_key = Some(key);
                    }
                } else {
                    value_done(&mut stack);
                }
                i = end;
            }
            b' ' | b'\t' | b'\n' | b'\r' | b':' => i += 1,
            _ => {
                // A literal: number, true, false, null.
                while i < raw.len()
                    && !matches!(raw[i], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
                {
                    i += 1;
                }
                value_done(&mut stack);
            }
        }
    }
}

/// Index just past the closing quote of the string starting at `start`.
fn string_end(raw: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < raw.len() {
        match raw[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

fn value_path(stack: &[Frame]) -> String {
    match stack.last() {
        None => String::new(),
        Some(Frame::Object {
            path, pending_key, ..
        }) => join(path, pending_key.as_deref().unwrap_or("")),
        Some(Frame::Array { path, index }) => format!("{path}[{index}]"),
    }
}

fn value_done(stack: &mut [Frame]) {
    if let Some(Frame::Object { pending_key, .. }) = stack.last_mut() {
        *pending_key = None;
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_nested_duplicates_with_paths() {
        let raw = br#"{"kind":"Deployment","spec":{"replicas":1,"replicas":2,
            "template":{"spec":{"containers":[{"name":"a"},{"name":"b","image":"x","name":"c"}]}}},
            "metadata":{"name":"n\"q","labels":{"a":"1","a":"2"}}, "kind": "X"}"#;
        assert_eq!(
            find_duplicates(raw),
            vec![
                "spec.replicas",
                "spec.template.spec.containers[1].name",
                "metadata.labels.a",
                "kind",
            ]
        );
    }

    #[test]
    fn occurrences_follow_the_document() {
        assert_eq!(key_occurrences(br#"{"a":{"b":1,"b":2},"c":[{"d":1}]}"#), vec!["a", "a.b", "a.b", "c", "c[0].d"]);
    }

    #[test]
    fn escaped_keys_are_decoded_and_clean_input_has_none() {
        assert_eq!(find_duplicates(br#"{"a\u0062":1,"ab":2}"#), vec!["ab"]);
        assert!(find_duplicates(br#"{"a":[1,{"a":2}],"b":{"a":3}}"#).is_empty());
        assert!(find_duplicates(br#"{"a":"unterminated"#).is_empty());
    }
}
