//! A small in-memory Store for the cache's unit tests only: versions per key and a log, so
//! snapshots at past revisions and compaction behave like a real backend.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;
use kapi_storage::{
    Event, EventKind, KeyValue, ListOptions, ListResult, Result, Revision, StorageError, Store,
};
use tokio::sync::watch;

struct Version {
    revision: Revision,
    value: Option<Bytes>,
    create_revision: Revision,
}

#[derive(Default)]
struct State {
    versions: BTreeMap<String, Vec<Version>>,
    log: Vec<Event>,
    revision: Revision,
    compacted: Revision,
}

impl State {
    fn current(&self, key: &str) -> Option<KeyValue> {
        let v = self.versions.get(key)?.last()?;
        v.value.as_ref().map(|value| KeyValue {
            key: key.to_owned(),
            value: value.clone(),
            mod_revision: v.revision,
            create_revision: v.create_revision,
            stale: false,
        })
    }

    fn commit(
        &mut self,
        key: &str,
        kind: EventKind,
        value: Option<Bytes>,
        log_value: Bytes,
    ) -> Revision {
        self.revision += 1;
        let rev = self.revision;
        let prev = self.current(key);
        let create_revision = match (&prev, kind) {
            (Some(p), EventKind::Modified) => p.create_revision,
            _ => rev,
        };
        self.versions
            .entry(key.to_owned())
            .or_default()
            .push(Version {
                revision: rev,
                value,
                create_revision,
            });
        self.log.push(Event {
            revision: rev,
            key: key.to_owned(),
            kind,
            value: log_value,
            prev_revision: prev.map(|p| p.mod_revision).unwrap_or(0),
        });
        rev
    }
}

pub(crate) struct MemStore {
    state: Mutex<State>,
    notify: watch::Sender<Revision>,
    silent: AtomicBool,
}

impl MemStore {
    pub(crate) fn new() -> Self {
        MemStore {
            state: Mutex::default(),
            notify: watch::channel(0).0,
            silent: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops (or resumes) commit notifications, to hold the follower back.
    pub(crate) fn set_silent(&self, silent: bool) {
        self.silent.store(silent, Ordering::SeqCst);
        if !silent {
            self.notify.send_replace(self.lock().revision);
        }
    }

    fn notify(&self, rev: Revision) {
        if !self.silent.load(Ordering::SeqCst) {
            self.notify.send_replace(rev);
        }
    }
}

#[async_trait]
impl Store for MemStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        Ok(self.lock().current(key))
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        let rev = {
            let mut st = self.lock();
            if st.current(key).is_some() {
                return Err(StorageError::AlreadyExists(key.to_owned()));
            }
            st.commit(key, EventKind::Added, Some(value.clone()), value)
        };
        self.notify(rev);
        Ok(rev)
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<Revision> {
        let rev = {
            let mut st = self.lock();
            let cur = st
                .current(key)
                .ok_or_else(|| StorageError::NotFound(key.to_owned()))?;
            if cur.mod_revision != expected {
                return Err(StorageError::Conflict {
                    key: key.to_owned(),
                    expected,
                    current: cur.mod_revision,
                });
            }
            st.commit(key, EventKind::Modified, Some(value.clone()), value)
        };
        self.notify(rev);
        Ok(rev)
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue)> {
        let (rev, cur) = {
            let mut st = self.lock();
            let cur = st
                .current(key)
                .ok_or_else(|| StorageError::NotFound(key.to_owned()))?;
            if let Some(expected) = expected.filter(|e| *e != cur.mod_revision) {
                return Err(StorageError::Conflict {
                    key: key.to_owned(),
                    expected,
                    current: cur.mod_revision,
                });
            }
            (
                st.commit(key, EventKind::Deleted, None, cur.value.clone()),
                cur,
            )
        };
        self.notify(rev);
        Ok((rev, cur))
    }

    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult> {
        let st = self.lock();
        let at = opts.revision.unwrap_or(st.revision);
        if at < st.compacted {
            return Err(StorageError::Compacted {
                requested: at,
                compacted: st.compacted,
            });
        }
        let mut items = Vec::new();
        let mut more = false;
        for (key, versions) in st.versions.range(prefix.to_owned()..) {
            if !key.starts_with(prefix) {
                break;
            }
            if opts
                .start_after
                .as_deref()
                .is_some_and(|s| key.as_str() <= s)
            {
                continue;
            }
            let Some(v) = versions.iter().rev().find(|v| v.revision <= at) else {
                continue;
            };
            let Some(value) = &v.value else { continue };
            if opts.limit.is_some_and(|l| items.len() >= l) {
                more = true;
                break;
            }
            items.push(KeyValue {
                key: key.clone(),
                value: value.clone(),
                mod_revision: v.revision,
                create_revision: v.create_revision,
                stale: false,
            });
        }
        Ok(ListResult {
            items,
            revision: at,
            more,
            remaining: None,
        })
    }

    async fn count(&self, prefix: &str) -> Result<u64> {
        Ok(self.list(prefix, ListOptions::default()).await?.items.len() as u64)
    }

    async fn read_log(&self, after: Revision, limit: usize) -> Result<Vec<Event>> {
        let st = self.lock();
        if after < st.compacted {
            return Err(StorageError::Compacted {
                requested: after,
                compacted: st.compacted,
            });
        }
        Ok(st
            .log
            .iter()
            .filter(|e| e.revision > after)
            .take(limit)
            .cloned()
            .collect())
    }

    async fn current_revision(&self) -> Result<Revision> {
        Ok(self.lock().revision)
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        Ok(self.lock().compacted)
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let mut st = self.lock();
        st.compacted = st.compacted.max(revision);
        let c = st.compacted;
        st.log.retain(|e| e.revision >= c);
        Ok(())
    }

    fn subscribe(&self) -> watch::Receiver<Revision> {
        self.notify.subscribe()
    }
}
