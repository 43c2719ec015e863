//! Conversion of custom resources between versions (kube's `pkg/apiserver/conversion`):
//! strategy `None` rewrites `apiVersion` only; strategy `Webhook` sends a `ConversionReview`
//! (apiextensions.k8s.io/v1) over HTTPS to the CRD's webhook, trusting its `caBundle`, and
//! checks the answer as kube does (uid, status, count, apiVersion and kind of every object,
//! metadata other than labels and annotations unchanged).
//!
//! A webhook given by `service` is reached through the Service's EndpointSlices (there is no
//! cluster DNS or service network here): the first ready endpoint of the slice port named like
//! the Service port, with TLS server name `<service>.<namespace>.svc` as kube's resolver uses.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use kapi_apimachinery::ApiError;
use kapi_registry::catalog;
use kapi_registry::rest::RestStore;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Map, Value};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::crd::str_at;

/// kube's timeout of a conversion call.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Where the webhook is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Endpoint {
    /// `clientConfig.url`: host, port, path.
    Url { host: String, port: u16, path: String },
    /// `clientConfig.service`.
    Service { namespace: String, name: String, port: u16, path: String },
}

/// One CRD's conversion webhook.
pub struct Webhook {
    endpoint: Endpoint,
    tls: Arc<rustls::ClientConfig>,
    rest: RestStore,
}

/// A Go `GroupVersionKind.String()`: `example.com/v1, Kind=App`.
fn gvk(api_version: &str, kind: &str) -> String {
    format!("{api_version}, Kind={kind}")
}

impl Webhook {
    /// The webhook of a CRD whose `spec.conversion.strategy` is `Webhook`; errors name what
    /// is wrong with its client config (validation normally refuses such CRDs).
    pub fn new(crd: &Value, rest: RestStore) -> Result<Webhook, String> {
        let config = crd.pointer("/spec/conversion/webhook/clientConfig").ok_or("no webhook clientConfig")?;
        let endpoint = match (config.get("url").and_then(Value::as_str), config.get("service")) {
            (Some(url), _) => {
                let rest = url.strip_prefix("https://").ok_or("the webhook URL must be https")?;
                let (authority, path) = rest.split_once('/').map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
                let (host, port) = match authority.rsplit_once(':') {
                    Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => (h.to_owned(), p.parse().map_err(|_| format!("bad port in {url}"))?),
                    _ => (authority.to_owned(), 443),
                };
                Endpoint::Url { host: host.trim_start_matches('[').trim_end_matches(']').to_owned(), port, path }
            }
            (None, Some(service)) => Endpoint::Service {
                namespace: str_at(service, "/namespace").to_owned(),
                name: str_at(service, "/name").to_owned(),
                port: service.get("port").and_then(Value::as_u64).and_then(|p| u16::try_from(p).ok()).unwrap_or(443),
                path: service.get("path").and_then(Value::as_str).unwrap_or("/").to_owned(),
            },
            (None, None) => return Err("the webhook clientConfig has neither url nor service".into()),
        };
        let mut roots = rustls::RootCertStore::empty();
        if let Some(bundle) = config.get("caBundle").and_then(Value::as_str).filter(|b| !b.is_empty()) {
            let pem = base64::engine::general_purpose::STANDARD.decode(bundle).map_err(|e| format!("caBundle: {e}"))?;
            let certs: Vec<CertificateDer<'static>> =
                rustls_pemfile::certs(&mut pem.as_slice()).collect::<Result<_, _>>().map_err(|e| format!("caBundle: {e}"))?;
            for cert in certs {
                roots.add(cert).map_err(|e| format!("caBundle: {e}"))?;
            }
        }
        let tls = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
        Ok(Webhook { endpoint, tls: Arc::new(tls), rest })
    }

