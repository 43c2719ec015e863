//! The default RBAC policy kube-apiserver reconciles at start (its `bootstrappolicy` package),
//! kept as data: `bootstrap_policy.json` holds the objects as kube-apiserver creates them.

use serde::Deserialize;
use serde_json::Value;

/// The bootstrap objects, each a complete rbac/v1 manifest.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapPolicy {
    /// ClusterRoles (cluster-admin, admin, edit, view, the aggregate-to roles, system roles).
    #[serde(default)]
    pub cluster_roles: Vec<Value>,
    /// ClusterRoleBindings (cluster-admin to system:masters, discovery to everyone, ...).
    #[serde(default)]
    pub cluster_role_bindings: Vec<Value>,
    /// Namespaced Roles (kube-system, kube-public).
    #[serde(default)]
    pub roles: Vec<Value>,
    /// Namespaced RoleBindings.
    #[serde(default)]
    pub role_bindings: Vec<Value>,
}

const POLICY: &str = include_str!("bootstrap_policy.json");

/// The bootstrap policy. The document is compiled in and checked by a unit test, so decoding
/// it cannot fail in a released build.
pub fn bootstrap_policy() -> Result<BootstrapPolicy, serde_json::Error> {
    serde_json::from_str(POLICY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::{RbacAuthorizer, Visit};
    use crate::{Attributes, Authorizer, UserInfo};

    fn names(list: &[Value]) -> Vec<&str> {
        list.iter().filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str)).collect()
    }

    #[test]
    fn policy_decodes_and_holds_the_required_roles() {
        let policy = bootstrap_policy().expect("bootstrap_policy.json decodes");
        let roles = names(&policy.cluster_roles);
        for required in [
            "cluster-admin",
            "admin",
            "edit",
            "view",
            "system:aggregate-to-admin",
            "system:aggregate-to-edit",
            "system:aggregate-to-view",
            "system:basic-user",
            "system:discovery",
            "system:public-info-viewer",
        ] {
            assert!(roles.contains(&required), "{required} missing");
        }
        let bindings = names(&policy.cluster_role_bindings);
        for required in ["cluster-admin", "system:basic-user", "system:discovery", "system:public-info-viewer"] {
            assert!(bindings.contains(&required), "binding {required} missing");
        }
        // Every binding's role exists in the policy.
        for b in policy.cluster_role_bindings.iter().chain(&policy.role_bindings) {
            let kind = b.pointer("/roleRef/kind").and_then(Value::as_str).unwrap_or_default();
            let name = b.pointer("/roleRef/name").and_then(Value::as_str).unwrap_or_default();
            let pool = if kind == "Role" { &policy.roles } else { &policy.cluster_roles };
            assert!(names(pool).contains(&name), "{kind} {name} is bound but not defined");
        }
    }

    /// The policy, loaded into an index with aggregation applied, allows what kube's does.
    #[test]
    fn default_grants() {
        let policy = bootstrap_policy().unwrap();
        let authz = RbacAuthorizer::new();
        {
            let mut idx = authz.index().write().unwrap();
            for r in &policy.cluster_roles {
                idx.put_cluster_role(r).unwrap();
            }
            for b in &policy.cluster_role_bindings {
                idx.put_cluster_role_binding(b).unwrap();
            }
            let aggregated: Vec<(String, Vec<crate::rbac::PolicyRule>)> = idx
                .cluster_roles()
                .filter(|(_, c)| c.aggregation.is_some())
                .map(|(n, _)| (n.clone(), idx.aggregated_rules(n).unwrap()))
                .collect();
            for (name, rules) in aggregated {
                let mut obj = policy.cluster_roles.iter().find(|r| r["metadata"]["name"] == name.as_str()).unwrap().clone();
                obj["rules"] = serde_json::to_value(rules).unwrap();
                idx.put_cluster_role(&obj).unwrap();
            }
        }
        let anon = UserInfo::anonymous();
        let path = |user: &UserInfo, p: &str| Attributes { user: user.clone(), verb: "get".into(), path: p.into(), ..Attributes::default() };
        assert!(authz.authorize(&path(&anon, "/healthz")).is_allowed());
        assert!(authz.authorize(&path(&anon, "/version")).is_allowed());
        assert!(!authz.authorize(&path(&anon, "/api")).is_allowed());
        let alice = UserInfo::new("alice", ["system:authenticated"]);
        assert!(authz.authorize(&path(&alice, "/api")).is_allowed());
        assert!(authz.authorize(&path(&alice, "/apis/apps/v1")).is_allowed());
        let ssar = Attributes {
            user: alice.clone(),
            verb: "create".into(),
            api_group: "authorization.k8s.io".into(),
            resource: "selfsubjectaccessreviews".into(),
            resource_request: true,
            ..Attributes::default()
        };
        assert!(authz.authorize(&ssar).is_allowed());
        // "view" aggregates system:aggregate-to-view: it reads pods but not secrets.
        let view = authz.read().cluster_role("view").unwrap().rules.clone();
        let can = |verb: &str, group: &str, resource: &str| {
            view.iter().any(|r| crate::rbac::rule_allows(&Attributes { verb: verb.into(), api_group: group.into(), resource: resource.into(), resource_request: true, ..Attributes::default() }, r))
        };
        assert!(can("list", "", "pods"));
        assert!(can("watch", "apps", "deployments"));
        assert!(!can("get", "", "secrets"));
        assert!(!can("create", "", "pods"));
        let admin = authz.read().cluster_role("admin").unwrap().rules.clone();
        assert!(admin.iter().any(|r| r.resources.iter().any(|x| x == "rolebindings")), "admin manages role bindings");
        let mut visited = 0;
        authz.read().visit_rules_for(&alice, "", |_, _| {
            visited += 1;
            Visit::Continue(())
        });
        assert!(visited >= 3, "basic-user, discovery and public-info-viewer apply to every user");
    }
}
