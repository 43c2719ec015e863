//! List continue tokens in kube-apiserver's format.
//!
//! A token is `base64.RawURLEncoding` of `{"v":"meta.k8s.io/v1","rv":<rev>,"start":"<key>\u0000"}`
//! where `<key>` is the last returned key relative to the resource prefix (e.g. `default/web`
//! under `/registry/pods/`). The trailing NUL makes `start` the smallest key after the last
//! one returned. Clients treat tokens as opaque, but matching the format keeps tokens portable
//! between kapi replicas and familiar to anyone debugging with kube tools.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::status::ApiError;

const TOKEN_VERSION: &str = "meta.k8s.io/v1";

/// A decoded token: the snapshot revision and where the next page starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinueToken {
    /// Store revision of the list's snapshot; every page reads at this revision.
    pub revision: u64,
    /// The last key already returned, relative to the resource prefix (no leading `/`, no
    /// trailing NUL): the next page holds the keys strictly after `prefix + start_after_key`.
    pub start_after_key: String,
}

#[derive(Serialize, Deserialize)]
struct Wire {
    #[serde(default)]
    v: String,
    #[serde(default)]
    rv: i64,
    #[serde(default)]
    start: String,
}

/// Encodes the token for a page that ended at `last_key_relative`.
pub fn encode(revision: u64, last_key_relative: &str) -> String {
    let wire = Wire {
        v: TOKEN_VERSION.to_string(),
        // kube's field is an int64; revisions stay far below i64::MAX in practice.
        rv: i64::try_from(revision).unwrap_or(i64::MAX),
        start: format!("{}\u{0}", last_key_relative.trim_start_matches('/')),
    };
    // Serializing a struct of strings and an integer cannot fail.
    let json = serde_json::to_vec(&wire).unwrap_or_default();
    URL_SAFE_NO_PAD.encode(json)
}

fn invalid(detail: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("invalid continue token: {detail}"))
}

/// Decodes a client-supplied token; anything malformed is 400 with kube's wording.
pub fn decode(token: &str) -> Result<ContinueToken, ApiError> {
    let data = URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|e| invalid(format!("continue key is not valid: {}", base64_error(&e))))?;
    let wire: Wire = serde_json::from_slice(&data).map_err(|e| invalid(format!("continue key is not valid: {e}")))?;
    if wire.v != TOKEN_VERSION {
        return Err(invalid(format!(
            "continue key is not valid: server does not recognize this encoded version {:?}",
            wire.v
        )));
    }
    if wire.rv == 0 {
        return Err(invalid(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    if wire.start.is_empty() {
        return Err(invalid("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"));
    }
    let revision = u64::try_from(wire.rv).map_err(|_| {
        invalid("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
    })?;
    // Defend against path traversal: the key must already be in clean form, so that appending
    // it to the resource prefix cannot reach above that prefix.
    let key = wire.start.strip_prefix('/').unwrap_or(&wire.start);
    if !is_clean(key) {
        return Err(invalid(format!("continue key is not valid: {}", wire.start)));
    }
    let start_after_key = key.strip_suffix('\u{0}').unwrap_or(key).to_string();
    Ok(ContinueToken { revision, start_after_key })
}

/// True when `/key` is what Go's `path.Clean` would return for it.
fn is_clean(key: &str) -> bool {
    if key.is_empty() || key.ends_with('/') {
        return key.is_empty();
    }
    key.split('/').all(|seg| !seg.is_empty() && seg != "." && seg != "..")
}

fn base64_error(e: &base64::DecodeError) -> String {
    match e {
        base64::DecodeError::InvalidByte(offset, _) => {
            format!("illegal base64 data at input byte {offset}")
        }
        base64::DecodeError::InvalidLength(len) => {
            format!("illegal base64 data at input byte {len}")
        }
        base64::DecodeError::InvalidLastSymbol(offset, _) => {
            format!("illegal base64 data at input byte {offset}")
        }
        base64::DecodeError::InvalidPadding => "illegal base64 data: invalid padding".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let t = encode(42, "default/web-1");
        assert!(!t.contains('='), "raw encoding has no padding");
        let d = decode(&t).unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(d, ContinueToken { revision: 42, start_after_key: "default/web-1".into() });
    }

    #[test]
    fn wire_format_matches_kube() {
        let t = encode(7, "ns/a");
        let raw = URL_SAFE_NO_PAD.decode(&t).unwrap_or_default();
        assert_eq!(String::from_utf8_lossy(&raw), "{\"v\":\"meta.k8s.io/v1\",\"rv\":7,\"start\":\"ns/a\\u0000\"}");
        // A token as kube-apiserver would mint it decodes the same way.
        let kube = URL_SAFE_NO_PAD.encode(br#"{"v":"meta.k8s.io/v1","rv":7,"start":"ns/a\u0000"}"#);
        assert_eq!(decode(&kube).ok(), Some(ContinueToken { revision: 7, start_after_key: "ns/a".into() }));
    }

    fn err(token: &str) -> String {
        match decode(token) {
            Ok(t) => panic!("{token:?} decoded to {t:?}"),
            Err(e) => {
                assert_eq!(e.code, 400);
                e.message
            }
        }
    }

    #[test]
    fn garbage_is_bad_request() {
        assert!(err("!!!!")
            .starts_with("invalid continue token: continue key is not valid: illegal base64 data at input byte 0"));
        assert!(
            err(&URL_SAFE_NO_PAD.encode("not json")).starts_with("invalid continue token: continue key is not valid: ")
        );
        assert_eq!(
            err(&URL_SAFE_NO_PAD.encode(r#"{"v":"v2","rv":1,"start":"a"}"#)),
            "invalid continue token: continue key is not valid: server does not recognize this encoded version \"v2\""
        );
        assert!(err(&URL_SAFE_NO_PAD.encode(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#))
            .contains("incorrect encoded start resourceVersion"));
        assert!(err(&URL_SAFE_NO_PAD.encode(r#"{"v":"meta.k8s.io/v1","rv":3,"start":""}"#))
            .contains("encoded start key empty"));
        assert_eq!(
            err(&URL_SAFE_NO_PAD.encode(r#"{"v":"meta.k8s.io/v1","rv":3,"start":"../secrets/x"}"#)),
            "invalid continue token: continue key is not valid: ../secrets/x"
        );
        assert!(
            err(&URL_SAFE_NO_PAD.encode(r#"{"v":"meta.k8s.io/v1","rv":-3,"start":"a"}"#)).contains("resourceVersion")
        );
    }
}
