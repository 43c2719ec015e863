//! kube's per-kind registry semantics, for every served kind (issues 25 and 14): status on
//! create and update, `AllowUnconditionalUpdate` (PUT without resourceVersion, or "0"),
//! `AllowCreateOnUpdate` (PUT of a missing object), generation, and the DELETE answer beside
//! what `/openapi/v3` declares. The expected answers are in `registry_semantics/kinds.rs`,
//! written from kube's source, not from kapi's table. Plus Secret `stringData`, a Node's status
//! on create and a CSR's requester.

#[path = "registry_semantics/kinds.rs"]
mod kinds;

use std::collections::HashMap;
use std::process::Command;

use kapi_e2e::{Kapi, Request};
use kinds::{Crypto, Gen, Kind};
use serde_json::{json, Value};

const NS: &str = "sem";

fn openssl(dir: &std::path::Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("openssl").current_dir(dir).args(args).output().expect("openssl runs");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn b64(bytes: &[u8]) -> String {
    let out = Command::new("base64").arg("-w0").stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).spawn();
    let mut child = out.expect("base64 runs");
    std::io::Write::write_all(child.stdin.as_mut().expect("stdin"), bytes).expect("write");
    let out = child.wait_with_output().expect("base64");
    String::from_utf8(out.stdout).expect("ascii")
}

fn crypto(kapi: &Kapi) -> Crypto {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    openssl(d, &["genpkey", "-algorithm", "ed25519", "-out", "k.pem"]);
    let csr = openssl(d, &["req", "-new", "-key", "k.pem", "-subj", "/CN=sem"]);
    let pkix = openssl(d, &["pkey", "-in", "k.pem", "-pubout", "-outform", "DER"]);
    let pod_uid = "00000000-0000-0000-0000-000000000001".to_owned();
    std::fs::write(d.join("uid"), &pod_uid).expect("write uid");
    let proof = openssl(d, &["pkeyutl", "-sign", "-rawin", "-inkey", "k.pem", "-in", "uid"]);
    let ca_pem = std::fs::read_to_string(kapi.pki_dir().join("ca.crt")).expect("ca.crt");
    Crypto { ca_pem, csr_b64: b64(&csr), pkix_b64: b64(&pkix), proof_b64: b64(&proof), pod_uid }
}

/// `/api/v1` or `/apis/<group>/<version>`.
fn prefix(gv: &str) -> String {
    if gv == "v1" { "/api/v1".into() } else { format!("/apis/{gv}") }
}

fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (key, v) in p {
                merge(t.entry(key.clone()).or_insert(Value::Null), v);
            }
        }
        _ => *target = patch.clone(),
    }
}

fn generation(obj: &Value) -> Option<i64> {
    obj.pointer("/metadata/generation").and_then(Value::as_i64)
}

/// Every served resource with a create verb: (group version, resource, namespaced).
fn served(kapi: &Kapi) -> Vec<(String, String, bool)> {
    let mut gvs = vec!["v1".to_owned()];
    for g in kapi.get_json("/apis")["groups"].as_array().cloned().unwrap_or_default() {
        for v in g["versions"].as_array().cloned().unwrap_or_default() {
            gvs.push(v["groupVersion"].as_str().unwrap_or_default().to_owned());
        }
    }
    let mut out = Vec::new();
    for gv in gvs {
        for r in kapi.get_json(&prefix(&gv))["resources"].as_array().cloned().unwrap_or_default() {
            let name = r["name"].as_str().unwrap_or_default();
            let verbs = r["verbs"].as_array().cloned().unwrap_or_default();
            if name.contains('/') || !verbs.iter().any(|v| v == "create") || !verbs.iter().any(|v| v == "get") {
                continue;
            }
            out.push((gv.clone(), name.to_owned(), r["namespaced"].as_bool().unwrap_or(false)));
        }
    }
    out
}

