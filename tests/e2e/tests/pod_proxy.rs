//! Pod log, exec and the other kubelet subresources through kapi, against a kubelet-shaped
//! HTTPS server (`python/fake_kubelet.py`) that demands kapi's `--kubelet-client-certificate`:
//! kubectl logs (plain, tailed, followed), kubectl exec and attach over WebSocket (v5.channel.k8s.io,
//! stdout, stdin, exit codes), kube's answers for unscheduled pods, missing pods and
//! containers, bad options and unreachable kubelets, and the `create` permission WebSocket
//! upgrades need.

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use kapi_e2e::{free_port, FakeKubelet, Kapi, OutputExt, Request, Streaming, KUBELET_CLIENT_CN};
use serde_json::{json, Value};

const PODS: &str = "/api/v1/namespaces/default/pods";

/// A WebSocket upgrade as kubectl sends it for exec (the key is any 16 bytes in base64).
fn websocket(req: Request) -> Request {
    req.header("Connection", "Upgrade")
        .header("Upgrade", "websocket")
        .header("Sec-WebSocket-Version", "13")
        .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
        .header("Sec-WebSocket-Protocol", "v5.channel.k8s.io")
}

fn create(kapi: &Kapi, path: &str, body: Value) {
    let r = kapi.request(&Request::new("POST", path).json(&body));
    assert_eq!(r.status, 201, "creating {body}: {}", r.raw);
}

fn pod(name: &str, node: Option<&str>, containers: &[&str]) -> Value {
    let containers: Vec<Value> = containers.iter().map(|c| json!({"name": c, "image": "busybox"})).collect();
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": containers}});
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    pod
}

/// A Node whose kubelet listens on 127.0.0.1:`port`. The ExternalIP would not answer: the
/// default preference (Hostname, InternalDNS, InternalIP, ...) must pick the InternalIP.
fn node(name: &str, port: u16) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
           "status": {"addresses": [{"type": "ExternalIP", "address": "192.0.2.1"}, {"type": "InternalIP", "address": "127.0.0.1"}],
                      "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}})
}

/// kapi with the fake kubelet's flags, node-1 on the fake kubelet, node-2 on a closed port,
/// and the pods: web (one container, node-1), multi (three containers, node-1), pending (no
/// node), orphan (node-2).
fn setup() -> (FakeKubelet, Kapi) {
    let kubelet = FakeKubelet::start().expect("start the fake kubelet");
    let flags = kubelet.kapi_flags();
    let kapi = Kapi::start_with(&flags.iter().map(String::as_str).collect::<Vec<_>>()).expect("start kapi");
    create(&kapi, "/api/v1/nodes", node("node-1", kubelet.port));
    create(&kapi, "/api/v1/nodes", node("node-2", free_port().expect("a free port")));
    create(&kapi, PODS, pod("web", Some("node-1"), &["app"]));
    create(&kapi, PODS, pod("multi", Some("node-1"), &["app", "query", "gone"]));
    create(&kapi, PODS, pod("pending", None, &["app"]));
    create(&kapi, PODS, pod("orphan", Some("node-2"), &["app"]));
    (kubelet, kapi)
}

