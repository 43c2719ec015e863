//! Bearer tokens, in kube's shapes: a [`TokenAuthenticator`] turns a token into a user for a set
//! of audiences (the seam for the token file, service-account tokens and, later, OIDC and
//! webhooks), a [`TokenUnion`] tries several, and [`BearerTokenAuthenticator`] lifts a token
//! authenticator onto requests by reading `Authorization: Bearer <token>`.
//!
//! Audiences follow kube's `authenticator.Audiences`: the caller states which audiences it needs
//! the token to be valid for (the API audiences for ordinary requests, `spec.audiences` for a
//! TokenReview), and an accepted token reports the audiences it was accepted for, which a
//! TokenReview returns as `status.audiences`.

use std::sync::Arc;

use crate::authn::{AuthOutcome, AuthRequest, Authenticator};
use crate::user::UserInfo;

/// The result of one token authenticator, kube's `(response, ok, err)` for tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenOutcome {
    /// The token is valid; `audiences` are the requested audiences it is valid for (empty when
    /// no audiences were requested and the authenticator is audience-agnostic).
    Authenticated {
        /// Who the token belongs to.
        user: UserInfo,
        /// The audiences the token was accepted for.
        audiences: Vec<String>,
    },
    /// The token is not of this authenticator's kind (or unknown to it): the next one gets a
    /// chance.
    NotApplicable,
    /// The token is of this kind but invalid; the reason goes to the log only.
    Rejected(String),
}

/// Authenticates bearer tokens. Synchronous for the same reason as [`Authenticator`]: the
/// built-in token authenticators work on data in memory.
pub trait TokenAuthenticator: Send + Sync {
    /// Decides who `token` belongs to. `audiences` are the audiences the caller needs the token
    /// to be valid for; empty means the caller states none (kube's "no audiences in the
    /// context"), and each authenticator then applies its own default.
    fn authenticate_token(&self, token: &str, audiences: &[String]) -> TokenOutcome;

    /// [`TokenAuthenticator::authenticate_token`] for async callers: one that asks a remote
    /// service (a TokenReview webhook) overrides it.
    fn authenticate_token_async<'a>(&'a self, token: &'a str, audiences: &'a [String]) -> crate::authn::Pending<'a, TokenOutcome> {
        Box::pin(async move { self.authenticate_token(token, audiences) })
    }
}

impl<T: TokenAuthenticator + ?Sized> TokenAuthenticator for Arc<T> {
    fn authenticate_token(&self, token: &str, audiences: &[String]) -> TokenOutcome {
        (**self).authenticate_token(token, audiences)
    }

    fn authenticate_token_async<'a>(&'a self, token: &'a str, audiences: &'a [String]) -> crate::authn::Pending<'a, TokenOutcome> {
        (**self).authenticate_token_async(token, audiences)
    }
}

impl<T: TokenAuthenticator + ?Sized> TokenAuthenticator for Box<T> {
    fn authenticate_token(&self, token: &str, audiences: &[String]) -> TokenOutcome {
        (**self).authenticate_token(token, audiences)
    }

    fn authenticate_token_async<'a>(&'a self, token: &'a str, audiences: &'a [String]) -> crate::authn::Pending<'a, TokenOutcome> {
        (**self).authenticate_token_async(token, audiences)
    }
}

/// kube's `Audiences.Intersect`: the members of `targets` (in their order) that `have` contains.
pub fn intersect_audiences(have: &[String], targets: &[String]) -> Vec<String> {
    targets.iter().filter(|t| have.contains(t)).cloned().collect()
}

/// Formats a list the way Go's `%q` prints a `[]string`: `["a" "b"]`, so that log lines read like
/// kube's.
pub(crate) fn go_quoted_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

/// Formats a list the way Go's `%v` prints a `[]string`: `[a b]`.
pub(crate) fn go_plain_list(items: &[String]) -> String {
    format!("[{}]", items.join(" "))
}

/// `utilerrors.NewAggregate` formatting: nothing, one error as is, several in brackets.
pub(crate) fn aggregate(errors: Vec<String>) -> Option<String> {
    match errors.len() {
        0 => None,
        1 => errors.into_iter().next(),
        _ => Some(format!("[{}]", errors.join(", "))),
    }
}

/// kube's token union: the authenticators are tried in order, the first success wins, and when
/// none succeeds the rejections are reported together (one as is, several as `[a, b]`); when
/// nobody rejected, the token is simply not applicable.
pub struct TokenUnion {
    authenticators: Vec<Box<dyn TokenAuthenticator>>,
}

