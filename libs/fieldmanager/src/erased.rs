//! One schema type for every schema source. [`TypeSchema`] is generic (`Sized + Clone`), so a
//! request scope cannot hand out "some schema" directly: built-in kinds walk `kapi-openapi`'s
//! definitions, custom resources their CRD's structural schema. [`ApplySchema`] erases the
//! source at the level of the two operations the handlers need, not per node: the walks stay
//! monomorphized over the concrete node type, so the erasure costs one allocation and one
//! indirect call per request, whatever the object's size.

use std::fmt;
use std::sync::Arc;

use kapi_apimachinery::ApiError;
use serde_json::Value;

use crate::manager::{self, Writer};
use crate::schema::{Shape, TypeSchema};

/// The operations of [`crate::manager`] over a fixed schema root (object-safe).
trait Operations: Send + Sync {
    fn apply(&self, live: Option<&Value>, config: &Value, writer: &Writer, force: bool) -> Result<Value, ApiError>;
    fn track_update(&self, old: Option<&Value>, new: &mut Value, writer: &Writer);
    fn shape(&self) -> Shape;
}

impl<S: TypeSchema + Send + Sync> Operations for S {
    fn apply(&self, live: Option<&Value>, config: &Value, writer: &Writer, force: bool) -> Result<Value, ApiError> {
        manager::apply(live, config, self, writer, force)
    }

    fn track_update(&self, old: Option<&Value>, new: &mut Value, writer: &Writer) {
        manager::track_update(old, new, self, writer);
    }

    fn shape(&self) -> Shape {
        TypeSchema::shape(self)
    }
}

/// The root of a kind's schema, whatever it was built from: what a request scope returns and
/// the apply handler uses. Borrows from the scope (`'a`) so that custom resources need not copy
/// their schema per request.
#[derive(Clone)]
pub struct ApplySchema<'a>(Arc<dyn Operations + 'a>);

impl<'a> ApplySchema<'a> {
    /// Wraps the root node of a kind's schema.
    pub fn new<S: TypeSchema + Send + Sync + 'a>(root: S) -> Self {
        ApplySchema(Arc::new(root))
    }

    /// Server-side apply ([`manager::apply`]) with this schema.
    pub fn apply(&self, live: Option<&Value>, config: &Value, writer: &Writer, force: bool) -> Result<Value, ApiError> {
        self.0.apply(live, config, writer, force)
    }

    /// Records an Update-operation write ([`manager::track_update`]) with this schema.
    pub fn track_update(&self, old: Option<&Value>, new: &mut Value, writer: &Writer) {
        self.0.track_update(old, new, writer);
    }

    /// The root's shape (an object for every kind; tests and diagnostics).
    pub fn shape(&self) -> Shape {
        self.0.shape()
    }
}

impl fmt::Debug for ApplySchema<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ApplySchema").field(&self.0.shape()).finish()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::Deduced;

    fn writer(manager: &str) -> Writer {
        Writer {
            manager: manager.into(),
            api_version: "example.com/v1".into(),
            subresource: String::new(),
            reset: crate::FieldSet::new(),
            now: "2026-01-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn erased_schema_applies_and_tracks_like_the_generic_functions() {
        let schema = ApplySchema::new(Deduced);
        assert_eq!(schema.shape(), Shape::Untyped);
        let config = json!({"apiVersion": "example.com/v1", "kind": "W", "metadata": {"name": "w"}, "spec": {"a": 1, "l": [1, 2]}});
        let applied = schema.apply(None, &config, &writer("tool"), false).expect("apply");
        let generic = manager::apply(None, &config, &Deduced, &writer("tool"), false).expect("apply");
        assert_eq!(applied, generic);
        assert_eq!(
            applied["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:spec": {".": {}, "f:a": {}, "f:l": {}}})
        );
        let mut updated = applied.clone();
        updated["spec"]["b"] = json!(true);
        schema.track_update(Some(&applied), &mut updated, &writer("editor"));
        let editor =
            updated["metadata"]["managedFields"].as_array().and_then(|m| m.iter().find(|e| e["manager"] == "editor"));
        assert_eq!(editor.map(|e| e["fieldsV1"].clone()), Some(json!({"f:spec": {"f:b": {}}})));
    }
}
