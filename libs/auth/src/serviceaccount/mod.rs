//! kube's bound service-account tokens: keys (`--service-account-signing-key-file`,
//! `--service-account-key-file`), the [`TokenIssuer`] behind TokenRequest, the
//! [`ServiceAccountTokenAuthenticator`] that accepts the tokens back, and issuer discovery
//! (`/.well-known/openid-configuration`, `/openid/v1/jwks`).
//!
//! Tokens are byte-compatible with kube's: the same claims in the same order, the same `kid`,
//! RS256/ES256 signatures, so tokens and keys can move between kapi and kube-apiserver.
//! Legacy secret-based tokens are not supported (see [`ServiceAccountTokenAuthenticator`]).

mod authenticator;
mod claims;
mod der;
mod discovery;
mod formats;
mod jws;
mod keys;

#[cfg(test)]
mod tests;

pub use authenticator::{
    BoundObjects, ObjectState, ServiceAccountTokenAuthenticator, CREDENTIAL_ID_KEY,
    LEEWAY_SECONDS, NODE_NAME_KEY, NODE_UID_KEY, POD_NAME_KEY, POD_UID_KEY,
};
pub use claims::{
    BoundObject, IssueError, IssueRequest, IssuedToken, KubernetesClaims, ObjectRef,
    ServiceAccountClaims, TokenIssuer,
};
pub use discovery::{
    jwks, openid_configuration, DiscoveryError, OpenIdMetadata, CACHE_CONTROL, JWKS_CONTENT_TYPE, JWKS_PATH,
    OPENID_CONFIG_PATH,
};
pub use keys::{
    generate_signing_key_pem, load_verification_keys, verification_keys_from_pem, Algorithm, KeyError, SigningKey,
    VerificationKey,
};
