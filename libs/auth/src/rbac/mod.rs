//! Role-based access control as kube-apiserver's RBAC authorizer decides it: rules from Roles
//! and ClusterRoles, granted by RoleBindings and ClusterRoleBindings, read from an in-memory
//! [`RbacIndex`] that the server keeps current from its watch caches.

mod bootstrap;
mod index;
mod rules;
mod types;

use std::sync::{Arc, RwLock, RwLockReadGuard};

pub use bootstrap::{bootstrap_policy, BootstrapPolicy};
pub use index::{applies_to, ClusterRoleEntry, IndexedKind, RbacIndex, Visit};
pub use rules::{breakdown, compact, compact_string, covers, rule_allows};
pub use types::{rules_of, Binding, DecodeError, PolicyRule, RoleRef, Subject};

use crate::authz::{Attributes, Authorizer, Decision};
use crate::user::UserInfo;

/// kube's source describers: `ClusterRoleBinding "b" of ClusterRole "r" to User "u"`.
fn describe(binding: &Binding, user: &UserInfo) -> String {
    let subject = binding.subjects.iter().find(|s| applies_to(s, user, &binding.namespace));
    let subject = match subject {
        Some(s) if s.kind == "ServiceAccount" => {
            let ns = s.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or(&binding.namespace);
            format!("{} {:?}", s.kind, format!("{}/{ns}", s.name))
        }
        Some(s) => format!("{} {:?}", s.kind, s.name),
        None => String::new(),
    };
    if binding.namespace.is_empty() {
        format!("ClusterRoleBinding {:?} of {} {:?} to {subject}", binding.name, binding.role_ref.kind, binding.role_ref.name)
    } else {
        format!(
            "RoleBinding {:?} of {} {:?} to {subject}",
            format!("{}/{}", binding.name, binding.namespace),
            binding.role_ref.kind,
            binding.role_ref.name
        )
    }
}

/// The RBAC authorizer over a shared index. Cloning shares the index.
#[derive(Clone, Debug, Default)]
pub struct RbacAuthorizer {
    index: Arc<RwLock<RbacIndex>>,
}

impl RbacAuthorizer {
    /// An authorizer over an empty index (nothing is allowed until objects arrive).
    pub fn new() -> Self {
        Self::default()
    }

    /// The index, for the task that keeps it current.
    pub fn index(&self) -> &Arc<RwLock<RbacIndex>> {
        &self.index
    }

    /// A read guard on the index; a poisoned lock still holds consistent data (writers only
    /// swap whole entries), so it is used as is.
    pub fn read(&self) -> RwLockReadGuard<'_, RbacIndex> {
        self.index.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Every rule that applies to `user` in `namespace`, with resolution errors (kube's
    /// `RulesFor`).
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        self.read().rules_for(user, namespace)
    }

    /// kube's `ConfirmNoEscalation`: `user` may grant `rules` in `namespace` only if it holds
    /// them itself. The error is kube's message listing the missing rights.
    pub fn confirm_no_escalation(&self, user: &UserInfo, namespace: &str, rules: &[PolicyRule]) -> Result<(), String> {
        let (owner, errors) = self.rules_for(user, namespace);
        let Err(missing) = covers(&owner, rules) else { return Ok(()) };
        let mut lines: Vec<String> = compact(missing).iter().map(compact_string).collect();
        lines.sort();
        lines.dedup();
        let groups: Vec<String> = user.groups.iter().map(|g| format!("{g:?}")).collect();
        let mut msg = format!(
            "user {:?} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
            user.name,
            groups.join(" "),
            lines.join("\n")
        );
        if !errors.is_empty() {
            msg.push_str(&format!("; resolution errors: [{}]", errors.join(" ")));
        }
        Err(msg)
    }
}

impl Authorizer for RbacAuthorizer {
    fn authorize(&self, attrs: &Attributes) -> Decision {
        let index = self.read();
        let mut allowed_by = None;
        let mut errors = Vec::new();
        index.visit_rules_for(&attrs.user, &attrs.namespace, |binding, rules| match rules {
            Ok(rules) if rules.iter().any(|r| rule_allows(attrs, r)) => {
                allowed_by = Some(describe(binding, &attrs.user));
                Visit::Break(())
            }
            Ok(_) => Visit::Continue(()),
            Err(e) => {
                errors.push(e.to_owned());
                Visit::Continue(())
            }
        });
        if let Some(source) = allowed_by {
            return Decision::Allow(format!("RBAC: allowed by {source}"));
        }
        Decision::NoOpinion(match errors.len() {
            0 => String::new(),
            1 => format!("RBAC: {}", errors[0]),
            _ => format!("RBAC: [{}]", errors.join(", ")),
        })
    }
}

#[cfg(test)]
mod tests;
