//! More of kube's built-in admission with kubectl (issue 16): signing a
//! CertificateSigningRequest needs `sign` on its signer (CertificateSigning), and the
//! kube-apiserver-client signer is never asked for `system:masters` (CertificateSubjectRestriction);
//! every namespace gets its `default` ServiceAccount and `kube-root-ca.crt`, and pods run as
//! an account with its projected token volume (ServiceAccount and its controllers).

use std::path::PathBuf;
use std::process::Command;

use kapi_e2e::{Kapi, OutputExt, Request};
use serde_json::{json, Value};

/// Writes `obj` as a manifest kubectl can read.
fn manifest(dir: &tempfile::TempDir, name: &str, obj: &Value) -> PathBuf {
    let path = dir.path().join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(obj).unwrap()).unwrap();
    path
}

/// A PEM certificate request made by openssl for `subject`.
fn certificate_request(dir: &tempfile::TempDir, subject: &str) -> String {
    let (key, csr) = (dir.path().join("csr.key"), dir.path().join("csr.pem"));
    let out = Command::new("openssl")
        .args(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", subject, "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&csr)
        .output()
        .expect("run openssl");
    assert!(out.status.success(), "openssl: {}", String::from_utf8_lossy(&out.stderr));
    std::fs::read_to_string(&csr).unwrap()
}

/// base64 as kube writes `[]byte` fields.
fn base64(data: &[u8]) -> String {
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, data)
}

fn csr(name: &str, signer: &str, request: &str) -> Value {
    json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
        "spec": {"signerName": signer, "request": base64(request.as_bytes()), "usages": ["client auth"]}})
}

