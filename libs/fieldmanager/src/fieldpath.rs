//! Field paths and field sets, and their `FieldsV1` encoding (structured-merge-diff's
//! `fieldpath` package): `f:<name>` a field, `k:<json>` a list element by its key fields,
//! `v:<json>` a set element, `i:<n>` an element by index, `.` the node itself.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

/// One step of a path. The derive order (fields, keys, values, indices) is SMD's order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// A struct field or map key.
    Field(String),
    /// A list-map element: its key fields as canonical JSON (keys sorted by name).
    Key(String),
    /// A set element: its value as JSON.
    Value(String),
    /// An element of a list without keys.
    Index(usize),
}

impl PathElement {
    /// The list-map element identified by `keys` (name, value) pairs.
    pub fn key(keys: &[(String, Value)]) -> Self {
        let mut sorted: Vec<&(String, Value)> = keys.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let map: Map<String, Value> = sorted.into_iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        PathElement::Key(Value::Object(map).to_string())
    }

    /// The set element `value`.
    pub fn value(value: &Value) -> Self {
        PathElement::Value(value.to_string())
    }

    fn encode(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(json) => format!("k:{json}"),
            PathElement::Value(json) => format!("v:{json}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    fn decode(text: &str) -> Option<Self> {
        let (kind, rest) = text.split_once(':')?;
        match kind {
            "f" => Some(PathElement::Field(rest.to_owned())),
            "k" => {
                let parsed: Value = serde_json::from_str(rest).ok()?;
                let Value::Object(fields) = parsed else { return None };
                let pairs: Vec<(String, Value)> = fields.into_iter().collect();
                Some(PathElement::key(&pairs))
            }
            "v" => serde_json::from_str::<Value>(rest).ok().map(|v| PathElement::value(&v)),
            "i" => rest.parse().ok().map(PathElement::Index),
            _ => None,
        }
    }
}

impl fmt::Display for PathElement {
    /// SMD's path syntax, as conflict messages print it: `.name`, `[k="v",k2=1]`, `[="v"]`, `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(json) => {
                let parsed: Map<String, Value> = serde_json::from_str(json).unwrap_or_default();
                let parts: Vec<String> = parsed.iter().map(|(k, v)| format!("{k}={v}")).collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(json) => write!(f, "[={json}]"),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path from the object's root.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Path(pub Vec<PathElement>);

impl Path {
    /// The path one step further.
    pub fn child(&self, e: PathElement) -> Path {
        let mut v = self.0.clone();
        v.push(e);
        Path(v)
    }

    /// A path of plain field names (`["metadata", "labels"]`).
    pub fn fields(names: &[&str]) -> Path {
        Path(names.iter().map(|n| PathElement::Field((*n).to_owned())).collect())
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for e in &self.0 {
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// A set of paths, stored as a tree: `members` are paths ending here, `children` continue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// A set of the given paths.
    pub fn from_paths(paths: &[Path]) -> Self {
        let mut s = Self::new();
        for p in paths {
            s.insert(p);
        }
        s
    }

    /// True when no path is in the set.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(FieldSet::is_empty)
    }

    /// Adds `path` (the empty path is ignored).
    pub fn insert(&mut self, path: &Path) {
        let Some((last, init)) = path.0.split_last() else { return };
        let mut node = self;
        for e in init {
            node = node.children.entry(e.clone()).or_default();
        }
        node.members.insert(last.clone());
    }

    /// Whether `path` itself is in the set.
    pub fn has(&self, path: &Path) -> bool {
        let Some((last, init)) = path.0.split_last() else { return false };
        let mut node = self;
        for e in init {
            match node.children.get(e) {
                Some(n) => node = n,
                None => return false,
            }
        }
        node.members.contains(last)
    }

    /// Whether `path` or any path below it is in the set.
    pub fn has_prefix(&self, path: &Path) -> bool {
        let Some((last, init)) = path.0.split_last() else { return !self.is_empty() };
        let mut node = self;
        for e in init {
            match node.children.get(e) {
                Some(n) => node = n,
                None => return false,
            }
        }
        node.members.contains(last) || node.children.get(last).is_some_and(|c| !c.is_empty())
    }

    /// Paths in either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (k, v) in &other.children {
            let merged = match out.children.get(k) {
                Some(mine) => mine.union(v),
                None => v.clone(),
            };
            out.children.insert(k.clone(), merged);
        }
        out
    }

    /// Paths in `self` but not in `other` (exact paths: a member of `other` does not remove
    /// the paths below it).
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        out.members = self.members.difference(&other.members).cloned().collect();
        for (k, v) in &self.children {
            let child = match other.children.get(k) {
                Some(o) => v.difference(o),
                None => v.clone(),
            };
            if !child.is_empty() {
                out.children.insert(k.clone(), child);
            }
        }
        out
    }

