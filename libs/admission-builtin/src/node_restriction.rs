//! NodeRestriction (kube's `plugin/pkg/admission/noderestriction`): what the Node authorizer
//! allows a kubelet to write without knowing the object (create a pod, update a Node, create a
//! Lease), this plugin narrows to the kubelet's own objects. A node may only create mirror pods
//! bound to itself that refer to no other API object, delete and evict pods bound to itself,
//! update the status of those pods, modify its own Node without touching taints, config
//! source or labels outside the kubelet's set, hold its own Lease and CSINode, ask for tokens
//! bound to its pods and for certificates naming itself. Requests of other users pass.

use std::collections::BTreeSet;

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::{ApiError, GroupResource};
use kapi_auth::node::{node_identity, refs, NODE_LEASE_NAMESPACE};
use kapi_registry::rest::RestStore;
use serde_json::Value;

use crate::lookup::{self, str_at};

/// The labels a kubelet sets on its own Node (kube's `kubeletapis.KubeletLabels`).
const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];
/// Label namespaces (and their subdomains) a kubelet may set freely.
const KUBELET_LABEL_NAMESPACES: &[&str] = &["kubelet.kubernetes.io", "node.kubernetes.io"];
/// The label namespace reserved for administrators, so that workloads can trust it.
const NODE_RESTRICTION_NAMESPACE: &str = "node-restriction.kubernetes.io";

/// The plugin.
pub struct NodeRestriction {
    rest: RestStore,
}

fn label_namespace(key: &str) -> &str {
    key.split_once('/').map(|(ns, _)| ns).unwrap_or("")
}

fn in_domain(namespace: &str, domain: &str) -> bool {
    namespace == domain || namespace.strip_suffix(domain).is_some_and(|head| head.ends_with('.'))
}

/// Whether a kubelet may set, change or remove the label `key` on its Node.
pub fn kubelet_may_set_label(key: &str) -> bool {
    let namespace = label_namespace(key);
    if in_domain(namespace, NODE_RESTRICTION_NAMESPACE) {
        return false;
    }
    let kubernetes = in_domain(namespace, "kubernetes.io") || in_domain(namespace, "k8s.io");
    !kubernetes || KUBELET_LABELS.contains(&key) || KUBELET_LABEL_NAMESPACES.iter().any(|ns| in_domain(namespace, ns))
}

fn labels(obj: Option<&Value>) -> serde_json::Map<String, Value> {
    obj.and_then(|o| o.pointer("/metadata/labels")).and_then(Value::as_object).cloned().unwrap_or_default()
}

/// The labels added, removed or changed between `old` and `new` that a kubelet may not touch,
/// sorted.
fn forbidden_label_changes(new: Option<&Value>, old: Option<&Value>) -> Vec<String> {
    let (new, old) = (labels(new), labels(old));
    let changed: BTreeSet<&String> =
        new.iter().filter(|(k, v)| old.get(*k) != Some(v)).chain(old.iter().filter(|(k, v)| new.get(*k) != Some(v))).map(|(k, _)| k).collect();
    changed.into_iter().filter(|k| !kubelet_may_set_label(k)).cloned().collect()
}

fn op_name(op: Operation) -> &'static str {
    op.as_str()
}

impl NodeRestriction {
    /// The plugin over `rest`'s pod and node caches.
    pub fn new(rest: RestStore) -> Self {
        NodeRestriction { rest }
    }

    /// A pod from the cache; kube's "not found" when absent.
    fn pod(&self, namespace: &str, name: &str) -> Result<std::sync::Arc<Value>, ApiError> {
        let spec = lookup::spec("", "v1", "pods")?;
        lookup::get(&self.rest, spec, Some(namespace), name).ok_or_else(|| ApiError::not_found(&GroupResource::new("", "pods"), name))
    }

    fn admit_pod(&self, node: &str, attrs: &Attributes) -> Result<(), ApiError> {
        match attrs.operation {
            Operation::Create => self.admit_pod_create(node, attrs),
            Operation::Delete => {
                let existing = match attrs.old_object.as_ref() {
                    Some(old) => old.clone(),
                    None => (*self.pod(&attrs.namespace, &attrs.name)?).clone(),
                };
                if str_at(&existing, "/spec/nodeName") != node {
                    return Err(attrs.forbidden(&format!("node {node:?} can only delete pods with spec.nodeName set to itself")));
                }
                Ok(())
            }
            op => Err(attrs.forbidden(&format!("unexpected operation {:?}, node {node:?} can only create and delete mirror pods", op_name(op)))),
        }
    }

