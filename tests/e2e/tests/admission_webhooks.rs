//! Admission webhooks against a real HTTPS webhook process (`python/admission_webhook.py`, its
//! own CA as `caBundle`) that logs every call: mutation by JSONPatch, refusals as kubectl prints
//! them, failure policies with the webhook down or too slow, reinvocation, dry run and side
//! effects, selectors deciding whether a webhook is called, warnings, and answers kube refuses
//! to use. Nothing is stored when admission refuses a write.

use std::time::{Duration, Instant};

use kapi_e2e::{AdmissionWebhook, Kapi, Request};
use serde_json::{json, Value};

const VALIDATING: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
const MUTATING: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// A webhook for creates and updates of ConfigMaps, with `extra` fields merged in.
fn hook(name: &str, client_config: Value, extra: Value) -> Value {
    let mut hook = json!({"name": name, "clientConfig": client_config,
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "sideEffects": "None", "admissionReviewVersions": ["v1"]});
    if let (Some(hook), Some(extra)) = (hook.as_object_mut(), extra.as_object()) {
        hook.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    hook
}

/// Creates a webhook configuration and waits until this replica's cache has it (a list is a
/// consistent read from the cache admission reads).
fn configure(kapi: &Kapi, collection: &str, name: &str, hooks: Vec<Value>) {
    let kind = if collection == MUTATING { "MutatingWebhookConfiguration" } else { "ValidatingWebhookConfiguration" };
    let config = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "webhooks": hooks});
    let r = kapi.request(&Request::new("POST", collection).json(&config));
    assert_eq!(r.status, 201, "{}", r.raw);
    let listed = kapi.get_json(collection);
    assert!(listed["items"].as_array().into_iter().flatten().any(|c| c["metadata"]["name"] == name), "{listed}");
}

