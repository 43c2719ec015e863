//! The `kms` provider, KMS v2 as kube-apiserver's (≥ 1.29, KDF mode): envelope encryption
//! with an external plugin reached over gRPC on a Unix socket.
//!
//! - **Write state.** A 32-byte DEK seed is generated here and encrypted by the plugin once
//!   per plugin key ID (`Encrypt`); the plugin's `Status` is polled (every minute, every 10 s
//!   while unhealthy, and on `/healthz/kms-providers` at most every 20 s / 3 s), and a new key
//!   ID makes new writes use a new seed. While the plugin fails, writes coast on the current
//!   seed for at most 3 minutes after the last good `Status`, then fail with kube's "expired"
//!   error; before the first good `Status` they fail with kube's "got unexpected nil
//!   transformer". Nothing is stored then.
//! - **Each write** derives its own AES-256-GCM key: HKDF-SHA256 expand of the seed with 32
//!   random bytes of info, then a random 12-byte nonce, the storage key as additional data.
//!   Stored: `k8s:enc:kms:v2:<name>:` + the protobuf `EncryptedObject` {encryptedData = info +
//!   nonce + ciphertext, keyID, encryptedDEKSource, annotations, encryptedDEKSourceType = 1}.
//! - **Reads** decrypt the DEK source through the plugin (`Decrypt`) once and keep it in a
//!   bounded cache keyed by SHA-256 of (type, encrypted source, key ID, annotations), as kube's;
//!   a value whose DEK is not cached while the plugin is down fails with kube's "failed to
//!   decrypt DEK" error, never garbage. Values of kube's older `AES_GCM_KEY` type are read too.
//!   A value whose key ID is not the current one reads as stale, so a rewrite (kube's storage
//!   migration) re-encrypts it.
//!
//! Async: sealing never calls the plugin (the poller keeps the seed current), so it is CPU
//! only and stays on the caller's thread. Opening calls the plugin on a cache miss: that call
//! is an awaited async gRPC call (tokio + h2), bounded by the provider's timeout, so it parks
//! the request's task, never an async worker thread; [`crate::EncryptedStore`] awaits it.

pub mod grpc;
pub mod proto;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant, SystemTime};

use rand::RngCore;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM};
use ring::digest::{digest, SHA256};
use ring::hkdf;

use grpc::GrpcClient;
use proto::{EncryptedObject, AES_GCM_KEY, HKDF_SHA256_XNONCE_AES_GCM_SEED};

/// Status poll pace while healthy (kube's `kmsv2PluginHealthzPositiveInterval`).
pub const POLL_HEALTHY: Duration = Duration::from_secs(60);
/// Status poll pace while unhealthy (kube's `kmsv2PluginHealthzNegativeInterval`).
pub const POLL_UNHEALTHY: Duration = Duration::from_secs(10);
/// How long writes coast on the current seed without a good Status
/// (kube's `kmsv2PluginWriteDEKSourceMaxTTL`).
pub const WRITE_SEED_MAX_TTL: Duration = Duration::from_secs(180);
/// How long a health check answer is reused (kube's `kmsPluginHealthzPositiveTTL`/`NegativeTTL`).
const HEALTHZ_POSITIVE_TTL: Duration = Duration::from_secs(20);
const HEALTHZ_NEGATIVE_TTL: Duration = Duration::from_secs(3);
/// kube's limits of EncryptedObject fields.
const KEY_ID_MAX: usize = 1024;
const DEK_SOURCE_MAX: usize = 1024;
const ANNOTATIONS_MAX: usize = 32 * 1024;
/// Seed size and KDF info size (kube's `MinSeedSizeExtendedNonceGCM`, `infoSizeExtendedNonceGCM`).
const SEED_SIZE: usize = 32;
const INFO_SIZE: usize = 32;
const NONCE_SIZE: usize = 12;
/// DEK cache: kube's entries live 24 h; here also at most this many (oldest dropped first),
/// so a store full of distinct DEK sources cannot grow memory without bound.
const CACHE_TTL: Duration = Duration::from_secs(24 * 3600);
const CACHE_MAX: usize = 4096;

