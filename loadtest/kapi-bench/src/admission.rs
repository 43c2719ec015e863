//! Admission cost: ConfigMap creates with no webhook, through one no-op validating webhook,
//! through five (called in parallel) and through one ValidatingAdmissionPolicy, measured in the
//! same run against one kapi. The webhook is
//! an in-process HTTPS server (hyper, rustls) that allows everything at once, so the numbers
//! are kapi's overhead: the review's encoding, the pooled connection, the answer's checks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};

use crate::stats::{ms, Samples};
use crate::{check, configmap, drive, Kapi};

struct Plan {
    creates: usize,
    concurrency: usize,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Plan { creates: 100, concurrency: 4 }
        } else {
            Plan { creates: 2_000, concurrency: 8 }
        }
    }
}

/// One configuration measured twice: latency one create at a time (what a webhook adds to a
/// request; on 2 cores a loaded server's latency only measures CPU), throughput with
/// `plan.concurrency` connections.
struct Measured {
    sequential: Samples,
    concurrent: Samples,
}

const WEBHOOKS: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";

#[derive(serde::Deserialize)]
struct Review {
    request: ReviewRequest,
}

#[derive(serde::Deserialize)]
struct ReviewRequest {
    uid: String,
}

/// A no-op validating webhook: answers every AdmissionReview `allowed: true`, counting calls.
struct NoopWebhook {
    port: u16,
    ca_bundle: String,
    calls: Arc<AtomicUsize>,
    server: tokio::task::JoinHandle<()>,
    _pki: tempfile::TempDir,
}

impl NoopWebhook {
    async fn start() -> Result<NoopWebhook, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let pki = kapi_server::pki::ensure_pki(dir.path(), &["127.0.0.1".into()]).map_err(|e| e.to_string())?;
        let tls = kapi_server::tls::server_config(&pki.serving_cert_pem, &pki.serving_key_pem, None).map_err(|e| e.to_string())?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let acceptor = tokio_rustls::TlsAcceptor::from(tls);
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let server = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, counted) = (acceptor.clone(), counted.clone());
                tokio::spawn(async move {
                    let _ = tcp.set_nodelay(true);
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let counted = counted.clone();
                        async move {
                            let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                            // Only the uid is read, as a fast webhook in Go decodes into a typed struct.
                            let uid = serde_json::from_slice::<Review>(&body).map(|r| r.request.uid).unwrap_or_default();
                            counted.fetch_add(1, Ordering::Relaxed);
                            let answer = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                "response": {"uid": uid, "allowed": true}});
                            let body = http_body_util::Full::new(Bytes::from(answer.to_string()));
                            Ok::<_, std::convert::Infallible>(hyper::Response::new(body))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(hyper_util::rt::TokioIo::new(tls), service).await;
                });
            }
        });
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&pki.ca_cert_pem);
        Ok(NoopWebhook { port, ca_bundle, calls, server, _pki: dir })
    }

    fn configuration(&self, name: &str, webhooks: usize) -> Value {
        let hooks: Vec<Value> = (0..webhooks)
            .map(|i| {
                json!({"name": format!("noop-{i}.bench.kapi"), "sideEffects": "None", "admissionReviewVersions": ["v1"],
                    "clientConfig": {"url": format!("https://127.0.0.1:{}/validate", self.port), "caBundle": self.ca_bundle},
                    "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]})
            })
            .collect();
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": name}, "webhooks": hooks})
    }
}

impl Drop for NoopWebhook {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn measure(kapi: &Kapi, plan: &Plan, prefix: &str) -> Result<Measured, String> {
    let sequential = creates(kapi, plan.creates, 1, &format!("{prefix}-seq")).await?;
    let concurrent = creates(kapi, plan.creates, plan.concurrency, &format!("{prefix}-par")).await?;
    Ok(Measured { sequential, concurrent })
}

async fn creates(kapi: &Kapi, n: usize, concurrency: usize, prefix: &str) -> Result<Samples, String> {
    let prefix = prefix.to_owned();
    drive(&kapi.target, n, concurrency, move |mut conn, i| {
        let name = format!("{prefix}-{i}");
        async move {
            let (status, body) = conn.send(Method::POST, "/api/v1/namespaces/admission/configmaps", Some(configmap(&name))).await?;
            check(status, StatusCode::CREATED, &body, "create")?;
            Ok(conn)
        }
    })
    .await
}

async fn send(kapi: &Kapi, method: Method, path: &str, body: Option<&Value>, want: StatusCode) -> Result<(), String> {
    let mut conn = kapi.target.connect().await?;
    let (status, answer) = conn.send(method, path, body.map(|b| Bytes::from(b.to_string()))).await?;
    check(status, want, &answer, path)
}

/// Waits until a create is seen by the webhook (this replica's cache has the configuration).
async fn until_called(kapi: &Kapi, webhook: &NoopWebhook, tag: &str) -> Result<(), String> {
    let before = webhook.calls.load(Ordering::Relaxed);
    for i in 0..200 {
        send(kapi, Method::POST, "/api/v1/namespaces/admission/configmaps", Some(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("probe-{tag}-{i}")}})), StatusCode::CREATED).await?;
        if webhook.calls.load(Ordering::Relaxed) > before {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    Err("the webhook configuration never took effect".into())
}

/// Waits until the policy refuses a ConfigMap with too many keys (this replica's cache has it).
async fn until_refused(kapi: &Kapi) -> Result<(), String> {
    let data: serde_json::Map<String, Value> = (0..20).map(|i| (format!("k{i}"), Value::String("v".into()))).collect();
    for i in 0..200 {
        let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("too-big-{i}")}, "data": data});
        let mut conn = kapi.target.connect().await?;
        let (status, _) = conn.send(Method::POST, "/api/v1/namespaces/admission/configmaps", Some(Bytes::from(big.to_string()))).await?;
        if status == StatusCode::UNPROCESSABLE_ENTITY {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    Err("the policy never took effect".into())
}