/// What `/openapi/v3/<gv>` declares as the 200 answer of `method` on `path`: the last segment
/// of the schema reference (`io.k8s.api.core.v1.Service` -> `Service`).
fn declared(docs: &mut HashMap<String, Value>, kapi: &Kapi, gv: &str, path: &str, method: &str) -> String {
    let doc = docs.entry(gv.to_owned()).or_insert_with(|| kapi.get_json(&format!("/openapi/v3{}", prefix(gv))));
    let op = &doc["paths"][path][method];
    let schema = &op["responses"]["200"]["content"]["application/json"]["schema"];
    let reference = schema["$ref"].as_str().or_else(|| schema["allOf"][0]["$ref"].as_str()).unwrap_or_default();
    reference.rsplit('.').next().unwrap_or_default().to_owned()
}

/// Runs the table's checks for one kind; returns the differences from kube.
fn check(kapi: &Kapi, k: &Kind, namespaced: bool, docs: &mut HashMap<String, Value>) -> Vec<String> {
    let mut bad = Vec::new();
    let id = format!("{} {}", k.gv, k.resource);
    let coll = if namespaced { format!("{}/namespaces/{NS}/{}", prefix(k.gv), k.resource) } else { format!("{}/{}", prefix(k.gv), k.resource) };
    let item = format!("{coll}/{}", k.name);
    let api_version = k.gv;
    let group = k.gv.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    let mut obj = k.body.clone();
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(k.kind);
    obj["metadata"] = json!({"name": k.name, "labels": {"sem": "1"}});
    if let Some((status, _)) = &k.status {
        obj["status"] = status.clone();
    }
    // Create with a status: kept or reset; generation 1 or unset.
    let created = kapi.request(&Request::new("POST", &coll).json(&obj));
    if created.status != 201 {
        return vec![format!("{id}: create answered {}: {}", created.status, created.raw)];
    }
    let created = created.body;
    if k.resource == "apiservices" {
        // The aggregator's availability controller marks a local APIService Available at
        // once, as kube's does: the writes below start from that version.
        let marked = kapi_e2e::wait_for(std::time::Duration::from_secs(10), || {
            let now = kapi.get_json(&item);
            now["status"]["conditions"].as_array()?.iter().any(|c| c["type"] == "Available" && c["reason"] == "Local").then_some(())
        });
        if marked.is_none() {
            bad.push(format!("{id}: never marked Available (Local)"));
        }
    }
    if let Some((_, pointer)) = &k.status {
        let kept = created.pointer(pointer) == obj.pointer(pointer);
        if kept != k.status_kept_on_create {
            bad.push(format!("{id}: status {pointer} on create kept={kept}, kube keeps={}: {}", k.status_kept_on_create, created["status"]));
        }
    }
    let want_gen = (k.gen != Gen::Pinned).then_some(1);
    if generation(&created) != want_gen {
        bad.push(format!("{id}: generation on create {:?}, kube {want_gen:?}", generation(&created)));
    }
    // PUT without resourceVersion, and with "0".
    for (i, rv) in [None, Some("0")].into_iter().enumerate() {
        let mut body = kapi.get_json(&item);
        body["metadata"]["labels"]["try"] = json!(i.to_string());
        match rv {
            None => body["metadata"].as_object_mut().map(|m| m.remove("resourceVersion")).map(|_| ()).unwrap_or(()),
            Some(v) => body["metadata"]["resourceVersion"] = json!(v),
        }
        let r = kapi.request(&Request::new("PUT", &item).json(&body));
        let qualified = if group.is_empty() { k.resource.to_owned() } else { format!("{}.{group}", k.resource) };
        let want_msg = format!("{qualified} \"{}\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update", k.name);
        let ok = if k.unconditional_update { r.status == 200 } else { r.status == 422 && r.message() == want_msg };
        if !ok {
            bad.push(format!("{id}: PUT with resourceVersion {rv:?} answered {} (kube: {}): {}", r.status, if k.unconditional_update { "200".into() } else { want_msg }, r.raw));
        }
    }
    // Metadata-only changes (a label, an annotation), with a changed status in the body.
    for (field, bumps) in [("labels", k.gen == Gen::ContentOrLabels), ("annotations", k.gen == Gen::SpecOrAnnotations)] {
        let mut body = kapi.get_json(&item);
        let current = generation(&body);
        body["metadata"][field] = json!({"sem": "1", "changed": field});
        let sent_status = k.status.as_ref().map(|(_, p)| (p, json!([{"type": "Other", "status": "True", "reason": "X", "message": "m", "lastTransitionTime": "2021-01-01T00:00:00Z"}])));
        if let Some((pointer, _)) = &sent_status {
            let replaced = if pointer.ends_with("conditions") { json!([{"type": "Other", "status": "True", "reason": "X", "message": "m", "lastTransitionTime": "2021-01-01T00:00:00Z"}]) } else { Value::Null };
            if let Some(slot) = body.pointer_mut(pointer) {
                *slot = replaced;
            }
        }
        let stored_status = body.pointer(sent_status.as_ref().map(|(p, _)| **p).unwrap_or("/none")).cloned();
        let r = kapi.request(&Request::new("PUT", &item).json(&body));
        if r.status != 200 {
            bad.push(format!("{id}: metadata PUT answered {}: {}", r.status, r.raw));
            continue;
        }
        let want = if bumps { current.map(|g| g + 1) } else { current };
        if generation(&r.body) != want {
            bad.push(format!("{id}: generation after a {field} change {:?}, kube {want:?}", generation(&r.body)));
        }
        if let Some((pointer, _)) = sent_status {
            let from_update = r.body.pointer(pointer) == stored_status.as_ref() && stored_status.is_some();
            if from_update != k.status_from_update {
                bad.push(format!("{id}: status {pointer} taken from the update={from_update}, kube={}", k.status_from_update));
            }
        }
    }
    // A spec change.
    if let Some(change) = &k.change {
        let mut body = kapi.get_json(&item);
        let current = generation(&body);
        merge(&mut body, change);
        let r = kapi.request(&Request::new("PUT", &item).json(&body));
        let want = if matches!(k.gen, Gen::Pinned | Gen::CreateOnly) { current } else { current.map(|g| g + 1) };
        if r.status != 200 {
            bad.push(format!("{id}: spec change answered {}: {}", r.status, r.raw));
        } else if generation(&r.body) != want {
            bad.push(format!("{id}: generation after a spec change {:?}, kube {want:?}", generation(&r.body)));
        }
    }
    // PUT of a missing object.
    let mut missing = obj.clone();
    missing["metadata"]["name"] = json!(k.put_name);
    if let Some(m) = missing.as_object_mut() {
        m.remove("status");
    }
    let put_item = format!("{coll}/{}", k.put_name);
    let r = kapi.request(&Request::new("PUT", &put_item).json(&missing));
    let want = if k.create_on_update { 201 } else { 404 };
    if r.status != want {
        bad.push(format!("{id}: PUT of a missing object answered {}, kube {want}: {}", r.status, r.raw));
    }
    if r.status == 201 {
        kapi.request(&Request::new("DELETE", &put_item));
    }
    // DELETE: the answer's kind, and what OpenAPI declares.
    let r = kapi.request(&Request::new("DELETE", &item));
    let answered = r.body["kind"].as_str().unwrap_or_default().to_owned();
    let want = if k.delete_object || k.pending_delete { k.kind } else { "Status" };
    if r.status != 200 || answered != want {
        bad.push(format!("{id}: DELETE answered {} {answered}, kube {want}: {}", r.status, r.raw));
    }
    if answered == "Status" && (r.body["details"]["kind"] != json!(k.resource) || r.body["status"] != json!("Success")) {
        bad.push(format!("{id}: DELETE Status details {}", r.raw));
    }
    let item_path = if namespaced {
        format!("{}/namespaces/{{namespace}}/{}/{{name}}", prefix(k.gv), k.resource)
    } else {
        format!("{}/{}/{{name}}", prefix(k.gv), k.resource)
    };
    let doc_delete = declared(docs, kapi, k.gv, &item_path, "delete");
    let want_doc = if k.openapi_object { k.kind } else { "Status" };
    if doc_delete != want_doc {
        bad.push(format!("{id}: OpenAPI declares DELETE {doc_delete:?}, kube {want_doc}"));
    }
    // deletecollection answers the list of deleted objects; OpenAPI declares Status.
    let coll_path = item_path.trim_end_matches("/{name}").to_owned();
    if !declared(docs, kapi, k.gv, &coll_path, "delete").is_empty() {
        let r = kapi.request(&Request::new("DELETE", &format!("{coll}?labelSelector=sem-none%3D1")));
        if r.status != 200 || r.body["kind"] != json!(format!("{}List", k.kind)) {
            bad.push(format!("{id}: deletecollection answered {}: {}", r.status, r.raw));
        }
        let doc = declared(docs, kapi, k.gv, &coll_path, "delete");
        if doc != "Status" {
            bad.push(format!("{id}: OpenAPI declares deletecollection {doc:?}, kube Status"));
        }
    }
    bad
}

