//! Service-account signing and verification keys, read from PEM the way kube's `keyutil` reads
//! `--service-account-signing-key-file` and `--service-account-key-file`.
//!
//! RSA keys sign RS256 and P-256/P-384 keys ES256/ES384, as kube does (P-521 is not supported:
//! ring cannot verify it). RSA moduli must be 2048 to 8192 bits, ring's range; kube also accepts
//! smaller ones. Each key's id is kube's: the unpadded base64url SHA-256 of its PKIX
//! (SubjectPublicKeyInfo) DER encoding, rebuilt canonically from the key's components.

use std::path::Path;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _, RsaKeyPair, UnparsedPublicKey};

use super::der;
use super::formats::{
    certificate, pkcs8, public_of_private, rsa_private_pkcs1, rsa_public_pkcs1, sec1, spki, spki_der, Curve, EcPrivate,
    PublicKey,
};

/// Why a key could not be read or used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file could not be read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A key file is unusable; kube's wording around the inner error.
    #[error("error reading {what} file {path}: {source}")]
    File {
        /// "private key" or "public key".
        what: &'static str,
        /// The file.
        path: String,
        /// What is wrong with it.
        source: Box<KeyError>,
    },
    /// No PEM block holds a usable private key (kube's wording, plus why the last candidate
    /// block was refused, if any).
    #[error("data does not contain a valid RSA or ECDSA private key{}", .0.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    NoPrivateKey(Option<String>),
    /// No PEM block holds a usable public key (kube's wording).
    #[error("data does not contain any valid RSA or ECDSA public keys")]
    NoPublicKeys,
    /// A key of a kind or size that cannot be used.
    #[error("unsupported key: {0}")]
    Unsupported(String),
    /// The crypto library failed (signing or key generation).
    #[error("cryptographic failure: {0}")]
    Crypto(String),
}

/// The JWS algorithms service-account keys sign with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Algorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256, for RSA keys.
    RS256,
    /// ECDSA P-256 with SHA-256.
    ES256,
    /// ECDSA P-384 with SHA-384.
    ES384,
}

impl Algorithm {
    /// The JWS `alg` name.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::RS256 => "RS256",
            Algorithm::ES256 => "ES256",
            Algorithm::ES384 => "ES384",
        }
    }
}

/// A public key that verifies service-account tokens, with its kube key id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerificationKey {
    key: PublicKey,
    kid: String,
}

impl VerificationKey {
    fn new(key: PublicKey) -> Result<Self, KeyError> {
        match &key {
            PublicKey::Rsa { n, .. } => {
                let bits = n.len() * 8 - n.first().map_or(8, |b| b.leading_zeros() as usize);
                if !(2048..=8192).contains(&bits) {
                    return Err(KeyError::Unsupported(format!("RSA key of {bits} bits (2048 to 8192 are supported)")));
                }
            }
            PublicKey::Ec { curve, point } => {
                if point.len() != 1 + 2 * curve.size() || point.first() != Some(&4) {
                    return Err(KeyError::Unsupported("EC public key that is not an uncompressed point".into()));
                }
            }
        }
        let spki = spki_der(&key);
        let kid = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, &spki));
        Ok(VerificationKey { key, kid })
    }

    /// kube's key id: base64url (no padding) of the SHA-256 of the PKIX DER public key.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The algorithm tokens signed by this key use.
    pub fn algorithm(&self) -> Algorithm {
        match &self.key {
            PublicKey::Rsa { .. } => Algorithm::RS256,
            PublicKey::Ec { curve, .. } => curve.algorithm(),
        }
    }

    /// The PKIX (SubjectPublicKeyInfo) DER encoding, e.g. to write a `PUBLIC KEY` PEM.
    pub fn spki_der(&self) -> Vec<u8> {
        spki_der(&self.key)
    }

    /// The key as a `PUBLIC KEY` PEM block.
    pub fn to_pem(&self) -> String {
        der::pem_encode("PUBLIC KEY", &self.spki_der())
    }

    /// The public JWK kube publishes at `/openid/v1/jwks`, members in go-jose's order.
    pub fn jwk(&self) -> serde_json::Value {
        let b64 = |b: &[u8]| URL_SAFE_NO_PAD.encode(b);
        match &self.key {
            PublicKey::Rsa { n, e } => serde_json::json!({
                "use": "sig", "kty": "RSA", "kid": self.kid, "alg": "RS256", "n": b64(n), "e": b64(e),
            }),
            PublicKey::Ec { curve, point } => {
                let (x, y) = point[1..].split_at(curve.size());
                serde_json::json!({
                    "use": "sig", "kty": "EC", "kid": self.kid, "crv": curve.name(), "alg": curve.algorithm().as_str(),
                    "x": b64(x), "y": b64(y),
                })
            }
        }
    }

    /// Checks a JWS signature made with `alg` over `message`.
    pub(crate) fn verify(&self, alg: &str, message: &[u8], sig: &[u8]) -> Result<(), String> {
        if alg != self.algorithm().as_str() {
            return Err(format!("unexpected signature algorithm {alg:?} for a {} key", self.algorithm().as_str()));
        }
        let outcome = match &self.key {
            PublicKey::Rsa { n, e } => {
                let pkcs1 = der::sequence(&[&der::integer(n), &der::integer(e)]);
                UnparsedPublicKey::new(&signature::RSA_PKCS1_2048_8192_SHA256, pkcs1).verify(message, sig)
            }
            PublicKey::Ec { curve: Curve::P256, point } => {
                UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point).verify(message, sig)
            }
            PublicKey::Ec { curve: Curve::P384, point } => {
                UnparsedPublicKey::new(&signature::ECDSA_P384_SHA384_FIXED, point).verify(message, sig)
            }
        };
        outcome.map_err(|_| "error in cryptographic primitive".to_owned())
    }
}

