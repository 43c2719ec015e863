//! Everyday kubectl flows against a real kapi, with kubectl 1.27 (JSON bodies) when it is
//! installed and the default kubectl (whatever version is on PATH; protobuf bodies for built-in
//! types).

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use kapi_e2e::{fixture, versioned_kubectl_or_skip, which, Kapi, OutputExt, Request, Streaming};
use serde_json::{json, Value};

const NS: &str = "e2e";

/// One kubectl binary bound to one server.
struct Kubectl<'a> {
    kapi: &'a Kapi,
    bin: PathBuf,
}

impl<'a> Kubectl<'a> {
    /// kubectl 1.27, when installed beside kubectl (the caller skips otherwise).
    fn old(kapi: &'a Kapi) -> Option<Self> {
        versioned_kubectl_or_skip("1.27").map(|bin| Self { kapi, bin })
    }

    fn default(kapi: &'a Kapi) -> Self {
        Self { kapi, bin: which("kubectl").expect("kubectl on PATH") }
    }

    fn run(&self, args: &[&str]) -> Output {
        self.kapi.kubectl_with(&self.bin, args)
    }

    fn ok(&self, args: &[&str]) -> String {
        self.run(args).ok(&format!("{} {}", self.bin.display(), args.join(" ")))
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let out = self.ok(&all);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl {}: not JSON ({e}): {out}", args.join(" ")))
    }

    fn spawn(&self, args: &[&str]) -> Streaming {
        Streaming::spawn(&mut self.kapi.kubectl_command(&self.bin, args)).expect("spawn kubectl")
    }
}

fn tokens(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
}

/// Asserts the table's header line has exactly the expected columns.
fn assert_header(table: &str, expected: &str) {
    let header = table.lines().next().unwrap_or("");
    assert_eq!(tokens(header), tokens(expected), "header of table:\n{table}");
}

/// The row whose first column is `name`, split on whitespace.
fn row(table: &str, name: &str) -> Vec<String> {
    table
        .lines()
        .skip(1)
        .map(tokens)
        .find(|t| t.first().map(String::as_str) == Some(name))
        .unwrap_or_else(|| panic!("no row {name:?} in table:\n{table}"))
}

/// kubectl prints ages like `5s`, `2m3s`; `<unknown>` means creationTimestamp is missing.
fn assert_age(cell: &str) {
    assert!(
        !cell.is_empty() && cell.chars().next().is_some_and(|c| c.is_ascii_digit()) && cell.ends_with(['s', 'm', 'h', 'd']),
        "age cell {cell:?} is not a duration"
    );
}

fn create_namespace_and_apply(k: &Kubectl) {
    assert_eq!(k.ok(&["create", "namespace", NS]).trim(), format!("namespace/{NS} created"));
    let app = fixture("app.yaml");
    let out = k.ok(&["apply", "-n", NS, "-f", &app.display().to_string()]);
    for expected in [
        "deployment.apps/web created",
        "service/web created",
        "configmap/web-config created",
        "secret/web-secret created",
        "job.batch/pi created",
    ] {
        assert!(out.lines().any(|l| l.trim() == expected), "apply output lacks {expected:?}:\n{out}");
    }
    let pod = fixture("pod.yaml");
    assert_eq!(
        k.ok(&["apply", "-n", NS, "-f", &pod.display().to_string()]).trim(),
        "pod/standalone created"
    );
    // A second apply of the same file changes nothing.
    let again = k.ok(&["apply", "-n", NS, "-f", &app.display().to_string()]);
    assert!(again.lines().any(|l| l.trim() == "deployment.apps/web unchanged"), "re-apply:\n{again}");
}

