//! AdmissionReview: the request kapi sends (v1, or v1beta1 for webhooks that accept only it)
//! and the checks kube makes of the answer (`VerifyAdmissionResponse`).

use base64::Engine;
use kapi_admission::attributes::Gvx;
use kapi_admission::Attributes;
use serde_json::{json, Map, Value};

/// The review versions kapi speaks, in the order it prefers them.
const VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// The first version of the webhook's list that kapi speaks; None when there is none (kube:
/// the webhook cannot be called).
pub fn version_for(accepted: &[String]) -> Option<&'static str> {
    accepted.iter().find_map(|v| VERSIONS.into_iter().find(|known| known == v))
}

fn gvk(g: &Gvx) -> Value {
    json!({"group": g.group, "version": g.version, "kind": g.name})
}

fn gvr(g: &Gvx) -> Value {
    json!({"group": g.group, "version": g.version, "resource": g.name})
}

/// The AdmissionReview for `attrs` in `version`, with request uid `uid`; `requested` is the
/// request as made (another version of the resource when a webhook matched an equivalent).
pub fn request(version: &str, uid: &str, attrs: &Attributes, requested: &Attributes) -> Value {
    json!({"kind": "AdmissionReview", "apiVersion": format!("admission.k8s.io/{version}"), "request": admission_request(uid, attrs, requested)})
}

/// kube's AdmissionRequest for `attrs` (what webhooks get, and what `request` is in CEL).
pub fn admission_request(uid: &str, attrs: &Attributes, requested: &Attributes) -> Value {
    let user = &attrs.user;
    let mut user_info = Map::new();
    user_info.insert("username".into(), Value::String(user.name.clone()));
    if !user.uid.is_empty() {
        user_info.insert("uid".into(), Value::String(user.uid.clone()));
    }
    if !user.groups.is_empty() {
        user_info.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        user_info.insert("extra".into(), json!(user.extra));
    }
    let mut request = Map::new();
    request.insert("uid".into(), Value::String(uid.to_owned()));
    request.insert("kind".into(), gvk(&attrs.kind));
    request.insert("resource".into(), gvr(&attrs.resource));
    if !attrs.subresource.is_empty() {
        request.insert("subResource".into(), Value::String(attrs.subresource.clone()));
    }
    request.insert("requestKind".into(), gvk(&requested.kind));
    request.insert("requestResource".into(), gvr(&requested.resource));
    if !requested.subresource.is_empty() {
        request.insert("requestSubResource".into(), Value::String(requested.subresource.clone()));
    }
    if !attrs.name.is_empty() {
        request.insert("name".into(), Value::String(attrs.name.clone()));
    }
    if !attrs.namespace.is_empty() {
        request.insert("namespace".into(), Value::String(attrs.namespace.clone()));
    }
    request.insert("operation".into(), Value::String(attrs.operation.as_str().into()));
    request.insert("userInfo".into(), Value::Object(user_info));
    request.insert("object".into(), attrs.object.clone().unwrap_or(Value::Null));
    request.insert("oldObject".into(), attrs.old_object.clone().unwrap_or(Value::Null));
    request.insert("dryRun".into(), Value::Bool(attrs.dry_run));
    request.insert("options".into(), attrs.options.clone());
    Value::Object(request)
}

/// What a webhook answered, once checked.
#[derive(Debug, Default)]
pub struct Answer {
    /// `response.allowed`.
    pub allowed: bool,
    /// `response.status` (a metav1.Status), for refusals.
    pub result: Option<Value>,
    /// The JSONPatch, decoded from base64.
    pub patch: Option<Vec<u8>>,
    /// `response.warnings`.
    pub warnings: Vec<String>,
    /// `response.auditAnnotations`.
    pub audit_annotations: Vec<(String, String)>,
}

/// kube's VerifyAdmissionResponse: the texts are kube's (they end up after `received invalid
/// webhook response: `).
pub fn verify(version: &str, uid: &str, mutating: bool, review: &Value) -> Result<Answer, String> {
    let response = review.get("response").filter(|r| !r.is_null()).ok_or("webhook response was absent")?;
    let patch_type = response.get("patchType").filter(|p| !p.is_null());
    let patch_b64 = response.get("patch").and_then(Value::as_str).filter(|p| !p.is_empty());
    if version == "v1" {
        let got_uid = response.get("uid").and_then(Value::as_str).unwrap_or_default();
        if got_uid != uid {
            return Err(format!("expected response.uid={uid:?}, got {got_uid:?}"));
        }
        let api_version = review.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = review.get("kind").and_then(Value::as_str).unwrap_or_default();
        if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            return Err(format!("expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {}", go_gvk(group, version, kind)));
        }
        if mutating {
            if patch_b64.is_some() && patch_type.is_none() {
                return Err("webhook returned response.patch but not response.patchType".into());
            }
            if patch_b64.is_none() && patch_type.is_some() {
                return Err("webhook returned response.patchType but not response.patch".into());
            }
            if let Some(t) = patch_type {
                let t = t.as_str().unwrap_or_default();
                if t.is_empty() {
                    return Err(format!("webhook returned invalid response.patchType of {t:?}"));
                }
                if t != "JSONPatch" {
                    return Err(format!("unsupported patch type {t:?}"));
                }
            }
        } else {
            if patch_b64.is_some() {
                return Err("validating webhook may not return response.patch".into());
            }
            if patch_type.is_some() {
                return Err("validating webhook may not return response.patchType".into());
            }
        }
    }
    let patch = match patch_b64.filter(|_| mutating) {
        Some(text) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|e| format!("illegal base64 data in response.patch: {e}"))?,
        ),
        None => None,
    };
    let strings = |k: &str| {
        response.get(k).and_then(Value::as_array).map(|a| a.iter().filter_map(|w| w.as_str().map(str::to_owned)).collect()).unwrap_or_default()
    };
    let audit_annotations = response
        .get("auditAnnotations")
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned()))).collect())
        .unwrap_or_default();
    Ok(Answer {
        allowed: response.get("allowed").and_then(Value::as_bool).unwrap_or(false),
        result: response.get("status").filter(|s| !s.is_null()).cloned(),
        patch,
        warnings: strings("warnings"),
        audit_annotations,
    })
}

/// Go's `GroupVersionKind.String()`.
fn go_gvk(group: &str, version: &str, kind: &str) -> String {
    if group.is_empty() {
        format!("{version}, Kind={kind}")
    } else {
        format!("{group}/{version}, Kind={kind}")
    }
}