fn rejected(e: ring::error::KeyRejected) -> KeyError {
    KeyError::Unsupported(e.to_string())
}

/// kube's `ParsePublicKeysPEM`: every PEM block, whatever its label, that holds an RSA or
/// ECDSA key (private keys and certificates contribute their public key; `RSA PUBLIC KEY`
/// PKCS#1 blocks are accepted too); other blocks are ignored. An unusable key (an unsupported
/// curve, a too small RSA modulus) is an error rather than silently skipped.
pub fn verification_keys_from_pem(pem: &str) -> Result<Vec<VerificationKey>, KeyError> {
    let mut keys = Vec::new();
    for block in der::pem_blocks(pem) {
        let found = public_of_private(&block.der)
            .or_else(|| spki(&block.der))
            .or_else(|| certificate(&block.der))
            .or_else(|| rsa_public_pkcs1(&block.der).map(Ok));
        if let Some(key) = found {
            keys.push(VerificationKey::new(key?)?);
        }
    }
    if keys.is_empty() {
        return Err(KeyError::NoPublicKeys);
    }
    Ok(keys)
}

/// Reads one `--service-account-key-file`. Synchronous: for startup.
pub fn load_verification_keys(path: impl AsRef<Path>) -> Result<Vec<VerificationKey>, KeyError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path)?;
    verification_keys_from_pem(&text).map_err(|e| KeyError::File {
        what: "public key",
        path: path.display().to_string(),
        source: Box::new(e),
    })
}

enum Signer {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
}

/// The `--service-account-signing-key-file` key: signs tokens, and its public half verifies
/// them.
pub struct SigningKey {
    signer: Signer,
    public: VerificationKey,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey").field("kid", &self.public.kid).field("alg", &self.public.algorithm()).finish()
    }
}

impl SigningKey {
    /// kube's `ParsePrivateKeyPEM`: the first block labelled `EC PRIVATE KEY` (SEC1),
    /// `RSA PRIVATE KEY` (PKCS#1) or `PRIVATE KEY` (unencrypted PKCS#8, RSA or EC) that parses;
    /// other blocks (`EC PARAMETERS`) are ignored.
    pub fn from_pem(pem: &str) -> Result<Self, KeyError> {
        let mut last_refusal = None;
        for block in der::pem_blocks(pem) {
            let parsed = match block.label.as_str() {
                "EC PRIVATE KEY" => sec1(&block.der, None).map(|r| r.and_then(Self::ec)),
                "RSA PRIVATE KEY" => rsa_private_pkcs1(&block.der)
                    .map(|_| RsaKeyPair::from_der(&block.der).map_err(rejected).and_then(Self::rsa)),
                "PRIVATE KEY" => pkcs8(&block.der).and_then(|p8| match p8.algorithm {
                    der::OID_RSA_ENCRYPTION => {
                        Some(RsaKeyPair::from_pkcs8(&block.der).map_err(rejected).and_then(Self::rsa))
                    }
                    der::OID_EC_PUBLIC_KEY => sec1(p8.key, p8.curve).map(|r| r.and_then(Self::ec)),
                    _ => None,
                }),
                _ => None,
            };
            match parsed {
                Some(Ok(key)) => return Ok(key),
                Some(Err(e)) => last_refusal = Some(e.to_string()),
                None => {}
            }
        }
        Err(KeyError::NoPrivateKey(last_refusal))
    }

