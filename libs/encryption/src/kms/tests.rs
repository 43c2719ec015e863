//! The KMS v2 provider against a real gRPC plugin written here: an h2 server on a Unix socket
//! that really encrypts (AES-256-GCM under a key per key ID) and can rotate, fail or report
//! unhealthy.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use tokio::net::UnixListener;

use super::proto::{self, EncryptedObject};
use super::*;

#[derive(Default)]
struct PluginState {
    current: String,
    keys: HashMap<String, [u8; 32]>,
    healthz: String,
    down: bool,
    calls: HashMap<&'static str, usize>,
}

struct Plugin {
    state: Arc<Mutex<PluginState>>,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

fn aead(key: &[u8; 32]) -> LessSafeKey {
    LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).unwrap())
}

impl PluginState {
    fn rotate(&mut self, key_id: &str) {
        let mut key = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut key);
        self.keys.insert(key_id.to_owned(), key);
        self.current = key_id.to_owned();
    }

    /// (grpc-status, message, answer)
    fn answer(&mut self, method: &str, request: &[u8]) -> (u32, String, Vec<u8>) {
        let method: &'static str = match method {
            "/v2.KeyManagementService/Status" => "Status",
            "/v2.KeyManagementService/Encrypt" => "Encrypt",
            "/v2.KeyManagementService/Decrypt" => "Decrypt",
            _ => return (12, "unknown method".into(), Vec::new()),
        };
        *self.calls.entry(method).or_default() += 1;
        if self.down {
            return (14, "plugin down".into(), Vec::new());
        }
        match method {
            "Status" => (
                0,
                String::new(),
                proto::StatusResponse { version: "v2".into(), healthz: self.healthz.clone(), key_id: self.current.clone() }.encode(),
            ),
            "Encrypt" => {
                let plaintext = field(request, 1);
                let mut nonce = [0u8; 12];
                rand::thread_rng().fill_bytes(&mut nonce);
                let mut sealed = plaintext.clone();
                aead(&self.keys[&self.current]).seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut sealed).unwrap();
                let ciphertext = [nonce.as_slice(), &sealed].concat();
                (0, String::new(), proto::EncryptResponse { ciphertext, key_id: self.current.clone(), annotations: Default::default() }.encode())
            }
            _ => {
                let (ciphertext, key_id) = (field(request, 1), String::from_utf8(field(request, 3)).unwrap());
                let Some(key) = self.keys.get(&key_id) else { return (3, format!("unknown key {key_id}"), Vec::new()) };
                let mut buf = ciphertext[12..].to_vec();
                let nonce = Nonce::try_assume_unique_for_key(&ciphertext[..12]).unwrap();
                match aead(key).open_in_place(nonce, Aad::empty(), &mut buf) {
                    Ok(plain) => {
                        let plain = plain.to_vec();
                        let mut out = vec![0x0a, plain.len() as u8];
                        out.extend_from_slice(&plain);
                        (0, String::new(), out)
                    }
                    Err(_) => (3, "cannot decrypt".into(), Vec::new()),
                }
            }
        }
    }
}

/// A length-delimited field of a flat message (test plugin only).
fn field(msg: &[u8], want: u8) -> Vec<u8> {
    let mut i = 0;
    while i < msg.len() {
        let (key, len) = (msg[i], msg[i + 1] as usize);
        if key >> 3 == want {
            return msg[i + 2..i + 2 + len].to_vec();
        }
        i += 2 + len;
    }
    Vec::new()
}

impl Plugin {
    async fn start() -> Plugin {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("kms.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let mut initial = PluginState { healthz: "ok".into(), ..Default::default() };
        initial.rotate("key-1");
        let state = Arc::new(Mutex::new(initial));
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    let Ok(mut conn) = h2::server::handshake(stream).await else { return };
                    while let Some(Ok((req, mut respond))) = conn.accept().await {
                        let state = state.clone();
                        tokio::spawn(async move {
                            let path = req.uri().path().to_owned();
                            assert_eq!(req.headers()["content-type"], "application/grpc");
                            assert_eq!(req.headers()["te"], "trailers");
                            let mut body = req.into_body();
                            let mut data = Vec::new();
                            while let Some(chunk) = body.data().await {
                                let chunk = chunk.unwrap();
                                let _ = body.flow_control().release_capacity(chunk.len());
                                data.extend_from_slice(&chunk);
                            }
                            let (code, message, answer) = state.lock().unwrap().answer(&path, &data[5..]);
                            let head = http::Response::builder().status(200).header("content-type", "application/grpc").body(()).unwrap();
                            let mut send = respond.send_response(head, false).unwrap();
                            if code == 0 {
                                let mut frame = vec![0];
                                frame.extend_from_slice(&(answer.len() as u32).to_be_bytes());
                                frame.extend_from_slice(&answer);
                                send.send_data(Bytes::from(frame), false).unwrap();
                            }
                            let mut trailers = http::HeaderMap::new();
                            trailers.insert("grpc-status", code.to_string().parse().unwrap());
                            if !message.is_empty() {
                                trailers.insert("grpc-message", message.replace(' ', "%20").parse().unwrap());
                            }
                            send.send_trailers(trailers).unwrap();
                        });
                    }
                });
            }
        });
        Plugin { state, socket, _dir: dir }
    }

    fn calls(&self, method: &str) -> usize {
        self.state.lock().unwrap().calls.get(method).copied().unwrap_or(0)
    }

    fn provider(&self) -> Arc<KmsV2> {
        Arc::new(KmsV2::new(KmsConfig { name: "p".into(), socket: self.socket.clone(), timeout: Duration::from_secs(3) }))
    }
}

