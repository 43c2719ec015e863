//! OpenTelemetry tracing (`--tracing-config-file`) against a real OTLP gRPC receiver
//! (`python/otlp_receiver.py`) and a real HTTPS admission webhook: span names and their
//! parent/child structure, a client's `traceparent` as the parent of kapi's request span and
//! passed on to the webhook, kube's sampling (a sampled client context is always traced,
//! otherwise the configured rate: 0 exports nothing), and configurations kube refuses stopping
//! start-up.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use kapi_e2e::{kapi_binary, run_with_timeout, AdmissionWebhook, Kapi, OtlpReceiver, Request};
use serde_json::{json, Value};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const MUTATING: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
/// OTLP's SpanKind numbers.
const SERVER: u64 = 2;
const CLIENT: u64 = 3;

fn tracing_config(dir: &Path, receiver: &OtlpReceiver, rate: Option<u32>) -> String {
    let mut text = format!("apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpoint: 127.0.0.1:{}\n", receiver.port);
    if let Some(rate) = rate {
        text.push_str(&format!("samplingRatePerMillion: {rate}\n"));
    }
    let path = dir.join("tracing.yaml");
    std::fs::write(&path, text).expect("write the tracing configuration");
    path.display().to_string()
}

/// The spans of trace `trace_id`, once `until` holds for them (the batch exporter sends every
/// few seconds).
fn spans_of(receiver: &OtlpReceiver, trace_id: &str, until: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let spans: Vec<Value> = receiver.spans().into_iter().filter(|s| s["trace_id"] == trace_id).collect();
        if until(&spans) {
            return spans;
        }
        assert!(Instant::now() < deadline, "the spans of trace {trace_id} did not all arrive: {spans:#?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn named<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    spans.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("no span {name:?} in {:#?}", names(spans)))
}

fn names(spans: &[Value]) -> Vec<String> {
    spans.iter().map(|s| s["name"].as_str().unwrap_or_default().to_owned()).collect()
}

/// Whether `span` descends from the span `ancestor_id` through parents of the same trace.
fn descends_from(spans: &[Value], span: &Value, ancestor_id: &str) -> bool {
    let by_id: HashMap<&str, &Value> = spans.iter().map(|s| (s["span_id"].as_str().unwrap_or_default(), s)).collect();
    let mut parent = span["parent_span_id"].as_str().unwrap_or_default();
    for _ in 0..spans.len() {
        if parent == ancestor_id {
            return true;
        }
        match by_id.get(parent) {
            Some(p) => parent = p["parent_span_id"].as_str().unwrap_or_default(),
            None => return false,
        }
    }
    false
}

#[test]
fn a_client_traceparent_parents_kapis_spans_and_reaches_the_webhook() {
    let receiver = OtlpReceiver::start().expect("start the OTLP receiver");
    let dir = tempfile::tempdir().expect("dir");
    // Sampling 0 (kube's default): only the client's sampled contexts are traced.
    let config = tracing_config(dir.path(), &receiver, None);
    let kapi = Kapi::start_with(&["--tracing-config-file", &config]).expect("start kapi");
    let webhook = AdmissionWebhook::start().expect("start the webhook");
    let hook = json!({"name": "label.e2e.kapi", "clientConfig": webhook.client_config("/label/traced/yes"),
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "sideEffects": "None", "admissionReviewVersions": ["v1"]});
    let hooks = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "tracing"}, "webhooks": [hook]});
    assert_eq!(kapi.request(&Request::new("POST", MUTATING).json(&hooks)).status, 201);
    assert!(kapi.get_json(MUTATING)["items"].as_array().is_some_and(|items| !items.is_empty()));

    // A create with the client's sampled context.
    let (trace_id, client_span) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "traced"}, "data": {"k": "v"}});
    let created = kapi.request(&Request::new("POST", CONFIGMAPS).json(&cm).header("traceparent", &format!("00-{trace_id}-{client_span}-01")));
    assert_eq!(created.status, 201, "{}", created.raw);
    assert_eq!(created.body["metadata"]["labels"]["traced"], "yes", "the webhook was called: {}", created.raw);

    let expected = ["authentication", "authorization", "Create", "Admit", "Call mutating webhook", "HTTP POST", "Create etcd3", "SerializeObject"];
    let spans = spans_of(&receiver, trace_id, |spans| {
        spans.iter().any(|s| s["kind"] == SERVER) && expected.iter().all(|n| spans.iter().any(|s| s["name"] == *n))
    });
    let request = named(&spans, "POST /api/v1/namespaces/{:namespace}/configmaps");
    assert_eq!(request["kind"], SERVER);
    assert_eq!(request["parent_span_id"], client_span, "the client's span is the request span's parent");
    let attrs = &request["attributes"];
    assert_eq!((attrs["http.method"].as_str(), attrs["http.target"].as_str()), (Some("POST"), Some(CONFIGMAPS)), "{request}");
    assert_eq!(attrs["http.status_code"], 201, "{request}");
    assert_eq!(request["resource"]["service.name"], "apiserver");
    assert_eq!(request["scope"], "k8s.io/component-base/tracing");
    let request_id = request["span_id"].as_str().expect("span id");
    for name in expected {
        assert!(descends_from(&spans, named(&spans, name), request_id), "{name} under the request span: {spans:#?}");
    }
    // The structure inside the request: the handler holds admission and storage; the webhook
    // call holds the HTTP call.
    let handler = named(&spans, "Create");
    assert_eq!(handler["attributes"]["resource"], "configmaps");
    for name in ["Admit", "Create etcd3", "SerializeObject"] {
        assert!(descends_from(&spans, named(&spans, name), handler["span_id"].as_str().unwrap()), "{name} under Create");
    }
    let call = named(&spans, "Call mutating webhook");
    assert_eq!((call["attributes"]["webhook"].as_str(), call["attributes"]["operation"].as_str()), (Some("label.e2e.kapi"), Some("CREATE")));
    let http = named(&spans, "HTTP POST");
    assert_eq!((http["kind"].as_u64(), http["parent_span_id"].as_str()), (Some(CLIENT), call["span_id"].as_str()));
    assert_eq!(named(&spans, "Create etcd3")["attributes"]["key"], "/registry/core/configmaps/default/traced");

    // The webhook received the trace: same trace ID, the HTTP call's span as its parent.
    let calls = webhook.calls("/label");
    let traceparent = calls.last().and_then(|c| c["traceparent"].as_str()).unwrap_or_else(|| panic!("no traceparent: {calls:?}"));
    assert_eq!(traceparent, format!("00-{trace_id}-{}-01", http["span_id"].as_str().unwrap()));

    // A read with another sampled context: its own trace, kube's names.
    let read_trace = "0af7651916cd43dd8448eb211c80319c";
    let got = kapi.request(&Request::get(&format!("{CONFIGMAPS}/traced")).header("traceparent", &format!("00-{read_trace}-b7ad6b7169203331-01")));
    assert_eq!(got.status, 200, "{}", got.raw);
    let read = spans_of(&receiver, read_trace, |spans| ["Get", "SerializeObject"].iter().all(|n| spans.iter().any(|s| s["name"] == *n)));
    let server = named(&read, "GET /api/v1/namespaces/{:namespace}/configmaps/{:name}");
    assert_eq!(server["parent_span_id"], "b7ad6b7169203331");
    assert!(descends_from(&read, named(&read, "Get"), server["span_id"].as_str().unwrap()));

    // An unsampled client context and requests without one are not traced at sampling 0.
    let quiet_trace = "11111111111111111111111111111111";
    let r = kapi.request(&Request::get(CONFIGMAPS).header("traceparent", &format!("00-{quiet_trace}-2222222222222222-00")));
    assert_eq!(r.status, 200);
    assert_eq!(kapi.request(&Request::get(CONFIGMAPS)).status, 200);
    // Past the exporter's batch delay, nothing but the two sampled traces arrived.
    std::thread::sleep(Duration::from_secs(7));
    let others: Vec<Value> = receiver.spans().into_iter().filter(|s| s["trace_id"] != trace_id && s["trace_id"] != read_trace).collect();
    assert!(others.is_empty(), "spans of requests that were not sampled: {others:#?}");
}