fn check_tables(k: &Kubectl) {
    let t = k.ok(&["get", "deployments", "-n", NS]);
    assert_header(&t, "NAME   READY   UP-TO-DATE   AVAILABLE   AGE");
    let r = row(&t, "web");
    assert_eq!(r[1..4], ["0/1", "0", "0"], "deployment row:\n{t}");
    assert_age(&r[4]);

    let t = k.ok(&["get", "pods", "-n", NS]);
    assert_header(&t, "NAME   READY   STATUS   RESTARTS   AGE");
    let r = row(&t, "standalone");
    assert_eq!(r[1..4], ["0/1", "Pending", "0"], "pod row:\n{t}");
    assert_age(&r[4]);

    let t = k.ok(&["get", "services", "-n", NS]);
    assert_header(&t, "NAME   TYPE   CLUSTER-IP   EXTERNAL-IP   PORT(S)   AGE");
    let r = row(&t, "web");
    assert_eq!(r[1], "ClusterIP", "service row:\n{t}");
    assert!(r[2].parse::<std::net::IpAddr>().is_ok(), "cluster IP {:?} is not an IP address:\n{t}", r[2]);
    assert_eq!(r[3..5], ["<none>", "80/TCP"], "service row:\n{t}");
    assert_age(&r[5]);

    let t = k.ok(&["get", "configmaps", "-n", NS]);
    assert_header(&t, "NAME   DATA   AGE");
    let r = row(&t, "web-config");
    assert_eq!(r[1], "2", "configmap row:\n{t}");
    assert_age(&r[2]);

    let t = k.ok(&["get", "secrets", "-n", NS]);
    assert_header(&t, "NAME   TYPE   DATA   AGE");
    let r = row(&t, "web-secret");
    assert_eq!(r[1..3], ["Opaque", "1"], "secret row:\n{t}");
    assert_age(&r[3]);

    let t = k.ok(&["get", "jobs", "-n", NS]);
    assert_header(&t, "NAME   STATUS   COMPLETIONS   DURATION   AGE");
    let r = row(&t, "pi");
    // No controller runs: the job has no start time, so DURATION is empty.
    assert_eq!(r[1..3], ["Running", "0/1"], "job row:\n{t}");
    assert_age(r.last().map(String::as_str).unwrap_or(""));

    // The `kubernetes` Service lives in default; a cluster-scoped list works too.
    let t = k.ok(&["get", "namespaces"]);
    assert_header(&t, "NAME   STATUS   AGE");
    for ns in ["default", "kube-system", "kube-public", NS] {
        assert_eq!(row(&t, ns)[1], "Active", "namespace {ns}:\n{t}");
    }
}

fn check_output_formats(k: &Kubectl) {
    let yaml = k.ok(&["get", "deployment", "web", "-n", NS, "-o", "yaml"]);
    for line in [
        "apiVersion: apps/v1",
        "kind: Deployment",
        "replicas: 1",
        "revisionHistoryLimit: 10",
        "progressDeadlineSeconds: 600",
        "type: RollingUpdate",
        "maxSurge: 25%",
        "maxUnavailable: 25%",
        "restartPolicy: Always",
        "dnsPolicy: ClusterFirst",
        "terminationGracePeriodSeconds: 30",
        "imagePullPolicy: IfNotPresent",
    ] {
        assert!(yaml.lines().any(|l| l.trim() == line), "-o yaml lacks {line:?}:\n{yaml}");
    }

    let d = k.json(&["get", "deployment", "web", "-n", NS]);
    assert_eq!(d["spec"]["replicas"], json!(1));
    assert_eq!(d["spec"]["revisionHistoryLimit"], json!(10));
    assert_eq!(d["spec"]["progressDeadlineSeconds"], json!(600));
    assert_eq!(
        d["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
    );
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], json!("Always"));
    assert_eq!(pod["dnsPolicy"], json!("ClusterFirst"));
    assert_eq!(pod["terminationGracePeriodSeconds"], json!(30));
    assert_eq!(pod["schedulerName"], json!("default-scheduler"));
    assert_eq!(pod["containers"][0]["imagePullPolicy"], json!("IfNotPresent"));
    assert_eq!(pod["containers"][0]["terminationMessagePath"], json!("/dev/termination-log"));
    assert_eq!(pod["containers"][0]["ports"][0]["protocol"], json!("TCP"));
    let meta = &d["metadata"];
    assert_eq!(meta["namespace"], json!(NS));
    assert_eq!(meta["generation"], json!(1));
    for field in ["uid", "resourceVersion", "creationTimestamp"] {
        assert!(meta[field].as_str().is_some_and(|s| !s.is_empty()), "metadata.{field} missing: {meta}");
    }
    assert!(
        meta["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].is_string(),
        "apply must record last-applied-configuration: {meta}"
    );

    let svc = k.json(&["get", "service", "web", "-n", NS]);
    assert_eq!(svc["spec"]["sessionAffinity"], json!("None"));
    assert_eq!(svc["spec"]["type"], json!("ClusterIP"));
    assert_eq!(svc["spec"]["ports"][0]["protocol"], json!("TCP"));

    let image = k.ok(&["get", "deployment", "web", "-n", NS, "-o", "jsonpath={.spec.template.spec.containers[0].image}"]);
    assert_eq!(image, "nginx:1.25");
    let names = k.ok(&["get", "configmaps,secrets", "-n", NS, "-o", "jsonpath={range .items[*]}{.kind}/{.metadata.name} {end}"]);
    assert!(names.contains("ConfigMap/web-config") && names.contains("Secret/web-secret"), "jsonpath list: {names}");

    let t = k.ok(&["get", "configmaps", "-n", NS, "-o", "custom-columns=NAME:.metadata.name,GREETING:.data.greeting"]);
    assert_header(&t, "NAME   GREETING");
    assert_eq!(row(&t, "web-config")[1], "hello", "custom columns:\n{t}");

    let names = k.ok(&["get", "deployments,services", "-n", NS, "-o", "name"]);
    assert_eq!(tokens(&names), ["deployment.apps/web", "service/web"]);
}