/// kubectl with `stdin` piped in, bounded in time.
fn kubectl_with_stdin(kapi: &Kapi, args: &[&str], stdin: &[u8]) -> Output {
    let mut cmd = kapi.kubectl_command(Path::new("kubectl"), args);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn kubectl");
    child.stdin.take().expect("stdin").write_all(stdin).expect("write stdin");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("poll kubectl").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("kubectl {} did not end", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("kubectl output")
}

#[test]
fn logs_reach_the_kubelet_and_stream() {
    let (_kubelet, kapi) = setup();
    let out = kapi.kubectl(&["logs", "web"]);
    assert_eq!(out.stdout_str(), "line 1 of default/web/app\nline 2 of default/web/app\nline 3 of default/web/app\n", "{}", out.stderr_str());
    let out = kapi.kubectl(&["logs", "web", "--tail=1"]);
    assert_eq!(out.stdout_str(), "line 3 of default/web/app\n", "{}", out.stderr_str());
    // The options reach the kubelet as kube encodes them (sorted keys).
    let out = kapi.kubectl(&["logs", "multi", "-c", "query", "--tail=2", "--timestamps", "--since=5m", "--limit-bytes=100", "--previous"]);
    assert_eq!(out.stdout_str(), "limitBytes=100&previous=true&sinceSeconds=300&tailLines=2&timestamps=true\n", "{}", out.stderr_str());

    // -f streams: lines arrive while the kubelet is still writing.
    let mut follow = Streaming::spawn(&mut kapi.kubectl_command(Path::new("kubectl"), &["logs", "-f", "web"])).expect("kubectl logs -f");
    let third = follow.wait_for_line(Duration::from_secs(20), |l| l == "follow 3");
    let stderr = follow.stop();
    assert!(third.is_some(), "no followed lines; seen {:?}, stderr {stderr}", follow.seen());
    assert_eq!(follow.seen()[..3], ["line 1 of default/web/app", "line 2 of default/web/app", "line 3 of default/web/app"]);

    // An unscheduled pod has no log yet: 204, nothing printed.
    let r = kapi.request(&Request::get(&format!("{PODS}/pending/log")));
    assert_eq!((r.status, r.raw.as_str()), (204, ""));
    assert_eq!(kapi.kubectl(&["logs", "pending"]).ok("kubectl logs pending"), "");

    // kube's words for what goes wrong.
    let r = kapi.request(&Request::get(&format!("{PODS}/multi/log")));
    assert_eq!((r.status, r.message()), (400, "a container name must be specified for pod multi, choose one of: [app query gone]"), "{}", r.raw);
    let r = kapi.request(&Request::get(&format!("{PODS}/web/log?container=nope")));
    assert_eq!((r.status, r.message()), (400, "container nope is not valid for pod web"), "{}", r.raw);
    let r = kapi.request(&Request::get(&format!("{PODS}/nope/log")));
    assert_eq!((r.status, r.message()), (404, "pods \"nope\" not found"), "{}", r.raw);
    let r = kapi.request(&Request::get(&format!("{PODS}/web/log?tailLines=abc")));
    assert_eq!((r.status, r.message()), (400, "strconv.ParseInt: parsing \"abc\": invalid syntax"), "{}", r.raw);
    let r = kapi.request(&Request::get(&format!("{PODS}/web/log?tailLines=-1")));
    assert_eq!((r.status, r.reason()), (422, "Invalid"), "{}", r.raw);
    assert_eq!(r.message(), "PodLogOptions \"web\" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0");
    let r = kapi.request(&Request::get(&format!("{PODS}/multi/log?container=gone")));
    assert_eq!((r.status, r.message()), (404, "the server could not find the requested resource ( pods/log multi)"), "{}", r.raw);
    let r = kapi.request(&Request::get(&format!("{PODS}/orphan/log")));
    assert_eq!(r.status, 500, "{}", r.raw);
    assert!(r.body.get("reason").is_none(), "kube's unknown reason is left out: {}", r.raw);
    let dial = r.message();
    assert!(dial.starts_with("Get \"https://127.0.0.1:") && dial.ends_with(": connect: connection refused"), "{dial}");
    assert!(dial.contains("/containerLogs/default/orphan/app\": dial tcp 127.0.0.1:"), "{dial}");
}

#[test]
fn exec_runs_over_websocket_through_kapi() {
    let (_kubelet, kapi) = setup();
    let out = kapi.kubectl(&["exec", "web", "--", "echo", "hi"]);
    assert_eq!(out.stdout_str(), "hi\n", "{}", out.stderr_str());
    // kapi presents its kubelet client certificate.
    let out = kapi.kubectl(&["exec", "web", "--", "whoami"]);
    assert_eq!(out.stdout_str(), format!("CN={KUBELET_CLIENT_CN},O=kubeadm:cluster-admins\n"), "{}", out.stderr_str());
    // Both directions: stdin goes to the kubelet and comes back.
    let out = kubectl_with_stdin(&kapi, &["exec", "-i", "web", "--", "cat"], b"hello through kapi\n");
    assert_eq!(out.stdout_str(), "hello through kapi\n", "{}", out.stderr_str());
    // The kubelet's status ends the session: kubectl exits with the command's code.
    let out = kapi.kubectl(&["exec", "web", "--", "fail", "3"]);
    assert_eq!(out.status.code(), Some(3), "{}", out.stderr_str());

    // attach: the same upgrade to the kubelet's /attach (kubectl wants a running pod).
    let mut running = kapi.get_json(&format!("{PODS}/web"));
    running["status"]["phase"] = json!("Running");
    let r = kapi.request(&Request::new("PUT", &format!("{PODS}/web/status")).json(&running));
    assert_eq!(r.status, 200, "{}", r.raw);
    let out = kapi.kubectl(&["attach", "web", "--pod-running-timeout=10s"]);
    assert_eq!(out.stdout_str(), "attached\n", "{}", out.stderr_str());

    // An unscheduled pod: kube's 400, through kubectl and as the raw Status.
    let out = kapi.kubectl(&["exec", "pending", "--", "echo", "hi"]);
    assert!(!out.status.success());
    assert!(out.stderr_str().contains("pod pending does not have a host assigned"), "{}", out.stderr_str());
    let r = kapi.request(&Request::new("POST", &format!("{PODS}/pending/exec?command=echo&command=hi&stdout=true")));
    assert_eq!(
        r.raw,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\
         \"message\":\"pod pending does not have a host assigned\",\"reason\":\"BadRequest\",\"code\":400}\n"
    );
    assert_eq!(r.status, 400);

    let r = kapi.request(&Request::new("POST", &format!("{PODS}/nope/exec?command=true")));
    assert_eq!((r.status, r.message()), (404, "pods \"nope\" not found"), "{}", r.raw);
    let r = kapi.request(&Request::new("POST", &format!("{PODS}/multi/exec?command=true")));
    assert_eq!((r.status, r.message()), (400, "a container name must be specified for pod multi, choose one of: [app query gone]"), "{}", r.raw);
    let r = kapi.request(&Request::new("POST", &format!("{PODS}/web/exec?command=true")));
    assert_eq!((r.status, r.message()), (400, "Upgrade request required"), "{}", r.raw);
    let r = kapi.request(&Request::new("POST", &format!("{PODS}/web/exec?command=true&dryRun=All")));
    assert_eq!((r.status, r.message()), (400, "dryRun is not supported"), "{}", r.raw);
    let r = kapi.request(&Request::new("POST", &format!("{PODS}/web/portforward?ports=http")));
    assert_eq!((r.status, r.message()), (400, "cannot convert to []int32: strconv.ParseUint: parsing \"http\": invalid syntax"), "{}", r.raw);
    let r = kapi.request(&Request::new("PUT", &format!("{PODS}/web/exec")));
    assert_eq!(r.status, 405, "{}", r.raw);
    // A kubelet that does not answer: kube's error responder's 500 (kubectl tries WebSocket,
    // then SPDY, and prints it).
    let out = kapi.kubectl(&["exec", "orphan", "--", "echo", "hi"]);
    assert!(!out.status.success());
    assert!(out.stderr_str().contains("error dialing backend: dial tcp 127.0.0.1:"), "{}", out.stderr_str());
    assert!(out.stderr_str().contains("connect: connection refused"), "{}", out.stderr_str());
}

#[test]
fn websocket_exec_needs_create_on_pods_exec() {
    let (_kubelet, kapi) = setup();
    // viewer may read pods, their logs and get pods/exec, but not create pods/exec.
    create(&kapi, "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "viewer"},
        "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log", "pods/exec"], "verbs": ["get", "list"]}]}));
    create(&kapi, "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings", json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "viewer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "viewer"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "viewer"}]}));
    let viewer = kapi.issue_client_cert("viewer", &[]);
    let config = kapi.kubeconfig_for("viewer", &viewer);

    let out = kapi.kubectl_config(&config, &["logs", "web", "--tail=1"]);
    assert_eq!(out.stdout_str(), "line 3 of default/web/app\n", "logs need get pods/log only: {}", out.stderr_str());
    let out = kapi.kubectl_config(&config, &["exec", "web", "--", "echo", "hi"]);
    assert!(!out.status.success(), "exec without create pods/exec succeeded: {}", out.stdout_str());
    assert!(out.stderr_str().contains("forbidden"), "{}", out.stderr_str());

    // The WebSocket GET passes the filter as `get`, then the pod registry's `create` check
    // refuses it with kube's NewForbidden (the authorizer gives no reason).
    let r = kapi.request(&websocket(Request::get(&format!("{PODS}/web/exec?command=echo&command=hi"))).as_user(&viewer));
    assert_eq!((r.status, r.reason()), (403, "Forbidden"), "{}", r.raw);
    assert_eq!(r.message(), "pods \"web\" is forbidden: ");
    assert_eq!(r.body["details"], json!({"name": "web", "kind": "pods"}));
    // SPDY's POST is `create` to the filter: its usual 403.
    let r = kapi.request(&Request::new("POST", &format!("{PODS}/web/exec?command=true")).as_user(&viewer));
    assert_eq!(r.status, 403, "{}", r.raw);
    assert!(r.message().ends_with("cannot create resource \"pods/exec\" in API group \"\" in the namespace \"default\""), "{}", r.raw);
    // Without any grant, even the filter refuses the GET.
    let stranger = kapi.issue_client_cert("stranger", &[]);
    let r = kapi.request(&websocket(Request::get(&format!("{PODS}/web/exec?command=true"))).as_user(&stranger));
    assert_eq!(r.status, 403, "{}", r.raw);
    assert!(r.message().contains("cannot get resource \"pods/exec\""), "{}", r.raw);
}
