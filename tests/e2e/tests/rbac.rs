//! RBAC end to end with real kubectl: namespaced and cluster grants, `auth can-i` (a table of
//! verbs x resources x namespaces x users, with subresources, resource names and non-resource
//! URLs), `--list`, `whoami`, impersonation, escalation prevention and aggregated roles.

use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use kapi_e2e::{fixture, wait_for, Credential, Kapi, Request};
use serde_json::{json, Value};

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn ok(out: Output, what: &str) -> String {
    assert!(out.status.success(), "{what}: {}{}", stdout(&out), stderr(&out));
    stdout(&out)
}

struct Users {
    alice: PathBuf,
    bob: PathBuf,
    carol: PathBuf,
}

/// A server with the fixture policy applied and the users' kubeconfigs.
fn setup() -> (Kapi, Users) {
    let kapi = Kapi::start().expect("start kapi");
    let policy = fixture("rbac-policy.yaml");
    ok(kapi.kubectl(&["apply", "-f", policy.to_str().unwrap()]), "apply the policy");
    let alice = kapi.issue_client_cert("alice", &["dev"]);
    let bob = kapi.issue_client_cert("bob", &["ops"]);
    let carol = kapi.issue_client_cert("carol", &[]);
    let users = Users {
        alice: kapi.kubeconfig_for("alice", &alice),
        bob: kapi.kubeconfig_for("bob", &bob),
        carol: kapi.kubeconfig_for("carol", &carol),
    };
    // The aggregation controller fills `edit` from the aggregate-to roles.
    let edit = wait_for(Duration::from_secs(10), || {
        let role = kapi.get_json("/apis/rbac.authorization.k8s.io/v1/clusterroles/edit");
        role["rules"].as_array().filter(|r| !r.is_empty()).cloned()
    });
    assert!(edit.is_some(), "edit never got its aggregated rules");
    (kapi, users)
}

