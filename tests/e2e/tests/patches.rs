//! Strategic merge patch through real kubectl: client-side apply cycles that add, remove and
//! reorder list entries while another writer owns some of them, `kubectl edit` with a scripted
//! editor, `kubectl set image`, `kubectl rollout restart`, and malformed patches that must
//! change nothing. Expected objects follow kube-apiserver's documented merge semantics: lists
//! merge by their patch merge key, `$setElementOrder` orders the merged list, server-only
//! entries keep their place, `$retainKeys` clears a volume's old source.

use std::path::Path;

use kapi_e2e::{Kapi, OutputExt, Request};
use serde_json::{json, Value};

const NS: &str = "patching";

const V1: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: patching
  labels: {app: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx:1.25
        ports:
        - {containerPort: 80, name: http}
        - {containerPort: 443, name: https}
        env:
        - {name: A, value: "1"}
        - {name: B, value: "2"}
        - {name: C, value: "3"}
        volumeMounts:
        - {name: data, mountPath: /data}
        - {name: cache, mountPath: /cache}
      - name: sidecar
        image: busybox:1.36
        command: [sleep, "3600"]
      volumes:
      - {name: data, emptyDir: {}}
      - {name: cache, emptyDir: {medium: Memory}}
"#;

/// V1 with: image bumped, env B removed and D added first (order D, C, A), port 443 replaced
/// by 8080, the cache mount and volume removed, the data volume switched to a hostPath, the
/// sidecar removed and a new container placed before `app`.
const V2: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: patching
  labels: {app: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: log
        image: busybox:1.36
        args: [tail, -f, /dev/null]
      - name: app
        image: nginx:1.26
        ports:
        - {containerPort: 80, name: http}
        - {containerPort: 8080, name: alt}
        env:
        - {name: D, value: "4"}
        - {name: C, value: "3"}
        - {name: A, value: "1"}
        volumeMounts:
        - {name: data, mountPath: /data}
      volumes:
      - name: data
        hostPath: {path: /var/lib/web}
"#;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write manifest");
    path.display().to_string()
}

fn get(kapi: &Kapi, what: &str) -> Value {
    let out = kapi.kubectl(&["get", what, "-n", NS, "-o", "json"]).ok(&format!("get {what}"));
    serde_json::from_str(&out).expect("kubectl JSON")
}

fn names(list: &Value, key: &str) -> Vec<String> {
    list.as_array()
        .map(|items| items.iter().map(|i| i[key].to_string().trim_matches('"').to_string()).collect())
        .unwrap_or_default()
}

fn container<'a>(d: &'a Value, name: &str) -> &'a Value {
    d["spec"]["template"]["spec"]["containers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no container {name} in {d}"))
}

