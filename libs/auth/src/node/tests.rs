//! The Node authorizer's decisions, with kube's reasons.

use serde_json::json;

use super::*;

fn node_user(name: &str) -> UserInfo {
    UserInfo::new(format!("system:node:{name}"), [NODES_GROUP, "system:authenticated"])
}

fn req(user: &UserInfo, verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Attributes {
    Attributes {
        user: user.clone(),
        verb: verb.into(),
        api_group: group.into(),
        api_version: "v1".into(),
        resource: resource.into(),
        subresource: sub.into(),
        namespace: ns.into(),
        name: name.into(),
        resource_request: true,
        ..Attributes::default()
    }
}

fn authorizer() -> NodeAuthorizer {
    let authz = NodeAuthorizer::new().expect("bootstrap policy has system:node");
    {
        let mut g = authz.graph().write().unwrap();
        g.put(
            Source::Pods,
            &json!({"metadata": {"namespace": "apps", "name": "web"}, "spec": {"nodeName": "node-1", "serviceAccountName": "web-sa",
                "volumes": [{"name": "s", "secret": {"secretName": "web-tls"}}, {"name": "c", "persistentVolumeClaim": {"claimName": "data"}}],
                "containers": [{"envFrom": [{"configMapRef": {"name": "web-config"}}]}]}}),
        );
        g.put(Source::PersistentVolumes, &json!({"metadata": {"name": "pv-data"}, "spec": {"claimRef": {"namespace": "apps", "name": "data"}}}));
        g.put(Source::VolumeAttachments, &json!({"metadata": {"name": "va-1"}, "spec": {"nodeName": "node-1"}}));
    }
    authz
}

fn reason(d: &Decision) -> &str {
    d.reason()
}

#[test]
fn identity_needs_prefix_and_group() {
    assert_eq!(node_identity(&node_user("n1")), Some("n1"));
    assert_eq!(node_identity(&UserInfo::new("system:node:n1", ["system:authenticated"])), None);
    assert_eq!(node_identity(&UserInfo::new("alice", [NODES_GROUP])), None);
    assert_eq!(node_identity(&node_user("")), Some(""));
}

#[test]
fn non_nodes_get_no_opinion_and_unknown_nodes_a_reason() {
    let authz = authorizer();
    let alice = UserInfo::new("alice", ["system:authenticated"]);
    assert_eq!(authz.authorize(&req(&alice, "get", "", "secrets", "", "apps", "web-tls")), Decision::NoOpinion(String::new()));
    let d = authz.authorize(&req(&node_user(""), "get", "", "secrets", "", "apps", "web-tls"));
    assert_eq!(d, Decision::NoOpinion("unknown node for user \"system:node:\"".into()));
}

#[test]
fn objects_of_bound_pods_are_readable_by_their_node_only() {
    let authz = authorizer();
    let (n1, n2) = (node_user("node-1"), node_user("node-2"));
    for (resource, name) in [("secrets", "web-tls"), ("configmaps", "web-config")] {
        for verb in ["get", "list", "watch"] {
            assert!(authz.authorize(&req(&n1, verb, "", resource, "", "apps", name)).is_allowed(), "{verb} {resource}");
        }
        let d = authz.authorize(&req(&n2, "get", "", resource, "", "apps", name));
        assert_eq!(d, Decision::NoOpinion("no relationship found between node 'node-2' and this object".into()));
        assert_eq!(reason(&authz.authorize(&req(&n1, "update", "", resource, "", "apps", name))), "can only read resources of this type");
        assert_eq!(reason(&authz.authorize(&req(&n1, "list", "", resource, "", "apps", ""))), "No Object name found");
        assert_eq!(reason(&authz.authorize(&req(&n1, "list", "", resource, "", "", ""))), "can only read namespaced object of this type");
    }
    assert!(!authz.authorize(&req(&n1, "get", "", "secrets", "", "apps", "other")).is_allowed());
    assert!(authz.authorize(&req(&n1, "get", "", "persistentvolumeclaims", "", "apps", "data")).is_allowed());
    assert!(authz.authorize(&req(&n1, "get", "", "persistentvolumes", "", "", "pv-data")).is_allowed());
    assert!(!authz.authorize(&req(&n2, "get", "", "persistentvolumes", "", "", "pv-data")).is_allowed());
    assert_eq!(reason(&authz.authorize(&req(&n1, "list", "", "persistentvolumes", "", "", ""))), "can only get individual resources of this type");
    assert!(authz.authorize(&req(&n1, "patch", "", "persistentvolumeclaims", "status", "apps", "data")).is_allowed());
    assert_eq!(
        reason(&authz.authorize(&req(&n1, "get", "", "persistentvolumeclaims", "status", "apps", "data"))),
        "can only get/update/patch this type"
    );
    assert!(authz.authorize(&req(&n1, "get", "storage.k8s.io", "volumeattachments", "", "", "va-1")).is_allowed());
    assert!(!authz.authorize(&req(&n2, "get", "storage.k8s.io", "volumeattachments", "", "", "va-1")).is_allowed());
}

#[test]
fn service_accounts_and_their_tokens() {
    let authz = authorizer();
    let n1 = node_user("node-1");
    assert!(authz.authorize(&req(&n1, "create", "", "serviceaccounts", "token", "apps", "web-sa")).is_allowed());
    assert!(authz.authorize(&req(&n1, "get", "", "serviceaccounts", "", "apps", "web-sa")).is_allowed());
    assert!(!authz.authorize(&req(&node_user("node-2"), "create", "", "serviceaccounts", "token", "apps", "web-sa")).is_allowed());
    assert_eq!(
        reason(&authz.authorize(&req(&n1, "create", "", "serviceaccounts", "", "apps", "web-sa"))),
        "can only create token subresource of serviceaccount"
    );
    assert_eq!(
        reason(&authz.authorize(&req(&n1, "delete", "", "serviceaccounts", "", "apps", "web-sa"))),
        "can only create tokens for individual service accounts"
    );
}

#[test]
fn leases_nodes_and_pods() {
    let authz = authorizer();
    let n1 = node_user("node-1");
    assert!(authz.authorize(&req(&n1, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "node-1")).is_allowed());
    assert!(authz.authorize(&req(&n1, "create", "coordination.k8s.io", "leases", "", "kube-node-lease", "")).is_allowed());
    assert_eq!(
        reason(&authz.authorize(&req(&n1, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "node-2"))),
        "can only access node lease with the same name as the requesting node"
    );
    assert_eq!(
        reason(&authz.authorize(&req(&n1, "get", "coordination.k8s.io", "leases", "", "default", "node-1"))),
        "can only access leases in the \"kube-node-lease\" system namespace"
    );
    assert_eq!(
        reason(&authz.authorize(&req(&n1, "list", "coordination.k8s.io", "leases", "", "kube-node-lease", ""))),
        "can only get, create, update, patch, or delete a node lease"
    );
    assert!(authz.authorize(&req(&n1, "get", "", "nodes", "", "", "node-1")).is_allowed());
    assert!(authz.authorize(&req(&n1, "patch", "", "nodes", "status", "", "node-2")).is_allowed(), "NodeRestriction narrows writes");
    assert_eq!(
        reason(&authz.authorize(&req(&n1, "get", "", "nodes", "", "", "node-2"))),
        "node 'node-1' cannot read 'node-2', only its own Node object"
    );
    assert_eq!(reason(&authz.authorize(&req(&n1, "list", "", "nodes", "", "", ""))), "node 'node-1' cannot read all nodes, only its own Node object");
    assert!(!authz.authorize(&req(&n1, "delete", "", "nodes", "", "", "node-1")).is_allowed());

    assert!(authz.authorize(&req(&n1, "get", "", "pods", "", "apps", "web")).is_allowed());
    assert!(!authz.authorize(&req(&node_user("node-2"), "get", "", "pods", "", "apps", "web")).is_allowed());
    let mut list = req(&n1, "list", "", "pods", "", "", "");
    assert_eq!(reason(&authz.authorize(&list)), "can only list/watch pods with spec.nodeName field selector");
    list.field_selector = "spec.nodeName=node-1".into();
    assert!(authz.authorize(&list).is_allowed());
    list.field_selector = "spec.nodeName=node-2".into();
    assert!(!authz.authorize(&list).is_allowed());
    for (verb, sub) in [("create", ""), ("delete", ""), ("update", "status"), ("create", "eviction")] {
        assert!(authz.authorize(&req(&n1, verb, "", "pods", sub, "apps", "x")).is_allowed(), "{verb} {sub}");
    }
    assert_eq!(authz.authorize(&req(&n1, "update", "", "pods", "", "apps", "web")), Decision::NoOpinion(String::new()));
}

#[test]
fn static_rules_decide_the_rest() {
    let authz = authorizer();
    let n1 = node_user("node-1");
    assert!(authz.authorize(&req(&n1, "list", "", "services", "", "", "")).is_allowed());
    assert!(authz.authorize(&req(&n1, "create", "", "events", "", "apps", "")).is_allowed());
    assert!(authz.authorize(&req(&n1, "create", "certificates.k8s.io", "certificatesigningrequests", "", "", "")).is_allowed());
    assert!(authz.authorize(&req(&n1, "get", "", "endpoints", "", "apps", "web")).is_allowed());
    assert_eq!(authz.authorize(&req(&n1, "delete", "", "services", "", "apps", "web")), Decision::NoOpinion(String::new()));
    assert_eq!(authz.authorize(&req(&n1, "create", "apps", "deployments", "", "apps", "")), Decision::NoOpinion(String::new()));
}
