//! The dependency graph (kube's `GraphBuilder.uidToNode`): every object of every followed
//! resource, keyed by uid, with its ownerReferences and the reverse index from an owner's uid
//! to its dependents. It is kept from the watch caches only; every change answers the work it
//! makes due, so the graph itself never talks to the store.
//!
//! An owner referenced but not (yet) seen is not given a node as kube's "virtual node": the
//! dependent is queued instead, and its owners are looked up live before anything is done to
//! it ([`super::attempt`]). The reverse index is keyed by the owner's uid whether or not the
//! owner was seen, so that its Deleted event (or a later observation) finds the dependents.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use kapi_registry::catalog::ResourceSpec;
use kapi_watch::EventType;
use serde_json::Value;

/// The finalizer that holds an owner until its blocking dependents are gone.
pub(super) const FOREGROUND: &str = "foregroundDeletion";
/// The finalizer that holds an owner until its dependents no longer name it.
pub(super) const ORPHAN: &str = "orphan";

/// One entry of `metadata.ownerReferences`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct OwnerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    pub block_owner_deletion: bool,
}

impl OwnerRef {
    /// The API group of `apiVersion` (empty for the core group's `v1`).
    pub fn group(&self) -> &str {
        self.api_version.split_once('/').map_or("", |(g, _)| g)
    }

    /// The version of `apiVersion`.
    pub fn version(&self) -> &str {
        self.api_version.split_once('/').map_or(self.api_version.as_str(), |(_, v)| v)
    }
}

/// The ownerReferences of `obj` (entries without a uid are skipped: they can name nothing).
pub(super) fn owner_refs(obj: &Value) -> Vec<OwnerRef> {
    let Some(refs) = obj.pointer("/metadata/ownerReferences").and_then(Value::as_array) else { return Vec::new() };
    let s = |r: &Value, k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    refs.iter()
        .map(|r| OwnerRef {
            api_version: s(r, "apiVersion"),
            kind: s(r, "kind"),
            name: s(r, "name"),
            uid: s(r, "uid"),
            block_owner_deletion: r.get("blockOwnerDeletion").and_then(Value::as_bool).unwrap_or(false),
        })
        .filter(|r| !r.uid.is_empty())
        .collect()
}

pub(super) use crate::controllers::str_at;

pub(super) fn has_finalizer(obj: &Value, finalizer: &str) -> bool {
    obj.pointer("/metadata/finalizers").and_then(Value::as_array).is_some_and(|f| f.iter().any(|v| v.as_str() == Some(finalizer)))
}

pub(super) fn being_deleted(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null())
}

/// Which object a node is: enough to read, update and delete it.
#[derive(Debug, Clone)]
pub(super) struct Identity {
    pub spec: &'static ResourceSpec,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
}

/// What the graph knows of one object.
#[derive(Debug, Clone)]
pub(super) struct Node {
    pub identity: Identity,
    pub owners: Vec<OwnerRef>,
    /// `deletionTimestamp` is set.
    pub being_deleted: bool,
    /// Being deleted with the `foregroundDeletion` finalizer (kube's `deletingDependents`).
    pub deleting_dependents: bool,
    /// Being deleted with the `orphan` finalizer.
    pub orphaning: bool,
}

impl Node {
    fn from_object(spec: &'static ResourceSpec, obj: &Value) -> Option<Node> {
        let uid = str_at(obj, "/metadata/uid");
        let name = str_at(obj, "/metadata/name");
        if uid.is_empty() || name.is_empty() {
            return None;
        }
        let namespace = Some(str_at(obj, "/metadata/namespace")).filter(|n| !n.is_empty()).map(str::to_owned);
        let deleting = being_deleted(obj);
        Some(Node {
            identity: Identity { spec, namespace, name: name.to_owned(), uid: uid.to_owned() },
            owners: owner_refs(obj),
            being_deleted: deleting,
            deleting_dependents: deleting && has_finalizer(obj, FOREGROUND),
            orphaning: deleting && has_finalizer(obj, ORPHAN),
        })
    }
}

