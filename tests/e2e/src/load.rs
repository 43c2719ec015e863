//! A steady client load of mixed ConfigMap requests (create, get, update, list) over kept-alive
//! HTTP/1.1 connections, behaving as a well-written Kubernetes client does: a connection the
//! server answered with `Connection: close` (or closed while idle) is replaced before the next
//! request; a 429 is retried after its `Retry-After`. Everything else the server does wrong is
//! counted: connection errors on requests already sent, 5xx answers, unexpected statuses.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// What the clients saw.
#[derive(Debug, Default, Clone)]
pub struct LoadReport {
    /// Requests answered with the expected 2xx.
    pub ok: u64,
    /// 429 answers (each retried after its Retry-After).
    pub throttled: u64,
    /// 429 answers without a Retry-After header.
    pub throttled_without_retry_after: u64,
    /// Connections replaced because the server asked (`Connection: close`) or closed them idle.
    pub reconnects: u64,
    /// Requests sent whose answer never came (reset, refused mid-request).
    pub connection_errors: Vec<String>,
    /// 5xx answers.
    pub server_errors: Vec<String>,
    /// Other unexpected answers.
    pub unexpected: Vec<String>,
    /// How long the load ran.
    pub elapsed: Duration,
}

impl LoadReport {
    /// Requests per second that got their answer.
    pub fn rate(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(0.001)
    }
}

/// A running load; [`Load::stop`] ends it and returns the report.
pub struct Load {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<LoadReport>,
}

/// Where the load goes.
#[derive(Clone)]
struct Target {
    addr: String,
    tls: Arc<rustls::ClientConfig>,
}

impl Load {
    /// Starts `workers` clients, each sending about `rate_per_worker` requests per second to
    /// `addr` (host:port, TLS, admin certificate from `pki`) on the ConfigMaps of `namespace`.
    pub fn start(addr: &str, pki: &Path, namespace: &str, workers: usize, rate_per_worker: f64) -> Load {
        let target = Target { addr: addr.to_owned(), tls: Arc::new(tls_config(pki)) };
        let stop = Arc::new(AtomicBool::new(false));
        let report = Arc::new(Mutex::new(LoadReport::default()));
        let namespace = namespace.to_owned();
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
                let started = Instant::now();
                runtime.block_on(async {
                    let tasks: Vec<_> = (0..workers)
                        .map(|w| {
                            let (target, stop, report, namespace) = (target.clone(), stop.clone(), report.clone(), namespace.clone());
                            tokio::spawn(async move { worker(w, target, &namespace, rate_per_worker, stop, report).await })
                        })
                        .collect();
                    for t in tasks {
                        let _ = t.await;
                    }
                });
                let mut r = report.lock().expect("report").clone();
                r.elapsed = started.elapsed();
                r
            })
        };
        Load { stop, thread }
    }

    /// Stops the clients (each finishes its request in flight) and returns what they saw.
    pub fn stop(self) -> LoadReport {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("load thread")
    }
}

fn tls_config(pki: &Path) -> rustls::ClientConfig {
    tls_client_config(&pki.join("ca.crt"), &pki.join("admin.crt"), &pki.join("admin.key"))
}

/// A rustls client trusting `ca` and presenting `cert`/`key`, for tests that need the raw
/// connection (a body sent in pieces, a request left unfinished).
pub fn tls_client_config(ca: &Path, cert: &Path, key: &Path) -> rustls::ClientConfig {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let read = |path: &Path| std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut read(ca).as_slice()) {
        roots.add(c.expect("CA certificate")).expect("CA certificate");
    }
    let chain: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut read(cert).as_slice()).collect::<Result<_, _>>().expect("client certificate");
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut read(key).as_slice()).expect("client key").expect("client key");
    rustls::ClientConfig::builder().with_root_certificates(roots).with_client_auth_cert(chain, key).expect("client TLS config")
}

/// A TLS client trusting `ca`, presenting no certificate.
pub fn tls_client_config_without_cert(ca: &Path) -> rustls::ClientConfig {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(ca).unwrap_or_else(|e| panic!("reading {}: {e}", ca.display()));
    for c in rustls_pemfile::certs(&mut pem.as_slice()) {
        roots.add(c.expect("CA certificate")).expect("CA certificate");
    }
    rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth()
}

type Sender = http1::SendRequest<Full<Bytes>>;

