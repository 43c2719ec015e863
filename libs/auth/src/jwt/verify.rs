//! go-oidc's `IDTokenVerifier.Verify` up to the signature, and kube's peek at `iss`: the cheap
//! checks (claims shape, issuer, audience, expiry, not-before, algorithm) run before any key is
//! looked at, so that a token that cannot be valid never makes kapi fetch keys.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use super::{decode_segment, go_json_error, Algorithm, Compact};

const GOOGLE_ISSUER: &str = "https://accounts.google.com";
const GOOGLE_ISSUER_NO_SCHEME: &str = "accounts.google.com";

/// go-oidc's leeway for `nbf` (clock skew between the issuer and the server); `exp` has none
/// and `iat` is not checked, as in go-oidc.
pub const NOT_BEFORE_LEEWAY: Duration = Duration::from_secs(60);

/// kube's `untrustedIssuer`: the `iss` of a compact JWT, read without verifying anything, so
/// that the authenticator of that issuer (and only it) looks at the token.
pub fn untrusted_issuer(token: &str) -> Result<String, String> {
    if token.trim_start().starts_with('{') {
        return Err("token is not compact JWT".into());
    }
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() != 3 {
        return Err("malformed token".into());
    }
    let payload = decode_segment(parts[1]).map_err(|e| format!("error decoding token: {e}"))?;
    let claims: Value = serde_json::from_slice(&payload).map_err(|e| format!("while unmarshaling token: {}", go_json_error(&e)))?;
    let iss = match claims.get("iss") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(format!("while unmarshaling token: {}", unmarshal_error(other, "iss", "string"))),
    };
    Ok(if iss == GOOGLE_ISSUER_NO_SCHEME { GOOGLE_ISSUER.to_owned() } else { iss })
}

/// What a token is checked against.
#[derive(Clone, Debug)]
pub struct Verifier<'a> {
    /// The issuer URL `iss` must equal.
    pub issuer: &'a str,
    /// The audiences; `aud` must contain one.
    pub audiences: &'a [String],
    /// The algorithms the token may be signed with.
    pub algorithms: &'a [Algorithm],
}

/// A token whose claims passed the checks; its signature is still to be verified.
#[derive(Clone, Debug)]
pub struct IdToken {
    /// All the claims.
    pub claims: Map<String, Value>,
    /// `aud`, as a list.
    pub audience: Vec<String>,
    /// The signing algorithm of the header.
    pub alg: Algorithm,
}

/// Go's `%q` of a `[]string`.
pub fn go_quoted(items: &[String]) -> String {
    let q: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", q.join(" "))
}


fn unmarshal_error(v: &Value, field: &str, go_type: &str) -> String {
    format!("json: cannot unmarshal {} into Go struct field .{field} of type {go_type}", kapi_apimachinery::patch::json_kind(v))
}

/// A NumericDate claim as go-oidc's `jsonTime` reads it: whole seconds (fractions dropped).
fn numeric_date(claims: &Map<String, Value>, name: &str) -> Result<Option<i64>, String> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(Some(n.as_i64().unwrap_or_else(|| n.as_f64().unwrap_or(0.0) as i64))),
        Some(other) => Err(unmarshal_error(other, name, "float64")),
    }
}

/// Formats a time as Go's `time.Time.String()` does in UTC (`2006-01-02 15:04:05.999999999
/// +0000 UTC`), which go-oidc's messages print.
pub fn go_time(secs: i64, nanos: u32) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let mut out = format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60);
    if nanos > 0 {
        let frac = format!("{nanos:09}");
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
    out.push_str(" +0000 UTC");
    out
}

/// Seconds since 1970 of Go's zero `time.Time` (0001-01-01), which a missing `exp` reads as.
const GO_ZERO_TIME: i64 = -62_135_596_800;

