//! Encryption at rest over the real SQLite backend: values of encrypted resources never reach
//! the database file (its data, its change log) in plaintext, read back intact through every
//! read path, and survive a key rotation; other resources are stored as they are.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use kapi_encryption::{parse, EncryptedStore};
use kapi_storage::sqlite::{SqliteConfig, SqliteStore};
use kapi_storage::{DynStore, ListOptions, Store};

const KEY1: &str = "c2VjcmV0IGlzIHNlY3VyZSwgaXMgaXQ/IDMyIGJ5dGU=";
const KEY2: &str = "YW5vdGhlciAzMi1ieXRlIGtleSBmb3Igcm90YXRpb24=";

fn config(providers: &str) -> kapi_encryption::EncryptionConfig {
    let text = format!("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n{providers}");
    parse(&text, "enc.yaml").expect("valid configuration")
}

fn store(path: &Path, providers: &str) -> EncryptedStore {
    let sqlite: DynStore = SqliteStore::open(path, SqliteConfig::default()).expect("open sqlite");
    EncryptedStore::new(sqlite, config(providers))
}

/// Every file SQLite may have written (the database and its write-ahead log).
fn file_bytes(dir: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).expect("dir") {
        all.extend(std::fs::read(entry.expect("entry").path()).unwrap_or_default());
    }
    all
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread")]
async fn secrets_are_sealed_in_the_file_and_read_back_everywhere() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("kapi.db");
    let aescbc = format!("  - aescbc: {{keys: [{{name: key1, secret: {KEY1}}}]}}\n  - identity: {{}}\n");
    let s = store(&db, &aescbc);
    let secret = Bytes::from_static(br#"{"kind":"Secret","data":{"token":"TOP-SECRET-VALUE-1"}}"#);
    let config_map = Bytes::from_static(br#"{"kind":"ConfigMap","data":{"note":"PLAIN-CONFIG-VALUE"}}"#);
    let rev = s.create("/registry/core/secrets/default/s1", secret.clone()).await.expect("create secret");
    s.create("/registry/core/configmaps/default/c1", config_map.clone()).await.expect("create configmap");
    let updated = Bytes::from_static(br#"{"kind":"Secret","data":{"token":"TOP-SECRET-VALUE-2"}}"#);
    s.update("/registry/core/secrets/default/s1", updated.clone(), rev).await.expect("update");

    // Every read path answers the plaintext.
    assert_eq!(s.get("/registry/core/secrets/default/s1").await.expect("get").expect("exists").value, updated);
    let page = s.list("/registry/core/secrets/", ListOptions::default()).await.expect("list");
    assert_eq!(page.items[0].value, updated);
    let log = s.read_log(0, 10).await.expect("log");
    let secret_events: Vec<&Bytes> = log.iter().filter(|e| e.key.contains("/secrets/")).map(|e| &e.value).collect();
    assert_eq!(secret_events, vec![&secret, &updated]);

    // The file has the ConfigMap in plaintext and no trace of the Secret's values.
    let bytes = file_bytes(dir.path());
    assert!(contains(&bytes, b"PLAIN-CONFIG-VALUE"), "the scan sees stored plaintext");
    assert!(!contains(&bytes, b"TOP-SECRET-VALUE"), "a Secret value reached the file in plaintext");
    assert!(contains(&bytes, b"k8s:enc:aescbc:v1:key1:"));

    // A store without the key refuses the value instead of answering ciphertext.
    let raw: Arc<SqliteStore> = SqliteStore::open(&db, SqliteConfig::default()).expect("open raw");
    let sealed = raw.get("/registry/core/secrets/default/s1").await.expect("get raw").expect("exists").value;
    assert!(sealed.starts_with(b"k8s:enc:aescbc:v1:key1:"));
    let keyless = EncryptedStore::new(raw, config("  - identity: {}\n"));
    let refused = keyless.get("/registry/core/secrets/default/s1").await.expect_err("no key, no value");
    assert!(refused.to_string().contains("no matching prefix found"), "{refused}");

    // Deleting answers the last value in plaintext too.
    let (_, gone) = s.delete("/registry/core/secrets/default/s1", None).await.expect("delete");
    assert_eq!(gone.value, updated);
}

#[tokio::test(flavor = "multi_thread")]
async fn rotation_to_a_new_key_rewrites_every_secret() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("kapi.db");
    let old = store(&db, &format!("  - secretbox: {{keys: [{{name: key1, secret: {KEY1}}}]}}\n"));
    for i in 0..5 {
        old.create(&format!("/registry/core/secrets/default/s{i}"), Bytes::from(format!(r#"{{"v":"ROTATE-ME-{i}"}}"#))).await.expect("create");
    }
    drop(old);
    // kube's rotation: key2 added as a read key... then first, then every Secret rewritten.
    let rotated = store(&db, &format!("  - secretbox: {{keys: [{{name: key2, secret: {KEY2}}}, {{name: key1, secret: {KEY1}}}]}}\n"));
    let page = rotated.list("/registry/core/secrets/", ListOptions::default()).await.expect("list");
    assert_eq!(page.items.len(), 5);
    assert!(page.items.iter().all(|kv| kv.stale), "sealed with key1 while key2 writes: stale");
    for kv in page.items {
        rotated.update(&kv.key, kv.value.clone(), kv.mod_revision).await.expect("rewrite");
    }
    let rewritten = rotated.get("/registry/core/secrets/default/s0").await.expect("get").expect("exists");
    assert!(!rewritten.stale, "rewritten with key2");
    drop(rotated);
    // key1 gone: everything still reads with key2 alone.
    let only_new = store(&db, &format!("  - secretbox: {{keys: [{{name: key2, secret: {KEY2}}}]}}\n"));
    for i in 0..5 {
        let kv = only_new.get(&format!("/registry/core/secrets/default/s{i}")).await.expect("get").expect("exists");
        assert_eq!(kv.value, Bytes::from(format!(r#"{{"v":"ROTATE-ME-{i}"}}"#)));
    }
}
