//! JSON Web Tokens as kube's OIDC authenticator reads them (go-oidc over go-jose): JWS compact
//! serialization ([`Compact`]), the asymmetric algorithms kube allows ([`Algorithm`]; never
//! `none`, never HMAC), public keys from a JWKS ([`JwkSet`]) and go-oidc's checks of an ID
//! token's claims before its signature ([`verify`]). Pure: no I/O, no clock of its own.
//!
//! Signatures are checked with ring: RSA PKCS#1 v1.5 and PSS (2048 to 8192-bit keys), ECDSA
//! P-256 and P-384 with fixed-size (`r || s`) signatures. ES512 (P-521) is accepted as a name,
//! as kube accepts it, but ring cannot verify it: such keys are skipped and such tokens fail
//! their signature check.

pub mod verify;

use base64::Engine;
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::{Map, Value};

/// The JOSE signature algorithms kube's OIDC authenticator allows (`allowedSigningAlgs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algorithm {
    /// ECDSA P-256 SHA-256.
    ES256,
    /// ECDSA P-384 SHA-384.
    ES384,
    /// ECDSA P-521 SHA-512 (named, not verifiable here).
    ES512,
    /// RSASSA-PSS SHA-256.
    PS256,
    /// RSASSA-PSS SHA-384.
    PS384,
    /// RSASSA-PSS SHA-512.
    PS512,
    /// RSASSA-PKCS1-v1_5 SHA-256.
    RS256,
    /// RSASSA-PKCS1-v1_5 SHA-384.
    RS384,
    /// RSASSA-PKCS1-v1_5 SHA-512.
    RS512,
}

impl Algorithm {
    /// Every allowed algorithm, sorted by name (kube's `AllValidSigningAlgorithms`).
    pub const ALL: [Algorithm; 9] = [
        Algorithm::ES256,
        Algorithm::ES384,
        Algorithm::ES512,
        Algorithm::PS256,
        Algorithm::PS384,
        Algorithm::PS512,
        Algorithm::RS256,
        Algorithm::RS384,
        Algorithm::RS512,
    ];

    /// The algorithm named `name` (`RS256`), if kube allows it.
    pub fn parse(name: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The JOSE name.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::ES256 => "ES256",
            Algorithm::ES384 => "ES384",
            Algorithm::ES512 => "ES512",
            Algorithm::PS256 => "PS256",
            Algorithm::PS384 => "PS384",
            Algorithm::PS512 => "PS512",
            Algorithm::RS256 => "RS256",
            Algorithm::RS384 => "RS384",
            Algorithm::RS512 => "RS512",
        }
    }
}

/// Go's `base64.RawURLEncoding.DecodeString` and its error text.
pub fn decode_segment(s: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s).map_err(|e| match e {
        base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => {
            format!("illegal base64 data at input byte {at}")
        }
        base64::DecodeError::InvalidLength(at) => format!("illegal base64 data at input byte {at}"),
        base64::DecodeError::InvalidPadding => format!("illegal base64 data at input byte {}", s.len()),
    })
}

/// A JWS in compact serialization, parsed but not verified.
#[derive(Debug, Clone)]
pub struct Compact<'a> {
    /// The protected header.
    pub header: Map<String, Value>,
    /// The payload bytes (the claims JSON of a JWT).
    pub payload: Vec<u8>,
    /// `<header>.<payload>` as sent: what the signature covers.
    pub signing_input: &'a str,
    /// The signature bytes.
    pub signature: Vec<u8>,
}

impl<'a> Compact<'a> {
    /// Parses `token` as go-jose's `ParseSigned` does for the compact form; errors in its words.
    pub fn parse(token: &'a str) -> Result<Compact<'a>, String> {
        let parts: Vec<&str> = token.split('.').collect();
        if parts.len() != 3 {
            return Err("square/go-jose: compact JWS format must have three parts".into());
        }
        let header_bytes = decode_segment(parts[0])?;
        let payload = decode_segment(parts[1])?;
        let signature = decode_segment(parts[2])?;
        let header: Map<String, Value> = serde_json::from_slice(&header_bytes).map_err(|e| go_json_error(&e))?;
        if let Some(crit) = header.get("crit") {
            if !crit.as_array().is_some_and(|a| a.is_empty()) {
                return Err("square/go-jose: unsupported crit header".into());
            }
        }
        let signing_input = &token[..parts[0].len() + 1 + parts[1].len()];
        Ok(Compact { header, payload, signing_input, signature })
    }

    /// The `alg` header ("" when absent).
    pub fn alg(&self) -> &str {
        self.header.get("alg").and_then(Value::as_str).unwrap_or("")
    }

    /// The `kid` header ("" when absent).
    pub fn kid(&self) -> &str {
        self.header.get("kid").and_then(Value::as_str).unwrap_or("")
    }
}

/// A JSON syntax error as Go's encoding/json words the common cases.
pub(crate) fn go_json_error(e: &serde_json::Error) -> String {
    match e.classify() {
        serde_json::error::Category::Eof => "unexpected end of JSON input".into(),
        serde_json::error::Category::Syntax => format!("invalid character at line {} column {}", e.line(), e.column()),
        _ => e.to_string(),
    }
}

/// An elliptic curve kapi can verify with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Curve {
    P256,
    P384,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum KeyMaterial {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// The uncompressed point `04 || x || y`.
    Ec {
        curve: Curve,
        point: Vec<u8>,
    },
}

/// One public key of a JWKS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Jwk {
    /// `kid` ("" when absent).
    pub kid: String,
    /// `alg` ("" when absent): when set, the only algorithm the key verifies.
    pub alg: String,
    material: KeyMaterial,
}

