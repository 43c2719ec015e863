//! kube's validation of the JWT authenticators: field errors, CEL compilation, URLs and claim names.

use super::*;

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
        if let Err(e) = crate::oidc::fetch::pem_certificates(a.certificate_authority.as_bytes()) {
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