#[test]
fn every_served_kind_answers_as_kubes_registry() {
    // The registry alone, as kube-apiserver without a controller manager: the servicecidrs
    // controller would give the ServiceCIDRs its finalizer (DELETE then answers the object
    // pending deletion) and race the table's writes with its own.
    let kapi = Kapi::start_with(&["--controllers", "*,-service-cidr-controller"]).expect("kapi starts");
    let ns = kapi.request(&Request::new("POST", "/api/v1/namespaces").json(&json!({"metadata": {"name": NS}})));
    assert_eq!(ns.status, 201, "{}", ns.raw);
    let table = kinds::kinds(NS, &crypto(&kapi));
    let mut docs = HashMap::new();
    let mut bad = Vec::new();
    let mut checked = 0;
    for (gv, resource, namespaced) in served(&kapi) {
        let Some(k) = table.iter().find(|k| k.gv == gv && k.resource == resource) else {
            if !["tokenreviews", "selfsubjectreviews", "localsubjectaccessreviews", "selfsubjectaccessreviews", "selfsubjectrulesreviews", "subjectaccessreviews", "bindings"].contains(&resource.as_str()) {
                bad.push(format!("{gv} {resource}: served but not in the table"));
            }
            continue;
        };
        bad.extend(check(&kapi, k, namespaced, &mut docs));
        checked += 1;
    }
    assert!(checked >= 55, "only {checked} kinds checked");
    assert!(bad.is_empty(), "{} differences from kube:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn secret_string_data_is_merged_into_data_and_never_stored() {
    let kapi = Kapi::start().expect("kapi starts");
    // Raw HTTP: stringData overrides data (base64) and is not returned.
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"},
        "data": {"k1": "djE=", "k2": ""}, "stringData": {"k2": "v2", "k3": "v3"}});
    let r = kapi.request(&Request::new("POST", "/api/v1/namespaces/default/secrets").json(&secret));
    assert_eq!(r.status, 201, "{}", r.raw);
    let want = json!({"k1": "djE=", "k2": "djI=", "k3": "djM="});
    assert_eq!(r.body["data"], want, "{}", r.raw);
    assert!(r.body.get("stringData").is_none(), "{}", r.raw);
    let got = kapi.get_json("/api/v1/namespaces/default/secrets/s1");
    assert_eq!(got["data"], want);
    assert!(got.get("stringData").is_none());
    // An update's stringData is merged the same way.
    let mut update = got.clone();
    update["stringData"] = json!({"k1": "new"});
    let r = kapi.request(&Request::new("PUT", "/api/v1/namespaces/default/secrets/s1").json(&update));
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.body["data"]["k1"], json!("bmV3"), "{}", r.raw);
    assert!(r.body.get("stringData").is_none());
    // kubectl: a manifest with stringData, then a secret from literals.
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = dir.path().join("s.yaml");
    std::fs::write(&manifest, "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s2\n  namespace: default\nstringData:\n  password: hunter2\n").expect("write");
    let out = kapi.kubectl(&["apply", "-f", manifest.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = kapi.kubectl(&["get", "secret", "s2", "-n", "default", "-o", "json"]);
    let s2: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(s2["data"], json!({"password": "aHVudGVyMg=="}));
    assert!(s2.get("stringData").is_none());
    let out = kapi.kubectl(&["create", "secret", "generic", "s3", "-n", "default", "--from-literal=user=admin"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(kapi.get_json("/api/v1/namespaces/default/secrets/s3")["data"], json!({"user": "YWRtaW4="}));
}

#[test]
fn node_keeps_the_status_it_registers_with() {
    let kapi = Kapi::start().expect("kapi starts");
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-1"},
        "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
                "lastHeartbeatTime": "2024-01-01T00:00:00Z", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}});
    let r = kapi.request(&Request::new("POST", "/api/v1/nodes").json(&node));
    assert_eq!(r.status, 201, "{}", r.raw);
    assert_eq!(r.body["status"]["capacity"]["cpu"], json!("4"), "{}", r.raw);
    // Allocatable defaults to capacity, as kube's SetDefaults_NodeStatus does.
    assert_eq!(r.body["status"]["allocatable"]["memory"], json!("8Gi"), "{}", r.raw);
    assert_eq!(r.body["status"]["conditions"][0]["reason"], json!("KubeletReady"));
    let out = kapi.kubectl(&["describe", "node", "worker-1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for want in ["Conditions:", "KubeletReady", "Capacity:", "cpu:", "8Gi"] {
        assert!(text.contains(want), "describe lacks {want}:\n{text}");
    }
    // A main-resource update keeps the stored status.
    let mut update = kapi.get_json("/api/v1/nodes/worker-1");
    update["status"]["capacity"]["cpu"] = json!("64");
    let r = kapi.request(&Request::new("PUT", "/api/v1/nodes/worker-1").json(&update));
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.body["status"]["capacity"]["cpu"], json!("4"));
}