/// A `kms` provider's configuration, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KmsConfig {
    /// The provider's name (part of the stored prefix).
    pub name: String,
    /// The plugin's socket (`endpoint: unix:///path`).
    pub socket: PathBuf,
    /// Bound on each plugin call.
    pub timeout: Duration,
}

/// A decrypted DEK source: what opens (and, for the write state, seals) values.
enum Dek {
    /// KDF mode: the seed as an HKDF-SHA256 pseudo-random key.
    Seed(hkdf::Prk),
    /// kube's older mode: the DEK itself.
    Key(Box<LessSafeKey>),
}

impl Dek {
    fn new(kind: u64, plaintext: &[u8]) -> Result<Self, String> {
        match kind {
            HKDF_SHA256_XNONCE_AES_GCM_SEED if plaintext.len() >= SEED_SIZE => Ok(Dek::Seed(hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, plaintext))),
            HKDF_SHA256_XNONCE_AES_GCM_SEED => Err(format!("invalid seed length {} used for key generation", plaintext.len())),
            _ => {
                let alg = match plaintext.len() {
                    16 => &AES_128_GCM,
                    32 => &AES_256_GCM,
                    n => return Err(format!("crypto/aes: invalid key size {n}")),
                };
                let key = UnboundKey::new(alg, plaintext).map_err(|_| "crypto/aes: invalid key".to_owned())?;
                Ok(Dek::Key(Box::new(LessSafeKey::new(key))))
            }
        }
    }

    fn derived(prk: &hkdf::Prk, info: &[u8]) -> LessSafeKey {
        let info = [info];
        let okm = prk.expand(&info, &AES_256_GCM).expect("32 bytes are within HKDF-SHA256's output limit");
        LessSafeKey::new(UnboundKey::from(okm))
    }

    /// info + nonce + sealed (KDF mode only: the write state is always a seed).
    fn seal(&self, storage_key: &str, plaintext: &[u8]) -> Result<Vec<u8>, String> {
        let Dek::Seed(prk) = self else { return Err("the write DEK is not a seed".into()) };
        let mut header = [0u8; INFO_SIZE + NONCE_SIZE];
        rand::thread_rng().fill_bytes(&mut header);
        let key = Self::derived(prk, &header[..INFO_SIZE]);
        let nonce = Nonce::try_assume_unique_for_key(&header[INFO_SIZE..]).expect("12 bytes");
        let mut out = Vec::with_capacity(header.len() + plaintext.len() + 16);
        out.extend_from_slice(&header);
        out.extend_from_slice(plaintext);
        let tag = key
            .seal_in_place_separate_tag(nonce, Aad::from(storage_key.as_bytes()), &mut out[header.len()..])
            .map_err(|_| "failed to seal".to_owned())?;
        out.extend_from_slice(tag.as_ref());
        Ok(out)
    }

    fn open(&self, storage_key: &str, data: &[u8]) -> Result<Vec<u8>, String> {
        match self {
            Dek::Seed(prk) => {
                if data.len() < INFO_SIZE {
                    return Err("the stored data was shorter than the required size".into());
                }
                open_with(&Self::derived(prk, &data[..INFO_SIZE]), storage_key, &data[INFO_SIZE..])
            }
            Dek::Key(key) => open_with(key, storage_key, data),
        }
    }
}

/// kube's GCM transformer read: nonce + sealed, the storage key as additional data.
fn open_with(key: &LessSafeKey, storage_key: &str, data: &[u8]) -> Result<Vec<u8>, String> {
    if data.len() < NONCE_SIZE {
        return Err("the stored data was shorter than the required size".into());
    }
    let nonce = Nonce::try_assume_unique_for_key(&data[..NONCE_SIZE]).expect("12 bytes");
    let mut buf = data[NONCE_SIZE..].to_vec();
    let n =
        key.open_in_place(nonce, Aad::from(storage_key.as_bytes()), &mut buf).map_err(|_| "cipher: message authentication failed".to_owned())?.len();
    buf.truncate(n);
    Ok(buf)
}