#[test]
fn csrs_for_system_masters_are_refused_and_signing_needs_sign_on_the_signer() {
    let kapi = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().unwrap();

    let masters = csr("masters", "kubernetes.io/kube-apiserver-client", &certificate_request(&dir, "/CN=eve/O=system:masters"));
    let (ok, stdout, stderr) = kapi.kubectl(&["create", "-f", manifest(&dir, "masters", &masters).to_str().unwrap()]).outcome();
    assert!(!ok, "created: {stdout}");
    assert!(
        stderr.contains(
            "certificatesigningrequests.certificates.k8s.io \"masters\" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"
        ),
        "{stderr}"
    );
    let (found, _, _) = kapi.kubectl(&["get", "csr", "masters"]).outcome();
    assert!(!found, "nothing stored when refused");

    let alice = csr("alice", "example.com/signer", &certificate_request(&dir, "/CN=alice/O=dev"));
    kapi.kubectl(&["create", "-f", manifest(&dir, "alice", &alice).to_str().unwrap()]).ok("create csr");

    // The signer may write the status subresource, but nothing lets it sign for the signer.
    let access = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "csr-signer"},
        "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests/status"], "verbs": ["update"]}]});
    kapi.kubectl(&["create", "-f", manifest(&dir, "role", &access).to_str().unwrap()]).ok("create role");
    kapi.kubectl(&["create", "clusterrolebinding", "csr-signer", "--clusterrole=csr-signer", "--user=signer"]).ok("bind");
    let signer = kapi.issue_client_cert("signer", &[]);

    // A signer that gives up on a request marks it Failed: a change of conditions is signing.
    let stored: Value = serde_json::from_str(&kapi.kubectl(&["get", "csr", "alice", "-o", "json"]).ok("get csr")).unwrap();
    let mut failed = stored.clone();
    failed["status"] = json!({"conditions": [{"type": "Failed", "status": "True", "reason": "SignerGaveUp", "message": "no"}]});
    let path = "/apis/certificates.k8s.io/v1/certificatesigningrequests/alice/status";
    let r = kapi.request(&Request::new("PUT", path).json(&failed).as_user(&signer));
    assert_eq!((r.status, r.body["reason"].as_str()), (403, Some("Forbidden")), "{}", r.raw);
    assert_eq!(
        r.body["message"],
        "certificatesigningrequests.certificates.k8s.io \"alice\" is forbidden: user not permitted to sign requests with signerName \"example.com/signer\"",
        "{}",
        r.raw
    );
    let conditions = kapi.kubectl(&["get", "csr", "alice", "-o", "jsonpath={.status.conditions}"]).ok("get csr");
    assert_eq!(conditions, "", "nothing stored when refused");

    // kube's rule for signers: sign on the signers resource, here for the signer's whole domain.
    let rule = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "example-signer"},
        "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "resourceNames": ["example.com/*"], "verbs": ["sign"]}]});
    kapi.kubectl(&["create", "-f", manifest(&dir, "rule", &rule).to_str().unwrap()]).ok("create signer role");
    kapi.kubectl(&["create", "clusterrolebinding", "example-signer", "--clusterrole=example-signer", "--user=signer"]).ok("bind signer");
    let mut status = 0;
    for _ in 0..50 {
        // RBAC reaches the authorizer through the watch cache: a moment after the write.
        let r = kapi.request(&Request::new("PUT", path).json(&failed).as_user(&signer));
        status = r.status;
        if status == 200 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(status, 200);
    let condition = kapi.kubectl(&["get", "csr", "alice", "-o", "jsonpath={.status.conditions[0].type}"]).ok("get signed csr");
    assert_eq!(condition, "Failed");
}

/// Polls `kubectl get` until it succeeds (what a controller makes shows up a moment later).
fn eventually(kapi: &Kapi, args: &[&str]) -> String {
    for _ in 0..100 {
        let (ok, stdout, _) = kapi.kubectl(args).outcome();
        if ok {
            return stdout;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("kubectl {} never succeeded", args.join(" "));
}

#[test]
fn namespaces_get_their_default_account_and_root_ca_and_pods_mount_a_token() {
    let kapi = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().unwrap();
    kapi.kubectl(&["create", "namespace", "team"]).ok("create namespace");

    // Nothing but a name: no managed fields, as kube's controller leaves none.
    let sa: Value =
        serde_json::from_str(&eventually(&kapi, &["get", "serviceaccount", "default", "-n", "team", "-o", "json", "--show-managed-fields"])).unwrap();
    assert!(sa["metadata"].get("managedFields").is_none(), "{sa}");
    let cm: Value =
        serde_json::from_str(&eventually(&kapi, &["get", "configmap", "kube-root-ca.crt", "-n", "team", "-o", "json", "--show-managed-fields"]))
            .unwrap();
    assert_eq!(cm["metadata"]["managedFields"][0]["manager"], "kube-controller-manager", "{cm}");
    let ca = std::fs::read_to_string(kapi.pki_dir().join("ca.crt")).unwrap();
    assert_eq!(cm["data"], json!({"ca.crt": ca}));
    assert_eq!(
        cm["metadata"]["annotations"]["kubernetes.io/description"],
        "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
    );
    // The namespaces that exist from the start have them too.
    eventually(&kapi, &["get", "serviceaccount", "default", "-n", "kube-system"]);
    eventually(&kapi, &["get", "configmap", "kube-root-ca.crt", "-n", "default"]);

    let token = kapi.kubectl(&["create", "token", "default", "-n", "team"]).ok("create token");
    assert_eq!(token.trim().split('.').count(), 3, "a JWT: {token}");

    // Deleted, both come back; a changed CA is put back.
    kapi.kubectl(&["delete", "serviceaccount", "default", "-n", "team"]).ok("delete account");
    kapi.kubectl(&["delete", "configmap", "kube-root-ca.crt", "-n", "team"]).ok("delete configmap");
    eventually(&kapi, &["get", "serviceaccount", "default", "-n", "team"]);
    eventually(&kapi, &["get", "configmap", "kube-root-ca.crt", "-n", "team"]);
    kapi.kubectl(&["patch", "configmap", "kube-root-ca.crt", "-n", "team", "-p", r#"{"data":{"ca.crt":"forged"}}"#]).ok("patch");
    let mut restored = String::new();
    for _ in 0..100 {
        restored = kapi.kubectl(&["get", "configmap", "kube-root-ca.crt", "-n", "team", "-o", "jsonpath={.data.ca\\.crt}"]).ok("get ca");
        if restored.trim() == ca.trim() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(restored.trim(), ca.trim());

    kapi.kubectl(&["run", "web", "--image=nginx", "-n", "team"]).ok("run pod");
    let pod: Value = serde_json::from_str(&kapi.kubectl(&["get", "pod", "web", "-n", "team", "-o", "json"]).ok("get pod")).unwrap();
    let spec = &pod["spec"];
    assert_eq!((spec["serviceAccountName"].as_str(), spec["serviceAccount"].as_str()), (Some("default"), Some("default")));
    let volume = spec["volumes"].as_array().and_then(|v| v.last()).cloned().unwrap_or_default();
    let name = volume["name"].as_str().unwrap_or_default();
    assert!(name.starts_with("kube-api-access-") && name.len() == 21, "{volume}");
    assert_eq!(volume["projected"]["sources"][0], json!({"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}));
    assert_eq!(volume["projected"]["defaultMode"], 420);
    assert_eq!(
        spec["containers"][0]["volumeMounts"],
        json!([{"name": name, "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}])
    );

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lost", "namespace": "team"},
        "spec": {"serviceAccountName": "missing", "containers": [{"name": "c", "image": "nginx"}]}});
    let (ok, _, stderr) = kapi.kubectl(&["create", "-f", manifest(&dir, "lost", &pod).to_str().unwrap()]).outcome();
    assert!(!ok);
    assert!(
        stderr.contains("pods \"lost\" is forbidden: error looking up service account team/missing: serviceaccount \"missing\" not found"),
        "{stderr}"
    );
}

/// `jsonpath` of a quota, polled until it reads `want`.
fn quota_reads(kapi: &Kapi, ns: &str, path: &str, want: &str) {
    let mut got = String::new();
    for _ in 0..100 {
        got = kapi.kubectl(&["get", "quota", "q", "-n", ns, "-o", &format!("jsonpath={path}")]).ok("get quota");
        if got == want {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("quota {path} is {got:?}, not {want:?}");
}

#[test]
fn a_pods_quota_refuses_the_pod_over_it_and_deleting_one_frees_its_share() {
    let kapi = Kapi::start().expect("start kapi");
    kapi.kubectl(&["create", "namespace", "quota"]).ok("create namespace");
    kapi.kubectl(&["create", "quota", "q", "-n", "quota", "--hard=pods=2,count/configmaps=10"]).ok("create quota");
    // The controller fills the status (hard from spec, used counted: kube-root-ca.crt is one).
    quota_reads(&kapi, "quota", "{.status.used.pods}", "0");
    quota_reads(&kapi, "quota", "{.status.hard.pods}", "2");
    eventually(&kapi, &["get", "serviceaccount", "default", "-n", "quota"]);

    for name in ["a", "b"] {
        kapi.kubectl(&["run", name, "--image=nginx", "-n", "quota"]).ok("run pod");
    }
    let (ok, stdout, stderr) = kapi.kubectl(&["run", "c", "--image=nginx", "-n", "quota"]).outcome();
    assert!(!ok, "admitted over the quota: {stdout}");
    assert!(
        stderr
            .contains("Error from server (Forbidden): pods \"c\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"),
        "{stderr}"
    );
    let (found, _, _) = kapi.kubectl(&["get", "pod", "c", "-n", "quota"]).outcome();
    assert!(!found, "nothing stored when refused");

    // kubectl describe shows exact usage.
    quota_reads(&kapi, "quota", "{.status.used.count/configmaps}", "1");
    let described = kapi.kubectl(&["describe", "quota", "q", "-n", "quota"]).ok("describe quota");
    let rows: Vec<Vec<&str>> = described.lines().map(|l| l.split_whitespace().collect()).filter(|r: &Vec<&str>| r.len() == 3).collect();
    assert!(rows.contains(&vec!["pods", "2", "2"]), "{described}");
    assert!(rows.contains(&vec!["count/configmaps", "1", "10"]), "{described}");

    // Deleting a pod gives its share back; the next pod fits.
    kapi.kubectl(&["delete", "pod", "a", "-n", "quota", "--wait=true"]).ok("delete pod");
    quota_reads(&kapi, "quota", "{.status.used.pods}", "1");
    kapi.kubectl(&["run", "c", "--image=nginx", "-n", "quota"]).ok("run pod after the delete");
    quota_reads(&kapi, "quota", "{.status.used.pods}", "2");
}

#[test]
fn approving_a_csr_needs_approve_on_its_signer() {
    let kapi = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().unwrap();
    let bob = csr("bob", "example.com/signer", &certificate_request(&dir, "/CN=bob/O=dev"));
    kapi.kubectl(&["create", "-f", manifest(&dir, "bob", &bob).to_str().unwrap()]).ok("create csr");

    // A user who may update the approval subresource, but not approve for the signer.
    let access = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "csr-approver"},
        "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests/approval"], "verbs": ["update"]}]});
    kapi.kubectl(&["create", "-f", manifest(&dir, "approver-role", &access).to_str().unwrap()]).ok("create role");
    kapi.kubectl(&["create", "clusterrolebinding", "csr-approver", "--clusterrole=csr-approver", "--user=approver"]).ok("bind");
    let approver = kapi.issue_client_cert("approver", &[]);
    let kubeconfig = kapi.kubeconfig_for("approver", &approver);
    let kubeconfig = kubeconfig.to_str().unwrap();
    let denied = kapi.kubectl(&["--kubeconfig", kubeconfig, "certificate", "approve", "bob"]);
    let stderr = String::from_utf8_lossy(&denied.stderr);
    assert!(!denied.status.success());
    assert!(
        stderr.contains("certificatesigningrequests.certificates.k8s.io \"bob\" is forbidden: user not permitted to approve requests with signerName \"example.com/signer\""),
        "{stderr}"
    );
    assert_eq!(kapi.kubectl(&["get", "csr", "bob", "-o", "jsonpath={.status.conditions}"]).ok("get csr"), "", "nothing stored");

    // With approve on the signer's domain, the approval goes through; only the conditions change.
    let rule = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "example-approver"},
        "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "resourceNames": ["example.com/*"], "verbs": ["approve"]}]});
    kapi.kubectl(&["create", "-f", manifest(&dir, "approve-rule", &rule).to_str().unwrap()]).ok("create approve role");
    kapi.kubectl(&["create", "clusterrolebinding", "example-approver", "--clusterrole=example-approver", "--user=approver"]).ok("bind approver");
    let mut approved = false;
    for _ in 0..50 {
        if kapi.kubectl(&["--kubeconfig", kubeconfig, "certificate", "approve", "bob"]).status.success() {
            approved = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(approved, "approved once RBAC has the rule");
    let stored: Value = serde_json::from_str(&kapi.kubectl(&["get", "csr", "bob", "-o", "json"]).ok("get csr")).unwrap();
    let condition = &stored["status"]["conditions"][0];
    assert_eq!((condition["type"].as_str(), condition["status"].as_str()), (Some("Approved"), Some("True")), "{stored}");
    assert!(condition["lastUpdateTime"].is_string(), "kube stamps the condition: {condition}");
    assert_eq!(stored["spec"]["signerName"], "example.com/signer");
    assert!(stored["status"].get("certificate").is_none());
}
