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

// ---- decoding ----


/// Decodes with kube's strict decoder's errors: unknown fields and wrong types name the field.
struct Decoder {
    errors: Vec<String>,
}

impl Decoder {
    fn object<'a>(&mut self, v: &'a Value, path: &str, known: &[&str], go_type: &str) -> Option<&'a serde_json::Map<String, Value>> {
        match v {
            Value::Null => None,
            Value::Object(m) => {
                for k in m.keys() {
                    if !known.contains(&k.as_str()) {
                        let field = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                        self.errors.push(format!("unknown field {field:?}"));
                    }
                }
                Some(m)
            }
            other => {
                self.type_error(other, path, go_type);
                None
            }
        }
    }

    fn type_error(&mut self, v: &Value, path: &str, go_type: &str) {
        self.errors.push(format!("json: cannot unmarshal {} into Go struct field {path} of type {go_type}", kapi_apimachinery::patch::json_kind(v)));
    }

    fn string(&mut self, m: &serde_json::Map<String, Value>, key: &str, path: &str) -> String {
        match m.get(key) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                self.type_error(other, &join(path, key), "string");
                String::new()
            }
        }
    }

    fn opt_string(&mut self, m: &serde_json::Map<String, Value>, key: &str, path: &str) -> Option<String> {
        match m.get(key) {
            None | Some(Value::Null) => None,
            Some(_) => Some(self.string(m, key, path)),
        }
    }

    fn list<'a>(&mut self, m: &'a serde_json::Map<String, Value>, key: &str, path: &str, go_type: &str) -> &'a [Value] {
        match m.get(key) {
            None | Some(Value::Null) => &[],
            Some(Value::Array(a)) => a,
            Some(other) => {
                self.type_error(other, &join(path, key), go_type);
                &[]
            }
        }
    }

    fn strings(&mut self, m: &serde_json::Map<String, Value>, key: &str, path: &str) -> Vec<String> {
        let mut out = Vec::new();
        for v in self.list(m, key, path, "[]string") {
            match v {
                Value::String(s) => out.push(s.clone()),
                other => self.type_error(other, &join(path, key), "string"),
            }
        }
        out
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// The document's JWT authenticators and anonymous section, or the decoder's error.
fn decode(doc: &Value) -> Result<(Vec<JwtAuthenticatorConfig>, Option<AnonymousSettings>), String> {
    let version = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
    if version.is_empty() || kind.is_empty() {
        return Err(format!("Object 'Kind' is missing in '{}'", serde_json::to_string(doc).unwrap_or_default()));
    }
    if kind != KIND || !VERSIONS.contains(&version) {
        return Err(format!("no kind {kind:?} is registered for version {version:?} in scheme \"pkg/runtime/scheme.go:100\""));
    }
    let mut d = Decoder { errors: Vec::new() };
    let Some(top) = d.object(doc, "", &["apiVersion", "kind", "jwt", "anonymous"], "AuthenticationConfiguration") else {
        return Err(d.errors.join(", "));
    };
    let mut out = Vec::new();
    let list = d.list(top, "jwt", "", "[]JWTAuthenticator").to_vec();
    for (i, a) in list.iter().enumerate() {
        out.push(decode_jwt(&mut d, a, &format!("jwt[{i}]")));
    }
    let anonymous = match top.get("anonymous") {
        None | Some(Value::Null) => None,
        Some(v) => d.object(v, "anonymous", &["enabled", "conditions"], "AnonymousAuthConfig").map(|m| {
            let enabled = match m.get("enabled") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(other) => {
                    d.type_error(other, "anonymous.enabled", "bool");
                    false
                }
            };
            let mut paths = Vec::new();
            for (i, c) in d.list(m, "conditions", "anonymous", "[]AnonymousAuthCondition").to_vec().iter().enumerate() {
                if let Some(c) = d.object(c, &format!("anonymous.conditions[{i}]"), &["path"], "AnonymousAuthCondition") {
                    paths.push(d.string(c, "path", &format!("anonymous.conditions[{i}]")));
                }
            }
            AnonymousSettings { enabled, paths }
        }),
    };
    if !d.errors.is_empty() {
        let unknown: Vec<&String> = d.errors.iter().filter(|e| e.starts_with("unknown field")).collect();
        if unknown.len() == d.errors.len() {
            return Err(format!("strict decoding error: {}", d.errors.join(", ")));
        }
        return Err(d.errors.join(", "));
    }
    Ok((out, anonymous))
}