    /// Paths in `self` that neither are in `other` nor lie below a path of `other`.
    pub fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        out.members = self.members.difference(&other.members).cloned().collect();
        for (k, v) in &self.children {
            if other.members.contains(k) {
                continue;
            }
            let child = match other.children.get(k) {
                Some(o) => v.recursive_difference(o),
                None => v.clone(),
            };
            if !child.is_empty() {
                out.children.insert(k.clone(), child);
            }
        }
        out
    }

    /// `self` without the paths that lie above a path of `other`: a map or list item in which
    /// someone still owns fields is not removed with the fields nobody owns any more (SMD adds
    /// such items back after pruning an apply). An apply after kubectl's client-side to
    /// server-side migration owns `f:spec: {".": {}}` from the old Update entry; its next
    /// configuration owns fields below `spec` but not the `.` marker.
    pub fn without_ancestors_of(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        out.members = self.members.iter().filter(|m| other.children.get(*m).is_none_or(|c| c.is_empty())).cloned().collect();
        for (k, v) in &self.children {
            let child = match other.children.get(k) {
                Some(o) => v.without_ancestors_of(o),
                None => v.clone(),
            };
            if !child.is_empty() {
                out.children.insert(k.clone(), child);
            }
        }
        out
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        out.members = self.members.intersection(&other.members).cloned().collect();
        for (k, v) in &self.children {
            if let Some(o) = other.children.get(k) {
                let child = v.intersection(o);
                if !child.is_empty() {
                    out.children.insert(k.clone(), child);
                }
            }
        }
        out
    }

    /// Every path in the set, in SMD's iteration order: at each level the members, then the
    /// children's paths (kube lists apply conflicts in this order: `.spec.replicas` before
    /// `.spec.ports[name="http"].port`).
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&Path::default(), &mut out);
        out
    }

    fn collect(&self, prefix: &Path, out: &mut Vec<Path>) {
        out.extend(self.members.iter().map(|k| prefix.child(k.clone())));
        for (k, c) in &self.children {
            c.collect(&prefix.child(k.clone()), out);
        }
    }

    /// The members and children at this level, for walkers that prune values by a set.
    pub(crate) fn members(&self) -> &BTreeSet<PathElement> {
        &self.members
    }

    pub(crate) fn child(&self, e: &PathElement) -> Option<&FieldSet> {
        self.children.get(e)
    }

    /// The `fieldsV1` JSON of the set.
    pub fn to_fields_v1(&self) -> Value {
        let mut out = Map::new();
        let keys: BTreeSet<&PathElement> = self.members.iter().chain(self.children.keys()).collect();
        for k in keys {
            let mut node = match self.children.get(k).filter(|c| !c.is_empty()) {
                Some(c) => match c.to_fields_v1() {
                    Value::Object(m) => m,
                    _ => Map::new(),
                },
                None => Map::new(),
            };
            if self.members.contains(k) && !node.is_empty() {
                let mut with_self = Map::new();
                with_self.insert(".".into(), Value::Object(Map::new()));
                with_self.extend(node);
                node = with_self;
            }
            out.insert(k.encode(), Value::Object(node));
        }
        Value::Object(out)
    }

    /// Parses `fieldsV1`; None when it is not kube's format.
    pub fn from_fields_v1(v: &Value) -> Option<FieldSet> {
        let Value::Object(m) = v else { return None };
        let mut out = FieldSet::new();
        for (k, child) in m {
            if k == "." {
                continue;
            }
            let e = PathElement::decode(k)?;
            let Value::Object(inner) = child else { return None };
            if inner.is_empty() || inner.contains_key(".") {
                out.members.insert(e.clone());
            }
            let sub = FieldSet::from_fields_v1(child)?;
            if !sub.is_empty() {
                out.children.insert(e, sub);
            }
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ancestors_of_owned_paths_are_kept() {
        let last = FieldSet::from_fields_v1(&json!({"f:spec": {".": {}, "f:a": {}, "f:b": {}}, "f:gone": {".": {}}})).expect("valid");
        let others = FieldSet::from_fields_v1(&json!({"f:spec": {"f:a": {}}})).expect("valid");
        let gone = last.difference(&others).without_ancestors_of(&others);
        assert_eq!(gone.to_fields_v1(), json!({"f:spec": {"f:b": {}}, "f:gone": {}}));
    }

    #[test]
    fn fields_v1_round_trips_with_self_markers() {
        let v = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {".": {}, "f:image": {}}}, "f:replicas": {}},
            "f:finalizers": {"v:\"x\"": {}}
        });
        let set = FieldSet::from_fields_v1(&v).expect("valid");
        assert!(set.has(&Path::fields(&["metadata", "labels"])));
        assert!(!set.has(&Path::fields(&["metadata"])));
        assert_eq!(set.to_fields_v1(), v);
        let image = Path::fields(&["spec", "containers"]).child(PathElement::key(&[("name".into(), json!("a"))])).child(PathElement::Field("image".into()));
        assert_eq!(image.to_string(), ".spec.containers[name=\"a\"].image");
        assert!(set.has(&image));
    }

    #[test]
    fn set_algebra() {
        let a = FieldSet::from_paths(&[Path::fields(&["a", "b"]), Path::fields(&["a", "c"]), Path::fields(&["d"])]);
        let b = FieldSet::from_paths(&[Path::fields(&["a"]), Path::fields(&["d"])]);
        assert_eq!(a.difference(&b).paths(), vec![Path::fields(&["a", "b"]), Path::fields(&["a", "c"])]);
        assert!(a.recursive_difference(&b).is_empty());
        assert_eq!(a.intersection(&b).paths(), vec![Path::fields(&["d"])]);
        assert_eq!(a.union(&b).paths().len(), 4);
    }

    #[test]
    fn paths_list_members_before_children_as_smd_iterates() {
        let set = FieldSet::from_paths(&[
            Path::fields(&["spec", "ports", "port"]),
            Path::fields(&["spec", "replicas"]),
            Path::fields(&["metadata", "labels", "a"]),
        ]);
        let order: Vec<String> = set.paths().iter().map(ToString::to_string).collect();
        assert_eq!(order, [".metadata.labels.a", ".spec.replicas", ".spec.ports.port"]);
    }
}
