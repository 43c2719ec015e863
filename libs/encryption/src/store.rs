//! A [`Store`] that keeps the values of encrypted resources encrypted in the backend: written
//! through the first provider, read back through any. Keys are kapi's storage keys,
//! `/registry/<group or core>/<resource>/...`, which name the resource.

use async_trait::async_trait;
use bytes::Bytes;
use kapi_storage::{DynStore, Event, KeyValue, ListOptions, ListResult, Result, Revision, StorageError, Store};

use std::sync::{Arc, RwLock};

use crate::config::EncryptionConfig;
use crate::providers::Transformer;

/// The configuration in force, swapped whole when `--encryption-provider-config-automatic-reload`
/// reads a new file: a write or read uses the configuration it started with.
#[derive(Debug)]
pub struct LiveConfig(RwLock<Arc<EncryptionConfig>>);

impl LiveConfig {
    /// Starts with `config`.
    pub fn new(config: EncryptionConfig) -> Self {
        LiveConfig(RwLock::new(Arc::new(config)))
    }

    /// The configuration in force now.
    pub fn current(&self) -> Arc<EncryptionConfig> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Puts `config` in force for the writes and reads that start from now on.
    pub fn replace(&self, config: EncryptionConfig) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
    }
}

/// The encrypting wrapper of a backend.
pub struct EncryptedStore {
    inner: DynStore,
    config: Arc<LiveConfig>,
}

fn transformer<'c>(config: &'c EncryptionConfig, key: &str) -> Option<&'c Transformer> {
    let mut parts = key.strip_prefix("/registry/")?.split('/');
    let group = parts.next()?;
    let resource = parts.next()?;
    config.transformer(if group == "core" { "" } else { group }, resource)
}

impl EncryptedStore {
    /// Wraps `inner` with `config`.
    pub fn new(inner: DynStore, config: EncryptionConfig) -> Self {
        Self::live(inner, Arc::new(LiveConfig::new(config)))
    }

    /// Wraps `inner` with a configuration that may be replaced while it serves.
    pub fn live(inner: DynStore, config: Arc<LiveConfig>) -> Self {
        EncryptedStore { inner, config }
    }

    /// The value as stored. Sealing fails only for a KMS provider without a usable seed (the
    /// plugin never answered, or stopped answering long enough): kube's error, nothing stored.
    fn seal(&self, key: &str, value: Bytes) -> Result<Bytes> {
        let config = self.config.current();
        match transformer(&config, key) {
            Some(t) if !t.writes_plaintext() => {
                // kube's create and update answer the transformer's error as it is.
                t.encrypt(key, &value).map(Bytes::from).map_err(|e| StorageError::Backend(e.to_string()))
            }
            _ => Ok(value),
        }
    }

    /// The plaintext of a stored value, and whether it was sealed by other than the writing
    /// key (or written in plaintext where it would now be sealed). Awaits a KMS plugin when
    /// its DEK is not cached.
    async fn open(&self, key: &str, value: Bytes) -> Result<(Bytes, bool)> {
        let config = self.config.current();
        match transformer(&config, key) {
            // Deleted-key tombstones carry no value.
            Some(t) if !value.is_empty() => t
                .decrypt(key, &value)
                .await
                .map(|(plain, stale)| (Bytes::from(plain), stale))
                .map_err(|e| StorageError::Backend(format!("unable to transform key {key:?}: {e}"))),
            _ => Ok((value, false)),
        }
    }

    async fn open_kv(&self, mut kv: KeyValue) -> Result<KeyValue> {
        let (value, stale) = self.open(&kv.key, std::mem::take(&mut kv.value)).await?;
        kv.value = value;
        kv.stale = stale;
        Ok(kv)
    }
}

#[async_trait]
impl Store for EncryptedStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        match self.inner.get(key).await? {
            Some(kv) => Ok(Some(self.open_kv(kv).await?)),
            None => Ok(None),
        }
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        self.inner.create(key, self.seal(key, value)?).await
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<Revision> {
        self.inner.update(key, self.seal(key, value)?, expected).await
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue)> {
        let (revision, kv) = self.inner.delete(key, expected).await?;
        Ok((revision, self.open_kv(kv).await?))
    }

    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult> {
        let mut page = self.inner.list(prefix, opts).await?;
        let mut items = Vec::with_capacity(page.items.len());
        for kv in std::mem::take(&mut page.items) {
            items.push(self.open_kv(kv).await?);
        }
        page.items = items;
        Ok(page)
    }

    async fn count(&self, prefix: &str) -> Result<u64> {
        self.inner.count(prefix).await
    }

    /// An event that does not open (sealed with a key no longer configured, after a rotation
    /// rewrote every current object) ends the history this process can read: answered as
    /// compaction up to it, so log followers start again from the current revision and
    /// watches from before it get 410, as for compacted history.
    async fn read_log(&self, after: Revision, limit: usize) -> Result<Vec<Event>> {
        let events = self.inner.read_log(after, limit).await?;
        let mut opened = Vec::with_capacity(events.len());
        for mut e in events {
            match self.open(&e.key, std::mem::take(&mut e.value)).await {
                Ok((value, _)) => {
                    e.value = value;
                    opened.push(e);
                }
                Err(_) => return Err(StorageError::Compacted { requested: after, compacted: e.revision }),
            }
        }
        Ok(opened)
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.inner.current_revision().await
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        self.inner.compacted_revision().await
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.inner.compact(revision).await
    }

    fn subscribe(&self) -> tokio::sync::watch::Receiver<Revision> {
        self.inner.subscribe()
    }
}
