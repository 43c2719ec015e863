//! Auditing (kube's `WithAudit`): after authentication, before impersonation, so that the event
//! names who called and whom they impersonated. The policy gives the request's level; the
//! event travels in the request's extensions ([`AuditHandle`]), where impersonation,
//! authorization, the body reader and admission add to it, and is written at each stage the
//! policy keeps: RequestReceived, ResponseStarted (long-running requests, once their headers
//! are out), ResponseComplete (for a watch, when its stream ends).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{HeaderValue, Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use kapi_audit::event::strip_managed_fields;
use kapi_audit::{Event, Level, LogBackend, ObjectRef, Policy, RequestAttributes, Stage};
use kapi_auth::UserInfo;
use serde_json::Value;
use tower::ServiceExt;

use super::{filter, ConnInfo};
use crate::request_info::RequestInfo;
use crate::response::{self, Body};
use crate::state::ApiServer;

/// The auditing configuration of a server.
pub struct Auditor {
    /// `--audit-policy-file`.
    pub policy: Policy,
    /// `--audit-log-path` and friends.
    pub log: Option<LogBackend>,
    /// `--audit-webhook-config-file` and friends.
    pub webhook: Option<crate::audit_webhook::AuditWebhook>,
}

/// The event of one audited request, shared by the steps that add to it.
#[derive(Clone)]
pub struct AuditHandle(Arc<Mutex<Audited>>);

struct Audited {
    event: Event,
    omit_managed_fields: bool,
}

impl AuditHandle {
    fn with<T>(&self, f: impl FnOnce(&mut Audited) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Adds an annotation (authorization's decision, admission's annotations).
    pub fn annotate(&self, key: impl Into<String>, value: impl Into<String>) {
        let (key, value) = (key.into(), value.into());
        self.with(|a| {
            a.event.annotations.insert(key, value);
        });
    }

    /// Records the impersonated user.
    pub fn impersonated(&self, user: &UserInfo) {
        self.with(|a| a.event.impersonated_user = Some(user.clone()));
    }

    /// Whether the level records the request object.
    pub fn wants_request(&self) -> bool {
        self.with(|a| a.event.level >= Level::Request)
    }

    /// Records the request body (JSON or YAML): kept at level Request and above, and at any
    /// level it names the object a create makes (kube's `LogRequestObject` completes the
    /// objectRef from the body).
    pub fn request_body(&self, content_type: Option<&str>, body: &[u8]) {
        let unnamed = self.with(|a| a.event.object_ref.as_ref().is_some_and(|r| r.name.is_empty()));
        if body.is_empty() || !(self.wants_request() || unnamed) {
            return;
        }
        if !self.wants_request() && is_json(content_type) {
            // Only the name is wanted: read metadata's name and namespace, skipping the rest
            // without building the object.
            let Ok(named) = serde_json::from_slice::<Named<'_>>(body) else { return };
            let meta = named.metadata.unwrap_or_default();
            self.with(|a| {
                if let Some(r) = a.event.object_ref.as_mut() {
                    if r.name.is_empty() {
                        r.name = meta.name.unwrap_or_default().into_owned();
                    }
                    if r.namespace.is_empty() {
                        r.namespace = meta.namespace.unwrap_or_default().into_owned();
                    }
                }
            });
            return;
        }
        let Ok(mut object) = crate::negotiation::decode_body(content_type, body) else { return };
        self.with(|a| {
            if let Some(r) = a.event.object_ref.as_mut() {
                let meta = |field: &str| object.pointer(&format!("/metadata/{field}")).and_then(Value::as_str).unwrap_or_default().to_owned();
                if r.name.is_empty() {
                    r.name = meta("name");
                }
                if r.namespace.is_empty() {
                    r.namespace = meta("namespace");
                }
            }
            if a.event.level >= Level::Request {
                if a.omit_managed_fields {
                    strip_managed_fields(&mut object);
                }
                a.event.request_object = Some(object);
            }
        });
    }
}

/// The parts of a JSON object naming it (unknown fields skipped, strings borrowed when they
/// hold no escapes).
#[derive(serde::Deserialize)]
struct Named<'a> {
    #[serde(default, borrow)]
    metadata: Option<NamedMeta<'a>>,
}

#[derive(serde::Deserialize, Default)]
struct NamedMeta<'a> {
    #[serde(default, borrow)]
    name: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    namespace: Option<std::borrow::Cow<'a, str>>,
}

/// Whether a body of this content type is JSON (the default without one).
fn is_json(content_type: Option<&str>) -> bool {
    content_type.is_none_or(|c| c.split(';').next().unwrap_or_default().trim().eq_ignore_ascii_case("application/json"))
}

/// A new Audit-ID: a random (version 4) UUID, as kube's, from the thread's CSPRNG (no system
/// call per request).
fn new_audit_id() -> String {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid().to_string()
}

fn source_ips(req: &Request<Incoming>) -> Vec<String> {
    let mut ips: Vec<String> = req
        .headers()
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect())
        .unwrap_or_default();
    if let Some(peer) = req.extensions().get::<Arc<ConnInfo>>().and_then(|c| c.peer) {
        let ip = peer.ip().to_string();
        if !ips.contains(&ip) {
            ips.push(ip);
        }
    }
    ips
}

fn long_running(info: &RequestInfo) -> bool {
    info.verb == "watch" || matches!(info.subresource.as_str(), "log" | "exec" | "attach" | "portforward" | "proxy")
}

