//! One audit record (audit.k8s.io/v1 `Event`) as kube writes it: each stage writes a copy of
//! the event as it is then.

use std::collections::BTreeMap;

use kapi_auth::UserInfo;
use serde_json::{json, Map, Value};
use time::OffsetDateTime;

use crate::policy::{Level, Stage};

/// What the request was about, for resource requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectRef {
    /// Resource (plural).
    pub resource: String,
    /// Namespace ("" for cluster-scoped).
    pub namespace: String,
    /// Name ("" for collections).
    pub name: String,
    /// API group.
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Subresource.
    pub subresource: String,
}

/// An event being filled as its request runs.
#[derive(Debug, Clone)]
pub struct Event {
    /// The level the policy gave.
    pub level: Level,
    /// `Audit-ID` (the client's, or a new UUID).
    pub audit_id: String,
    /// The request's URI (path and query).
    pub request_uri: String,
    /// kube's verb.
    pub verb: String,
    /// The authenticated user.
    pub user: UserInfo,
    /// The user impersonated, if any.
    pub impersonated_user: Option<UserInfo>,
    /// The client addresses (X-Forwarded-For first, then the peer).
    pub source_ips: Vec<String>,
    /// `User-Agent`.
    pub user_agent: Option<String>,
    /// The object the request is about.
    pub object_ref: Option<ObjectRef>,
    /// The answer's status code, and for failures its Status.
    pub response_status: Option<Value>,
    /// The request object (level Request and above).
    pub request_object: Option<Value>,
    /// The response object (level RequestResponse).
    pub response_object: Option<Value>,
    /// When the request arrived.
    pub request_received: OffsetDateTime,
    /// Annotations from authorization and admission.
    pub annotations: BTreeMap<String, String>,
}

/// kube's MicroTime: RFC 3339 with microseconds, in UTC.
pub fn micro_time(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    )
}

fn user_json(user: &UserInfo) -> Value {
    let mut u = Map::new();
    u.insert("username".into(), Value::String(user.name.clone()));
    if !user.uid.is_empty() {
        u.insert("uid".into(), Value::String(user.uid.clone()));
    }
    if !user.groups.is_empty() {
        u.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        u.insert("extra".into(), json!(user.extra));
    }
    Value::Object(u)
}

/// Drops `metadata.managedFields` from an object, or from each item of a list.
pub fn strip_managed_fields(obj: &mut Value) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    if let Some(items) = obj.get_mut("items").and_then(Value::as_array_mut) {
        for item in items {
            strip_managed_fields(item);
        }
    }
}

impl Event {
    /// The event as written at `stage`, stamped `now`.
    pub fn to_json(&self, stage: Stage, now: OffsetDateTime) -> Value {
        let mut e = Map::new();
        e.insert("kind".into(), Value::String("Event".into()));
        e.insert("apiVersion".into(), Value::String("audit.k8s.io/v1".into()));
        e.insert("level".into(), Value::String(self.level.as_str().into()));
        e.insert("auditID".into(), Value::String(self.audit_id.clone()));
        e.insert("stage".into(), Value::String(stage.as_str().into()));
        e.insert("requestURI".into(), Value::String(self.request_uri.clone()));
        e.insert("verb".into(), Value::String(self.verb.clone()));
        e.insert("user".into(), user_json(&self.user));
        if let Some(impersonated) = &self.impersonated_user {
            e.insert("impersonatedUser".into(), user_json(impersonated));
        }
        e.insert("sourceIPs".into(), json!(self.source_ips));
        if let Some(agent) = &self.user_agent {
            e.insert("userAgent".into(), Value::String(agent.clone()));
        }
        if let Some(r) = &self.object_ref {
            let mut o = Map::new();
            let mut put = |k: &str, v: &str| {
                if !v.is_empty() {
                    o.insert(k.into(), Value::String(v.to_owned()));
                }
            };
            put("resource", &r.resource);
            put("namespace", &r.namespace);
            put("name", &r.name);
            put("apiGroup", &r.api_group);
            put("apiVersion", &r.api_version);
            put("subresource", &r.subresource);
            e.insert("objectRef".into(), Value::Object(o));
        }
        if let Some(status) = &self.response_status {
            e.insert("responseStatus".into(), status.clone());
        }
        // The request object is known once the handler decoded it: not at RequestReceived.
        if let Some(obj) = self.request_object.as_ref().filter(|_| self.level >= Level::Request && stage != Stage::RequestReceived) {
            e.insert("requestObject".into(), obj.clone());
        }
        if let Some(obj) = self.response_object.as_ref().filter(|_| self.level >= Level::RequestResponse && stage == Stage::ResponseComplete) {
            e.insert("responseObject".into(), obj.clone());
        }
        e.insert("requestReceivedTimestamp".into(), Value::String(micro_time(self.request_received)));
        e.insert("stageTimestamp".into(), Value::String(micro_time(now)));
        if !self.annotations.is_empty() {
            e.insert("annotations".into(), json!(self.annotations));
        }
        Value::Object(e)
    }
}