fn row(label: &str, m: &Measured, base: Option<&Measured>) -> String {
    let p50 = |s: &Samples| s.percentile(0.5).as_secs_f64();
    let vs = base.map_or("1.00x".to_owned(), |b| format!("{:.2}x", p50(&m.sequential) / p50(&b.sequential).max(1e-9)));
    format!(
        "| {label} | {} | {} | {vs} | {:.0} | {} |\n",
        ms(m.sequential.percentile(0.5)),
        ms(m.sequential.percentile(0.99)),
        m.concurrent.per_second(),
        ms(m.concurrent.percentile(0.99)),
    )
}

/// The section.
pub async fn run(kapi_bin: &std::path::Path, quick: bool) -> Result<String, String> {
    let plan = Plan::new(quick);
    let webhook = NoopWebhook::start().await?;
    let kapi = Kapi::start(kapi_bin)?;
    kapi.wait_ready().await?;
    send(&kapi, Method::POST, "/api/v1/namespaces", Some(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "admission"}})), StatusCode::CREATED).await?;

    let none = measure(&kapi, &plan, "none").await?;

    send(&kapi, Method::POST, WEBHOOKS, Some(&webhook.configuration("one", 1)), StatusCode::CREATED).await?;
    until_called(&kapi, &webhook, "one").await?;
    let before = webhook.calls.load(Ordering::Relaxed);
    let one = measure(&kapi, &plan, "one").await?;
    let one_calls = webhook.calls.load(Ordering::Relaxed) - before;

    send(&kapi, Method::DELETE, &format!("{WEBHOOKS}/one"), None, StatusCode::OK).await?;
    send(&kapi, Method::POST, WEBHOOKS, Some(&webhook.configuration("five", 5)), StatusCode::CREATED).await?;
    until_called(&kapi, &webhook, "five").await?;
    let before = webhook.calls.load(Ordering::Relaxed);
    let five = measure(&kapi, &plan, "five").await?;
    let five_calls = webhook.calls.load(Ordering::Relaxed) - before;
    send(&kapi, Method::DELETE, &format!("{WEBHOOKS}/five"), None, StatusCode::OK).await?;
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "small-configmaps"},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
                 "validations": [{"expression": "!has(object.data) || object.data.size() <= 16", "message": "too many keys"}]}});
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "small-configmaps"},
        "spec": {"policyName": "small-configmaps", "validationActions": ["Deny"]}});
    send(&kapi, Method::POST, POLICIES, Some(&policy), StatusCode::CREATED).await?;
    send(&kapi, Method::POST, BINDINGS, Some(&binding), StatusCode::CREATED).await?;
    until_refused(&kapi).await?;
    let policy_run = measure(&kapi, &plan, "policy").await?;
    if one_calls != 2 * plan.creates || five_calls != 10 * plan.creates {
        return Err(format!("webhook calls: {one_calls} for {} creates through one, {five_calls} through five", plan.creates));
    }

    let p50 = |m: &Measured| m.sequential.percentile(0.5);
    let added = p50(&one).saturating_sub(p50(&none));
    let ratio = p50(&five).as_secs_f64() / p50(&one).as_secs_f64().max(1e-9);
    let mut report = String::new();
    report.push_str("## Admission webhooks\n\n");
    report.push_str(&format!(
        "ConfigMap creates against one kapi (SQLite), {} one at a time (latency) then {} over {} connections (throughput); an in-process no-op HTTPS validating webhook (every call counted: {one_calls} and {five_calls}).\n\n",
        plan.creates, plan.creates, plan.concurrency
    ));
    report.push_str("| creates | p50 | p99 | p50 vs none | per second ({} conns) | p99 ({} conns) |\n|---|---|---|---|---|---|\n".replace("{}", &plan.concurrency.to_string()).as_str());
    report.push_str(&row("no webhook", &none, None));
    report.push_str(&row("1 no-op validating webhook", &one, Some(&none)));
    report.push_str(&row("5 no-op validating webhooks", &five, Some(&none)));
    report.push_str(&row("1 ValidatingAdmissionPolicy (no webhook)", &policy_run, Some(&none)));
    report.push_str(&format!(
        "\nOne webhook adds {} at p50 (target: at most 1 ms: {}); five cost {ratio:.2}x one at p50 (target: at most 1.5x: {}).\n\n",
        ms(added),
        if added <= std::time::Duration::from_millis(1) { "met" } else { "missed" },
        if ratio <= 1.5 { "met" } else { "missed" },
    ));
    report.push_str(&format!(
        "Through one ValidatingAdmissionPolicy (a CEL check of `object.data`), creates run at {:.0}% of the rate without it over {} connections.\n\n",
        100.0 * policy_run.concurrent.per_second() / none.concurrent.per_second().max(1e-9),
        plan.concurrency
    ));
    Ok(report)
}
