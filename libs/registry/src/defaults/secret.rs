//! Secret's `stringData`: kube's v1 -> internal conversion (`Convert_v1_Secret_To_core_Secret`)
//! writes every `stringData[k]` into `data[k]` as bytes, overriding `data[k]`; the internal type
//! has no `stringData`, so it is never stored or returned. kapi keeps objects in their v1 JSON
//! form, so the same merge runs on every write of a Secret, before validation.

use serde_json::{Map, Value};

/// Merges `stringData` into `data` (base64, overriding) and drops `stringData`.
pub fn merge_string_data(obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else { return };
    let Some(string_data) = map.remove("stringData") else { return };
    let Value::Object(string_data) = string_data else { return };
    if string_data.is_empty() {
        return;
    }
    if !map.get("data").is_some_and(Value::is_object) {
        map.insert("data".into(), Value::Object(Map::new()));
    }
    let Some(data) = map.get_mut("data").and_then(Value::as_object_mut) else { return };
    for (key, value) in string_data {
        // A non-string value would have failed the typed decode before this point; a null is
        // Go's empty string.
        let text = value.as_str().unwrap_or_default();
        data.insert(key, Value::String(base64(text.as_bytes())));
    }
}

/// Standard base64 with padding, as Go's `encoding/json` writes `[]byte`.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn base64_matches_go() {
        for (plain, encoded) in [("", ""), ("v", "dg=="), ("v1", "djE="), ("v12", "djEy"), ("hello world", "aGVsbG8gd29ybGQ=")] {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }

    #[test]
    fn string_data_overrides_data_and_disappears() {
        let mut s = json!({"data": {"k1": "djE=", "k2": ""}, "stringData": {"k2": "v2", "k3": "v3"}});
        merge_string_data(&mut s);
        assert_eq!(s, json!({"data": {"k1": "djE=", "k2": "djI=", "k3": "djM="}}));
        let mut only = json!({"stringData": {"a": "b"}});
        merge_string_data(&mut only);
        assert_eq!(only, json!({"data": {"a": "Yg=="}}));
        let mut empty = json!({"stringData": {}});
        merge_string_data(&mut empty);
        assert_eq!(empty, json!({}));
    }
}
