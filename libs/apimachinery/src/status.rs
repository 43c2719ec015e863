//! `metav1.Status` errors with kube-apiserver's codes, reasons and message shapes.
//!
//! Every failure that reaches a client goes through [`ApiError`]; the constructors mirror
//! `k8s.io/apimachinery/pkg/api/errors` so that messages read exactly as clients expect
//! (kubectl prints them verbatim, and some clients match on the reason).

use serde_json::{json, Map, Value};

use crate::gvk::GroupResource;

/// The machine-readable `reason` of a failed `Status`; stable strings, usable as metric labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusReason {
    /// 400 with no better reason.
    BadRequest,
    /// 401.
    Unauthorized,
    /// 403.
    Forbidden,
    /// 404.
    NotFound,
    /// 405.
    MethodNotAllowed,
    /// 406.
    NotAcceptable,
    /// 409 on create of an existing object.
    AlreadyExists,
    /// 409 on a stale write.
    Conflict,
    /// 410: the requested resourceVersion or continue token is compacted.
    Expired,
    /// 410 without a more specific meaning.
    Gone,
    /// 413.
    RequestEntityTooLarge,
    /// 415.
    UnsupportedMediaType,
    /// 422.
    Invalid,
    /// 429.
    TooManyRequests,
    /// 500.
    InternalError,
    /// 503.
    ServiceUnavailable,
    /// 504.
    Timeout,
    /// kube's `StatusReasonUnknown` (the empty string, left out of the Status): errors that are
    /// not API errors, such as a kubelet that cannot be dialled.
    Unknown,
}

impl StatusReason {
    /// The reason a `Status` names on the wire; reasons kapi does not know read as
    /// [`StatusReason::Unknown`].
    pub fn from_wire(reason: &str) -> StatusReason {
        const ALL: [StatusReason; 17] = [
            StatusReason::BadRequest,
            StatusReason::Unauthorized,
            StatusReason::Forbidden,
            StatusReason::NotFound,
            StatusReason::MethodNotAllowed,
            StatusReason::NotAcceptable,
            StatusReason::AlreadyExists,
            StatusReason::Conflict,
            StatusReason::Expired,
            StatusReason::Gone,
            StatusReason::RequestEntityTooLarge,
            StatusReason::UnsupportedMediaType,
            StatusReason::Invalid,
            StatusReason::TooManyRequests,
            StatusReason::InternalError,
            StatusReason::ServiceUnavailable,
            StatusReason::Timeout,
        ];
        ALL.into_iter().find(|r| r.as_str() == reason).unwrap_or(StatusReason::Unknown)
    }

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BadRequest => "BadRequest",
            Self::Unauthorized => "Unauthorized",
            Self::Forbidden => "Forbidden",
            Self::NotFound => "NotFound",
            Self::MethodNotAllowed => "MethodNotAllowed",
            Self::NotAcceptable => "NotAcceptable",
            Self::AlreadyExists => "AlreadyExists",
            Self::Conflict => "Conflict",
            Self::Expired => "Expired",
            Self::Gone => "Gone",
            Self::RequestEntityTooLarge => "RequestEntityTooLarge",
            Self::UnsupportedMediaType => "UnsupportedMediaType",
            Self::Invalid => "Invalid",
            Self::TooManyRequests => "TooManyRequests",
            Self::InternalError => "InternalError",
            Self::ServiceUnavailable => "ServiceUnavailable",
            Self::Timeout => "Timeout",
            Self::Unknown => "",
        }
    }
}

/// One entry of `details.causes`: which field is wrong and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// e.g. `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, `FieldValueDuplicate`.
    pub reason: String,
    /// Human-readable message, already in kube-apiserver's `field: Invalid value: ...: why` shape.
    pub message: String,
    /// JSON path of the field, e.g. `metadata.name`.
    pub field: String,
}

impl Cause {
    /// `field: Invalid value: <value>: detail`.
    pub fn invalid(field: &str, value: &Value, detail: &str) -> Self {
        let shown = match value {
            Value::String(s) => format!("{s:?}"),
            Value::Null => "null".to_string(),
            other => other.to_string(),
        };
        Self {
            reason: "FieldValueInvalid".into(),
            message: format!("{field}: Invalid value: {shown}: {detail}"),
            field: field.into(),
        }
    }

