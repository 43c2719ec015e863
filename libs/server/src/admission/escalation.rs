//! RBAC escalation prevention as an admission plugin (kube runs it in the RBAC registries'
//! policy-based storage): a user may create or change a Role or ClusterRole only with rights
//! it holds itself (or the `escalate` verb), and bind a role only if it holds the role's rights
//! (or the `bind` verb on it); `system:masters` may do anything.

use std::sync::Arc;

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Operation, Outcome};
use kapi_apimachinery::{ApiError, GroupResource};
use kapi_auth::rbac::{PolicyRule, RbacAuthorizer};
use kapi_auth::{Attributes, Authorizer, UserInfo};
use serde_json::Value;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The plugin: always first in kapi's chain, not one of kube's named plugins (kube has no flag
/// to turn these checks off either).
pub struct RbacEscalation {
    /// The server's authorizer (for the `escalate` and `bind` verbs).
    pub authorizer: Arc<dyn Authorizer>,
    /// The RBAC rules, to compare the requester's rights with the role's.
    pub rbac: RbacAuthorizer,
}

#[async_trait]
impl AdmissionPlugin for RbacEscalation {
    fn name(&self) -> &'static str {
        "RBACEscalation"
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
    }

    async fn validate(&self, attrs: &kapi_admission::Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if attrs.resource.group != RBAC_GROUP || !attrs.subresource.is_empty() {
            return Ok(());
        }
        let resource = match attrs.resource.name.as_str() {
            "roles" => "roles",
            "clusterroles" => "clusterroles",
            "rolebindings" => "rolebindings",
            "clusterrolebindings" => "clusterrolebindings",
            _ => return Ok(()),
        };
        let Some(new) = &attrs.object else { return Ok(()) };
        let guard = EscalationGuard { authorizer: &self.authorizer, rbac: &self.rbac, user: &attrs.user, resource };
        guard.check(attrs.old_object.as_ref(), new)
    }
}

/// Everything an escalation check needs.
struct EscalationGuard<'a> {
    authorizer: &'a Arc<dyn Authorizer>,
    rbac: &'a RbacAuthorizer,
    user: &'a UserInfo,
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

impl EscalationGuard<'_> {
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
                self.rbac.confirm_no_escalation(self.user, namespace, &rules).map_err(|e| self.forbidden(name, &e))?;
                let aggregation = new.get("aggregationRule").filter(|a| !a.is_null());
                let aggregation_changed = old.is_none_or(|old| old.get("aggregationRule").filter(|a| !a.is_null()) != aggregation);
                if aggregation.is_some() && aggregation_changed && self.rbac.confirm_no_escalation(self.user, "", &PolicyRule::full_authority()).is_err() {
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
                self.rbac.confirm_no_escalation(self.user, namespace, &rules).map_err(|e| self.forbidden(name, &e))
            }
            _ => Ok(()),
        }
    }
}