#[test]
fn every_request_is_traced_at_a_million_per_million() {
    let receiver = OtlpReceiver::start().expect("start the OTLP receiver");
    let dir = tempfile::tempdir().expect("dir");
    let config = tracing_config(dir.path(), &receiver, Some(1_000_000));
    let kapi = Kapi::start_with(&["--tracing-config-file", &config]).expect("start kapi");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "sampled"}});
    assert_eq!(kapi.request(&Request::new("POST", CONFIGMAPS).json(&cm)).status, 201);

    // The create's trace: a root request span (no client context) over kapi's spans.
    let deadline = Instant::now() + Duration::from_secs(30);
    let root = loop {
        let found = receiver.spans().into_iter().find(|s| s["name"] == "POST /api/v1/namespaces/{:namespace}/configmaps");
        if let Some(root) = found {
            break root;
        }
        assert!(Instant::now() < deadline, "no request span arrived");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(root["parent_span_id"], "", "a root span: {root}");
    let trace_id = root["trace_id"].as_str().unwrap().to_owned();
    let spans =
        spans_of(&receiver, &trace_id, |spans| ["Create", "Create etcd3", "SerializeObject"].iter().all(|n| spans.iter().any(|s| s["name"] == *n)));
    for name in ["authentication", "authorization", "Create", "Create etcd3", "SerializeObject"] {
        assert!(descends_from(&spans, named(&spans, name), root["span_id"].as_str().unwrap()), "{name}: {:?}", names(&spans));
    }
}

#[test]
fn configurations_kube_refuses_stop_start_up() {
    let bin = kapi_binary().expect("the kapi binary");
    let dir = tempfile::tempdir().expect("dir");
    let cases = [
        ("apiVersion: apiserver.config.k8s.io/v9\nkind: TracingConfiguration\n", "no kind"),
        (
            "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nsamplingRatePerMillion: 1000001\n",
            "less than or equal to one million",
        ),
        ("apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nsamplingRatePerMillion: -5\n", "must be positive"),
        ("apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpoint: \"http://collector:4317\"\n", "endpoint: Invalid value"),
    ];
    for (i, (text, message)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("tracing-{i}.yaml"));
        std::fs::write(&path, text).expect("write");
        let data = dir.path().join(format!("data-{i}"));
        let out = run_with_timeout(
            Command::new(&bin).arg("--data-dir").arg(&data).args(["--secure-port", "0", "--tracing-config-file"]).arg(&path),
            Duration::from_secs(30),
        )
        .expect("run kapi");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "kapi started with {text:?}");
        assert!(stderr.contains(message), "{text:?}: {stderr}");
    }
    let missing = run_with_timeout(
        Command::new(&bin).args(["--secure-port", "0", "--tracing-config-file", "/nonexistent/tracing.yaml"]),
        Duration::from_secs(30),
    )
    .expect("run kapi");
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("unable to read tracing configuration"));
}