fn check_describe(k: &Kubectl) {
    let out = k.ok(&["describe", "deployment", "web", "-n", NS]);
    let lines: Vec<String> = out.lines().map(|l| tokens(l).join(" ")).collect();
    for expected in [
        "Name: web",
        &format!("Namespace: {NS}"),
        "Selector: app=web",
        "StrategyType: RollingUpdate",
        "MinReadySeconds: 0",
        "RollingUpdateStrategy: 25% max unavailable, 25% max surge",
        "Image: nginx:1.25",
    ] {
        assert!(lines.iter().any(|l| l == expected), "describe lacks {expected:?}:\n{out}");
    }
}

fn check_label_annotate_patch_scale(k: &Kubectl) {
    assert_eq!(k.ok(&["label", "deployment", "web", "-n", NS, "tier=frontend"]).trim(), "deployment.apps/web labeled");
    assert_eq!(k.ok(&["get", "deployments", "-n", NS, "-l", "tier=frontend", "-o", "name"]).trim(), "deployment.apps/web");
    assert_eq!(k.ok(&["get", "deployments", "-n", NS, "-l", "tier=backend", "-o", "name"]).trim(), "");

    // kubectl 1.27 prints "annotate" (a client-side wording bug fixed in 1.28); the server's
    // answer is the same either way.
    let annotated = k.ok(&["annotate", "deployment", "web", "-n", NS, "example.com/note=hello"]);
    assert!(
        matches!(annotated.trim(), "deployment.apps/web annotated" | "deployment.apps/web annotate"),
        "annotate: {annotated}"
    );
    let note = k.ok(&["get", "deployment", "web", "-n", NS, "-o", "jsonpath={.metadata.annotations.example\\.com/note}"]);
    assert_eq!(note, "hello");

    let patch = r#"[{"op":"replace","path":"/data/greeting","value":"hi"},{"op":"add","path":"/data/added","value":"yes"}]"#;
    assert_eq!(
        k.ok(&["patch", "configmap", "web-config", "-n", NS, "--type=json", "-p", patch]).trim(),
        "configmap/web-config patched"
    );
    let cm = k.json(&["get", "configmap", "web-config", "-n", NS]);
    assert_eq!(cm["data"], json!({"greeting": "hi", "mode": "production", "added": "yes"}));

    let merge = r#"{"data":{"mode":null,"extra":"x"},"metadata":{"labels":{"patched":"merge"}}}"#;
    k.ok(&["patch", "configmap", "web-config", "-n", NS, "--type=merge", "-p", merge]);
    let cm = k.json(&["get", "configmap", "web-config", "-n", NS]);
    assert_eq!(cm["data"], json!({"greeting": "hi", "added": "yes", "extra": "x"}));
    assert_eq!(cm["metadata"]["labels"]["patched"], json!("merge"));

    // A spec change by JSON patch (strategic merge, kubectl's default, is in patches.rs).
    let image = r#"[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.26"}]"#;
    k.ok(&["patch", "deployment", "web", "-n", NS, "--type=json", "-p", image]);
    let d = k.json(&["get", "deployment", "web", "-n", NS]);
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["image"], json!("nginx:1.26"));
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"], json!(80));
    // kube's deployment strategy bumps generation on spec and on annotation changes: the
    // `kubectl annotate` above made it 2, this spec change 3.
    assert_eq!(d["metadata"]["generation"], json!(3), "a spec change bumps generation");

    assert_eq!(k.ok(&["scale", "deployment", "web", "-n", NS, "--replicas=3"]).trim(), "deployment.apps/web scaled");
    assert_eq!(k.ok(&["get", "deployment", "web", "-n", NS, "-o", "jsonpath={.spec.replicas}"]), "3");
    let t = k.ok(&["get", "deployment", "web", "-n", NS]);
    assert_eq!(row(&t, "web")[1], "0/3", "after scale:\n{t}");
}

