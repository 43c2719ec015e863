//! kube's `user.Info` and the well-known user and group names.

use std::collections::BTreeMap;

/// The user every unauthenticated request runs as when anonymous access is allowed.
pub const ANONYMOUS: &str = "system:anonymous";
/// The group every authenticated user belongs to, so that RBAC can grant to "anyone logged in".
pub const ALL_AUTHENTICATED: &str = "system:authenticated";
/// The group the anonymous user belongs to.
pub const ALL_UNAUTHENTICATED: &str = "system:unauthenticated";
/// The group bound to cluster-admin by default; the admin client certificate carries it.
pub const SYSTEM_MASTERS: &str = "system:masters";

/// The group of every service account.
pub const ALL_SERVICE_ACCOUNTS: &str = "system:serviceaccounts";

/// kube's `serviceaccount.MakeUsername`: `system:serviceaccount:<namespace>:<name>`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// kube's `serviceaccount.MakeGroupNames`: the groups every service account of `namespace` is in.
pub fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![ALL_SERVICE_ACCOUNTS.to_owned(), format!("system:serviceaccounts:{namespace}")]
}

/// kube's `user.Info`: who is making the request, as every later stage (impersonation, audit,
/// authorization, admission, `managedFields` managers) sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// The unique name of the user (`metadata.name` of RBAC subjects of kind User).
    pub name: String,
    /// A stable identifier across renames; empty when the authenticator has none (x509).
    pub uid: String,
    /// Groups, in the order the authenticator produced them.
    pub groups: Vec<String>,
    /// Extra attributes (scopes, service-account pod bindings), keyed like kube's `Extra`.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// Builds a user with a name and groups, which is all most authenticators know.
    pub fn new(name: impl Into<String>, groups: impl IntoIterator<Item = impl Into<String>>) -> Self {
        UserInfo { name: name.into(), groups: groups.into_iter().map(Into::into).collect(), ..UserInfo::default() }
    }

    /// The anonymous user, for requests without credentials when anonymous access is allowed.
    pub fn anonymous() -> Self {
        UserInfo::new(ANONYMOUS, [ALL_UNAUTHENTICATED])
    }

    /// Whether the user belongs to `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_is_unauthenticated() {
        let u = UserInfo::anonymous();
        assert_eq!(u.name, "system:anonymous");
        assert!(u.in_group(ALL_UNAUTHENTICATED));
        assert!(!u.in_group(ALL_AUTHENTICATED));
    }
}
