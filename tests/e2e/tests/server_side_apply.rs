//! Server-side apply and managedFields through real kubectl: ownership per manager, conflicts
//! (409 with the fields and managers), `--force-conflicts`, no-op re-applies, removal of fields
//! a manager stops applying, `kubectl diff`, and the managedFields of a scripted sequence
//! (create by kubectl, applies by two managers, a status write by a controller) written out in
//! kube's FieldsV1 format.

use std::path::Path;

use kapi_e2e::{Kapi, OutputExt, Request};
use serde_json::{json, Value};

const NS: &str = "ssa";

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write manifest");
    path.display().to_string()
}

fn config(replicas: u32, labels: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: ssa\n  labels: {labels}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata: {{labels: {{app: web}}}}\n    spec:\n      containers:\n      - name: app\n        image: {image}\n"
    )
}

fn managed<'a>(d: &'a Value, manager: &str, operation: &str) -> Option<&'a Value> {
    d["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
}

#[test]
fn apply_conflicts_force_and_removal_like_kube() {
    let kapi = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().expect("tempdir");
    kapi.kubectl(&["create", "namespace", NS]).ok("create namespace");
    let get = || -> Value {
        serde_json::from_str(&kapi.kubectl(&["get", "deployment", "web", "-n", NS, "-o", "json", "--show-managed-fields"]).ok("get"))
            .expect("json")
    };

    let a1 = write(dir.path(), "a1.yaml", &config(2, "{app: web, tier: front}", "nginx:1.25"));
    let out = kapi.kubectl(&["apply", "--server-side", "-f", &a1]).ok("server-side apply");
    assert_eq!(out.trim(), "deployment.apps/web serverside-applied");
    let d = get();
    let mine = managed(&d, "kubectl", "Apply").unwrap_or_else(|| panic!("no Apply entry: {}", d["metadata"]));
    assert_eq!(mine["apiVersion"], "apps/v1");
    assert_eq!(
        mine["fieldsV1"],
        json!({
            "f:metadata": {"f:labels": {"f:app": {}, "f:tier": {}}},
            "f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}}}
            }}
        })
    );

    // Re-applying the same configuration is a no-op.
    let rv = d["metadata"]["resourceVersion"].clone();
    kapi.kubectl(&["apply", "--server-side", "-f", &a1]).ok("re-apply");
    assert_eq!(get()["metadata"]["resourceVersion"], rv, "no-op apply wrote");

    // A second manager setting replicas to another value conflicts with the first.
    let b = write(dir.path(), "b.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: ssa}\nspec:\n  replicas: 5\n");
    let out = kapi.kubectl(&["apply", "--server-side", "--field-manager=scaler", "-f", &b]);
    assert!(!out.status.success(), "conflicting apply succeeded");
    let err = out.stderr_str();
    assert!(err.contains("conflict with \"kubectl\""), "stderr: {err}");
    assert!(err.contains(".spec.replicas"), "stderr: {err}");
    assert_eq!(get()["spec"]["replicas"], json!(2));

    // The same over HTTP: 409 Conflict with a cause per field.
    let path = format!("/apis/apps/v1/namespaces/{NS}/deployments/web?fieldManager=scaler");
    let body = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":5}}"#;
    let r = kapi.request(&Request::new("PATCH", &path).raw("application/apply-patch+yaml", body));
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.reason(), "Conflict");
    assert_eq!(r.message(), "Apply failed with 1 conflict: conflict with \"kubectl\": .spec.replicas");
    assert_eq!(r.body["details"]["causes"], json!([{"reason": "FieldManagerConflict", "message": "conflict with \"kubectl\"", "field": ".spec.replicas"}]));

    // Forcing takes ownership.
    kapi.kubectl(&["apply", "--server-side", "--field-manager=scaler", "--force-conflicts", "-f", &b]).ok("forced apply");
    let d = get();
    assert_eq!(d["spec"]["replicas"], json!(5));
    assert_eq!(managed(&d, "scaler", "Apply").expect("scaler entry")["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
    assert!(
        managed(&d, "kubectl", "Apply").expect("kubectl entry")["fieldsV1"]["f:spec"].get("f:replicas").is_none(),
        "replicas moved to scaler"
    );

    // Dropping the tier label (and replicas, now scaler's) from kubectl's configuration removes
    // the label and leaves replicas alone.
    let a2 = write(dir.path(), "a2.yaml", &config(2, "{app: web}", "nginx:1.25").replace("  replicas: 2\n", ""));
    kapi.kubectl(&["apply", "--server-side", "-f", &a2]).ok("apply without tier");
    let d = get();
    assert_eq!(d["metadata"]["labels"], json!({"app": "web"}), "an unowned field the manager dropped is removed");
    assert_eq!(d["spec"]["replicas"], json!(5), "a field owned by another manager stays");

    // kubectl diff runs a server-side dry run: it shows the change and changes nothing.
    let rv = d["metadata"]["resourceVersion"].clone();
    let a3 = write(dir.path(), "a3.yaml", &config(2, "{app: web}", "nginx:1.27").replace("  replicas: 2\n", ""));
    let out = kapi.kubectl(&["diff", "--server-side", "-f", &a3]);
    assert_eq!(out.status.code(), Some(1), "diff exit code; stderr {}", out.stderr_str());
    let text = out.stdout_str();
    let changed = |sign: char, image: &str| text.lines().any(|l| l.starts_with(sign) && l.ends_with(&format!("image: {image}")));
    assert!(changed('-', "nginx:1.25") && changed('+', "nginx:1.27"), "diff:\n{text}");
    assert_eq!(get()["metadata"]["resourceVersion"], rv, "diff changed the object");

    // Applying to a missing object creates it (201).
    let r = kapi.request(
        &Request::new("PATCH", &format!("/api/v1/namespaces/{NS}/configmaps/fresh?fieldManager=tool"))
            .raw("application/apply-patch+yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fresh}\ndata: {a: '1'}\n"),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["data"], json!({"a": "1"}));

    // Bad apply requests.
    for (query, body, code, message) in [
        ("", body, 422, "fieldManager: Required value: is required for apply patch"),
        ("?fieldManager=x", r#"{"apiVersion":"apps/v2","kind":"Deployment","metadata":{"name":"web"}}"#, 400, "Incorrect version specified in apply patch"),
        ("?fieldManager=x", r#"{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"web"}}"#, 400, "Incorrect kind specified in apply patch"),
        ("?fieldManager=x", "{not yaml: [", 400, ""),
    ] {
        let r = kapi.request(
            &Request::new("PATCH", &format!("/apis/apps/v1/namespaces/{NS}/deployments/web{query}"))
                .raw("application/apply-patch+yaml", body),
        );
        assert_eq!(r.status, code, "{query} {body}: {}", r.body);
        assert!(r.message().contains(message), "{body}: {}", r.body);
    }
    let r = kapi.request(
        &Request::new("PATCH", &format!("/apis/apps/v1/namespaces/{NS}/deployments/web?force=true"))
            .raw("application/merge-patch+json", "{}"),
    );
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(r.message().contains("force: Invalid value: true: may not be specified for non-apply patch"), "{}", r.body);
}

/// Moving from client-side to server-side apply: kubectl's apply manager may take fields that
/// client-side apply set while the live object matches the last-applied annotation, which it
/// keeps in step; any other manager conflicts.
#[test]
fn client_side_apply_upgrades_to_server_side() {
    let kapi = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().expect("tempdir");
    kapi.kubectl(&["create", "namespace", NS]).ok("create namespace");
    let v1 = write(dir.path(), "v1.yaml", &config(2, "{app: web}", "nginx:1.25"));
    kapi.kubectl(&["apply", "-f", &v1]).ok("client-side apply");
    let path = format!("/apis/apps/v1/namespaces/{NS}/deployments/web");
    let body = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"app":"web"}},"spec":{"replicas":4,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"nginx:1.25"}]}}}}"#;
    let r = kapi.request(&Request::new("PATCH", &format!("{path}?fieldManager=other")).raw("application/apply-patch+yaml", body));
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.message().contains("conflict with \"kubectl-client-side-apply\""), "{}", r.body);
    let r = kapi.request(&Request::new("PATCH", &format!("{path}?fieldManager=kubectl")).raw("application/apply-patch+yaml", body));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["spec"]["replicas"], json!(4));
    let last: Value = serde_json::from_str(
        r.body["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].as_str().expect("annotation"),
    )
    .expect("annotation JSON");
    assert_eq!(last["spec"]["replicas"], json!(4), "last-applied follows the server-side apply");

    // kubectl itself: a changed manifest applied server-side after client-side applies.
    let v2 = write(dir.path(), "v2.yaml", &config(3, "{app: web}", "nginx:1.26"));
    kapi.kubectl(&["apply", "--server-side", "-f", &v2]).ok("server-side apply after client-side");
    let d = kapi.get_json(&path);
    assert_eq!(d["spec"]["replicas"], json!(3));
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["image"], json!("nginx:1.26"));
}

