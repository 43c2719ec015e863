//! A real HTTPS webhook server for the tests: hyper over tokio-rustls on a loopback port, with
//! certificates from a throwaway CA, counting the TCP connections it accepts.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// A certificate authority and what it signed.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Ca {
    /// A CA of a name no other has.
    pub fn new() -> Ca {
        static SERIAL: AtomicUsize = AtomicUsize::new(0);
        Ca::named(&format!("webhook-test-ca-{}", SERIAL.fetch_add(1, Ordering::SeqCst)))
    }

    /// A CA called `name`: two of one name are each a candidate issuer of the other's
    /// certificates, whose signature then fails to verify.
    pub fn named(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        let key = KeyPair::generate().expect("ca key");
        let pem = params.self_signed(&key).expect("ca cert").pem();
        Ca { issuer: Issuer::new(params, key), pem }
    }

    /// `caBundle` as a clientConfig carries it.
    pub fn bundle(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.pem)
    }

    /// A serving certificate for `names` (DNS names or IP addresses): (chain PEM, key PEM).
    pub fn serving(&self, names: &[&str]) -> (String, String) {
        let params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).expect("params");
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign");
        (cert.pem(), key.serialize_pem())
    }
}

/// How the server treats its connections.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Behaviour {
    /// Keep-alive as any HTTP/1.1 server.
    Normal,
    /// Close every connection this long after accepting it, whatever it is doing (an idle
    /// timeout that does not say goodbye at the HTTP level).
    CloseAfter(Duration),
    /// Answer the first request of a connection; close the connection on reading the next one,
    /// without a byte of answer (the idle close crossing a request).
    OneAnswerPerConnection,
    /// Close every connection on reading its first request, without answering.
    NeverAnswer,
}

/// What the server saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path_and_query: String,
    pub host: String,
    pub content_type: String,
    pub body: Value,
}

pub struct Server {
    pub addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    /// Serves on `bind` (port 0 picks one) with `cert` until dropped.
    pub async fn start(bind: &str, cert: (String, String), behaviour: Behaviour) -> Server {
        let certs = rustls_pemfile::certs(&mut cert.0.as_bytes()).collect::<Result<Vec<_>, _>>().expect("certs");
        let key = rustls_pemfile::private_key(&mut cert.1.as_bytes()).expect("key pem").expect("a key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("server config");
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind(bind).await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let accepted = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (count, record) = (accepted.clone(), seen.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                count.fetch_add(1, Ordering::SeqCst);
                let (acceptor, record) = (acceptor.clone(), record.clone());
                tokio::spawn(async move {
                    let serve = async {
                        let Ok(tls) = acceptor.accept(tcp).await else { return };
                        let requests = Arc::new(AtomicUsize::new(0));
                        let service = hyper::service::service_fn(move |request| {
                            let nth = requests.fetch_add(1, Ordering::SeqCst);
                            let record = record.clone();
                            async move {
                                let refuse = match behaviour {
                                    Behaviour::NeverAnswer => true,
                                    Behaviour::OneAnswerPerConnection => nth > 0,
                                    _ => false,
                                };
                                if refuse {
                                    return Err(std::io::Error::other("closing without an answer"));
                                }
                                Ok::<_, std::io::Error>(answer(request, &record).await)
                            }
                        });
                        let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
                    };
                    match behaviour {
                        Behaviour::CloseAfter(lifetime) => {
                            let _ = tokio::time::timeout(lifetime, serve).await;
                        }
                        _ => serve.await,
                    }
                });
            }
        });
        Server { addr, accepted, seen, task }
    }

    /// TCP connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Requests answered so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// `https://<addr><path>` (brackets around IPv6 addresses).
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }
}

/// The webhook: the path picks the answer.
async fn answer(request: Request<Incoming>, record: &Mutex<Vec<Seen>>) -> Response<Full<Bytes>> {
    let path_and_query = request.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
    let header = |name| request.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let (host, content_type) = (header(http::header::HOST), header(http::header::CONTENT_TYPE));
    let path = request.uri().path().to_owned();
    let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    record.lock().unwrap().push(Seen { path_and_query: path_and_query.clone(), host: host.clone(), content_type, body: body.clone() });
    let respond = |status: u16, content_type: &str, body: Bytes| {
        Response::builder().status(status).header(http::header::CONTENT_TYPE, content_type).body(Full::new(body)).unwrap()
    };
    let json = |v: Value| Bytes::from(v.to_string());
    match path.as_str() {
        "/sleep" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            respond(200, "application/json", json(json!({"kind": "Late"})))
        }
        "/status/500" => respond(500, "text/plain; charset=utf-8", Bytes::from_static(b"boom\n")),
        "/status/418" => respond(418, "text/plain", Bytes::from_static(b"short and stout")),
        "/status/403" => respond(
            403,
            "application/json",
            json(json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "denied by policy", "code": 403})),
        ),
        "/text" => respond(200, "text/plain", Bytes::from_static(b"hello")),
        "/empty" => respond(200, "application/json", Bytes::new()),
        _ => respond(200, "application/json", json(json!({"kind": "Echo", "path": path_and_query, "host": host, "got": body}))),
    }
}
