//! Server-side transformations of resource responses: `Table` for kubectl's printing and
//! `PartialObjectMetadata` for metadata-only informers.

use serde_json::{json, Map, Value};

/// Strips an object to `PartialObjectMetadata`.
pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A `PartialObjectMetadataList` from list items and list metadata.
pub fn partial_metadata_list<'a>(items: impl Iterator<Item = &'a Value>, list_meta: Value) -> Value {
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "items": items.map(partial_metadata).collect::<Vec<_>>(),
    })
}

/// How much of each object a Table row carries (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// `PartialObjectMetadata` (the default).
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter.
    pub fn parse(v: Option<&str>) -> Result<Self, String> {
        match v {
            None | Some("") | Some("Metadata") => Ok(Self::Metadata),
            Some("None") => Ok(Self::None),
            Some("Object") => Ok(Self::Object),
            Some(other) => Err(format!("unsupported includeObject value: {other:?}")),
        }
    }
}

/// A `meta.k8s.io/v1` Table: `columns` (empty after a watch's first event) and one row of
/// `cells` per object, with the object as `include` asks.
pub fn table(
    columns: Vec<Value>,
    cells: impl Fn(&Value) -> Vec<Value>,
    items: &mut dyn Iterator<Item = &Value>,
    list_meta: Value,
    include: IncludeObject,
) -> Value {
    let rows: Vec<Value> = items
        .map(|obj| {
            let mut row = Map::new();
            row.insert("cells".into(), Value::Array(cells(obj)));
            let object = match include {
                IncludeObject::None => Value::Null,
                IncludeObject::Metadata => partial_metadata(obj),
                IncludeObject::Object => obj.clone(),
            };
            row.insert("object".into(), object);
            Value::Object(row)
        })
        .collect();
    let mut t = json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta});
    t["columnDefinitions"] = Value::Array(columns);
    t["rows"] = Value::Array(rows);
    t
}
