//! The key formats kube's `keyutil` reads, parsed into public keys: SubjectPublicKeyInfo and
//! certificates, PKCS#1 and PKCS#8 RSA keys, SEC1 and PKCS#8 EC keys; and the canonical PKIX
//! encoding kube's key ids hash.

use ring::signature;

use super::der::{self, Reader};
use super::keys::{Algorithm, KeyError};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Curve {
    P256,
    P384,
}

impl Curve {
    pub(super) fn from_oid(oid: &[u8]) -> Result<Self, KeyError> {
        match oid {
            der::OID_P256 => Ok(Curve::P256),
            der::OID_P384 => Ok(Curve::P384),
            _ => Err(KeyError::Unsupported("elliptic curve other than P-256 or P-384".into())),
        }
    }
    pub(super) fn oid(self) -> &'static [u8] {
        match self {
            Curve::P256 => der::OID_P256,
            Curve::P384 => der::OID_P384,
        }
    }
    /// Bytes of one coordinate (and of a private scalar).
    pub(super) fn size(self) -> usize {
        match self {
            Curve::P256 => 32,
            Curve::P384 => 48,
        }
    }
    pub(super) fn name(self) -> &'static str {
        match self {
            Curve::P256 => "P-256",
            Curve::P384 => "P-384",
        }
    }
    pub(super) fn algorithm(self) -> Algorithm {
        match self {
            Curve::P256 => Algorithm::ES256,
            Curve::P384 => Algorithm::ES384,
        }
    }
    pub(super) fn signing(self) -> &'static signature::EcdsaSigningAlgorithm {
        match self {
            Curve::P256 => &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            Curve::P384 => &signature::ECDSA_P384_SHA384_FIXED_SIGNING,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum PublicKey {
    /// Big-endian modulus and exponent without leading zeros.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// Uncompressed SEC1 point.
    Ec { curve: Curve, point: Vec<u8> },
}

pub(super) fn spki_der(key: &PublicKey) -> Vec<u8> {
    match key {
        PublicKey::Rsa { n, e } => der::sequence(&[
            &der::sequence(&[&der::tlv(der::OID, der::OID_RSA_ENCRYPTION), &der::tlv(der::NULL, &[])]),
            &der::bit_string(&der::sequence(&[&der::integer(n), &der::integer(e)])),
        ]),
        PublicKey::Ec { curve, point } => der::sequence(&[
            &der::sequence(&[&der::tlv(der::OID, der::OID_EC_PUBLIC_KEY), &der::tlv(der::OID, curve.oid())]),
            &der::bit_string(point),
        ]),
    }
}

/// PKCS#1 `RSAPublicKey` or the first two fields of `RSAPrivateKey`: modulus and exponent.
fn rsa_components(r: &mut Reader<'_>) -> Option<PublicKey> {
    let n = der::unsigned(r.expect(der::INTEGER)?)?.to_vec();
    let e = der::unsigned(r.expect(der::INTEGER)?)?.to_vec();
    (!n.is_empty() && !e.is_empty()).then_some(PublicKey::Rsa { n, e })
}

pub(super) fn rsa_public_pkcs1(der_bytes: &[u8]) -> Option<PublicKey> {
    let body = der::single(der_bytes, der::SEQUENCE)?;
    let mut r = Reader::new(body);
    let key = rsa_components(&mut r)?;
    r.is_empty().then_some(key)
}

/// The modulus and exponent of a PKCS#1 `RSAPrivateKey`.
pub(super) fn rsa_private_pkcs1(der_bytes: &[u8]) -> Option<PublicKey> {
    let mut r = Reader::new(der::single(der_bytes, der::SEQUENCE)?);
    let version = r.expect(der::INTEGER)?;
    if version != [0] {
        return None;
    }
    rsa_components(&mut r)
}

/// A SubjectPublicKeyInfo.
pub(super) fn spki(der_bytes: &[u8]) -> Option<Result<PublicKey, KeyError>> {
    let mut r = Reader::new(der::single(der_bytes, der::SEQUENCE)?);
    let mut alg = Reader::new(r.expect(der::SEQUENCE)?);
    let bits = der::bit_string_bytes(r.expect(der::BIT_STRING)?)?;
    let oid = alg.expect(der::OID)?;
    Some(match oid {
        der::OID_RSA_ENCRYPTION => Ok(rsa_public_pkcs1(bits)?),
        der::OID_EC_PUBLIC_KEY => {
            let curve = alg.expect(der::OID)?;
            Curve::from_oid(curve).map(|curve| PublicKey::Ec { curve, point: bits.to_vec() })
        }
        // kube skips keys of other types (Ed25519...) rather than failing.
        _ => return None,
    })
}

/// The public key of an X.509 certificate (kube accepts certificates as verification keys).
pub(super) fn certificate(der_bytes: &[u8]) -> Option<Result<PublicKey, KeyError>> {
    let (rest, cert) = x509_parser::parse_x509_certificate(der_bytes).ok()?;
    if !rest.is_empty() {
        return None;
    }
    spki(cert.public_key().raw)
}

/// The parts of a PKCS#8 `PrivateKeyInfo`: algorithm OID, its curve OID (EC), the inner key.
pub(super) struct Pkcs8<'a> {
    pub algorithm: &'a [u8],
    pub curve: Option<&'a [u8]>,
    pub key: &'a [u8],
}