    fn admit_pod_create(&self, node: &str, attrs: &Attributes) -> Result<(), ApiError> {
        let pod = attrs.object.as_ref().ok_or_else(|| attrs.forbidden("unexpected type <nil>"))?;
        check_mirror_pod(node, pod).map_err(|reason| attrs.forbidden(&reason))?;
        // The owner must be this very Node, not an older one of the same name.
        let owner = pod.pointer("/metadata/ownerReferences/0").cloned().unwrap_or_default();
        let spec = lookup::spec("", "v1", "nodes")?;
        let registered = lookup::get(&self.rest, spec, None, node).ok_or_else(|| ApiError::not_found(&GroupResource::new("", "nodes"), node))?;
        let (want, got) = (str_at(&owner, "/uid"), str_at(&registered, "/metadata/uid"));
        if want != got {
            return Err(attrs.forbidden(&format!("node {node} UID mismatch: expected {want} got {got}")));
        }
        check_pod_references(node, pod).map_err(|reason| attrs.forbidden(&reason))
    }

    fn admit_eviction(&self, node: &str, attrs: &Attributes) -> Result<(), ApiError> {
        if attrs.operation != Operation::Create {
            return Err(attrs.forbidden(&format!("unexpected operation {}", op_name(attrs.operation))));
        }
        let mut pod_name = attrs.name.as_str();
        if pod_name.is_empty() {
            pod_name = attrs.object.as_ref().map(|e| str_at(e, "/metadata/name")).unwrap_or_default();
            if pod_name.is_empty() {
                return Err(attrs.forbidden("could not determine pod from request data"));
            }
        }
        let pod = self.pod(&attrs.namespace, pod_name)?;
        if str_at(&pod, "/spec/nodeName") != node {
            return Err(attrs.forbidden(&format!("node {node} can only evict pods with spec.nodeName set to itself")));
        }
        Ok(())
    }

    fn admit_token_request(&self, node: &str, attrs: &Attributes) -> Result<(), ApiError> {
        if attrs.operation != Operation::Create || attrs.subresource != "token" {
            return Ok(());
        }
        let request = attrs.object.clone().unwrap_or_default();
        let reference = request.pointer("/spec/boundObjectRef").cloned().unwrap_or_default();
        let bound_to_pod =
            str_at(&reference, "/apiVersion") == "v1" && str_at(&reference, "/kind") == "Pod" && !str_at(&reference, "/name").is_empty();
        if !bound_to_pod {
            return Err(attrs.forbidden("node requested token not bound to a pod"));
        }
        let uid = str_at(&reference, "/uid");
        if uid.is_empty() {
            return Err(attrs.forbidden("node requested token with a pod binding without a uid"));
        }
        let pod = self.pod(&attrs.namespace, str_at(&reference, "/name"))?;
        if uid != str_at(&pod, "/metadata/uid") {
            return Err(attrs.forbidden(&format!(
                "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
            )));
        }
        if str_at(&pod, "/spec/nodeName") != node {
            return Err(attrs.forbidden("node requested token bound to a pod scheduled on a different node"));
        }
        Ok(())
    }
}

/// kube's checks of a mirror pod a node creates, up to the owner's UID: the mirror annotation,
/// bound to the node, one controller owner reference to the node without blockOwnerDeletion.
fn check_mirror_pod(node: &str, pod: &Value) -> Result<(), String> {
    if !refs::is_mirror_pod(pod) {
        return Err(format!("pod does not have {:?} annotation, node {node:?} can only create mirror pods", refs::MIRROR_POD_ANNOTATION));
    }
    if str_at(pod, "/spec/nodeName") != node {
        return Err(format!("node {node:?} can only create pods with spec.nodeName set to itself"));
    }
    let owners = pod.pointer("/metadata/ownerReferences").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    match owners {
        [] => Err(format!("node {node:?} can only create pods with an owner reference set to itself")),
        [owner] => {
            if str_at(owner, "/apiVersion") != "v1" || str_at(owner, "/kind") != "Node" || str_at(owner, "/name") != node {
                return Err(format!("node {node:?} can only create pods with an owner reference set to itself"));
            }
            if owner.get("controller").and_then(Value::as_bool) != Some(true) {
                return Err(format!("node {node:?} can only create pods with a controller owner reference set to itself"));
            }
            if owner.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true) {
                return Err(format!("node {node:?} must not set blockOwnerDeletion on an owner reference"));
            }
            Ok(())
        }
        _ => Err(format!("node {node:?} can only create pods with a single owner reference set to itself")),
    }
}

/// A mirror pod may refer to no other API object: it would open that object to the node.
fn check_pod_references(node: &str, pod: &Value) -> Result<(), String> {
    let refers = |what: &str| Err(format!("node {node:?} can not create pods that reference {what}"));
    if !str_at(pod, "/spec/serviceAccountName").is_empty() {
        return refers("a service account");
    }
    if !refs::pod_secret_names(pod).is_empty() {
        return refers("secrets");
    }
    if !refs::pod_configmap_names(pod).is_empty() {
        return refers("configmaps");
    }
    if refs::pod_has_cluster_trust_bundle(pod) {
        return refers("clustertrustbundles");
    }
    if refs::pod_has_pvc_volume(pod) {
        return refers("persistentvolumeclaims");
    }
    Ok(())
}

