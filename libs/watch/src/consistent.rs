//! The store's current revision for consistent reads from the watch caches, one store round
//! trip per batch of readers instead of one per request.
//!
//! A consistent read (a GET or LIST without `resourceVersion`) must see every write
//! acknowledged before it arrived. Reading the store's current revision after the request
//! arrived and waiting for the cache to reach it gives exactly that. Concurrent readers share
//! one revision read, provided it started after each of them arrived: every reader takes a
//! ticket on arrival, and a read started when `issued` tickets had been handed out serves those
//! tickets. Readers queue on one lock; whoever holds it either finds its ticket served already or
//! performs the next read for everyone waiting. A reader dropped mid-read releases the lock and
//! the next one reads, so cancellation never strands the others.

use std::sync::atomic::{AtomicU64, Ordering};

use kapi_storage::{DynStore, Revision, StorageError};
use tokio::sync::Mutex;

/// The last read: the highest ticket it serves and what it found.
#[derive(Debug, Default)]
struct Served {
    ticket: u64,
    revision: Revision,
}

/// Batched reads of a store's current revision (see the module doc).
pub struct RevisionReads {
    store: DynStore,
    issued: AtomicU64,
    served: Mutex<Served>,
}

impl RevisionReads {
    /// Reads of `store`'s current revision.
    pub fn new(store: DynStore) -> Self {
        Self { store, issued: AtomicU64::new(0), served: Mutex::new(Served::default()) }
    }

    /// A revision at least as new as every write acknowledged before this call.
    pub async fn current(&self) -> Result<Revision, StorageError> {
        let ticket = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
        let mut served = self.served.lock().await;
        if served.ticket >= ticket {
            return Ok(served.revision);
        }
        // Every ticket up to `issued` belongs to a reader that arrived before this read starts.
        let covers = self.issued.load(Ordering::SeqCst);
        let revision = self.store.current_revision().await?;
        *served = Served { ticket: covers, revision: revision.max(served.revision) };
        Ok(served.revision)
    }
}

impl std::fmt::Debug for RevisionReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RevisionReads").field("issued", &self.issued.load(Ordering::Relaxed)).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    use std::time::Duration;

    use async_trait::async_trait;
    use bytes::Bytes;
    use kapi_storage::sqlite::{SqliteConfig, SqliteStore};
    use kapi_storage::{Event, KeyValue, ListOptions, ListResult, Store};
    use tokio::sync::watch;

    use super::*;

    /// The real SQLite store, with its revision reads counted and slowed down after they read
    /// (a store round trip under load), so that reads overlap.
    struct SlowRevisions {
        inner: DynStore,
        reads: AtomicUsize,
    }

    #[async_trait]
    impl Store for SlowRevisions {
        async fn get(&self, key: &str) -> kapi_storage::Result<Option<KeyValue>> {
            self.inner.get(key).await
        }
        async fn create(&self, key: &str, value: Bytes) -> kapi_storage::Result<Revision> {
            self.inner.create(key, value).await
        }
        async fn update(&self, key: &str, value: Bytes, expected: Revision) -> kapi_storage::Result<Revision> {
            self.inner.update(key, value, expected).await
        }
        async fn delete(&self, key: &str, expected: Option<Revision>) -> kapi_storage::Result<(Revision, KeyValue)> {
            self.inner.delete(key, expected).await
        }
        async fn list(&self, prefix: &str, opts: ListOptions) -> kapi_storage::Result<ListResult> {
            self.inner.list(prefix, opts).await
        }
        async fn count(&self, prefix: &str) -> kapi_storage::Result<u64> {
            self.inner.count(prefix).await
        }
        async fn read_log(&self, after: Revision, limit: usize) -> kapi_storage::Result<Vec<Event>> {
            self.inner.read_log(after, limit).await
        }
        async fn current_revision(&self) -> kapi_storage::Result<Revision> {
            let revision = self.inner.current_revision().await?;
            self.reads.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(30)).await;
            Ok(revision)
        }
        async fn compacted_revision(&self) -> kapi_storage::Result<Revision> {
            self.inner.compacted_revision().await
        }
        async fn compact(&self, revision: Revision) -> kapi_storage::Result<()> {
            self.inner.compact(revision).await
        }
        fn subscribe(&self) -> watch::Receiver<Revision> {
            self.inner.subscribe()
        }
    }

    fn slow(dir: &tempfile::TempDir) -> Arc<SlowRevisions> {
        let inner: DynStore = SqliteStore::open(&dir.path().join("kapi.db"), SqliteConfig::default()).expect("open SQLite");
        Arc::new(SlowRevisions { inner, reads: AtomicUsize::new(0) })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_readers_share_reads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = slow(&dir);
        let written = store.create("/registry/core/configmaps/a/b", Bytes::from_static(b"{}")).await.expect("create");
        let reads = Arc::new(RevisionReads::new(store.clone()));
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let reads = reads.clone();
                tokio::spawn(async move { reads.current().await })
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.expect("task").expect("read"), written);
        }
        let n = store.reads.load(Ordering::SeqCst);
        assert!((1..=2).contains(&n), "64 concurrent readers took {n} store reads");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_reader_never_gets_a_read_that_started_before_it_arrived() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = slow(&dir);
        let first = store.create("/registry/core/configmaps/a/1", Bytes::from_static(b"{}")).await.expect("create");
        let reads = Arc::new(RevisionReads::new(store.clone()));
        // A read is in flight (it has read `first`)...
        let early = tokio::spawn({
            let reads = reads.clone();
            async move { reads.current().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        // ...then a write is acknowledged, then a reader arrives: it must see that write.
        let second = store.create("/registry/core/configmaps/a/2", Bytes::from_static(b"{}")).await.expect("create");
        assert_eq!(reads.current().await.expect("read"), second);
        assert_eq!(early.await.expect("task").expect("read"), first);
        assert_eq!(store.reads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_reader_dropped_mid_read_does_not_strand_the_others() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = slow(&dir);
        let written = store.create("/registry/core/configmaps/a/b", Bytes::from_static(b"{}")).await.expect("create");
        let reads = Arc::new(RevisionReads::new(store.clone()));
        let first = tokio::spawn({
            let reads = reads.clone();
            async move { reads.current().await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        first.abort();
        let second = tokio::time::timeout(Duration::from_secs(2), reads.current()).await;
        assert_eq!(second.expect("not stranded").expect("read"), written);
    }
}
