//! Validating admission the handlers attach to writes (kube's admission chain and policy-based
//! registries): RBAC escalation prevention. A user may create or change a Role or ClusterRole
//! only with rights it holds itself (or the `escalate` verb), and bind a role only if it holds
//! the role's rights (or the `bind` verb on it); `system:masters` may do anything.

use std::sync::Arc;

use kapi_apimachinery::{ApiError, GroupResource};
use kapi_auth::rbac::{PolicyRule, RbacAuthorizer};
use kapi_auth::{Attributes, Authorizer, UserInfo};
use kapi_registry::catalog::ResourceSpec;
use kapi_registry::rest::Admit;
use serde_json::Value;

use crate::state::ApiServer;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The admission of a write to `spec` by `user`, if the resource has any.
pub fn for_request(srv: &Arc<ApiServer>, spec: &'static ResourceSpec, user: &UserInfo) -> Option<Box<Admit>> {
    if (spec.group, spec.resource) == ("certificates.k8s.io", "certificatesigningrequests") {
        let user = user.clone();
        return Some(Box::new(move |old, new| {
            if old.is_none() {
                record_requester(&user, new);
            }
            Ok(())
        }));
    }
    if spec.group != RBAC_GROUP {
        return None;
    }
    let rbac = srv.rbac.clone()?;
    let guard = EscalationGuard { authorizer: srv.authorizer.clone(), rbac, user: user.clone(), resource: spec.resource };
    Some(Box::new(move |old, new| guard.check(old, new)))
}

/// kube's CSR PrepareForCreate: `spec.username`, `uid`, `groups` and `extra` are cleared, then
/// filled from the requester (impersonated or not), so approvers see who asked. Empty values
/// stay absent, as Go's `omitempty` writes them.
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

/// Everything an escalation check needs, owned so the check can run inside a write's retry loop.
struct EscalationGuard {
    authorizer: Arc<dyn Authorizer>,
    rbac: RbacAuthorizer,
    user: UserInfo,
    resource: &'static str,
}

fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// kube's `IsOnlyMutatingGCFields`: an update that changes only owner references and
/// finalizers needs no escalation check (garbage collection must always be able to run).
fn only_gc_fields_changed(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in ["ownerReferences", "finalizers", "managedFields", "resourceVersion"] {
                meta.remove(field);
            }
        }
        v
    };
    strip(old) == strip(new)
}

impl EscalationGuard {
    fn privileged(&self) -> bool {
        self.user.in_group(kapi_auth::user::SYSTEM_MASTERS)
    }

    fn allowed(&self, verb: &str, resource: &str, namespace: &str, name: &str) -> bool {
        let attrs = Attributes {
            user: self.user.clone(),
            verb: verb.into(),
            namespace: namespace.into(),
            api_group: RBAC_GROUP.into(),
            api_version: "*".into(),
            resource: resource.into(),
            name: name.into(),
            resource_request: true,
            ..Attributes::default()
        };
        self.authorizer.authorize(&attrs).is_allowed()
    }

    fn forbidden(&self, name: &str, err: &str) -> ApiError {
        ApiError::forbidden_for(&GroupResource::new(RBAC_GROUP, self.resource), name, err)
    }

    fn check(&self, old: Option<&Value>, new: &Value) -> Result<(), ApiError> {
        if old.is_some_and(|old| only_gc_fields_changed(old, new)) || self.privileged() {
            return Ok(());
        }
        let namespace = str_at(new, "/metadata/namespace");
        let name = str_at(new, "/metadata/name");
        match self.resource {
            "roles" | "clusterroles" => {
                // kube asks with the request's name, which a create does not have.
                let request_name = if old.is_some() { name } else { "" };
                if self.allowed("escalate", self.resource, namespace, request_name) {
                    return Ok(());
                }
                let rules = kapi_auth::rbac::rules_of(new).map_err(|e| ApiError::bad_request(e.to_string()))?;
                self.rbac.confirm_no_escalation(&self.user, namespace, &rules).map_err(|e| self.forbidden(name, &e))?;
                let aggregation = new.get("aggregationRule").filter(|a| !a.is_null());
                let aggregation_changed = old.is_none_or(|old| old.get("aggregationRule").filter(|a| !a.is_null()) != aggregation);
                if aggregation.is_some() && aggregation_changed && self.rbac.confirm_no_escalation(&self.user, "", &PolicyRule::full_authority()).is_err() {
                    return Err(self.forbidden(name, "must have cluster-admin privileges to use the aggregationRule"));
                }
                Ok(())
            }
            "rolebindings" | "clusterrolebindings" => {
                let kind = str_at(new, "/roleRef/kind");
                let role = str_at(new, "/roleRef/name");
                let role_resource = if kind == "Role" { "roles" } else { "clusterroles" };
                if self.allowed("bind", role_resource, namespace, role) {
                    return Ok(());
                }
                let rules = self
                    .rbac
                    .read()
                    .role_ref_rules(kind, role, namespace)
                    .map_err(|_| ApiError::not_found(&GroupResource::new(RBAC_GROUP, role_resource), role))?;
                self.rbac.confirm_no_escalation(&self.user, namespace, &rules).map_err(|e| self.forbidden(name, &e))
            }
            _ => Ok(()),
        }
    }
}
