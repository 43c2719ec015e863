//! The in-memory RBAC state every decision reads: roles, cluster roles and bindings, with
//! bindings indexed by subject so that a decision looks at the bindings of the caller only
//! (a few hash lookups whatever the number of bindings), never at storage.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value;

use super::types::{rules_of, Binding, DecodeError, PolicyRule, Subject};
use crate::user::{service_account_user, UserInfo};

/// Who a binding names, as the index keys it: service accounts become their user names.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum SubjectKey {
    User(String),
    Group(String),
}

fn subject_key(subject: &Subject, binding_namespace: &str) -> Option<SubjectKey> {
    match subject.kind.as_str() {
        "User" => Some(SubjectKey::User(subject.name.clone())),
        "Group" => Some(SubjectKey::Group(subject.name.clone())),
        "ServiceAccount" => {
            let ns = subject.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or(binding_namespace);
            // A service account without a namespace names nobody.
            (!ns.is_empty()).then(|| SubjectKey::User(service_account_user(ns, &subject.name)))
        }
        _ => None,
    }
}

/// Whether `subject` of a binding in `binding_namespace` names `user` (kube's `appliesTo`).
pub fn applies_to(subject: &Subject, user: &UserInfo, binding_namespace: &str) -> bool {
    match subject_key(subject, binding_namespace) {
        Some(SubjectKey::User(name)) => name == user.name,
        Some(SubjectKey::Group(group)) => user.in_group(&group),
        None => false,
    }
}

/// Names of bindings by the subjects they name, in one scope (the cluster, or one namespace).
/// Looked up with borrowed names, so a decision allocates nothing to find its bindings.
#[derive(Debug, Default)]
struct BySubject {
    users: HashMap<String, BTreeSet<String>>,
    groups: HashMap<String, BTreeSet<String>>,
}

impl BySubject {
    fn side(&mut self, key: SubjectKey) -> (&mut HashMap<String, BTreeSet<String>>, String) {
        match key {
            SubjectKey::User(name) => (&mut self.users, name),
            SubjectKey::Group(name) => (&mut self.groups, name),
        }
    }

    fn insert(&mut self, key: SubjectKey, binding: &str) {
        let (map, name) = self.side(key);
        map.entry(name).or_default().insert(binding.to_owned());
    }

    fn remove(&mut self, key: SubjectKey, binding: &str) {
        let (map, name) = self.side(key);
        if let Some(set) = map.get_mut(&name) {
            set.remove(binding);
            if set.is_empty() {
                map.remove(&name);
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.users.is_empty() && self.groups.is_empty()
    }

    /// The bindings naming `user` or one of its groups, each once, in name order.
    fn bindings_of<'a>(&'a self, user: &UserInfo) -> BTreeSet<&'a String> {
        let mut names: BTreeSet<&String> = BTreeSet::new();
        if let Some(set) = self.users.get(&user.name) {
            names.extend(set);
        }
        for group in &user.groups {
            if let Some(set) = self.groups.get(group) {
                names.extend(set);
            }
        }
        names
    }
}

/// A ClusterRole as the index keeps it: its rules plus what aggregation reads.
#[derive(Clone, Debug, Default)]
pub struct ClusterRoleEntry {
    /// The stored rules (for an aggregated role: what the aggregation controller wrote).
    pub rules: Arc<[PolicyRule]>,
    /// Labels, which aggregation selectors match.
    pub labels: serde_json::Map<String, Value>,
    /// `aggregationRule.clusterRoleSelectors`, when present.
    pub aggregation: Option<Vec<Value>>,
}

/// Namespaced objects: namespace -> name -> object.
type Namespaced<T> = HashMap<String, HashMap<String, T>>;

/// The RBAC objects of the cluster, indexed for decisions.
#[derive(Debug, Default)]
pub struct RbacIndex {
    roles: Namespaced<Arc<[PolicyRule]>>,
    cluster_roles: HashMap<String, ClusterRoleEntry>,
    role_bindings: Namespaced<Binding>,
    cluster_role_bindings: HashMap<String, Binding>,
    crb_by_subject: BySubject,
    rb_by_subject: HashMap<String, BySubject>,
}

/// The kinds of objects the index holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexedKind {
    /// Roles.
    Role,
    /// ClusterRoles.
    ClusterRole,
    /// RoleBindings.
    RoleBinding,
    /// ClusterRoleBindings.
    ClusterRoleBinding,
}

impl IndexedKind {
    /// Every kind.
    pub const ALL: [IndexedKind; 4] = [IndexedKind::Role, IndexedKind::ClusterRole, IndexedKind::RoleBinding, IndexedKind::ClusterRoleBinding];

    /// The resource (plural) of the kind in `rbac.authorization.k8s.io/v1`.
    pub fn resource(self) -> &'static str {
        match self {
            IndexedKind::Role => "roles",
            IndexedKind::ClusterRole => "clusterroles",
            IndexedKind::RoleBinding => "rolebindings",
            IndexedKind::ClusterRoleBinding => "clusterrolebindings",
        }
    }
}

