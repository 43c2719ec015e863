//! What a Pod or a PersistentVolume refers to, read from stored JSON: the objects a kubelet
//! running the pod must be able to read (kube's `VisitPodSecretNames`,
//! `VisitPodConfigmapNames`, ephemeral-volume and resource-claim naming, and
//! `VisitPVSecretNames`). The Node authorizer's graph and the NodeRestriction admission plugin
//! both decide by these lists, so they live in one place.

use serde_json::Value;

fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn items<'a>(obj: &'a Value, pointer: &str) -> impl Iterator<Item = &'a Value> {
    obj.pointer(pointer).and_then(Value::as_array).into_iter().flatten()
}

fn push(out: &mut Vec<String>, name: &str) {
    if !name.is_empty() && !out.iter().any(|n| n == name) {
        out.push(name.to_owned());
    }
}

/// Every container of the pod: init, regular and ephemeral (kube's `AllContainers`).
fn containers(pod: &Value) -> impl Iterator<Item = &Value> {
    ["/spec/initContainers", "/spec/containers", "/spec/ephemeralContainers"].into_iter().flat_map(move |p| items(pod, p))
}

/// Names of the secrets a pod refers to: image pull secrets, environment of every container
/// and the volume sources that name a secret.
pub fn pod_secret_names(pod: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for s in items(pod, "/spec/imagePullSecrets") {
        push(&mut out, str_at(s, "/name"));
    }
    for c in containers(pod) {
        for e in items(c, "/envFrom") {
            push(&mut out, str_at(e, "/secretRef/name"));
        }
        for e in items(c, "/env") {
            push(&mut out, str_at(e, "/valueFrom/secretKeyRef/name"));
        }
    }
    for v in items(pod, "/spec/volumes") {
        for pointer in [
            "/azureFile/secretName",
            "/cephfs/secretRef/name",
            "/cinder/secretRef/name",
            "/flexVolume/secretRef/name",
            "/rbd/secretRef/name",
            "/secret/secretName",
            "/scaleIO/secretRef/name",
            "/iscsi/secretRef/name",
            "/storageos/secretRef/name",
            "/csi/nodePublishSecretRef/name",
        ] {
            push(&mut out, str_at(v, pointer));
        }
        for s in items(v, "/projected/sources") {
            push(&mut out, str_at(s, "/secret/name"));
        }
    }
    out
}

/// Names of the config maps a pod refers to (environment and volumes).
pub fn pod_configmap_names(pod: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for c in containers(pod) {
        for e in items(c, "/envFrom") {
            push(&mut out, str_at(e, "/configMapRef/name"));
        }
        for e in items(c, "/env") {
            push(&mut out, str_at(e, "/valueFrom/configMapKeyRef/name"));
        }
    }
    for v in items(pod, "/spec/volumes") {
        push(&mut out, str_at(v, "/configMap/name"));
        for s in items(v, "/projected/sources") {
            push(&mut out, str_at(s, "/configMap/name"));
        }
    }
    out
}

/// Names of the claims a pod's volumes use: `persistentVolumeClaim.claimName`, and for an
/// ephemeral volume the claim its controller creates, `<pod>-<volume>`.
pub fn pod_pvc_names(pod: &Value) -> Vec<String> {
    let pod_name = str_at(pod, "/metadata/name");
    let mut out = Vec::new();
    for v in items(pod, "/spec/volumes") {
        if v.get("persistentVolumeClaim").is_some() {
            push(&mut out, str_at(v, "/persistentVolumeClaim/claimName"));
        } else if v.get("ephemeral").is_some() {
            push(&mut out, &format!("{pod_name}-{}", str_at(v, "/name")));
        }
    }
    out
}

/// Whether any volume names a persistent volume claim directly.
pub fn pod_has_pvc_volume(pod: &Value) -> bool {
    items(pod, "/spec/volumes").any(|v| v.get("persistentVolumeClaim").is_some())
}

/// Whether a projected volume takes a ClusterTrustBundle.
pub fn pod_has_cluster_trust_bundle(pod: &Value) -> bool {
    items(pod, "/spec/volumes").any(|v| items(v, "/projected/sources").any(|s| s.get("clusterTrustBundle").is_some()))
}

/// Names of the ResourceClaims a pod uses: those named directly, those generated from a
/// template once `status.resourceClaimStatuses` records them (a template whose claim is not
/// recorded yet grants nothing), and the extended-resource claim.
pub fn pod_resource_claim_names(pod: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for claim in items(pod, "/spec/resourceClaims") {
        let direct = str_at(claim, "/resourceClaimName");
        if !direct.is_empty() {
            push(&mut out, direct);
            continue;
        }
        let entry = str_at(claim, "/name");
        if let Some(status) = items(pod, "/status/resourceClaimStatuses").find(|s| str_at(s, "/name") == entry) {
            push(&mut out, str_at(status, "/resourceClaimName"));
        }
    }
    push(&mut out, str_at(pod, "/status/extendedResourceClaimStatus/resourceClaimName"));
    out
}

