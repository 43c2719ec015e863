//! kube's per-kind registry answers, written down independently of kapi's table (from
//! kubernetes/kubernetes `pkg/registry/*/*/strategy.go` and `storage/storage.go`, and kube's
//! published OpenAPI for the declared DELETE answers), with a minimal valid object per kind.

use serde_json::{json, Value};

/// When `metadata.generation` is set and bumped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gen {
    /// Never set by the server (the client sent none), never bumped.
    Pinned,
    /// 1 on create, never bumped (PriorityClass).
    CreateOnly,
    /// 1 on create, +1 on a spec change.
    Spec,
    /// 1, +1 on a spec or annotation change (Deployment).
    SpecOrAnnotations,
    /// 1, +1 on any change outside metadata or a label change (EndpointSlice).
    ContentOrLabels,
}

/// One served kind and what kube answers for it.
#[derive(Debug, Clone)]
pub struct Kind {
    pub gv: &'static str,
    pub resource: &'static str,
    pub kind: &'static str,
    /// Object name (default `sem-<resource>`) and the name of the missing object a PUT targets.
    pub name: String,
    pub put_name: String,
    /// The object without apiVersion, kind and metadata.name.
    pub body: Value,
    /// A status to send on create and on a later update, and its pointer.
    pub status: Option<(Value, &'static str)>,
    /// kube keeps the status sent on create (Node, ServiceCIDR).
    pub status_kept_on_create: bool,
    /// A main-resource update takes status from the request (ServiceCIDR).
    pub status_from_update: bool,
    pub create_on_update: bool,
    pub unconditional_update: bool,
    pub gen: Gen,
    /// A merge into the object that counts as a spec change.
    pub change: Option<Value>,
    /// DELETE of a deleted object answers the object (ReturnDeletedObject).
    pub delete_object: bool,
    /// What kube's OpenAPI declares for DELETE: the object (true) or Status.
    pub openapi_object: bool,
    /// DELETE only marks the object (finalizers): the answer is the object for every kind.
    pub pending_delete: bool,
}

fn k(gv: &'static str, resource: &'static str, kind: &'static str, body: Value) -> Kind {
    let name = format!("sem-{resource}");
    Kind {
        gv,
        resource,
        kind,
        put_name: format!("{name}-put"),
        name,
        body,
        status: None,
        status_kept_on_create: false,
        status_from_update: false,
        create_on_update: false,
        unconditional_update: true,
        gen: Gen::Pinned,
        change: None,
        delete_object: false,
        openapi_object: false,
        pending_delete: false,
    }
}

impl Kind {
    fn status(mut self, status: Value, pointer: &'static str) -> Self {
        self.status = Some((status, pointer));
        self
    }
    fn acou(mut self) -> Self {
        self.create_on_update = true;
        self
    }
    fn conditional(mut self) -> Self {
        self.unconditional_update = false;
        self
    }
    fn generation(mut self, gen: Gen) -> Self {
        self.gen = gen;
        self
    }
    fn change(mut self, change: Value) -> Self {
        self.change = Some(change);
        self
    }
    fn returns(mut self) -> Self {
        self.delete_object = true;
        self.openapi_object = true;
        self
    }
    fn named(mut self, name: &str, put_name: &str) -> Self {
        self.name = name.into();
        self.put_name = put_name.into();
        self
    }
}

/// Key material the certificate kinds need, made with openssl by the test.
pub struct Crypto {
    /// A PEM certificate (ClusterTrustBundle).
    pub ca_pem: String,
    /// A base64 PEM certificate request (CertificateSigningRequest).
    pub csr_b64: String,
    /// Base64 DER public key and proof of possession over `pod_uid` (PodCertificateRequest).
    pub pkix_b64: String,
    pub proof_b64: String,
    pub pod_uid: String,
}

fn containers() -> Value {
    json!([{"name": "c", "image": "busybox"}])
}

fn template(labels: &Value) -> Value {
    json!({"metadata": {"labels": labels}, "spec": {"containers": containers()}})
}

fn image(path: &[&str]) -> Value {
    // A merge that replaces the container list with one of another image, under `path`.
    let mut v = json!({"containers": [{"name": "c", "image": "busybox:latest"}]});
    for p in path.iter().rev() {
        v = json!({ *p: v });
    }
    v
}

/// Every served kind with a create verb, as kube's registry answers.
pub fn kinds(ns: &str, c: &Crypto) -> Vec<Kind> {
    let app = json!({"app": "sem"});
    let sel = json!({"matchLabels": {"app": "sem"}});
    let cond = |t: &str| json!({"conditions": [{"type": t, "status": "True", "reason": "Marker", "message": "m", "lastTransitionTime": "2020-01-01T00:00:00Z"}]});
    let pod_template = template(&app);
    let job_template = json!({"spec": {"containers": containers(), "restartPolicy": "Never"}});
    let rules = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]);
    let binding = json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "sem", "apiGroup": "rbac.authorization.k8s.io"}]});
    let nothing = json!([{"apiGroups": ["sem.example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["nothing"]}]);
    let webhooks = json!({"webhooks": [{"name": "sem.example.com", "clientConfig": {"url": "https://sem.example.com/hook"},
        "rules": nothing, "sideEffects": "None", "admissionReviewVersions": ["v1"]}]});
    let webhooks_changed = json!({"webhooks": [{"name": "sem2.example.com", "clientConfig": {"url": "https://sem.example.com/hook"},
        "rules": nothing, "sideEffects": "None", "admissionReviewVersions": ["v1"]}]});
    let subjects2 = json!({"subjects": [{"kind": "User", "name": "sem2", "apiGroup": "rbac.authorization.k8s.io"}]});
    let hpa_target = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"});
    use Gen::*;
    vec![
        k("v1", "configmaps", "ConfigMap", json!({"data": {"a": "b"}})).change(json!({"data": {"a": "c"}})),
        k("v1", "endpoints", "Endpoints", json!({"subsets": []}))
            .acou()
            .change(json!({"subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]})),
        k("v1", "events", "Event", json!({"involvedObject": {"kind": "Pod", "name": "p", "namespace": ns}, "reason": "R", "message": "m", "type": "Normal"}))
            .acou()
            .change(json!({"message": "m2"})),
        k("v1", "limitranges", "LimitRange", json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]}}))
            .acou()
            .change(json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}}]}})),
        k("v1", "namespaces", "Namespace", json!({})).status(json!({"phase": "Terminating"}), "/status/phase").returns().open_api_status().pending(),
        k("v1", "nodes", "Node", json!({}))
            .status(json!({"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}), "/status/capacity")
            .kept_on_create()
            .change(json!({"spec": {"unschedulable": true}})),
        k("v1", "persistentvolumeclaims", "PersistentVolumeClaim",
            json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
            .status(json!({"phase": "Bound"}), "/status/phase")
            .returns(),
        k("v1", "persistentvolumes", "PersistentVolume",
            json!({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/sem"}}}))
            .status(json!({"phase": "Bound"}), "/status/phase")
            .change(json!({"spec": {"persistentVolumeReclaimPolicy": "Delete"}}))
            .returns(),
        // No token volume: the spec change replaces the container list, which against kube too
        // would drop the mount ServiceAccount admission adds (a 422).
        k("v1", "pods", "Pod", json!({"spec": {"containers": containers(), "automountServiceAccountToken": false}}))
            .status(json!({"phase": "Running", "message": "marker"}), "/status/message")
            .generation(Spec)
            .change(image(&["spec"]))
            .returns(),
        k("v1", "podtemplates", "PodTemplate", json!({"template": pod_template})).change(json!({"template": image(&["spec"])})).returns(),
        k("v1", "replicationcontrollers", "ReplicationController",
            json!({"spec": {"replicas": 1, "selector": app, "template": pod_template}}))
            .status(json!({"replicas": 7}), "/status/replicas")
            .generation(Spec)
            .change(json!({"spec": {"replicas": 2}}))
            // kube's default garbage collection policy for v1 ReplicationControllers is to
            // orphan: the DELETE leaves it pending behind the orphan finalizer.
            .pending(),
        k("v1", "resourcequotas", "ResourceQuota", json!({"spec": {"hard": {"pods": "10"}}}))
            .status(json!({"hard": {"pods": "5"}}), "/status/hard")
            .change(json!({"spec": {"hard": {"pods": "11"}}}))
            .returns(),
        k("v1", "secrets", "Secret", json!({"data": {"a": "Yg=="}})).change(json!({"data": {"a": "Yw=="}})),
        k("v1", "serviceaccounts", "ServiceAccount", json!({})).change(json!({"automountServiceAccountToken": false})).returns(),
        k("v1", "services", "Service", json!({"spec": {"ports": [{"port": 80}]}}))
            .status(json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}), "/status/loadBalancer/ingress")
            .acou()
            .change(json!({"spec": {"ports": [{"port": 81}]}}))
            .returns(),
        k("apiregistration.k8s.io/v1", "apiservices", "APIService",
            json!({"spec": {"group": "sem.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 100}}))
            .named("v1.sem.example.com", "v2.sem.example.com")
            .status(cond("Marker"), "/status/conditions")
            .conditional()
            .change(json!({"spec": {"versionPriority": 101}})),
        k("apps/v1", "controllerrevisions", "ControllerRevision", json!({"revision": 1, "data": {}})).change(json!({"revision": 2})),
        k("apps/v1", "daemonsets", "DaemonSet", json!({"spec": {"selector": sel, "template": pod_template}}))
            .status(json!({"currentNumberScheduled": 7, "numberMisscheduled": 0, "desiredNumberScheduled": 7, "numberReady": 7}), "/status/currentNumberScheduled")
            .generation(Spec)
            .change(json!({"spec": {"template": image(&["spec"])}})),
        k("apps/v1", "deployments", "Deployment", json!({"spec": {"replicas": 1, "selector": sel, "template": pod_template}}))
            .status(json!({"replicas": 7}), "/status/replicas")
            .generation(SpecOrAnnotations)
            .change(json!({"spec": {"replicas": 2}})),
        k("apps/v1", "replicasets", "ReplicaSet", json!({"spec": {"replicas": 1, "selector": sel, "template": pod_template}}))
            .status(json!({"replicas": 7}), "/status/replicas")
            .generation(Spec)
            .change(json!({"spec": {"replicas": 2}})),
        k("apps/v1", "statefulsets", "StatefulSet", json!({"spec": {"replicas": 1, "serviceName": "sem", "selector": sel, "template": pod_template}}))
            .status(json!({"replicas": 7}), "/status/replicas")
            .generation(Spec)
            .change(json!({"spec": {"replicas": 2}})),
        k("events.k8s.io/v1", "events", "Event", json!({"eventTime": "2024-01-01T00:00:00.000000Z", "reportingController": "example.com/sem",
            "reportingInstance": "sem-1", "action": "Act", "reason": "R", "type": "Normal", "note": "n",
            "regarding": {"kind": "Pod", "name": "p", "namespace": ns}}))
            .named("sem-events-new", "sem-events-new-put")
            .acou()
            .change(json!({"note": "n2"})),
        k("autoscaling/v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler",
            json!({"spec": {"scaleTargetRef": hpa_target, "minReplicas": 1, "maxReplicas": 3}}))
            .status(json!({"currentReplicas": 7, "desiredReplicas": 7}), "/status/currentReplicas")
            .generation(Spec)
            .change(json!({"spec": {"maxReplicas": 4}})),
        k("autoscaling/v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler", json!({"spec": {"scaleTargetRef": hpa_target, "maxReplicas": 3}}))
            .named("sem-hpa-v1", "sem-hpa-v1-put")
            .status(json!({"currentReplicas": 7, "desiredReplicas": 7}), "/status/currentReplicas")
            .generation(Spec)
            .change(json!({"spec": {"maxReplicas": 4}})),
        k("batch/v1", "cronjobs", "CronJob", json!({"spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": job_template}}}}))
            .status(json!({"lastScheduleTime": "2020-01-01T00:00:00Z"}), "/status/lastScheduleTime")
            .generation(Spec)
            .change(json!({"spec": {"schedule": "*/6 * * * *"}})),
        k("batch/v1", "jobs", "Job", json!({"spec": {"template": job_template}}))
            .status(json!({"succeeded": 7}), "/status/succeeded")
            .generation(Spec)
            .change(json!({"spec": {"activeDeadlineSeconds": 100}}))
            // batch/v1 Jobs orphan their pods by default (the orphan finalizer keeps it).
            .pending(),
        k("certificates.k8s.io/v1", "certificatesigningrequests", "CertificateSigningRequest",
            json!({"spec": {"request": c.csr_b64, "signerName": "example.com/sem", "usages": ["digital signature"]}}))
            .status(cond("Approved"), "/status/conditions"),
        k("certificates.k8s.io/v1", "clustertrustbundles", "ClusterTrustBundle", json!({"spec": {"trustBundle": c.ca_pem}})).conditional(),
        k("certificates.k8s.io/v1", "podcertificaterequests", "PodCertificateRequest", json!({"spec": {
            "signerName": "example.com/sem", "podName": "p", "podUID": c.pod_uid, "serviceAccountName": "default",
            "serviceAccountUID": "00000000-0000-0000-0000-000000000002", "nodeName": "n1", "nodeUID": "00000000-0000-0000-0000-000000000003",
            "maxExpirationSeconds": 86400, "pkixPublicKey": c.pkix_b64, "proofOfPossession": c.proof_b64}}))
            .status(cond("Issued"), "/status/conditions")
            .conditional(),
        k("networking.k8s.io/v1", "ingressclasses", "IngressClass", json!({"spec": {"controller": "example.com/sem"}}))
            .generation(Spec)
            .change(json!({"spec": {"parameters": {"apiGroup": "example.com", "kind": "P", "name": "p"}}})),
        k("networking.k8s.io/v1", "ingresses", "Ingress", json!({"spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}}))
            .status(json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}), "/status/loadBalancer/ingress")
            .generation(Spec)
            .change(json!({"spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 81}}}}})),
        k("networking.k8s.io/v1", "ipaddresses", "IPAddress",
            json!({"spec": {"parentRef": {"group": "", "resource": "services", "name": "s", "namespace": ns}}}))
            .named("10.250.0.77", "10.250.0.78"),
        k("networking.k8s.io/v1", "networkpolicies", "NetworkPolicy", json!({"spec": {"podSelector": {}}}))
            .generation(Spec)
            .change(json!({"spec": {"podSelector": {"matchLabels": {"app": "sem"}}}})),
        k("networking.k8s.io/v1", "servicecidrs", "ServiceCIDR", json!({"spec": {"cidrs": ["10.250.1.0/24"]}}))
            .status(cond("Ready"), "/status/conditions")
            .kept_on_create()
            .status_taken_on_update(),
        k("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", json!({"spec": {"minAvailable": 1, "selector": sel}}))
            .status(json!({"currentHealthy": 7, "desiredHealthy": 7, "disruptionsAllowed": 7, "expectedPods": 7}), "/status/currentHealthy")
            .generation(Spec)
            .conditional()
            .change(json!({"spec": {"minAvailable": 2}})),
        k("rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", binding.clone()).acou().change(subjects2.clone()),
        k("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", json!({"rules": rules})).acou().change(json!({"rules": []})),
        k("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", binding).acou().change(subjects2),
        k("rbac.authorization.k8s.io/v1", "roles", "Role", json!({"rules": rules})).acou().change(json!({"rules": []})),
        k("storage.k8s.io/v1", "csidrivers", "CSIDriver", json!({"spec": {"attachRequired": true}}))
            .named("sem.csi.example.com", "sem2.csi.example.com")
            .generation(Spec)
            .conditional()
            .change(json!({"spec": {"requiresRepublish": true}}))
            .returns(),
        k("storage.k8s.io/v1", "csinodes", "CSINode", json!({"spec": {"drivers": []}}))
            .conditional()
            .change(json!({"spec": {"drivers": [{"name": "sem.csi.example.com", "nodeID": "n1"}]}}))
            .returns(),
        k("storage.k8s.io/v1", "csistoragecapacities", "CSIStorageCapacity", json!({"storageClassName": "standard", "capacity": "1Gi"}))
            .conditional()
            .change(json!({"capacity": "2Gi"})),
        k("storage.k8s.io/v1", "storageclasses", "StorageClass", json!({"provisioner": "example.com/sem"}))
            .change(json!({"allowVolumeExpansion": true}))
            .returns(),
        k("storage.k8s.io/v1", "volumeattachments", "VolumeAttachment",
            json!({"spec": {"attacher": "sem.csi.example.com", "nodeName": "n1", "source": {"persistentVolumeName": "pv1"}}}))
            .status(json!({"attached": true, "attachmentMetadata": {"m": "1"}}), "/status/attachmentMetadata")
            .conditional()
            .returns(),
        k("storage.k8s.io/v1", "volumeattributesclasses", "VolumeAttributesClass", json!({"driverName": "sem.csi.example.com", "parameters": {"a": "b"}})).returns(),
        k("admissionregistration.k8s.io/v1", "mutatingadmissionpolicies", "MutatingAdmissionPolicy", json!({"spec": {
            "matchConstraints": {"resourceRules": nothing}, "reinvocationPolicy": "Never", "failurePolicy": "Fail",
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{}"}}]}}))
            .named("sem-map", "sem-map-put")
            .generation(Spec)
            .conditional()
            .change(json!({"spec": {"reinvocationPolicy": "IfNeeded"}})),
        k("admissionregistration.k8s.io/v1", "mutatingadmissionpolicybindings", "MutatingAdmissionPolicyBinding", json!({"spec": {"policyName": "sem-map"}}))
            .generation(Spec)
            .conditional()
            .change(json!({"spec": {"policyName": "sem-map2"}})),
        k("admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", webhooks.clone())
            .generation(Spec)
            .conditional()
            .change(webhooks_changed.clone()),
        k("admissionregistration.k8s.io/v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", json!({"spec": {
            "matchConstraints": {"resourceRules": nothing}, "validations": [{"expression": "true"}]}}))
            .named("sem-vap", "sem-vap-put")
            .status(json!({"observedGeneration": 7}), "/status/observedGeneration")
            .generation(Spec)
            .conditional()
            .change(json!({"spec": {"validations": [{"expression": "1 == 1"}]}})),
        k("admissionregistration.k8s.io/v1", "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding",
            json!({"spec": {"policyName": "sem-vap", "validationActions": ["Deny"]}}))
            .generation(Spec)
            .conditional()
            .change(json!({"spec": {"policyName": "sem-vap2"}})),
        k("admissionregistration.k8s.io/v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", webhooks)
            .generation(Spec)
            .conditional()
            .change(webhooks_changed),
        k("apiextensions.k8s.io/v1", "customresourcedefinitions", "CustomResourceDefinition", json!({"spec": {
            "group": "sem.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}))
            .named("widgets.sem.example.com", "gadgets.sem.example.com")
            .status(json!({"storedVersions": ["v9"]}), "/status/storedVersions")
            .generation(Spec)
            .change(json!({"spec": {"names": {"categories": ["sem"]}}}))
            .pending(),
        k("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", json!({"value": 1000}))
            .generation(CreateOnly)
            .change(json!({"description": "changed"})),
        k("coordination.k8s.io/v1", "leases", "Lease", json!({"spec": {"holderIdentity": "a"}}))
            .acou()
            .conditional()
            .change(json!({"spec": {"holderIdentity": "b"}})),
        k("node.k8s.io/v1", "runtimeclasses", "RuntimeClass", json!({"handler": "sem"}))
            .acou()
            .conditional()
            .change(json!({"scheduling": {"nodeSelector": {"a": "b"}}})),
        k("discovery.k8s.io/v1", "endpointslices", "EndpointSlice",
            json!({"addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"]}], "ports": [{"port": 80}]}))
            .generation(ContentOrLabels)
            .change(json!({"ports": [{"port": 81}]})),
        k("flowcontrol.apiserver.k8s.io/v1", "flowschemas", "FlowSchema",
            json!({"spec": {"priorityLevelConfiguration": {"name": "sem-plc"}, "matchingPrecedence": 5000}}))
            .status(cond("Dangling"), "/status/conditions")
            .generation(Spec)
            .change(json!({"spec": {"matchingPrecedence": 5001}})),
        k("flowcontrol.apiserver.k8s.io/v1", "prioritylevelconfigurations", "PriorityLevelConfiguration",
            json!({"spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}}}))
            .status(cond("Marker"), "/status/conditions")
            .generation(Spec)
            .change(json!({"spec": {"limited": {"nominalConcurrencyShares": 6}}})),
    ]
}

impl Kind {
    fn open_api_status(mut self) -> Self {
        self.openapi_object = false;
        self
    }
    fn pending(mut self) -> Self {
        self.pending_delete = true;
        self
    }
    fn kept_on_create(mut self) -> Self {
        self.status_kept_on_create = true;
        self
    }
    fn status_taken_on_update(mut self) -> Self {
        self.status_from_update = true;
        self
    }
}
