//! The client against a real HTTPS server: answers, connection reuse, and kube's failure texts.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kapi_webhook::{CallError, Client, ClientConfig, ServiceResolver};
use serde_json::{json, Value};
use support::{Behaviour, Ca, Server};

const TIMEOUT: Duration = Duration::from_secs(5);

/// No Services exist in these tests.
struct NoServices;

impl ServiceResolver for NoServices {
    fn resolve(&self, _: &str, name: &str, _: u16) -> Result<(String, u16), String> {
        Err(format!("service {name:?} not found"))
    }
}

fn client() -> Client {
    Client::new(Arc::new(NoServices))
}

fn config(url: &str, ca: &Ca) -> ClientConfig {
    ClientConfig::from_json(&json!({"url": url, "caBundle": ca.bundle()})).expect("clientConfig")
}

async fn server(ca: &Ca, behaviour: Behaviour) -> Server {
    Server::start("127.0.0.1:0", ca.serving(&["127.0.0.1"]), behaviour).await
}

fn body(v: Value) -> Bytes {
    Bytes::from(v.to_string())
}

async fn echo(client: &Client, config: &ClientConfig) -> Value {
    client.post_json(config, body(json!({"kind": "Ping"})), TIMEOUT).await.expect("answer")
}

#[tokio::test]
async fn json_goes_out_and_comes_back_with_kubes_timeout_on_the_path() {
    let ca = Ca::new();
    let server = server(&ca, Behaviour::Normal).await;
    let client = client();
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "1"}});
    let validate = config(&server.url("/validate/pods"), &ca);
    let answer = client.post_json(&validate, body(review.clone()), TIMEOUT).await.expect("answer");
    assert_eq!(answer["kind"], "Echo");
    assert_eq!(answer["got"], review, "the body arrives as sent");
    assert_eq!(answer["path"], "/validate/pods?timeout=5s");
    let seen = server.seen();
    assert_eq!(seen[0].host, server.addr.to_string());
    assert_eq!(seen[0].content_type, "application/json");

    let answer = client.post_json(&config(&server.url(""), &ca), body(json!({})), Duration::from_millis(2500)).await.unwrap();
    assert_eq!(answer["path"], "/?timeout=3s", "no path is /, and the timeout is rounded up to whole seconds");
    let answer = client.post_json(&config(&server.url("/hook/?team=a"), &ca), body(json!({})), Duration::from_secs(90)).await.unwrap();
    assert_eq!(answer["path"], "/hook?team=a&timeout=1m30s", "a query is kept and the timeout printed as Go prints durations");
}

#[test]
fn calls_can_be_spawned() {
    fn spawnable<F: std::future::Future + Send + 'static>(_: F) {}
    let config = ClientConfig::from_json(&json!({"url": "https://h"})).unwrap();
    spawnable(async move { client().post_json(&config, Bytes::new(), TIMEOUT).await });
}

#[tokio::test]
async fn sequential_calls_share_one_connection() {
    let ca = Ca::new();
    let server = server(&ca, Behaviour::Normal).await;
    let (client, config) = (client(), config(&server.url("/echo"), &ca));
    for _ in 0..20 {
        echo(&client, &config).await;
    }
    assert_eq!(server.accepted(), 1);
    assert_eq!(server.seen().len(), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_use_several_connections_which_are_kept_for_later_calls() {
    let ca = Ca::new();
    let server = server(&ca, Behaviour::Normal).await;
    let (client, config) = (client(), config(&server.url("/echo"), &ca));
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let (client, config) = (client.clone(), config.clone());
            tokio::spawn(async move { echo(&client, &config).await })
        })
        .collect();
    for call in calls {
        call.await.expect("call");
    }
    let after_burst = server.accepted();
    for _ in 0..10 {
        echo(&client, &config).await;
    }
    assert!(after_burst <= 10, "{after_burst} connections for 10 calls");
    assert_eq!(server.accepted(), after_burst, "the sequential calls reuse the burst's connections");
    assert_eq!(server.seen().len(), 20);
}

