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
