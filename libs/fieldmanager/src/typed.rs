//! Walks over a value and its schema: the set of fields a value sets, the comparison of two
//! values, the apply merge, and removal of fields (structured-merge-diff's `typed` package).

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::fieldpath::{FieldSet, Path, PathElement};
use crate::schema::{effective_shape, ListType, Shape, TypeSchema};

/// Nesting beyond which values are treated as leaves (hostile bodies cannot recurse further).
const MAX_DEPTH: usize = 128;

/// A list element's path element, from its key fields (list maps) or value (sets).
pub(crate) fn element_of<S: TypeSchema>(list: &ListType, items: &S, item: &Value, index: usize) -> PathElement {
    match list {
        ListType::Map(keys) => {
            let pairs: Vec<(String, Value)> = keys
                .iter()
                .filter_map(|k| item.get(k).cloned().or_else(|| items.key_default(k)).map(|v| (k.clone(), v)))
                .collect();
            if pairs.is_empty() {
                PathElement::Index(index)
            } else {
                PathElement::key(&pairs)
            }
        }
        ListType::Set => PathElement::value(item),
        ListType::Atomic => PathElement::Index(index),
    }
}

/// The first element of an associative list in `value` that lacks one of the list's key fields
/// (and the schema gives that key no default), as SMD's conversion to a typed value reports it:
/// `.spec.containers: element 0: associative list with keys has an element that omits key
/// field "name" (and doesn't have default value)`. An apply configuration with such an element
/// cannot say which live element it means.
pub fn missing_list_key<S: TypeSchema>(value: &Value, schema: &S) -> Option<String> {
    missing_key_walk(value, schema, &Path::default(), 0)
}

fn missing_key_walk<S: TypeSchema>(value: &Value, schema: &S, path: &Path, depth: usize) -> Option<String> {
    if depth > MAX_DEPTH {
        return None;
    }
    match effective_shape(schema, Some(value)) {
        Shape::Struct { atomic: false } | Shape::Map { atomic: false } => {
            let Value::Object(fields) = value else { return None };
            fields.iter().find_map(|(k, v)| {
                let child = path.child(PathElement::Field(k.clone()));
                missing_key_walk(v, &schema.field(k).0, &child, depth + 1)
            })
        }
        Shape::List(list) => {
            let Value::Array(items) = value else { return None };
            let item_schema = schema.items();
            items.iter().enumerate().find_map(|(i, item)| {
                if let (ListType::Map(keys), Value::Object(fields)) = (&list, item) {
                    if let Some(key) = keys.iter().find(|k| !fields.contains_key(*k) && item_schema.key_default(k).is_none()) {
                        return Some(format!(
                            "{path}: element {i}: associative list with keys has an element that omits key field {key:?} (and doesn't have default value)"
                        ));
                    }
                }
                let child = path.child(element_of(&list, &item_schema, item, i));
                missing_key_walk(item, &item_schema, &child, depth + 1)
            })
        }
        _ => None,
    }
}

/// The fields `value` sets: every leaf, atomic node, list element, empty or null map entry and
/// map key (SMD's `ToFieldSet`).
pub fn to_field_set<S: TypeSchema>(value: &Value, schema: &S) -> FieldSet {
    let mut set = FieldSet::new();
    field_set_walk(value, schema, &Path::default(), &mut set, 0);
    set
}

fn field_set_walk<S: TypeSchema>(value: &Value, schema: &S, path: &Path, set: &mut FieldSet, depth: usize) {
    if depth > MAX_DEPTH {
        set.insert(path);
        return;
    }
    match effective_shape(schema, Some(value)) {
        Shape::Scalar | Shape::Struct { atomic: true } | Shape::Map { atomic: true } | Shape::List(ListType::Atomic) => {
            set.insert(path)
        }
        Shape::Untyped => set.insert(path),
        Shape::Struct { atomic: false } | Shape::Map { atomic: false } => {
            let Value::Object(fields) = value else {
                set.insert(path);
                return;
            };
            for (k, v) in fields {
                let (child_schema, declared) = schema.field(k);
                let child = path.child(PathElement::Field(k.clone()));
                field_set_walk(v, &child_schema, &child, set, depth + 1);
                let empty = v.is_null() || v.as_object().is_some_and(Map::is_empty);
                if empty || !declared {
                    set.insert(&child);
                }
            }
        }
        Shape::List(list) => {
            let Value::Array(items) = value else {
                set.insert(path);
                return;
            };
            let item_schema = schema.items();
            for (i, item) in items.iter().enumerate() {
                let child = path.child(element_of(&list, &item_schema, item, i));
                field_set_walk(item, &item_schema, &child, set, depth + 1);
                set.insert(&child);
            }
        }
    }
}

