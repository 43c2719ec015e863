//! The authenticator seam and kube's union of authenticators.

use crate::user::{UserInfo, ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, ANONYMOUS};

/// The future of an asynchronous authentication or authorization step.
pub type Pending<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// How the client's certificate chain fared against one CA bundle. The server verifies each
/// connection's chain once, against the client CA and the front-proxy CA, so that requests on a
/// keep-alive connection pay nothing for it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ChainVerdict {
    /// The client sent no certificate (or this CA bundle is not configured).
    #[default]
    Absent,
    /// The chain is valid now and issued by this CA bundle.
    Verified,
    /// The chain does not verify against this CA bundle; the reason goes to the log only.
    Failed(String),
}

/// What an authenticator can look at. Borrowed, so that the request path pays no copies.
#[derive(Clone, Copy, Debug)]
pub struct AuthRequest<'a> {
    /// The client certificate chain (DER, leaf first) as presented; rustls checked that the
    /// client holds the leaf's key, the verdicts below say who issued it.
    pub peer_certificates: Option<&'a [Vec<u8>]>,
    /// The chain against `--client-ca-file` (x509 authentication).
    pub client_ca: &'a ChainVerdict,
    /// The chain against `--requestheader-client-ca-file` (front-proxy authentication).
    pub front_proxy_ca: &'a ChainVerdict,
    /// The request headers (bearer tokens, request-header auth).
    pub headers: &'a http::HeaderMap,
}

impl<'a> AuthRequest<'a> {
    /// A request without a client certificate, carrying only headers.
    pub fn headers_only(headers: &'a http::HeaderMap) -> Self {
        AuthRequest { peer_certificates: None, client_ca: &ChainVerdict::Absent, front_proxy_ca: &ChainVerdict::Absent, headers }
    }
}

/// The result of one authenticator, mirroring kube's `(response, ok, err)` triple.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthOutcome {
    /// The request carries valid credentials of this kind.
    Authenticated(UserInfo),
    /// The request carries no credentials of this kind: the next authenticator gets a chance.
    NotApplicable,
    /// Credentials of this kind are present but invalid; the message says why (it goes to the
    /// log, never to the client, which only sees 401).
    Rejected(String),
}

/// One way of authenticating requests. Built-in authenticators work on data already in memory
/// ([`Authenticator::authenticate`]); one that asks a remote service (webhook token
/// authentication, an OIDC issuer's keys) answers [`Authenticator::authenticate_async`], which
/// the request path awaits.
pub trait Authenticator: Send + Sync {
    /// Decides who the request is from.
    fn authenticate(&self, req: &AuthRequest<'_>) -> AuthOutcome;

    /// [`Authenticator::authenticate`] for async callers.
    fn authenticate_async<'a>(&'a self, req: &'a AuthRequest<'a>) -> crate::authn::Pending<'a, AuthOutcome> {
        Box::pin(async move { self.authenticate(req) })
    }
}

/// kube's union authenticator wrapped in its authenticated-group adder: the first authenticator
/// that authenticates wins; when none does, the errors of those that rejected are reported
/// together; an authenticated user gets `system:authenticated` added to its groups (unless it
/// is anonymous or already carries `system:authenticated`/`system:unauthenticated`).
pub struct UnionAuthenticator {
    authenticators: Vec<Box<dyn Authenticator>>,
}

impl UnionAuthenticator {
    /// Builds the union, tried in the given order.
    pub fn new(authenticators: Vec<Box<dyn Authenticator>>) -> Self {
        UnionAuthenticator { authenticators }
    }

    /// Appends an authenticator, tried after the existing ones.
    pub fn push(&mut self, authenticator: Box<dyn Authenticator>) {
        self.authenticators.push(authenticator);
    }
}

impl std::fmt::Debug for UnionAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnionAuthenticator").field("authenticators", &self.authenticators.len()).finish()
    }
}

impl Authenticator for UnionAuthenticator {
    fn authenticate(&self, req: &AuthRequest<'_>) -> AuthOutcome {
        let mut errors = Vec::new();
        for authenticator in &self.authenticators {
            match authenticator.authenticate(req) {
                AuthOutcome::Authenticated(user) => return AuthOutcome::Authenticated(add_authenticated_group(user)),
                AuthOutcome::NotApplicable => {}
                AuthOutcome::Rejected(message) => errors.push(message),
            }
        }
        union_errors(errors)
    }

    fn authenticate_async<'a>(&'a self, req: &'a AuthRequest<'a>) -> crate::authn::Pending<'a, AuthOutcome> {
        Box::pin(async move {
            let mut errors = Vec::new();
            for authenticator in &self.authenticators {
                match authenticator.authenticate_async(req).await {
                    AuthOutcome::Authenticated(user) => return AuthOutcome::Authenticated(add_authenticated_group(user)),
                    AuthOutcome::NotApplicable => {}
                    AuthOutcome::Rejected(message) => errors.push(message),
                }
            }
            union_errors(errors)
        })
    }
}

/// utilerrors.NewAggregate's formatting: a lone error as is, several in brackets.
fn union_errors(mut errors: Vec<String>) -> AuthOutcome {
    match errors.len() {
        0 => AuthOutcome::NotApplicable,
        1 => AuthOutcome::Rejected(errors.remove(0)),
        _ => AuthOutcome::Rejected(format!("[{}]", errors.join(", "))),
    }
}