#[tokio::test]
async fn a_connection_the_server_closed_while_idle_is_not_used_again() {
    let ca = Ca::new();
    let server = server(&ca, Behaviour::CloseAfter(Duration::from_millis(300))).await;
    let (client, config) = (client(), config(&server.url("/echo"), &ca));
    echo(&client, &config).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    echo(&client, &config).await;
    assert_eq!(server.accepted(), 2);
}

#[tokio::test]
async fn a_reused_connection_closed_under_the_request_is_retried_once_on_a_new_one() {
    let ca = Ca::new();
    let server = server(&ca, Behaviour::OneAnswerPerConnection).await;
    let (client, config) = (client(), config(&server.url("/echo"), &ca));
    echo(&client, &config).await;
    let answer = echo(&client, &config).await;
    assert_eq!(answer["kind"], "Echo");
    assert_eq!(server.accepted(), 2, "the second call went to the idle connection, then to a new one");
    assert_eq!(server.seen().len(), 2, "each call answered once");
}

#[tokio::test]
async fn a_new_connection_closed_without_an_answer_is_not_retried() {
    let ca = Ca::new();
    let server = server(&ca, Behaviour::NeverAnswer).await;
    let (client, config) = (client(), config(&server.url("/echo"), &ca));
    let err = client.post_json(&config, body(json!({})), TIMEOUT).await.unwrap_err();
    assert_eq!(err.to_string(), format!(r#"Post "https://{}/echo?timeout=5s": EOF"#, server.addr));
    assert!(matches!(err, CallError::Call(_)) && !err.is_timeout());
    assert_eq!(server.accepted(), 1);
}

#[tokio::test]
async fn a_call_past_its_timeout_fails_with_context_deadline_exceeded() {
    let ca = Ca::new();
    let server = server(&ca, Behaviour::Normal).await;
    let client = client();
    let started = Instant::now();
    let err = client.post_json(&config(&server.url("/sleep"), &ca), body(json!({})), Duration::from_secs(1)).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_millis(2500), "{:?}", started.elapsed());
    assert_eq!(err.to_string(), format!(r#"Post "https://{}/sleep?timeout=1s": context deadline exceeded"#, server.addr));
    assert!(matches!(err, CallError::Call(_)));
    assert!(err.is_timeout());
}

#[tokio::test]
async fn a_refused_connection_reads_as_gos_dial_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let ca = Ca::new();
    let err = client().post_json(&config(&format!("https://127.0.0.1:{port}/validate"), &ca), body(json!({})), TIMEOUT).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(r#"Post "https://127.0.0.1:{port}/validate?timeout=5s": dial tcp 127.0.0.1:{port}: connect: connection refused"#)
    );
    assert!(!err.is_timeout());
}

#[tokio::test]
async fn certificates_from_another_ca_or_for_another_host_read_as_gos_x509_errors() {
    let (ca, other) = (Ca::new(), Ca::new());
    let server = server(&ca, Behaviour::Normal).await;
    let client = client();
    let err = client.post_json(&config(&server.url("/v"), &other), body(json!({})), TIMEOUT).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(r#"Post "https://{}/v?timeout=5s": tls: failed to verify certificate: x509: certificate signed by unknown authority"#, server.addr)
    );
    let (twin, twin_server) = (Ca::named("twin"), Server::start("127.0.0.1:0", Ca::named("twin").serving(&["127.0.0.1"]), Behaviour::Normal).await);
    let err = client.post_json(&config(&twin_server.url("/v"), &twin), body(json!({})), TIMEOUT).await.unwrap_err();
    assert!(err.to_string().ends_with(": tls: failed to verify certificate: x509: certificate signed by unknown authority"), "{err}");
    let without_ca = ClientConfig::from_json(&json!({"url": server.url("/v")})).unwrap();
    let err = client.post_json(&without_ca, body(json!({})), TIMEOUT).await.unwrap_err();
    assert!(err.to_string().ends_with("x509: certificate signed by unknown authority"), "{err}");

    let named = Server::start("127.0.0.1:0", ca.serving(&["webhook.example"]), Behaviour::Normal).await;
    let err = client.post_json(&config(&named.url("/v"), &ca), body(json!({})), TIMEOUT).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            r#"Post "https://{}/v?timeout=5s": tls: failed to verify certificate: x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs"#,
            named.addr
        )
    );
    let port = named.addr.port();
    let err = client.post_json(&config(&format!("https://localhost:{port}/v"), &ca), body(json!({})), TIMEOUT).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(r#"Post "https://localhost:{port}/v?timeout=5s": tls: failed to verify certificate: x509: certificate is valid for webhook.example, not localhost"#)
    );
}

