//! The aggregator tier against a real extension API server (`python/metrics_apiserver.py`, a
//! metrics-server-shaped metrics.k8s.io/v1beta1 over HTTPS that trusts only the front-proxy
//! CA's client): registered by an APIService naming a Service and its EndpointSlice, it is
//! proxied with the caller's identity (`kubectl top pods` prints its numbers), listed in
//! discovery, checked by the availability controller (down: `Available=False` with kube's
//! reason, 503 for its group, the rest of the API unaffected, discovery `Stale`; back: it
//! recovers). Local APIServices are kept for what kapi serves, and APIServices kube refuses
//! get kube's 422 with nothing stored.

use std::time::Duration;

use kapi_e2e::{wait_for, ExtensionApiServer, FrontProxyCerts, Kapi, OutputExt, Request};
use serde_json::{json, Value};

const APISERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";
const NAME: &str = "v1beta1.metrics.k8s.io";

/// Registers the server as metrics-server is deployed: Service, EndpointSlice, APIService.
fn register(kapi: &Kapi, server: &ExtensionApiServer) {
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "metrics-server", "namespace": "kube-system"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": "https"}]}});
    let r = kapi.request(&Request::new("POST", "/api/v1/namespaces/kube-system/services").json(&service));
    assert_eq!(r.status, 201, "{}", r.raw);
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "metrics-server-1", "namespace": "kube-system", "labels": {"kubernetes.io/service-name": "metrics-server"}},
        "addressType": "IPv4", "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": server.port, "protocol": "TCP"}]});
    let r = kapi.request(&Request::new("POST", "/apis/discovery.k8s.io/v1/namespaces/kube-system/endpointslices").json(&slice));
    assert_eq!(r.status, 201, "{}", r.raw);
    let apiservice = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": NAME},
        "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "service": {"namespace": "kube-system", "name": "metrics-server"},
                 "caBundle": server.ca_bundle, "groupPriorityMinimum": 100, "versionPriority": 100}});
    let r = kapi.request(&Request::new("POST", APISERVICES).json(&apiservice));
    assert_eq!(r.status, 201, "{}", r.raw);
}

/// The APIService's `Available` condition, once its status is `status` (within `timeout`).
fn wait_available(kapi: &Kapi, status: &str, timeout: Duration) -> Value {
    wait_for(timeout, || {
        let svc = kapi.get_json(&format!("{APISERVICES}/{NAME}"));
        let cond = svc["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Available")?.clone();
        (cond["status"] == status).then_some(cond)
    })
    .unwrap_or_else(|| panic!("{NAME} never Available={status}: {}\n{}", kapi.get_json(&format!("{APISERVICES}/{NAME}")), kapi.log()))
}

fn metrics_group(discovery: &Value) -> Option<&Value> {
    discovery["items"].as_array()?.iter().find(|g| g["metadata"]["name"] == "metrics.k8s.io")
}

