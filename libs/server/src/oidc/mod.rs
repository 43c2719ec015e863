//! OIDC / JWT authentication as kube-apiserver's: `--authentication-config`'s `jwt`
//! authenticators or the legacy `--oidc-*` flags ([`config`]), each a [`JwtAuthenticator`]
//! verifying tokens of its issuer with the keys of the issuer's JWKS ([`fetch`]), mapping claims
//! to users with claims or CEL. Like kube, each is restricted to the API audiences
//! (`WrapAudienceAgnosticToken`) and tried after the service-account authenticator and before
//! the token webhook.

pub mod authenticator;
pub mod config;
pub mod fetch;

#[cfg(test)]
mod tests;

use kapi_auth::token::AudienceAgnostic;
use kapi_auth::TokenAuthenticator;

pub use authenticator::JwtAuthenticator;
pub use config::{load, AuthenticationSettings, JwtSettings, OidcFlags};

/// The token authenticators of `settings`, in order, each valid for `api_audiences`; their keys
/// start being fetched (call inside the server's runtime).
pub fn token_authenticators(settings: &AuthenticationSettings, api_audiences: &[String]) -> Result<Vec<Box<dyn TokenAuthenticator>>, String> {
    settings
        .jwt
        .iter()
        .map(|jwt| {
            let authenticator = JwtAuthenticator::new(jwt.clone())?;
            Ok(Box::new(AudienceAgnostic::new(api_audiences.to_vec(), authenticator)) as Box<dyn TokenAuthenticator>)
        })
        .collect()
}
