//! `--authentication-config` (kube's AuthenticationConfiguration, apiserver.config.k8s.io v1,
//! v1beta1, v1alpha1) and the legacy `--oidc-*` flags, read into [`JwtSettings`] and checked as
//! kube-apiserver checks them: its field paths and messages (`jwt[0].issuer.url: Invalid value:
//! "http://x": URL scheme must be https`), joined as its aggregate, CEL expressions compiled
//! with `claims` (claim rules and mappings) or `user` (user rules) as the only variable.

use std::collections::BTreeMap;
use std::path::Path;

use kapi_apiextensions::cel::{CompileError, Declarations, Expression, ExpressionCompiler, ReturnType};
use kapi_auth::jwt::Algorithm;
use serde_json::Value;

const VERSIONS: &[&str] = &["apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1beta1", "apiserver.config.k8s.io/v1alpha1"];
const KIND: &str = "AuthenticationConfiguration";
/// kube's limit on JWT authenticators.
const MAX_AUTHENTICATORS: usize = 64;

/// A username or groups mapping: a claim with a prefix, or a CEL expression.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrefixedClaimOrExpression {
    /// `claim`.
    pub claim: String,
    /// `prefix` (None when absent, which differs from "").
    pub prefix: Option<String>,
    /// `expression`.
    pub expression: String,
}

/// One `claimValidationRules` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimValidationRule {
    /// `claim`, with `requiredValue`.
    pub claim: String,
    /// `requiredValue`.
    pub required_value: String,
    /// `expression`, with `message`.
    pub expression: String,
    /// `message`.
    pub message: String,
}

/// One `jwt[]` entry as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JwtAuthenticatorConfig {
    /// `issuer.url`.
    pub url: String,
    /// `issuer.discoveryURL`.
    pub discovery_url: String,
    /// `issuer.certificateAuthority` (PEM).
    pub certificate_authority: String,
    /// `issuer.audiences`.
    pub audiences: Vec<String>,
    /// `issuer.audienceMatchPolicy`.
    pub audience_match_policy: String,
    /// `claimValidationRules`.
    pub claim_validation_rules: Vec<ClaimValidationRule>,
    /// `claimMappings.username`.
    pub username: PrefixedClaimOrExpression,
    /// `claimMappings.groups`.
    pub groups: PrefixedClaimOrExpression,
    /// `claimMappings.uid.claim`.
    pub uid_claim: String,
    /// `claimMappings.uid.expression`.
    pub uid_expression: String,
    /// `claimMappings.extra`: key and valueExpression.
    pub extra: Vec<(String, String)>,
    /// `userValidationRules`: expression and message.
    pub user_validation_rules: Vec<(String, String)>,
}

/// The compiled CEL expressions of one authenticator (kube's `CELMapper`).
#[derive(Debug, Clone, Default)]
pub struct CelMapper {
    /// `claimMappings.username.expression`.
    pub username: Option<Expression>,
    /// `claimMappings.groups.expression`.
    pub groups: Option<Expression>,
    /// `claimMappings.uid.expression`.
    pub uid: Option<Expression>,
    /// `claimMappings.extra`: key and compiled valueExpression.
    pub extra: Vec<(String, Expression)>,
    /// The expression claim validation rules, with their messages.
    pub claim_validation_rules: Vec<(Expression, String)>,
    /// `userValidationRules`, with their messages.
    pub user_validation_rules: Vec<(Expression, String)>,
}

/// One JWT authenticator, checked and compiled.
#[derive(Debug, Clone)]
pub struct JwtSettings {
    /// As configured.
    pub config: JwtAuthenticatorConfig,
    /// The algorithms tokens may be signed with (all of kube's with the file, `--oidc-signing-algs`
    /// with the flags).
    pub algorithms: Vec<Algorithm>,
    /// The `claim`/`requiredValue` rules (`--oidc-required-claim`).
    pub required_claims: BTreeMap<String, String>,
    /// The CEL expressions.
    pub mapper: CelMapper,
}

/// `anonymous` of the file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnonymousSettings {
    /// `enabled`.
    pub enabled: bool,
    /// `conditions[].path`.
    pub paths: Vec<String>,
}