    /// Reads `--service-account-signing-key-file`. Synchronous: for startup.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, KeyError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)?;
        Self::from_pem(&text).map_err(|e| KeyError::File {
            what: "private key",
            path: path.display().to_string(),
            source: Box::new(e),
        })
    }

    fn rsa(pair: RsaKeyPair) -> Result<Self, KeyError> {
        let public = rsa_public_pkcs1(pair.public().as_ref())
            .ok_or_else(|| KeyError::Crypto("unreadable RSA public key".into()))
            .and_then(VerificationKey::new)?;
        Ok(SigningKey { signer: Signer::Rsa(pair), public })
    }

    fn ec(key: EcPrivate) -> Result<Self, KeyError> {
        let pair = EcdsaKeyPair::from_private_key_and_public_key(
            key.curve.signing(),
            &key.scalar,
            &key.point,
            &SystemRandom::new(),
        )
        .map_err(rejected)?;
        let public =
            VerificationKey::new(PublicKey::Ec { curve: key.curve, point: pair.public_key().as_ref().to_vec() })?;
        Ok(SigningKey { signer: Signer::Ec(pair), public })
    }

    /// The public half, to verify tokens and publish in the JWKS.
    pub fn verification_key(&self) -> &VerificationKey {
        &self.public
    }

    /// The key id tokens carry in their `kid` header.
    pub fn kid(&self) -> &str {
        self.public.kid()
    }

    /// The JWS algorithm this key signs with.
    pub fn algorithm(&self) -> Algorithm {
        self.public.algorithm()
    }

    /// Signs `message` (a JWS signing input); ECDSA signatures are in JWS's fixed `r || s` form.
    pub(crate) fn sign(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        let rng = SystemRandom::new();
        match &self.signer {
            Signer::Rsa(pair) => {
                let mut sig = vec![0u8; pair.public().modulus_len()];
                pair.sign(&signature::RSA_PKCS1_SHA256, &rng, message, &mut sig)
                    .map_err(|e| KeyError::Crypto(e.to_string()))?;
                Ok(sig)
            }
            Signer::Ec(pair) => {
                pair.sign(&rng, message).map(|s| s.as_ref().to_vec()).map_err(|e| KeyError::Crypto(e.to_string()))
            }
        }
    }
}