#[test]
fn csr_records_its_requester() {
    let kapi = Kapi::start().expect("kapi starts");
    let c = crypto(&kapi);
    let csr = |name: &str| {
        json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
            "spec": {"request": c.csr_b64, "signerName": "example.com/sem", "usages": ["client auth"],
                "username": "mallory", "uid": "forged", "groups": ["system:masters"], "extra": {"k": ["v"]}}})
    };
    let path = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let r = kapi.request(&Request::new("POST", path).json(&csr("as-admin")));
    assert_eq!(r.status, 201, "{}", r.raw);
    let spec = &r.body["spec"];
    assert_ne!(spec["username"], json!("mallory"), "{}", r.raw);
    assert!(spec["username"].as_str().is_some_and(|u| !u.is_empty()), "{}", r.raw);
    assert!(spec.get("uid").is_none() && spec.get("extra").is_none(), "{}", r.raw);
    // Impersonated: the impersonated user is the requester (allowed to ask, as a kubelet
    // bootstrapping its client certificate is).
    let grant = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "alice-csr"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node-bootstrapper"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]});
    let r = kapi.request(&Request::new("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings").json(&grant));
    assert_eq!(r.status, 201, "{}", r.raw);
    let r = kapi_e2e::wait_for(std::time::Duration::from_secs(10), || {
        let r = kapi.request(
            &Request::new("POST", path)
                .json(&csr("as-alice"))
                .header("Impersonate-User", "alice")
                .header("Impersonate-Group", "devs")
                .header("Impersonate-Uid", "alice-uid")
                .header("Impersonate-Extra-Team", "blue"),
        );
        (r.status != 403).then_some(r)
    })
    .expect("alice may create CSRs once the binding is in the RBAC index");
    assert_eq!(r.status, 201, "{}", r.raw);
    let spec = &r.body["spec"];
    assert_eq!(spec["username"], json!("alice"), "{}", r.raw);
    assert_eq!(spec["uid"], json!("alice-uid"), "{}", r.raw);
    assert!(spec["groups"].as_array().is_some_and(|g| g.contains(&json!("devs")) && !g.contains(&json!("system:masters"))), "{}", r.raw);
    assert_eq!(spec["extra"]["team"], json!(["blue"]), "{}", r.raw);
    // A main-resource update keeps the spec, requester included.
    let mut update = r.body.clone();
    update["spec"]["username"] = json!("mallory");
    let r = kapi.request(&Request::new("PUT", &format!("{path}/as-alice")).json(&update));
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.body["spec"]["username"], json!("alice"));
}