pub(super) fn pkcs8(der_bytes: &[u8]) -> Option<Pkcs8<'_>> {
    let mut r = Reader::new(der::single(der_bytes, der::SEQUENCE)?);
    let version = r.expect(der::INTEGER)?;
    if version != [0] && version != [1] {
        return None;
    }
    let mut alg = Reader::new(r.expect(der::SEQUENCE)?);
    let algorithm = alg.expect(der::OID)?;
    let curve = alg.optional(der::OID);
    let key = r.expect(der::OCTET_STRING)?;
    Some(Pkcs8 { algorithm, curve, key })
}

/// The contents of an EC private key.
pub(super) struct EcPrivate {
    pub curve: Curve,
    /// The private scalar, padded to the curve size.
    pub scalar: Vec<u8>,
    /// The uncompressed public point.
    pub point: Vec<u8>,
}

impl EcPrivate {
    pub(super) fn public(self) -> PublicKey {
        PublicKey::Ec { curve: self.curve, point: self.point }
    }
}

/// A SEC1 `ECPrivateKey`: the curve (from its parameters or `default_curve`), the private
/// scalar, and the public point, which kube's writers always include.
pub(super) fn sec1(der_bytes: &[u8], default_curve: Option<&[u8]>) -> Option<Result<EcPrivate, KeyError>> {
    let mut r = Reader::new(der::single(der_bytes, der::SEQUENCE)?);
    if r.expect(der::INTEGER)? != [1] {
        return None;
    }
    let scalar = r.expect(der::OCTET_STRING)?;
    let params = r.optional(der::CONTEXT_0).and_then(|p| der::single(p, der::OID));
    let public =
        r.optional(der::CONTEXT_1).and_then(|p| der::single(p, der::BIT_STRING)).and_then(der::bit_string_bytes);
    let curve = match Curve::from_oid(params.or(default_curve)?) {
        Ok(curve) => curve,
        Err(e) => return Some(Err(e)),
    };
    if scalar.len() > curve.size() {
        return None;
    }
    let mut padded = vec![0u8; curve.size() - scalar.len()];
    padded.extend_from_slice(scalar);
    let Some(public) = public else {
        return Some(Err(KeyError::Unsupported("EC private key without its public key".into())));
    };
    Some(Ok(EcPrivate { curve, scalar: padded, point: public.to_vec() }))
}

/// The public half of a private-key block, trying kube's parsers in kube's order (RSA PKCS#1,
/// RSA PKCS#8, EC SEC1) plus EC PKCS#8, which kube's public-key reader happens to skip.
pub(super) fn public_of_private(der_bytes: &[u8]) -> Option<Result<PublicKey, KeyError>> {
    if let Some(key) = rsa_private_pkcs1(der_bytes) {
        return Some(Ok(key));
    }
    if let Some(p8) = pkcs8(der_bytes) {
        return match p8.algorithm {
            der::OID_RSA_ENCRYPTION => rsa_private_pkcs1(p8.key).map(Ok),
            der::OID_EC_PUBLIC_KEY => sec1(p8.key, p8.curve).map(|r| r.map(EcPrivate::public)),
            _ => None,
        };
    }
    sec1(der_bytes, None).map(|r| r.map(EcPrivate::public))
}
