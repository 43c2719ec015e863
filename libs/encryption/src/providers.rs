//! The providers and their stored formats, as kube's `storage/value/encrypt` transformers
//! write them:
//! - `aescbc`: `k8s:enc:aescbc:v1:<name>:` + 16-byte IV + AES-CBC with PKCS#7 padding;
//! - `aesgcm`: `k8s:enc:aesgcm:v1:<name>:` + 12-byte nonce + AES-GCM sealed with the storage
//!   key as additional data (a value copied under another key does not open);
//! - `secretbox`: `k8s:enc:secretbox:v1:<name>:` + 24-byte nonce + XSalsa20-Poly1305;
//! - `identity`: the plaintext, no prefix;
//! - `kms` (v2): `k8s:enc:kms:v2:<name>:` + a protobuf `EncryptedObject` (see [`crate::kms`]).

use aes::cipher::{block_padding::Pkcs7, BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use aes_gcm::aead::{Aead, Payload};
use aes_gcm::{AeadCore, Aes128Gcm, Aes256Gcm, KeyInit};
use crypto_secretbox::XSalsa20Poly1305;
use rand::RngCore;

/// Every encrypted value starts with this (identity never reads such values).
const ENCRYPTED: &[u8] = b"k8s:enc:";

/// AES-GCM with a 192-bit key (kube accepts 16, 24 and 32-byte AES keys).
type Aes192Gcm = aes_gcm::AesGcm<aes::Aes192, aes_gcm::aead::consts::U12>;

/// A provider's key.
#[derive(Clone)]
pub struct NamedKey {
    /// The key's name (part of the stored prefix).
    pub name: String,
    /// The key's bytes.
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for NamedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        write!(f, "NamedKey({:?}, {} bytes)", self.name, self.secret.len())
    }
}

/// One provider of a resource's list.
#[derive(Debug, Clone)]
pub enum Provider {
    /// Plaintext.
    Identity,
    /// AES-CBC, each key in order.
    AesCbc(Vec<NamedKey>),
    /// AES-GCM, each key in order.
    AesGcm(Vec<NamedKey>),
    /// XSalsa20-Poly1305, each key in order.
    Secretbox(Vec<NamedKey>),
    /// KMS v2: envelope encryption through an external plugin.
    Kms(std::sync::Arc<crate::kms::KmsV2>),
}

/// Why a stored value could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecryptError {
    /// No configured provider and key wrote this value.
    #[error("no matching prefix found")]
    NoMatchingPrefix,
    /// A provider's key matched but the value does not open with it (corrupt, or the key
    /// changed under the same name, or the KMS plugin could not decrypt its DEK).
    #[error("{0}")]
    Corrupt(String),
}

/// Why a value could not be sealed (KMS v2 only: no write state, or it expired).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct EncryptError(pub String);

/// The providers of one resource, in order: the first writes, all read.
#[derive(Debug, Clone)]
pub struct Transformer {
    providers: Vec<Provider>,
}

fn prefix(provider: &str, key: &str) -> Vec<u8> {
    format!("k8s:enc:{provider}:v1:{key}:").into_bytes()
}

fn random<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    rand::thread_rng().fill_bytes(&mut bytes);
    bytes
}

fn cbc_encrypt(secret: &[u8], plaintext: &[u8]) -> Option<Vec<u8>> {
    let iv = random::<16>();
    let sealed = match secret.len() {
        16 => cbc::Encryptor::<aes::Aes128>::new_from_slices(secret, &iv).ok()?.encrypt_padded_vec_mut::<Pkcs7>(plaintext),
        24 => cbc::Encryptor::<aes::Aes192>::new_from_slices(secret, &iv).ok()?.encrypt_padded_vec_mut::<Pkcs7>(plaintext),
        32 => cbc::Encryptor::<aes::Aes256>::new_from_slices(secret, &iv).ok()?.encrypt_padded_vec_mut::<Pkcs7>(plaintext),
        _ => return None,
    };
    Some([iv.as_slice(), &sealed].concat())
}

