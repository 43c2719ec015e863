//! kube's CertificateSigningRequest PrepareForCreate, which reads the requester from the
//! request context: `spec.username`, `uid`, `groups` and `extra` are cleared, then filled from
//! the requester (impersonated or not), so approvers see who asked. Empty values stay absent,
//! as Go's `omitempty` writes them.

use kapi_auth::UserInfo;
use kapi_registry::catalog::ResourceSpec;
use kapi_registry::rest::Prepare;
use serde_json::Value;

/// The requester-dependent preparation of a create of `spec`, if the kind has one.
pub fn for_create(spec: &ResourceSpec, user: &UserInfo) -> Option<Box<Prepare>> {
    if (spec.group, spec.resource) != ("certificates.k8s.io", "certificatesigningrequests") {
        return None;
    }
    let user = user.clone();
    Some(Box::new(move |csr: &mut Value| record_requester(&user, csr)))
}

fn record_requester(user: &UserInfo, csr: &mut Value) {
    let Some(spec) = csr.get_mut("spec").and_then(Value::as_object_mut) else { return };
    for field in ["username", "uid", "groups", "extra"] {
        spec.remove(field);
    }
    if !user.name.is_empty() {
        spec.insert("username".into(), Value::String(user.name.clone()));
    }
    if !user.uid.is_empty() {
        spec.insert("uid".into(), Value::String(user.uid.clone()));
    }
    if !user.groups.is_empty() {
        spec.insert("groups".into(), serde_json::json!(user.groups));
    }
    if !user.extra.is_empty() {
        spec.insert("extra".into(), serde_json::json!(user.extra));
    }
}