    /// `field: Required value` (with an optional detail).
    pub fn required(field: &str, detail: &str) -> Self {
        let message = if detail.is_empty() {
            format!("{field}: Required value")
        } else {
            format!("{field}: Required value: {detail}")
        };
        Self { reason: "FieldValueRequired".into(), message, field: field.into() }
    }

    /// `field: Unsupported value: "x": supported values: "a", "b"`.
    pub fn not_supported(field: &str, value: &Value, supported: &[&str]) -> Self {
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        Self {
            reason: "FieldValueNotSupported".into(),
            message: format!("{field}: Unsupported value: {value}: supported values: {}", list.join(", ")),
            field: field.into(),
        }
    }

    /// `field: Forbidden: detail`.
    pub fn forbidden(field: &str, detail: &str) -> Self {
        Self {
            reason: "FieldValueForbidden".into(),
            message: format!("{field}: Forbidden: {detail}"),
            field: field.into(),
        }
    }

    /// `field: Duplicate value: <value>`.
    pub fn duplicate(field: &str, value: &Value) -> Self {
        Self {
            reason: "FieldValueDuplicate".into(),
            message: format!("{field}: Duplicate value: {value}"),
            field: field.into(),
        }
    }

    /// `field: Too long: may not be more than N bytes`.
    pub fn too_long(field: &str, max: usize) -> Self {
        Self {
            reason: "FieldValueTooLong".into(),
            message: format!("{field}: Too long: may not be more than {max} bytes"),
            field: field.into(),
        }
    }
}

/// `status.details` of a failure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Details {
    /// Object name, when one is involved.
    pub name: String,
    /// API group of the object.
    pub group: String,
    /// Resource (or Kind for `Invalid`), as kube-apiserver fills it.
    pub kind: String,
    /// Field-level causes.
    pub causes: Vec<Cause>,
    /// Seconds a client should wait before retrying.
    pub retry_after_seconds: Option<u32>,
}

/// A failed request, carried to the edge and rendered once as a `metav1.Status`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable reason.
    pub reason: StatusReason,
    /// Human-readable message, shaped as kube-apiserver shapes it.
    pub message: String,
    /// Optional details.
    pub details: Option<Box<Details>>,
}

fn details_for(gr: &GroupResource, name: &str) -> Option<Box<Details>> {
    Some(Box::new(Details { name: name.into(), group: gr.group.clone(), kind: gr.resource.clone(), ..Default::default() }))
}