/// Work the graph makes due; the queue key is [`Work::key`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Work {
    /// kube's `attemptToDelete`: look at whether the object should go (or, for an owner being
    /// deleted in the foreground, whether its dependents are gone).
    Delete(String),
    /// kube's `attemptToOrphan`: take the owner out of its dependents' ownerReferences, then
    /// drop its `orphan` finalizer.
    Orphan(String),
}

impl Work {
    pub fn key(&self) -> String {
        match self {
            Work::Delete(uid) => format!("delete/{uid}"),
            Work::Orphan(uid) => format!("orphan/{uid}"),
        }
    }

    pub fn parse(key: &str) -> Option<Work> {
        match key.split_once('/')? {
            ("delete", uid) => Some(Work::Delete(uid.to_owned())),
            ("orphan", uid) => Some(Work::Orphan(uid.to_owned())),
            _ => None,
        }
    }
}

/// What to do about a queued [`Work::Delete`], as far as the graph can tell.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Plan {
    /// Nothing: gone, already being deleted, without owners, or every owner seen alive.
    Nothing,
    /// An owner being deleted in the foreground: see whether its dependents are gone.
    DeletingDependents,
    /// Some owner was not seen or waits for its dependents: read the owners live.
    Live,
}

#[derive(Default)]
pub(super) struct Graph {
    nodes: HashMap<String, Node>,
    /// Owner uid -> uids of the nodes that name it.
    dependents: HashMap<String, BTreeSet<String>>,
    /// Key prefix of a followed resource -> uids of its nodes.
    by_resource: HashMap<String, HashSet<String>>,
}

