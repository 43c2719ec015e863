//! Service-account issuer discovery (kube's `openidmetadata.go`): the OIDC discovery document
//! and the JWKS that let other systems (cloud IAM, Vault) verify service-account tokens.

use serde_json::{json, Value};

use super::keys::VerificationKey;

/// Where the discovery document is served.
pub const OPENID_CONFIG_PATH: &str = "/.well-known/openid-configuration";
/// Where the key set is served.
pub const JWKS_PATH: &str = "/openid/v1/jwks";
/// The `Cache-Control` both documents are served with (kube overrides its global
/// `private, no-cache` for them).
pub const CACHE_CONTROL: &str = "public, max-age=3600";
/// The content type of the key set (RFC 7517 §8.5.1); the discovery document is
/// `application/json`.
pub const JWKS_CONTENT_TYPE: &str = "application/jwk-set+json";

/// Why discovery cannot be served. kube logs these and leaves the endpoints out rather than
/// failing to start.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DiscoveryError {
    /// No issuer configured.
    #[error("empty issuer URL")]
    EmptyIssuer,
    /// Neither `--service-account-jwks-uri` nor an external address to derive it from.
    #[error("either the JWKS URI or the default external address, or both, must be set")]
    NoJwksUri,
    /// The issuer is not a valid OIDC issuer URL.
    #[error("issuer URL must use https scheme, got: {0}")]
    IssuerNotHttps(String),
    /// OIDC forbids a query in the issuer.
    #[error("issuer URL may not include a query, got: {0}")]
    IssuerQuery(String),
    /// OIDC forbids a fragment in the issuer.
    #[error("issuer URL may not include a fragment, got: {0}")]
    IssuerFragment(String),
    /// The configured JWKS URI is not https.
    #[error("jwksURI requires https scheme, parsed as: {0}")]
    JwksNotHttps(String),
    /// There is no key to publish.
    #[error("no keys provided for validating keyset")]
    NoKeys,
}

fn is_https(url: &str) -> bool {
    url.get(..8).is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
}

/// The discovery document and key set, rendered once (keys are static for the process).
#[derive(Clone, Debug, PartialEq)]
pub struct OpenIdMetadata {
    configuration: Value,
    jwks: Value,
}

impl OpenIdMetadata {
    /// kube's `NewOpenIDMetadataProvider`: `issuer_url` is the first `--service-account-issuer`
    /// and must be an https URL without query or fragment; `jwks_uri` is
    /// `--service-account-jwks-uri` (https) or, when absent, `https://<external_address>/openid/v1/jwks`.
    pub fn new(
        issuer_url: &str,
        jwks_uri: Option<&str>,
        external_address: Option<&str>,
        keys: &[VerificationKey],
    ) -> Result<Self, DiscoveryError> {
        if issuer_url.is_empty() {
            return Err(DiscoveryError::EmptyIssuer);
        }
        let jwks_uri = jwks_uri.filter(|u| !u.is_empty());
        let external_address = external_address.filter(|a| !a.is_empty());
        if jwks_uri.is_none() && external_address.is_none() {
            return Err(DiscoveryError::NoJwksUri);
        }
        if !is_https(issuer_url) {
            return Err(DiscoveryError::IssuerNotHttps(issuer_url.to_owned()));
        }
        if issuer_url.contains('?') {
            return Err(DiscoveryError::IssuerQuery(issuer_url.to_owned()));
        }
        if issuer_url.contains('#') {
            return Err(DiscoveryError::IssuerFragment(issuer_url.to_owned()));
        }
        let jwks_uri = match (jwks_uri, external_address) {
            (Some(uri), _) if !is_https(uri) => return Err(DiscoveryError::JwksNotHttps(uri.to_owned())),
            (Some(uri), _) => uri.to_owned(),
            (None, Some(address)) => format!("https://{address}{JWKS_PATH}"),
            (None, None) => return Err(DiscoveryError::NoJwksUri),
        };
        if keys.is_empty() {
            return Err(DiscoveryError::NoKeys);
        }
        Ok(OpenIdMetadata { configuration: openid_configuration(issuer_url, &jwks_uri, keys), jwks: jwks(keys) })
    }

    /// The document for [`OPENID_CONFIG_PATH`].
    pub fn configuration(&self) -> &Value {
        &self.configuration
    }

    /// The key set for [`JWKS_PATH`].
    pub fn jwks(&self) -> &Value {
        &self.jwks
    }
}

/// kube's minimal OIDC provider metadata: issuer, jwks_uri, `response_types_supported`
/// (`id_token`), `subject_types_supported` (`public`), and the sorted distinct algorithms of
/// the keys as `id_token_signing_alg_values_supported`. No authorization endpoint: relying
/// parties only verify tokens.
pub fn openid_configuration(issuer: &str, jwks_uri: &str, keys: &[VerificationKey]) -> Value {
    let mut algorithms: Vec<&str> = keys.iter().map(|k| k.algorithm().as_str()).collect();
    algorithms.sort_unstable();
    algorithms.dedup();
    json!({
        "issuer": issuer,
        "jwks_uri": jwks_uri,
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": algorithms,
    })
}

/// The JSON Web Key Set of every verification key, public parts only.
pub fn jwks(keys: &[VerificationKey]) -> Value {
    json!({ "keys": keys.iter().map(VerificationKey::jwk).collect::<Vec<_>>() })
}
