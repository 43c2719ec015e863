//! The authorization seam: kube's `authorizer.Attributes`, `Decision`, the trivial modes, the
//! privileged-group bypass and the union of modes.

use crate::user::UserInfo;

/// What is being asked, as kube's `authorizer.Attributes` (built from `RequestInfo` and the
/// authenticated user).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    /// Who asks.
    pub user: UserInfo,
    /// The Kubernetes verb (get, list, watch, create, ...) or, for non-resource requests, the
    /// lower-cased HTTP method.
    pub verb: String,
    /// Namespace of the object; empty for cluster-scoped or all-namespace requests.
    pub namespace: String,
    /// API group; empty for the core group.
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Resource (plural, lower case).
    pub resource: String,
    /// Subresource (status, scale, log, ...), empty when none.
    pub subresource: String,
    /// Object name, empty for list/create/collection requests.
    pub name: String,
    /// False for non-resource paths such as /healthz or /version.
    pub resource_request: bool,
    /// The URL path, which non-resource rules match against.
    pub path: String,
    /// The request's `fieldSelector` (kube's `GetFieldSelector`), empty when none: the Node
    /// authorizer lets a kubelet list the pods selected by `spec.nodeName=<itself>`.
    pub field_selector: String,
}

/// An authorizer's answer with its reason (kube's `(decision, reason, err)`): SubjectAccessReview
/// reports the reason, a 403 appends a denial's or a final no-opinion's reason to its message.
/// `NoOpinion` lets the next authorizer of a union decide; a union that ends without an opinion
/// forbids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The request may proceed.
    Allow(String),
    /// The request is forbidden.
    Deny(String),
    /// This authorizer does not decide.
    NoOpinion(String),
}

impl Decision {
    /// Whether the request may proceed.
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }

    /// The reason, whatever the decision.
    pub fn reason(&self) -> &str {
        match self {
            Decision::Allow(r) | Decision::Deny(r) | Decision::NoOpinion(r) => r,
        }
    }
}

/// One way of authorizing requests. Built-in authorizers decide from in-memory state (RBAC
/// caches, informers) with [`Authorizer::authorize`]; a remote one (the webhook authorizer)
/// also answers [`Authorizer::authorize_async`], which the request path awaits, while the
/// synchronous form serves callers inside synchronous evaluation (CEL's authorizer library).
pub trait Authorizer: Send + Sync {
    /// Decides whether `attrs.user` may do what `attrs` describes.
    fn authorize(&self, attrs: &Attributes) -> Decision;

    /// [`Authorizer::authorize`] for async callers: an authorizer that waits on the network
    /// overrides it.
    fn authorize_async<'a>(&'a self, attrs: &'a Attributes) -> crate::authn::Pending<'a, Decision> {
        Box::pin(async move { self.authorize(attrs) })
    }
}

/// Allows everything: kube's `--authorization-mode=AlwaysAllow` (authentication still
/// applies).
#[derive(Clone, Copy, Debug, Default)]
pub struct AlwaysAllow;

impl Authorizer for AlwaysAllow {
    fn authorize(&self, _attrs: &Attributes) -> Decision {
        Decision::Allow(String::new())
    }
}

/// Forbids everything, with kube's reason text; useful in tests of the 403 path.
#[derive(Clone, Copy, Debug, Default)]
pub struct AlwaysDeny;

impl Authorizer for AlwaysDeny {
    fn authorize(&self, _attrs: &Attributes) -> Decision {
        Decision::Deny("Everything is forbidden.".to_owned())
    }
}

/// Allows members of the privileged groups (`system:masters`) everything, ahead of every
/// configured mode, as kube-apiserver's authorizer chain always starts.
#[derive(Clone, Debug)]
pub struct PrivilegedGroups {
    groups: Vec<String>,
}