impl TokenUnion {
    /// Builds the union, tried in the given order.
    pub fn new(authenticators: Vec<Box<dyn TokenAuthenticator>>) -> Self {
        TokenUnion { authenticators }
    }

    /// Appends an authenticator, tried after the existing ones.
    pub fn push(&mut self, authenticator: Box<dyn TokenAuthenticator>) {
        self.authenticators.push(authenticator);
    }

    /// Whether no authenticator is configured (the server then installs no bearer
    /// authenticator at all, as kube does).
    pub fn is_empty(&self) -> bool {
        self.authenticators.is_empty()
    }
}

impl std::fmt::Debug for TokenUnion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenUnion").field("authenticators", &self.authenticators.len()).finish()
    }
}

impl TokenAuthenticator for TokenUnion {
    fn authenticate_token(&self, token: &str, audiences: &[String]) -> TokenOutcome {
        let mut errors = Vec::new();
        for authenticator in &self.authenticators {
            match authenticator.authenticate_token(token, audiences) {
                ok @ TokenOutcome::Authenticated { .. } => return ok,
                TokenOutcome::NotApplicable => {}
                TokenOutcome::Rejected(message) => errors.push(message),
            }
        }
        aggregate(errors).map_or(TokenOutcome::NotApplicable, TokenOutcome::Rejected)
    }

    fn authenticate_token_async<'a>(&'a self, token: &'a str, audiences: &'a [String]) -> crate::authn::Pending<'a, TokenOutcome> {
        Box::pin(async move {
            let mut errors = Vec::new();
            for authenticator in &self.authenticators {
                match authenticator.authenticate_token_async(token, audiences).await {
                    ok @ TokenOutcome::Authenticated { .. } => return ok,
                    TokenOutcome::NotApplicable => {}
                    TokenOutcome::Rejected(message) => errors.push(message),
                }
            }
            aggregate(errors).map_or(TokenOutcome::NotApplicable, TokenOutcome::Rejected)
        })
    }
}

/// kube's `WrapAudienceAgnosticToken`: restricts an authenticator that knows nothing about
/// audiences (the token file) to the API audiences. When audiences are requested, the token is
/// only considered if some of them are API audiences, and it is reported as valid for exactly
/// those; when none are requested, the inner authenticator decides alone.
pub struct AudienceAgnostic<T> {
    implicit: Vec<String>,
    inner: T,
}

impl<T> AudienceAgnostic<T> {
    /// Wraps `inner`, which is valid for `implicit_audiences` (the API audiences).
    pub fn new(implicit_audiences: Vec<String>, inner: T) -> Self {
        AudienceAgnostic { implicit: implicit_audiences, inner }
    }

    /// The wrapped authenticator.
    pub fn inner(&self) -> &T {
        &self.inner
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for AudienceAgnostic<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AudienceAgnostic").field("implicit", &self.implicit).field("inner", &self.inner).finish()
    }
}

impl<T: TokenAuthenticator + Sync> TokenAuthenticator for AudienceAgnostic<T> {
    fn authenticate_token(&self, token: &str, audiences: &[String]) -> TokenOutcome {
        if audiences.is_empty() {
            return self.inner.authenticate_token(token, audiences);
        }
        let accepted = intersect_audiences(&self.implicit, audiences);
        if accepted.is_empty() {
            return TokenOutcome::NotApplicable;
        }
        match self.inner.authenticate_token(token, &[]) {
            TokenOutcome::Authenticated { audiences: inner, .. } if !inner.is_empty() => {
                TokenOutcome::Rejected(format!(
                    "audience agnostic authenticator wrapped an authenticator that returned audiences: {}",
                    go_quoted_list(&inner)
                ))
            }
            TokenOutcome::Authenticated { user, .. } => TokenOutcome::Authenticated { user, audiences: accepted },
            other => other,
        }
    }