/// The next check asks the plugin again (as after the healthz TTL).
async fn poll_now(kms: &KmsV2) -> Result<(), String> {
    kms.probe.lock().await.checked = None;
    kms.check().await
}

const KEY: &str = "/registry/core/secrets/default/s";

#[tokio::test]
async fn values_round_trip_with_one_encrypt_per_key_id() {
    let plugin = Plugin::start().await;
    let kms = plugin.provider();
    kms.start().await;
    assert_eq!(kms.current_key_id().as_deref(), Some("key-1"));
    let a = kms.encrypt(KEY, b"TOP-SECRET").unwrap();
    let b = kms.encrypt(KEY, b"TOP-SECRET").unwrap();
    assert_ne!(a, b, "a fresh KDF info and nonce each write");
    assert!(a.starts_with(b"k8s:enc:kms:v2:p:"));
    assert!(!a.windows(10).any(|w| w == b"TOP-SECRET"));
    let object = EncryptedObject::decode(&a[b"k8s:enc:kms:v2:p:".len()..]).unwrap();
    assert_eq!(object.key_id, "key-1");
    assert_eq!(object.encrypted_dek_source_type, proto::HKDF_SHA256_XNONCE_AES_GCM_SEED);
    assert_eq!(object.encrypted_data.len(), 32 + 12 + 10 + 16, "info, nonce, ciphertext, tag");
    assert_eq!(object.encrypted_dek_source.len(), 12 + 32 + 16, "the plugin's sealing of a 32-byte seed");
    let body = &a[kms.prefix().len()..];
    assert_eq!(kms.decrypt(KEY, body).await, Ok((b"TOP-SECRET".to_vec(), false)));
    // The storage key is authenticated: a value copied under another key does not open.
    assert_eq!(kms.decrypt("/registry/core/secrets/other/s", body).await, Err("cipher: message authentication failed".into()));
    for _ in 0..50 {
        kms.encrypt(KEY, b"x").unwrap();
    }
    assert_eq!(plugin.calls("Encrypt"), 1, "one seed for every write under key-1");
    assert_eq!(plugin.calls("Decrypt"), 0, "the write seed is cached for reads");
    // A corrupted object is refused with kube's validation, not opened.
    let mut bad = object.clone();
    bad.key_id.clear();
    assert_eq!(kms.decrypt(KEY, &bad.encode()).await, Err("failed to validate key id: keyID is empty".into()));
}

#[tokio::test]
async fn a_key_id_change_makes_new_writes_use_a_new_seed_and_old_data_still_reads() {
    let plugin = Plugin::start().await;
    let kms = plugin.provider();
    kms.start().await;
    let old = kms.encrypt(KEY, b"old").unwrap();
    // Same key ID: no new seed.
    poll_now(&kms).await.unwrap();
    assert_eq!(plugin.calls("Encrypt"), 1);
    plugin.state.lock().unwrap().rotate("key-2");
    poll_now(&kms).await.unwrap();
    assert_eq!(plugin.calls("Encrypt"), 2);
    assert_eq!(kms.current_key_id().as_deref(), Some("key-2"));
    let new = kms.encrypt(KEY, b"new").unwrap();
    assert_eq!(EncryptedObject::decode(&new[kms.prefix().len()..]).unwrap().key_id, "key-2");
    // The old value reads, as stale (a rewrite re-encrypts it); the new one is current.
    assert_eq!(kms.decrypt(KEY, &old[kms.prefix().len()..]).await, Ok((b"old".to_vec(), true)));
    assert_eq!(kms.decrypt(KEY, &new[kms.prefix().len()..]).await, Ok((b"new".to_vec(), false)));

    // A fresh process (empty cache) asks the plugin once per DEK source, then reads from cache.
    let fresh = plugin.provider();
    fresh.start().await;
    for _ in 0..5 {
        assert_eq!(fresh.decrypt(KEY, &old[kms.prefix().len()..]).await, Ok((b"old".to_vec(), true)));
        assert_eq!(fresh.decrypt(KEY, &new[kms.prefix().len()..]).await, Ok((b"new".to_vec(), false)));
    }
    assert_eq!(plugin.calls("Decrypt"), 2, "key-1's seed and key-2's seed (fresh generated its own write seed)");
    assert_eq!(fresh.cached_deks(), 2, "the two read (its own write seed enters the cache with its first write)");
}

