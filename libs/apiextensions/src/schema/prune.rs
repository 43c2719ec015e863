//! Pruning of unknown fields (kube's `schema/pruning`) and of nulls the schema does not allow
//! (kube's `PruneNonNullableNullsWithoutDefaults`).
//!
//! A structural schema is a closed world: fields it does not specify are dropped on decode,
//! unless `x-kubernetes-preserve-unknown-fields` keeps them. The dropped paths become
//! `unknown field "<path>"` warnings (or errors under `fieldValidation=Strict`).

use serde_json::Value;

use super::node::{AdditionalProperties, Schema};

fn is_meta_field(k: &str) -> bool {
    matches!(k, "apiVersion" | "kind" | "metadata")
}

/// The walk's state: the path of the current node and the pruned paths found so far.
pub(crate) struct Pruner {
    path: String,
    pub(crate) pruned: Vec<String>,
}

impl Pruner {
    pub(crate) fn new() -> Self {
        Pruner {
            path: String::new(),
            pruned: Vec::new(),
        }
    }

    fn record(&mut self, key: &str) {
        if self.path.is_empty() {
            self.pruned.push(key.to_string());
        } else {
            self.pruned.push(format!("{}.{key}", self.path));
        }
    }

    fn enter_key(&mut self, key: &str) -> usize {
        let len = self.path.len();
        if !self.path.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(key);
        len
    }

    fn enter_index(&mut self, i: usize) -> usize {
        let len = self.path.len();
        self.path.push_str(&format!("[{i}]"));
        len
    }

    /// Prunes `x` following `s`; `embedded` forces the embedded-resource rule (the root).
    pub(crate) fn prune(&mut self, x: &mut Value, s: Option<&Schema>, embedded: bool) {
        if let Some(s) = s.filter(|s| s.x_kubernetes_preserve_unknown_fields) {
            self.skip_prune(x, s, embedded || s.x_kubernetes_embedded_resource);
            return;
        }
        match x {
            Value::Object(m) => {
                let Some(s) = s else {
                    let mut keys: Vec<String> = m.keys().cloned().collect();
                    keys.sort();
                    for k in keys {
                        self.record(&k);
                    }
                    m.clear();
                    return;
                };
                let embedded = embedded || s.x_kubernetes_embedded_resource;
                let mut keys: Vec<String> = m.keys().cloned().collect();
                keys.sort();
                for k in keys {
                    if embedded && is_meta_field(&k) {
                        continue;
                    }
                    let child = if let Some(prop) = s.properties.get(&k) {
                        Some(Some(prop))
                    } else {
                        s.additional_properties.as_ref().map(|ap| match ap {
                            AdditionalProperties::Schema(sub) => Some(&**sub),
                            AdditionalProperties::Bool(_) => None,
                        })
                    };
                    match child {
                        Some(sub) => {
                            if let Some(v) = m.get_mut(&k) {
                                let len = self.enter_key(&k);
                                self.prune(v, sub, false);
                                self.path.truncate(len);
                            }
                        }
                        None => {
                            if !is_meta_field(&k) || !self.path.is_empty() {
                                self.record(&k);
                            }
                            m.shift_remove(&k);
                        }
                    }
                }
            }
            Value::Array(items) => {
                let item_schema = s.and_then(|s| s.items.as_deref());
                for (i, v) in items.iter_mut().enumerate() {
                    let len = self.enter_index(i);
                    self.prune(v, item_schema, false);
                    self.path.truncate(len);
                }
            }
            _ => {}
        }
    }

    fn skip_prune(&mut self, x: &mut Value, s: &Schema, embedded: bool) {
        match x {
            Value::Object(m) => {
                let mut keys: Vec<String> = m.keys().cloned().collect();
                keys.sort();
                for k in keys {
                    if embedded && is_meta_field(&k) {
                        continue;
                    }
                    let sub = if let Some(prop) = s.properties.get(&k) {
                        Some(prop)
                    } else if let Some(ap) = &s.additional_properties {
                        match ap {
                            AdditionalProperties::Schema(sub) => Some(&**sub),
                            AdditionalProperties::Bool(_) => {
                                // kube prunes the value against no schema at all.
                                if let Some(v) = m.get_mut(&k) {
                                    let len = self.enter_key(&k);
                                    self.prune(v, None, false);
                                    self.path.truncate(len);
                                }
                                continue;
                            }
                        }
                    } else {
                        continue;
                    };
                    if let (Some(sub), Some(v)) = (sub, m.get_mut(&k)) {
                        let len = self.enter_key(&k);
                        self.prune(v, Some(sub), false);
                        self.path.truncate(len);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = s.items.as_deref() {
                    for (i, v) in items.iter_mut().enumerate() {
                        let len = self.enter_index(i);
                        self.skip_prune(v, item_schema, item_schema.x_kubernetes_embedded_resource);
                        self.path.truncate(len);
                    }
                }
            }
            _ => {}
        }
    }
}

fn schema_for_field<'a>(k: &str, s: Option<&'a Schema>) -> Option<&'a Schema> {
    let s = s?;
    s.properties
        .get(k)
        .or_else(|| s.additional_properties_schema())
}

fn is_prunable_null(v: &Value, s: Option<&Schema>) -> bool {
    v.is_null() && s.is_some_and(|s| !s.nullable && s.default.is_none())
}

/// Removes null values the schema neither allows (`nullable`) nor defaults; nulls with a
/// default are left for defaulting to replace.
pub(crate) fn prune_non_nullable_nulls(x: &mut Value, s: Option<&Schema>) {
    match x {
        Value::Object(m) => {
            m.retain(|k, v| !is_prunable_null(v, schema_for_field(k, s)));
            for (k, v) in m.iter_mut() {
                prune_non_nullable_nulls(v, schema_for_field(k, s));
            }
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for v in items {
                prune_non_nullable_nulls(v, item_schema);
            }
        }
        _ => {}
    }
}
