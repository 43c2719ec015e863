//! `spec.conversion`: strategy None or Webhook, the webhook's client config (URL or service,
//! CA bundle) and the ConversionReview versions it understands (kube's
//! `validateCustomResourceConversion` and `k8s.io/apiserver/pkg/util/webhook`). Paths use the
//! internal field names kube reports (`webhookClientConfig`, `conversionReviewVersions`).

use kapi_apimachinery::validation::{is_dns1035_label, is_dns1123_subdomain};
use kapi_apimachinery::Cause;
use serde_json::Value;

use super::crd::enum_strings;
use super::{forbidden, get_arr, get_some, get_str, invalid, invalid_str, required, Opts, Path};

/// ConversionReview versions this server can send.
const ACCEPTED_REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
const FORM: &str = "; desired format: https://host[/path]";

/// Whether a review-version list names one this server speaks (an empty list counts, so that
/// an update does not newly require it).
pub(crate) fn has_valid_review_version_or_empty(versions: &[Value]) -> bool {
    versions.is_empty() || versions.iter().any(|v| ACCEPTED_REVIEW_VERSIONS.contains(&v.as_str().unwrap_or("")))
}

/// kube's `validateCustomResourceConversion` on the v1 `spec.conversion`.
pub(crate) fn validate_conversion(conv: Option<&Value>, path: &Path, opts: &Opts) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(conv) = conv else {
        return causes;
    };
    let strategy = get_str(conv, "strategy");
    causes.extend(enum_strings(&path.child("strategy"), strategy, &["None", "Webhook"]));
    let webhook = get_some(conv, "webhook");
    let client_config = webhook.and_then(|w| get_some(w, "clientConfig"));
    let review_versions = webhook.map(|w| get_arr(w, "conversionReviewVersions")).unwrap_or(&[]);
    let cc_path = path.child("webhookClientConfig");
    if strategy == "Webhook" {
        match client_config {
            None => causes.push(required(&cc_path, "required when strategy is set to Webhook")),
            Some(cc) => {
                let (url, service) = (get_some(cc, "url"), get_some(cc, "service"));
                match (url, service) {
                    (Some(u), None) => {
                        causes.extend(validate_webhook_url(&cc_path.child("url"), u.as_str().unwrap_or("")))
                    }
                    (None, Some(s)) => causes.extend(validate_webhook_service(&cc_path.child("service"), s)),
                    _ => causes.push(required(&cc_path, "exactly one of url or service is required")),
                }
                let ca = get_str(cc, "caBundle");
                if !ca.is_empty() && !opts.allow_invalid_ca_bundle {
                    causes.extend(validate_ca_bundle(&cc_path.child("caBundle"), ca));
                }
            }
        }
        causes.extend(validate_review_versions(
            review_versions,
            opts.require_recognized_conversion_review_version,
            &path.child("conversionReviewVersions"),
        ));
    } else {
        if client_config.is_some() {
            causes.push(forbidden(&cc_path, "should not be set when strategy is not set to Webhook"));
        }
        if !review_versions.is_empty() {
            causes.push(forbidden(
                &path.child("conversionReviewVersions"),
                "should not be set when strategy is not set to Webhook",
            ));
        }
    }
    causes
}

fn validate_review_versions(versions: &[Value], require_recognized: bool, path: &Path) -> Vec<Cause> {
    if versions.is_empty() {
        return vec![required(path, "")];
    }
    let mut causes = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let mut has_accepted = false;
    for (i, v) in versions.iter().enumerate() {
        let s = v.as_str().unwrap_or("");
        if seen.contains(&s) {
            causes.push(invalid_str(&path.index(i), s, "duplicate version"));
            continue;
        }
        seen.push(s);
        for e in is_dns1035_label(s) {
            causes.push(invalid_str(&path.index(i), s, &e));
        }
        has_accepted |= ACCEPTED_REVIEW_VERSIONS.contains(&s);
    }
    if require_recognized && !has_accepted {
        causes.push(invalid(
            path,
            &Value::Array(versions.to_vec()),
            &format!("must include at least one of {}", ACCEPTED_REVIEW_VERSIONS.join(", ")),
        ));
    }
    causes
}

/// The parts of Go's `url.Parse` the webhook rules look at.
struct ParsedUrl {
    scheme: String,
    user: Option<String>,
    host: String,
    query: String,
    fragment: String,
}

fn parse_url(raw: &str) -> Result<ParsedUrl, String> {
    if raw.chars().any(|c| (c as u32) < 0x20 || c as u32 == 0x7f) {
        return Err(format!("parse {raw:?}: net/url: invalid control character in URL"));
    }
    let (rest, fragment) = match raw.split_once('#') {
        Some((r, f)) => (r, f.to_string()),
        None => (raw, String::new()),
    };
    let mut scheme = String::new();
    let mut rest = rest;
    if let Some(colon) = rest.find(':') {
        let candidate = &rest[..colon];
        let valid = candidate.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && candidate.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
        if colon == 0 {
            return Err(format!("parse {raw:?}: missing protocol scheme"));
        }
        if valid {
            scheme = candidate.to_ascii_lowercase();
            rest = &rest[colon + 1..];
        }
    }
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, q.to_string()),
        None => (rest, String::new()),
    };
    let (mut user, mut host) = (None, String::new());
    if let Some(after) = rest.strip_prefix("//") {
        let authority = after.split('/').next().unwrap_or("");
        match authority.rsplit_once('@') {
            Some((u, h)) => {
                user = Some(u.to_string());
                host = h.to_string();
            }
            None => host = authority.to_string(),
        }
    }
    Ok(ParsedUrl { scheme, user, host, query, fragment })
}