async fn write(auditor: &Auditor, handle: &AuditHandle, stage: Stage) {
    let mut line = handle.with(|a| a.event.to_line(stage, time::OffsetDateTime::now_utc()));
    crate::metrics::audit_event();
    if let Some(webhook) = &auditor.webhook {
        let copy = if auditor.log.is_some() { line.clone() } else { std::mem::take(&mut line) };
        if let Err(e) = webhook.write_line(copy).await {
            tracing::error!("audit webhook: {e}");
        }
    }
    if let Some(log) = &auditor.log {
        if let Err(e) = log.write_line(line).await {
            crate::metrics::audit_error("log");
            tracing::error!("audit: {e}");
        }
    }
}

async fn run<S>(srv: Arc<ApiServer>, inner: S, mut req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    // kube's WithAuditInit: every answer carries an Audit-Id (the client's, or a new one),
    // audited or not, so that a request can be found in the logs.
    let pass = |inner: S, req: Request<Incoming>| async move {
        let id = req.headers().get("audit-id").filter(|v| !v.is_empty()).cloned();
        let mut resp = match inner.oneshot(req).await {
            Ok(resp) => resp,
            Err(never) => match never {},
        };
        if !resp.headers().contains_key("audit-id") {
            let id = id.or_else(|| http::HeaderValue::from_str(&new_audit_id()).ok());
            if let Some(id) = id {
                resp.headers_mut().insert("audit-id", id);
            }
        }
        resp
    };
    let Some(auditor) = srv.audit.clone() else { return pass(inner, req).await };
    let (Some(info), Some(user)) = (req.extensions().get::<RequestInfo>().cloned(), req.extensions().get::<UserInfo>().cloned()) else {
        return pass(inner, req).await;
    };
    let decision = auditor.policy.decide(&RequestAttributes {
        user: &user.name,
        groups: &user.groups,
        verb: &info.verb,
        resource_request: info.is_resource_request,
        api_group: &info.api_group,
        resource: &info.resource,
        subresource: &info.subresource,
        namespace: &info.namespace,
        name: &info.name,
        path: &info.path,
    });
    if decision.level == Level::None {
        return pass(inner, req).await;
    }
    let audit_id =
        req.headers().get("audit-id").and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty()).map(str::to_owned).unwrap_or_else(new_audit_id);
    let object_ref = info.is_resource_request.then(|| ObjectRef {
        resource: info.resource.clone(),
        namespace: info.namespace.clone(),
        name: info.name.clone(),
        api_group: info.api_group.clone(),
        api_version: info.api_version.clone(),
        subresource: info.subresource.clone(),
    });
    let event = Event {
        level: decision.level,
        audit_id: audit_id.clone(),
        request_uri: req.uri().path_and_query().map_or_else(|| req.uri().path().to_owned(), |p| p.as_str().to_owned()),
        verb: info.verb.clone(),
        user,
        impersonated_user: None,
        source_ips: source_ips(&req),
        user_agent: req.headers().get(http::header::USER_AGENT).and_then(|v| v.to_str().ok()).map(str::to_owned),
        object_ref,
        response_status: None,
        request_object: None,
        response_object: None,
        request_received: time::OffsetDateTime::now_utc(),
        annotations: Default::default(),
    };
    let handle = AuditHandle(Arc::new(Mutex::new(Audited { event, omit_managed_fields: decision.omit_managed_fields })));
    let keeps = |stage: Stage| !decision.omit_stages.contains(&stage);
    if keeps(Stage::RequestReceived) {
        write(&auditor, &handle, Stage::RequestReceived).await;
    }
    req.extensions_mut().insert(handle.clone());
    // The Audit-ID header is this event's (set below), not one `pass` would make up.
    let mut resp = match inner.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    };
    if let Ok(v) = HeaderValue::from_str(&audit_id) {
        resp.headers_mut().insert("audit-id", v);
    }
    let status = resp.extensions().get::<response::ErrorStatus>().map(|s| s.0.clone());
    let code = resp.status().as_u16();
    handle.with(|a| {
        a.event.response_status = Some(match status {
            Some(mut failure) => {
                if let Some(m) = failure.as_object_mut() {
                    for field in ["kind", "apiVersion"] {
                        m.remove(field);
                    }
                }
                failure
            }
            None => serde_json::json!({"metadata": {}, "code": code}),
        });
    });
    if long_running(&info) && resp.status().is_success() {
        if keeps(Stage::ResponseStarted) {
            write(&auditor, &handle, Stage::ResponseStarted).await;
        }
        if keeps(Stage::ResponseComplete) {
            // The stream ends when the body is dropped: the event is written then.
            let guard = CompleteOnDrop { auditor: Some(auditor.clone()), handle: handle.clone() };
            return response::hold_until_sent(resp, guard);
        }
        return resp;
    }
    if decision.level >= Level::RequestResponse && resp.extensions().get::<response::NegotiatedJson>().is_some() {
        let (parts, body) = resp.into_parts();
        let bytes: Bytes = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
        if let Ok(mut object) = serde_json::from_slice::<Value>(&bytes) {
            if decision.omit_managed_fields {
                strip_managed_fields(&mut object);
            }
            handle.with(|a| a.event.response_object = Some(object));
        }
        resp = Response::from_parts(parts, response::full(bytes));
    }
    if keeps(Stage::ResponseComplete) {
        write(&auditor, &handle, Stage::ResponseComplete).await;
    }
    resp
}

/// Writes a long-running request's ResponseComplete event when its body is dropped (sent in
/// full, or the client went away).
struct CompleteOnDrop {
    auditor: Option<Arc<Auditor>>,
    handle: AuditHandle,
}

impl Drop for CompleteOnDrop {
    fn drop(&mut self) {
        let (Some(auditor), handle) = (self.auditor.take(), self.handle.clone()) else { return };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { write(&auditor, &handle, Stage::ResponseComplete).await });
        }
    }
}

filter!(
    /// Audits with `srv.audit`, when configured.
    AuditLayer => WithAudit { srv: Arc<ApiServer> },
    Incoming,
    run
);
