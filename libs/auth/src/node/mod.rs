//! kube's Node authorizer (`--authorization-mode=Node`): kubelets, identified as user
//! `system:node:<name>` in group `system:nodes`, may read the secrets, config maps, volumes,
//! claims and service accounts of the pods bound to them, their own Node and Lease, and what
//! the static node rules (the `system:node` ClusterRole's rules) allow. Anything else gets no
//! opinion, with kube's reason, so that a later mode (RBAC) still decides; requests from
//! other users get no opinion at all.
//!
//! Relations to nodes come from the [`Graph`], which the server keeps current from its watch
//! caches; writes that the authorizer cannot scope by object (a node creating a mirror pod,
//! updating a Node) are allowed here and narrowed by the NodeRestriction admission plugin.

pub mod graph;
pub mod refs;

use std::sync::{Arc, RwLock, RwLockReadGuard};

pub use graph::{Graph, Source, VertexKind};

use crate::authz::{Attributes, Authorizer, Decision};
use crate::rbac::{rule_allows, PolicyRule};
use crate::user::UserInfo;

/// The group every kubelet's credential carries.
pub const NODES_GROUP: &str = "system:nodes";
/// The prefix of a kubelet's user name.
pub const NODE_USER_PREFIX: &str = "system:node:";
/// The namespace of node heartbeats (kube's `NamespaceNodeLease`).
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// kube's default `NodeIdentifier`: Some(name) for a user named `system:node:<name>` in
/// group `system:nodes` (the name may be empty: a node that cannot be told apart), None
/// for everyone else.
pub fn node_identity(user: &UserInfo) -> Option<&str> {
    let name = user.name.strip_prefix(NODE_USER_PREFIX)?;
    user.in_group(NODES_GROUP).then_some(name)
}

/// The authorizer; clones share the graph.
#[derive(Clone)]
pub struct NodeAuthorizer {
    graph: Arc<RwLock<Graph>>,
    rules: Arc<Vec<PolicyRule>>,
}

impl std::fmt::Debug for NodeAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeAuthorizer").field("rules", &self.rules.len()).finish()
    }
}

fn no_opinion(reason: impl Into<String>) -> Decision {
    Decision::NoOpinion(reason.into())
}

fn allow() -> Decision {
    Decision::Allow(String::new())
}

impl NodeAuthorizer {
    /// An authorizer over an empty graph, with the static node rules of the bootstrap policy's
    /// `system:node` ClusterRole (kube's `NodeRules()`, which that role is made of).
    pub fn new() -> Result<Self, String> {
        let policy = crate::rbac::bootstrap_policy().map_err(|e| format!("bootstrap policy: {e}"))?;
        let role = policy
            .cluster_roles
            .iter()
            .find(|r| r.pointer("/metadata/name").and_then(serde_json::Value::as_str) == Some("system:node"))
            .ok_or("the bootstrap policy has no system:node ClusterRole")?;
        let rules = crate::rbac::rules_of(role).map_err(|e| e.to_string())?;
        Ok(Self::with_rules(rules))
    }

    /// An authorizer over an empty graph with the given static rules.
    pub fn with_rules(rules: Vec<PolicyRule>) -> Self {
        NodeAuthorizer { graph: Arc::default(), rules: Arc::new(rules) }
    }

    /// The graph, for the code that keeps it current.
    pub fn graph(&self) -> &Arc<RwLock<Graph>> {
        &self.graph
    }