/// The visitor's answer: stop (the visitor found what it wanted) or go on.
pub type Visit = std::ops::ControlFlow<()>;

fn remove_namespaced<T>(map: &mut Namespaced<T>, namespace: &str, name: &str) -> Option<T> {
    let names = map.get_mut(namespace)?;
    let old = names.remove(name);
    if names.is_empty() {
        map.remove(namespace);
    }
    old
}

impl RbacIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces an object of `kind`.
    pub fn put(&mut self, kind: IndexedKind, obj: &Value) -> Result<(), DecodeError> {
        match kind {
            IndexedKind::Role => self.put_role(obj),
            IndexedKind::ClusterRole => self.put_cluster_role(obj),
            IndexedKind::RoleBinding => self.put_role_binding(obj),
            IndexedKind::ClusterRoleBinding => self.put_cluster_role_binding(obj),
        }
    }

    /// Removes the object of `kind` that `obj` names.
    pub fn delete(&mut self, kind: IndexedKind, obj: &Value) {
        let (ns, name) = (ns_of(obj), name_of(obj));
        match kind {
            IndexedKind::Role => self.delete_role(&ns, &name),
            IndexedKind::ClusterRole => self.delete_cluster_role(&name),
            IndexedKind::RoleBinding => self.delete_role_binding(&ns, &name),
            IndexedKind::ClusterRoleBinding => self.delete_cluster_role_binding(&name),
        }
    }

    /// Drops every object of one kind, before a reload of that kind.
    pub fn clear(&mut self, kind: IndexedKind) {
        match kind {
            IndexedKind::Role => self.roles.clear(),
            IndexedKind::ClusterRole => self.cluster_roles.clear(),
            IndexedKind::RoleBinding => {
                self.role_bindings.clear();
                self.rb_by_subject.clear();
            }
            IndexedKind::ClusterRoleBinding => {
                self.cluster_role_bindings.clear();
                self.crb_by_subject = BySubject::default();
            }
        }
    }

    /// Adds or replaces a Role.
    pub fn put_role(&mut self, obj: &Value) -> Result<(), DecodeError> {
        let rules = rules_of(obj)?;
        self.roles.entry(ns_of(obj)).or_default().insert(name_of(obj), rules.into());
        Ok(())
    }

    /// Removes a Role.
    pub fn delete_role(&mut self, namespace: &str, name: &str) {
        remove_namespaced(&mut self.roles, namespace, name);
    }

    /// Adds or replaces a ClusterRole.
    pub fn put_cluster_role(&mut self, obj: &Value) -> Result<(), DecodeError> {
        let rules = rules_of(obj)?;
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object).cloned().unwrap_or_default();
        let aggregation = obj.pointer("/aggregationRule/clusterRoleSelectors").and_then(Value::as_array).cloned();
        self.cluster_roles.insert(name_of(obj), ClusterRoleEntry { rules: rules.into(), labels, aggregation });
        Ok(())
    }

    /// Removes a ClusterRole.
    pub fn delete_cluster_role(&mut self, name: &str) {
        self.cluster_roles.remove(name);
    }

    /// Adds or replaces a RoleBinding.
    pub fn put_role_binding(&mut self, obj: &Value) -> Result<(), DecodeError> {
        let binding = Binding::from_object(obj)?;
        self.delete_role_binding(&binding.namespace, &binding.name);
        let by_subject = self.rb_by_subject.entry(binding.namespace.clone()).or_default();
        for key in binding.subjects.iter().filter_map(|s| subject_key(s, &binding.namespace)) {
            by_subject.insert(key, &binding.name);
        }
        self.role_bindings.entry(binding.namespace.clone()).or_default().insert(binding.name.clone(), binding);
        Ok(())
    }

    /// Removes a RoleBinding.
    pub fn delete_role_binding(&mut self, namespace: &str, name: &str) {
        let Some(old) = remove_namespaced(&mut self.role_bindings, namespace, name) else { return };
        let Some(by_subject) = self.rb_by_subject.get_mut(namespace) else { return };
        for key in old.subjects.iter().filter_map(|s| subject_key(s, namespace)) {
            by_subject.remove(key, name);
        }
        if by_subject.is_empty() {
            self.rb_by_subject.remove(namespace);
        }
    }

    /// Adds or replaces a ClusterRoleBinding.
    pub fn put_cluster_role_binding(&mut self, obj: &Value) -> Result<(), DecodeError> {
        let binding = Binding::from_object(obj)?;
        self.delete_cluster_role_binding(&binding.name);
        for key in binding.subjects.iter().filter_map(|s| subject_key(s, "")) {
            self.crb_by_subject.insert(key, &binding.name);
        }
        self.cluster_role_bindings.insert(binding.name.clone(), binding);
        Ok(())
    }

    /// Removes a ClusterRoleBinding.
    pub fn delete_cluster_role_binding(&mut self, name: &str) {
        let Some(old) = self.cluster_role_bindings.remove(name) else { return };
        for key in old.subjects.iter().filter_map(|s| subject_key(s, "")) {
            self.crb_by_subject.remove(key, name);
        }
    }

    /// A ClusterRole by name.
    pub fn cluster_role(&self, name: &str) -> Option<&ClusterRoleEntry> {
        self.cluster_roles.get(name)
    }

    /// Every ClusterRole, for the aggregation controller.
    pub fn cluster_roles(&self) -> impl Iterator<Item = (&String, &ClusterRoleEntry)> {
        self.cluster_roles.iter()
    }

    /// Counts of indexed objects: roles, cluster roles, role bindings, cluster role bindings.
    pub fn counts(&self) -> [usize; 4] {
        fn namespaced<T>(m: &Namespaced<T>) -> usize {
            m.values().map(HashMap::len).sum()
        }
        [namespaced(&self.roles), self.cluster_roles.len(), namespaced(&self.role_bindings), self.cluster_role_bindings.len()]
    }

    /// The rules a role reference names, without copying.
    fn lookup_rules(&self, kind: &str, name: &str, namespace: &str) -> Result<&[PolicyRule], String> {
        match kind {
            "ClusterRole" => self
                .cluster_roles
                .get(name)
                .map(|c| &*c.rules)
                .ok_or_else(|| format!("clusterrole.rbac.authorization.k8s.io {name:?} not found")),
            "Role" => self
                .roles
                .get(namespace)
                .and_then(|names| names.get(name))
                .map(|r| &**r)
                .ok_or_else(|| format!("role.rbac.authorization.k8s.io {name:?} not found")),
            other => Err(format!("unsupported role reference kind: {other:?}")),
        }
    }

    /// The rules a role reference grants in `namespace` (kube's `GetRoleReferenceRules`), or
    /// kube's not-found text.
    pub fn role_ref_rules(&self, kind: &str, name: &str, namespace: &str) -> Result<Vec<PolicyRule>, String> {
        self.lookup_rules(kind, name, namespace).map(<[PolicyRule]>::to_vec)
    }

    /// Visits the rules that apply to `user` in `namespace` (cluster-wide bindings first, then
    /// the namespace's), binding by binding, as kube's `VisitRulesFor`. `visit` gets the binding
    /// and its role's rules, or the error of a dangling role reference; it stops the walk by
    /// returning `Break`.
    pub fn visit_rules_for(
        &self,
        user: &UserInfo,
        namespace: &str,
        mut visit: impl FnMut(&Binding, Result<&[PolicyRule], &str>) -> Visit,
    ) {
        for name in self.crb_by_subject.bindings_of(user) {
            let Some(binding) = self.cluster_role_bindings.get(name) else { continue };
            let rules = self.lookup_rules(&binding.role_ref.kind, &binding.role_ref.name, "");
            if visit(binding, rules.as_deref().map_err(String::as_str)).is_break() {
                return;
            }
        }
        if namespace.is_empty() {
            return;
        }
        let (Some(by_subject), Some(bindings)) = (self.rb_by_subject.get(namespace), self.role_bindings.get(namespace)) else { return };
        for name in by_subject.bindings_of(user) {
            let Some(binding) = bindings.get(name) else { continue };
            let rules = self.lookup_rules(&binding.role_ref.kind, &binding.role_ref.name, namespace);
            if visit(binding, rules.as_deref().map_err(String::as_str)).is_break() {
                return;
            }
        }
    }

    /// Every rule that applies to `user` in `namespace`, with the resolution errors (kube's
    /// `RulesFor`; SelfSubjectRulesReview and escalation checks read it).
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        self.visit_rules_for(user, namespace, |_, r| {
            match r {
                Ok(r) => rules.extend_from_slice(r),
                Err(e) => errors.push(e.to_owned()),
            }
            Visit::Continue(())
        });
        (rules, errors)
    }

    /// The rules an aggregated ClusterRole should hold now: the rules of every other cluster
    /// role its selectors match, selector by selector, roles by name, duplicates dropped (the
    /// order kube's aggregation controller writes).
    pub fn aggregated_rules(&self, name: &str) -> Option<Vec<PolicyRule>> {
        let entry = self.cluster_roles.get(name)?;
        let selectors = entry.aggregation.as_ref()?;
        let mut rules: Vec<PolicyRule> = Vec::new();
        for selector in selectors {
            let Ok(selector) = kapi_apimachinery::labels::LabelSelector::from_json(selector) else { continue };
            let matching: BTreeMap<&String, &ClusterRoleEntry> = self
                .cluster_roles
                .iter()
                .filter(|(n, c)| n.as_str() != name && selector.matches(Some(&c.labels)))
                .collect();
            for role in matching.values() {
                for rule in role.rules.iter() {
                    if !rules.contains(rule) {
                        rules.push(rule.clone());
                    }
                }
            }
        }
        Some(rules)
    }
}

fn name_of(obj: &Value) -> String {
    obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned()
}

fn ns_of(obj: &Value) -> String {
    obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default().to_owned()
}
