//! One audit record (audit.k8s.io/v1 `Event`) as kube writes it: each stage writes a copy of
//! the event as it is then.

use std::collections::BTreeMap;

use kapi_auth::UserInfo;
use serde_json::Value;
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

/// The user as an event writes it, borrowed.
#[derive(serde::Serialize)]
struct UserOut<'a> {
    username: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    uid: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    groups: &'a [String],
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    extra: &'a BTreeMap<String, Vec<String>>,
}

impl<'a> From<&'a UserInfo> for UserOut<'a> {
    fn from(u: &'a UserInfo) -> Self {
        UserOut { username: &u.name, uid: &u.uid, groups: &u.groups, extra: &u.extra }
    }
}

/// The objectRef as an event writes it, borrowed.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ObjectRefOut<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    resource: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    namespace: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    api_group: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    api_version: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    subresource: &'a str,
}

/// The event as written, borrowed from [`Event`]: serialized straight to the log line.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct EventOut<'a> {
    kind: &'static str,
    api_version: &'static str,
    level: &'static str,
    #[serde(rename = "auditID")]
    audit_id: &'a str,
    stage: &'static str,
    #[serde(rename = "requestURI")]
    request_uri: &'a str,
    verb: &'a str,
    user: UserOut<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    impersonated_user: Option<UserOut<'a>>,
    #[serde(rename = "sourceIPs")]
    source_ips: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    user_agent: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    object_ref: Option<ObjectRefOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_status: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_object: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_object: Option<&'a Value>,
    request_received_timestamp: String,
    stage_timestamp: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    annotations: &'a BTreeMap<String, String>,
}

impl Event {
    /// The event as written at `stage`, stamped `now`: one JSON line, newline included, made
    /// without an intermediate JSON tree.
    pub fn to_line(&self, stage: Stage, now: OffsetDateTime) -> Vec<u8> {
        let out = EventOut {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level: self.level.as_str(),
            audit_id: &self.audit_id,
            stage: stage.as_str(),
            request_uri: &self.request_uri,
            verb: &self.verb,
            user: (&self.user).into(),
            impersonated_user: self.impersonated_user.as_ref().map(Into::into),
            source_ips: &self.source_ips,
            user_agent: self.user_agent.as_deref(),
            object_ref: self.object_ref.as_ref().map(|r| ObjectRefOut {
                resource: &r.resource,
                namespace: &r.namespace,
                name: &r.name,
                api_group: &r.api_group,
                api_version: &r.api_version,
                subresource: &r.subresource,
            }),
            response_status: self.response_status.as_ref(),
            // The request object is known once the handler decoded it: not at RequestReceived.
            request_object: self.request_object.as_ref().filter(|_| self.level >= Level::Request && stage != Stage::RequestReceived),
            response_object: self.response_object.as_ref().filter(|_| self.level >= Level::RequestResponse && stage == Stage::ResponseComplete),
            request_received_timestamp: micro_time(self.request_received),
            stage_timestamp: micro_time(now),
            annotations: &self.annotations,
        };
        let mut line = serde_json::to_vec(&out).unwrap_or_default();
        line.push(b'\n');
        line
    }
}