#[test]
fn a_namespaced_role_grants_in_its_namespace_and_403s_elsewhere() {
    let (kapi, users) = setup();
    ok(kapi.kubectl(&["run", "web", "-n", "a", "--image=nginx", "--restart=Never"]), "create a pod");
    let listed = ok(kapi.kubectl_config(&users.alice, &["get", "pods", "-n", "a", "-o", "name"]), "alice lists pods in a");
    assert_eq!(listed.trim(), "pod/web");
    let denied = kapi.kubectl_config(&users.alice, &["get", "pods", "-n", "b"]);
    assert!(!denied.status.success());
    assert_eq!(
        stderr(&denied).trim(),
        r#"Error from server (Forbidden): pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "b""#
    );
    // The Status itself, as kube-apiserver writes it.
    let alice = kapi.issue_client_cert("alice", &["dev"]);
    let r = kapi.request(&Request::get("/api/v1/namespaces/b/pods/web").as_user(&alice));
    assert_eq!(r.status, 403, "{}", r.raw);
    assert_eq!(r.reason(), "Forbidden");
    assert_eq!(r.message(), r#"pods "web" is forbidden: User "alice" cannot get resource "pods" in API group "" in the namespace "b""#);
    assert_eq!(r.body["details"], json!({"name": "web", "kind": "pods"}));
    let r = kapi.request(&Request::get("/apis/apps/v1/deployments").as_user(&alice));
    assert_eq!(
        r.message(),
        r#"deployments.apps is forbidden: User "alice" cannot list resource "deployments" in API group "apps" at the cluster scope"#
    );
    // Anonymous callers get the public paths only.
    let anon = kapi.request(&Request::get("/api/v1/pods").as_user(&Credential::Anonymous));
    assert_eq!(anon.status, 403, "{}", anon.raw);
    assert_eq!(
        anon.message(),
        r#"pods is forbidden: User "system:anonymous" cannot list resource "pods" in API group "" at the cluster scope"#
    );
    let root = kapi.request(&Request::get("/").as_user(&Credential::Anonymous));
    assert_eq!(root.message(), r#"forbidden: User "system:anonymous" cannot get path "/""#);
    for public in ["/healthz", "/readyz", "/livez", "/version"] {
        let r = kapi.request(&Request::get(public).as_user(&Credential::Anonymous));
        assert_eq!(r.status, 200, "{public}: {}", r.raw);
    }
}

/// `kubectl auth can-i` as several users: (kubeconfig, args, allowed).
#[test]
fn can_i_answers_match_the_policy() {
    let (kapi, users) = setup();
    let admin = kapi.kubeconfig();
    let (a, b, c) = (&users.alice, &users.bob, &users.carol);
    let robot = ["--as", "system:serviceaccount:a:robot"];
    let cases: Vec<(&PathBuf, Vec<&str>, bool)> = vec![
        (a, vec!["list", "pods", "-n", "a"], true),
        (a, vec!["list", "pods", "-n", "b"], false),
        (a, vec!["get", "pods", "-n", "a"], true),
        (a, vec!["watch", "pods", "-n", "a"], true),
        (a, vec!["delete", "pods", "-n", "a"], false),
        (a, vec!["create", "pods", "-n", "a"], false),
        (a, vec!["get", "pods", "--subresource=log", "-n", "a"], true),
        (a, vec!["create", "pods", "--subresource=exec", "-n", "a"], false),
        (a, vec!["get", "configmaps/cm1", "-n", "a"], true),
        (a, vec!["get", "configmaps/cm2", "-n", "a"], false),
        (a, vec!["update", "configmaps/cm1", "-n", "a"], true),
        (a, vec!["list", "configmaps", "-n", "a"], false),
        (a, vec!["get", "deployments.apps", "-n", "a"], true),
        (a, vec!["patch", "deployments.apps", "--subresource=scale", "-n", "a"], true),
        (a, vec!["update", "deployments.apps", "--subresource=scale", "-n", "a"], false),
        (a, vec!["list", "nodes"], false),
        (a, vec!["get", "/metrics"], false),
        (a, vec!["get", "/api"], true),
        (a, vec!["get", "/healthz"], true),
        (a, vec!["create", "selfsubjectaccessreviews.authorization.k8s.io"], true),
        (a, vec!["list", "pods", "--all-namespaces"], false),
        (b, vec!["list", "nodes"], true),
        (b, vec!["get", "nodes/n1"], true),
        (b, vec!["delete", "nodes"], false),
        (b, vec!["get", "/metrics"], true),
        (b, vec!["get", "/logs/kubelet.log"], true),
        (b, vec!["post", "/metrics"], false),
        (b, vec!["create", "deployments.apps", "-n", "b"], true),
        (b, vec!["get", "secrets", "-n", "b"], true),
        (b, vec!["create", "rolebindings.rbac.authorization.k8s.io", "-n", "b"], false),
        (b, vec!["list", "pods", "-n", "a"], false),
        (c, vec!["list", "pods", "-n", "a"], false),
        (c, vec!["get", "/api"], true),
        (c, vec!["list", "namespaces"], false),
        (&admin, [&robot[..], &["list", "pods", "-n", "a"]].concat(), true),
        (&admin, [&robot[..], &["list", "pods", "-n", "b"]].concat(), false),
        (&admin, vec!["delete", "nodes"], true),
        (&admin, vec!["*", "*"], true),
    ];
    assert!(cases.len() >= 30);
    let mut failures = Vec::new();
    for (config, args, allowed) in &cases {
        let mut full = vec!["auth", "can-i"];
        full.extend(args.iter().copied());
        let out = kapi.kubectl_config(config, &full);
        let text = stdout(&out);
        let said_yes = text.trim() == "yes";
        if said_yes != *allowed || out.status.success() != *allowed {
            failures.push(format!("{} {}: want {allowed}, got {text:?} {}", config.display(), args.join(" "), stderr(&out)));
        }
    }
    assert!(failures.is_empty(), "{} of {} can-i answers differ:\n{}", failures.len(), cases.len(), failures.join("\n"));

    // `--list`: alice's rules in a, resource names and subresources included.
    let list = ok(kapi.kubectl_config(a, &["auth", "can-i", "--list", "-n", "a"]), "can-i --list");
    let rows: Vec<Vec<&str>> = list.lines().map(|l| l.split_whitespace().collect()).collect();
    let has = |row: &[&str]| rows.iter().any(|r| r == row);
    assert!(has(&["pods", "[]", "[]", "[get", "list", "watch]"]), "{list}");
    assert!(has(&["configmaps", "[]", "[cm1]", "[get", "update]"]), "{list}");
    assert!(has(&["pods/log", "[]", "[]", "[get]"]), "{list}");
    assert!(has(&["selfsubjectaccessreviews.authorization.k8s.io", "[]", "[]", "[create]"]), "{list}");
    assert!(rows.iter().any(|r| r.first() == Some(&"[/api/*]")), "non-resource rules listed: {list}");
    let bob_list = ok(kapi.kubectl_config(b, &["auth", "can-i", "--list"]), "bob can-i --list");
    assert!(bob_list.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["[/metrics]", "[]", "[get]"]), "{bob_list}");
}

#[test]
fn whoami_and_impersonation() {
    let (kapi, users) = setup();
    let who = ok(kapi.kubectl_config(&users.alice, &["auth", "whoami", "-o", "json"]), "whoami");
    let who: Value = serde_json::from_str(&who).unwrap();
    assert_eq!(who["kind"], "SelfSubjectReview");
    assert_eq!(who["status"]["userInfo"], json!({"username": "alice", "groups": ["dev", "system:authenticated"]}));
    let table = ok(kapi.kubectl_config(&users.alice, &["auth", "whoami"]), "whoami table");
    assert!(table.contains("Username    alice"), "{table}");

    // Impersonation needs the impersonate verb on each part.
    let denied = kapi.kubectl_config(&users.alice, &["get", "nodes", "--as", "bob"]);
    assert_eq!(
        stderr(&denied).trim(),
        r#"Error from server (Forbidden): users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the cluster scope"#
    );
    let grant = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "impersonate-bob"},
        "rules": [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["bob"]}]
    });
    let r = kapi.request(&Request::new("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles").json(&grant));
    assert_eq!(r.status, 201, "{}", r.raw);
    ok(kapi.kubectl(&["create", "clusterrolebinding", "alice-impersonates", "--clusterrole=impersonate-bob", "--user=alice"]), "bind");
    let who = wait_for(Duration::from_secs(5), || {
        let out = kapi.kubectl_config(&users.alice, &["auth", "whoami", "--as", "bob", "-o", "json"]);
        out.status.success().then(|| serde_json::from_str::<Value>(&stdout(&out)).unwrap())
    })
    .expect("alice may impersonate bob once bound");
    assert_eq!(who["status"]["userInfo"], json!({"username": "bob", "groups": ["system:authenticated"]}));
    // Bob himself (no group ops when impersonated without it) cannot list nodes ...
    let nodes = kapi.kubectl_config(&users.alice, &["get", "nodes", "--as", "bob"]);
    assert!(stderr(&nodes).contains(r#"User "bob" cannot list resource "nodes""#), "{}", stderr(&nodes));
    // ... and alice may not add the group.
    let group = kapi.kubectl_config(&users.alice, &["get", "nodes", "--as", "bob", "--as-group", "ops"]);
    assert!(
        stderr(&group).contains(r#"groups "ops" is forbidden: User "alice" cannot impersonate resource "groups" in API group """#),
        "{}",
        stderr(&group)
    );
    // The admin (system:masters) may impersonate a service account, which gets its groups.
    let sa = ok(kapi.kubectl(&["auth", "whoami", "--as", "system:serviceaccount:a:robot", "-o", "json"]), "whoami as SA");
    let sa: Value = serde_json::from_str(&sa).unwrap();
    assert_eq!(
        sa["status"]["userInfo"]["groups"],
        json!(["system:serviceaccounts", "system:serviceaccounts:a", "system:authenticated"])
    );
}

#[test]
fn bindings_cannot_grant_more_than_the_caller_holds() {
    let (kapi, _users) = setup();
    // dana manages RBAC objects in a, but holds only pod-reader's rights there.
    let manager = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "rbac-manager", "namespace": "a"},
        "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create", "get", "list"]}]
    });
    let r = kapi.request(&Request::new("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/a/roles").json(&manager));
    assert_eq!(r.status, 201, "{}", r.raw);
    for (name, role) in [("dana-manages", "rbac-manager"), ("dana-reads", "pod-reader")] {
        ok(kapi.kubectl(&["create", "rolebinding", name, "-n", "a", &format!("--role={role}"), "--user=dana"]), "bind dana");
    }
    let dana = kapi.issue_client_cert("dana", &[]);
    let binding = |name: &str, kind: &str, role: &str| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name, "namespace": "a"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": [{"kind": "User", "name": "eve", "apiGroup": "rbac.authorization.k8s.io"}]
        })
    };
    let post = |body: &Value, path: &str| kapi.request(&Request::new("POST", path).json(body).as_user(&dana));
    let rb_path = "/apis/rbac.authorization.k8s.io/v1/namespaces/a/rolebindings";
    // Binding a role she holds works.
    let r = post(&binding("eve-reads", "Role", "pod-reader"), rb_path);
    assert_eq!(r.status, 201, "{}", r.raw);
    // Binding "edit" (which she does not hold) is refused, naming what is missing.
    let r = post(&binding("eve-edits", "ClusterRole", "edit"), rb_path);
    assert_eq!(r.status, 403, "{}", r.raw);
    assert_eq!(r.reason(), "Forbidden");
    assert!(
        r.message().starts_with(
            "rolebindings.rbac.authorization.k8s.io \"eve-edits\" is forbidden: user \"dana\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:["
        ),
        "{}",
        r.message()
    );
    // A role with rights she lacks is refused too; a role within her rights is not.
    let role = |name: &str, resource: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name, "namespace": "a"},
            "rules": [{"apiGroups": [""], "resources": [resource], "verbs": ["get"]}]})
    };
    let r = post(&role("secret-reader", "secrets"), "/apis/rbac.authorization.k8s.io/v1/namespaces/a/roles");
    assert_eq!(r.status, 403, "{}", r.raw);
    assert!(r.message().ends_with("not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\"]}"), "{}", r.message());
    let r = post(&role("pod-getter", "pods"), "/apis/rbac.authorization.k8s.io/v1/namespaces/a/roles");
    assert_eq!(r.status, 201, "{}", r.raw);
    // Nothing was stored for the refused requests.
    let r = kapi.request(&Request::get("/apis/rbac.authorization.k8s.io/v1/namespaces/a/rolebindings/eve-edits"));
    assert_eq!(r.status, 404);
    // With the bind verb on "edit" she may bind it after all.
    let bind = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "may-bind-edit", "namespace": "a"},
        "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["edit"]}]
    });
    let r = kapi.request(&Request::new("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/a/roles").json(&bind));
    assert_eq!(r.status, 201, "{}", r.raw);
    ok(kapi.kubectl(&["create", "rolebinding", "dana-binds", "-n", "a", "--role=may-bind-edit", "--user=dana"]), "bind dana");
    let r = wait_for(Duration::from_secs(5), || {
        let r = post(&binding("eve-edits", "ClusterRole", "edit"), rb_path);
        (r.status == 201).then_some(r)
    });
    assert!(r.is_some(), "the bind verb lets dana bind edit");
}