    /// Converts `objects` (all of one version) to `desired` (`group/version`).
    pub async fn convert(&self, objects: Vec<Value>, desired: &str) -> Result<Vec<Value>, ApiError> {
        let Some(first) = objects.first() else { return Ok(objects) };
        let from = gvk(str_at(first, "/apiVersion"), str_at(first, "/kind"));
        let failed = |e: String| ApiError::internal(format!("conversion webhook for {from} failed: {e}"));
        let uid = uuid::Uuid::new_v4().to_string();
        let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects}});
        let answer = tokio::time::timeout(TIMEOUT, self.post(&review))
            .await
            .map_err(|_| failed("context deadline exceeded".into()))?
            .map_err(failed)?;
        if answer.get("kind").and_then(Value::as_str) != Some("ConversionReview") {
            return Err(failed(format!(
                "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {}",
                gvk(str_at(&answer, "/apiVersion"), str_at(&answer, "/kind"))
            )));
        }
        let response = answer.get("response").filter(|r| !r.is_null()).ok_or_else(|| failed("no response provided".into()))?;
        if str_at(response, "/uid") != uid {
            return Err(failed(format!("expected response.uid={uid:?}, got {:?}", str_at(response, "/uid"))));
        }
        let status = str_at(response, "/result/status");
        if status != "Success" {
            let message = str_at(response, "/result/message");
            return Err(failed(if message.is_empty() { format!("response.result.status was '{status}', not 'Success'") } else { message.to_owned() }));
        }
        let converted = response.get("convertedObjects").and_then(Value::as_array).cloned().unwrap_or_default();
        if converted.len() != objects.len() {
            return Err(ApiError::internal(format!("conversion webhook for {from} returned {} objects, expected {}", converted.len(), objects.len())));
        }
        converted.into_iter().zip(objects).enumerate().map(|(i, (out, original))| check_converted(&from, i, out, &original, desired)).collect()
    }

    async fn post(&self, review: &Value) -> Result<Value, String> {
        let (host, port, path, server_name) = match &self.endpoint {
            Endpoint::Url { host, port, path } => (host.clone(), *port, path.clone(), host.clone()),
            Endpoint::Service { namespace, name, port, path } => {
                let (addr, target_port) = self.resolve(namespace, name, *port)?;
                (addr, target_port, path.clone(), format!("{name}.{namespace}.svc"))
            }
        };
        // kube's webhook client adds the call's timeout to the URL.
        let path = format!("{path}{}timeout={}s", if path.contains('?') { '&' } else { '?' }, TIMEOUT.as_secs());
        let url = format!("https://{server_name}:{port}{path}");
        let context = |e: &dyn std::fmt::Display| format!("Post {url:?}: {e}");
        let tcp = TcpStream::connect((host.as_str(), port)).await.map_err(|e| context(&format!("dial tcp {host}:{port}: {}", go_dial_error(&e))))?;
        let name = ServerName::try_from(server_name.clone()).map_err(|e| context(&e))?;
        let tls = TlsConnector::from(self.tls.clone()).connect(name, tcp).await.map_err(|e| context(&format!("tls: {e}")))?;
        let (mut sender, conn) = http1::handshake(TokioIo::new(tls)).await.map_err(|e| context(&e))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let body = serde_json::to_vec(review).map_err(|e| context(&e))?;
        let request = http::Request::post(path.as_str())
            .header(http::header::HOST, format!("{server_name}:{port}"))
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| context(&e))?;
        let response = sender.send_request(request).await.map_err(|e| context(&e))?;
        let status = response.status();
        let bytes = response.into_body().collect().await.map_err(|e| context(&e))?.to_bytes();
        if !status.is_success() {
            return Err(format!("the server responded with the status code {} but did not return more information", status.as_u16()));
        }
        serde_json::from_slice(&bytes).map_err(|e| format!("unable to decode the webhook's answer: {e}"))
    }

    /// A Service's first ready endpoint for `port`, from its EndpointSlices in the watch cache.
    fn resolve(&self, namespace: &str, name: &str, port: u16) -> Result<(String, u16), String> {
        let services = catalog::find("", "v1", "services").ok_or("services are not served")?;
        let slices = catalog::find("discovery.k8s.io", "v1", "endpointslices").ok_or("endpointslices are not served")?;
        let cached = |spec: &catalog::ResourceSpec| self.rest.caches().cache(&spec.key_prefix());
        let service = cached(services)
            .and_then(|c| c.get(&format!("{}{namespace}/{name}", services.key_prefix())))
            .ok_or_else(|| format!("service \"{name}\" not found"))?;
        let service_port = service.object.pointer("/spec/ports").and_then(Value::as_array).and_then(|ports| {
            ports.iter().find(|p| p.get("port").and_then(Value::as_u64) == Some(u64::from(port)))
        });
        let port_name = service_port.map(|p| str_at(p, "/name").to_owned()).ok_or_else(|| format!("no service port {port} found for service {name:?}"))?;
        let cache = cached(slices).ok_or("no EndpointSlice cache")?;
        let prefix = format!("{}{namespace}/", slices.key_prefix());
        for slice in cache.list(&prefix).0 {
            let slice = &slice.object;
            if slice.pointer("/metadata/labels/kubernetes.io~1service-name").and_then(Value::as_str) != Some(name) {
                continue;
            }
            let target = slice.get("ports").and_then(Value::as_array).and_then(|ports| {
                ports.iter().find(|p| str_at(p, "/name") == port_name).and_then(|p| p.get("port")?.as_u64()).and_then(|p| u16::try_from(p).ok())
            });
            let Some(target) = target else { continue };
            let ready = slice.get("endpoints").and_then(Value::as_array).and_then(|eps| {
                eps.iter()
                    .find(|e| e.pointer("/conditions/ready").and_then(Value::as_bool) != Some(false))
                    .and_then(|e| e.pointer("/addresses/0").and_then(Value::as_str))
            });
            if let Some(address) = ready {
                return Ok((address.to_owned(), target));
            }
        }
        Err(format!("service \"{name}\" has no ready endpoints"))
    }
}