/// kube's `ValidateWebhookURL` with https forced.
fn validate_webhook_url(path: &Path, url: &str) -> Vec<Cause> {
    let u = match parse_url(url) {
        Ok(u) => u,
        Err(e) => return vec![required(path, &format!("url must be a valid URL: {e}{FORM}"))],
    };
    let mut causes = Vec::new();
    if u.scheme != "https" {
        causes.push(invalid_str(path, &u.scheme, &format!("'https' is the only allowed URL scheme{FORM}")));
    }
    if u.host.is_empty() {
        causes.push(invalid_str(path, &u.host, &format!("host must be specified{FORM}")));
    }
    if let Some(user) = &u.user {
        causes.push(invalid_str(path, user, "user information is not permitted in the URL"));
    }
    if !u.fragment.is_empty() {
        causes.push(invalid_str(path, &u.fragment, "fragments are not permitted in the URL"));
    }
    if !u.query.is_empty() {
        causes.push(invalid_str(path, &u.query, "query parameters are not permitted in the URL"));
    }
    causes
}

/// kube's `ValidateWebhookService`: name and namespace set, a valid port, and a path of
/// DNS-subdomain segments.
fn validate_webhook_service(path: &Path, svc: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if get_str(svc, "name").is_empty() {
        causes.push(required(&path.child("name"), ""));
    }
    if get_str(svc, "namespace").is_empty() {
        causes.push(required(&path.child("namespace"), ""));
    }
    let port = get_some(svc, "port").and_then(Value::as_i64).unwrap_or(0);
    if !(1..=65535).contains(&port) {
        causes.push(invalid(
            &path.child("port"),
            &Value::from(port),
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let Some(url_path) = get_some(svc, "path").and_then(Value::as_str) else {
        return causes;
    };
    let ppath = path.child("path");
    if url_path == "/" || url_path.is_empty() {
        return causes;
    }
    if url_path == "//" {
        causes.push(invalid_str(&ppath, url_path, "segment[0] may not be empty"));
        return causes;
    }
    if !url_path.starts_with('/') {
        causes.push(invalid_str(&ppath, url_path, "must start with a '/'"));
    }
    let mut check = url_path.get(1..).unwrap_or("");
    check = check.strip_suffix('/').unwrap_or(check);
    for (i, step) in check.split('/').enumerate() {
        if step.is_empty() {
            causes.push(invalid_str(&ppath, url_path, &format!("segment[{i}] may not be empty")));
            continue;
        }
        for failure in is_dns1123_subdomain(step) {
            causes.push(invalid_str(&ppath, url_path, &format!("segment[{i}]: {failure}")));
        }
    }
    causes
}

/// kube's `ValidateCABundle`: the bundle must hold at least one PEM certificate block. The
/// certificate's DER is not parsed here (no X.509 parser in this crate).
fn validate_ca_bundle(path: &Path, ca_base64: &str) -> Vec<Cause> {
    let ok = decode_base64(ca_base64).is_some_and(|bytes| {
        let text = String::from_utf8_lossy(&bytes);
        text.split("-----BEGIN CERTIFICATE-----").skip(1).any(|block| {
            block.split_once("-----END CERTIFICATE-----").is_some_and(|(body, _)| {
                decode_base64(&body.split_whitespace().collect::<String>()).is_some_and(|d| !d.is_empty())
            })
        })
    });
    if ok {
        Vec::new()
    } else {
        vec![invalid_str(path, ca_base64, "unable to load root certificates: unable to parse bytes as PEM block")]
    }
}

/// Standard base64 with padding, as Go encodes `[]byte` in JSON.
fn decode_base64(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let s = s.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        if chunk.len() == 1 {
            return None;
        }
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= val(c)? << (18 - 6 * i);
        }
        out.push((acc >> 16) as u8);
        if chunk.len() > 2 {
            out.push((acc >> 8) as u8);
        }
        if chunk.len() > 3 {
            out.push(acc as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trip() {
        assert_eq!(decode_base64("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(decode_base64("aGk=").unwrap(), b"hi");
        assert!(decode_base64("a").is_none());
        assert!(decode_base64("a$==").is_none());
    }

    #[test]
    fn url_parts() {
        let u = parse_url("https://user@host:8443/p?q=1#f").unwrap();
        assert_eq!(
            (u.scheme.as_str(), u.host.as_str(), u.query.as_str(), u.fragment.as_str()),
            ("https", "host:8443", "q=1", "f")
        );
        assert_eq!(u.user.as_deref(), Some("user"));
        assert_eq!(parse_url(":x").err().unwrap(), "parse \":x\": missing protocol scheme");
    }
}