/// What `--authentication-config` or the `--oidc-*` flags configure.
#[derive(Debug, Clone, Default)]
pub struct AuthenticationSettings {
    /// The JWT authenticators, tried in order.
    pub jwt: Vec<JwtSettings>,
    /// The file's `anonymous` section.
    pub anonymous: Option<AnonymousSettings>,
}

/// The legacy `--oidc-*` flags as given (None: not on the command line).
#[derive(Debug, Clone, Default)]
pub struct OidcFlags {
    /// `--oidc-issuer-url`.
    pub issuer_url: Option<String>,
    /// `--oidc-client-id`.
    pub client_id: Option<String>,
    /// `--oidc-ca-file`.
    pub ca_file: Option<std::path::PathBuf>,
    /// `--oidc-username-claim` (default `sub`).
    pub username_claim: Option<String>,
    /// `--oidc-username-prefix`.
    pub username_prefix: Option<String>,
    /// `--oidc-groups-claim`.
    pub groups_claim: Option<String>,
    /// `--oidc-groups-prefix`.
    pub groups_prefix: Option<String>,
    /// `--oidc-required-claim` key=value, repeated.
    pub required_claims: Vec<String>,
    /// `--oidc-signing-algs` (default RS256).
    pub signing_algs: Option<Vec<String>>,
}

impl OidcFlags {
    fn any_set(&self) -> bool {
        self.issuer_url.is_some()
            || self.client_id.is_some()
            || self.ca_file.is_some()
            || self.username_claim.is_some()
            || self.username_prefix.is_some()
            || self.groups_claim.is_some()
            || self.groups_prefix.is_some()
            || !self.required_claims.is_empty()
            || self.signing_algs.is_some()
    }
}

/// kube-apiserver's start-up path: the file or the flags (mutually exclusive), checked against
/// the service-account issuers (`disallowed_issuers`). `anonymous_auth_flag_set` says whether
/// `--anonymous-auth` was on the command line, which the file's `anonymous` excludes.
pub fn load(
    config_file: Option<&Path>,
    flags: &OidcFlags,
    disallowed_issuers: &[String],
    anonymous_auth_flag_set: bool,
) -> Result<AuthenticationSettings, String> {
    let mut file_jwt = Vec::new();
    let mut anonymous = None;
    let mut algorithms = Algorithm::ALL.to_vec();
    match config_file {
        Some(path) => {
            if flags.any_set() {
                return Err("authentication-config file and oidc-* flags are mutually exclusive".into());
            }
            let failed = |e: String| format!("failed to load authentication configuration from file {:?}: {e}", path.display().to_string());
            let text = std::fs::read(path).map_err(|e| failed(format!("open {}: {}", path.display(), kapi_error_text(&e))))?;
            if text.is_empty() {
                return Err(failed("empty config data".into()));
            }
            let text = String::from_utf8(text).map_err(|e| failed(e.to_string()))?;
            let doc: Value = serde_saphyr::from_str(&text).map_err(|e| failed(e.to_string()))?;
            let (jwt, anon) = decode(&doc).map_err(failed)?;
            file_jwt = jwt;
            anonymous = anon;
            if anonymous.is_some() && anonymous_auth_flag_set {
                return Err("anonymous: Forbidden: --anonymous-auth flag cannot be set when anonymous field is configured in authentication configuration file".into());
            }
        }
        None if flags.any_set() => {
            let (Some(issuer), Some(client_id)) = (flags.issuer_url.as_deref(), flags.client_id.as_deref()) else {
                return Err("oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set".into());
            };
            if issuer.is_empty() || client_id.is_empty() {
                return Err("oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set".into());
            }
            // --oidc-required-claim become claim rules, read back below.
            let (jwt, algs) = from_flags(issuer, client_id, flags)?;
            file_jwt.push(jwt);
            algorithms = algs;
        }
        None => return Ok(AuthenticationSettings::default()),
    }
    let (jwt, errors) = validate(&file_jwt, anonymous.as_ref(), disallowed_issuers);
    if let Some(e) = kapi_auth_aggregate(errors) {
        return Err(format!("invalid authentication configuration: {e}"));
    }
    let jwt = jwt
        .into_iter()
        .map(|(config, mapper)| {
            let mut required = BTreeMap::new();
            for rule in config.claim_validation_rules.iter().filter(|r| !r.claim.is_empty()) {
                required.insert(rule.claim.clone(), rule.required_value.clone());
            }
            JwtSettings { config, algorithms: algorithms.clone(), required_claims: required, mapper }
        })
        .collect();
    Ok(AuthenticationSettings { jwt, anonymous })
}

