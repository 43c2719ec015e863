//! Conversion of custom resources between versions (kube's `pkg/apiserver/conversion`):
//! strategy `None` rewrites `apiVersion` only; strategy `Webhook` sends a `ConversionReview`
//! (apiextensions.k8s.io/v1) to the CRD's webhook through kapi-webhook's client and checks the
//! answer as kube does (uid, status, count, apiVersion and kind of every object, metadata other
//! than labels and annotations unchanged).
//!
//! Every CRD of one store shares one client, so the connections to a webhook outlive the CRD
//! snapshot that is rebuilt whenever a CRD changes.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use kapi_apimachinery::ApiError;
use kapi_registry::rest::RestStore;
use kapi_storage::Store;
use kapi_watch::CacheSet;
use kapi_webhook::{Client, ClientConfig, EndpointSliceResolver, ServiceResolver};
use serde_json::{json, Map, Value};

use crate::crd::str_at;

/// kube's timeout of a conversion call.
const TIMEOUT: Duration = Duration::from_secs(30);

/// One CRD's conversion webhook.
pub struct Webhook {
    config: ClientConfig,
    client: Client,
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
        Ok(Webhook { config: ClientConfig::from_json(config)?, client: shared_client(&rest) })
    }

    /// Converts `objects` (all of one version) to `desired` (`group/version`).
    pub async fn convert(&self, objects: Vec<Value>, desired: &str) -> Result<Vec<Value>, ApiError> {
        let Some(first) = objects.first() else { return Ok(objects) };
        let from = gvk(str_at(first, "/apiVersion"), str_at(first, "/kind"));
        let failed = |e: String| ApiError::internal(format!("conversion webhook for {from} failed: {e}"));
        let uid = uuid::Uuid::new_v4().to_string();
        let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects}});
        let body = serde_json::to_vec(&review).map_err(|e| failed(e.to_string()))?;
        let answer = self.client.post_json(&self.config, Bytes::from(body), TIMEOUT).await.map_err(|e| failed(e.to_string()))?;
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
}

/// The client of every conversion webhook of `rest`'s store. It resolves Services through weak
/// references, so that it does not keep a dropped store alive (tests open many in one process).
fn shared_client(rest: &RestStore) -> Client {
    static CLIENTS: Mutex<Vec<(Weak<CacheSet>, Client)>> = Mutex::new(Vec::new());
    let mut clients = CLIENTS.lock().unwrap_or_else(|e| e.into_inner());
    clients.retain(|(caches, _)| caches.strong_count() > 0);
    if let Some((_, client)) = clients.iter().find(|(caches, _)| std::ptr::eq(caches.as_ptr(), Arc::as_ptr(rest.caches()))) {
        return client.clone();
    }
    let resolver = StoreResolver { store: Arc::downgrade(rest.store()), caches: Arc::downgrade(rest.caches()) };
    let client = Client::new(Arc::new(resolver));
    clients.push((Arc::downgrade(rest.caches()), client.clone()));
    client
}

/// [`EndpointSliceResolver`] over a store that may be gone.
struct StoreResolver {
    store: Weak<dyn Store>,
    caches: Weak<CacheSet>,
}

impl ServiceResolver for StoreResolver {
    fn resolve(&self, namespace: &str, name: &str, port: u16) -> Result<(String, u16), String> {
        let (Some(store), Some(caches)) = (self.store.upgrade(), self.caches.upgrade()) else {
            return Err("the store is closed".into());
        };
        EndpointSliceResolver::new(RestStore::new(store, caches)).resolve(namespace, name, port)
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
