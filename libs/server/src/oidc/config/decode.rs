//! Reading an AuthenticationConfiguration document into its types, with kube's strict-decoding errors.

use super::*;

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
pub(super) fn decode(doc: &Value) -> Result<(Vec<JwtAuthenticatorConfig>, Option<AnonymousSettings>), String> {
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