/// `kubectl create deployment` then a scale by apply, a label by another apply and a status
/// write by a controller: each manager's FieldsV1 as kube-apiserver records them (the
/// kubectl-create set includes every field defaulting added, as kube computes it on the
/// defaulted object). kubectl 1.27 sends JSON; newer kubectls send protobuf, whose zero-valued
/// non-pointer fields kapi keeps (see docs/architecture.md) and so records as set.
#[test]
fn managed_fields_of_a_deployment_lifecycle() {
    // The expected kubectl-create set is what a JSON body gives: 1.27's (newer kubectls send
    // protobuf).
    let Some(kubectl_1_27) = kapi_e2e::versioned_kubectl_or_skip("1.27") else { return };
    let kapi = Kapi::start().expect("start kapi");
    kapi.kubectl(&["create", "namespace", NS]).ok("create namespace");
    kapi.kubectl_with(&kubectl_1_27, &["create", "deployment", "nginx", "-n", NS, "--image=nginx"]).ok("create deployment");
    let path = format!("/apis/apps/v1/namespaces/{NS}/deployments/nginx");
    let d = kapi.get_json(&path);
    let entries = d["metadata"]["managedFields"].as_array().expect("managedFields").clone();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["manager"], "kubectl-create");
    assert_eq!(entries[0]["operation"], "Update");
    assert_eq!(entries[0]["apiVersion"], "apps/v1");
    assert_eq!(entries[0]["fieldsType"], "FieldsV1");
    assert_eq!(
        entries[0]["fieldsV1"],
        json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {
                "f:progressDeadlineSeconds": {},
                "f:replicas": {},
                "f:revisionHistoryLimit": {},
                "f:selector": {},
                "f:strategy": {"f:rollingUpdate": {".": {}, "f:maxSurge": {}, "f:maxUnavailable": {}}, "f:type": {}},
                "f:template": {
                    "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                    "f:spec": {
                        "f:containers": {"k:{\"name\":\"nginx\"}": {
                            ".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:resources": {},
                            "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}
                        }},
                        "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {},
                        "f:terminationGracePeriodSeconds": {}
                    }
                }
            }
        })
    );

    // A scaler applies replicas (a different value: kubectl-create loses it, with force).
    let scale = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nginx}\nspec: {replicas: 3}\n";
    let r = kapi.request(&Request::new("PATCH", &format!("{path}?fieldManager=scaler")).raw("application/apply-patch+yaml", scale));
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.message(), format!(
        "Apply failed with 1 conflict: conflict with \"kubectl-create\" using apps/v1 at {}: .spec.replicas",
        entries[0]["time"].as_str().unwrap_or_default()
    ));
    let r = kapi.request(&Request::new("PATCH", &format!("{path}?fieldManager=scaler&force=true")).raw("application/apply-patch+yaml", scale));
    assert_eq!(r.status, 200, "{}", r.body);
    // A labeller applies a label.
    let label = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: nginx, labels: {team: web}}\n";
    let r = kapi.request(&Request::new("PATCH", &format!("{path}?fieldManager=labeller")).raw("application/apply-patch+yaml", label));
    assert_eq!(r.status, 200, "{}", r.body);
    // The deployment controller writes status.
    let mut d = r.body.clone();
    d["status"] = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3});
    let r = kapi.request(&Request::new("PUT", &format!("{path}/status?fieldManager=kube-controller-manager")).json(&d));
    assert_eq!(r.status, 200, "{}", r.body);

    let entries = r.body["metadata"]["managedFields"].as_array().expect("managedFields").clone();
    let order: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e["manager"].as_str().unwrap_or(""), e["operation"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(order.len(), 4, "{order:?}");
    assert!(order[..2].iter().all(|(_, op)| *op == "Apply") && order[2..].iter().all(|(_, op)| *op == "Update"), "{order:?}");
    let find = |m: &str| entries.iter().find(|e| e["manager"] == m).unwrap_or_else(|| panic!("no {m}: {order:?}"));
    assert_eq!(find("scaler")["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
    assert_eq!(find("labeller")["fieldsV1"], json!({"f:metadata": {"f:labels": {"f:team": {}}}}));
    assert!(find("kubectl-create")["fieldsV1"]["f:spec"].get("f:replicas").is_none(), "forced away");
    let controller = find("kube-controller-manager");
    assert_eq!(controller["subresource"], "status");
    assert_eq!(controller["operation"], "Update");
    assert_eq!(controller["fieldsV1"], json!({"f:status": {"f:observedGeneration": {}, "f:replicas": {}, "f:updatedReplicas": {}}}));
}

#[test]
fn managed_fields_of_a_scripted_sequence() {
    let kapi = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().expect("tempdir");
    kapi.kubectl(&["create", "namespace", NS]).ok("create namespace");
    let created = write(dir.path(), "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: ssa, labels: {app: web}}\ndata: {a: '1', b: '2'}\n");
    kapi.kubectl(&["create", "-f", &created]).ok("kubectl create");
    let path = format!("/api/v1/namespaces/{NS}/configmaps/settings");

    let apply = |manager: &str, body: &str| {
        let r = kapi.request(&Request::new("PATCH", &format!("{path}?fieldManager={manager}")).raw("application/apply-patch+yaml", body));
        assert_eq!(r.status, 200, "{manager}: {}", r.body);
        r.body
    };
    // Manager one takes over `a` (same value: shared, no conflict) and adds `c`.
    apply("one", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: '1', c: '3'}\n");
    // Manager two sets a label.
    let cm = apply("two", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, labels: {owner: two}}\n");
    let entries = cm["metadata"]["managedFields"].as_array().expect("managedFields").clone();
    let summary: Vec<(String, String, Value)> = entries
        .iter()
        .map(|e| (e["manager"].as_str().unwrap_or("").to_owned(), e["operation"].as_str().unwrap_or("").to_owned(), e["fieldsV1"].clone()))
        .collect();
    // Apply entries first, then Update; kube's exact sets.
    assert_eq!(summary.len(), 3, "{summary:?}");
    let find = |m: &str| summary.iter().find(|(n, _, _)| n == m).unwrap_or_else(|| panic!("no {m} in {summary:?}"));
    assert_eq!(find("one").1, "Apply");
    assert_eq!(find("one").2, json!({"f:data": {"f:a": {}, "f:c": {}}}));
    assert_eq!(find("two").2, json!({"f:metadata": {"f:labels": {"f:owner": {}}}}));
    assert_eq!(find("kubectl-create").1, "Update");
    assert_eq!(
        find("kubectl-create").2,
        json!({"f:data": {".": {}, "f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
    );
    assert_eq!(summary[2].1, "Update", "Apply entries sort before Update ones");

    // A controller updates with PUT: the fields it changes move to it.
    let mut obj = kapi.get_json(&path);
    obj["data"]["b"] = json!("20");
    let r = kapi.request(&Request::new("PUT", &format!("{path}?fieldManager=controller")).json(&obj));
    assert_eq!(r.status, 200, "{}", r.body);
    let entries = r.body["metadata"]["managedFields"].as_array().expect("managedFields").clone();
    let controller = entries.iter().find(|e| e["manager"] == "controller").expect("controller entry");
    assert_eq!(controller["operation"], "Update");
    assert_eq!(controller["fieldsV1"], json!({"f:data": {"f:b": {}}}));
    let create = entries.iter().find(|e| e["manager"] == "kubectl-create").expect("kubectl-create entry");
    assert_eq!(create["fieldsV1"], json!({"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}));

    // Status writes record under the status subresource (a Deployment's status).
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
    let dpath = format!("/apis/apps/v1/namespaces/{NS}/deployments");
    assert_eq!(kapi.request(&Request::new("POST", &format!("{dpath}?fieldManager=maker")).json(&deploy)).status, 201);
    let mut d = kapi.get_json(&format!("{dpath}/d"));
    d["status"] = json!({"replicas": 1, "observedGeneration": 1});
    let r = kapi.request(&Request::new("PUT", &format!("{dpath}/d/status?fieldManager=deployment-controller")).json(&d));
    assert_eq!(r.status, 200, "{}", r.body);
    let entries = r.body["metadata"]["managedFields"].as_array().expect("managedFields").clone();
    let status = entries.iter().find(|e| e["manager"] == "deployment-controller").expect("controller entry");
    assert_eq!(status["subresource"], "status");
    assert_eq!(status["fieldsV1"], json!({"f:status": {"f:observedGeneration": {}, "f:replicas": {}}}));
    let maker = entries.iter().find(|e| e["manager"] == "maker").expect("maker entry");
    assert!(maker.get("subresource").is_none());
    assert!(maker["fieldsV1"].get("f:status").is_none(), "status is reset on the main resource: {maker}");
}
