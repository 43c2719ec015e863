//! kube's JWT authenticator (`plugin/pkg/authenticator/token/oidc`): a token whose unverified
//! `iss` is this authenticator's issuer is verified (go-oidc's checks, then the signature with
//! the issuer's keys) and mapped to a user (claims or CEL), then checked by the claim and user
//! validation rules; any other token is not applicable, so the next authenticator gets it.
//!
//! Keys: the discovery document names the JWKS; both are fetched in the background at start
//! (retried every 10 s until they come, as kube polls) and the JWKS again every
//! [`PERIODIC_REFRESH`]. Verification with the keys in memory is CPU only. A token whose `kid`
//! no key has (a rotation at the issuer), or a token arriving before the first fetch, makes
//! [`TokenAuthenticator::authenticate_token_async`] fetch the keys right away, at most once per
//! [`MIN_REFRESH_INTERVAL`] whatever the number of such tokens (concurrent callers share one
//! fetch).

use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant, SystemTime};

use kapi_apiextensions::cel::{Activation, EvalError, Evaluator, Expression, Input, Output};
use kapi_auth::jwt::verify::{untrusted_issuer, Verifier};
use kapi_auth::jwt::{Compact, JwkSet, SignatureError};
use kapi_auth::{TokenAuthenticator, TokenOutcome, UserInfo};
use serde_json::{Map, Value};

use super::config::JwtSettings;
use super::fetch::Getter;

/// The shortest time between two key fetches caused by tokens.
pub const MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(5);
/// How often the keys are fetched again in the background.
pub const PERIODIC_REFRESH: Duration = Duration::from_secs(600);
/// kube's retry period while the issuer cannot be reached at start.
const INIT_RETRY: Duration = Duration::from_secs(10);
/// The CEL cost budget of one token's expressions.
const BUDGET: i64 = kapi_apiextensions::cel::RUNTIME_CEL_COST_BUDGET;

const NOT_INITIALIZED: &str = "oidc: authenticator not initialized";
const BAD_SIGNATURE: &str = "oidc: verify token: failed to verify signature: failed to verify id token signature";

/// The issuer's keys as last fetched.
#[derive(Debug, Default)]
struct KeyState {
    /// None until the first successful fetch.
    keys: Option<Arc<JwkSet>>,
    /// From the discovery document.
    jwks_uri: Option<String>,
    /// Bumped by every successful fetch.
    generation: u64,
}

/// An issuer's discovery document and JWKS, fetched on demand and periodically.
#[derive(Debug)]
struct RemoteKeys {
    issuer: String,
    discovery: String,
    getter: Getter,
    state: RwLock<Arc<KeyState>>,
    /// The time of the last fetch attempt; held while fetching, so that one fetch serves all.
    last_attempt: tokio::sync::Mutex<Option<Instant>>,
}

/// Why keys were not refreshed.
#[derive(Debug)]
enum RefreshError {
    /// Within [`MIN_REFRESH_INTERVAL`] of the previous attempt.
    RateLimited,
    /// The issuer did not give them.
    Failed(String),
}