#[tokio::test]
async fn the_plugin_down_fails_writes_and_uncached_reads_with_kubes_errors() {
    let plugin = Plugin::start().await;
    let kms = plugin.provider();
    kms.start().await;
    let sealed = kms.encrypt(KEY, b"v").unwrap();
    plugin.state.lock().unwrap().down = true;
    // Cached DEK: reads go on; writes coast on the current seed until it expires.
    assert_eq!(kms.decrypt(KEY, &sealed[kms.prefix().len()..]).await, Ok((b"v".to_vec(), false)));
    let err = poll_now(&kms).await.unwrap_err();
    assert_eq!(
        err,
        "failed to perform status section of the healthz check for KMS Provider p, error: rpc error: code = Unavailable desc = plugin down"
    );
    assert!(kms.encrypt(KEY, b"w").is_ok());
    {
        let mut state = kms.state.write().unwrap();
        state.as_mut().unwrap().expires = SystemTime::now() - Duration::from_secs(1);
    }
    let err = kms.encrypt(KEY, b"w").unwrap_err();
    assert!(err.starts_with(&format!("encryptedDEKSource with keyID hash \"{}\" expired at ", key_id_hash("key-1"))), "{err}");
    assert!(err.contains("(current time is "), "{err}");

    // A process started while the plugin is down: no write state.
    let fresh = plugin.provider();
    fresh.start().await;
    assert_eq!(fresh.encrypt(KEY, b"w"), Err("got unexpected nil transformer".into()));
    // Back up: the next poll primes it, and reads ask the plugin for the DEK.
    plugin.state.lock().unwrap().down = false;
    poll_now(&fresh).await.unwrap();
    assert_eq!(fresh.decrypt(KEY, &sealed[kms.prefix().len()..]).await, Ok((b"v".to_vec(), false)));
    // Down again: the cached DEK reads; a DEK not cached does not.
    let other = plugin.provider();
    other.start().await;
    let other_sealed = other.encrypt(KEY, b"z").unwrap();
    plugin.state.lock().unwrap().down = true;
    assert_eq!(fresh.decrypt(KEY, &sealed[kms.prefix().len()..]).await, Ok((b"v".to_vec(), false)));
    assert_eq!(
        fresh.decrypt(KEY, &other_sealed[kms.prefix().len()..]).await,
        Err("failed to decrypt DEK, error: rpc error: code = Unavailable desc = plugin down".into())
    );
}

#[tokio::test]
async fn unhealthy_status_answers_read_as_kubes() {
    let plugin = Plugin::start().await;
    plugin.state.lock().unwrap().healthz = "broken".into();
    let kms = plugin.provider();
    kms.start().await;
    assert_eq!(poll_now(&kms).await, Err("kmsv2 Provider p is not healthy, error: got unexpected healthz status: broken".into()));
    // The key ID is still fine, so the seed was made: writes work while healthz says otherwise.
    assert!(kms.encrypt(KEY, b"v").is_ok());
    plugin.state.lock().unwrap().current = String::new();
    assert_eq!(
        poll_now(&kms).await,
        Err("kmsv2 Provider p is not healthy, error: [got unexpected healthz status: broken, got invalid KMSv2 KeyID hash \"\": keyID is empty]"
            .into())
    );
    // A missing socket: kube's dial error.
    let gone = Arc::new(KmsV2::new(KmsConfig { name: "q".into(), socket: "/nonexistent/kms.sock".into(), timeout: Duration::from_secs(1) }));
    assert_eq!(
        gone.check().await,
        Err("failed to perform status section of the healthz check for KMS Provider q, error: rpc error: code = Unavailable desc = connection error: desc = \"transport: Error while dialing: dial unix /nonexistent/kms.sock: connect: no such file or directory\"".into())
    );
}

#[test]
fn the_dek_cache_is_bounded_and_keyed_like_kubes() {
    let mut cache = DekCache::default();
    let dek = Arc::new(Dek::new(proto::AES_GCM_KEY, &[1u8; 32]).unwrap());
    for i in 0..CACHE_MAX + 10 {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&(i as u64).to_be_bytes());
        cache.set(key, dek.clone());
    }
    assert_eq!(cache.len(), CACHE_MAX);
    assert!(cache.get(&[0u8; 32]).is_none(), "the oldest entry went first");
    let object = EncryptedObject {
        encrypted_data: vec![1],
        key_id: "k".into(),
        encrypted_dek_source: vec![2],
        annotations: Default::default(),
        encrypted_dek_source_type: 1,
    };
    let other_key = EncryptedObject { key_id: "k2".into(), ..object.clone() };
    let other_data = EncryptedObject { encrypted_data: vec![9], ..object.clone() };
    assert_ne!(cache_key(&object), cache_key(&other_key));
    assert_eq!(cache_key(&object), cache_key(&other_data), "the data is not part of the key");
    assert!(is_fully_qualified_domain_name("kms.example.com"));
    assert!(!is_fully_qualified_domain_name("nodots"));
}