fn decode_prefixed(d: &mut Decoder, m: &serde_json::Map<String, Value>, key: &str, path: &str) -> PrefixedClaimOrExpression {
    let path = join(path, key);
    match m.get(key) {
        None | Some(Value::Null) => PrefixedClaimOrExpression::default(),
        Some(v) => match d.object(v, &path, &["claim", "prefix", "expression"], "PrefixedClaimOrExpression") {
            Some(o) => PrefixedClaimOrExpression {
                claim: d.string(o, "claim", &path),
                prefix: d.opt_string(o, "prefix", &path),
                expression: d.string(o, "expression", &path),
            },
            None => PrefixedClaimOrExpression::default(),
        },
    }
}

fn decode_jwt(d: &mut Decoder, a: &Value, path: &str) -> JwtAuthenticatorConfig {
    let mut out = JwtAuthenticatorConfig::default();
    let Some(a) = d.object(a, path, &["issuer", "claimValidationRules", "claimMappings", "userValidationRules"], "JWTAuthenticator") else {
        return out;
    };
    let ipath = join(path, "issuer");
    if let Some(issuer) = a.get("issuer").and_then(|v| {
        d.object(v, &ipath, &["url", "discoveryURL", "certificateAuthority", "audiences", "audienceMatchPolicy", "egressSelectorType"], "Issuer")
    }) {
        out.url = d.string(issuer, "url", &ipath);
        out.discovery_url = d.string(issuer, "discoveryURL", &ipath);
        out.certificate_authority = d.string(issuer, "certificateAuthority", &ipath);
        out.audiences = d.strings(issuer, "audiences", &ipath);
        out.audience_match_policy = d.string(issuer, "audienceMatchPolicy", &ipath);
        let egress = d.string(issuer, "egressSelectorType", &ipath);
        if !egress.is_empty() {
            d.errors.push(format!(
                "{ipath}.egressSelectorType: Invalid value: {egress:?}: egress selector is not supported when StructuredAuthenticationConfigurationEgressSelector feature gate is disabled"
            ));
        }
    }
    let rules = d.list(a, "claimValidationRules", path, "[]ClaimValidationRule").to_vec();
    for (i, r) in rules.iter().enumerate() {
        let rpath = format!("{path}.claimValidationRules[{i}]");
        if let Some(r) = d.object(r, &rpath, &["claim", "requiredValue", "expression", "message"], "ClaimValidationRule") {
            out.claim_validation_rules.push(ClaimValidationRule {
                claim: d.string(r, "claim", &rpath),
                required_value: d.string(r, "requiredValue", &rpath),
                expression: d.string(r, "expression", &rpath),
                message: d.string(r, "message", &rpath),
            });
        }
    }
    let mpath = join(path, "claimMappings");
    if let Some(m) = a.get("claimMappings").and_then(|v| d.object(v, &mpath, &["username", "groups", "uid", "extra"], "ClaimMappings")) {
        out.username = decode_prefixed(d, m, "username", &mpath);
        out.groups = decode_prefixed(d, m, "groups", &mpath);
        let upath = join(&mpath, "uid");
        if let Some(u) = m.get("uid").and_then(|v| d.object(v, &upath, &["claim", "expression"], "ClaimOrExpression")) {
            out.uid_claim = d.string(u, "claim", &upath);
            out.uid_expression = d.string(u, "expression", &upath);
        }
        let extra = d.list(m, "extra", &mpath, "[]ExtraMapping").to_vec();
        for (i, e) in extra.iter().enumerate() {
            let epath = format!("{mpath}.extra[{i}]");
            if let Some(e) = d.object(e, &epath, &["key", "valueExpression"], "ExtraMapping") {
                out.extra.push((d.string(e, "key", &epath), d.string(e, "valueExpression", &epath)));
            }
        }
    }
    let rules = d.list(a, "userValidationRules", path, "[]UserValidationRule").to_vec();
    for (i, r) in rules.iter().enumerate() {
        let rpath = format!("{path}.userValidationRules[{i}]");
        if let Some(r) = d.object(r, &rpath, &["expression", "message"], "UserValidationRule") {
            out.user_validation_rules.push((d.string(r, "expression", &rpath), d.string(r, "message", &rpath)));
        }
    }
    out
}

// ---- validation ----

fn required(path: &str, detail: &str) -> String {
    if detail.is_empty() {
        format!("{path}: Required value")
    } else {
        format!("{path}: Required value: {detail}")
    }
}

fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {value:?}: {detail}")
}

fn duplicate(path: &str, value: &str) -> String {
    format!("{path}: Duplicate value: {value:?}")
}

