//! Defaulting of custom resources (kube's `schema/defaulting.Default`).
//!
//! Defaults apply on decode, top-down: a missing property gets its `default`, then its own
//! children are defaulted (so defaults inside defaults apply too). A null that the schema does
//! not allow (not `nullable`) is replaced by the default as well; in `additionalProperties` and
//! `items` only such nulls are defaulted, since there is no "missing" entry there.

use serde_json::Value;

use super::node::Schema;

fn non_nullable_null(v: &Value, s: Option<&Schema>) -> bool {
    v.is_null() && s.is_some_and(|s| !s.nullable)
}

/// Applies the defaults of `s` to `x`, in place.
pub(crate) fn apply(x: &mut Value, s: Option<&Schema>) {
    let Some(s) = s else { return };
    match x {
        Value::Object(m) => {
            for (k, prop) in &s.properties {
                let Some(default) = &prop.default else {
                    continue;
                };
                let missing_or_null = match m.get(k) {
                    None => true,
                    Some(v) => non_nullable_null(v, Some(prop)),
                };
                if missing_or_null {
                    m.insert(k.clone(), default.clone());
                }
            }
            let ap = s.additional_properties_schema();
            for (k, v) in m.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    apply(v, Some(prop));
                } else if s.additional_properties.is_some() {
                    if non_nullable_null(v, ap) {
                        if let Some(d) = ap.and_then(|a| a.default.as_ref()) {
                            *v = d.clone();
                        }
                    }
                    apply(v, ap);
                }
            }
        }
        Value::Array(items) => {
            let item_schema = s.items.as_deref();
            for v in items.iter_mut() {
                if non_nullable_null(v, item_schema) {
                    if let Some(d) = item_schema.and_then(|i| i.default.as_ref()) {
                        *v = d.clone();
                    }
                }
                apply(v, item_schema);
            }
        }
        _ => {}
    }
}

/// Whether any default of `s` appears anywhere in it (else reads never need defaulting).
pub(crate) fn schema_has_defaults(s: &Schema) -> bool {
    s.default.is_some()
        || s.properties.values().any(schema_has_defaults)
        || s.items.as_deref().is_some_and(schema_has_defaults)
        || s.additional_properties_schema().is_some_and(schema_has_defaults)
}

/// Whether [`apply`] would change `x`: a read-only walk, so that objects stored with their
/// defaults already are answered without a copy.
pub(crate) fn needed(x: &Value, s: Option<&Schema>) -> bool {
    let Some(s) = s else { return false };
    match x {
        Value::Object(m) => {
            let missing = s.properties.iter().any(|(k, prop)| {
                prop.default.is_some()
                    && match m.get(k) {
                        None => true,
                        Some(v) => non_nullable_null(v, Some(prop)),
                    }
            });
            if missing {
                return true;
            }
            let ap = s.additional_properties_schema();
            m.iter().any(|(k, v)| match s.properties.get(k) {
                Some(prop) => needed(v, Some(prop)),
                None if s.additional_properties.is_some() => {
                    (non_nullable_null(v, ap) && ap.is_some_and(|a| a.default.is_some())) || needed(v, ap)
                }
                None => false,
            })
        }
        Value::Array(items) => {
            let item_schema = s.items.as_deref();
            items.iter().any(|v| {
                (non_nullable_null(v, item_schema) && item_schema.is_some_and(|i| i.default.is_some())) || needed(v, item_schema)
            })
        }
        _ => false,
    }
}