/// An I/O error's text as Go's `os` package words the common ones.
fn kapi_error_text(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// kube's `ToAggregate` (duplicates dropped).
fn kapi_auth_aggregate(errors: Vec<String>) -> Option<String> {
    let mut unique: Vec<String> = Vec::new();
    for e in errors {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    match unique.len() {
        0 => None,
        1 => unique.pop(),
        _ => Some(format!("[{}]", unique.join(", "))),
    }
}

/// kube's legacy flags as a JWT authenticator (`ToAuthenticationConfig`).
fn from_flags(issuer: &str, client_id: &str, flags: &OidcFlags) -> Result<(JwtAuthenticatorConfig, Vec<Algorithm>), String> {
    let username_claim = flags.username_claim.clone().unwrap_or_else(|| "sub".into());
    let given_prefix = flags.username_prefix.clone().unwrap_or_default();
    let username_prefix = match given_prefix.as_str() {
        "-" => String::new(),
        "" if username_claim != "email" => format!("{issuer}#"),
        other => other.to_owned(),
    };
    let mut config = JwtAuthenticatorConfig {
        url: issuer.to_owned(),
        audiences: vec![client_id.to_owned()],
        username: PrefixedClaimOrExpression { claim: username_claim, prefix: Some(username_prefix), expression: String::new() },
        ..Default::default()
    };
    if let Some(groups) = flags.groups_claim.as_deref().filter(|g| !g.is_empty()) {
        config.groups = PrefixedClaimOrExpression {
            claim: groups.to_owned(),
            prefix: Some(flags.groups_prefix.clone().unwrap_or_default()),
            expression: String::new(),
        };
    }
    if let Some(ca) = &flags.ca_file {
        config.certificate_authority = std::fs::read_to_string(ca).map_err(|e| format!("open {}: {}", ca.display(), kapi_error_text(&e)))?;
    }
    let mut required = BTreeMap::new();
    for pair in &flags.required_claims {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(format!("invalid argument {pair:?} for \"--oidc-required-claim\" flag: malformed pair, expect string=string"));
        };
        required.insert(k.trim().to_owned(), v.trim().to_owned());
    }
    config.claim_validation_rules =
        required.iter().map(|(k, v)| ClaimValidationRule { claim: k.clone(), required_value: v.clone(), ..Default::default() }).collect();
    let names = flags.signing_algs.clone().unwrap_or_else(|| vec!["RS256".into()]);
    let mut algorithms = Vec::new();
    for name in names.iter().filter(|n| !n.is_empty()) {
        match Algorithm::parse(name) {
            Some(a) => algorithms.push(a),
            None => return Err(format!("oidc: unsupported signing alg: {name:?}")),
        }
    }
    if algorithms.is_empty() {
        algorithms.push(Algorithm::RS256);
    }
    Ok((config, algorithms))
}

mod decode;
mod validate;

use decode::decode;
pub use validate::validate;

#[cfg(test)]
mod tests {
    use super::*;

    fn errors_of(yaml: &str) -> String {
        let doc: Value = serde_saphyr::from_str(yaml).unwrap();
        let (jwt, anonymous) = match decode(&doc) {
            Ok(x) => x,
            Err(e) => return e,
        };
        let (_, errors) = validate(&jwt, anonymous.as_ref(), &["https://kapi.local".to_owned()]);
        kapi_auth_aggregate(errors).unwrap_or_default()
    }

    const HEAD: &str = "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\n";

    #[test]
    fn a_good_file_compiles() {
        let yaml = format!(
            "{HEAD}jwt:\n- issuer:\n    url: https://issuer.example\n    audiences: [a, b]\n    audienceMatchPolicy: MatchAny\n  claimValidationRules:\n  - claim: hd\n    requiredValue: example.com\n  - expression: 'claims.exp - claims.iat <= 3600'\n    message: too long\n  claimMappings:\n    username:\n      expression: '\"u:\" + claims.sub'\n    groups:\n      claim: groups\n      prefix: 'g:'\n    uid:\n      claim: sub\n    extra:\n    - key: example.com/tenant\n      valueExpression: claims.tenant\n  userValidationRules:\n  - expression: \"!user.username.startsWith('system:')\"\n    message: no system users\n"
        );
        assert_eq!(errors_of(&yaml), "");
        let doc: Value = serde_saphyr::from_str(&yaml).unwrap();
        let (jwt, _) = decode(&doc).unwrap();
        let (compiled, _) = validate(&jwt, None, &[]);
        let mapper = &compiled[0].1;
        assert!(mapper.username.is_some() && mapper.groups.is_none() && mapper.uid.is_none());
        assert_eq!((mapper.extra.len(), mapper.claim_validation_rules.len(), mapper.user_validation_rules.len()), (1, 1, 1));
    }

    #[test]
    fn kubes_field_errors() {
        let yaml = format!(
            "{HEAD}jwt:\n- issuer:\n    url: http://issuer.example?x=1\n    audiences: []\n  claimMappings:\n    username:\n      claim: sub\n- issuer:\n    url: https://kapi.local\n    discoveryURL: https://kapi.local/\n    audiences: [a, a]\n    certificateAuthority: nope\n  claimValidationRules:\n  - claim: x\n    expression: 'true'\n  - {{}}\n  - expression: '1'\n  claimMappings:\n    username:\n      expression: claims.email\n      prefix: ''\n    uid:\n      claim: a\n      expression: b\n    extra:\n    - key: Kubernetes.io/x\n      valueExpression: claims.x\n    - key: nodomain\n      valueExpression: ''\n  userValidationRules:\n  - expression: 'user.nope'\n"
        );
        let got = errors_of(&yaml);
        for want in [
            "jwt[0].issuer.url: Invalid value: \"http://issuer.example?x=1\": URL scheme must be https",
            "jwt[0].issuer.url: Invalid value: \"http://issuer.example?x=1\": URL must not contain a query",
            "jwt[0].issuer.audiences: Required value: at least one jwt[0].issuer.audiences is required",
            "jwt[0].claimMappings.username.prefix: Required value: prefix is required when claim is set. It can be set to an empty string to disable prefixing",
            "jwt[1].issuer.url: Invalid value: \"https://kapi.local\": URL must not overlap with disallowed issuers: [https://kapi.local]",
            "jwt[1].issuer.discoveryURL: Invalid value: \"https://kapi.local/\": discoveryURL must be different from URL",
            "jwt[1].issuer.audiences[1]: Duplicate value: \"a\"",
            "jwt[1].issuer.audienceMatchPolicy: Invalid value: \"\": audienceMatchPolicy must be MatchAny for multiple audiences",
            "jwt[1].issuer.certificateAuthority: Invalid value: \"<omitted>\": data does not contain any valid RSA or ECDSA certificates",
            "jwt[1].claimValidationRules[0]: Invalid value: \"x\": claim and expression can't both be set",
            "jwt[1].claimValidationRules[1]: Required value: claim or expression is required",
            "jwt[1].claimValidationRules[2].expression: Invalid value: \"1\": must evaluate to bool",
            "jwt[1].claimMappings.username.prefix: Invalid value: \"\": may not be specified when expression is set",
            "jwt[1].claimMappings.uid: Invalid value: \"\": claim and expression can't both be set",
            "jwt[1].claimMappings.extra[0].key: Invalid value: \"Kubernetes.io/x\": must be lowercase",
            "jwt[1].claimMappings.extra[1].key: Invalid value: \"nodomain\": must be a domain-prefixed path (such as \"acme.io/foo\")",
            "jwt[1].claimMappings.extra[1].valueExpression: Required value",
            "jwt[1].claimMappings.username.expression: Invalid value: \"claims.email\": claims.email_verified must be used in claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email is used in claimMappings.username.expression",
            "jwt[1].userValidationRules[0].expression: Invalid value: \"user.nope\": compilation failed: ",
        ] {
            assert!(got.contains(want), "missing {want}\nin {got}");
        }
        assert!(got.starts_with('[') && got.ends_with(']'));
    }

    #[test]
    fn decoding_errors() {
        assert_eq!(
            errors_of("apiVersion: apiserver.config.k8s.io/v2\nkind: AuthenticationConfiguration\n"),
            "no kind \"AuthenticationConfiguration\" is registered for version \"apiserver.config.k8s.io/v2\" in scheme \"pkg/runtime/scheme.go:100\""
        );
        assert_eq!(
            errors_of(&format!("{HEAD}jwt:\n- issuer:\n    url: https://a\n    audiences: [a]\n    bogus: 1\n")),
            "strict decoding error: unknown field \"jwt[0].issuer.bogus\""
        );
        assert_eq!(
            errors_of(&format!("{HEAD}jwt:\n- issuer:\n    url: https://a\n    audiences: a\n")),
            "json: cannot unmarshal string into Go struct field jwt[0].issuer.audiences of type []string"
        );
        assert_eq!(
            errors_of(&format!("{HEAD}anonymous:\n  enabled: false\n  conditions:\n  - path: /livez\n")),
            "anonymous.conditions: Invalid value: [{Path:/livez}]: enabled should be set to true when conditions are defined"
        );
    }

    #[test]
    fn legacy_flags() {
        let flags = OidcFlags { issuer_url: Some("https://i".into()), client_id: Some("kapi".into()), ..Default::default() };
        let settings = load(None, &flags, &[], false).unwrap();
        let jwt = &settings.jwt[0];
        assert_eq!(
            jwt.config.username,
            PrefixedClaimOrExpression { claim: "sub".into(), prefix: Some("https://i#".into()), expression: String::new() }
        );
        assert_eq!(jwt.algorithms, vec![Algorithm::RS256]);
        let email = OidcFlags { username_claim: Some("email".into()), groups_claim: Some("groups".into()), ..flags.clone() };
        let jwt = &load(None, &email, &[], false).unwrap().jwt[0];
        assert_eq!(jwt.config.username.prefix.as_deref(), Some(""));
        assert_eq!(jwt.config.groups.prefix.as_deref(), Some(""));
        let dash = OidcFlags { username_prefix: Some("-".into()), required_claims: vec!["hd=example.com".into()], ..flags.clone() };
        let jwt = &load(None, &dash, &[], false).unwrap().jwt[0];
        assert_eq!(jwt.config.username.prefix.as_deref(), Some(""));
        assert_eq!(jwt.required_claims.get("hd").map(String::as_str), Some("example.com"));
        let only_id = OidcFlags { client_id: Some("kapi".into()), ..Default::default() };
        assert_eq!(
            load(None, &only_id, &[], false).unwrap_err(),
            "oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags are set"
        );
        let bad_alg = OidcFlags { signing_algs: Some(vec!["HS256".into()]), ..flags.clone() };
        assert_eq!(load(None, &bad_alg, &[], false).unwrap_err(), "oidc: unsupported signing alg: \"HS256\"");
        let http = OidcFlags { issuer_url: Some("http://i".into()), ..flags.clone() };
        assert_eq!(
            load(None, &http, &[], false).unwrap_err(),
            "invalid authentication configuration: jwt[0].issuer.url: Invalid value: \"http://i\": URL scheme must be https"
        );
        assert_eq!(
            load(Some(Path::new("/nonexistent")), &flags, &[], false).unwrap_err(),
            "authentication-config file and oidc-* flags are mutually exclusive"
        );
        assert!(load(None, &OidcFlags::default(), &[], false).unwrap().jwt.is_empty());
    }
}