/// kube's `ValidateAuthenticationConfiguration`: the compiled authenticators, and the errors.
pub fn validate(
    jwt: &[JwtAuthenticatorConfig],
    anonymous: Option<&AnonymousSettings>,
    disallowed_issuers: &[String],
) -> (Vec<(JwtAuthenticatorConfig, CelMapper)>, Vec<String>) {
    let mut errors = Vec::new();
    if jwt.len() > MAX_AUTHENTICATORS {
        return (Vec::new(), vec![format!("jwt: Too many: {}: must have at most {MAX_AUTHENTICATORS} items", jwt.len())]);
    }
    let mut out = Vec::new();
    let mut seen_issuers: Vec<&str> = Vec::new();
    let mut seen_discovery: Vec<&str> = Vec::new();
    for (i, a) in jwt.iter().enumerate() {
        let path = format!("jwt[{i}]");
        let mapper = validate_jwt(a, &path, disallowed_issuers, &mut errors);
        if seen_issuers.contains(&a.url.as_str()) {
            errors.push(duplicate(&format!("{path}.issuer.url"), &a.url));
        }
        seen_issuers.push(&a.url);
        if !a.discovery_url.is_empty() {
            if seen_discovery.contains(&a.discovery_url.as_str()) {
                errors.push(duplicate(&format!("{path}.issuer.discoveryURL"), &a.discovery_url));
            }
            seen_discovery.push(&a.discovery_url);
        }
        out.push((a.clone(), mapper));
    }
    if let Some(anon) = anonymous {
        if !anon.enabled && !anon.paths.is_empty() {
            let conditions: Vec<String> = anon.paths.iter().map(|p| format!("{{Path:{p}}}")).collect();
            errors.push(format!(
                "anonymous.conditions: Invalid value: [{}]: enabled should be set to true when conditions are defined",
                conditions.join(" ")
            ));
        }
    }
    (out, errors)
}