impl ApiError {
    /// A bare error with code, reason and message.
    pub fn new(code: u16, reason: StatusReason, message: impl Into<String>) -> Self {
        Self { code, reason, message: message.into(), details: None }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, StatusReason::BadRequest, message)
    }

    /// 404: `pods "x" not found`.
    pub fn not_found(gr: &GroupResource, name: &str) -> Self {
        Self { details: details_for(gr, name), ..Self::new(404, StatusReason::NotFound, format!("{gr} \"{name}\" not found")) }
    }

    /// 404 for a path that names no resource: kube-apiserver answers with the plain message.
    pub fn path_not_found() -> Self {
        Self::new(404, StatusReason::NotFound, "the server could not find the requested resource")
    }

    /// 409: `pods "x" already exists`.
    pub fn already_exists(gr: &GroupResource, name: &str) -> Self {
        Self {
            details: details_for(gr, name),
            ..Self::new(409, StatusReason::AlreadyExists, format!("{gr} \"{name}\" already exists"))
        }
    }

    /// 409: `Operation cannot be fulfilled on pods "x": detail`.
    pub fn conflict(gr: &GroupResource, name: &str, detail: &str) -> Self {
        Self {
            details: details_for(gr, name),
            ..Self::new(409, StatusReason::Conflict, format!("Operation cannot be fulfilled on {gr} \"{name}\": {detail}"))
        }
    }

    /// The conflict a stale `resourceVersion` produces.
    pub fn stale_update(gr: &GroupResource, name: &str) -> Self {
        Self::conflict(gr, name, "the object has been modified; please apply your changes to the latest version and try again")
    }

    /// 422: `Pod "x" is invalid: field: Invalid value: ...` (one cause) or `[a, b]` (several).
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        // kube prints the group-qualified kind (`Deployment.apps`, `ListOptions.meta.k8s.io`).
        let qualified = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let message = match causes.len() {
            0 => format!("{qualified} \"{name}\" is invalid"),
            1 => format!("{qualified} \"{name}\" is invalid: {}", causes[0].message),
            _ => format!(
                "{qualified} \"{name}\" is invalid: [{}]",
                causes.iter().map(|c| c.message.as_str()).collect::<Vec<_>>().join(", ")
            ),
        };
        Self {
            code: 422,
            reason: StatusReason::Invalid,
            message,
            details: Some(Box::new(Details { name: name.into(), group: group.into(), kind: kind.into(), causes, retry_after_seconds: None })),
        }
    }

    /// 405 for a verb the resource does not support.
    pub fn method_not_supported(gr: &GroupResource, verb: &str) -> Self {
        Self {
            details: details_for(gr, ""),
            ..Self::new(405, StatusReason::MethodNotAllowed, format!("{verb} is not supported on resources of kind \"{gr}\""))
        }
    }

    /// 405 for a method the path does not serve at all (`PUT` on a collection, `POST` on an
    /// object): kube's router answers before any resource handler runs.
    pub fn method_not_allowed() -> Self {
        Self::new(405, StatusReason::MethodNotAllowed, "the server does not allow this method on the requested resource")
    }

    /// 410 Expired for a compacted resourceVersion (`too old resource version: 5 (10)`).
    pub fn resource_expired(message: impl Into<String>) -> Self {
        Self::new(410, StatusReason::Expired, message)
    }

    /// 410 Expired for a continue token whose snapshot is compacted.
    pub fn continue_expired() -> Self {
        Self::resource_expired(
            "The provided continue parameter is too old to display a consistent list result. You can start a new list \
             without the continue parameter, or use the continue token in this response to retrieve the remainder of \
             the results. Continuing with the provided token results in an inconsistent list - objects that were \
             created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
        )
    }

    /// 401.
    pub fn unauthorized() -> Self {
        Self::new(401, StatusReason::Unauthorized, "Unauthorized")
    }

    /// 403 with kube-apiserver's message shape.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, StatusReason::Forbidden, message)
    }

    /// 403 about a resource, as kube's `NewForbidden`: `pods "x" is forbidden: <err>`,
    /// `deployments.apps is forbidden: <err>` without a name, `forbidden: <err>` without a
    /// resource; the details name the resource.
    pub fn forbidden_for(gr: &GroupResource, name: &str, err: &str) -> Self {
        let message = if gr.resource.is_empty() && gr.group.is_empty() {
            format!("forbidden: {err}")
        } else if name.is_empty() {
            format!("{gr} is forbidden: {err}")
        } else {
            format!("{gr} \"{name}\" is forbidden: {err}")
        };
        Self { details: details_for(gr, name), ..Self::new(403, StatusReason::Forbidden, message) }
    }

    /// 406 for an Accept header the server cannot satisfy.
    pub fn not_acceptable(accepted: &[&str]) -> Self {
        Self::new(
            406,
            StatusReason::NotAcceptable,
            format!("only the following media types are accepted: {}", accepted.join(", ")),
        )
    }

    /// 413 for a body over the limit.
    pub fn too_large(limit: usize) -> Self {
        Self::new(413, StatusReason::RequestEntityTooLarge, format!("Request entity too large: limit is {limit}"))
    }

    /// 415 for a Content-Type the server cannot decode.
    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        Self::new(
            415,
            StatusReason::UnsupportedMediaType,
            format!("the body of the request was in an unknown format - accepted media types include: {}", accepted.join(", ")),
        )
    }

    /// 429 with a Retry-After hint.
    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: u32) -> Self {
        Self {
            details: Some(Box::new(Details { retry_after_seconds: Some(retry_after_seconds), ..Default::default() })),
            ..Self::new(429, StatusReason::TooManyRequests, message)
        }
    }

    /// 500: `Internal error occurred: ...`.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        Self::new(500, StatusReason::InternalError, format!("Internal error occurred: {detail}"))
    }

    /// 503.
    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, StatusReason::ServiceUnavailable, message)
    }

    /// 504: the request did not finish in time.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, StatusReason::Timeout, message)
    }

    /// kube's `NewGenericServerResponse` (no verb, not an unexpected response): how a proxied
    /// backend's failure answer (a kubelet's) reaches the client, e.g. `the server could not
    /// find the requested resource ( pods/log web)` for a 404.
    pub fn generic_server_response(code: u16, gr: &GroupResource, name: &str, server_message: &str) -> Self {
        use StatusReason as R;
        let (reason, message) = match code {
            409 => (R::Conflict, "the server reported a conflict".to_owned()),
            404 => (R::NotFound, "the server could not find the requested resource".to_owned()),
            400 => (R::BadRequest, "the server rejected our request for an unknown reason".to_owned()),
            401 => (R::Unauthorized, "the server has asked for the client to provide credentials".to_owned()),
            403 => (R::Forbidden, server_message.to_owned()),
            406 if server_message.is_empty() || server_message == "unknown" => {
                (R::NotAcceptable, "the server was unable to respond with a content type that the client supports".to_owned())
            }
            406 => (R::NotAcceptable, server_message.to_owned()),
            415 => (R::UnsupportedMediaType, server_message.to_owned()),
            405 => (R::MethodNotAllowed, "the server does not allow this method on the requested resource".to_owned()),
            422 => (R::Invalid, "the server rejected our request due to an error in our request".to_owned()),
            503 => (R::ServiceUnavailable, "the server is currently unable to handle the request".to_owned()),
            504 => (R::Timeout, "the server was unable to return a response in the time allotted, but may still be processing the request".to_owned()),
            429 => (R::TooManyRequests, "the server has received too many requests and has asked us to try again later".to_owned()),
            500.. => (R::InternalError, format!("an error on the server ({server_message:?}) has prevented the request from succeeding")),
            _ => (R::Unknown, format!("the server responded with the status code {code} but did not return more information")),
        };
        // The verb is empty, hence kube's double space.
        let message = match (gr.resource.is_empty() && gr.group.is_empty(), name.is_empty()) {
            (false, false) => format!("{message} ( {gr} {name})"),
            (false, true) => format!("{message} ( {gr})"),
            (true, _) => message,
        };
        Self { details: details_for(gr, name), ..Self::new(code, reason, message) }
    }

    /// The error a `metav1.Status` from elsewhere (an admission webhook's answer) describes:
    /// its code, reason, message and details as given.
    pub fn from_status(status: &Value) -> ApiError {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_owned();
        let code = status.get("code").and_then(Value::as_u64).and_then(|c| u16::try_from(c).ok()).unwrap_or(0);
        let reason = StatusReason::from_wire(status.get("reason").and_then(Value::as_str).unwrap_or_default());
        let details = status.get("details").filter(|d| d.is_object()).map(|d| {
            let causes = d
                .get("causes")
                .and_then(Value::as_array)
                .map(|causes| {
                    causes
                        .iter()
                        .map(|c| {
                            let field = text(c.get("field"));
                            let body = text(c.get("message"));
                            let message = if field.is_empty() { body } else { format!("{field}: {body}") };
                            Cause { reason: text(c.get("reason")), message, field }
                        })
                        .collect()
                })
                .unwrap_or_default();
            Box::new(Details {
                name: text(d.get("name")),
                group: text(d.get("group")),
                kind: text(d.get("kind")),
                causes,
                retry_after_seconds: d.get("retryAfterSeconds").and_then(Value::as_u64).and_then(|s| u32::try_from(s).ok()),
            })
        });
        ApiError { code, reason, message: text(status.get("message")), details }
    }

    /// The `metav1.Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        });
        // `reason` is omitempty in kube: an unknown reason is left out.
        if self.reason != StatusReason::Unknown {
            status["reason"] = self.reason.as_str().into();
        }
        if let Some(d) = &self.details {
            let mut details = Map::new();
            if !d.name.is_empty() {
                details.insert("name".into(), d.name.clone().into());
            }
            if !d.group.is_empty() {
                details.insert("group".into(), d.group.clone().into());
            }
            if !d.kind.is_empty() {
                details.insert("kind".into(), d.kind.clone().into());
            }
            if !d.causes.is_empty() {
                let causes: Vec<Value> = d
                    .causes
                    .iter()
                    .map(|c| {
                        // A cause's message on the wire is kube's `ErrorBody()`: without the field prefix.
                        let prefix = format!("{}: ", c.field);
                        let body = c.message.strip_prefix(prefix.as_str()).unwrap_or(&c.message);
                        let mut cause = json!({"reason": c.reason, "message": body});
                        // `field` is omitempty in kube (a cause about the whole object).
                        if !c.field.is_empty() {
                            cause["field"] = c.field.clone().into();
                        }
                        cause
                    })
                    .collect();
                details.insert("causes".into(), causes.into());
            }
            // omitempty in kube: a zero hint is left out.
            if let Some(s) = d.retry_after_seconds.filter(|s| *s > 0) {
                details.insert("retryAfterSeconds".into(), s.into());
            }
            status["details"] = Value::Object(details);
        }
        status["code"] = self.code.into();
        status
    }
}