/// Whether the pod is a static pod's mirror (`kubernetes.io/config.mirror`).
pub fn is_mirror_pod(pod: &Value) -> bool {
    pod.pointer("/metadata/annotations").and_then(|a| a.get(MIRROR_POD_ANNOTATION)).is_some()
}

/// The annotation that marks a mirror pod.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The secrets (namespace, name) a PersistentVolume gives the kubelet that mounts it: the
/// secret references of its volume source that the kubelet uses, a reference without a
/// namespace meaning the bound claim's namespace. Controller-only CSI secrets are left out.
pub fn pv_kubelet_secrets(pv: &Value) -> Vec<(String, String)> {
    let claim_namespace = str_at(pv, "/spec/claimRef/namespace");
    let mut out: Vec<(String, String)> = Vec::new();
    let mut add = |namespace: &str, name: &str| {
        let namespace = if namespace.is_empty() { claim_namespace } else { namespace };
        if !name.is_empty() && !out.iter().any(|(ns, n)| ns == namespace && n == name) {
            out.push((namespace.to_owned(), name.to_owned()));
        }
    };
    let Some(spec) = pv.get("spec") else { return out };
    add(str_at(spec, "/azureFile/secretNamespace"), str_at(spec, "/azureFile/secretName"));
    for source in ["cephfs", "cinder", "flexVolume", "rbd", "scaleIO", "iscsi", "storageos"] {
        add(str_at(spec, &format!("/{source}/secretRef/namespace")), str_at(spec, &format!("/{source}/secretRef/name")));
    }
    for reference in ["nodePublishSecretRef", "nodeStageSecretRef", "nodeExpandSecretRef"] {
        add(str_at(spec, &format!("/csi/{reference}/namespace")), str_at(spec, &format!("/csi/{reference}/name")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_references() {
        let pod = json!({
            "metadata": {"name": "web"},
            "spec": {
                "imagePullSecrets": [{"name": "pull"}],
                "initContainers": [{"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "init-env", "key": "k"}}}]}],
                "containers": [{"envFrom": [{"configMapRef": {"name": "cm-env"}}, {"secretRef": {"name": "sec-env"}}]}],
                "ephemeralContainers": [{"env": [{"name": "B", "valueFrom": {"configMapKeyRef": {"name": "eph-cm", "key": "k"}}}]}],
                "volumes": [
                    {"name": "s", "secret": {"secretName": "vol"}},
                    {"name": "p", "projected": {"sources": [{"secret": {"name": "proj"}}, {"configMap": {"name": "proj-cm"}}]}},
                    {"name": "c", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                    {"name": "csi", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi-sec"}}}
                ],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}, {"name": "t", "resourceClaimTemplateName": "tpl"}, {"name": "u", "resourceClaimTemplateName": "tpl"}]
            },
            "status": {"resourceClaimStatuses": [{"name": "t", "resourceClaimName": "web-t-abc"}]}
        });
        assert_eq!(pod_secret_names(&pod), ["pull", "init-env", "sec-env", "vol", "proj", "csi-sec"]);
        assert_eq!(pod_configmap_names(&pod), ["cm-env", "eph-cm", "proj-cm"]);
        assert_eq!(pod_pvc_names(&pod), ["data", "web-scratch"]);
        assert_eq!(pod_resource_claim_names(&pod), ["gpu-claim", "web-t-abc"]);
        assert!(pod_has_pvc_volume(&pod));
        assert!(!is_mirror_pod(&pod));
        assert!(is_mirror_pod(&json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}})));
    }

    #[test]
    fn pv_secrets_default_to_the_claim_namespace() {
        let pv = json!({"spec": {
            "claimRef": {"namespace": "apps", "name": "data"},
            "csi": {"driver": "d", "volumeHandle": "h",
                "controllerPublishSecretRef": {"name": "ctrl", "namespace": "x"},
                "nodeStageSecretRef": {"name": "stage", "namespace": "storage"}}
        }});
        assert_eq!(pv_kubelet_secrets(&pv), [("storage".to_owned(), "stage".to_owned())]);
        let rbd = json!({"spec": {"claimRef": {"namespace": "apps", "name": "data"}, "rbd": {"secretRef": {"name": "ceph"}}}});
        assert_eq!(pv_kubelet_secrets(&rbd), [("apps".to_owned(), "ceph".to_owned())]);
    }
}