fn validate_jwt(a: &JwtAuthenticatorConfig, path: &str, disallowed: &[String], errors: &mut Vec<String>) -> CelMapper {
    let ipath = format!("{path}.issuer");
    // issuer.url
    if a.url.is_empty() {
        errors.push(required(&format!("{ipath}.url"), ""));
    } else {
        validate_url(&a.url, disallowed, &format!("{ipath}.url"), errors);
    }
    // issuer.discoveryURL
    if !a.discovery_url.is_empty() {
        if !a.url.is_empty() && a.url.trim_end_matches('/') == a.discovery_url.trim_end_matches('/') {
            errors.push(invalid(&format!("{ipath}.discoveryURL"), &a.discovery_url, "discoveryURL must be different from URL"));
        }
        validate_url(&a.discovery_url, &[], &format!("{ipath}.discoveryURL"), errors);
    }
    // issuer.audiences
    let apath = format!("{ipath}.audiences");
    if a.audiences.is_empty() {
        errors.push(required(&apath, &format!("at least one {apath} is required")));
    } else {
        let mut seen: Vec<&str> = Vec::new();
        for (i, aud) in a.audiences.iter().enumerate() {
            if aud.is_empty() {
                errors.push(required(&format!("{apath}[{i}]"), ""));
            }
            if seen.contains(&aud.as_str()) {
                errors.push(duplicate(&format!("{apath}[{i}]"), aud));
            }
            seen.push(aud);
        }
        let ppath = format!("{ipath}.audienceMatchPolicy");
        if a.audiences.len() > 1 && a.audience_match_policy != "MatchAny" {
            errors.push(invalid(&ppath, &a.audience_match_policy, "audienceMatchPolicy must be MatchAny for multiple audiences"));
        }
        if a.audiences.len() == 1 && !a.audience_match_policy.is_empty() && a.audience_match_policy != "MatchAny" {
            errors.push(invalid(&ppath, &a.audience_match_policy, "audienceMatchPolicy must be empty or MatchAny for single audience"));
        }
    }
    // issuer.certificateAuthority
    if !a.certificate_authority.is_empty() {
        if let Err(e) = super::fetch::pem_certificates(a.certificate_authority.as_bytes()) {
            errors.push(invalid(&format!("{ipath}.certificateAuthority"), "<omitted>", &e));
        }
    }

    let claims = ExpressionCompiler::claims();
    let mut mapper = CelMapper::default();
    let (mut uses_email, mut uses_email_verified) = (false, false);

    // claimValidationRules
    let mut seen_claims: Vec<&str> = Vec::new();
    let mut seen_expressions: Vec<&str> = Vec::new();
    for (i, rule) in a.claim_validation_rules.iter().enumerate() {
        let rpath = format!("{path}.claimValidationRules[{i}]");
        match (rule.claim.is_empty(), rule.expression.is_empty()) {
            (false, false) => errors.push(invalid(&rpath, &rule.claim, "claim and expression can't both be set")),
            (true, true) => errors.push(required(&rpath, "claim or expression is required")),
            (false, true) => {
                if !rule.message.is_empty() {
                    errors.push(invalid(&format!("{rpath}.message"), &rule.message, "may not be specified when claim is set"));
                }
                if seen_claims.contains(&rule.claim.as_str()) {
                    errors.push(duplicate(&format!("{rpath}.claim"), &rule.claim));
                }
                seen_claims.push(&rule.claim);
            }
            (true, false) => {
                if !rule.required_value.is_empty() {
                    errors.push(invalid(&format!("{rpath}.requiredValue"), &rule.required_value, "may not be specified when expression is set"));
                }
                if seen_expressions.contains(&rule.expression.as_str()) {
                    errors.push(duplicate(&format!("{rpath}.expression"), &rule.expression));
                    continue;
                }
                seen_expressions.push(&rule.expression);
                match compile(&claims, &rule.expression, ReturnType::Bool, &format!("{rpath}.expression")) {
                    Ok(e) => {
                        uses_email_verified |= e.selects("claims", "email_verified");
                        mapper.claim_validation_rules.push((e, rule.message.clone()));
                    }
                    Err(e) => errors.push(e),
                }
            }
        }
    }

    // claimMappings
    let mpath = format!("{path}.claimMappings");
    if let Some(e) = prefixed(&claims, &a.username, &format!("{mpath}.username"), true, errors) {
        uses_email |= e.selects("claims", "email");
        uses_email_verified |= e.selects("claims", "email_verified");
        mapper.username = Some(e);
    }
    mapper.groups = prefixed(&claims, &a.groups, &format!("{mpath}.groups"), false, errors);
    match (a.uid_claim.is_empty(), a.uid_expression.is_empty()) {
        (false, false) => errors.push(invalid(&format!("{mpath}.uid"), "", "claim and expression can't both be set")),
        (true, false) => match compile(&claims, &a.uid_expression, ReturnType::Any, &format!("{mpath}.uid.expression")) {
            Ok(e) => mapper.uid = Some(e),
            Err(e) => errors.push(e),
        },
        _ => {}
    }
    let mut seen_keys: Vec<&str> = Vec::new();
    for (i, (key, expression)) in a.extra.iter().enumerate() {
        let epath = format!("{mpath}.extra[{i}]");
        let kpath = format!("{epath}.key");
        domain_prefixed_path(&kpath, key, errors);
        if *key != key.to_lowercase() {
            errors.push(invalid(&kpath, key, "must be lowercase"));
        }
        if is_kubernetes_domain(key) {
            errors.push(invalid(&kpath, key, "k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use"));
        }
        if seen_keys.contains(&key.as_str()) {
            errors.push(duplicate(&kpath, key));
            continue;
        }
        seen_keys.push(key);
        if expression.is_empty() {
            errors.push(required(&format!("{epath}.valueExpression"), ""));
            continue;
        }
        match compile(&claims, expression, ReturnType::Any, &format!("{epath}.valueExpression")) {
            Ok(e) => {
                uses_email_verified |= e.selects("claims", "email_verified");
                mapper.extra.push((key.clone(), e));
            }
            Err(e) => errors.push(e),
        }
    }
    if uses_email && !uses_email_verified {
        errors.push(invalid(
            &format!("{mpath}.username.expression"),
            &a.username.expression,
            "claims.email_verified must be used in claimMappings.username.expression or claimMappings.extra[*].valueExpression or claimValidationRules[*].expression when claims.email is used in claimMappings.username.expression",
        ));
    }

    // userValidationRules
    let users = ExpressionCompiler::user_info();
    let mut seen: Vec<&str> = Vec::new();
    for (i, (expression, message)) in a.user_validation_rules.iter().enumerate() {
        let epath = format!("{path}.userValidationRules[{i}].expression");
        if expression.is_empty() {
            errors.push(required(&epath, ""));
            continue;
        }
        if seen.contains(&expression.as_str()) {
            errors.push(duplicate(&epath, expression));
            continue;
        }
        seen.push(expression);
        match compile(&users, expression, ReturnType::Bool, &epath) {
            Ok(e) => mapper.user_validation_rules.push((e, message.clone())),
            Err(e) => errors.push(e),
        }
    }
    mapper
}

