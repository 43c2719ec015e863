use serde_json::json;

use super::*;

fn role(ns: &str, name: &str, rules: serde_json::Value) -> serde_json::Value {
    json!({"kind": "Role", "metadata": {"namespace": ns, "name": name}, "rules": rules})
}

fn cluster_role(name: &str, labels: serde_json::Value, rules: serde_json::Value) -> serde_json::Value {
    json!({"kind": "ClusterRole", "metadata": {"name": name, "labels": labels}, "rules": rules})
}

fn binding(ns: &str, name: &str, kind: &str, role: &str, subjects: serde_json::Value) -> serde_json::Value {
    let mut meta = json!({"name": name});
    if !ns.is_empty() {
        meta["namespace"] = json!(ns);
    }
    json!({"metadata": meta, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role}, "subjects": subjects})
}

fn attrs(user: &UserInfo, verb: &str, ns: &str, resource: &str, name: &str) -> Attributes {
    Attributes {
        user: user.clone(),
        verb: verb.into(),
        namespace: ns.into(),
        resource: resource.into(),
        name: name.into(),
        resource_request: true,
        ..Attributes::default()
    }
}

fn fixture() -> RbacAuthorizer {
    let authz = RbacAuthorizer::new();
    {
        let mut idx = authz.index().write().unwrap();
        idx.put_role(&role("a", "pod-reader", json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]))).unwrap();
        idx.put_cluster_role(&cluster_role("secret-one", json!({}), json!([{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["one"], "verbs": ["get"]}]))).unwrap();
        idx.put_role_binding(&binding("a", "alice-reads", "Role", "pod-reader", json!([{"kind": "User", "name": "alice"}]))).unwrap();
        idx.put_role_binding(&binding("b", "devs-secret", "ClusterRole", "secret-one", json!([{"kind": "Group", "name": "devs"}]))).unwrap();
        idx.put_cluster_role_binding(&binding("", "sa-everywhere", "ClusterRole", "secret-one", json!([{"kind": "ServiceAccount", "name": "robot", "namespace": "ops"}]))).unwrap();
        idx.put_role_binding(&binding("c", "dangling", "Role", "missing", json!([{"kind": "User", "name": "alice"}]))).unwrap();
    }
    authz
}

#[test]
fn role_bindings_grant_in_their_namespace_only() {
    let authz = fixture();
    let alice = UserInfo::new("alice", ["system:authenticated"]);
    assert_eq!(
        authz.authorize(&attrs(&alice, "list", "a", "pods", "")),
        Decision::Allow(r#"RBAC: allowed by RoleBinding "alice-reads/a" of Role "pod-reader" to User "alice""#.into())
    );
    assert_eq!(authz.authorize(&attrs(&alice, "list", "b", "pods", "")), Decision::NoOpinion(String::new()));
    assert_eq!(authz.authorize(&attrs(&alice, "delete", "a", "pods", "p")), Decision::NoOpinion(String::new()));
    assert_eq!(authz.authorize(&attrs(&alice, "list", "", "pods", "")), Decision::NoOpinion(String::new()), "all namespaces needs a cluster grant");
    assert_eq!(
        authz.authorize(&attrs(&alice, "get", "c", "pods", "x")),
        Decision::NoOpinion(r#"RBAC: role.rbac.authorization.k8s.io "missing" not found"#.into())
    );
}

#[test]
fn groups_service_accounts_and_resource_names() {
    let authz = fixture();
    let dev = UserInfo::new("bob", ["devs"]);
    assert!(authz.authorize(&attrs(&dev, "get", "b", "secrets", "one")).is_allowed());
    assert!(!authz.authorize(&attrs(&dev, "get", "b", "secrets", "two")).is_allowed());
    assert!(!authz.authorize(&attrs(&dev, "get", "a", "secrets", "one")).is_allowed());
    let robot = UserInfo::new("system:serviceaccount:ops:robot", ["system:serviceaccounts"]);
    assert_eq!(
        authz.authorize(&attrs(&robot, "get", "anywhere", "secrets", "one")),
        Decision::Allow(r#"RBAC: allowed by ClusterRoleBinding "sa-everywhere" of ClusterRole "secret-one" to ServiceAccount "robot/ops""#.into())
    );
    let other = UserInfo::new("system:serviceaccount:dev:robot", Vec::<String>::new());
    assert!(!authz.authorize(&attrs(&other, "get", "anywhere", "secrets", "one")).is_allowed());
}

#[test]
fn changes_and_deletions_update_the_index() {
    let authz = fixture();
    let alice = UserInfo::new("alice", Vec::<String>::new());
    {
        let mut idx = authz.index().write().unwrap();
        // The binding now names carol instead of alice.
        idx.put_role_binding(&binding("a", "alice-reads", "Role", "pod-reader", json!([{"kind": "User", "name": "carol"}]))).unwrap();
    }
    assert!(!authz.authorize(&attrs(&alice, "list", "a", "pods", "")).is_allowed());
    let carol = UserInfo::new("carol", Vec::<String>::new());
    assert!(authz.authorize(&attrs(&carol, "list", "a", "pods", "")).is_allowed());
    authz.index().write().unwrap().delete_role("a", "pod-reader");
    assert_eq!(
        authz.authorize(&attrs(&carol, "list", "a", "pods", "")),
        Decision::NoOpinion(r#"RBAC: role.rbac.authorization.k8s.io "pod-reader" not found"#.into())
    );
    authz.index().write().unwrap().delete_role_binding("a", "alice-reads");
    assert_eq!(authz.authorize(&attrs(&carol, "list", "a", "pods", "")), Decision::NoOpinion(String::new()));
    assert_eq!(authz.read().counts(), [0, 1, 2, 1]);
}

#[test]
fn escalation_message_lists_missing_rights() {
    let authz = fixture();
    let alice = UserInfo::new("alice", ["system:authenticated"]);
    let want = vec![PolicyRule {
        verbs: vec!["get".into(), "delete".into()],
        api_groups: vec!["".into()],
        resources: vec!["pods".into()],
        ..PolicyRule::default()
    }];
    assert!(authz.confirm_no_escalation(&alice, "a", &want[..1].iter().map(|r| PolicyRule { verbs: vec!["get".into()], ..r.clone() }).collect::<Vec<_>>()).is_ok());
    let err = authz.confirm_no_escalation(&alice, "a", &want).unwrap_err();
    assert_eq!(
        err,
        "user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}"
    );
}

#[test]
fn aggregation_collects_labelled_roles_in_name_order() {
    let mut idx = RbacIndex::new();
    let agg = json!({"kind": "ClusterRole", "metadata": {"name": "monitoring"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"example.com/aggregate-to-monitoring": "true"}}]}});
    idx.put_cluster_role(&agg).unwrap();
    let label = json!({"example.com/aggregate-to-monitoring": "true"});
    idx.put_cluster_role(&cluster_role("z-metrics", label.clone(), json!([{"apiGroups": [""], "resources": ["services"], "verbs": ["get"]}]))).unwrap();
    idx.put_cluster_role(&cluster_role("a-pods", label.clone(), json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}, {"apiGroups": [""], "resources": ["services"], "verbs": ["get"]}]))).unwrap();
    idx.put_cluster_role(&cluster_role("unlabelled", json!({}), json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]))).unwrap();
    let rules = idx.aggregated_rules("monitoring").unwrap();
    let resources: Vec<&str> = rules.iter().map(|r| r.resources[0].as_str()).collect();
    assert_eq!(resources, vec!["pods", "services"]);
    assert!(idx.aggregated_rules("a-pods").is_none(), "only roles with an aggregationRule aggregate");
}