#[test]
fn client_side_apply_edit_set_image_and_restart_merge_like_kube() {
    let kapi = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().expect("tempdir");
    kapi.kubectl(&["create", "namespace", NS]).ok("create namespace");

    let v1 = write(dir.path(), "v1.yaml", V1);
    assert_eq!(kapi.kubectl(&["apply", "-f", &v1]).ok("apply v1").trim(), "deployment.apps/web created");
    // Re-applying an unchanged manifest is a no-op.
    let before = get(&kapi, "deployment/web");
    assert_eq!(kapi.kubectl(&["apply", "-f", &v1]).ok("re-apply v1").trim(), "deployment.apps/web unchanged");
    assert_eq!(get(&kapi, "deployment/web")["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"]);

    // Another writer adds an env var and a label that the manifest does not know about.
    let injected = r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","env":[{"name":"E","value":"injected"}]}]}}},"metadata":{"labels":{"owner":"ops"}}}"#;
    kapi.kubectl(&["patch", "deployment", "web", "-n", NS, "-p", injected]).ok("strategic patch by another writer");
    let d = get(&kapi, "deployment/web");
    // A new entry without `$setElementOrder` goes first: kube places patch entries before
    // server-only ones unless the live list says otherwise.
    assert_eq!(names(&container(&d, "app")["env"], "name"), ["E", "A", "B", "C"], "the patch merged env by name");
    assert_eq!(container(&d, "app")["image"], json!("nginx:1.25"), "merging kept the other fields");
    assert_eq!(names(&d["spec"]["template"]["spec"]["containers"], "name"), ["app", "sidecar"]);

    let v2 = write(dir.path(), "v2.yaml", V2);
    assert_eq!(kapi.kubectl(&["apply", "-f", &v2]).ok("apply v2").trim(), "deployment.apps/web configured");
    let d = get(&kapi, "deployment/web");
    let spec = &d["spec"]["template"]["spec"];
    assert_eq!(names(&spec["containers"], "name"), ["log", "app"], "sidecar removed, new container ordered first");
    let app = container(&d, "app");
    assert_eq!(app["image"], json!("nginx:1.26"));
    // B deleted, D added, order from the manifest ($setElementOrder), the server-only E placed
    // before the first applied entry that follows it in the live list (C).
    assert_eq!(
        app["env"],
        json!([{"name": "D", "value": "4"}, {"name": "E", "value": "injected"}, {"name": "C", "value": "3"}, {"name": "A", "value": "1"}])
    );
    assert_eq!(names(&app["ports"], "containerPort"), ["80", "8080"]);
    assert_eq!(names(&app["ports"], "name"), ["http", "alt"]);
    assert_eq!(app["volumeMounts"], json!([{"name": "data", "mountPath": "/data"}]));
    assert_eq!(names(&spec["volumes"], "name"), ["data"]);
    let data = &spec["volumes"][0];
    assert!(data.get("emptyDir").is_none(), "$retainKeys cleared the old volume source: {data}");
    assert_eq!(data["hostPath"]["path"], json!("/var/lib/web"));
    assert_eq!(container(&d, "log")["args"], json!(["tail", "-f", "/dev/null"]));
    assert_eq!(d["metadata"]["labels"], json!({"app": "web", "owner": "ops"}), "labels nobody applied stay");
    assert_eq!(d["metadata"]["generation"], json!(3));
    let last_applied = d["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .expect("last-applied annotation");
    assert!(last_applied.contains("nginx:1.26"), "annotation tracks the latest manifest");

    // Applying v1 again puts back what v1 says and removes what only v2 had.
    kapi.kubectl(&["apply", "-f", &v1]).ok("apply v1 again");
    let d = get(&kapi, "deployment/web");
    assert_eq!(names(&d["spec"]["template"]["spec"]["containers"], "name"), ["app", "sidecar"]);
    assert_eq!(names(&container(&d, "app")["env"], "name"), ["E", "A", "B", "C"]);
    assert_eq!(names(&container(&d, "app")["ports"], "containerPort"), ["80", "443"]);
    let vols = &d["spec"]["template"]["spec"]["volumes"];
    assert_eq!(vols, &json!([{"name": "data", "emptyDir": {}}, {"name": "cache", "emptyDir": {"medium": "Memory"}}]));

    // kubectl edit: the editor bumps the image and the replica count.
    let editor = write(dir.path(), "editor.sh", "#!/bin/sh\nsed -i -e 's/nginx:1.25/nginx:1.27/' -e 's/replicas: 2/replicas: 4/' \"$1\"\n");
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let mut edit = kapi.kubectl_command(&kapi_e2e::which("kubectl").expect("kubectl"), &["edit", "deployment/web", "-n", NS]);
    edit.env("KUBE_EDITOR", &editor).env("EDITOR", &editor);
    let out = edit.output().expect("kubectl edit");
    assert!(out.status.success(), "kubectl edit: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "deployment.apps/web edited");
    let d = get(&kapi, "deployment/web");
    assert_eq!(container(&d, "app")["image"], json!("nginx:1.27"));
    assert_eq!(d["spec"]["replicas"], json!(4));
    assert_eq!(names(&container(&d, "app")["env"], "name"), ["E", "A", "B", "C"], "edit left the lists alone");

    kapi.kubectl(&["set", "image", "deployment/web", "-n", NS, "app=nginx:1.28"]).ok("set image");
    let d = get(&kapi, "deployment/web");
    assert_eq!(container(&d, "app")["image"], json!("nginx:1.28"));
    assert_eq!(container(&d, "sidecar")["image"], json!("busybox:1.36"), "set image touched only app");

    assert_eq!(
        kapi.kubectl(&["rollout", "restart", "deployment/web", "-n", NS]).ok("rollout restart").trim(),
        "deployment.apps/web restarted"
    );
    let d = get(&kapi, "deployment/web");
    let restarted = &d["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"];
    assert!(restarted.as_str().is_some_and(|t| t.len() >= 20), "restartedAt annotation: {restarted}");
    assert_eq!(d["spec"]["template"]["metadata"]["labels"], json!({"app": "web"}));
}

#[test]
fn strategic_patch_directives_and_bad_patches_over_http() {
    let kapi = Kapi::start().expect("start kapi");
    kapi.kubectl(&["create", "namespace", NS]).ok("create namespace");
    // A PodTemplate: a pod's spec, without a pod's update restrictions.
    let template = json!({
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": "p", "finalizers": ["example.com/a", "example.com/b"]},
        "template": {"spec": {"containers": [
            {"name": "a", "image": "busybox", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
            {"name": "b", "image": "busybox"}
        ], "tolerations": [{"key": "k", "operator": "Exists"}]}}
    });
    let path = format!("/api/v1/namespaces/{NS}/podtemplates");
    assert_eq!(kapi.request(&Request::new("POST", &path).json(&template)).status, 201);
    let template_path = format!("{path}/p");
    let smp = "application/strategic-merge-patch+json";

    let patch = json!({
        "metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/a"], "finalizers": ["example.com/c"]},
        "template": {"spec": {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
            "containers": [{"name": "a", "env": [{"name": "X", "$patch": "delete"}, {"name": "Z", "value": "3"}]}],
            "tolerations": [{"key": "other", "operator": "Exists"}]
        }}
    });
    let r = kapi.request(&Request::new("PATCH", &template_path).raw(smp, patch.to_string()));
    assert_eq!(r.status, 200, "{}", r.body);
    let p = r.body.clone();
    assert_eq!(p["metadata"]["finalizers"], json!(["example.com/c", "example.com/b"]), "a deleted, c added first");
    let spec = &p["template"]["spec"];
    assert_eq!(names(&spec["containers"], "name"), ["b", "a"]);
    // New entries without `$setElementOrder` go before server-only ones, as in kube.
    assert_eq!(spec["containers"][1]["env"], json!([{"name": "Z", "value": "3"}, {"name": "Y", "value": "2"}]));
    assert_eq!(spec["tolerations"], json!([{"key": "other", "operator": "Exists"}]), "no merge key: replaced");

    let rv = p["metadata"]["resourceVersion"].clone();
    for (body, code, message) in [
        (r#"{"spec":"#, 400, ""),
        (r#"[{"op":"add"}]"#, 400, "cannot unmarshal array into Go value of type map[string]interface {}"),
        (r#""just a string""#, 400, "cannot unmarshal string"),
        (r#"{"template":{"spec":{"containers":[{"image":"x"}]}}}"#, 400, "does not contain declared merge key: name"),
        (r#"{"template":{"spec":{"containers":[{"name":"a","$patch":"merge"}]}}}"#, 400, "merging lists cannot yet be specified"),
        (r#"{"metadata":{"$patch":"bogus"}}"#, 400, "unknown patch type: bogus"),
        (r#"{"kind":"Service"}"#, 400, ""),
        (r#"{"apiVersion":"v2"}"#, 400, ""),
        (r#"{"metadata":{"name":"other"}}"#, 400, "does not match the name on the URL"),
        (r#"{"template":{"spec":{"containers":[{"name":"a","image":123}]}}}"#, 422, ""),
    ] {
        let r = kapi.request(&Request::new("PATCH", &template_path).raw(smp, body));
        assert_eq!(r.status, code, "{body}: {}", r.body);
        assert!(r.message().contains(message), "{body}: {}", r.body);
        let now = kapi.get_json(&template_path);
        assert_eq!(now["metadata"]["resourceVersion"], rv, "{body} changed the template");
    }

    // fieldValidation=Strict covers patches: unknown fields of the result, duplicates in the body,
    // each an invalid `patch` (422) as kube's patch handler reports them.
    let strict = format!("{template_path}?fieldValidation=Strict");
    for (content_type, body, message) in [
        (smp, r#"{"template":{"spec":{"bogus":1}}}"#, r#"strict decoding error: unknown field "template.spec.bogus""#),
        ("application/merge-patch+json", r#"{"metadata":{"labels":{"x":"1","x":"2"}}}"#, r#"duplicate field "metadata.labels.x""#),
        (smp, r#"{"metadata":{"labels":{"x":"1","x":"2"}}}"#, r#"duplicate field "metadata.labels.x""#),
    ] {
        let r = kapi.request(&Request::new("PATCH", &strict).raw(content_type, body));
        assert_eq!((r.status, r.reason()), (422, "Invalid"), "{body}: {}", r.body);
        assert!(r.message().contains(message), "{body}: {}", r.body);
        assert_eq!(kapi.get_json(&template_path)["metadata"]["resourceVersion"], rv, "{body} changed the template");
    }
    // Ignore (the default for API clients) drops the unknown field and succeeds.
    let r = kapi.request(&Request::new("PATCH", &template_path).raw(smp, r#"{"template":{"spec":{"bogus":1}}}"#));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body["template"]["spec"].get("bogus").is_none(), "unknown fields are dropped: {}", r.body);

    // Strategic merge patch also reaches subresources: the scale of a deployment.
    let deploy = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    });
    assert_eq!(kapi.request(&Request::new("POST", &format!("/apis/apps/v1/namespaces/{NS}/deployments")).json(&deploy)).status, 201);
    let scale = format!("/apis/apps/v1/namespaces/{NS}/deployments/d/scale");
    let r = kapi.request(&Request::new("PATCH", &scale).raw(smp, r#"{"spec":{"replicas":5}}"#));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(kapi.get_json(&format!("/apis/apps/v1/namespaces/{NS}/deployments/d"))["spec"]["replicas"], json!(5));
}