#[test]
fn aggregated_cluster_roles_pick_up_labelled_roles_within_a_second() {
    let (kapi, users) = setup();
    let target = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "monitoring"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"example.com/aggregate-to-monitoring": "true"}}]}
    });
    let r = kapi.request(&Request::new("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles").json(&target));
    assert_eq!(r.status, 201, "{}", r.raw);
    ok(kapi.kubectl(&["create", "clusterrolebinding", "carol-monitors", "--clusterrole=monitoring", "--user=carol"]), "bind");
    let labelled = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "monitoring-endpoints", "labels": {"example.com/aggregate-to-monitoring": "true"}},
        "rules": [{"apiGroups": [""], "resources": ["endpoints", "services"], "verbs": ["list"]}]
    });
    let started = Instant::now();
    let r = kapi.request(&Request::new("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles").json(&labelled));
    assert_eq!(r.status, 201, "{}", r.raw);
    let picked = wait_for(Duration::from_secs(5), || {
        let role = kapi.get_json("/apis/rbac.authorization.k8s.io/v1/clusterroles/monitoring");
        (role["rules"] == labelled["rules"]).then(Instant::now)
    })
    .expect("monitoring never aggregated the labelled role");
    let elapsed = picked - started;
    println!("aggregation picked up the labelled role after {elapsed:?}");
    assert!(elapsed < Duration::from_secs(1), "aggregation took {elapsed:?}");
    let out = kapi.kubectl_config(&users.carol, &["auth", "can-i", "list", "services", "-A"]);
    assert_eq!(stdout(&out).trim(), "yes");
    // The built-in "view" aggregates a role labelled for it too.
    let extra = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "view-widgets", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "list", "watch"]}]
    });
    let r = kapi.request(&Request::new("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles").json(&extra));
    assert_eq!(r.status, 201, "{}", r.raw);
    let found = wait_for(Duration::from_secs(2), || {
        let view = kapi.get_json("/apis/rbac.authorization.k8s.io/v1/clusterroles/view");
        view["rules"].as_array().filter(|rules| rules.iter().any(|r| r["resources"] == json!(["widgets"]))).map(|_| ())
    });
    assert!(found.is_some(), "view did not aggregate view-widgets");
    // Removing the label takes the rules away again.
    ok(kapi.kubectl(&["label", "clusterrole", "monitoring-endpoints", "example.com/aggregate-to-monitoring-"]), "unlabel");
    let emptied = wait_for(Duration::from_secs(2), || {
        let role = kapi.get_json("/apis/rbac.authorization.k8s.io/v1/clusterroles/monitoring");
        role["rules"].as_array().is_none_or(|r| r.is_empty()).then_some(())
    });
    assert!(emptied.is_some(), "unlabelled rules stayed aggregated");
}