/// kube's `validatePrefixClaimOrExpression`.
fn prefixed(
    claims: &ExpressionCompiler,
    m: &PrefixedClaimOrExpression,
    path: &str,
    claim_or_expression_required: bool,
    errors: &mut Vec<String>,
) -> Option<Expression> {
    match (m.claim.is_empty(), m.expression.is_empty()) {
        (false, false) => errors.push(invalid(path, "", "claim and expression can't both be set")),
        (true, true) if claim_or_expression_required => errors.push(required(path, "claim or expression is required")),
        (true, false) => {
            if let Some(prefix) = &m.prefix {
                errors.push(invalid(&format!("{path}.prefix"), prefix, "may not be specified when expression is set"));
            }
            match compile(claims, &m.expression, ReturnType::Any, &format!("{path}.expression")) {
                Ok(e) => return Some(e),
                Err(e) => errors.push(e),
            }
        }
        (false, true) if m.prefix.is_none() => {
            errors.push(required(
                &format!("{path}.prefix"),
                "prefix is required when claim is set. It can be set to an empty string to disable prefixing",
            ));
        }
        _ => {}
    }
    None
}

/// Compiles with kube's authentication compiler's messages as field errors.
fn compile(compiler: &ExpressionCompiler, expression: &str, ret: ReturnType, path: &str) -> Result<Expression, String> {
    compiler.compile(expression, ret, Declarations::default()).map_err(|CompileError { internal, detail }| {
        if internal {
            return format!("{path}: Internal error: {detail}");
        }
        // kube's authentication compiler names only the wanted type.
        let detail = match detail.split_once(" but got ") {
            Some((want, _)) if want.starts_with("must evaluate to") => want.to_owned(),
            _ => detail,
        };
        invalid(path, expression, &detail)
    })
}

/// kube's `validateURL`, on Go's url.Parse reading of the parts it checks.
fn validate_url(url: &str, disallowed: &[String], path: &str, errors: &mut Vec<String>) {
    if disallowed.iter().any(|d| d == url) {
        let mut sorted = disallowed.to_vec();
        sorted.sort();
        sorted.dedup();
        errors.push(invalid(path, url, &format!("URL must not overlap with disallowed issuers: [{}]", sorted.join(" "))));
    }
    if url.chars().any(|c| c.is_control()) {
        errors.push(invalid(path, url, &format!("parse {url:?}: net/url: invalid control character in URL")));
        return;
    }
    if url.starts_with(':') {
        errors.push(invalid(path, url, &format!("parse {url:?}: missing protocol scheme")));
        return;
    }
    let (rest, fragment) = url.split_once('#').map_or((url, ""), |(r, f)| (r, f));
    let (rest, query) = rest.split_once('?').map_or((rest, ""), |(r, q)| (r, q));
    let scheme = match rest.split_once(':') {
        Some((s, _))
            if !s.is_empty()
                && s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && s.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)) =>
        {
            s.to_ascii_lowercase()
        }
        _ => String::new(),
    };
    let authority = rest.split_once("://").map(|(_, r)| r.split('/').next().unwrap_or("")).unwrap_or("");
    if scheme != "https" {
        errors.push(invalid(path, url, "URL scheme must be https"));
    }
    if authority.contains('@') {
        errors.push(invalid(path, url, "URL must not contain a username or password"));
    }
    if !query.is_empty() {
        errors.push(invalid(path, url, "URL must not contain a query"));
    }
    if !fragment.is_empty() {
        errors.push(invalid(path, url, "URL must not contain a fragment"));
    }
}

/// apimachinery's `IsDomainPrefixedPath`.
fn domain_prefixed_path(path: &str, key: &str, errors: &mut Vec<String>) {
    if key.is_empty() {
        errors.push(required(path, ""));
        return;
    }
    let Some((host, rest)) = key.split_once('/').filter(|(h, r)| !h.is_empty() && !r.is_empty()) else {
        errors.push(invalid(path, key, "must be a domain-prefixed path (such as \"acme.io/foo\")"));
        return;
    };
    for problem in kapi_apimachinery::validation::is_dns1123_subdomain(host) {
        errors.push(invalid(path, host, &problem));
    }
    if !rest.chars().all(|c| c.is_ascii_alphanumeric() || "/-._~%!$&'()*+,;=:".contains(c)) {
        errors.push(invalid(path, rest, "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')"));
    }
}

fn is_kubernetes_domain(key: &str) -> bool {
    let Some((domain, _)) = key.split_once('/') else {
        return false;
    };
    domain == "kubernetes.io" || domain.ends_with(".kubernetes.io") || domain == "k8s.io" || domain.ends_with(".k8s.io")
}

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