/// What changed between two values, path by path.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// Present in the new value only.
    pub added: FieldSet,
    /// Leaves present in both with different values.
    pub modified: FieldSet,
    /// Present in the old value only.
    pub removed: FieldSet,
}

impl Comparison {
    /// Drops the paths of `ignored` (and everything below them) from every part.
    pub fn exclude(&self, ignored: &FieldSet) -> Comparison {
        Comparison {
            added: self.added.recursive_difference(ignored),
            modified: self.modified.recursive_difference(ignored),
            removed: self.removed.recursive_difference(ignored),
        }
    }
}

/// Compares `old` and `new` (either may be absent) as SMD's `Compare` does: leaves and atomic
/// nodes are compared by value, granular nodes by their children, and a node that appears or
/// disappears is itself added or removed.
pub fn compare<S: TypeSchema>(old: Option<&Value>, new: Option<&Value>, schema: &S) -> Comparison {
    let mut c = Comparison::default();
    compare_walk(old, new, schema, &Path::default(), &mut c, 0);
    c
}

/// A typed zero list or map is `null`: present, empty.
fn object_or_null(v: &Value) -> bool {
    v.is_object() || v.is_null()
}

fn array_or_null(v: &Value) -> bool {
    v.is_array() || v.is_null()
}

fn compare_walk<S: TypeSchema>(old: Option<&Value>, new: Option<&Value>, schema: &S, path: &Path, c: &mut Comparison, depth: usize) {
    let shape = effective_shape(schema, new.or(old));
    let leaf = |c: &mut Comparison| match (old, new) {
        (None, Some(_)) => c.added.insert(path),
        (Some(_), None) => c.removed.insert(path),
        (Some(a), Some(b)) if a != b => c.modified.insert(path),
        _ => {}
    };
    if depth > MAX_DEPTH {
        return leaf(c);
    }
    match shape {
        Shape::Struct { atomic: false } | Shape::Map { atomic: false }
            if old.is_none_or(object_or_null) && new.is_none_or(object_or_null) =>
        {
            let empty = Map::new();
            let o = old.and_then(Value::as_object).unwrap_or(&empty);
            let n = new.and_then(Value::as_object).unwrap_or(&empty);
            let mut seen = HashSet::new();
            for k in o.keys().chain(n.keys()) {
                if !seen.insert(k.as_str()) {
                    continue;
                }
                let (child_schema, _) = schema.field(k);
                compare_walk(o.get(k), n.get(k), &child_schema, &path.child(PathElement::Field(k.clone())), c, depth + 1);
            }
        }
        Shape::List(ListType::Set | ListType::Map(_))
            if old.is_none_or(array_or_null) && new.is_none_or(array_or_null) =>
        {
            let Shape::List(list) = shape else { unreachable!() };
            let item_schema = schema.items();
            let index = |v: Option<&Value>| -> Vec<(PathElement, Value)> {
                v.and_then(Value::as_array)
                    .map(|items| {
                        items.iter().enumerate().map(|(i, it)| (element_of(&list, &item_schema, it, i), it.clone())).collect()
                    })
                    .unwrap_or_default()
            };
            let (o, n) = (index(old), index(new));
            let mut seen = HashSet::new();
            for (pe, _) in o.iter().chain(n.iter()) {
                if !seen.insert(pe.clone()) {
                    continue;
                }
                let oi = o.iter().find(|(p, _)| p == pe).map(|(_, v)| v);
                let ni = n.iter().find(|(p, _)| p == pe).map(|(_, v)| v);
                compare_walk(oi, ni, &item_schema, &path.child(pe.clone()), c, depth + 1);
            }
        }
        _ => return leaf(c),
    }
    match (old, new) {
        (None, Some(_)) => c.added.insert(path),
        (Some(_), None) => c.removed.insert(path),
        _ => {}
    }
}

/// Merges an applied configuration into the live object (SMD's `Merge`): the configuration's
/// values win, granular maps and structs merge by field, list maps and sets by element, and
/// atomic nodes are replaced whole.
pub fn merge<S: TypeSchema>(live: &Value, config: &Value, schema: &S) -> Value {
    merge_walk(Some(live), config, schema, 0)
}

fn merge_walk<S: TypeSchema>(live: Option<&Value>, config: &Value, schema: &S, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return config.clone();
    }
    match (effective_shape(schema, Some(config)), live, config) {
        (Shape::Struct { atomic: false } | Shape::Map { atomic: false }, Some(Value::Object(l)), Value::Object(c)) => {
            let mut out = l.clone();
            for (k, v) in c {
                let (child_schema, _) = schema.field(k);
                let merged = merge_walk(l.get(k), v, &child_schema, depth + 1);
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Shape::List(list @ (ListType::Set | ListType::Map(_))), Some(Value::Array(l)), Value::Array(c)) => {
            Value::Array(merge_list(&list, l, c, schema, depth))
        }
        _ => config.clone(),
    }
}

