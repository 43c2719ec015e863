//! ConfigMap and Secret validation: keys, sizes, Secret types, and immutability.

use kapi_apimachinery::validation::{max_len_error, regex_error};
use kapi_apimachinery::Cause;
use serde_json::Value;

use super::{immutable, str_at};

/// Total bytes of data a ConfigMap or Secret may hold (kube's `MaxSecretSize`/`MaxConfigMapSize`).
const MAX_DATA_SIZE: usize = 1024 * 1024;
const CONFIG_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_KEY_ERR: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";

/// kube's `IsConfigMapKey`.
fn config_key_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if key.len() > 253 {
        errs.push(max_len_error(253));
    }
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || "-._".contains(c)) {
        errs.push(regex_error(CONFIG_KEY_ERR, CONFIG_KEY_FMT, &["key.name", "KEY_NAME", "key-file.txt"]));
    }
    if key == "." {
        errs.push("must not be '.'".into());
    } else if key == ".." {
        errs.push("must not be '..'".into());
    } else if key.starts_with("..") {
        errs.push("must not start with '..'".into());
    }
    errs
}

fn validate_keys(obj: &Value, section: &str, causes: &mut Vec<Cause>) -> usize {
    let mut size = 0;
    if let Some(map) = obj.get(section).and_then(Value::as_object) {
        for (key, value) in map {
            let field = format!("{section}[{key}]");
            for msg in config_key_errors(key) {
                causes.push(Cause::invalid(&field, &Value::from(key.as_str()), &msg));
            }
            size += key.len() + value.as_str().map_or(0, str::len);
        }
    }
    size
}

pub(super) fn validate_config_map(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut size = validate_keys(obj, "data", &mut causes);
    size += validate_keys(obj, "binaryData", &mut causes);
    if let (Some(data), Some(binary)) =
        (obj.get("data").and_then(Value::as_object), obj.get("binaryData").and_then(Value::as_object))
    {
        for key in binary.keys().filter(|k| data.contains_key(*k)) {
            causes.push(Cause::invalid(
                &format!("data[{key}]"),
                &Value::from(key.as_str()),
                "duplicate of key present in binaryData",
            ));
        }
    }
    if size > MAX_DATA_SIZE {
        causes.push(Cause {
            reason: "FieldValueTooLong".into(),
            message: format!("data: Too long: must have at most {MAX_DATA_SIZE} bytes"),
            field: "data".into(),
        });
    }
    causes
}

/// Required keys per Secret type (kube's `ValidateSecret`).
const SECRET_REQUIRED_KEYS: &[(&str, &[&str])] = &[
    ("kubernetes.io/dockercfg", &[".dockercfg"]),
    ("kubernetes.io/dockerconfigjson", &[".dockerconfigjson"]),
    ("kubernetes.io/ssh-auth", &["ssh-privatekey"]),
    ("kubernetes.io/tls", &["tls.crt", "tls.key"]),
];

pub(super) fn validate_secret(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    validate_keys(obj, "data", &mut causes);
    let data = obj.get("data").and_then(Value::as_object);
    let mut decoded_size = 0;
    if let Some(data) = data {
        for (key, value) in data {
            match value {
                Value::String(s) => match decode_base64(s) {
                    Ok(n) => decoded_size += n,
                    Err(at) => causes.push(Cause::invalid(
                        &format!("data[{key}]"),
                        &Value::from("<value omitted>"),
                        &format!("illegal base64 data at input byte {at}"),
                    )),
                },
                Value::Null => {}
                other => causes.push(Cause::invalid(&format!("data[{key}]"), other, "must be a base64-encoded string")),
            }
        }
    }
    if decoded_size > MAX_DATA_SIZE {
        causes.push(Cause {
            reason: "FieldValueTooLong".into(),
            message: format!("data: Too long: must have at most {MAX_DATA_SIZE} bytes"),
            field: "data".into(),
        });
    }
    let has = |k: &str| {
        data.and_then(|d| d.get(k)).and_then(Value::as_str).is_some_and(|s| !s.is_empty())
            || obj.pointer("/stringData").and_then(|d| d.get(k)).and_then(Value::as_str).is_some_and(|s| !s.is_empty())
    };
    let secret_type = str_at(obj, "/type");
    if let Some((_, keys)) = SECRET_REQUIRED_KEYS.iter().find(|(t, _)| *t == secret_type) {
        for key in keys.iter().filter(|k| !has(k)) {
            causes.push(Cause::required(&format!("data[{key}]"), ""));
        }
    }
    match secret_type {
        "kubernetes.io/service-account-token"
            if str_at(obj, "/metadata/annotations/kubernetes.io~1service-account.name").is_empty() =>
        {
            causes.push(Cause::required("metadata.annotations[kubernetes.io/service-account.name]", ""));
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            causes.push(Cause::required("data[username]", ""));
            causes.push(Cause::required("data[password]", ""));
        }
        _ => {}
    }
    causes
}

/// Decoded length of standard, padded base64; the offending byte offset on error (as Go's
/// `base64.CorruptInputError` reports it).
fn decode_base64(s: &str) -> Result<usize, usize> {
    let bytes = s.as_bytes();
    let mut padding = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let ok = b.is_ascii_alphanumeric() || b == b'+' || b == b'/';
        if b == b'=' {
            padding += 1;
            if padding > 2 || i + 1 < bytes.len() && bytes[i + 1] != b'=' {
                return Err(i);
            }
        } else if !ok || padding > 0 {
            return Err(i);
        }
    }
    let tail = bytes.len() % 4;
    if tail > 0 {
        return Err(bytes.len() - tail);
    }
    Ok(bytes.len() / 4 * 3 - padding)
}

/// Immutable ConfigMaps and Secrets keep their data and stay immutable.
fn validate_immutable_data(new: &Value, old: &Value, sections: &[&str]) -> Vec<Cause> {
    let mut causes = Vec::new();
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return causes;
    }
    if new.get("immutable").and_then(Value::as_bool) != Some(true) {
        causes.push(Cause::forbidden("immutable", "field is immutable when `immutable` is set"));
    }
    for section in sections {
        let empty = |v: Option<&Value>| v.is_none_or(|v| v.is_null() || v.as_object().is_some_and(|m| m.is_empty()));
        let (n, o) = (new.get(*section), old.get(*section));
        if n != o && !(empty(n) && empty(o)) {
            causes.push(Cause::forbidden(section, "field is immutable when `immutable` is set"));
        }
    }
    causes
}

pub(super) fn validate_config_map_update(new: &Value, old: &Value) -> Vec<Cause> {
    validate_immutable_data(new, old, &["data", "binaryData"])
}

pub(super) fn validate_secret_update(new: &Value, old: &Value) -> Vec<Cause> {
    let mut causes = immutable(new, old, "/type", "type");
    causes.extend(validate_immutable_data(new, old, &["data"]));
    causes
}