impl Graph {
    pub fn node(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    /// The nodes whose ownerReferences name `uid`.
    pub fn dependents(&self, uid: &str) -> Vec<&Node> {
        self.dependents.get(uid).into_iter().flatten().filter_map(|d| self.nodes.get(d)).collect()
    }

    /// kube's `blockingDependents`: dependents that name `uid` with `blockOwnerDeletion`.
    pub fn blocking_dependents(&self, uid: &str) -> Vec<&Node> {
        self.dependents(uid).into_iter().filter(|d| d.owners.iter().any(|o| o.uid == uid && o.block_owner_deletion)).collect()
    }

    /// The observed node `reference` (an owner of `dependent`) names: same uid, kind, group,
    /// name, and a namespace the dependent can refer to.
    pub fn observed_owner(&self, dependent: &Identity, reference: &OwnerRef) -> Option<&Node> {
        let owner = self.nodes.get(&reference.uid)?;
        let id = &owner.identity;
        let namespace_ok = id.namespace.is_none() || id.namespace == dependent.namespace;
        (id.spec.kind == reference.kind && id.spec.group == reference.group() && id.name == reference.name && namespace_ok).then_some(owner)
    }

    /// Whether [`Work::Delete`] of `uid` needs the store.
    pub fn plan(&self, uid: &str) -> Plan {
        let Some(node) = self.nodes.get(uid) else { return Plan::Nothing };
        if node.deleting_dependents {
            return Plan::DeletingDependents;
        }
        if node.being_deleted || node.owners.is_empty() {
            return Plan::Nothing;
        }
        let settled = node.owners.iter().all(|r| self.observed_owner(&node.identity, r).is_some_and(|o| !o.deleting_dependents));
        if settled {
            Plan::Nothing
        } else {
            Plan::Live
        }
    }

    /// Applies one watch event of `spec`'s cache and answers the work it makes due.
    pub fn observe(&mut self, spec: &'static ResourceSpec, kind: EventType, obj: &Value) -> Vec<Work> {
        let mut work = Vec::new();
        match kind {
            EventType::Deleted => {
                let uid = str_at(obj, "/metadata/uid");
                self.remove(uid, &mut work);
            }
            EventType::Added | EventType::Modified => {
                if let Some(node) = Node::from_object(spec, obj) {
                    self.upsert(node, &mut work);
                }
            }
        }
        dedup(work)
    }

    /// A fresh initial state of the resource with key prefix `prefix` (its watch was opened
    /// again): every object as added, and the nodes it no longer holds as deleted.
    pub fn relist(&mut self, spec: &'static ResourceSpec, objects: &[Arc<Value>]) -> Vec<Work> {
        let prefix = spec.key_prefix();
        let mut work = Vec::new();
        let mut seen = HashSet::new();
        for obj in objects {
            if let Some(node) = Node::from_object(spec, obj) {
                seen.insert(node.identity.uid.clone());
                self.upsert(node, &mut work);
            }
        }
        let gone: Vec<String> = self.by_resource.get(&prefix).into_iter().flatten().filter(|u| !seen.contains(*u)).cloned().collect();
        for uid in gone {
            self.remove(&uid, &mut work);
        }
        dedup(work)
    }

    /// The resource with key prefix `prefix` is no longer served: its nodes leave the graph.
    pub fn forget_resource(&mut self, prefix: &str) -> Vec<Work> {
        let mut work = Vec::new();
        for uid in self.by_resource.remove(prefix).unwrap_or_default() {
            self.remove(&uid, &mut work);
        }
        dedup(work)
    }

    fn upsert(&mut self, node: Node, work: &mut Vec<Work>) {
        let uid = node.identity.uid.clone();
        let old = self.nodes.remove(&uid);
        let old_owners = old.as_ref().map(|o| o.owners.clone()).unwrap_or_default();
        if old_owners != node.owners {
            for r in &old_owners {
                if let Some(deps) = self.dependents.get_mut(&r.uid) {
                    deps.remove(&uid);
                    if deps.is_empty() {
                        self.dependents.remove(&r.uid);
                    }
                }
            }
            for r in &node.owners {
                self.dependents.entry(r.uid.clone()).or_default().insert(uid.clone());
            }
            // An owner waiting for its dependents sees a reference (or its blocking) go or come.
            for r in old_owners.iter().chain(&node.owners) {
                if self.nodes.get(&r.uid).is_some_and(|o| o.deleting_dependents) {
                    work.push(Work::Delete(r.uid.clone()));
                }
            }
            // A reference to an owner the graph has not seen: look it up live.
            if node.owners.iter().any(|r| self.observed_owner(&node.identity, r).is_none()) {
                work.push(Work::Delete(uid.clone()));
            }
        }
        // kube's processTransitions: an owner starts waiting for its dependents.
        if node.orphaning && !old.as_ref().is_some_and(|o| o.orphaning) {
            work.push(Work::Orphan(uid.clone()));
        }
        if node.deleting_dependents && !old.as_ref().is_some_and(|o| o.deleting_dependents) {
            work.extend(self.dependents.get(&uid).into_iter().flatten().map(|d| Work::Delete(d.clone())));
            work.push(Work::Delete(uid.clone()));
        }
        // Dependents that named this uid before it was seen (or saw it as someone else).
        if old.is_none() {
            work.extend(self.dependents.get(&uid).into_iter().flatten().map(|d| Work::Delete(d.clone())));
        }
        self.by_resource.entry(node.identity.spec.key_prefix()).or_default().insert(uid.clone());
        self.nodes.insert(uid, node);
    }

    fn remove(&mut self, uid: &str, work: &mut Vec<Work>) {
        let Some(node) = self.nodes.remove(uid) else { return };
        if let Some(set) = self.by_resource.get_mut(&node.identity.spec.key_prefix()) {
            set.remove(uid);
        }
        for r in &node.owners {
            if let Some(deps) = self.dependents.get_mut(&r.uid) {
                deps.remove(uid);
                if deps.is_empty() {
                    self.dependents.remove(&r.uid);
                }
            }
            // An owner waiting for its dependents may now be done.
            if self.nodes.get(&r.uid).is_some_and(|o| o.deleting_dependents) {
                work.push(Work::Delete(r.uid.clone()));
            }
        }
        // The owner is gone: its dependents are looked at (they keep naming its uid).
        work.extend(self.dependents.get(uid).into_iter().flatten().map(|d| Work::Delete(d.clone())));
    }
}

fn dedup(mut work: Vec<Work>) -> Vec<Work> {
    work.sort();
    work.dedup();
    work
}

#[cfg(test)]
#[path = "graph_tests.rs"]
mod tests;
