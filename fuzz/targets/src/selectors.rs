//! `?labelSelector=` and `?fieldSelector=`.

use std::collections::BTreeMap;

use kapi_apimachinery::fields::{FieldOp, FieldRequirement, FieldSelector};
use kapi_apimachinery::labels::LabelSelector;
use serde_json::{Map, Value};

/// A label selector. Asserts: a parsed selector prints to text that parses back to the same
/// requirements (keys, operators, values as sets) and prints the same again, and both forms
/// match the same label sets.
pub fn label_selector(data: &[u8]) {
    let Some(text) = crate::text(data) else { return };
    let Ok(selector) = LabelSelector::parse(text) else { return };
    let printed = selector.to_string();
    let again = match LabelSelector::parse(&printed) {
        Ok(s) => s,
        Err(e) => panic!("printed selector {printed:?} (from {text:?}) does not parse: {}", e.message),
    };
    assert_eq!(canonical(&again), canonical(&selector), "{text:?} printed as {printed:?}");
    assert_eq!(again.to_string(), printed, "printing is not stable");
    for labels in label_sets(&selector) {
        assert_eq!(selector.matches(Some(&labels)), again.matches(Some(&labels)), "{text:?} vs {printed:?} on {labels:?}");
    }
}

/// Requirements with their values sorted: the selector's meaning, whatever the spelling.
fn canonical(s: &LabelSelector) -> Vec<(String, String, Vec<String>)> {
    s.requirements()
        .iter()
        .map(|r| {
            let mut values = r.values().to_vec();
            values.sort();
            (r.key().to_owned(), format!("{:?}", r.operator()), values)
        })
        .collect()
}

/// Label sets built from the selector's own keys and values, plus the empty set.
fn label_sets(s: &LabelSelector) -> Vec<Map<String, Value>> {
    let mut sets = vec![Map::new()];
    let mut first = Map::new();
    let mut last = Map::new();
    for r in s.requirements() {
        if let (Some(a), Some(b)) = (r.values().first(), r.values().last()) {
            first.insert(r.key().to_owned(), Value::String(a.clone()));
            last.insert(r.key().to_owned(), Value::String(b.clone()));
        } else {
            first.insert(r.key().to_owned(), Value::String(String::new()));
        }
    }
    sets.push(first);
    sets.push(last);
    sets
}

/// A field selector. Asserts: a parsed selector prints (values escaped) to text that parses
/// back to the same terms, and both match the same field sets.
pub fn field_selector(data: &[u8]) {
    let Some(text) = crate::text(data) else { return };
    let Ok(selector) = FieldSelector::parse(text) else { return };
    let printed = selector.to_string();
    let again = match FieldSelector::parse(&printed) {
        Ok(s) => s,
        Err(e) => panic!("printed selector {printed:?} (from {text:?}) does not parse: {}", e.message),
    };
    let mut want = selector.requirements().to_vec();
    let mut got = again.requirements().to_vec();
    let key = |r: &FieldRequirement| (r.field.clone(), r.value.clone(), r.op == FieldOp::Equals);
    want.sort_by_key(key);
    got.sort_by_key(key);
    assert_eq!(got, want, "{text:?} printed as {printed:?}");
    let fields: BTreeMap<String, String> = selector.requirements().iter().map(|r| (r.field.clone(), r.value.clone())).collect();
    for set in [BTreeMap::new(), fields] {
        assert_eq!(selector.matches(&set), again.matches(&set), "{text:?} vs {printed:?} on {set:?}");
    }
}