/// Starts `kubectl get configmaps --watch`, then runs `change` and expects to see its effect.
fn check_watch(k: &Kubectl, change: impl FnOnce()) {
    let mut watch = k.spawn(&["get", "configmaps", "-n", NS, "--watch", "-o", "name"]);
    let first = watch.wait_for_line(Duration::from_secs(30), |l| l.trim() == "configmap/web-config");
    if first.is_none() {
        let err = watch.stop();
        panic!("watch never listed web-config; saw {:?}; stderr: {err}", watch.seen());
    }
    change();
    let late = watch.wait_for_line(Duration::from_secs(30), |l| l.trim() == "configmap/late");
    let seen = watch.seen().to_vec();
    let err = watch.stop();
    assert!(late.is_some(), "watch did not receive the new configmap; saw {seen:?}; stderr: {err}");
}

fn check_delete_and_wait(k: &Kubectl) {
    let mut wait = k.spawn(&["wait", "--for=delete", "deployment/web", "-n", NS, "--timeout=45s"]);
    std::thread::sleep(Duration::from_millis(500));
    let out = k.ok(&["delete", "deployment", "web", "-n", NS]);
    assert!(kapi_e2e::is_deletion_report(&out, r#"deployment.apps "web""#, NS, ""), "{out}");
    let status = wait.wait_exit(Duration::from_secs(50));
    let err = wait.stop();
    assert!(status.is_some_and(|s| s.success()), "wait --for=delete: {status:?}; stdout {:?}; stderr {err}", wait.seen());

    let out = k.run(&["get", "deployment", "web", "-n", NS]);
    assert!(!out.status.success());
    assert!(
        out.stderr_str().contains(r#"Error from server (NotFound): deployments.apps "web" not found"#),
        "stderr: {}",
        out.stderr_str()
    );

    // An unscheduled pod has no kubelet to confirm termination: it goes at once.
    k.ok(&["delete", "pod", "standalone", "-n", NS, "--timeout=30s"]);
    let out = k.run(&["get", "pod", "standalone", "-n", NS]);
    assert!(out.stderr_str().contains(r#"pods "standalone" not found"#), "stderr: {}", out.stderr_str());

    k.ok(&["delete", "-n", NS, "-f", &fixture("app.yaml").display().to_string(), "--ignore-not-found"]);
    let left = k.ok(&["get", "configmaps,secrets,services,jobs", "-n", NS, "-o", "name"]);
    assert!(!left.contains("web") && !left.contains("job.batch/pi"), "objects left after delete -f: {left}");
}

/// `kubectl explain` reads the OpenAPI v3 documents.
fn check_explain(k: &Kubectl) {
    let out = k.ok(&["explain", "deployment.spec.replicas"]);
    assert!(out.lines().any(|l| l.trim() == "FIELD: replicas <integer>"), "explain:\n{out}");
    assert!(out.contains("Number of desired pods"), "explain lacks the description:\n{out}");
    let out = k.ok(&["explain", "pods.spec.containers.ports"]);
    assert!(out.contains("containerPort") && out.contains("<integer> -required-"), "explain ports:\n{out}");
}

fn check_raw(k: &Kubectl) {
    let raw = |path: &str| -> Value {
        let out = k.ok(&["get", "--raw", path]);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("--raw {path}: {e}: {out}"))
    };
    let api = raw("/api");
    assert_eq!(api["kind"], json!("APIVersions"));
    assert_eq!(api["versions"], json!(["v1"]));
    let apis = raw("/apis");
    assert_eq!(apis["kind"], json!("APIGroupList"));
    let groups: Vec<&str> = apis["groups"].as_array().into_iter().flatten().filter_map(|g| g["name"].as_str()).collect();
    for g in ["apps", "batch", "rbac.authorization.k8s.io", "apiextensions.k8s.io"] {
        assert!(groups.contains(&g), "/apis lacks {g}: {groups:?}");
    }
    let apps = raw("/apis/apps/v1");
    assert_eq!(apps["kind"], json!("APIResourceList"));
    assert_eq!(apps["groupVersion"], json!("apps/v1"));
    let deploy = apps["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == json!("deployments"))
        .unwrap_or_else(|| panic!("no deployments in /apis/apps/v1: {apps}"));
    assert_eq!(deploy["kind"], json!("Deployment"));
    assert_eq!(deploy["namespaced"], json!(true));
    assert_eq!(deploy["shortNames"], json!(["deploy"]));
    let version = raw("/version");
    assert_eq!(version["major"], json!("1"));
    assert!(version["gitVersion"].as_str().is_some_and(|v| v.starts_with("v1.")), "/version: {version}");
    assert!(version["platform"].is_string(), "/version: {version}");
}

/// Creates the configmap `late` through the API with a JSON body (independent of kubectl).
fn create_late_configmap(kapi: &Kapi) {
    let r = kapi.request(
        &Request::new("POST", &format!("/api/v1/namespaces/{NS}/configmaps"))
            .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}, "data": {"k": "v"}})),
    );
    assert_eq!(r.status, 201, "create late: {}", r.raw);
}

#[test]
fn kubectl_1_27_full_flow() {
    let kapi = Kapi::start().expect("start kapi");
    let Some(k) = Kubectl::old(&kapi) else { return };
    create_namespace_and_apply(&k);
    check_tables(&k);
    check_output_formats(&k);
    check_describe(&k);
    check_label_annotate_patch_scale(&k);
    check_watch(&k, || {
        assert_eq!(k.ok(&["create", "configmap", "late", "-n", NS, "--from-literal=k=v"]).trim(), "configmap/late created");
    });
    assert_eq!(k.ok(&["delete", "configmap", "late", "-n", NS]).trim(), r#"configmap "late" deleted"#);
    check_delete_and_wait(&k);
    check_raw(&k);
    check_explain(&k);
}

/// Reads, lists and watches with the default kubectl (which accepts JSON answers); objects are
/// written with kubectl 1.27 (when installed, else the default kubectl) and curl so this does
/// not depend on protobuf request bodies.
#[test]
fn kubectl_default_reads_and_watches() {
    let kapi = Kapi::start().expect("start kapi");
    let k = Kubectl::default(&kapi);
    let writer = Kubectl::old(&kapi).unwrap_or_else(|| Kubectl::default(&kapi));
    // Whatever kubectl is installed: its client version must be a Kubernetes 1.x release.
    let version: Value = serde_json::from_str(&k.ok(&["version", "--client", "-o", "json"])).expect("version JSON");
    let git_version = version["clientVersion"]["gitVersion"].as_str().unwrap_or_default();
    assert!(git_version.starts_with("v1.") && version["clientVersion"]["major"] == "1", "default kubectl version: {version}");
    create_namespace_and_apply(&writer);
    check_tables(&k);
    check_output_formats(&k);
    check_describe(&k);
    check_watch(&k, || create_late_configmap(&kapi));
    check_raw(&k);
    check_explain(&k);
    // Deletion by 1.27; waiting and reading back with the default kubectl.
    let mut wait = k.spawn(&["wait", "--for=delete", "configmap/late", "-n", NS, "--timeout=45s"]);
    std::thread::sleep(Duration::from_millis(500));
    writer.ok(&["delete", "configmap", "late", "-n", NS]);
    let status = wait.wait_exit(Duration::from_secs(50));
    let err = wait.stop();
    assert!(status.is_some_and(|s| s.success()), "wait --for=delete: {status:?}; stderr {err}");
}

/// The default kubectl writes built-in kinds in protobuf.
#[test]
fn kubectl_default_full_flow() {
    let kapi = Kapi::start().expect("start kapi");
    let k = Kubectl::default(&kapi);
    create_namespace_and_apply(&k);
    // Typed writes really travel as protobuf, and the stored object is the same as from JSON.
    let traced = k.run(&["create", "configmap", "pb", "-n", NS, "--from-literal=a=b", "-v=8"]);
    let log = String::from_utf8_lossy(&traced.stderr);
    assert!(traced.status.success(), "create over protobuf failed:\n{log}");
    assert!(log.contains("Content-Type: application/vnd.kubernetes.protobuf"), "kubectl did not send protobuf:\n{log}");
    let pb = k.json(&["get", "configmap", "pb", "-n", NS]);
    assert_eq!(pb["data"], json!({"a": "b"}));
    assert!(pb["metadata"].get("generation").is_none(), "Go's zero generation is not stored: {pb}");
    check_tables(&k);
    check_output_formats(&k);
    check_label_annotate_patch_scale(&k);
    check_watch(&k, || {
        k.ok(&["create", "configmap", "late", "-n", NS, "--from-literal=k=v"]);
    });
    k.ok(&["delete", "configmap", "late", "-n", NS]);
    check_delete_and_wait(&k);
}

/// `kubectl run -i` waits for its pod with a client-go informer on the typed (protobuf) client:
/// a protobuf list, then a protobuf watch stream. When the pod turns Running and Ready it moves
/// on to attaching, which proves the watch event was decoded by real client-go.
#[test]
fn kubectl_default_informer_follows_protobuf_watch() {
    let kapi = Kapi::start().expect("start kapi");
    std::thread::scope(|scope| {
        // Once the pod exists (the informer has listed it), make it Running and Ready.
        let patcher = scope.spawn(|| {
            let k = Kubectl::default(&kapi);
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while k.run(&["get", "pod", "px"]).status.code() != Some(0) {
                assert!(std::time::Instant::now() < deadline, "kubectl run never created the pod");
                std::thread::sleep(Duration::from_millis(100));
            }
            std::thread::sleep(Duration::from_millis(500));
            let status = r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#;
            k.ok(&["patch", "pod", "px", "--subresource=status", "--type=merge", "-p", status]);
        });
        let k = Kubectl::default(&kapi);
        let out = k.run(&["run", "px", "--image=busybox", "-i", "--restart=Never", "--pod-running-timeout=30s", "-v=8"]);
        patcher.join().expect("patcher");
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(log.contains("application/vnd.kubernetes.protobuf;stream=watch"), "the watch was not protobuf:\n{log}");
        assert!(!log.contains("unable to decode an event"), "client-go failed to decode a watch event:\n{log}");
        // Past the wait: kubectl tried to attach (kapi has no kubelet to attach to).
        assert!(log.contains("couldn't attach to pod/px"), "kubectl never saw the pod become ready through the watch:\n{log}");
    });
}
