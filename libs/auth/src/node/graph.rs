//! The Node authorizer's graph (kube's `plugin/pkg/auth/authorizer/node` Graph): which objects
//! lead to which node. kube keeps a general directed graph with every edge pointing towards a
//! node; the relations are few and fixed, so here they are kept as indexes that answer the one
//! question asked, "is there a path from this object to that node":
//!
//! - a pod bound to a node (`spec.nodeName`) leads to it;
//! - a secret, config map, claim, service account or resource claim a (non-mirror) pod refers
//!   to leads to the pod's node;
//! - a persistent volume leads wherever the claim in its `claimRef` leads, and the secrets its
//!   volume source gives the kubelet lead wherever the volume leads;
//! - a volume attachment or resource slice leads to the node it names.
//!
//! Mirror pods lead to their node but grant nothing else: a node must not be able to create a
//! pod that opens other objects to it (NodeRestriction refuses such pods as well).

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::refs;

/// The kinds of objects the graph relates to nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VertexKind {
    /// core/v1 ConfigMap.
    ConfigMap,
    /// core/v1 Pod.
    Pod,
    /// core/v1 PersistentVolumeClaim.
    Pvc,
    /// core/v1 PersistentVolume.
    Pv,
    /// resource.k8s.io ResourceClaim.
    ResourceClaim,
    /// core/v1 Secret.
    Secret,
    /// storage.k8s.io/v1 VolumeAttachment.
    VolumeAttachment,
    /// core/v1 ServiceAccount.
    ServiceAccount,
    /// resource.k8s.io ResourceSlice.
    ResourceSlice,
}

impl VertexKind {
    /// kube's vertex type name, as its log lines name objects.
    pub fn name(self) -> &'static str {
        match self {
            VertexKind::ConfigMap => "configmap",
            VertexKind::Pod => "pod",
            VertexKind::Pvc => "pvc",
            VertexKind::Pv => "pv",
            VertexKind::ResourceClaim => "resourceclaim",
            VertexKind::Secret => "secret",
            VertexKind::VolumeAttachment => "volumeattachment",
            VertexKind::ServiceAccount => "serviceAccount",
            VertexKind::ResourceSlice => "resourceslice",
        }
    }
}

/// The resources the graph is built from (kube's graph populator's informers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// core/v1 pods.
    Pods,
    /// core/v1 persistentvolumes.
    PersistentVolumes,
    /// storage.k8s.io/v1 volumeattachments.
    VolumeAttachments,
    /// resource.k8s.io resourceslices (when served).
    ResourceSlices,
}

impl Source {
    /// Every source.
    pub const ALL: [Source; 4] = [Source::Pods, Source::PersistentVolumes, Source::VolumeAttachments, Source::ResourceSlices];

    /// API group and plural resource name.
    pub fn group_resource(self) -> (&'static str, &'static str) {
        match self {
            Source::Pods => ("", "pods"),
            Source::PersistentVolumes => ("", "persistentvolumes"),
            Source::VolumeAttachments => ("storage.k8s.io", "volumeattachments"),
            Source::ResourceSlices => ("resource.k8s.io", "resourceslices"),
        }
    }
}

type Key = (String, String);

#[derive(Debug)]
struct PodEntry {
    node: String,
    uses: Vec<(VertexKind, String)>,
}

#[derive(Debug)]
struct PvEntry {
    claim: Key,
    secrets: Vec<Key>,
}

/// Objects and the nodes they lead to.
#[derive(Debug, Default)]
pub struct Graph {
    /// Bound pods by (namespace, name).
    pods: HashMap<Key, PodEntry>,
    /// Objects pods use, by kind and (namespace, name): how many pods on each node use them.
    used_by: HashMap<(VertexKind, Key), HashMap<String, usize>>,
    /// Persistent volumes with a claim reference, by name.
    pvs: HashMap<String, PvEntry>,
    /// Volume names by the claim they are bound to.
    pvs_by_claim: HashMap<Key, BTreeSet<String>>,
    /// Volume names by the secrets they give kubelets.
    pvs_by_secret: HashMap<Key, BTreeSet<String>>,
    /// Volume attachments by name: their node.
    attachments: HashMap<String, String>,
    /// Resource slices by name: their node.
    slices: HashMap<String, String>,
}