impl PrivilegedGroups {
    /// Members of any of `groups` are superusers.
    pub fn new(groups: impl IntoIterator<Item = impl Into<String>>) -> Self {
        PrivilegedGroups { groups: groups.into_iter().map(Into::into).collect() }
    }
}

impl Authorizer for PrivilegedGroups {
    fn authorize(&self, attrs: &Attributes) -> Decision {
        if self.groups.iter().any(|g| attrs.user.in_group(g)) {
            Decision::Allow(String::new())
        } else {
            Decision::NoOpinion(String::new())
        }
    }
}

/// kube's union authorizer: authorizers are asked in order and the first `Allow` or `Deny`
/// wins; when all have no opinion the union has none either, with their reasons joined.
pub struct UnionAuthorizer {
    authorizers: Vec<Box<dyn Authorizer>>,
}

impl UnionAuthorizer {
    /// Builds the union, asked in the given order.
    pub fn new(authorizers: Vec<Box<dyn Authorizer>>) -> Self {
        UnionAuthorizer { authorizers }
    }
}

impl std::fmt::Debug for UnionAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnionAuthorizer").field("authorizers", &self.authorizers.len()).finish()
    }
}

impl Authorizer for UnionAuthorizer {
    fn authorize(&self, attrs: &Attributes) -> Decision {
        let mut reasons = Vec::new();
        for authorizer in &self.authorizers {
            match authorizer.authorize(attrs) {
                Decision::NoOpinion(reason) => {
                    if !reason.is_empty() {
                        reasons.push(reason);
                    }
                }
                decided => return decided,
            }
        }
        Decision::NoOpinion(reasons.join("\n"))
    }

    fn authorize_async<'a>(&'a self, attrs: &'a Attributes) -> crate::authn::Pending<'a, Decision> {
        Box::pin(async move {
            let mut reasons = Vec::new();
            for authorizer in &self.authorizers {
                match authorizer.authorize_async(attrs).await {
                    Decision::NoOpinion(reason) => {
                        if !reason.is_empty() {
                            reasons.push(reason);
                        }
                    }
                    decided => return decided,
                }
            }
            Decision::NoOpinion(reasons.join("\n"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Decision);
    impl Authorizer for Fixed {
        fn authorize(&self, _attrs: &Attributes) -> Decision {
            self.0.clone()
        }
    }

    #[test]
    fn trivial_authorizers() {
        let attrs = Attributes { verb: "get".into(), resource: "pods".into(), resource_request: true, ..Default::default() };
        assert_eq!(AlwaysAllow.authorize(&attrs), Decision::Allow(String::new()));
        assert_eq!(AlwaysDeny.authorize(&attrs), Decision::Deny("Everything is forbidden.".into()));
    }

    #[test]
    fn union_takes_first_opinion() {
        let attrs = Attributes::default();
        let union = UnionAuthorizer::new(vec![
            Box::new(Fixed(Decision::NoOpinion(String::new()))),
            Box::new(Fixed(Decision::Deny("no".into()))),
            Box::new(Fixed(Decision::Allow(String::new()))),
        ]);
        assert_eq!(union.authorize(&attrs), Decision::Deny("no".into()));
        let union = UnionAuthorizer::new(vec![Box::new(Fixed(Decision::NoOpinion("RBAC: x".into())))]);
        assert_eq!(union.authorize(&attrs), Decision::NoOpinion("RBAC: x".into()));
        assert_eq!(UnionAuthorizer::new(vec![]).authorize(&attrs), Decision::NoOpinion(String::new()));
    }

    #[test]
    fn privileged_groups_allow_everything() {
        let masters = PrivilegedGroups::new(["system:masters"]);
        let mut attrs = Attributes { verb: "delete".into(), resource: "nodes".into(), resource_request: true, ..Default::default() };
        assert!(!masters.authorize(&attrs).is_allowed());
        attrs.user = UserInfo::new("root", ["system:masters"]);
        assert!(masters.authorize(&attrs).is_allowed());
    }
}