fn configmap(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

fn create(kapi: &Kapi, path: &str, body: &Value) -> kapi_e2e::HttpResponse {
    kapi.request(&Request::new("POST", path).json(body))
}

fn absent(kapi: &Kapi, name: &str) -> bool {
    kapi.request(&Request::get(&format!("{CONFIGMAPS}/{name}"))).status == 404
}

#[test]
fn a_mutating_webhook_adds_a_label_and_sees_kubes_review() {
    let kapi = Kapi::start().expect("start kapi");
    let webhook = AdmissionWebhook::start().expect("start the webhook");
    configure(&kapi, MUTATING, "labeller", vec![hook("label.e2e.kapi", webhook.client_config("/label/injected/yes"), json!({}))]);

    let created = create(&kapi, CONFIGMAPS, &configmap("one", json!({"app": "x"})));
    assert_eq!(created.status, 201, "{}", created.raw);
    assert_eq!(created.body["metadata"]["labels"], json!({"app": "x", "injected": "yes"}), "{}", created.raw);
    let stored = kapi.get_json(&format!("{CONFIGMAPS}/one"));
    assert_eq!(stored["metadata"]["labels"]["injected"], "yes", "stored as mutated: {stored}");

    // An object without labels gets the whole map.
    let bare = create(&kapi, CONFIGMAPS, &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bare"}}));
    assert_eq!(bare.body["metadata"]["labels"], json!({"injected": "yes"}), "{}", bare.raw);

    let calls = webhook.calls("/label");
    assert_eq!(calls.len(), 2, "{calls:?}");
    let request = &calls[0]["request"];
    assert_eq!(request["kind"], json!({"group": "", "version": "v1", "kind": "ConfigMap"}));
    assert_eq!(request["resource"], json!({"group": "", "version": "v1", "resource": "configmaps"}));
    assert_eq!(request["requestKind"], request["kind"]);
    assert_eq!((request["operation"].as_str(), request["namespace"].as_str(), request["name"].as_str()), (Some("CREATE"), Some("default"), Some("one")));
    assert_eq!(request["object"]["metadata"]["labels"], json!({"app": "x"}), "the webhook sees the object before its own patch");
    assert_eq!(request["oldObject"], Value::Null);
    assert_eq!(request["dryRun"], false);
    assert_eq!(request["options"]["kind"], "CreateOptions");
    assert!(request["userInfo"]["groups"].as_array().into_iter().flatten().any(|g| g == "system:masters"), "{request}");
    assert_eq!(calls[0]["query"]["timeout"], "10s", "kube's ?timeout= on the URL");

    // An update is reviewed with the old object.
    let mut changed = stored.clone();
    changed["data"]["k"] = json!("w");
    let updated = kapi.request(&Request::new("PUT", &format!("{CONFIGMAPS}/one")).json(&changed));
    assert_eq!(updated.status, 200, "{}", updated.raw);
    let update = &webhook.calls("/label")[2]["request"];
    assert_eq!((update["operation"].as_str(), update["oldObject"]["data"]["k"].as_str()), (Some("UPDATE"), Some("v")), "{update}");
    assert_eq!(update["options"]["kind"], "UpdateOptions");
}

#[test]
fn a_validating_webhook_denies_as_kubectl_prints_it_and_nothing_is_stored() {
    let kapi = Kapi::start().expect("start kapi");
    let webhook = AdmissionWebhook::start().expect("start the webhook");
    let deny = webhook.client_config("/deny/403/Forbidden/configmaps%20named%20bad%20are%20not%20allowed");
    let only_bad = json!({"objectSelector": {"matchLabels": {"verdict": "bad"}}});
    configure(&kapi, VALIDATING, "policy", vec![hook("deny.e2e.kapi", deny, only_bad)]);

    let manifest = kapi.write_file("bad.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\n  labels:\n    verdict: bad\n");
    let out = kapi.kubectl(&["create", "-f", manifest.to_str().expect("utf-8 path")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(r#"Error from server (Forbidden): error when creating "#)
            && stderr.contains(r#"admission webhook "deny.e2e.kapi" denied the request: configmaps named bad are not allowed"#),
        "{stderr}"
    );
    assert!(absent(&kapi, "bad"), "nothing stored on a denial");
    let raw = create(&kapi, CONFIGMAPS, &configmap("bad", json!({"verdict": "bad"})));
    assert_eq!((raw.status, raw.body["reason"].as_str()), (403, Some("Forbidden")), "{}", raw.raw);

    // Objects the selector does not pick are not sent at all.
    let fine = create(&kapi, CONFIGMAPS, &configmap("fine", json!({"verdict": "good"})));
    assert_eq!(fine.status, 201, "{}", fine.raw);
    assert_eq!(webhook.calls("/deny").len(), 2, "only the two writes the objectSelector picks");

    // kube's admission metrics count the calls and refusals.
    let metrics = kapi.request(&Request::get("/metrics")).raw;
    let sample = |prefix: &str| metrics.lines().find(|l| l.starts_with(prefix)).map(|l| l.rsplit(' ').next().unwrap_or_default().to_owned());
    assert_eq!(
        sample(r#"apiserver_admission_webhook_rejection_count{error_type="no_error",name="deny.e2e.kapi",operation="CREATE",rejection_code="403",type="validating"}"#).as_deref(),
        Some("2"),
        "{metrics}"
    );
    assert_eq!(
        sample(r#"apiserver_admission_webhook_admission_duration_seconds_count{name="deny.e2e.kapi",operation="CREATE",rejected="true",type="validating"}"#).as_deref(),
        Some("2")
    );
    assert!(sample(r#"apiserver_admission_controller_admission_duration_seconds_count{name="ValidatingAdmissionWebhook",operation="CREATE",rejected="false",type="validate"}"#).is_some());
}

#[test]
fn failure_policy_decides_when_the_webhook_is_down() {
    let kapi = Kapi::start().expect("start kapi");
    let mut webhook = AdmissionWebhook::start().expect("start the webhook");
    let config = webhook.client_config("/allow");
    webhook.stop();
    let pick = |value: &str, policy: &str| json!({"failurePolicy": policy, "objectSelector": {"matchLabels": {"policy": value}}});
    configure(&kapi, VALIDATING, "down", vec![hook("fail.e2e.kapi", config.clone(), pick("fail", "Fail")), hook("ignore.e2e.kapi", config, pick("ignore", "Ignore"))]);
    let failed = create(&kapi, CONFIGMAPS, &configmap("closed", json!({"policy": "fail"})));
    assert_eq!((failed.status, failed.body["reason"].as_str()), (500, Some("InternalError")), "{}", failed.raw);
    let message = failed.body["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(r#"Internal error occurred: failed calling webhook "fail.e2e.kapi": failed to call webhook: Post "https://127.0.0.1:"#)
            && message.ends_with("connect: connection refused"),
        "{message}"
    );
    assert!(absent(&kapi, "closed"));
    let ignored = create(&kapi, CONFIGMAPS, &configmap("open", json!({"policy": "ignore"})));
    assert_eq!(ignored.status, 201, "Ignore lets the write through: {}", ignored.raw);
}

#[test]
fn a_webhook_slower_than_its_timeout() {
    let kapi = Kapi::start().expect("start kapi");
    let webhook = AdmissionWebhook::start().expect("start the webhook");
    let slow = webhook.client_config("/sleep/4");
    let pick = |value: &str, policy: &str| json!({"timeoutSeconds": 1, "failurePolicy": policy, "objectSelector": {"matchLabels": {"policy": value}}});
    configure(&kapi, VALIDATING, "slow", vec![hook("slow-fail.e2e.kapi", slow.clone(), pick("fail", "Fail")), hook("slow-ignore.e2e.kapi", slow, pick("ignore", "Ignore"))]);

    let started = Instant::now();
    let failed = create(&kapi, CONFIGMAPS, &configmap("late", json!({"policy": "fail"})));
    let took = started.elapsed();
    assert_eq!(failed.status, 500, "{}", failed.raw);
    let message = failed.body["message"].as_str().unwrap_or_default();
    assert!(message.contains(r#"failed calling webhook "slow-fail.e2e.kapi""#) && message.ends_with("context deadline exceeded"), "{message}");
    assert!(took < Duration::from_secs(3), "bounded by timeoutSeconds, not by the webhook: {took:?}");
    assert!(absent(&kapi, "late"));
    assert_eq!(webhook.calls("/sleep")[0]["query"]["timeout"], "1s");

    let started = Instant::now();
    let ignored = create(&kapi, CONFIGMAPS, &configmap("patient", json!({"policy": "ignore"})));
    assert_eq!(ignored.status, 201, "{}", ignored.raw);
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}

#[test]
fn a_webhook_is_reinvoked_after_a_later_mutation() {
    let kapi = Kapi::start().expect("start kapi");
    let webhook = AdmissionWebhook::start().expect("start the webhook");
    // Configurations run in name order: "a-first" then "b-second".
    configure(&kapi, MUTATING, "a-first", vec![hook("first.e2e.kapi", webhook.client_config("/label/first/1"), json!({"reinvocationPolicy": "IfNeeded"}))]);
    configure(&kapi, MUTATING, "b-second", vec![hook("second.e2e.kapi", webhook.client_config("/audit/seen/yes"), json!({}))]);
    configure(&kapi, MUTATING, "c-third", vec![hook("third.e2e.kapi", webhook.client_config("/label/third/3"), json!({}))]);

    let created = create(&kapi, CONFIGMAPS, &configmap("again", json!({})));
    assert_eq!(created.status, 201, "{}", created.raw);
    assert_eq!(created.body["metadata"]["labels"], json!({"first": "1", "third": "3"}), "{}", created.raw);
    let firsts: Vec<Value> = webhook.calls("/label").into_iter().filter(|c| c["args"][0] == "first").collect();
    assert_eq!(firsts.len(), 2, "called again after the third webhook changed the object: {firsts:?}");
    assert_eq!(firsts[1]["request"]["object"]["metadata"]["labels"]["third"], "3", "the second call sees the later change");
    assert_eq!(webhook.calls("/audit").len(), 1, "webhooks without IfNeeded run once");
}

#[test]
fn dry_run_calls_only_webhooks_without_side_effects() {
    let kapi = Kapi::start().expect("start kapi");
    let webhook = AdmissionWebhook::start().expect("start the webhook");
    let pick = |value: &str, effects: &str| json!({"sideEffects": effects, "objectSelector": {"matchLabels": {"effects": value}}});
    configure(
        &kapi,
        VALIDATING,
        "effects",
        vec![hook("none.e2e.kapi", webhook.client_config("/allow"), pick("none", "None")), hook("some.e2e.kapi", webhook.client_config("/allow"), pick("some", "NoneOnDryRun"))],
    );
    let dry = |name: &str, value: &str| kapi.request(&Request::new("POST", &format!("{CONFIGMAPS}?dryRun=All")).json(&configmap(name, json!({"effects": value}))));
    for (name, value) in [("dry", "none"), ("dry-too", "some")] {
        let ok = dry(name, value);
        assert_eq!(ok.status, 201, "{}", ok.raw);
        assert!(absent(&kapi, name), "a dry run stores nothing");
    }
    let calls = webhook.calls("/allow");
    assert_eq!(calls.len(), 2, "both kinds of webhook without side effects are called on dry runs");
    assert!(calls.iter().all(|c| c["request"]["dryRun"] == true && c["request"]["options"]["dryRun"] == json!(["All"])), "{calls:?}");

    // Webhooks with side effects cannot be configured in v1 (kube allows only None and
    // NoneOnDryRun), so a dry run never reaches one.
    let with_effects = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "effects-some"},
        "webhooks": [hook("some.e2e.kapi", webhook.client_config("/allow"), json!({"sideEffects": "Some"}))]});
    let refused = create(&kapi, VALIDATING, &with_effects);
    assert_eq!(refused.status, 422, "{}", refused.raw);
    assert!(refused.body["message"].as_str().unwrap_or_default().contains("webhooks[0].sideEffects: Unsupported value: \"Some\""), "{}", refused.raw);
}

#[test]
fn selectors_decide_whether_a_webhook_is_called() {
    let kapi = Kapi::start().expect("start kapi");
    let webhook = AdmissionWebhook::start().expect("start the webhook");
    let ns = |name: &str, labels: Value| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}});
    assert_eq!(create(&kapi, "/api/v1/namespaces", &ns("watched", json!({"team": "a"}))).status, 201);
    assert_eq!(create(&kapi, "/api/v1/namespaces", &ns("ignored", json!({"team": "b"}))).status, 201);
    configure(&kapi, VALIDATING, "by-namespace", vec![hook("ns.e2e.kapi", webhook.client_config("/warn/seen%20by%20ns"), json!({"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]}}))]);
    for namespace in ["watched", "ignored"] {
        let r = create(&kapi, &format!("/api/v1/namespaces/{namespace}/configmaps"), &configmap("c", json!({})));
        assert_eq!(r.status, 201, "{}", r.raw);
    }
    let calls = webhook.calls("/warn");
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["request"]["namespace"], "watched");

    // The warning reaches kubectl.
    let manifest = kapi.write_file("warned.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: warned\n  namespace: watched\n");
    let out = kapi.kubectl(&["create", "-f", manifest.to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Warning: seen by ns"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn answers_kube_cannot_use_fail_the_write() {
    let kapi = Kapi::start().expect("start kapi");
    let webhook = AdmissionWebhook::start().expect("start the webhook");
    let cases = [
        ("garbage", "/garbage", false, "failed to call webhook: couldn't get version/kind; json parse error: invalid character '<' looking for beginning of value"),
        ("wrong-uid", "/wrong-uid", false, "received invalid webhook response: expected response.uid="),
        ("bad-patch", "/bad-patch", true, "Internal error occurred"),
    ];
    for (name, path, mutating, expected) in cases {
        let selector = json!({"objectSelector": {"matchLabels": {"case": name}}});
        let collection = if mutating { MUTATING } else { VALIDATING };
        configure(&kapi, collection, name, vec![hook(&format!("{name}.e2e.kapi"), webhook.client_config(path), selector)]);
        let r = create(&kapi, CONFIGMAPS, &configmap(name, json!({"case": name})));
        assert_eq!(r.status, 500, "{name}: {}", r.raw);
        let message = r.body["message"].as_str().unwrap_or_default();
        assert!(message.contains(expected), "{name}: {message}");
        assert!(absent(&kapi, name), "{name}: nothing stored");
    }
}

#[test]
fn a_configuration_written_through_one_replica_takes_effect_on_another_within_a_second() {
    let nats = kapi_e2e::NatsServer::start().expect("start nats-server");
    let url = nats.url();
    let args = ["--nats-url", url.as_str()];
    let first = Kapi::start_with(&args).expect("start the first replica");
    let second = first.start_replica(&args).expect("start the second replica");
    second.wait_ready(Duration::from_secs(30)).expect("ready");
    let webhook = AdmissionWebhook::start().expect("start the webhook");
    let config = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "shared"},
        "webhooks": [hook("deny.e2e.kapi", webhook.client_config("/deny/0/-/not%20here"), json!({}))]});
    let written = first.request(&Request::new("POST", VALIDATING).json(&config));
    assert_eq!(written.status, 201, "{}", written.raw);
    let started = Instant::now();
    // Writes through the other replica until its admission refuses them.
    let mut attempt = 0;
    let refused = loop {
        attempt += 1;
        let r = second.request(&Request::new("POST", CONFIGMAPS).json(&configmap(&format!("probe-{attempt}"), json!({}))));
        if r.status != 201 {
            break r;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "the other replica never applied the configuration");
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    assert_eq!(refused.status, 400, "{}", refused.raw);
    assert_eq!(refused.body["message"], r#"admission webhook "deny.e2e.kapi" denied the request: not here"#);
    assert!(took < Duration::from_secs(1), "took {took:?}");
    eprintln!("the second replica applied the configuration after {took:?} ({attempt} writes)");
}

#[test]
fn match_conditions_decide_in_cel_whether_a_webhook_is_called() {
    let kapi = Kapi::start().expect("start kapi");
    let webhook = AdmissionWebhook::start().expect("start the webhook");
    let conditions = json!({"matchConditions": [
        {"name": "labelled", "expression": "has(object.metadata.labels) && 'team' in object.metadata.labels"},
        {"name": "not-system", "expression": "!request.userInfo.username.startsWith('system:node:')"},
        {"name": "may-list-secrets", "expression": "authorizer.group('').resource('secrets').namespace('default').check('list').allowed()"}
    ]});
    configure(&kapi, VALIDATING, "conditions", vec![hook("cel.e2e.kapi", webhook.client_config("/allow"), conditions)]);
    assert_eq!(create(&kapi, CONFIGMAPS, &configmap("unlabelled", json!({}))).status, 201);
    assert_eq!(create(&kapi, CONFIGMAPS, &configmap("labelled", json!({"team": "a"}))).status, 201);
    let calls = webhook.calls("/allow");
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0]["request"]["name"], "labelled");

    // A condition that fails to evaluate refuses the write under failurePolicy Fail.
    let failing = json!({"failurePolicy": "Fail", "matchConditions": [{"name": "broken", "expression": "object.data.missing == 'x'"}]});
    configure(&kapi, VALIDATING, "broken-conditions", vec![hook("broken.e2e.kapi", webhook.client_config("/allow"), failing)]);
    let refused = create(&kapi, CONFIGMAPS, &configmap("refused", json!({"team": "a"})));
    assert_eq!((refused.status, refused.body["reason"].as_str()), (403, Some("Forbidden")), "{}", refused.raw);
    let message = refused.body["message"].as_str().unwrap_or_default();
    assert!(message.starts_with(r#"configmaps "refused" is forbidden: expression 'object.data.missing == 'x'' resulted in error: "#), "{message}");
    assert!(absent(&kapi, "refused"));
}

#[test]
fn a_webhook_by_service_is_reached_through_its_endpointslices() {
    let kapi = Kapi::start().expect("start kapi");
    let webhook = AdmissionWebhook::start().expect("start the webhook");
    let port = webhook.port;
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "adm"},
                     "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}});
    assert_eq!(create(&kapi, "/api/v1/namespaces/default/services", &svc).status, 201);
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                       "metadata": {"name": "adm-1", "labels": {"kubernetes.io/service-name": "adm"}},
                       "addressType": "IPv4", "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
                       "ports": [{"name": "https", "port": port, "protocol": "TCP"}]});
    assert_eq!(create(&kapi, "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", &slice).status, 201);
    // The certificate names adm.default.svc: kube's TLS server name for a service reference.
    let by_service = json!({"service": {"namespace": "default", "name": "adm", "path": "/label/via/service", "port": 443}, "caBundle": webhook.ca_bundle});
    configure(&kapi, MUTATING, "by-service", vec![hook("service.e2e.kapi", by_service, json!({}))]);
    let created = create(&kapi, CONFIGMAPS, &configmap("through-service", json!({})));
    assert_eq!(created.status, 201, "{}", created.raw);
    assert_eq!(created.body["metadata"]["labels"]["via"], "service", "{}", created.raw);

    // A Service with no ready endpoint: kube's resolver error, under failurePolicy Fail.
    let ready = kapi.request(&Request::new("PATCH", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/adm-1")
        .raw("application/merge-patch+json", br#"{"endpoints":[{"addresses":["127.0.0.1"],"conditions":{"ready":false}}]}"#.to_vec()));
    assert_eq!(ready.status, 200, "{}", ready.raw);
    let _ = kapi.get_json("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices");
    let refused = create(&kapi, CONFIGMAPS, &configmap("no-endpoint", json!({})));
    assert_eq!(refused.status, 500, "{}", refused.raw);
    let message = refused.body["message"].as_str().unwrap_or_default();
    assert!(message.contains(r#"failed calling webhook "service.e2e.kapi": failed to call webhook: Post "https://adm.default.svc:443/label/via/service?timeout=10s": "#), "{message}");
    assert!(absent(&kapi, "no-endpoint"));
}

#[test]
fn a_webhook_that_accepts_only_v1beta1_gets_v1beta1_reviews() {
    let kapi = Kapi::start().expect("start kapi");
    let webhook = AdmissionWebhook::start().expect("start the webhook");
    let beta = json!({"admissionReviewVersions": ["v1beta1"]});
    configure(&kapi, MUTATING, "beta", vec![hook("beta.e2e.kapi", webhook.client_config("/label/review/beta"), beta.clone())]);
    // kube does not check a v1beta1 answer's uid.
    configure(&kapi, VALIDATING, "beta-uid", vec![hook("beta-uid.e2e.kapi", webhook.client_config("/wrong-uid"), beta)]);
    let created = create(&kapi, CONFIGMAPS, &configmap("beta", json!({})));
    assert_eq!(created.status, 201, "{}", created.raw);
    assert_eq!(created.body["metadata"]["labels"]["review"], "beta", "a v1beta1 patch applies");
    for path in ["/label", "/wrong-uid"] {
        let calls = webhook.calls(path);
        assert_eq!(calls.len(), 1, "{path}");
        assert_eq!(calls[0]["apiVersion"], "admission.k8s.io/v1beta1", "{path}");
    }
}

#[test]
fn match_policy_equivalent_calls_a_webhook_for_another_version_of_its_resource() {
    let kapi = Kapi::start().expect("start kapi");
    let webhook = AdmissionWebhook::start().expect("start the webhook");
    let v2_rules = json!({"rules": [{"operations": ["CREATE"], "apiGroups": ["autoscaling"], "apiVersions": ["v2"], "resources": ["horizontalpodautoscalers"]}]});
    let mut exact = v2_rules.clone();
    exact["matchPolicy"] = json!("Exact");
    configure(&kapi, MUTATING, "hpa-v2", vec![hook("equivalent.e2e.kapi", webhook.client_config("/label/seen/v2"), v2_rules)]);
    configure(&kapi, VALIDATING, "hpa-v2-exact", vec![hook("exact.e2e.kapi", webhook.client_config("/allow"), exact)]);

    let hpa = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 5, "targetCPUUtilizationPercentage": 70}});
    let created = create(&kapi, "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers", &hpa);
    assert_eq!(created.status, 201, "{}", created.raw);
    assert_eq!(created.body["apiVersion"], "autoscaling/v1");
    assert_eq!(created.body["metadata"]["labels"]["seen"], "v2", "the patch made in v2 lands on the v1 object: {}", created.raw);
    assert_eq!(created.body["spec"]["targetCPUUtilizationPercentage"], 70);

    let calls = webhook.calls("/label");
    assert_eq!(calls.len(), 1, "{calls:?}");
    let request = &calls[0]["request"];
    assert_eq!(request["kind"], json!({"group": "autoscaling", "version": "v2", "kind": "HorizontalPodAutoscaler"}));
    assert_eq!(request["resource"], json!({"group": "autoscaling", "version": "v2", "resource": "horizontalpodautoscalers"}));
    assert_eq!(request["requestKind"], json!({"group": "autoscaling", "version": "v1", "kind": "HorizontalPodAutoscaler"}));
    assert_eq!(request["requestResource"]["version"], "v1");
    assert_eq!(request["object"]["apiVersion"], "autoscaling/v2", "the object in the version the rule names: {request}");
    assert_eq!(request["object"]["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"], 70, "{request}");
    assert!(webhook.calls("/allow").is_empty(), "matchPolicy Exact is not called through v1");
}

#[test]
fn deletes_subresources_and_custom_resources_are_admitted() {
    let kapi = Kapi::start().expect("start kapi");
    let webhook = AdmissionWebhook::start().expect("start the webhook");
    let rule = |operations: Value, group: &str, resources: Value| json!({"rules": [{"operations": operations, "apiGroups": [group], "apiVersions": ["*"], "resources": resources}]});
    // Deletes of protected ConfigMaps are refused, with the stored object in the review.
    let protect = json!({"rules": rule(json!(["DELETE"]), "", json!(["configmaps"]))["rules"], "objectSelector": {"matchLabels": {"protected": "yes"}}});
    configure(&kapi, VALIDATING, "protect", vec![hook("protect.e2e.kapi", webhook.client_config("/deny/0/-/protected"), protect)]);
    assert_eq!(create(&kapi, CONFIGMAPS, &configmap("keep", json!({"protected": "yes"}))).status, 201);
    assert_eq!(create(&kapi, CONFIGMAPS, &configmap("drop", json!({}))).status, 201);
    let refused = kapi.request(&Request::new("DELETE", &format!("{CONFIGMAPS}/keep")));
    assert_eq!(refused.status, 400, "{}", refused.raw);
    assert_eq!(refused.body["message"], r#"admission webhook "protect.e2e.kapi" denied the request: protected"#);
    assert!(!absent(&kapi, "keep"));
    let review = &webhook.calls("/deny")[0]["request"];
    assert_eq!((review["operation"].as_str(), review["object"].is_null()), (Some("DELETE"), true), "{review}");
    assert_eq!(review["oldObject"]["metadata"]["name"], "keep");
    assert_eq!(review["options"]["kind"], "DeleteOptions");
    assert_eq!(kapi.request(&Request::new("DELETE", &format!("{CONFIGMAPS}/drop"))).status, 200, "others are not sent");

    // Scale writes are admitted as autoscaling/v1 Scale objects.
    configure(&kapi, VALIDATING, "scale", vec![hook("scale.e2e.kapi", webhook.client_config("/allow"), rule(json!(["UPDATE"]), "apps", json!(["deployments/scale"])))]);
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    assert_eq!(create(&kapi, "/apis/apps/v1/namespaces/default/deployments", &deploy).status, 201);
    let out = kapi.kubectl(&["scale", "deployment/web", "--replicas=3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let scale = &webhook.calls("/allow")[0]["request"];
    assert_eq!(scale["kind"], json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}), "{scale}");
    assert_eq!((scale["subResource"].as_str(), scale["object"]["spec"]["replicas"].as_i64(), scale["oldObject"]["spec"]["replicas"].as_i64()), (Some("scale"), Some(3), Some(1)));

    // Custom resources go through admission as built-in ones do.
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    assert_eq!(create(&kapi, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", &crd).status, 201);
    let widgets = "/apis/example.com/v1/namespaces/default/widgets";
    assert!(kapi_e2e::wait_for(Duration::from_secs(10), || (kapi.request(&Request::get(widgets)).status == 200).then_some(())).is_some());
    configure(&kapi, MUTATING, "widgets", vec![hook("widget.e2e.kapi", webhook.client_config("/label/stamped/widget"), rule(json!(["CREATE"]), "example.com", json!(["widgets"])))]);
    let widget = create(&kapi, widgets, &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}));
    assert_eq!(widget.status, 201, "{}", widget.raw);
    assert_eq!(widget.body["metadata"]["labels"]["stamped"], "widget", "{}", widget.raw);
    let review = &webhook.calls("/label")[0]["request"];
    assert_eq!(review["kind"], json!({"group": "example.com", "version": "v1", "kind": "Widget"}));
}