/// Updates of a pod's status: only for pods bound to the node, and without changing labels or
/// the claims the pod's status records (they open resource claims to the node).
fn check_pod_status(node: &str, attrs: &Attributes) -> Result<(), String> {
    if attrs.operation != Operation::Update {
        return Err(format!("unexpected operation {:?}", op_name(attrs.operation)));
    }
    let (old, new) = (attrs.old_object.as_ref(), attrs.object.as_ref());
    if old.map(|o| str_at(o, "/spec/nodeName")) != Some(node) {
        return Err(format!("node {node:?} can only update pod status for pods with spec.nodeName set to itself"));
    }
    if labels(old) != labels(new) {
        return Err(format!("node {node:?} cannot update labels through pod status"));
    }
    let claims = |p: Option<&Value>| -> Vec<(String, Option<String>)> {
        p.and_then(|p| p.pointer("/status/resourceClaimStatuses"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|s| (str_at(s, "/name").to_owned(), s.get("resourceClaimName").and_then(Value::as_str).map(str::to_owned)))
            .collect()
    };
    if claims(old) != claims(new) {
        return Err(format!("node {node:?} cannot update resource claim statues"));
    }
    Ok(())
}

/// A node updating a claim's status may change only its capacity, conditions and allocated
/// resources (kube compares everything else, resourceVersion and managedFields aside).
fn check_pvc_status(node: &str, attrs: &Attributes) -> Result<(), String> {
    if attrs.operation != Operation::Update {
        return Err(format!("unexpected operation {:?}", op_name(attrs.operation)));
    }
    let strip = |obj: Option<&Value>| {
        let mut obj = obj.cloned().unwrap_or_default();
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            meta.remove("managedFields");
        }
        if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
            for field in ["capacity", "conditions", "allocatedResourceStatuses", "allocatedResources"] {
                status.remove(field);
            }
        }
        obj
    };
    let (old, new) = (strip(attrs.old_object.as_ref()), strip(attrs.object.as_ref()));
    if old != new {
        let top = |v: &Value| v.as_object().map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>()).unwrap_or_default();
        let differing: BTreeSet<String> = top(&old).into_iter().chain(top(&new)).filter(|(k, _)| old.get(k) != new.get(k)).map(|(k, _)| k).collect();
        return Err(format!(
            "node {node:?} is not allowed to update fields other than status.capacity and status.conditions: {}",
            differing.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(())
}

/// A node's writes to Node objects: only its own, no config source, no taint changes, and only
/// the labels a kubelet may set.
fn check_node(node: &str, attrs: &Attributes) -> Result<(), String> {
    let requested = if attrs.name.is_empty() { attrs.object.as_ref().map(|o| str_at(o, "/metadata/name")).unwrap_or_default() } else { &attrs.name };
    if requested != node {
        return Err(format!("node {node:?} is not allowed to modify node {requested:?}"));
    }
    let (new, old) = (attrs.object.as_ref(), attrs.old_object.as_ref());
    let config_source = |n: Option<&Value>| n.and_then(|n| n.pointer("/spec/configSource")).filter(|v| !v.is_null()).cloned();
    match attrs.operation {
        Operation::Create => {
            if config_source(new).is_some() {
                return Err(format!("node {node:?} is not allowed to create pods with a non-nil configSource"));
            }
            let forbidden = forbidden_label_changes(new, None);
            if !forbidden.is_empty() {
                return Err(format!("node {node:?} is not allowed to set the following labels: {}", forbidden.join(", ")));
            }
        }
        Operation::Update => {
            if config_source(new).is_some_and(|c| Some(c) != config_source(old)) {
                return Err(format!("node {node:?} is not allowed to update configSource to a new non-nil configSource"));
            }
            let taints =
                |n: Option<&Value>| n.and_then(|n| n.pointer("/spec/taints")).filter(|t| t.as_array().is_some_and(|a| !a.is_empty())).cloned();
            if taints(new) != taints(old) {
                return Err(format!("node {node:?} is not allowed to modify taints"));
            }
            let forbidden = forbidden_label_changes(new, old);
            if !forbidden.is_empty() {
                return Err(format!("is not allowed to modify labels: {}", forbidden.join(", ")));
            }
        }
        _ => {}
    }
    Ok(())
}

/// Leases and CSINodes a node holds: its own name (and for leases, the node-lease namespace).
fn check_own_named(node: &str, attrs: &Attributes, what: &str) -> Result<(), String> {
    if what == "node lease" && attrs.namespace != NODE_LEASE_NAMESPACE {
        return Err(format!("can only access leases in the \"{NODE_LEASE_NAMESPACE}\" system namespace"));
    }
    let name = match attrs.operation {
        Operation::Create => attrs.object.as_ref().map(|o| str_at(o, "/metadata/name")).unwrap_or_default(),
        _ => attrs.name.as_str(),
    };
    if name != node {
        return Err(format!("can only access {what} with the same name as the requesting node"));
    }
    Ok(())
}

/// Certificate requests for the kubelet signers must name the node itself.
fn check_csr(node: &str, attrs: &Attributes) -> Result<(), String> {
    if attrs.operation != Operation::Create || !attrs.subresource.is_empty() {
        return Ok(());
    }
    let csr = attrs.object.clone().unwrap_or_default();
    let signer = str_at(&csr, "/spec/signerName");
    if signer != "kubernetes.io/kubelet-serving" && signer != "kubernetes.io/kube-apiserver-client-kubelet" {
        return Ok(());
    }
    let common_name = csr_common_name(str_at(&csr, "/spec/request")).map_err(|e| format!("unable to parse csr: {e}"))?;
    if common_name != format!("system:node:{node}") {
        return Err(format!("can only create a node CSR with CN=system:node:{node}"));
    }
    Ok(())
}

/// The subject common name of `spec.request` (base64 of a PEM `CERTIFICATE REQUEST`).
fn csr_common_name(request: &str) -> Result<String, String> {
    use base64::Engine;
    use x509_parser::prelude::FromDer;
    let pem = base64::engine::general_purpose::STANDARD.decode(request).map_err(|e| e.to_string())?;
    let block = x509_parser::pem::parse_x509_pem(&pem).ok().map(|(_, block)| block);
    let Some(block) = block.filter(|b| b.label == "CERTIFICATE REQUEST") else {
        return Err("PEM block type must be CERTIFICATE REQUEST".into());
    };
    let (_, csr) = x509_parser::certification_request::X509CertificationRequest::from_der(&block.contents).map_err(|e| e.to_string())?;
    let subject = &csr.certification_request_info.subject;
    let common_name = subject.iter_common_name().next().and_then(|cn| cn.as_str().ok()).unwrap_or_default().to_owned();
    Ok(common_name)
}

fn resource_slice(node: &str, attrs: &Attributes) -> Result<(), String> {
    let (object, verb) = match attrs.operation {
        Operation::Create => (attrs.object.as_ref(), "create"),
        Operation::Delete => (attrs.old_object.as_ref(), "delete"),
        _ => return Ok(()),
    };
    if object.map(|s| str_at(s, "/spec/nodeName")) != Some(node) {
        return Err(format!("can only {verb} ResourceSlice with the same NodeName as the requesting node"));
    }
    Ok(())
}

#[async_trait]
impl AdmissionPlugin for NodeRestriction {
    fn name(&self) -> &'static str {
        "NodeRestriction"
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update | Operation::Delete)
    }

    async fn admit(&self, attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        let Some(node) = node_identity(&attrs.user) else { return Ok(()) };
        if node.is_empty() {
            return Err(attrs.forbidden(&format!("could not determine node from user {:?}", attrs.user.name)));
        }
        let node = node.to_owned();
        let attrs = &*attrs;
        let reason = |r: Result<(), String>| r.map_err(|reason| attrs.forbidden(&reason));
        match (attrs.resource.group.as_str(), attrs.resource.name.as_str(), attrs.subresource.as_str()) {
            ("", "pods", "") => self.admit_pod(&node, attrs),
            ("", "pods", "status") => reason(check_pod_status(&node, attrs)),
            ("", "pods", "eviction") => self.admit_eviction(&node, attrs),
            ("", "pods", other) => Err(attrs.forbidden(&format!("unexpected pod subresource {other:?}, only 'status' and 'eviction' are allowed"))),
            ("", "nodes", _) => reason(check_node(&node, attrs)),
            ("", "persistentvolumeclaims", "status") => reason(check_pvc_status(&node, attrs)),
            ("", "persistentvolumeclaims", _) => Err(attrs.forbidden("may only update PVC status")),
            ("", "serviceaccounts", _) => self.admit_token_request(&node, attrs),
            ("coordination.k8s.io", "leases", _) => reason(check_own_named(&node, attrs, "node lease")),
            ("storage.k8s.io", "csinodes", _) => reason(check_own_named(&node, attrs, "CSINode")),
            ("resource.k8s.io", "resourceslices", _) => reason(resource_slice(&node, attrs)),
            ("certificates.k8s.io", "certificatesigningrequests", _) => reason(check_csr(&node, attrs)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
#[path = "node_restriction_tests.rs"]
mod tests;