impl Verifier<'_> {
    /// go-oidc's checks before the signature, in its order: the claims parse, `iss` is the
    /// issuer, `aud` holds the audience (a single configured audience; several are checked
    /// after the signature, as kube does), `exp` is not past, `nbf` (if any) is not more than
    /// [`NOT_BEFORE_LEEWAY`] ahead, and `alg` is allowed. Errors are go-oidc's.
    pub fn check_claims(&self, jws: &Compact<'_>, now: SystemTime) -> Result<IdToken, String> {
        let claims: Map<String, Value> =
            serde_json::from_slice(&jws.payload).map_err(|e| format!("oidc: failed to unmarshal claims: {}", go_json_error(&e)))?;
        let failed = |e: String| format!("oidc: failed to unmarshal claims: {e}");
        let text = |name: &str| -> Result<String, String> {
            match claims.get(name) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(other) => Err(failed(unmarshal_error(other, name, "string"))),
            }
        };
        let issuer = text("iss")?;
        text("sub")?;
        let audience: Vec<String> = match claims.get("aud") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) if a.iter().all(Value::is_string) => a.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
            Some(other) => return Err(failed(unmarshal_error(other, "aud", "[]string"))),
        };
        let expiry = numeric_date(&claims, "exp").map_err(failed)?;
        numeric_date(&claims, "iat").map_err(failed)?;
        let not_before = numeric_date(&claims, "nbf").map_err(failed)?;
        distributed_sources(&claims)?;

        if issuer != self.issuer && !(self.issuer == GOOGLE_ISSUER && issuer == GOOGLE_ISSUER_NO_SCHEME) {
            return Err(format!("oidc: id token issued by a different provider, expected {:?} got {:?}", self.issuer, issuer));
        }
        if let [only] = self.audiences {
            if !audience.contains(only) {
                return Err(format!("oidc: expected audience {only:?} got {}", go_quoted(&audience)));
            }
        }
        let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        let (now_secs, now_nanos) = (since.as_secs() as i64, since.subsec_nanos());
        let exp = expiry.unwrap_or(GO_ZERO_TIME);
        // time.Before: exp < now, to the nanosecond.
        if exp < now_secs || (exp == now_secs && now_nanos > 0) {
            return Err(format!("oidc: token is expired (Token Expiry: {})", go_time(exp, 0)));
        }
        if let Some(nbf) = not_before {
            let leeway = NOT_BEFORE_LEEWAY.as_secs() as i64;
            if now_secs + leeway < nbf {
                return Err(format!("oidc: current time {} before the nbf (not before) time: {}", go_time(now_secs, now_nanos), go_time(nbf, 0)));
            }
        }
        let alg = Algorithm::parse(jws.alg()).filter(|a| self.algorithms.contains(a)).ok_or_else(|| {
            let names: Vec<String> = self.algorithms.iter().map(|a| a.name().to_owned()).collect();
            format!("oidc: id token signed with unsupported algorithm, expected {} got {:?}", go_quoted(&names), jws.alg())
        })?;
        Ok(IdToken { claims, audience, alg })
    }

    /// kube's `verifyAudience` after the signature: `aud` must hold one of the audiences.
    pub fn check_audience(&self, token: &IdToken) -> Result<(), String> {
        if self.audiences.is_empty() {
            return Err("oidc: invalid configuration, audiences cannot be empty".into());
        }
        if token.audience.iter().any(|a| self.audiences.contains(a)) {
            return Ok(());
        }
        let mut sorted = self.audiences.to_vec();
        sorted.sort();
        Err(format!("oidc: expected audience in {} got {}", go_quoted(&sorted), go_quoted(&token.audience)))
    }
}

/// go-oidc's check of distributed claims references (`_claim_names` naming `_claim_sources`).
fn distributed_sources(claims: &Map<String, Value>) -> Result<(), String> {
    let Some(names) = claims.get("_claim_names").and_then(Value::as_object) else {
        return Ok(());
    };
    let sources = claims.get("_claim_sources").and_then(Value::as_object);
    for source in names.values() {
        let source = source.as_str().unwrap_or("");
        if source.is_empty() {
            return Err("oidc: failed to obtain source from claim name".into());
        }
        if !sources.is_some_and(|s| s.contains_key(source)) {
            return Err("oidc: source does not exist".into());
        }
    }
    Ok(())
}