/// A successful `Status` (`{"status":"Success"}`), as returned by delete of a collection and similar.
pub fn success_status(details: Option<(&GroupResource, &str, &str)>) -> Value {
    let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"});
    if let Some((gr, name, uid)) = details {
        let mut d = json!({"name": name, "kind": gr.resource, "uid": uid});
        if !gr.group.is_empty() {
            d["group"] = gr.group.clone().into();
        }
        s["details"] = d;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_matches_kube_shape() {
        let e = ApiError::not_found(&GroupResource::new("apps", "deployments"), "web");
        let s = e.to_status();
        assert_eq!(s["message"], "deployments.apps \"web\" not found");
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["code"], 404);
        assert_eq!(s["details"]["group"], "apps");
        assert_eq!(s["details"]["kind"], "deployments");
    }

    #[test]
    fn invalid_joins_several_causes() {
        let e = ApiError::invalid(
            "",
            "Pod",
            "Bad_Name",
            vec![Cause::invalid("metadata.name", &Value::from("Bad_Name"), "a lowercase RFC 1123 subdomain"), Cause::required("spec.containers", "")],
        );
        assert_eq!(
            e.message,
            "Pod \"Bad_Name\" is invalid: [metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain, spec.containers: Required value]"
        );
        let status = e.to_status();
        assert_eq!(status["details"]["causes"].as_array().map(Vec::len), Some(2));
        assert_eq!(status["details"]["causes"][1]["message"], "Required value");
        assert_eq!(status["details"]["causes"][1]["field"], "spec.containers");
        let e = ApiError::invalid("apps", "Deployment", "web", vec![]);
        assert_eq!(e.message, "Deployment.apps \"web\" is invalid");
    }

    #[test]
    fn generic_server_responses_read_as_kube_words_them() {
        let log = GroupResource::new("", "pods/log");
        let e = ApiError::generic_server_response(404, &log, "web", "pod not found");
        assert_eq!(e.message, "the server could not find the requested resource ( pods/log web)");
        assert_eq!((e.code, e.reason), (404, StatusReason::NotFound));
        assert_eq!(e.to_status()["details"]["kind"], "pods/log");
        let e = ApiError::generic_server_response(403, &log, "web", "no way");
        assert_eq!(e.message, "no way ( pods/log web)");
        let e = ApiError::generic_server_response(502, &log, "", "bad gateway");
        assert_eq!(e.message, "an error on the server (\"bad gateway\") has prevented the request from succeeding ( pods/log)");
        let e = ApiError::generic_server_response(302, &log, "web", "");
        assert_eq!(e.message, "the server responded with the status code 302 but did not return more information ( pods/log web)");
        assert!(e.to_status().get("reason").is_none(), "an unknown reason is left out: {}", e.to_status());
    }
}