    fn authenticate_token_async<'a>(&'a self, token: &'a str, audiences: &'a [String]) -> crate::authn::Pending<'a, TokenOutcome> {
        Box::pin(async move {
            if audiences.is_empty() {
                return self.inner.authenticate_token_async(token, audiences).await;
            }
            let accepted = intersect_audiences(&self.implicit, audiences);
            if accepted.is_empty() {
                return TokenOutcome::NotApplicable;
            }
            match self.inner.authenticate_token_async(token, &[]).await {
                TokenOutcome::Authenticated { audiences: inner, .. } if !inner.is_empty() => TokenOutcome::Rejected(format!(
                    "audience agnostic authenticator wrapped an authenticator that returned audiences: {}",
                    go_quoted_list(&inner)
                )),
                TokenOutcome::Authenticated { user, .. } => TokenOutcome::Authenticated { user, audiences: accepted },
                other => other,
            }
        })
    }
}

/// kube's `bearertoken` request authenticator plus the audience check of its authentication
/// filter: reads `Authorization: Bearer <token>` and asks the token authenticators about it,
/// for the server's API audiences.
///
/// As in kube, a missing header, another scheme or an empty token is not applicable, and a
/// token that no token authenticator accepts is an error ("invalid bearer token") unless one of
/// them said why. The caller should drop the `Authorization` header after a success, as kube
/// does, so that nothing later is tempted to reuse it.
pub struct BearerTokenAuthenticator {
    tokens: Arc<dyn TokenAuthenticator>,
    api_audiences: Vec<String>,
}

/// kube's error for a bearer token nobody accepted.
pub const INVALID_BEARER_TOKEN: &str = "invalid bearer token";

impl BearerTokenAuthenticator {
    /// Serves `tokens` (usually a [`TokenUnion`], shared with the TokenReview endpoint) for
    /// requests that must be valid for `api_audiences` (`--api-audiences`).
    pub fn new(tokens: Arc<dyn TokenAuthenticator>, api_audiences: Vec<String>) -> Self {
        BearerTokenAuthenticator { tokens, api_audiences }
    }

    /// The API audiences tokens are checked against.
    pub fn api_audiences(&self) -> &[String] {
        &self.api_audiences
    }
}

impl std::fmt::Debug for BearerTokenAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerTokenAuthenticator").field("api_audiences", &self.api_audiences).finish_non_exhaustive()
    }
}

/// Extracts the token from an `Authorization` header value the way kube's bearertoken does:
/// trimmed, split on single spaces into at most three parts, scheme compared
/// case-insensitively, an empty second part meaning no token. `None` means "not a bearer
/// credential".
pub fn bearer_token(header_value: &str) -> Option<&str> {
    let auth = header_value.trim();
    if auth.is_empty() {
        return None;
    }
    let mut parts = auth.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return None;
    }
    Some(token)
}

impl BearerTokenAuthenticator {
    /// The bearer token of the request: Err when the header is present but cannot carry one
    /// any authenticator issued, None when there is no bearer credential.
    fn token_of(req: &AuthRequest<'_>) -> Result<Option<String>, AuthOutcome> {
        let Some(value) = req.headers.get(http::header::AUTHORIZATION) else {
            return Ok(None);
        };
        // Go keeps header bytes as they are; bytes that are not UTF-8 are parsed as replacement
        // characters, and a token containing them cannot be one any authenticator issued.
        let text = String::from_utf8_lossy(value.as_bytes());
        let Some(token) = bearer_token(&text) else {
            return Ok(None);
        };
        if matches!(text, std::borrow::Cow::Owned(_)) && token.contains(char::REPLACEMENT_CHARACTER) {
            return Err(AuthOutcome::Rejected(INVALID_BEARER_TOKEN.to_owned()));
        }
        Ok(Some(token.to_owned()))
    }

    /// The token authenticators' answer as the authentication filter takes it.
    fn outcome(&self, answer: TokenOutcome) -> AuthOutcome {
        match answer {
            TokenOutcome::Authenticated { user, audiences } => {
                // The authentication filter's audiencesAreAcceptable.
                if !self.api_audiences.is_empty() && !audiences.is_empty() && intersect_audiences(&self.api_audiences, &audiences).is_empty() {
                    return AuthOutcome::Rejected(format!(
                        "unable to match the audience: {} , accepted: {}",
                        go_plain_list(&audiences),
                        go_plain_list(&self.api_audiences)
                    ));
                }
                AuthOutcome::Authenticated(user)
            }
            TokenOutcome::NotApplicable => AuthOutcome::Rejected(INVALID_BEARER_TOKEN.to_owned()),
            TokenOutcome::Rejected(reason) => AuthOutcome::Rejected(reason),
        }
    }
}