impl RemoteKeys {
    fn current(&self) -> Arc<KeyState> {
        self.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Fetches the keys unless another caller did since `seen` (the generation the caller
    /// found wanting) or the last attempt is too recent (unless `force`).
    async fn refresh(&self, seen: u64, force: bool) -> Result<(), RefreshError> {
        let mut last = self.last_attempt.lock().await;
        if self.current().generation != seen {
            return Ok(());
        }
        if !force && last.is_some_and(|t| t.elapsed() < MIN_REFRESH_INTERVAL) {
            return Err(RefreshError::RateLimited);
        }
        *last = Some(Instant::now());
        let jwks_uri = match self.current().jwks_uri.clone() {
            Some(uri) => uri,
            None => self.discover().await.map_err(RefreshError::Failed)?,
        };
        let keys = self.keys(&jwks_uri).await.map_err(RefreshError::Failed)?;
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        let generation = state.generation + 1;
        *state = Arc::new(KeyState { keys: Some(Arc::new(keys)), jwks_uri: Some(jwks_uri), generation });
        tracing::debug!(issuer = %self.issuer, generation, "oidc: keys fetched");
        Ok(())
    }

    /// go-oidc's `NewProvider`: the discovery document, which must name this issuer.
    async fn discover(&self) -> Result<String, String> {
        let answer = self.getter.get(&self.discovery).await?;
        if answer.code != 200 {
            return Err(format!("{}: {}", answer.status, String::from_utf8_lossy(&answer.body)));
        }
        let doc: Value = serde_json::from_slice(&answer.body).map_err(|e| format!("oidc: failed to decode provider discovery object: {e}"))?;
        let issuer = doc.get("issuer").and_then(Value::as_str).unwrap_or("");
        if issuer != self.issuer {
            return Err(format!("oidc: issuer did not match the issuer returned by provider, expected {:?} got {issuer:?}", self.issuer));
        }
        match doc.get("jwks_uri").and_then(Value::as_str) {
            Some(uri) if !uri.is_empty() => Ok(uri.to_owned()),
            _ => Err("oidc: provider discovery object has no jwks_uri".into()),
        }
    }

    /// go-oidc's `keysFromRemote`.
    async fn keys(&self, uri: &str) -> Result<JwkSet, String> {
        let answer = self.getter.get(uri).await?;
        let body = String::from_utf8_lossy(&answer.body);
        if answer.code != 200 {
            return Err(format!("oidc: get keys failed: {} {body}", answer.status));
        }
        JwkSet::parse(&answer.body).map_err(|e| format!("oidc: failed to decode keys: {e} {body}"))
    }
}

/// One JWT authenticator of `--authentication-config` (or of the `--oidc-*` flags).
#[derive(Debug)]
pub struct JwtAuthenticator {
    settings: JwtSettings,
    keys: Arc<RemoteKeys>,
}

/// What verification with the keys in memory concluded.
enum Step {
    Done(TokenOutcome),
    /// The keys must be fetched first: none yet (`cold`), or none with the token's `kid`.
    NeedKeys {
        generation: u64,
        cold: bool,
    },
}

impl JwtAuthenticator {
    /// The authenticator; when called inside a tokio runtime, the keys start being fetched
    /// in the background.
    pub fn new(settings: JwtSettings) -> Result<Arc<JwtAuthenticator>, String> {
        Self::build(settings, true)
    }

    fn build(settings: JwtSettings, background_fetches: bool) -> Result<Arc<JwtAuthenticator>, String> {
        let ca = settings.config.certificate_authority.as_bytes();
        let getter = Getter::new((!ca.is_empty()).then_some(ca))?;
        let issuer = settings.config.url.clone();
        let discovery = if settings.config.discovery_url.is_empty() {
            format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'))
        } else {
            settings.config.discovery_url.clone()
        };
        let keys = Arc::new(RemoteKeys {
            issuer,
            discovery,
            getter,
            state: RwLock::new(Arc::new(KeyState::default())),
            last_attempt: tokio::sync::Mutex::new(None),
        });
        if let (true, Ok(handle)) = (background_fetches, tokio::runtime::Handle::try_current()) {
            handle.spawn(background(Arc::downgrade(&keys)));
        }
        Ok(Arc::new(JwtAuthenticator { settings, keys }))
    }

    /// An authenticator without background fetches, whose keys the test puts in place.
    #[cfg(test)]
    pub(crate) fn for_test(settings: JwtSettings) -> Arc<JwtAuthenticator> {
        Self::build(settings, false).expect("authenticator")
    }

    /// Replaces the keys, as a fetch would.
    #[cfg(test)]
    pub(crate) fn install_keys_for_test(&self, keys: JwkSet) {
        let mut state = self.keys.state.write().unwrap_or_else(|e| e.into_inner());
        let next = KeyState { keys: Some(Arc::new(keys)), jwks_uri: state.jwks_uri.clone(), generation: state.generation + 1 };
        *state = Arc::new(next);
    }

    /// The issuer URL.
    pub fn issuer(&self) -> &str {
        &self.settings.config.url
    }

    /// Whether the keys have been fetched.
    pub fn initialized(&self) -> bool {
        self.keys.current().keys.is_some()
    }

    fn verify_now(&self, token: &str) -> Step {
        let config = &self.settings.config;
        match untrusted_issuer(token) {
            Ok(iss) if iss == config.url => {}
            _ => return Step::Done(TokenOutcome::NotApplicable),
        }
        let state = self.keys.current();
        let Some(keys) = state.keys.clone() else {
            return Step::NeedKeys { generation: state.generation, cold: true };
        };
        let rejected = |e: String| Step::Done(TokenOutcome::Rejected(format!("oidc: verify token: {e}")));
        let jws = match Compact::parse(token) {
            Ok(jws) => jws,
            Err(e) => return rejected(format!("oidc: malformed jwt: {e}")),
        };
        let verifier = Verifier { issuer: &config.url, audiences: &config.audiences, algorithms: &self.settings.algorithms };
        let token = match verifier.check_claims(&jws, SystemTime::now()) {
            Ok(t) => t,
            Err(e) => return rejected(e),
        };
        match keys.verify(&jws, token.alg) {
            Ok(()) => {}
            Err(SignatureError::UnknownKey) => return Step::NeedKeys { generation: state.generation, cold: false },
            Err(SignatureError::Invalid) => return Step::Done(TokenOutcome::Rejected(BAD_SIGNATURE.into())),
        }
        if let Err(e) = verifier.check_audience(&token) {
            return rejected(e);
        }
        Step::Done(match self.user(&token.claims) {
            Ok(user) => TokenOutcome::Authenticated { user, audiences: Vec::new() },
            Err(e) => TokenOutcome::Rejected(e),
        })
    }

    async fn authenticate(&self, token: &str) -> TokenOutcome {
        let (generation, cold) = match self.verify_now(token) {
            Step::Done(outcome) => return outcome,
            Step::NeedKeys { generation, cold } => (generation, cold),
        };
        let refreshed = self.keys.refresh(generation, false).await;
        if let Err(RefreshError::Failed(e)) = &refreshed {
            tracing::warn!(issuer = %self.issuer(), "oidc: fetching keys: {e}");
        }
        match self.verify_now(token) {
            Step::Done(outcome) => outcome,
            Step::NeedKeys { cold: true, .. } => TokenOutcome::Rejected(NOT_INITIALIZED.into()),
            Step::NeedKeys { .. } => match refreshed {
                Err(RefreshError::Failed(e)) if !cold => {
                    TokenOutcome::Rejected(format!("oidc: verify token: failed to verify signature: fetching keys {e}"))
                }
                _ => TokenOutcome::Rejected(BAD_SIGNATURE.into()),
            },
        }
    }

    /// kube's mapping of verified claims to a user, then its claim and user validation rules.
    fn user(&self, claims: &Map<String, Value>) -> Result<UserInfo, String> {
        let s = &self.settings;
        let m = &s.mapper;
        let claims_value = Value::Object(claims.clone());
        let input = Input { claims: Some(&claims_value), ..Input::default() };
        let mut cel = Evaluator::new(Arc::new(Activation::new(&input)), Arc::from(Vec::new()), BUDGET);
        let mut eval = |e: &Expression| cel.evaluate(e).map_err(|e| eval_error(&e));

        // username
        let name = match &m.username {
            Some(e) => {
                let what = "oidc: error evaluating username claim expression";
                let out = eval(e).map_err(|x| format!("{what}: {x}"))?;
                out.as_str().map(str::to_owned).ok_or_else(|| format!("{what}: username claim expression must return a string"))?
            }
            None => {
                let claim = &s.config.username.claim;
                let name = claim_string(claims, claim).map_err(|e| format!("oidc: parse username claims {claim:?}: {e}"))?;
                if claim == "email" {
                    if let Some(verified) = claims.get("email_verified") {
                        match verified {
                            Value::Bool(true) => {}
                            Value::Bool(false) => return Err("oidc: email not verified".into()),
                            other => return Err(format!("oidc: parse 'email_verified' claim: {}", go_unmarshal(other, "bool"))),
                        }
                    }
                }
                match s.config.username.prefix.as_deref() {
                    Some(prefix) if !prefix.is_empty() => format!("{prefix}{name}"),
                    _ => name,
                }
            }
        };

        // groups
        let groups_claim = &s.config.groups.claim;
        let groups = if !groups_claim.is_empty() && claims.contains_key(groups_claim) {
            let raw = claims.get(groups_claim).unwrap_or(&Value::Null);
            let groups: Vec<String> = match raw {
                Value::Array(a) => a.iter().map(|g| g.as_str().map(str::to_owned).ok_or_else(|| go_unmarshal(g, "string"))).collect::<Result<_, _>>(),
                Value::String(g) => Ok(vec![g.clone()]),
                Value::Null => Ok(Vec::new()),
                other => Err(go_unmarshal(other, "string")),
            }
            .map_err(|e| format!("oidc: parse groups claim {groups_claim:?}: {e}"))?;
            match s.config.groups.prefix.as_deref() {
                Some(prefix) if !prefix.is_empty() => groups.into_iter().map(|g| format!("{prefix}{g}")).collect(),
                _ => groups,
            }
        } else if let Some(e) = &m.groups {
            let what = "oidc: error evaluating group claim expression";
            let out = eval(e).map_err(|x| format!("{what}: {x}"))?;
            string_list(&out).map_err(|x| format!("{what}: {x}"))?
        } else {
            Vec::new()
        };

        // uid
        let uid = if !s.config.uid_claim.is_empty() {
            let claim = &s.config.uid_claim;
            claim_string(claims, claim).map_err(|e| format!("oidc: parse uid claim {claim:?}: {e}"))?
        } else if let Some(e) = &m.uid {
            let what = "oidc: error evaluating uid claim expression";
            let out = eval(e).map_err(|x| format!("{what}: {x}"))?;
            out.as_str().map(str::to_owned).ok_or_else(|| format!("{what}: uid claim expression must return a string"))?
        } else {
            String::new()
        };

        // extra
        let mut extra = std::collections::BTreeMap::new();
        for (key, e) in &m.extra {
            let out = eval(e)?;
            let values = string_list(&out).map_err(|x| format!("oidc: error evaluating extra claim expression: {}: {x}", e.source()))?;
            if !values.is_empty() {
                extra.insert(key.clone(), values);
            }
        }

        // required claims
        for (claim, want) in &s.required_claims {
            let Some(value) = claims.get(claim) else {
                return Err(format!("oidc: required claim {claim} not present in ID token"));
            };
            let Some(got) = value.as_str() else {
                return Err(format!("oidc: parse claim {claim}: {}", go_unmarshal(value, "string")));
            };
            if got != want {
                return Err(format!("oidc: required claim {claim} value does not match. Got = {got}, want = {want}"));
            }
        }

        // claim validation rules
        for (e, message) in &m.claim_validation_rules {
            let what = "oidc: error evaluating claim validation expression";
            let out = eval(e).map_err(|x| format!("{what}: {x}"))?;
            check_rule(&out, e, message).map_err(|x| format!("{what}: {x}"))?;
        }

        let user = UserInfo { name, uid, groups, extra };

        // user validation rules
        if !m.user_validation_rules.is_empty() {
            let extra: Map<String, Value> = user.extra.iter().map(|(k, v)| (k.clone(), Value::from(v.clone()))).collect();
            let user_value = serde_json::json!({"username": user.name, "uid": user.uid, "groups": user.groups, "extra": extra});
            let input = Input { user: Some(&user_value), ..Input::default() };
            let mut cel = Evaluator::new(Arc::new(Activation::new(&input)), Arc::from(Vec::new()), BUDGET);
            for (e, message) in &m.user_validation_rules {
                let what = "oidc: error evaluating user info validation rule";
                let out = cel.evaluate(e).map_err(|x| format!("{what}: {}", eval_error(&x)))?;
                check_rule(&out, e, message).map_err(|x| format!("{what}: {x}"))?;
            }
        }
        Ok(user)
    }
}

fn eval_error(e: &EvalError) -> String {
    e.to_string()
}

/// encoding/json's error for a claim of the wrong type.
fn go_unmarshal(v: &Value, go_type: &str) -> String {
    format!("json: cannot unmarshal {} into Go value of type {go_type}", kapi_apimachinery::patch::json_kind(v))
}

/// kube's `unmarshalClaim` into a string.
fn claim_string(claims: &Map<String, Value>, name: &str) -> Result<String, String> {
    match claims.get(name) {
        None => Err("claim not present".into()),
        Some(Value::String(s)) => Ok(s.clone()),
        // json.Unmarshal of null into a string leaves it empty.
        Some(Value::Null) => Ok(String::new()),
        Some(other) => Err(go_unmarshal(other, "string")),
    }
}

/// kube's `convertCELValueToStringList`: a string, a list of strings (empty ones dropped) or
/// null.
fn string_list(out: &Output) -> Result<Vec<String>, String> {
    const WANT: &str = "expression must return a string or a list of strings";
    match out.to_json() {
        Some(Value::String(s)) => Ok(if s.is_empty() { Vec::new() } else { vec![s] }),
        Some(Value::Array(items)) => {
            let mut list = Vec::new();
            for item in items {
                match item {
                    Value::String(s) if s.is_empty() => {}
                    Value::String(s) => list.push(s),
                    _ => return Err(WANT.into()),
                }
            }
            Ok(list)
        }
        Some(Value::Null) => Ok(Vec::new()),
        _ => Err(WANT.into()),
    }
}

/// kube's `checkValidationRulesEvaluation` for one rule.
fn check_rule(out: &Output, e: &Expression, message: &str) -> Result<(), String> {
    match out.as_bool() {
        Some(true) => Ok(()),
        Some(false) => Err(format!("validation expression '{}' failed: {message}", e.source())),
        None => Err("validation expression must return a boolean".into()),
    }
}

/// The background fetches: until the first success every [`INIT_RETRY`], then every
/// [`PERIODIC_REFRESH`]; ends with the authenticator.
async fn background(keys: Weak<RemoteKeys>) {
    loop {
        let Some(k) = keys.upgrade() else { return };
        let state = k.current();
        let initialized = state.keys.is_some();
        match k.refresh(state.generation, true).await {
            Ok(()) => {}
            Err(RefreshError::Failed(e)) => tracing::error!(issuer = %k.issuer, "oidc authenticator: initializing plugin: {e}"),
            Err(RefreshError::RateLimited) => {}
        }
        let ready = initialized || k.current().keys.is_some();
        drop(k);
        tokio::time::sleep(if ready { PERIODIC_REFRESH } else { INIT_RETRY }).await;
    }
}

impl TokenAuthenticator for JwtAuthenticator {
    /// For synchronous callers: CPU-only with the keys in memory; a needed fetch is made on this
    /// thread (tokio's `block_in_place`), as the webhook token authenticator does.
    fn authenticate_token(&self, token: &str, _audiences: &[String]) -> TokenOutcome {
        match self.verify_now(token) {
            Step::Done(outcome) => outcome,
            Step::NeedKeys { cold, .. } => crate::auth_webhooks::wait_in_place(self.authenticate(token))
                .unwrap_or_else(|| TokenOutcome::Rejected(if cold { NOT_INITIALIZED } else { BAD_SIGNATURE }.into())),
        }
    }

    fn authenticate_token_async<'a>(&'a self, token: &'a str, _audiences: &'a [String]) -> kapi_auth::authn::Pending<'a, TokenOutcome> {
        Box::pin(self.authenticate(token))
    }
}