fn meta(obj: &Value, field: &str) -> String {
    obj.pointer(&format!("/metadata/{field}")).and_then(Value::as_str).unwrap_or("").to_owned()
}

fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Graph::default()
    }

    /// Adds or replaces `obj`, an object of `source`.
    pub fn put(&mut self, source: Source, obj: &Value) {
        let name = meta(obj, "name");
        match source {
            Source::Pods => self.put_pod(obj),
            Source::PersistentVolumes => self.put_pv(obj),
            Source::VolumeAttachments => set_or_remove(&mut self.attachments, name, str_at(obj, "/spec/nodeName")),
            Source::ResourceSlices => set_or_remove(&mut self.slices, name, str_at(obj, "/spec/nodeName")),
        }
    }

    /// Removes `obj`, an object of `source`.
    pub fn delete(&mut self, source: Source, obj: &Value) {
        let name = meta(obj, "name");
        match source {
            Source::Pods => self.delete_pod(&meta(obj, "namespace"), &name),
            Source::PersistentVolumes => self.delete_pv(&name),
            Source::VolumeAttachments => {
                self.attachments.remove(&name);
            }
            Source::ResourceSlices => {
                self.slices.remove(&name);
            }
        }
    }

    /// Forgets every object of `source` (before its cache's state is loaded again).
    pub fn clear(&mut self, source: Source) {
        match source {
            Source::Pods => {
                self.pods.clear();
                self.used_by.clear();
            }
            Source::PersistentVolumes => {
                self.pvs.clear();
                self.pvs_by_claim.clear();
                self.pvs_by_secret.clear();
            }
            Source::VolumeAttachments => self.attachments.clear(),
            Source::ResourceSlices => self.slices.clear(),
        }
    }

    fn put_pod(&mut self, pod: &Value) {
        let (namespace, name) = (meta(pod, "namespace"), meta(pod, "name"));
        self.delete_pod(&namespace, &name);
        let node = str_at(pod, "/spec/nodeName");
        if node.is_empty() {
            return;
        }
        let mut uses = Vec::new();
        if !refs::is_mirror_pod(pod) {
            let account = str_at(pod, "/spec/serviceAccountName");
            if !account.is_empty() {
                uses.push((VertexKind::ServiceAccount, account.to_owned()));
            }
            uses.extend(refs::pod_secret_names(pod).into_iter().map(|n| (VertexKind::Secret, n)));
            uses.extend(refs::pod_configmap_names(pod).into_iter().map(|n| (VertexKind::ConfigMap, n)));
            uses.extend(refs::pod_pvc_names(pod).into_iter().map(|n| (VertexKind::Pvc, n)));
            uses.extend(refs::pod_resource_claim_names(pod).into_iter().map(|n| (VertexKind::ResourceClaim, n)));
        }
        for (kind, used) in &uses {
            *self.used_by.entry((*kind, (namespace.clone(), used.clone()))).or_default().entry(node.to_owned()).or_default() += 1;
        }
        self.pods.insert((namespace, name), PodEntry { node: node.to_owned(), uses });
    }

    fn delete_pod(&mut self, namespace: &str, name: &str) {
        let Some(entry) = self.pods.remove(&(namespace.to_owned(), name.to_owned())) else { return };
        for (kind, used) in entry.uses {
            let key = (kind, (namespace.to_owned(), used));
            let Some(nodes) = self.used_by.get_mut(&key) else { continue };
            if let Some(count) = nodes.get_mut(&entry.node) {
                *count -= 1;
                if *count == 0 {
                    nodes.remove(&entry.node);
                }
            }
            if nodes.is_empty() {
                self.used_by.remove(&key);
            }
        }
    }

    fn put_pv(&mut self, pv: &Value) {
        let name = meta(pv, "name");
        self.delete_pv(&name);
        let claim = (str_at(pv, "/spec/claimRef/namespace").to_owned(), str_at(pv, "/spec/claimRef/name").to_owned());
        if claim.1.is_empty() {
            return;
        }
        let secrets = refs::pv_kubelet_secrets(pv);
        self.pvs_by_claim.entry(claim.clone()).or_default().insert(name.clone());
        for secret in &secrets {
            self.pvs_by_secret.entry(secret.clone()).or_default().insert(name.clone());
        }
        self.pvs.insert(name, PvEntry { claim, secrets });
    }

    fn delete_pv(&mut self, name: &str) {
        let Some(entry) = self.pvs.remove(name) else { return };
        remove_from(&mut self.pvs_by_claim, &entry.claim, name);
        for secret in &entry.secrets {
            remove_from(&mut self.pvs_by_secret, secret, name);
        }
    }

    fn used_on(&self, kind: VertexKind, namespace: &str, name: &str, node: &str) -> bool {
        self.used_by.get(&(kind, (namespace.to_owned(), name.to_owned()))).is_some_and(|nodes| nodes.contains_key(node))
    }

    fn pv_leads_to(&self, pv: &str, node: &str) -> bool {
        self.pvs.get(pv).is_some_and(|e| self.used_on(VertexKind::Pvc, &e.claim.0, &e.claim.1, node))
    }

    /// Whether the object of `kind` named `namespace/name` leads to `node` (kube's
    /// `hasPathFrom`).
    pub fn has_path(&self, node: &str, kind: VertexKind, namespace: &str, name: &str) -> bool {
        match kind {
            VertexKind::Pod => self.pods.get(&(namespace.to_owned(), name.to_owned())).is_some_and(|p| p.node == node),
            VertexKind::Pv => self.pv_leads_to(name, node),
            VertexKind::VolumeAttachment => self.attachments.get(name).is_some_and(|n| n == node),
            VertexKind::ResourceSlice => self.slices.get(name).is_some_and(|n| n == node),
            VertexKind::Secret => {
                self.used_on(kind, namespace, name, node)
                    || self
                        .pvs_by_secret
                        .get(&(namespace.to_owned(), name.to_owned()))
                        .is_some_and(|pvs| pvs.iter().any(|pv| self.pv_leads_to(pv, node)))
            }
            VertexKind::ConfigMap | VertexKind::Pvc | VertexKind::ServiceAccount | VertexKind::ResourceClaim => {
                self.used_on(kind, namespace, name, node)
            }
        }
    }

    /// How many pods, volumes, attachments and slices the graph holds (for tests and logs).
    pub fn counts(&self) -> [usize; 4] {
        [self.pods.len(), self.pvs.len(), self.attachments.len(), self.slices.len()]
    }
}