/// The write state: the current seed, as the plugin encrypted it.
#[derive(Clone)]
struct WriteState {
    dek: Arc<Dek>,
    /// The EncryptedObject without data: key ID, encrypted seed, annotations, type.
    object: EncryptedObject,
    cache_key: [u8; 32],
    expires: SystemTime,
}

/// kube's `generateCacheKey`, hashed with SHA-256 as kube's cache does.
fn cache_key(o: &EncryptedObject) -> [u8; 32] {
    let mut b = Vec::with_capacity(o.encrypted_dek_source.len() + o.key_id.len() + 16);
    b.extend_from_slice(&(o.encrypted_dek_source_type as u32).to_be_bytes());
    b.extend_from_slice(&(o.encrypted_dek_source.len() as u16).to_be_bytes());
    b.extend_from_slice(&o.encrypted_dek_source);
    b.extend_from_slice(&(o.key_id.len() as u16).to_be_bytes());
    b.extend_from_slice(o.key_id.as_bytes());
    if !o.annotations.is_empty() {
        b.extend_from_slice(&(o.annotations.len() as u32).to_be_bytes());
        for (k, v) in &o.annotations {
            b.extend_from_slice(&(k.len() as u16).to_be_bytes());
            b.extend_from_slice(k.as_bytes());
            b.extend_from_slice(&(v.len() as u16).to_be_bytes());
            b.extend_from_slice(v);
        }
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(digest(&SHA256, &b).as_ref());
    out
}

/// kube's `GetHashIfNotEmpty`.
fn key_id_hash(key_id: &str) -> String {
    if key_id.is_empty() {
        return String::new();
    }
    let d = digest(&SHA256, key_id.as_bytes());
    format!("sha256:{}", d.as_ref().iter().map(|b| format!("{b:02x}")).collect::<String>())
}

fn rfc3339(t: SystemTime) -> String {
    let t = time::OffsetDateTime::from(t).replace_nanosecond(0).expect("0 ns is valid");
    t.format(&time::format_description::well_known::Rfc3339).unwrap_or_default()
}

/// kube's `ValidateKeyID`.
fn validate_key_id(key_id: &str) -> Result<(), String> {
    if key_id.is_empty() {
        return Err("keyID is empty".into());
    }
    if key_id.len() > KEY_ID_MAX {
        return Err(format!("keyID is {} bytes, which exceeds the max size of {KEY_ID_MAX}", key_id.len()));
    }
    Ok(())
}

/// kube's `ValidateEncryptedObject`.
fn validate_object(o: &EncryptedObject) -> Result<(), String> {
    if o.encrypted_dek_source_type != AES_GCM_KEY && o.encrypted_dek_source_type != HKDF_SHA256_XNONCE_AES_GCM_SEED {
        return Err(format!("unknown encryptedDEKSourceType: {}", o.encrypted_dek_source_type));
    }
    if o.encrypted_data.is_empty() {
        return Err("encrypted data is empty".into());
    }
    if o.encrypted_dek_source.is_empty() {
        return Err("failed to validate encrypted DEK source: encrypted DEK source is empty".into());
    }
    if o.encrypted_dek_source.len() > DEK_SOURCE_MAX {
        return Err(format!(
            "failed to validate encrypted DEK source: encrypted DEK source is {} bytes, which exceeds the max size of {DEK_SOURCE_MAX}",
            o.encrypted_dek_source.len()
        ));
    }
    validate_key_id(&o.key_id).map_err(|e| format!("failed to validate key id: {e}"))?;
    let mut errs = Vec::new();
    let mut total = 0;
    for (k, v) in &o.annotations {
        if !is_fully_qualified_domain_name(k) {
            errs.push(format!("annotations: Invalid value: {k:?}: should be a domain with at least two segments separated by dots"));
        }
        total += k.len() + v.len();
    }
    if total > ANNOTATIONS_MAX {
        errs.push(format!("total size of annotations is {total}, which exceeds the max size of {ANNOTATIONS_MAX}"));
    }
    match errs.len() {
        0 => Ok(()),
        1 => Err(format!("failed to validate annotations: {}", errs[0])),
        _ => Err(format!("failed to validate annotations: [{}]", errs.join(", "))),
    }
}

/// kube's `IsFullyQualifiedDomainName`: at least two DNS-1123 labels.
fn is_fully_qualified_domain_name(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    let labels: Vec<&str> = s.split('.').collect();
    s.len() <= 253
        && labels.len() >= 2
        && labels.iter().all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// The bounded DEK cache.
#[derive(Default)]
struct DekCache {
    entries: HashMap<[u8; 32], (Arc<Dek>, Instant)>,
}

impl DekCache {
    fn get(&self, key: &[u8; 32]) -> Option<Arc<Dek>> {
        // kube's cache allows expired gets: a key's value never changes.
        self.entries.get(key).map(|(d, _)| d.clone())
    }

    fn set(&mut self, key: [u8; 32], dek: Arc<Dek>) {
        let now = Instant::now();
        self.entries.retain(|_, (_, at)| now.duration_since(*at) < CACHE_TTL);
        if self.entries.len() >= CACHE_MAX && !self.entries.contains_key(&key) {
            if let Some(oldest) = self.entries.iter().min_by_key(|(_, (_, at))| *at).map(|(k, _)| *k) {
                self.entries.remove(&oldest);
            }
        }
        self.entries.insert(key, (dek, now));
    }

    fn len(&self) -> usize {
        self.entries.len()
    }
}

struct Probe {
    checked: Option<Instant>,
    ttl: Duration,
    result: Result<(), String>,
    /// The plugin's API version from its first good Status (it must not change).
    version: String,
}

/// One `kms` provider (KMS v2): shared by every resource that lists it.
pub struct KmsV2 {
    config: KmsConfig,
    prefix: Vec<u8>,
    client: GrpcClient,
    state: RwLock<Option<WriteState>>,
    cache: Mutex<DekCache>,
    probe: tokio::sync::Mutex<Probe>,
    started: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for KmsV2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KmsV2({:?}, {})", self.config.name, self.config.socket.display())
    }
}

impl KmsV2 {
    /// A provider for `config`; nothing is dialled until [`KmsV2::start`] or a call.
    pub fn new(config: KmsConfig) -> Self {
        KmsV2 {
            prefix: format!("k8s:enc:kms:v2:{}:", config.name).into_bytes(),
            client: GrpcClient::new(&config.socket),
            config,
            state: RwLock::new(None),
            cache: Mutex::new(DekCache::default()),
            probe: tokio::sync::Mutex::new(Probe { checked: None, ttl: HEALTHZ_NEGATIVE_TTL, result: Ok(()), version: String::new() }),
            started: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The provider's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// `k8s:enc:kms:v2:<name>:`.
    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// kube's `primeAndProbeKMSv2`: one Status (and Encrypt of a new seed) now, bounded by the
    /// timeout, then the poll in the background for as long as the provider lives. A plugin
    /// that is down now is not fatal (it may start after kapi): writes fail until it answers.
    pub async fn start(self: &Arc<Self>) {
        if self.started.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let healthy = match self.check().await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(name = %self.config.name, error = %e, "kms plugin failed health check probe");
                false
            }
        };
        let weak: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut healthy = healthy;
            loop {
                tokio::time::sleep(if healthy { POLL_HEALTHY } else { POLL_UNHEALTHY }).await;
                let Some(this) = weak.upgrade() else { return };
                healthy = match this.check().await {
                    Ok(()) => true,
                    Err(e) => {
                        tracing::warn!(name = %this.config.name, error = %e, "kms plugin failed health check probe");
                        false
                    }
                };
            }
        });
    }

    /// kube's `kmsv2PluginProbe.check`: Status (reusing the last answer for 20 s, or 3 s after
    /// a failure), health and key ID checked, and a new seed when the key ID changed.
    pub async fn check(&self) -> Result<(), String> {
        let mut probe = self.probe.lock().await;
        if let Some(at) = probe.checked {
            if at.elapsed() < probe.ttl {
                return probe.result.clone();
            }
        }
        let result = match self.client.call("Status", &[], self.config.timeout).await {
            Err(e) => Err(format!("failed to perform status section of the healthz check for KMS Provider {}, error: {e}", self.config.name)),
            Ok(bytes) => match proto::StatusResponse::decode(&bytes) {
                Err(e) => Err(format!("failed to perform status section of the healthz check for KMS Provider {}, error: {e}", self.config.name)),
                Ok(status) => self.healthy_and_maybe_rotate(&mut probe, &status).await,
            },
        };
        probe.checked = Some(Instant::now());
        probe.ttl = if result.is_ok() { HEALTHZ_POSITIVE_TTL } else { HEALTHZ_NEGATIVE_TTL };
        probe.result = result.clone();
        result
    }

    async fn healthy_and_maybe_rotate(&self, probe: &mut Probe, status: &proto::StatusResponse) -> Result<(), String> {
        let mut errs = Vec::new();
        if status.healthz != "ok" {
            errs.push(format!("got unexpected healthz status: {}", status.healthz));
        }
        if status.version != "v2" && status.version != "v2beta1" {
            errs.push(format!("expected KMSv2 API version v2, got {}", status.version));
        } else {
            if probe.version.is_empty() {
                probe.version = status.version.clone();
            }
            if probe.version != status.version {
                errs.push(format!(
                    "KMSv2 API version should not change after the initial status response version {}, got {}",
                    probe.version, status.version
                ));
            }
        }
        match validate_key_id(&status.key_id) {
            Err(e) => errs.push(format!("got invalid KMSv2 KeyID hash {:?}: {e}", key_id_hash(&status.key_id))),
            Ok(()) => {
                if let Err(e) = self.rotate_on_key_id_change(&status.key_id).await {
                    errs.push(e);
                }
            }
        }
        match errs.len() {
            0 => Ok(()),
            1 => Err(format!("kmsv2 Provider {} is not healthy, error: {}", self.config.name, errs[0])),
            _ => Err(format!("kmsv2 Provider {} is not healthy, error: [{}]", self.config.name, errs.join(", "))),
        }
    }

    /// kube's `rotateDEKOnKeyIDChange`: the same key ID extends the current seed's life; a
    /// new one gets a new seed encrypted by the plugin. On failure the current seed stays
    /// usable until it expires.
    async fn rotate_on_key_id_change(&self, status_key_id: &str) -> Result<(), String> {
        let expires = SystemTime::now() + WRITE_SEED_MAX_TTL;
        let current = self.state.read().expect("state lock").clone();
        if let Some(state) = &current {
            if state.object.key_id == status_key_id && state.object.encrypted_dek_source_type == HKDF_SHA256_XNONCE_AES_GCM_SEED {
                let mut state = state.clone();
                state.expires = expires;
                *self.state.write().expect("state lock") = Some(state);
                return Ok(());
            }
        }
        let uid = uuid::Uuid::new_v4().to_string();
        let generated = self.generate(&uid).await;
        let err_gen = match generated {
            Ok((dek, object)) if object.key_id == status_key_id => {
                let cache_key = cache_key(&object);
                tracing::info!(name = %self.config.name, uid, new_key_id_hash = key_id_hash(&object.key_id), "rotated the KMS v2 DEK seed");
                *self.state.write().expect("state lock") = Some(WriteState { dek: Arc::new(dek), object, cache_key, expires });
                return Ok(());
            }
            Ok((_, object)) => (String::from("<nil>"), object.key_id),
            Err(e) => (e, String::new()),
        };
        let (err_gen, encrypt_key_id) = err_gen;
        let err_state = if current.is_some() { "<nil>" } else { "got unexpected nil transformer" };
        let (state_key_id, state_expires) =
            current.as_ref().map_or((String::new(), SystemTime::UNIX_EPOCH), |s| (s.object.key_id.clone(), s.expires));
        Err(format!(
            "failed to rotate DEK uid={uid:?}, useSeed=true, errState={err_state}, errGen={err_gen}, statusKeyIDHash={:?}, encryptKeyIDHash={:?}, stateKeyIDHash={:?}, expirationTimestamp={}",
            key_id_hash(status_key_id),
            key_id_hash(&encrypt_key_id),
            key_id_hash(&state_key_id),
            rfc3339(state_expires)
        ))
    }

    /// kube's `GenerateTransformer` (seed mode): a new seed, encrypted by the plugin.
    async fn generate(&self, uid: &str) -> Result<(Dek, EncryptedObject), String> {
        let mut seed = [0u8; SEED_SIZE];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut seed).map_err(|_| "failed to generate a seed".to_owned())?;
        let answer = self
            .client
            .call("Encrypt", &proto::encrypt_request(&seed, uid), self.config.timeout)
            .await
            .map_err(|e| format!("failed to encrypt DEK, error: {e}"))?;
        let resp = proto::EncryptResponse::decode(&answer).map_err(|e| format!("failed to encrypt DEK, error: {e}"))?;
        let object = EncryptedObject {
            encrypted_data: Vec::new(),
            key_id: resp.key_id,
            encrypted_dek_source: resp.ciphertext,
            annotations: resp.annotations,
            encrypted_dek_source_type: HKDF_SHA256_XNONCE_AES_GCM_SEED,
        };
        validate_object(&EncryptedObject { encrypted_data: vec![0], ..object.clone() })?;
        Ok((Dek::new(HKDF_SHA256_XNONCE_AES_GCM_SEED, &seed)?, object))
    }

    /// kube's `TransformToStorage`: the stored value (prefix included), sealed with a key
    /// derived from the current seed. No plugin call.
    pub fn encrypt(&self, storage_key: &str, plaintext: &[u8]) -> Result<Vec<u8>, String> {
        let state = self.state.read().expect("state lock").clone().ok_or_else(|| "got unexpected nil transformer".to_owned())?;
        let now = SystemTime::now();
        if now > state.expires {
            return Err(format!(
                "encryptedDEKSource with keyID hash {:?} expired at {} (current time is {})",
                key_id_hash(&state.object.key_id),
                rfc3339(state.expires),
                rfc3339(now)
            ));
        }
        // As kube: the write seed is always in the read cache.
        self.cache.lock().expect("cache lock").set(state.cache_key, state.dek.clone());
        let object = EncryptedObject { encrypted_data: state.dek.seal(storage_key, plaintext)?, ..state.object };
        let mut out = self.prefix.clone();
        out.extend_from_slice(&object.encode());
        Ok(out)
    }

    /// kube's `TransformFromStorage` of the bytes after the prefix: the plaintext, and whether
    /// it is stale (another key ID or DEK source type than the current write state's).
    pub async fn decrypt(&self, storage_key: &str, body: &[u8]) -> Result<(Vec<u8>, bool), String> {
        let object = EncryptedObject::decode(body).map_err(|e| e.to_string())?;
        validate_object(&object)?;
        let state = self.state.read().expect("state lock").as_ref().map(|s| (s.object.key_id.clone(), s.object.encrypted_dek_source_type));
        let Some((state_key_id, state_kind)) = state else { return Err("got unexpected nil transformer".into()) };
        let key = cache_key(&object);
        let cached = self.cache.lock().expect("cache lock").get(&key);
        let dek = match cached {
            Some(dek) => dek,
            None => {
                let request =
                    proto::decrypt_request(&object.encrypted_dek_source, &uuid::Uuid::new_v4().to_string(), &object.key_id, &object.annotations);
                let answer =
                    self.client.call("Decrypt", &request, self.config.timeout).await.map_err(|e| format!("failed to decrypt DEK, error: {e}"))?;
                let plaintext = proto::decrypt_response(&answer).map_err(|e| format!("failed to decrypt DEK, error: {e}"))?;
                let dek = Arc::new(Dek::new(object.encrypted_dek_source_type, &plaintext)?);
                self.cache.lock().expect("cache lock").set(key, dek.clone());
                dek
            }
        };
        let plain = dek.open(storage_key, &object.encrypted_data)?;
        Ok((plain, object.key_id != state_key_id || object.encrypted_dek_source_type != state_kind))
    }

    /// How many DEK sources are cached (metrics, tests).
    pub fn cached_deks(&self) -> usize {
        self.cache.lock().expect("cache lock").len()
    }

    /// The key ID new writes use, once known.
    pub fn current_key_id(&self) -> Option<String> {
        self.state.read().expect("state lock").as_ref().map(|s| s.object.key_id.clone())
    }
}

#[cfg(test)]
mod tests;