/// A fresh P-256 signing key as an `EC PRIVATE KEY` (SEC1) PEM block, what kube's
/// `MakeEllipticPrivateKeyPEM` writes, for the server to create `sa.key` when no key is
/// configured. SEC1 rather than PKCS#8 so that kube itself can also read the file as a
/// verification key.
pub fn generate_signing_key_pem() -> Result<String, KeyError> {
    let rng = SystemRandom::new();
    let document = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .map_err(|e| KeyError::Crypto(e.to_string()))?;
    let p8 = pkcs8(document.as_ref()).ok_or_else(|| KeyError::Crypto("unreadable generated PKCS#8".into()))?;
    let key = sec1(p8.key, p8.curve).ok_or_else(|| KeyError::Crypto("unreadable generated EC key".into()))??;
    let sec1 = der::sequence(&[
        &der::integer(&[1]),
        &der::tlv(der::OCTET_STRING, &key.scalar),
        &der::tlv(der::CONTEXT_0, &der::tlv(der::OID, key.curve.oid())),
        &der::tlv(der::CONTEXT_1, &der::bit_string(&key.point)),
    ]);
    Ok(der::pem_encode("EC PRIVATE KEY", &sec1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RSA_A_PKCS8: &str = include_str!("../../tests/fixtures/rsa-a.pkcs8.pem");
    const RSA_A_PKCS1: &str = include_str!("../../tests/fixtures/rsa-a.pkcs1.pem");
    const RSA_A_PUB: &str = include_str!("../../tests/fixtures/rsa-a.pub.pem");
    const RSA_A_PKCS1_PUB: &str = include_str!("../../tests/fixtures/rsa-a.pkcs1-pub.pem");
    const RSA_B_CERT: &str = include_str!("../../tests/fixtures/rsa-b.cert.pem");
    const RSA_B_PKCS8: &str = include_str!("../../tests/fixtures/rsa-b.pkcs8.pem");
    const EC_A_SEC1: &str = include_str!("../../tests/fixtures/ec-a.sec1.pem");
    const EC_A_PKCS8: &str = include_str!("../../tests/fixtures/ec-a.pkcs8.pem");
    const EC_A_PUB: &str = include_str!("../../tests/fixtures/ec-a.pub.pem");
    const EC384_SEC1: &str = include_str!("../../tests/fixtures/ec384.sec1.pem");

    // Computed with openssl (see tests/fixtures/README.md): an independent check of the kid.
    const RSA_A_KID: &str = "Mt0LSxdfZmFCWK4CldP_vjXdv48pLjVRnhRYtirMnEg";
    const RSA_B_KID: &str = "JshSjkdtybIn6OQ4YVI6naBB-Z_557PYMpsGZ1I4KwA";
    const EC_A_KID: &str = "lKzgnGhWXRXigpAVea1FsKYhSCEgI5HG3A4lMHlwZPA";
    const EC384_KID: &str = "uHRtvapGKCRvcKvKuUOHSOuoyBkxQ2HlJe3zt_3PyvY";

    fn one(pem: &str) -> VerificationKey {
        let mut keys = verification_keys_from_pem(pem).unwrap();
        assert_eq!(keys.len(), 1);
        keys.remove(0)
    }

    #[test]
    fn signing_keys_in_every_format_kube_reads() {
        for (pem, kid, alg) in [
            (RSA_A_PKCS8, RSA_A_KID, Algorithm::RS256),
            (RSA_A_PKCS1, RSA_A_KID, Algorithm::RS256),
            (EC_A_SEC1, EC_A_KID, Algorithm::ES256),
            (EC_A_PKCS8, EC_A_KID, Algorithm::ES256),
            (EC384_SEC1, EC384_KID, Algorithm::ES384),
        ] {
            let key = SigningKey::from_pem(pem).unwrap();
            assert_eq!(key.kid(), kid);
            assert_eq!(key.algorithm(), alg);
            let sig = key.sign(b"message").unwrap();
            key.verification_key().verify(alg.as_str(), b"message", &sig).unwrap();
            assert!(key.verification_key().verify(alg.as_str(), b"messagE", &sig).is_err());
        }
    }

    #[test]
    fn verification_keys_in_every_format() {
        for pem in [RSA_A_PKCS8, RSA_A_PKCS1, RSA_A_PUB, RSA_A_PKCS1_PUB] {
            assert_eq!(one(pem).kid(), RSA_A_KID);
        }
        for pem in [EC_A_SEC1, EC_A_PKCS8, EC_A_PUB] {
            assert_eq!(one(pem).kid(), EC_A_KID);
        }
        assert_eq!(one(RSA_B_CERT).kid(), RSA_B_KID);
        // Several blocks per file, with noise around them.
        let bundle = format!("# keys\n{RSA_A_PUB}\n-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n{EC_A_SEC1}{RSA_B_CERT}");
        let kids: Vec<String> =
            verification_keys_from_pem(&bundle).unwrap().iter().map(|k| k.kid().to_owned()).collect();
        assert_eq!(kids, [RSA_A_KID, EC_A_KID, RSA_B_KID]);
        // The re-encoded PKIX DER is what openssl wrote.
        let blocks = der::pem_blocks(RSA_A_PUB);
        assert_eq!(one(RSA_A_PKCS1).spki_der(), blocks[0].der);
        assert_eq!(one(&one(EC_A_SEC1).to_pem()).kid(), EC_A_KID);
    }

    #[test]
    fn refuses_what_it_cannot_use() {
        assert!(matches!(verification_keys_from_pem("nothing here"), Err(KeyError::NoPublicKeys)));
        assert!(matches!(SigningKey::from_pem(RSA_A_PUB), Err(KeyError::NoPrivateKey(None))));
        assert!(matches!(SigningKey::from_pem(RSA_B_CERT), Err(KeyError::NoPrivateKey(None))));
        // A label that does not match the contents is not read as a signing key (kube goes by
        // the label).
        let mislabelled = RSA_A_PKCS1.replace("RSA PRIVATE KEY", "EC PRIVATE KEY");
        assert!(SigningKey::from_pem(&mislabelled).is_err());
        // A 1024-bit RSA key is refused with a reason.
        let small = include_str!("../../tests/fixtures/rsa-1024.pub.pem");
        let err = verification_keys_from_pem(small).unwrap_err();
        assert_eq!(err.to_string(), "unsupported key: RSA key of 1024 bits (2048 to 8192 are supported)");
    }

    #[test]
    fn generated_keys_are_sec1_p256() {
        let pem = generate_signing_key_pem().unwrap();
        assert!(pem.starts_with("-----BEGIN EC PRIVATE KEY-----\n"));
        let key = SigningKey::from_pem(&pem).unwrap();
        assert_eq!(key.algorithm(), Algorithm::ES256);
        assert_eq!(one(&pem).kid(), key.kid());
        assert_ne!(SigningKey::from_pem(&generate_signing_key_pem().unwrap()).unwrap().kid(), key.kid());
        // The SEC1 carries the curve and the public key, as Go's MarshalECPrivateKey writes.
        let der_bytes = &der::pem_blocks(&pem)[0].der;
        assert!(sec1(der_bytes, None).is_some_and(|r| r.is_ok()));
    }

    #[test]
    fn jwk_shapes() {
        let rsa = one(RSA_A_PUB).jwk();
        let keys: Vec<&str> = rsa.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["use", "kty", "kid", "alg", "n", "e"]);
        assert_eq!(rsa["e"], "AQAB");
        assert_eq!(rsa["kid"], RSA_A_KID);
        assert_eq!(URL_SAFE_NO_PAD.decode(rsa["n"].as_str().unwrap()).unwrap().len(), 256);
        let ec = one(EC_A_PUB).jwk();
        let keys: Vec<&str> = ec.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["use", "kty", "kid", "crv", "alg", "x", "y"]);
        assert_eq!(
            (ec["kty"].as_str(), ec["crv"].as_str(), ec["alg"].as_str()),
            (Some("EC"), Some("P-256"), Some("ES256"))
        );
        assert_eq!(URL_SAFE_NO_PAD.decode(ec["x"].as_str().unwrap()).unwrap().len(), 32);
        assert_eq!(one(EC384_SEC1).jwk()["crv"], "P-384");
    }

    #[test]
    fn wrong_algorithm_for_key_is_refused() {
        let rsa = SigningKey::from_pem(RSA_B_PKCS8).unwrap();
        let sig = rsa.sign(b"m").unwrap();
        assert!(rsa
            .verification_key()
            .verify("ES256", b"m", &sig)
            .unwrap_err()
            .contains("unexpected signature algorithm"));
        assert!(one(RSA_A_PUB).verify("RS256", b"m", &sig).is_err());
    }

    #[test]
    fn load_names_the_file() {
        let dir = std::env::temp_dir().join(format!("kapi-sa-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sa.pub");
        std::fs::write(&path, "not a key").unwrap();
        let err = load_verification_keys(&path).unwrap_err().to_string();
        assert!(
            err.starts_with("error reading public key file ")
                && err.ends_with(": data does not contain any valid RSA or ECDSA public keys")
        );
        let err = SigningKey::load(&path).unwrap_err().to_string();
        assert!(
            err.starts_with("error reading private key file ")
                && err.contains("data does not contain a valid RSA or ECDSA private key")
        );
        std::fs::write(&path, EC_A_SEC1).unwrap();
        assert_eq!(SigningKey::load(&path).unwrap().kid(), EC_A_KID);
        assert_eq!(load_verification_keys(&path).unwrap()[0].kid(), EC_A_KID);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
