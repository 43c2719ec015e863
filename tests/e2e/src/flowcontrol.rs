//! What the API Priority and Fairness tests share: the configuration collections, the answer
//! headers naming a request's schema and level, a plain user's certificate, and a level of its
//! own for one user with something to LIST.

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::{Credential, Kapi, Request};

/// The FlowSchemas collection.
pub const FLOW_SCHEMAS: &str = "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas";
/// The PriorityLevelConfigurations collection.
pub const LEVELS: &str = "/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations";
/// kube's header naming the matching FlowSchema's UID (lowercased, with its ": ").
pub const SCHEMA_HEADER: &str = "x-kubernetes-pf-flowschema-uid: ";
/// kube's header naming the priority level's UID (lowercased, with its ": ").
pub const LEVEL_HEADER: &str = "x-kubernetes-pf-prioritylevel-uid: ";

/// A client certificate for `user` (no groups), as (certificate, key) paths.
pub fn user_cert(kapi: &Kapi, user: &str) -> (PathBuf, PathBuf) {
    match kapi.issue_client_cert(user, &[]) {
        Credential::Cert { cert, key } => (cert, key),
        other => panic!("not a certificate: {other:?}"),
    }
}

/// Creates the level `level` with `limited` as its `spec.limited`, the FlowSchema `schema`
/// (precedence 500) sending everything `user` does to it, and lets `user` view everything.
pub fn level_for_user(kapi: &Kapi, level: &str, schema: &str, user: &str, limited: Value) {
    let objects = [
        (LEVELS, json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration", "metadata": {"name": level},
            "spec": {"type": "Limited", "limited": limited}})),
        (FLOW_SCHEMAS, json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": schema},
            "spec": {"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": 500,
                     "rules": [{"subjects": [{"kind": "User", "user": {"name": user}}],
                                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": true}]}]}})),
    ];
    for (collection, obj) in objects {
        let r = kapi.request(&Request::new("POST", collection).json(&obj));
        assert_eq!(r.status, 201, "{}", r.raw);
    }
    let out = kapi.kubectl(&["create", "clusterrolebinding", user, "--clusterrole=view", &format!("--user={user}")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Creates `count` ConfigMaps `big-0`... of `kib` KiB each in `default`: LISTs slow enough to
/// overlap.
pub fn big_configmaps(kapi: &Kapi, count: usize, kib: usize) {
    for i in 0..count {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("big-{i}")}, "data": {"payload": "x".repeat(kib * 1024)}});
        assert_eq!(kapi.request(&Request::new("POST", "/api/v1/namespaces/default/configmaps").json(&cm)).status, 201);
    }
}