fn cbc_decrypt(secret: &[u8], data: &[u8]) -> Result<Vec<u8>, String> {
    if data.len() < 16 {
        return Err("the stored data was shorter than the required size".into());
    }
    let (iv, sealed) = data.split_at(16);
    if sealed.is_empty() || sealed.len() % 16 != 0 {
        return Err("the stored data is not a multiple of the block size".into());
    }
    let opened = match secret.len() {
        16 => cbc::Decryptor::<aes::Aes128>::new_from_slices(secret, iv).map_err(|e| e.to_string())?.decrypt_padded_vec_mut::<Pkcs7>(sealed),
        24 => cbc::Decryptor::<aes::Aes192>::new_from_slices(secret, iv).map_err(|e| e.to_string())?.decrypt_padded_vec_mut::<Pkcs7>(sealed),
        32 => cbc::Decryptor::<aes::Aes256>::new_from_slices(secret, iv).map_err(|e| e.to_string())?.decrypt_padded_vec_mut::<Pkcs7>(sealed),
        _ => return Err("invalid key size".into()),
    };
    opened.map_err(|_| "invalid PKCS7 data (empty or not padded)".into())
}

fn gcm_seal<C: Aead + AeadCore + KeyInit>(secret: &[u8], plaintext: &[u8], context: &[u8]) -> Option<Vec<u8>> {
    let cipher = C::new_from_slice(secret).ok()?;
    let nonce = random::<12>();
    let sealed = cipher.encrypt(aes_gcm::Nonce::<C::NonceSize>::from_slice(&nonce), Payload { msg: plaintext, aad: context }).ok()?;
    Some([nonce.as_slice(), &sealed].concat())
}

fn gcm_open<C: Aead + AeadCore + KeyInit>(secret: &[u8], data: &[u8], context: &[u8]) -> Result<Vec<u8>, String> {
    const NONCE: usize = 12;
    if data.len() < NONCE {
        return Err("the stored data was shorter than the required size".into());
    }
    let cipher = C::new_from_slice(secret).map_err(|e| e.to_string())?;
    let (nonce, sealed) = data.split_at(NONCE);
    cipher
        .decrypt(aes_gcm::Nonce::<C::NonceSize>::from_slice(nonce), Payload { msg: sealed, aad: context })
        .map_err(|_| "cipher: message authentication failed".into())
}

fn gcm_encrypt(secret: &[u8], plaintext: &[u8], context: &[u8]) -> Option<Vec<u8>> {
    match secret.len() {
        16 => gcm_seal::<Aes128Gcm>(secret, plaintext, context),
        24 => gcm_seal::<Aes192Gcm>(secret, plaintext, context),
        32 => gcm_seal::<Aes256Gcm>(secret, plaintext, context),
        _ => None,
    }
}

fn gcm_decrypt(secret: &[u8], data: &[u8], context: &[u8]) -> Result<Vec<u8>, String> {
    match secret.len() {
        16 => gcm_open::<Aes128Gcm>(secret, data, context),
        24 => gcm_open::<Aes192Gcm>(secret, data, context),
        32 => gcm_open::<Aes256Gcm>(secret, data, context),
        _ => Err("invalid key size".into()),
    }
}

fn secretbox_encrypt(secret: &[u8], plaintext: &[u8]) -> Option<Vec<u8>> {
    let cipher = XSalsa20Poly1305::new_from_slice(secret).ok()?;
    let nonce = random::<24>();
    let sealed = cipher.encrypt(crypto_secretbox::Nonce::from_slice(&nonce), plaintext).ok()?;
    Some([nonce.as_slice(), &sealed].concat())
}

fn secretbox_decrypt(secret: &[u8], data: &[u8]) -> Result<Vec<u8>, String> {
    const NONCE: usize = 24;
    if data.len() < NONCE {
        return Err("the stored data was shorter than the required size".into());
    }
    let cipher = XSalsa20Poly1305::new_from_slice(secret).map_err(|e| e.to_string())?;
    let (nonce, sealed) = data.split_at(NONCE);
    cipher.decrypt(crypto_secretbox::Nonce::from_slice(nonce), sealed).map_err(|_| "output array too small or decryption failed".into())
}

