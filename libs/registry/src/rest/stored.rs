//! Objects as the store keeps them: JSON without `metadata.resourceVersion` (the store's
//! revision of the last write, filled in on the way out) and without `selfLink`.

use bytes::Bytes;
use kapi_apimachinery::{ApiError, Result};
use kapi_storage::{KeyValue, Revision};
use serde_json::{Map, Value};

/// Reads a stored value into the object clients see.
pub fn decode_stored(kv: &KeyValue) -> Result<Value> {
    let mut obj: Value = serde_json::from_slice(&kv.value)
        .map_err(|e| ApiError::internal(format!("stored object {} is not JSON: {e}", kv.key)))?;
    set_resource_version(&mut obj, kv.mod_revision);
    Ok(obj)
}

pub(super) fn set_resource_version(obj: &mut Value, rev: Revision) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rev.to_string()));
    }
}

pub(super) fn encode_for_storage(obj: &Value) -> Result<Bytes> {
    serde_json::to_vec(&StorageForm(obj)).map(Bytes::from).map_err(ApiError::internal)
}

/// Fields of `metadata` the store does not keep: the revision is the store's own, and
/// `selfLink` is gone from the API.
const NOT_STORED_META: [&str; 2] = ["resourceVersion", "selfLink"];

/// An object as it is stored: serialized in place, without the fields of
/// [`NOT_STORED_META`], so that a write does not copy the whole object to drop two fields.
struct StorageForm<'a>(&'a Value);

impl serde::Serialize for StorageForm<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Value::Object(map) = self.0 else { return self.0.serialize(serializer) };
        let mut out = serializer.serialize_map(Some(map.len()))?;
        for (key, value) in map {
            match value {
                Value::Object(meta) if key == "metadata" => {
                    out.serialize_entry(key, &StoredMeta(meta))?;
                }
                _ => out.serialize_entry(key, value)?,
            }
        }
        out.end()
    }
}

/// `metadata` without the fields of [`NOT_STORED_META`].
struct StoredMeta<'a>(&'a Map<String, Value>);

impl serde::Serialize for StoredMeta<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().filter(|(k, _)| !NOT_STORED_META.contains(&k.as_str())))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn stored_form_drops_only_the_revision_and_self_link() {
        let obj = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "12", "selfLink": "/x", "labels": {"resourceVersion": "kept"}},
            "data": {"resourceVersion": "kept", "selfLink": "kept"},
        });
        let stored = encode_for_storage(&obj).expect("encodes");
        let mut expected = obj.clone();
        let meta = expected["metadata"].as_object_mut().expect("metadata");
        meta.remove("resourceVersion");
        meta.remove("selfLink");
        assert_eq!(stored, serde_json::to_vec(&expected).expect("encodes"));
        let scalar = encode_for_storage(&json!("x")).expect("encodes");
        assert_eq!(&scalar[..], b"\"x\"");
    }
}
