//! Correlation of an old and a new object for validation ratcheting (kube's
//! `CRDValidationRatcheting`, on by default since 1.30; `apiserver/pkg/cel/common.CorrelatedObject`).
//!
//! An update may keep a value that a newer schema rejects: errors on a node are dropped when
//! the node is unchanged. "Unchanged" follows kube exactly: object keys correlate through the
//! schema (a key with neither a property nor an `additionalProperties` schema never counts as
//! unchanged), `map` lists correlate items by their keys, other lists only compare as a whole.

use std::cell::OnceCell;
use std::collections::HashMap;

use serde_json::Value;

use super::node::Schema;
use crate::gofmt::{go_num, GoNum};

/// A composite key of a list-type map item, comparing like Go's interface values.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum KeyPart {
    Bool(bool),
    Int(i64),
    Float(u64),
    Str(String),
}

fn key_part(v: &Value) -> Option<KeyPart> {
    match v {
        Value::Bool(b) => Some(KeyPart::Bool(*b)),
        Value::Number(n) => Some(match go_num(n) {
            GoNum::Int(i) => KeyPart::Int(i),
            GoNum::Float(f) => KeyPart::Float(f.to_bits()),
        }),
        Value::String(s) => Some(KeyPart::Str(s.clone())),
        _ => None,
    }
}

/// The key of a list-map item, `None` when a key is missing or not a scalar.
fn map_key(item: &Value, keys: &[String]) -> Option<Vec<KeyPart>> {
    let obj = item.as_object()?;
    keys.iter().map(|k| obj.get(k).and_then(key_part)).collect()
}

/// One node of the correlation between the new object and the old one.
pub(crate) struct Corr<'a> {
    pub(crate) new: &'a Value,
    pub(crate) old: &'a Value,
    schema: &'a Schema,
    /// The old items of a list-type map, by key (first occurrence wins, as in kube).
    old_items: OnceCell<HashMap<Vec<KeyPart>, &'a Value>>,
}

impl<'a> Corr<'a> {
    pub(crate) fn new(new: &'a Value, old: &'a Value, schema: &'a Schema) -> Self {
        Corr {
            new,
            old,
            schema,
            old_items: OnceCell::new(),
        }
    }

    /// The correlated child at object key `field`, if both sides have it and the schema knows it.
    pub(crate) fn key(&self, field: &str) -> Option<Corr<'a>> {
        let new = self.new.as_object()?.get(field)?;
        let old = self.old.as_object()?.get(field)?;
        let schema = self.schema.child(field)?;
        Some(Corr::new(new, old, schema))
    }

    fn is_map_list(&self) -> bool {
        self.schema.x_kubernetes_list_type.as_deref() == Some("map")
    }

    /// The correlated child at index `i` of the new list: only list-type maps correlate.
    pub(crate) fn index(&self, i: usize) -> Option<Corr<'a>> {
        let new_item = self.new.as_array()?.get(i)?;
        let old_list = self.old.as_array()?;
        if !self.is_map_list() {
            return None;
        }
        let keys = &self.schema.x_kubernetes_list_map_keys;
        let index = self.old_items.get_or_init(|| {
            let mut m = HashMap::new();
            if self.schema.type_ == "array" && !keys.is_empty() {
                for item in old_list {
                    if let Some(k) = map_key(item, keys) {
                        m.entry(k).or_insert(item);
                    }
                }
            }
            m
        });
        let old_item = index.get(&map_key(new_item, keys)?)?;
        let items = self.schema.items.as_deref()?;
        Some(Corr::new(new_item, old_item, items))
    }

    /// kube's `CachedDeepEqual`: whether the node is unchanged, correlating through the schema.
    pub(crate) fn deep_equal(&self) -> bool {
        match (self.new, self.old) {
            (Value::Null, Value::Null) => true,
            (Value::Null, _) | (_, Value::Null) => false,
            (Value::Array(n), Value::Array(o)) => {
                if n.len() != o.len() {
                    return false;
                }
                for i in 0..n.len() {
                    match self.index(i) {
                        Some(child) if child.deep_equal() => {}
                        Some(_) => return false,
                        None => return !self.is_map_list() && n == o,
                    }
                }
                true
            }
            (Value::Object(n), Value::Object(o)) => {
                n.len() == o.len()
                    && n.keys()
                        .all(|k| self.key(k).is_some_and(|c| c.deep_equal()))
            }
            (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => {
                false
            }
            (n, o) => n == o,
        }
    }
}