fn set_or_remove(map: &mut HashMap<String, String>, name: String, node: &str) {
    if node.is_empty() {
        map.remove(&name);
    } else {
        map.insert(name, node.to_owned());
    }
}

fn remove_from(index: &mut HashMap<Key, BTreeSet<String>>, key: &Key, name: &str) {
    if let Some(names) = index.get_mut(key) {
        names.remove(name);
        if names.is_empty() {
            index.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ns: &str, name: &str, node: &str, spec: Value) -> Value {
        let mut spec = spec;
        spec["nodeName"] = json!(node);
        json!({"metadata": {"namespace": ns, "name": name}, "spec": spec})
    }

    #[test]
    fn pods_lead_their_references_to_their_node() {
        let mut g = Graph::new();
        let spec = json!({"serviceAccountName": "sa", "volumes": [{"name": "v", "secret": {"secretName": "s1"}}, {"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
            "containers": [{"envFrom": [{"configMapRef": {"name": "cm"}}]}]});
        g.put(Source::Pods, &pod("a", "web", "node-1", spec.clone()));
        g.put(Source::Pods, &pod("a", "web2", "node-2", spec));
        for (kind, name) in [(VertexKind::Secret, "s1"), (VertexKind::ConfigMap, "cm"), (VertexKind::Pvc, "data"), (VertexKind::ServiceAccount, "sa")]
        {
            assert!(g.has_path("node-1", kind, "a", name), "{kind:?} {name}");
            assert!(g.has_path("node-2", kind, "a", name));
            assert!(!g.has_path("node-3", kind, "a", name));
            assert!(!g.has_path("node-1", kind, "b", name), "other namespace");
        }
        assert!(g.has_path("node-1", VertexKind::Pod, "a", "web"));
        assert!(!g.has_path("node-1", VertexKind::Pod, "a", "web2"));
        // One of two users goes: the other still leads there; both gone, nothing does.
        g.delete(Source::Pods, &json!({"metadata": {"namespace": "a", "name": "web"}}));
        assert!(!g.has_path("node-1", VertexKind::Secret, "a", "s1"));
        assert!(g.has_path("node-2", VertexKind::Secret, "a", "s1"));
        g.delete(Source::Pods, &json!({"metadata": {"namespace": "a", "name": "web2"}}));
        assert!(!g.has_path("node-2", VertexKind::Secret, "a", "s1"));
        assert!(g.used_by.is_empty() && g.pods.is_empty());
    }

    #[test]
    fn rebinding_or_changing_a_pod_replaces_its_edges() {
        let mut g = Graph::new();
        g.put(Source::Pods, &pod("a", "p", "node-1", json!({"volumes": [{"name": "v", "secret": {"secretName": "old"}}]})));
        g.put(Source::Pods, &pod("a", "p", "node-2", json!({"volumes": [{"name": "v", "secret": {"secretName": "new"}}]})));
        assert!(!g.has_path("node-1", VertexKind::Secret, "a", "old"));
        assert!(!g.has_path("node-2", VertexKind::Secret, "a", "old"));
        assert!(g.has_path("node-2", VertexKind::Secret, "a", "new"));
        // Unbound pods lead nowhere.
        g.put(
            Source::Pods,
            &json!({"metadata": {"namespace": "a", "name": "q"}, "spec": {"volumes": [{"name": "v", "secret": {"secretName": "q"}}]}}),
        );
        assert!(!g.has_path("node-1", VertexKind::Secret, "a", "q"));
    }

    #[test]
    fn mirror_pods_grant_nothing_but_themselves() {
        let mut g = Graph::new();
        let mut mirror = pod("a", "static", "node-1", json!({"serviceAccountName": "sa", "volumes": [{"name": "v", "secret": {"secretName": "s"}}]}));
        mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "hash"});
        g.put(Source::Pods, &mirror);
        assert!(g.has_path("node-1", VertexKind::Pod, "a", "static"));
        assert!(!g.has_path("node-1", VertexKind::Secret, "a", "s"));
        assert!(!g.has_path("node-1", VertexKind::ServiceAccount, "a", "sa"));
    }

    #[test]
    fn volumes_follow_their_claims() {
        let mut g = Graph::new();
        let pv = json!({"metadata": {"name": "pv1"}, "spec": {"claimRef": {"namespace": "a", "name": "data"},
            "csi": {"driver": "d", "volumeHandle": "h", "nodeStageSecretRef": {"name": "stage", "namespace": "a"}, "controllerPublishSecretRef": {"name": "ctrl", "namespace": "a"}}}});
        g.put(Source::PersistentVolumes, &pv);
        assert!(!g.has_path("node-1", VertexKind::Pv, "", "pv1"), "no pod uses the claim yet");
        g.put(Source::Pods, &pod("a", "db", "node-1", json!({"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]})));
        assert!(g.has_path("node-1", VertexKind::Pv, "", "pv1"));
        assert!(g.has_path("node-1", VertexKind::Secret, "a", "stage"));
        assert!(!g.has_path("node-1", VertexKind::Secret, "a", "ctrl"), "controller secrets are not the kubelet's");
        assert!(!g.has_path("node-2", VertexKind::Pv, "", "pv1"));
        g.delete(Source::PersistentVolumes, &pv);
        assert!(!g.has_path("node-1", VertexKind::Secret, "a", "stage"));
        assert!(g.pvs_by_claim.is_empty() && g.pvs_by_secret.is_empty());
    }

    #[test]
    fn attachments_and_slices_name_their_node() {
        let mut g = Graph::new();
        g.put(Source::VolumeAttachments, &json!({"metadata": {"name": "va"}, "spec": {"nodeName": "node-1"}}));
        g.put(Source::ResourceSlices, &json!({"metadata": {"name": "rs"}, "spec": {"nodeName": "node-2"}}));
        assert!(g.has_path("node-1", VertexKind::VolumeAttachment, "", "va"));
        assert!(!g.has_path("node-2", VertexKind::VolumeAttachment, "", "va"));
        assert!(g.has_path("node-2", VertexKind::ResourceSlice, "", "rs"));
        g.clear(Source::VolumeAttachments);
        assert!(!g.has_path("node-1", VertexKind::VolumeAttachment, "", "va"));
        assert_eq!(g.counts(), [0, 0, 0, 1]);
    }
}
