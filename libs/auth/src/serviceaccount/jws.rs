//! Compact JWS, the way go-jose serializes and parses the tokens kube issues: header
//! `{"alg":...,"kid":...}`, unpadded base64url segments, the signature over the first two
//! segments exactly as received.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::Deserialize;

use super::keys::{KeyError, SigningKey};

/// A parsed, not yet verified, compact JWS.
#[derive(Debug)]
pub(crate) struct Jws<'a> {
    pub alg: String,
    pub kid: String,
    pub signing_input: &'a str,
    pub payload: Vec<u8>,
    pub signature: Vec<u8>,
}

#[derive(Deserialize)]
struct Header {
    #[serde(default)]
    alg: Option<String>,
    #[serde(default)]
    kid: Option<String>,
}

/// Splits and decodes a compact JWS; `None` when it is not one (kube then treats the token as
/// not applicable rather than invalid).
pub(crate) fn parse(token: &str) -> Option<Jws<'_>> {
    let (signing_input, signature) = token.rsplit_once('.')?;
    let (header, payload) = signing_input.split_once('.')?;
    if payload.contains('.') {
        return None;
    }
    let header: Header = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).ok()?).ok()?;
    Some(Jws {
        alg: header.alg.unwrap_or_default(),
        kid: header.kid.unwrap_or_default(),
        signing_input,
        payload: URL_SAFE_NO_PAD.decode(payload).ok()?,
        signature: URL_SAFE_NO_PAD.decode(signature).ok()?,
    })
}

/// kube's `hasCorrectIssuer` peek: the `iss` of an unverified compact JWS, `None` when the
/// token is JSON, has not exactly three segments, or its payload is not a JSON object with a
/// string (or absent) `iss`. The answer only routes the token to the right authenticator; it
/// is checked again after the signature.
pub(crate) fn unverified_issuer(token: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Peek {
        #[serde(default)]
        iss: Option<String>,
    }
    if token.trim_start().starts_with('{') {
        return None;
    }
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    let peek: Peek = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
    Some(peek.iss.unwrap_or_default())
}

/// Signs `payload` (JSON claims) with `key` into a compact JWS.
pub(crate) fn sign(key: &SigningKey, payload: &[u8]) -> Result<String, KeyError> {
    let header = serde_json::json!({ "alg": key.algorithm().as_str(), "kid": key.kid() });
    let mut token = URL_SAFE_NO_PAD.encode(header.to_string());
    token.push('.');
    token.push_str(&URL_SAFE_NO_PAD.encode(payload));
    let signature = key.sign(token.as_bytes())?;
    token.push('.');
    token.push_str(&URL_SAFE_NO_PAD.encode(signature));
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        URL_SAFE_NO_PAD.encode(s)
    }

    #[test]
    fn peeks_at_the_issuer_like_kube() {
        let token = format!("{}.{}.sig", b64("{}"), b64(r#"{"iss":"https://a","sub":"x"}"#));
        assert_eq!(unverified_issuer(&token).as_deref(), Some("https://a"));
        assert_eq!(unverified_issuer(&format!("{}.{}.s", b64("{}"), b64("{}"))).as_deref(), Some(""));
        assert_eq!(unverified_issuer(&format!("{}.{}", b64("{}"), b64(r#"{"iss":"a"}"#))), None);
        assert_eq!(unverified_issuer(&format!("a.{}.c.d", b64(r#"{"iss":"a"}"#))), None);
        assert_eq!(unverified_issuer(&format!("a.{}=.c", b64(r#"{"iss":"a"}"#))), None);
        assert_eq!(unverified_issuer(&format!("a.{}.c", b64(r#"{"iss":1}"#))), None);
        assert_eq!(unverified_issuer(&format!("a.{}.c", b64("[1]"))), None);
        assert_eq!(unverified_issuer(r#" {"iss":"a"}.b.c"#), None);
        assert_eq!(unverified_issuer("opaque-token-from-a-file"), None);
    }

    #[test]
    fn parses_compact_serialization() {
        let token = format!("{}.{}.{}", b64(r#"{"alg":"ES256","kid":"k1"}"#), b64("{}"), b64("sig"));
        let jws = parse(&token).unwrap();
        assert_eq!((jws.alg.as_str(), jws.kid.as_str()), ("ES256", "k1"));
        assert_eq!(jws.signature, b"sig");
        assert_eq!(jws.payload, b"{}");
        assert_eq!(jws.signing_input, &token[..token.rfind('.').unwrap()]);
        assert!(parse("a.b").is_none());
        assert!(parse(&format!("{}.{}.{}.x", b64("{}"), b64("{}"), b64("s"))).is_none());
        assert!(parse(&format!("{}.{}.{}", b64("not json"), b64("{}"), b64("s"))).is_none());
        assert!(parse(&format!("{}.{}.!!", b64("{}"), b64("{}"))).is_none());
    }
}