async fn connect(target: &Target) -> Result<Sender, String> {
    let tcp = TcpStream::connect(&target.addr).await.map_err(|e| format!("connect: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let tls = TlsConnector::from(target.tls.clone()).connect(name, tcp).await.map_err(|e| format!("TLS: {e}"))?;
    let (sender, conn) = http1::handshake(TokioIo::new(tls)).await.map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// One answered request.
struct Answer {
    status: StatusCode,
    close: bool,
    retry_after: bool,
    body: Value,
}

/// Create, get, update, list, over and over, on this worker's own objects.
async fn worker(w: usize, target: Target, namespace: &str, rate: f64, stop: Arc<AtomicBool>, report: Arc<Mutex<LoadReport>>) {
    let interval = Duration::from_secs_f64(1.0 / rate.max(0.1));
    let collection = format!("/api/v1/namespaces/{namespace}/configmaps");
    let mut sender: Option<Sender> = None;
    let mut n = 0u64;
    let mut current: Value = Value::Null;
    let mut next_at = tokio::time::Instant::now();
    while !stop.load(Ordering::SeqCst) {
        tokio::time::sleep_until(next_at).await;
        next_at += interval;
        let name = format!("load-{w}-{}", n / 4);
        let (method, path, body, want) = match n % 4 {
            0 => (Method::POST, collection.clone(), Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"n": "0"}})), StatusCode::CREATED),
            1 => (Method::GET, format!("{collection}/{name}"), None, StatusCode::OK),
            2 => {
                let mut obj = current.clone();
                obj["data"]["n"] = json!("1");
                (Method::PUT, format!("{collection}/{name}"), Some(obj), StatusCode::OK)
            }
            _ => (Method::GET, format!("{collection}?limit=50"), None, StatusCode::OK),
        };
        loop {
            // A connection the server closed (after `Connection: close`, or idle) is replaced
            // before anything is sent on it, as every HTTP client does.
            if sender.as_ref().is_none_or(|s| s.is_closed()) {
                if sender.is_some() {
                    report.lock().expect("report").reconnects += 1;
                }
                sender = match connect(&target).await {
                    Ok(s) => Some(s),
                    Err(e) => {
                        report.lock().expect("report").connection_errors.push(format!("{method} {path}: {e}"));
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        None
                    }
                };
            }
            let Some(s) = sender.as_mut() else {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                continue;
            };
            if s.ready().await.is_err() {
                sender = None;
                continue;
            }
            match send(s, &method, &path, body.as_ref()).await {
                Err(e) => {
                    report.lock().expect("report").connection_errors.push(format!("{method} {path}: {e}"));
                    sender = None;
                    break;
                }
                Ok(answer) => {
                    if answer.close {
                        sender = None;
                        report.lock().expect("report").reconnects += 1;
                    }
                    if answer.status == StatusCode::TOO_MANY_REQUESTS {
                        {
                            let mut r = report.lock().expect("report");
                            r.throttled += 1;
                            if !answer.retry_after {
                                r.throttled_without_retry_after += 1;
                            }
                        }
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                    let mut r = report.lock().expect("report");
                    if answer.status == want {
                        r.ok += 1;
                        if n % 4 != 3 {
                            current = answer.body;
                        }
                    } else if answer.status.is_server_error() {
                        r.server_errors.push(format!("{method} {path}: {} {}", answer.status, answer.body));
                    } else {
                        r.unexpected.push(format!("{method} {path}: {} {}", answer.status, answer.body));
                    }
                    break;
                }
            }
        }
        n += 1;
    }
}

async fn send(sender: &mut Sender, method: &Method, path: &str, body: Option<&Value>) -> Result<Answer, String> {
    let bytes = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
    let request = Request::builder()
        .method(method.clone())
        .uri(path)
        .header(header::HOST, "localhost")
        .header(header::ACCEPT, "application/json")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(bytes))
        .map_err(|e| e.to_string())?;
    let response = sender.send_request(request).await.map_err(|e| format!("request: {e}"))?;
    let status = response.status();
    let close = response.headers().get(header::CONNECTION).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
    let retry_after = response.headers().contains_key(header::RETRY_AFTER);
    let body = response.into_body().collect().await.map_err(|e| format!("body: {e}"))?.to_bytes();
    let body = serde_json::from_slice(&body).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    Ok(Answer { status, close, retry_after, body })
}