#[test]
fn an_extension_api_server_is_proxied_checked_and_recovers() {
    let certs = FrontProxyCerts::make().expect("front-proxy certificates");
    let (cert, key) = (certs.cert.to_string_lossy().into_owned(), certs.key.to_string_lossy().into_owned());
    let kapi = Kapi::start_with(&["--proxy-client-cert-file", &cert, "--proxy-client-key-file", &key]).expect("start kapi");
    let mut server = ExtensionApiServer::start(&certs.ca).expect("start the extension API server");
    register(&kapi, &server);
    let cond = wait_available(&kapi, "True", Duration::from_secs(20));
    assert_eq!((cond["reason"].as_str(), cond["message"].as_str()), (Some("Passed"), Some("all checks passed")), "{cond}");

    // Proxied as the caller, under the proxy client certificate, with no credential of ours.
    let top = kapi.kubectl(&["top", "pods", "-n", "default"]).ok("kubectl top pods");
    let rows: Vec<Vec<&str>> = top.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows, vec![vec!["NAME", "CPU(cores)", "MEMORY(bytes)"], vec!["web-1", "250m", "64Mi"], vec!["web-2", "125m", "32Mi"]], "{top}");
    let requests = server.requests();
    let listed = requests.iter().find(|r| r["path"].as_str().is_some_and(|p| p.starts_with("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods"))).expect("the list reached the server");
    assert_eq!(listed["client_cn"], "front-proxy-client", "{listed}");
    assert_eq!(listed["authorization"], Value::Null, "{listed}");
    assert_eq!(listed["user"], "kapi-admin", "{listed}");
    let groups: Vec<&str> = listed["groups"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(groups.contains(&"system:masters") && groups.contains(&"system:authenticated"), "{listed}");
    // The availability probe ran as kube's: system:kube-aggregator in system:masters.
    assert!(requests.iter().any(|r| r["user"] == "system:kube-aggregator" && r["path"] == "/apis/metrics.k8s.io/v1beta1"), "{requests:?}");

    // Discovery: legacy and aggregated, the group after kapi's own.
    let apis = kapi.get_json("/apis");
    let names: Vec<&str> = apis["groups"].as_array().unwrap().iter().filter_map(|g| g["name"].as_str()).collect();
    assert_eq!(names.last(), Some(&"metrics.k8s.io"), "{names:?}");
    assert_eq!(kapi.get_json("/apis/metrics.k8s.io")["preferredVersion"]["version"], "v1beta1");
    let aggregated = kapi.request(&Request::get("/apis").accept("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"));
    let group = metrics_group(&aggregated.body).unwrap_or_else(|| panic!("{}", aggregated.raw)).clone();
    assert_eq!(group["versions"][0]["freshness"], "Current", "{group}");
    let resources: Vec<&str> = group["versions"][0]["resources"].as_array().unwrap().iter().filter_map(|r| r["resource"].as_str()).collect();
    assert_eq!(resources, ["nodes", "pods"], "{group}");
    let api_resources = kapi.kubectl(&["api-resources", "--api-group=metrics.k8s.io", "-o", "name"]).ok("kubectl api-resources");
    assert_eq!(api_resources.lines().collect::<Vec<_>>(), ["nodes.metrics.k8s.io", "pods.metrics.k8s.io"], "{api_resources}");

    // kapi's own groups have local APIServices, always available.
    let local = kapi.get_json(&format!("{APISERVICES}/v1.apps"));
    assert_eq!(local["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"], "onstart", "{local}");
    let local = wait_for(Duration::from_secs(10), || {
        let s = kapi.get_json(&format!("{APISERVICES}/v1.apps"));
        (s["status"]["conditions"][0]["reason"] == "Local").then_some(s)
    })
    .expect("v1.apps Available");
    assert_eq!(local["status"]["conditions"][0]["status"], "True");
    let table = kapi.kubectl(&["get", "apiservices", NAME, "v1."]).ok("kubectl get apiservices");
    assert!(table.contains("kube-system/metrics-server   True") && table.contains("Local"), "{table}");

    // A user RBAC does not let list pod metrics is refused here, before the server sees it.
    let before = server.requests().len();
    let viewer = kapi.issue_client_cert("nobody", &[]);
    let forbidden = kapi.request(&Request::get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods").as_user(&viewer));
    assert_eq!(forbidden.status, 403, "{}", forbidden.raw);
    assert_eq!(server.requests().len(), before, "a forbidden request never reaches the extension server");

    // Down: 503 for its group at once, Available=False with kube's reason, the rest unharmed,
    // discovery still lists it as stale.
    server.stop();
    let down = kapi.request(&Request::get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods"));
    assert_eq!(down.status, 503, "{}", down.raw);
    let cond = wait_available(&kapi, "False", Duration::from_secs(40));
    assert_eq!(cond["reason"], "FailedDiscoveryCheck", "{cond}");
    let message = cond["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("failing or missing response from https://127.0.0.1:") && message.contains("connection refused"), "{message}");
    let unavailable = kapi.request(&Request::get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods"));
    assert_eq!((unavailable.status, unavailable.raw.as_str()), (503, "service unavailable\n"));
    kapi.kubectl(&["get", "pods", "-A"]).ok("kubectl get pods with the extension server down");
    let aggregated = kapi.request(&Request::get("/apis").accept("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"));
    assert_eq!(metrics_group(&aggregated.body).expect("still listed")["versions"][0]["freshness"], "Stale", "{}", aggregated.raw);
    let metrics = kapi.request(&Request::get("/metrics")).raw;
    assert!(metrics.contains(&format!("aggregator_unavailable_apiservice{{name=\"{NAME}\"}} 1")), "{metrics}");
    assert!(metrics.contains(&format!("aggregator_unavailable_apiservice_total{{name=\"{NAME}\",reason=\"FailedDiscoveryCheck\"}} 1")), "{metrics}");

    // Back: available again, and proxied again.
    server.resume().expect("restart the extension API server");
    wait_available(&kapi, "True", Duration::from_secs(40));
    let top = kapi.kubectl(&["top", "pods", "-n", "other"]).ok("kubectl top pods after the restart");
    assert!(top.contains("db-0") && top.contains("1000m") && top.contains("1024Mi"), "{top}");

    // Gone: its Service deleted, kube's reason.
    let r = kapi.request(&Request::new("DELETE", "/api/v1/namespaces/kube-system/services/metrics-server"));
    assert_eq!(r.status, 200, "{}", r.raw);
    let cond = wait_available(&kapi, "False", Duration::from_secs(20));
    assert_eq!((cond["reason"].as_str(), cond["message"].as_str()), (Some("ServiceNotFound"), Some("service/metrics-server in \"kube-system\" is not present")), "{cond}");
}

#[test]
fn apiservices_kube_refuses_are_422_and_nothing_is_stored() {
    let kapi = Kapi::start().expect("start kapi");
    let service = json!({"namespace": "ns", "name": "svc", "port": 443});
    // (name, spec, expected (field, message prefix) causes)
    type Case = (&'static str, Value, Vec<(&'static str, &'static str)>);
    let cases: Vec<Case> = vec![
        ("v1.wrong.example", json!({"group": "right.example", "version": "v1", "service": service, "groupPriorityMinimum": 100, "versionPriority": 10}),
         vec![("metadata.name", "Invalid value: \"v1.wrong.example\": must be `spec.version+\".\"+spec.group`: \"v1.right.example\"")]),
        ("v1.x.example", json!({"group": "x.example", "version": "v1", "service": {"namespace": "ns"}, "groupPriorityMinimum": 0, "versionPriority": 1001}),
         vec![("spec.groupPriorityMinimum", "Invalid value: 0: must be positive and less than 20000"),
              ("spec.versionPriority", "Invalid value: 1001: must be positive and less than 1000"),
              ("spec.service.name", "Required value")]),
        ("v2.", json!({"group": "", "version": "v2", "groupPriorityMinimum": 100, "versionPriority": 10}),
         vec![("spec.group", "Required value: only v1 may have an empty group and it better be legacy kube")]),
        ("v1.local.example", json!({"group": "local.example", "version": "v1", "caBundle": "UEVN", "insecureSkipTLSVerify": true, "groupPriorityMinimum": 100, "versionPriority": 10}),
         vec![("spec.caBundle", "Invalid value: \"3 bytes\": local APIServices may not have a caBundle"),
              ("spec.insecureSkipTLSVerify", "Invalid value: true: local APIServices may not have insecureSkipTLSVerify")]),
        ("v1.both.example", json!({"group": "both.example", "version": "v1", "service": service, "caBundle": "UEVN", "insecureSkipTLSVerify": true, "groupPriorityMinimum": 100, "versionPriority": 10}),
         vec![("spec.insecureSkipTLSVerify", "Invalid value: true: may not be true if caBundle is present")]),
        ("v1.Bad_Group", json!({"group": "Bad_Group", "version": "v1", "service": service, "groupPriorityMinimum": 100, "versionPriority": 10}),
         vec![("spec.group", "Invalid value: \"Bad_Group\": a lowercase RFC 1123 subdomain")]),
        ("V1.x.example", json!({"group": "x.example", "version": "V1", "service": service, "groupPriorityMinimum": 100, "versionPriority": 10}),
         vec![("spec.version", "Invalid value: \"V1\": a DNS-1035 label")]),
    ];
    for (name, spec, expected) in cases {
        let body = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": name}, "spec": spec});
        let r = kapi.request(&Request::new("POST", APISERVICES).json(&body));
        assert_eq!((r.status, r.reason()), (422, "Invalid"), "{name}: {}", r.raw);
        let causes: Vec<(String, String)> = r.body["details"]["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["field"].as_str().unwrap_or_default().to_owned(), c["message"].as_str().unwrap_or_default().to_owned()))
            .collect();
        assert_eq!(causes.len(), expected.len(), "{name}: {causes:?}");
        for ((field, message), (want_field, want_message)) in causes.iter().zip(&expected) {
            assert_eq!(field, want_field, "{name}: {causes:?}");
            assert!(message.starts_with(want_message), "{name}: {message:?} should start with {want_message:?}");
        }
        assert_eq!(kapi.request(&Request::get(&format!("{APISERVICES}/{name}"))).status, 404, "{name} was stored");
    }
}

#[test]
fn a_default_kapi_publishes_what_extension_servers_trust_and_proxies_to_them() {
    // No front-proxy flags: kapi generates kubeadm's front-proxy CA and client certificate and
    // publishes what an extension server reads at start, as kube-apiserver does.
    let kapi = Kapi::start().expect("start kapi");
    let auth = kapi.get_json("/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication");
    let data = &auth["data"];
    let pki = kapi.pki_dir();
    let file = |name: &str| std::fs::read_to_string(pki.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(data["client-ca-file"].as_str(), Some(file("ca.crt").as_str()), "{auth}");
    assert_eq!(data["requestheader-client-ca-file"].as_str(), Some(file("front-proxy-ca.crt").as_str()), "{auth}");
    assert_eq!(data["requestheader-allowed-names"], "[\"front-proxy-client\"]", "{auth}");
    assert_eq!(data["requestheader-username-headers"], "[\"X-Remote-User\"]", "{auth}");
    assert_eq!(data["requestheader-group-headers"], "[\"X-Remote-Group\"]", "{auth}");
    assert_eq!(data["requestheader-extra-headers-prefix"], "[\"X-Remote-Extra-\"]", "{auth}");

    // An extension server trusting exactly what the ConfigMap says.
    let ca = kapi.write_file("published-front-proxy-ca.crt", data["requestheader-client-ca-file"].as_str().unwrap());
    let server = ExtensionApiServer::start(&ca).expect("start the extension API server");
    register(&kapi, &server);
    wait_available(&kapi, "True", Duration::from_secs(20));
    let top = kapi.kubectl(&["top", "pods", "-n", "default"]).ok("kubectl top pods");
    assert!(top.contains("web-1") && top.contains("250m"), "{top}");

    // kapi itself trusts the same identity headers, from its own front-proxy certificate only.
    let front_proxy = (pki.join("front-proxy-client.crt"), pki.join("front-proxy-client.key"));
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let whoami = kapi.request(
        &Request::new("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews")
            .json(&review)
            .with_client_cert(front_proxy.0, front_proxy.1)
            .header("X-Remote-User", "jane")
            .header("X-Remote-Group", "devs"),
    );
    assert_eq!(whoami.status, 201, "{}", whoami.raw);
    assert_eq!(whoami.body["status"]["userInfo"]["username"], "jane", "{}", whoami.raw);
    let forged = kapi.request(&Request::new("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews").json(&review).header("X-Remote-User", "jane"));
    assert_eq!(forged.body["status"]["userInfo"]["username"], "kapi-admin", "headers from another client are ignored: {}", forged.raw);
}