/// kube's `union.NewFailOnError(authenticator, anonymous)` for `--anonymous-auth=true`: a
/// request without credentials runs as `system:anonymous`; a request with bad credentials is
/// still rejected (a wrong token is never silently anonymous).
pub struct AnonymousFallback {
    inner: Box<dyn Authenticator>,
}

impl AnonymousFallback {
    /// Wraps `inner`.
    pub fn new(inner: Box<dyn Authenticator>) -> Self {
        AnonymousFallback { inner }
    }
}

impl std::fmt::Debug for AnonymousFallback {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnonymousFallback")
    }
}

impl Authenticator for AnonymousFallback {
    fn authenticate(&self, req: &AuthRequest<'_>) -> AuthOutcome {
        match self.inner.authenticate(req) {
            AuthOutcome::NotApplicable => AuthOutcome::Authenticated(UserInfo::anonymous()),
            decided => decided,
        }
    }

    fn authenticate_async<'a>(&'a self, req: &'a AuthRequest<'a>) -> crate::authn::Pending<'a, AuthOutcome> {
        Box::pin(async move {
            match self.inner.authenticate_async(req).await {
                AuthOutcome::NotApplicable => AuthOutcome::Authenticated(UserInfo::anonymous()),
                decided => decided,
            }
        })
    }
}

/// kube's authenticated-group adder: `system:authenticated` joins the groups of every
/// authenticated user except the anonymous one and users already in either all-users group.
pub fn add_authenticated_group(mut user: UserInfo) -> UserInfo {
    if user.name == ANONYMOUS || user.groups.iter().any(|g| g == ALL_AUTHENTICATED || g == ALL_UNAUTHENTICATED) {
        return user;
    }
    user.groups.push(ALL_AUTHENTICATED.to_owned());
    user
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(AuthOutcome);
    impl Authenticator for Fixed {
        fn authenticate(&self, _req: &AuthRequest<'_>) -> AuthOutcome {
            self.0.clone()
        }
    }

    fn run(union: &UnionAuthenticator) -> AuthOutcome {
        let headers = http::HeaderMap::new();
        union.authenticate(&AuthRequest::headers_only(&headers))
    }

    #[test]
    fn adds_system_authenticated_once() {
        let union = UnionAuthenticator::new(vec![Box::new(Fixed(AuthOutcome::Authenticated(UserInfo::new("alice", ["dev"]))))]);
        let AuthOutcome::Authenticated(user) = run(&union) else { panic!("not authenticated") };
        assert_eq!(user.groups, vec!["dev".to_owned(), "system:authenticated".to_owned()]);

        let union = UnionAuthenticator::new(vec![Box::new(Fixed(AuthOutcome::Authenticated(UserInfo::new(
            "bob",
            ["system:authenticated", "dev"],
        ))))]);
        let AuthOutcome::Authenticated(user) = run(&union) else { panic!("not authenticated") };
        assert_eq!(user.groups, vec!["system:authenticated".to_owned(), "dev".to_owned()]);
    }

    #[test]
    fn anonymous_is_left_alone() {
        let union = UnionAuthenticator::new(vec![Box::new(Fixed(AuthOutcome::Authenticated(UserInfo::anonymous())))]);
        let AuthOutcome::Authenticated(user) = run(&union) else { panic!("not authenticated") };
        assert_eq!(user.groups, vec!["system:unauthenticated".to_owned()]);
    }

    #[test]
    fn first_success_wins_over_earlier_rejections() {
        let union = UnionAuthenticator::new(vec![
            Box::new(Fixed(AuthOutcome::Rejected("bad token".into()))),
            Box::new(Fixed(AuthOutcome::NotApplicable)),
            Box::new(Fixed(AuthOutcome::Authenticated(UserInfo::new("carol", Vec::<String>::new())))),
            Box::new(Fixed(AuthOutcome::Authenticated(UserInfo::new("dave", Vec::<String>::new())))),
        ]);
        let AuthOutcome::Authenticated(user) = run(&union) else { panic!("not authenticated") };
        assert_eq!(user.name, "carol");
    }

    #[test]
    fn anonymous_only_without_credentials() {
        let anon = AnonymousFallback::new(Box::new(UnionAuthenticator::new(vec![])));
        assert_eq!(run_one(&anon), AuthOutcome::Authenticated(UserInfo::anonymous()));
        let bad = AnonymousFallback::new(Box::new(Fixed(AuthOutcome::Rejected("invalid bearer token".into()))));
        assert_eq!(run_one(&bad), AuthOutcome::Rejected("invalid bearer token".into()));
    }

    fn run_one(a: &dyn Authenticator) -> AuthOutcome {
        let headers = http::HeaderMap::new();
        a.authenticate(&AuthRequest::headers_only(&headers))
    }

    #[test]
    fn rejections_are_aggregated_and_absence_is_not_applicable() {
        let union = UnionAuthenticator::new(vec![Box::new(Fixed(AuthOutcome::NotApplicable))]);
        assert_eq!(run(&union), AuthOutcome::NotApplicable);

        let mut union = UnionAuthenticator::new(vec![Box::new(Fixed(AuthOutcome::Rejected("a".into())))]);
        assert_eq!(run(&union), AuthOutcome::Rejected("a".into()));
        union.push(Box::new(Fixed(AuthOutcome::Rejected("b".into()))));
        assert_eq!(run(&union), AuthOutcome::Rejected("[a, b]".into()));
    }
}