impl Authenticator for BearerTokenAuthenticator {
    fn authenticate(&self, req: &AuthRequest<'_>) -> AuthOutcome {
        match Self::token_of(req) {
            Ok(Some(token)) => self.outcome(self.tokens.authenticate_token(&token, &self.api_audiences)),
            Ok(None) => AuthOutcome::NotApplicable,
            Err(rejected) => rejected,
        }
    }

    fn authenticate_async<'a>(&'a self, req: &'a AuthRequest<'a>) -> crate::authn::Pending<'a, AuthOutcome> {
        Box::pin(async move {
            match Self::token_of(req) {
                Ok(Some(token)) => self.outcome(self.tokens.authenticate_token_async(&token, &self.api_audiences).await),
                Ok(None) => AuthOutcome::NotApplicable,
                Err(rejected) => rejected,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Accepts exactly one token, for fixed audiences, and records what it was asked.
    struct OneToken {
        token: &'static str,
        audiences: Vec<String>,
        seen: Mutex<Vec<(String, Vec<String>)>>,
    }

    impl OneToken {
        fn new(token: &'static str, audiences: &[&str]) -> Self {
            OneToken { token, audiences: strings(audiences), seen: Mutex::new(Vec::new()) }
        }
    }

    impl TokenAuthenticator for OneToken {
        fn authenticate_token(&self, token: &str, audiences: &[String]) -> TokenOutcome {
            self.seen.lock().unwrap().push((token.to_owned(), audiences.to_vec()));
            if token == self.token {
                TokenOutcome::Authenticated { user: UserInfo::new("jane", ["dev"]), audiences: self.audiences.clone() }
            } else {
                TokenOutcome::NotApplicable
            }
        }
    }

    struct Fixed(TokenOutcome);
    impl TokenAuthenticator for Fixed {
        fn authenticate_token(&self, _token: &str, _audiences: &[String]) -> TokenOutcome {
            self.0.clone()
        }
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn with_authorization(value: &[u8]) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, http::HeaderValue::from_bytes(value).unwrap());
        headers
    }

    fn bearer(tokens: impl TokenAuthenticator + 'static, api: &[&str], header: Option<&[u8]>) -> AuthOutcome {
        let auth = BearerTokenAuthenticator::new(Arc::new(tokens), strings(api));
        let headers = header.map(with_authorization).unwrap_or_default();
        auth.authenticate(&AuthRequest::headers_only(&headers))
    }

    #[test]
    fn bearer_header_parsing_matches_kube() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer abc"), Some("abc"));
        assert_eq!(bearer_token("BEARER abc"), Some("abc"));
        assert_eq!(bearer_token("  Bearer abc  "), Some("abc"));
        // SplitN into three: anything after a second space is ignored.
        assert_eq!(bearer_token("Bearer abc def"), Some("abc"));
        // Two spaces leave an empty token, which is no credential.
        assert_eq!(bearer_token("Bearer  abc"), None);
        assert_eq!(bearer_token("Bearer"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token(""), None);
        assert_eq!(bearer_token("Bearer\tabc"), None);
    }

    #[test]
    fn bearer_authenticator_outcomes() {
        let ok = bearer(OneToken::new("good", &[]), &["api"], Some(b"Bearer good"));
        assert_eq!(ok, AuthOutcome::Authenticated(UserInfo::new("jane", ["dev"])));

        assert_eq!(bearer(OneToken::new("good", &[]), &["api"], None), AuthOutcome::NotApplicable);
        assert_eq!(
            bearer(OneToken::new("good", &[]), &["api"], Some(b"Basic Zm9vOmJhcg==")),
            AuthOutcome::NotApplicable
        );
        assert_eq!(bearer(OneToken::new("good", &[]), &["api"], Some(b"Bearer  good")), AuthOutcome::NotApplicable);

        // Nobody knows the token and nobody said why: kube's default error.
        let unknown = bearer(OneToken::new("good", &[]), &["api"], Some(b"Bearer bad"));
        assert_eq!(unknown, AuthOutcome::Rejected("invalid bearer token".into()));
        // A reason from a token authenticator is kept.
        let expired = bearer(Fixed(TokenOutcome::Rejected("expired".into())), &["api"], Some(b"Bearer x"));
        assert_eq!(expired, AuthOutcome::Rejected("expired".into()));
        // Bytes that are not UTF-8 cannot be a token anyone issued.
        let garbage = bearer(OneToken::new("good", &[]), &["api"], Some(b"Bearer \xff\xfe"));
        assert_eq!(garbage, AuthOutcome::Rejected("invalid bearer token".into()));
    }

    #[test]
    fn bearer_passes_api_audiences_and_checks_the_answer() {
        let tokens = Arc::new(OneToken::new("good", &["api"]));
        let auth = BearerTokenAuthenticator::new(tokens.clone(), strings(&["api", "other"]));
        let headers = with_authorization(b"Bearer good");
        assert!(matches!(auth.authenticate(&AuthRequest::headers_only(&headers)), AuthOutcome::Authenticated(_)));
        assert_eq!(tokens.seen.lock().unwrap()[0], ("good".to_owned(), strings(&["api", "other"])));

        // A token valid only for audiences the server is not: rejected by the filter's check.
        let wrong = bearer(OneToken::new("good", &["vault"]), &["api"], Some(b"Bearer good"));
        assert_eq!(wrong, AuthOutcome::Rejected("unable to match the audience: [vault] , accepted: [api]".into()));
        // Without API audiences there is nothing to check.
        assert!(matches!(
            bearer(OneToken::new("good", &["vault"]), &[], Some(b"Bearer good")),
            AuthOutcome::Authenticated(_)
        ));
    }

    #[test]
    fn union_first_success_wins_and_errors_aggregate() {
        let union = TokenUnion::new(vec![
            Box::new(Fixed(TokenOutcome::Rejected("a".into()))),
            Box::new(OneToken::new("good", &["x"])),
            Box::new(Fixed(TokenOutcome::Rejected("never asked".into()))),
        ]);
        assert!(
            matches!(union.authenticate_token("good", &[]), TokenOutcome::Authenticated { audiences, .. } if audiences == ["x"])
        );
        assert_eq!(union.authenticate_token("bad", &[]), TokenOutcome::Rejected("[a, never asked]".into()));

        let mut union = TokenUnion::new(vec![Box::new(OneToken::new("good", &[]))]);
        assert!(!union.is_empty());
        assert_eq!(union.authenticate_token("bad", &[]), TokenOutcome::NotApplicable);
        union.push(Box::new(Fixed(TokenOutcome::Rejected("only".into()))));
        assert_eq!(union.authenticate_token("bad", &[]), TokenOutcome::Rejected("only".into()));
        assert!(TokenUnion::new(Vec::new()).is_empty());
    }

    #[test]
    fn audience_agnostic_restricts_to_implicit_audiences() {
        let wrapped = AudienceAgnostic::new(strings(&["api", "api2"]), OneToken::new("good", &[]));
        // No audiences requested: the inner authenticator alone decides, no audiences reported.
        assert!(
            matches!(wrapped.authenticate_token("good", &[]), TokenOutcome::Authenticated { audiences, .. } if audiences.is_empty())
        );
        // Requested audiences: the intersection, in the requested order.
        let outcome = wrapped.authenticate_token("good", &strings(&["other", "api2", "api"]));
        assert!(matches!(outcome, TokenOutcome::Authenticated { audiences, .. } if audiences == ["api2", "api"]));
        // No API audience requested: the token is not for us, whatever it is.
        assert_eq!(wrapped.authenticate_token("good", &strings(&["vault"])), TokenOutcome::NotApplicable);
        assert_eq!(wrapped.authenticate_token("bad", &strings(&["api"])), TokenOutcome::NotApplicable);
        // The inner authenticator must not be audience-aware after all.
        let confused = AudienceAgnostic::new(strings(&["api"]), OneToken::new("good", &["api"]));
        assert_eq!(
            confused.authenticate_token("good", &strings(&["api"])),
            TokenOutcome::Rejected(
                "audience agnostic authenticator wrapped an authenticator that returned audiences: [\"api\"]".into()
            )
        );
    }

    #[test]
    fn intersection_and_formatting_helpers() {
        assert_eq!(intersect_audiences(&strings(&["a", "b"]), &strings(&["c", "b", "a"])), strings(&["b", "a"]));
        assert!(intersect_audiences(&[], &strings(&["a"])).is_empty());
        assert_eq!(go_quoted_list(&strings(&["a", "b c"])), "[\"a\" \"b c\"]");
        assert_eq!(go_plain_list(&strings(&["a", "b"])), "[a b]");
        assert_eq!(aggregate(vec![]), None);
        assert_eq!(aggregate(vec!["x".into()]), Some("x".into()));
    }
}