#[tokio::test]
async fn statuses_other_than_2xx_read_as_client_gos_errors() {
    let ca = Ca::new();
    let server = server(&ca, Behaviour::Normal).await;
    let client = client();
    let call = |path: &str| {
        let (client, config) = (client.clone(), config(&server.url(path), &ca));
        async move { client.post_json(&config, body(json!({})), TIMEOUT).await.unwrap_err() }
    };
    let err = call("/status/418").await;
    assert!(matches!(&err, CallError::Status { code: 418, body } if body.as_ref() == b"short and stout"), "{err:?}");
    assert_eq!(err.to_string(), "the server responded with the status code 418 but did not return more information");
    let err = call("/status/500").await;
    assert_eq!(err.to_string(), r#"an error on the server ("boom") has prevented the request from succeeding"#);
    let err = call("/status/403").await;
    assert!(matches!(err, CallError::Status { code: 403, .. }));
    assert_eq!(err.to_string(), "denied by policy");
    assert!(!err.is_timeout());
    assert_eq!(server.accepted(), 1, "an error status leaves the connection usable");
}

#[tokio::test]
async fn answers_that_are_not_json_read_as_decode_errors() {
    let ca = Ca::new();
    let server = server(&ca, Behaviour::Normal).await;
    let client = client();
    let err = client.post_json(&config(&server.url("/text"), &ca), body(json!({})), TIMEOUT).await.unwrap_err();
    assert!(matches!(err, CallError::Decode(_)), "{err:?}");
    assert_eq!(err.to_string(), "couldn't get version/kind; json parse error: invalid character 'h' looking for beginning of value");
    let err = client.post_json(&config(&server.url("/empty"), &ca), body(json!({})), TIMEOUT).await.unwrap_err();
    assert_eq!(err.to_string(), "0-length response with status code: 200 and content type: application/json");
}

#[tokio::test]
async fn ipv6_hosts_are_written_in_brackets() {
    let ca = Ca::new();
    let server = Server::start("[::1]:0", ca.serving(&["::1"]), Behaviour::Normal).await;
    let client = client();
    let url = server.url("/echo");
    assert!(url.starts_with("https://[::1]:"), "{url}");
    let answer = client.post_json(&config(&url, &ca), body(json!({})), TIMEOUT).await.expect("answer");
    assert_eq!(answer["path"], "/echo?timeout=5s");
    assert_eq!(server.seen()[0].host, server.addr.to_string());
    let port = std::net::TcpListener::bind("[::1]:0").unwrap().local_addr().unwrap().port();
    let url = format!("https://[::1]:{port}/echo");
    let err = client.post_json(&config(&url, &ca), body(json!({})), TIMEOUT).await.unwrap_err();
    assert_eq!(err.to_string(), format!(r#"Post "https://[::1]:{port}/echo?timeout=5s": dial tcp [::1]:{port}: connect: connection refused"#));
}

#[tokio::test]
async fn an_unresolvable_service_reads_as_the_resolvers_error() {
    let config = ClientConfig::from_json(&json!({"service": {"namespace": "default", "name": "nope", "path": "/convert"}})).unwrap();
    let err = client().post_json(&config, body(json!({})), Duration::from_secs(30)).await.unwrap_err();
    assert_eq!(err.to_string(), r#"Post "https://nope.default.svc:443/convert?timeout=30s": service "nope" not found"#);
}