impl Transformer {
    /// The providers of a resource, in the configuration's order.
    pub fn new(providers: Vec<Provider>) -> Self {
        Transformer { providers }
    }

    /// The KMS v2 providers of the list.
    pub fn kms_providers(&self) -> impl Iterator<Item = &std::sync::Arc<crate::kms::KmsV2>> {
        self.providers.iter().filter_map(|p| match p {
            Provider::Kms(k) => Some(k),
            _ => None,
        })
    }

    /// Whether values are written in plaintext (the first provider is identity).
    pub fn writes_plaintext(&self) -> bool {
        matches!(self.providers.first(), None | Some(Provider::Identity))
    }

    /// The value as stored under `storage_key`: sealed by the first provider's first key (or
    /// the KMS provider's current seed, which can fail: see [`crate::kms`]).
    pub fn encrypt(&self, storage_key: &str, plaintext: &[u8]) -> Result<Vec<u8>, EncryptError> {
        let sealed = match self.providers.first() {
            None | Some(Provider::Identity) => return Ok(plaintext.to_vec()),
            Some(Provider::Kms(kms)) => return kms.encrypt(storage_key, plaintext).map_err(EncryptError),
            Some(Provider::AesCbc(keys)) => keys.first().and_then(|k| Some((prefix("aescbc", &k.name), cbc_encrypt(&k.secret, plaintext)?))),
            Some(Provider::AesGcm(keys)) => {
                keys.first().and_then(|k| Some((prefix("aesgcm", &k.name), gcm_encrypt(&k.secret, plaintext, storage_key.as_bytes())?)))
            }
            Some(Provider::Secretbox(keys)) => {
                keys.first().and_then(|k| Some((prefix("secretbox", &k.name), secretbox_encrypt(&k.secret, plaintext)?)))
            }
        };
        // Keys are checked when the configuration loads, so sealing cannot fail here.
        let (mut out, body) = sealed.expect("keys were validated at load");
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// The plaintext of a stored value, and whether it was written by another provider or key
    /// than the one that writes now (kube's "stale": a rewrite would re-encrypt it).
    /// A KMS provider may call its plugin (an awaited gRPC call) to decrypt a DEK it has not
    /// cached; the other providers never wait.
    pub async fn decrypt(&self, storage_key: &str, data: &[u8]) -> Result<(Vec<u8>, bool), DecryptError> {
        let mut first = true;
        for provider in &self.providers {
            let keys: &[NamedKey] = match provider {
                Provider::Kms(kms) => {
                    if let Some(body) = data.strip_prefix(kms.prefix()) {
                        return kms.decrypt(storage_key, body).await.map(|(plain, stale)| (plain, stale || !first)).map_err(DecryptError::Corrupt);
                    }
                    first = false;
                    continue;
                }
                Provider::Identity => {
                    // Identity reads only what no provider encrypted (migrating away from
                    // encryption lists identity first; encrypted values go on to the others).
                    if !data.starts_with(ENCRYPTED) {
                        return Ok((data.to_vec(), !first));
                    }
                    first = false;
                    continue;
                }
                Provider::AesCbc(keys) | Provider::AesGcm(keys) | Provider::Secretbox(keys) => keys,
            };
            let name = match provider {
                Provider::AesCbc(_) => "aescbc",
                Provider::AesGcm(_) => "aesgcm",
                _ => "secretbox",
            };
            for key in keys {
                let p = prefix(name, &key.name);
                if let Some(body) = data.strip_prefix(p.as_slice()) {
                    let opened = match provider {
                        Provider::AesCbc(_) => cbc_decrypt(&key.secret, body),
                        Provider::AesGcm(_) => gcm_decrypt(&key.secret, body, storage_key.as_bytes()),
                        _ => secretbox_decrypt(&key.secret, body),
                    };
                    return opened.map(|plain| (plain, !first)).map_err(DecryptError::Corrupt);
                }
                first = false;
            }
        }
        Err(DecryptError::NoMatchingPrefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, len: usize) -> NamedKey {
        NamedKey { name: name.into(), secret: (0..len as u8).collect() }
    }

    #[tokio::test]
    async fn every_provider_round_trips_with_kubes_prefix() {
        let value = br#"{"kind":"Secret","data":{"password":"c2VjcmV0"}}"#;
        for (provider, tag) in [
            (Provider::AesCbc(vec![key("k1", 32)]), "aescbc"),
            (Provider::AesCbc(vec![key("k1", 16)]), "aescbc"),
            (Provider::AesGcm(vec![key("k1", 24)]), "aesgcm"),
            (Provider::AesGcm(vec![key("k1", 32)]), "aesgcm"),
            (Provider::Secretbox(vec![key("k1", 32)]), "secretbox"),
        ] {
            let t = Transformer::new(vec![provider]);
            let sealed = t.encrypt("/registry/core/secrets/default/s", value).unwrap();
            let expected = format!("k8s:enc:{tag}:v1:k1:");
            assert!(sealed.starts_with(expected.as_bytes()), "{tag}");
            assert!(!sealed.windows(8).any(|w| w == b"c2VjcmV0"), "{tag}: no plaintext");
            assert_ne!(t.encrypt("/registry/core/secrets/default/s", value).unwrap(), sealed, "{tag}: a fresh IV or nonce each time");
            assert_eq!(t.decrypt("/registry/core/secrets/default/s", &sealed).await, Ok((value.to_vec(), false)), "{tag}");
        }
    }

    #[tokio::test]
    async fn gcm_values_open_only_under_their_own_key() {
        let t = Transformer::new(vec![Provider::AesGcm(vec![key("k1", 32)])]);
        let sealed = t.encrypt("/registry/core/secrets/a/x", b"v").unwrap();
        assert!(matches!(t.decrypt("/registry/core/secrets/b/x", &sealed).await, Err(DecryptError::Corrupt(_))));
    }

    #[tokio::test]
    async fn rotation_reads_old_keys_and_providers_and_says_stale() {
        let old = Transformer::new(vec![Provider::AesCbc(vec![key("key1", 32)])]);
        let sealed = old.encrypt("/k", b"v").unwrap();
        // key2 added first: key1 still reads, as stale.
        let rotated = Transformer::new(vec![Provider::AesCbc(vec![key("key2", 32), key("key1", 32)]), Provider::Identity]);
        assert_eq!(rotated.decrypt("/k", &sealed).await, Ok((b"v".to_vec(), true)));
        assert_eq!(rotated.decrypt("/k", b"plain").await, Ok((b"plain".to_vec(), true)));
        assert!(rotated.encrypt("/k", b"v").unwrap().starts_with(b"k8s:enc:aescbc:v1:key2:"));
        // Migrating away: identity first writes plaintext and still reads the encrypted values.
        let away = Transformer::new(vec![Provider::Identity, Provider::AesCbc(vec![key("key1", 32)])]);
        assert_eq!(away.encrypt("/k", b"v").unwrap(), b"v");
        assert_eq!(away.decrypt("/k", &sealed).await, Ok((b"v".to_vec(), true)));
        // Without the key, encrypted values are refused, never returned as they are.
        let identity = Transformer::new(vec![Provider::Identity]);
        assert_eq!(identity.decrypt("/k", &sealed).await, Err(DecryptError::NoMatchingPrefix));
        // Another key under the same name does not open it (authenticated providers; CBC has no
        // authentication, as in kube, so a wrong key may yield garbage there).
        let gcm = Transformer::new(vec![Provider::AesGcm(vec![key("key1", 32)])]);
        let sealed = gcm.encrypt("/k", b"v").unwrap();
        let other = Transformer::new(vec![Provider::AesGcm(vec![NamedKey { name: "key1".into(), secret: vec![7; 32] }])]);
        assert!(matches!(other.decrypt("/k", &sealed).await, Err(DecryptError::Corrupt(_))));
    }
}