/// SMD's list merge order: live elements keep their places, configuration elements come in
/// configuration order, shared ones where the configuration puts them relative to each other.
fn merge_list<S: TypeSchema>(list: &ListType, lhs: &[Value], rhs: &[Value], schema: &S, depth: usize) -> Vec<Value> {
    let items = schema.items();
    let l: Vec<PathElement> = lhs.iter().enumerate().map(|(i, v)| element_of(list, &items, v, i)).collect();
    let r: Vec<PathElement> = rhs.iter().enumerate().map(|(i, v)| element_of(list, &items, v, i)).collect();
    let in_l = |pe: &PathElement| l.iter().position(|x| x == pe);
    let in_r = |pe: &PathElement| r.iter().position(|x| x == pe);
    let mut shared: std::collections::VecDeque<PathElement> = r.iter().filter(|pe| in_l(pe).is_some()).cloned().collect();
    let mut next_shared = shared.pop_front();
    let mut merged_rhs: HashSet<PathElement> = HashSet::new();
    let mut out = Vec::with_capacity(lhs.len().max(rhs.len()));
    let merge_item = |li: Option<usize>, ri: Option<usize>| -> Value {
        match ri {
            Some(ri) => merge_walk(li.map(|i| &lhs[i]), &rhs[ri], &items, depth + 1),
            None => lhs[li.unwrap_or_default()].clone(),
        }
    };
    let (mut li, mut ri) = (0, 0);
    while li < l.len() || ri < r.len() {
        if li < l.len() && ri < r.len() {
            if l[li] == r[ri] {
                merged_rhs.insert(l[li].clone());
                out.push(merge_item(Some(li), Some(ri)));
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if in_r(&l[li]).is_some() && next_shared.as_ref().is_some_and(|n| *n != l[li]) {
                li += 1;
                continue;
            }
        }
        if li < l.len() {
            if in_r(&l[li]).is_none() {
                out.push(merge_item(Some(li), None));
                li += 1;
                continue;
            } else if merged_rhs.contains(&l[li]) {
                li += 1;
                continue;
            }
        }
        if ri < r.len() {
            let pe = r[ri].clone();
            merged_rhs.insert(pe.clone());
            out.push(merge_item(in_l(&pe), Some(ri)));
            ri += 1;
            if next_shared.as_ref() == Some(&pe) {
                next_shared = shared.pop_front();
            }
        }
    }
    out
}

/// Removes the paths of `set` from `value` (a removed map entry or list element takes its
/// subtree with it).
pub fn remove_items<S: TypeSchema>(value: &Value, set: &FieldSet, schema: &S) -> Value {
    remove_walk(value, set, schema, 0)
}

fn remove_walk<S: TypeSchema>(value: &Value, set: &FieldSet, schema: &S, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return value.clone();
    }
    match (effective_shape(schema, Some(value)), value) {
        (Shape::Struct { atomic: false } | Shape::Map { atomic: false }, Value::Object(fields)) => {
            let mut out = Map::new();
            for (k, v) in fields {
                let pe = PathElement::Field(k.clone());
                if set.members().contains(&pe) {
                    continue;
                }
                let kept = match set.child(&pe) {
                    Some(sub) => remove_walk(v, sub, &schema.field(k).0, depth + 1),
                    None => v.clone(),
                };
                out.insert(k.clone(), kept);
            }
            Value::Object(out)
        }
        (Shape::List(list @ (ListType::Set | ListType::Map(_))), Value::Array(items)) => {
            let item_schema = schema.items();
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let pe = element_of(&list, &item_schema, item, i);
                if set.members().contains(&pe) {
                    continue;
                }
                out.push(match set.child(&pe) {
                    Some(sub) => remove_walk(item, sub, &item_schema, depth + 1),
                    None => item.clone(),
                });
            }
            Value::Array(out)
        }
        _ => value.clone(),
    }
}

/// Adds the always-present (non-pointer) structs a Go typed object would carry, empty, so that
/// comparisons see objects as kube-apiserver's typed conversions do.
pub fn with_typed_skeleton<S: TypeSchema>(value: &Value, schema: &S) -> Value {
    let mut v = value.clone();
    skeleton_walk(&mut v, schema, 0);
    v
}

fn skeleton_walk<S: TypeSchema>(value: &mut Value, schema: &S, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match (schema.shape(), value) {
        (Shape::Struct { atomic: false }, Value::Object(fields)) => {
            for (name, zero) in schema.always_present() {
                fields.entry(name).or_insert(zero);
            }
            for (k, v) in fields.iter_mut() {
                skeleton_walk(v, &schema.field(k).0, depth + 1);
            }
        }
        (Shape::List(_), Value::Array(items)) => {
            let item_schema = schema.items();
            for item in items {
                skeleton_walk(item, &item_schema, depth + 1);
            }
        }
        _ => {}
    }
}