impl Jwk {
    /// Reads one key; `Ok(None)` for keys kapi cannot use (symmetric, OKP, P-521, encryption
    /// keys), an error for keys that are malformed.
    pub fn parse(v: &Value) -> Result<Option<Jwk>, String> {
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("");
        if text("use") == "enc" {
            return Ok(None);
        }
        let field = |k: &str| -> Result<Vec<u8>, String> {
            let s = v.get(k).and_then(Value::as_str).ok_or_else(|| format!("square/go-jose: invalid {} key, missing {k} value", text("kty")))?;
            decode_segment(s)
        };
        let material = match text("kty") {
            "RSA" => {
                let (n, e) = (field("n")?, field("e")?);
                KeyMaterial::Rsa { n: strip_zeros(n), e: strip_zeros(e) }
            }
            "EC" => {
                let (curve, size) = match text("crv") {
                    "P-256" => (Curve::P256, 32),
                    "P-384" => (Curve::P384, 48),
                    "P-521" => return Ok(None),
                    other => return Err(format!("square/go-jose: unsupported elliptic curve '{other}'")),
                };
                let (x, y) = (field("x")?, field("y")?);
                if x.len() != size || y.len() != size {
                    return Err(format!("square/go-jose: invalid EC key, wrong length for x or y (expected {size} bytes)"));
                }
                let mut point = Vec::with_capacity(1 + 2 * size);
                point.push(4);
                point.extend_from_slice(&x);
                point.extend_from_slice(&y);
                KeyMaterial::Ec { curve, point }
            }
            "oct" | "OKP" => return Ok(None),
            other => return Err(format!("square/go-jose: unknown json web key type '{other}'")),
        };
        Ok(Some(Jwk { kid: text("kid").to_owned(), alg: text("alg").to_owned(), material }))
    }

    /// Whether `signature` is `alg`'s signature of `message` by this key.
    pub fn verify(&self, alg: Algorithm, message: &[u8], signature: &[u8]) -> bool {
        if !self.alg.is_empty() && self.alg != alg.name() {
            return false;
        }
        match (&self.material, alg) {
            (KeyMaterial::Rsa { n, e }, _) => {
                let params: &signature::RsaParameters = match alg {
                    Algorithm::RS256 => &signature::RSA_PKCS1_2048_8192_SHA256,
                    Algorithm::RS384 => &signature::RSA_PKCS1_2048_8192_SHA384,
                    Algorithm::RS512 => &signature::RSA_PKCS1_2048_8192_SHA512,
                    Algorithm::PS256 => &signature::RSA_PSS_2048_8192_SHA256,
                    Algorithm::PS384 => &signature::RSA_PSS_2048_8192_SHA384,
                    Algorithm::PS512 => &signature::RSA_PSS_2048_8192_SHA512,
                    _ => return false,
                };
                RsaPublicKeyComponents { n, e }.verify(params, message, signature).is_ok()
            }
            (KeyMaterial::Ec { curve: Curve::P256, point }, Algorithm::ES256) => {
                UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point).verify(message, signature).is_ok()
            }
            (KeyMaterial::Ec { curve: Curve::P384, point }, Algorithm::ES384) => {
                UnparsedPublicKey::new(&signature::ECDSA_P384_SHA384_FIXED, point).verify(message, signature).is_ok()
            }
            _ => false,
        }
    }
}

fn strip_zeros(mut b: Vec<u8>) -> Vec<u8> {
    let lead = b.iter().take_while(|x| **x == 0).count();
    b.drain(..lead.min(b.len().saturating_sub(1)));
    b
}

/// A JSON Web Key Set: the usable public keys of an issuer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JwkSet {
    /// The keys, in the document's order.
    pub keys: Vec<Jwk>,
}

/// Why a signature did not verify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignatureError {
    /// No key of the set has the token's `kid` (or, without a `kid`, none verified it): the set
    /// may be stale, a fresh copy may know it.
    UnknownKey,
    /// A key with the token's `kid` exists and the signature is not its.
    Invalid,
}

impl JwkSet {
    /// Reads a JWKS document (`{"keys": [...]}`), with go-oidc's error for one that is not.
    pub fn parse(body: &[u8]) -> Result<JwkSet, String> {
        let doc: Value = serde_json::from_slice(body).map_err(|e| go_json_error(&e))?;
        let Some(list) = doc.get("keys").and_then(Value::as_array) else {
            return Err("json: missing keys".into());
        };
        let mut keys = Vec::new();
        for k in list {
            if let Some(key) = Jwk::parse(k)? {
                keys.push(key);
            }
        }
        Ok(JwkSet { keys })
    }

    /// go-oidc's remote key set check: the keys with the token's `kid` (every key when the
    /// token has none) are tried in order.
    pub fn verify(&self, jws: &Compact<'_>, alg: Algorithm) -> Result<(), SignatureError> {
        let kid = jws.kid();
        let mut candidates = self.keys.iter().filter(|k| kid.is_empty() || k.kid == kid).peekable();
        if candidates.peek().is_none() {
            return Err(SignatureError::UnknownKey);
        }
        if candidates.any(|k| k.verify(alg, jws.signing_input.as_bytes(), &jws.signature)) {
            return Ok(());
        }
        Err(if kid.is_empty() { SignatureError::UnknownKey } else { SignatureError::Invalid })
    }

    /// Whether some key has `kid`.
    pub fn has_kid(&self, kid: &str) -> bool {
        self.keys.iter().any(|k| k.kid == kid)
    }
}

#[cfg(test)]
mod tests;