/// How Go's net package words a failed dial, which kube's messages carry.
fn go_dial_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".to_owned(),
        std::io::ErrorKind::TimedOut => "i/o timeout".to_owned(),
        _ => format!("connect: {e}"),
    }
}

/// kube's checks of one converted object: version and kind as asked, identity unchanged, and
/// only labels and annotations taken from the webhook's metadata.
fn check_converted(from: &str, i: usize, out: Value, original: &Value, desired: &str) -> Result<Value, ApiError> {
    let invalid = |detail: String| ApiError::internal(format!("conversion webhook for {from} returned invalid converted object at index {i}: {detail}"));
    let got = str_at(&out, "/apiVersion");
    if got != desired {
        return Err(invalid(format!("invalid groupVersion (expected {desired}, received {got})")));
    }
    let (want_kind, got_kind) = (str_at(original, "/kind"), str_at(&out, "/kind"));
    if got_kind != want_kind {
        return Err(invalid(format!("invalid kind (expected {want_kind}, received {got_kind})")));
    }
    let Value::Object(mut converted) = out else { return Err(invalid("not an object".into())) };
    let new_meta = converted.get("metadata").and_then(Value::as_object).cloned().unwrap_or_default();
    let mut meta: Map<String, Value> = original.get("metadata").and_then(Value::as_object).cloned().unwrap_or_default();
    for field in ["name", "namespace", "uid"] {
        if new_meta.get(field) != meta.get(field) && new_meta.get(field).is_some() {
            return Err(ApiError::internal(format!(
                "conversion webhook for {from} returned invalid metadata in object at index {i}: must have the same {field}: {} != {}",
                meta.get(field).and_then(Value::as_str).unwrap_or_default(),
                new_meta.get(field).and_then(Value::as_str).unwrap_or_default()
            )));
        }
    }
    for field in ["labels", "annotations"] {
        match new_meta.get(field) {
            Some(v) => {
                meta.insert(field.into(), v.clone());
            }
            None => {
                meta.remove(field);
            }
        }
    }
    converted.insert("metadata".into(), Value::Object(meta));
    Ok(Value::Object(converted))
}
