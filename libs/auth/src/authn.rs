//! The authenticator seam and kube's union of authenticators.

use crate::user::{UserInfo, ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, ANONYMOUS};

/// What an authenticator can look at. Borrowed, so that the request path pays no copies.
#[derive(Clone, Copy, Debug)]
pub struct AuthRequest<'a> {
    /// The client certificate chain (DER, leaf first) that rustls already verified against the
    /// client CA; `None` when the client sent no certificate.
    pub peer_certificates: Option<&'a [Vec<u8>]>,
    /// The request headers (bearer tokens, request-header auth).
    pub headers: &'a http::HeaderMap,
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

/// One way of authenticating requests. Synchronous because every built-in authenticator works
/// on data already in memory; remote ones (webhooks) cache and refresh out of band.
pub trait Authenticator: Send + Sync {
    /// Decides who the request is from.
    fn authenticate(&self, req: &AuthRequest<'_>) -> AuthOutcome;
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
        match errors.len() {
            0 => AuthOutcome::NotApplicable,
            // utilerrors.NewAggregate's formatting: a lone error as is, several in brackets.
            1 => AuthOutcome::Rejected(errors.remove(0)),
            _ => AuthOutcome::Rejected(format!("[{}]", errors.join(", "))),
        }
    }
}

fn add_authenticated_group(mut user: UserInfo) -> UserInfo {
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
        union.authenticate(&AuthRequest { peer_certificates: None, headers: &headers })
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
    fn rejections_are_aggregated_and_absence_is_not_applicable() {
        let union = UnionAuthenticator::new(vec![Box::new(Fixed(AuthOutcome::NotApplicable))]);
        assert_eq!(run(&union), AuthOutcome::NotApplicable);

        let mut union = UnionAuthenticator::new(vec![Box::new(Fixed(AuthOutcome::Rejected("a".into())))]);
        assert_eq!(run(&union), AuthOutcome::Rejected("a".into()));
        union.push(Box::new(Fixed(AuthOutcome::Rejected("b".into()))));
        assert_eq!(run(&union), AuthOutcome::Rejected("[a, b]".into()));
    }
}