#[test]
fn access_reviews_through_the_api() {
    let (kapi, _users) = setup();
    let sar = json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "alice", "groups": ["dev"], "resourceAttributes": {"namespace": "a", "verb": "list", "resource": "pods"}}
    });
    let r = kapi.request(&Request::new("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews").json(&sar));
    assert_eq!(r.status, 201, "{}", r.raw);
    assert_eq!(
        r.body["status"],
        json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding \"alice-reads/a\" of Role \"pod-reader\" to User \"alice\""})
    );
    assert_eq!(r.body["spec"], sar["spec"], "the spec is echoed");
    let mut other = sar.clone();
    other["spec"]["resourceAttributes"]["namespace"] = json!("b");
    let r = kapi.request(&Request::new("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews").json(&other));
    assert_eq!(r.body["status"], json!({"allowed": false}));
    // Local reviews must stay in their namespace.
    let mut local = sar.clone();
    local["kind"] = json!("LocalSubjectAccessReview");
    local["metadata"] = json!({"namespace": "a"});
    let r = kapi.request(&Request::new("POST", "/apis/authorization.k8s.io/v1/namespaces/a/localsubjectaccessreviews").json(&local));
    assert_eq!(r.status, 201, "{}", r.raw);
    assert_eq!(r.body["status"]["allowed"], true);
    let r = kapi.request(&Request::new("POST", "/apis/authorization.k8s.io/v1/namespaces/b/localsubjectaccessreviews").json(&local));
    assert_eq!(r.status, 400, "{}", r.raw);
    // Invalid reviews are 422 with kube's field errors.
    let bad = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {"resourceAttributes": {"verb": "get"}}});
    let r = kapi.request(&Request::new("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews").json(&bad));
    assert_eq!(r.status, 422, "{}", r.raw);
    assert_eq!(
        r.message(),
        r#"SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": at least one of user or group must be specified"#
    );
    // Users without RBAC rights on subjectaccessreviews may not ask about others.
    let carol = kapi.issue_client_cert("carol", &[]);
    let r = kapi.request(&Request::new("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews").json(&sar).as_user(&carol));
    assert_eq!(r.status, 403, "{}", r.raw);
    // A binding to a missing role shows up as the reason.
    ok(kapi.kubectl(&["create", "rolebinding", "dangling", "-n", "a", "--role=missing", "--user=alice"]), "dangling binding");
    let mut denied = sar.clone();
    denied["spec"]["resourceAttributes"]["verb"] = json!("delete");
    let r = wait_for(Duration::from_secs(5), || {
        let r = kapi.request(&Request::new("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews").json(&denied));
        (r.body["status"]["reason"].is_string()).then_some(r)
    })
    .expect("the dangling binding is reported");
    assert_eq!(r.body["status"], json!({"allowed": false, "reason": "RBAC: role.rbac.authorization.k8s.io \"missing\" not found"}));
}