    fn read(&self) -> RwLockReadGuard<'_, Graph> {
        self.graph.read().unwrap_or_else(|e| e.into_inner())
    }

    /// kube's `authorize`: a named object with a path to the node.
    fn related(&self, node: &str, kind: VertexKind, attrs: &Attributes) -> Decision {
        if attrs.name.is_empty() {
            return no_opinion("No Object name found");
        }
        self.path(node, kind, attrs)
    }

    fn path(&self, node: &str, kind: VertexKind, attrs: &Attributes) -> Decision {
        if self.read().has_path(node, kind, &attrs.namespace, &attrs.name) {
            allow()
        } else {
            no_opinion(format!("no relationship found between node '{node}' and this object"))
        }
    }

    fn get(&self, node: &str, kind: VertexKind, attrs: &Attributes) -> Decision {
        if attrs.verb != "get" {
            return no_opinion("can only get individual resources of this type");
        }
        if !attrs.subresource.is_empty() {
            return no_opinion("cannot get subresource");
        }
        self.related(node, kind, attrs)
    }

    fn read_namespaced(&self, node: &str, kind: VertexKind, attrs: &Attributes) -> Decision {
        if !matches!(attrs.verb.as_str(), "get" | "list" | "watch") {
            return no_opinion("can only read resources of this type");
        }
        if !attrs.subresource.is_empty() {
            return no_opinion("cannot read subresource");
        }
        if attrs.namespace.is_empty() {
            return no_opinion("can only read namespaced object of this type");
        }
        self.related(node, kind, attrs)
    }

    fn status_update(&self, node: &str, kind: VertexKind, attrs: &Attributes) -> Decision {
        if !matches!(attrs.verb.as_str(), "update" | "patch") {
            return no_opinion("can only get/update/patch this type");
        }
        if attrs.subresource != "status" {
            return no_opinion("can only update status subresource");
        }
        self.related(node, kind, attrs)
    }

    fn service_account(&self, node: &str, attrs: &Attributes) -> Decision {
        if attrs.verb == "get" && attrs.subresource.is_empty() {
            return self.related(node, VertexKind::ServiceAccount, attrs);
        }
        if attrs.verb != "create" || attrs.name.is_empty() {
            return no_opinion("can only create tokens for individual service accounts");
        }
        if attrs.subresource != "token" {
            return no_opinion("can only create token subresource of serviceaccount");
        }
        self.path(node, VertexKind::ServiceAccount, attrs)
    }

    /// Node-named objects (its Lease, its CSINode): the create is checked by NodeRestriction,
    /// which sees the new object's name.
    fn own_named(node: &str, attrs: &Attributes, what: &str) -> Decision {
        if !matches!(attrs.verb.as_str(), "get" | "create" | "update" | "patch" | "delete") {
            return no_opinion(format!("can only get, create, update, patch, or delete a {what}"));
        }
        if what == "node lease" && attrs.namespace != NODE_LEASE_NAMESPACE {
            return no_opinion(format!("can only access leases in the \"{NODE_LEASE_NAMESPACE}\" system namespace"));
        }
        if what == "CSINode" && !attrs.subresource.is_empty() {
            return no_opinion("cannot authorize CSINode subresources");
        }
        if attrs.verb != "create" && attrs.name != node {
            return no_opinion(format!("can only access {what} with the same name as the requesting node"));
        }
        allow()
    }

    fn resource_slice(&self, node: &str, attrs: &Attributes) -> Decision {
        if !attrs.subresource.is_empty() {
            return no_opinion("cannot authorize ResourceSlice subresources");
        }
        match attrs.verb.as_str() {
            "create" => allow(),
            "get" | "update" | "patch" | "delete" => self.related(node, VertexKind::ResourceSlice, attrs),
            "watch" | "list" | "deletecollection" if selects(attrs, "spec.nodeName", node) || selects(attrs, "nodeName", node) => allow(),
            "watch" | "list" | "deletecollection" => no_opinion("can only list/watch/deletecollection resourceslices with nodeName field selector"),
            _ => no_opinion(
                "only the following verbs are allowed for a ResourceSlice: get, watch, list, create, update, patch, delete, deletecollection",
            ),
        }
    }

    fn nodes(node: &str, attrs: &Attributes) -> Decision {
        match (attrs.subresource.as_str(), attrs.verb.as_str()) {
            // NodeRestriction limits a node to its own Node object.
            ("", "create" | "update" | "patch") | ("status", "update" | "patch") => allow(),
            ("", "get" | "list" | "watch") if attrs.name == node => allow(),
            ("", "get" | "list" | "watch") if attrs.name.is_empty() => {
                no_opinion(format!("node '{node}' cannot read all nodes, only its own Node object"))
            }
            ("", "get" | "list" | "watch") => no_opinion(format!("node '{node}' cannot read '{}', only its own Node object", attrs.name)),
            _ => no_opinion(""),
        }
    }

    fn pods(&self, node: &str, attrs: &Attributes) -> Decision {
        match (attrs.subresource.as_str(), attrs.verb.as_str()) {
            ("", "get") => self.get(node, VertexKind::Pod, attrs),
            ("", "list" | "watch") if selects(attrs, "spec.nodeName", node) => allow(),
            ("", "list" | "watch") if !attrs.name.is_empty() => self.path(node, VertexKind::Pod, attrs),
            ("", "list" | "watch") => no_opinion("can only list/watch pods with spec.nodeName field selector"),
            // Mirror pods, their status and evictions: NodeRestriction keeps them to the node's pods.
            ("", "create" | "delete") | ("status", "update" | "patch") | ("eviction", "create") => allow(),
            _ => no_opinion(""),
        }
    }
}

/// Whether the request's field selector requires `field` to equal `value`.
fn selects(attrs: &Attributes, field: &str, value: &str) -> bool {
    if attrs.field_selector.is_empty() {
        return false;
    }
    kapi_apimachinery::fields::FieldSelector::parse(&attrs.field_selector).is_ok_and(|s| s.requires_exact_match(field) == Some(value))
}

impl Authorizer for NodeAuthorizer {
    fn authorize(&self, attrs: &Attributes) -> Decision {
        let Some(node) = node_identity(&attrs.user) else { return no_opinion("") };
        if node.is_empty() {
            return no_opinion(format!("unknown node for user {:?}", attrs.user.name));
        }
        if attrs.resource_request {
            let decided = match (attrs.api_group.as_str(), attrs.resource.as_str()) {
                ("", "secrets") => Some(self.read_namespaced(node, VertexKind::Secret, attrs)),
                ("", "configmaps") => Some(self.read_namespaced(node, VertexKind::ConfigMap, attrs)),
                ("", "persistentvolumeclaims") if attrs.subresource == "status" => Some(self.status_update(node, VertexKind::Pvc, attrs)),
                ("", "persistentvolumeclaims") => Some(self.get(node, VertexKind::Pvc, attrs)),
                ("", "persistentvolumes") => Some(self.get(node, VertexKind::Pv, attrs)),
                ("resource.k8s.io", "resourceclaims") => Some(self.get(node, VertexKind::ResourceClaim, attrs)),
                ("storage.k8s.io", "volumeattachments") => Some(self.get(node, VertexKind::VolumeAttachment, attrs)),
                ("", "serviceaccounts") => Some(self.service_account(node, attrs)),
                ("coordination.k8s.io", "leases") => Some(Self::own_named(node, attrs, "node lease")),
                ("storage.k8s.io", "csinodes") => Some(Self::own_named(node, attrs, "CSINode")),
                ("resource.k8s.io", "resourceslices") => Some(self.resource_slice(node, attrs)),
                ("", "nodes") => Some(Self::nodes(node, attrs)),
                ("", "pods") => Some(self.pods(node, attrs)),
                _ => None,
            };
            if let Some(decision) = decided {
                return decision;
            }
        }
        // Everything else is not divided by object: the static node rules decide.
        if self.rules.iter().any(|r| rule_allows(attrs, r)) {
            allow()
        } else {
            no_opinion("")
        }
    }
}

#[cfg(test)]
mod tests;
