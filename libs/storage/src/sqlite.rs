//! The embedded SQLite backend: one database file, shareable by several kapi processes.
//!
//! Layout (MVCC in the style of etcd):
//!
//! - `log(revision PRIMARY KEY, key, kind, value, prev_revision, create_revision, committed_at)`
//!   is both the history and the change log. A `Deleted` row carries the last value.
//! - `current(key PRIMARY KEY, value, mod_revision, create_revision)` serves head reads.
//! - `meta(revision, compacted)` holds the store revision and the compaction horizon.
//!
//! Writes go through ONE writer thread per process (group commit: every queued request, up to
//! [`SqliteConfig::max_batch`], in one `BEGIN IMMEDIATE` transaction and one fsync). Revisions are
//! allocated inside that transaction from the stored revision, never from a cached counter, so
//! they stay strictly increasing in commit order when several processes share the file.
//!
//! Compaction horizon semantics (`compacted_revision() == C`):
//! - `list` at any revision `R >= C` works; `R < C` is [`StorageError::Compacted`];
//! - `read_log(after)` works for every `after >= C` and returns every event with revision
//!   greater than `after`; `after < C` is [`StorageError::Compacted`];
//! - `read_log(after)` with `after` beyond the current revision returns no events (they have not
//!   happened yet), while `list` beyond it is [`StorageError::FutureRevision`].
//!
//! Automatic compaction keeps the events of the last [`SqliteConfig::retention`] but never more
//! than [`SqliteConfig::max_retained_events`] events: of the two horizons it picks the newer one,
//! i.e. whichever keeps fewer events.

mod background;
mod busy;
mod reader;
mod schema;
mod writer;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch};

use crate::{Event, KeyValue, ListOptions, ListResult, Result, Revision, StorageError, Store};

use reader::ReaderPool;
use writer::{WriteOp, WriteOutcome, WriteRequest};

/// Tuning of the SQLite backend; `Default` gives the production values.
#[derive(Debug, Clone)]
pub struct SqliteConfig {
    /// Automatic compaction keeps the events committed within this window (default 5 minutes)...
    pub retention: Duration,
    /// ...but never more than this many events (default 100 000; 0 removes the count bound).
    pub max_retained_events: u64,
    /// How often automatic compaction runs (default 60 s; zero disables it).
    pub compaction_interval: Duration,
    /// How often the stored revision is polled to notice commits by other processes sharing the
    /// file (default 100 ms; zero disables polling).
    pub poll_interval: Duration,
    /// Most write requests committed in one transaction (default 256).
    pub max_batch: usize,
    /// Capacity of the queue in front of the writer thread; callers wait when it is full.
    pub queue_capacity: usize,
    /// Number of reader connections (and concurrent blocking reads), default 4.
    pub readers: usize,
    /// How long a connection waits for a lock held by another connection or process (the
    /// writer retries every 1 to 2 ms meanwhile: `sqlite/busy.rs`).
    pub busy_timeout: Duration,
}

impl Default for SqliteConfig {
    fn default() -> Self {
        Self {
            retention: Duration::from_secs(5 * 60),
            max_retained_events: 100_000,
            compaction_interval: Duration::from_secs(60),
            poll_interval: Duration::from_millis(100),
            max_batch: 256,
            queue_capacity: 1024,
            readers: 4,
            busy_timeout: Duration::from_secs(10),
        }
    }
}

impl From<rusqlite::Error> for StorageError {
    fn from(e: rusqlite::Error) -> Self {
        StorageError::Backend(format!("sqlite: {e}"))
    }
}

/// A [`Store`] on one SQLite database file.
///
/// Dropping the last handle stops the writer, poller and compaction threads.
pub struct SqliteStore {
    writes: mpsc::Sender<WriteRequest>,
    readers: ReaderPool,
    notify: Arc<watch::Sender<Revision>>,
    // Dropping these disconnects the background threads' stop channels, which ends them.
    _stop: Vec<std::sync::mpsc::Sender<()>>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("readers", &self.readers)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and starts the writer, poller and
    /// compaction threads. Synchronous: it is called once at start-up and needs no runtime.
    pub fn open(path: &Path, config: SqliteConfig) -> Result<Arc<SqliteStore>> {
        let writer_conn = schema::open_writer(path, config.busy_timeout)?;
        let (revision, _) = schema::read_meta(&writer_conn)?;
        let notify = Arc::new(watch::Sender::new(revision));

        let (write_tx, write_rx) = mpsc::channel(config.queue_capacity.max(1));
        writer::spawn(
            writer_conn,
            write_rx,
            config.max_batch.max(1),
            config.busy_timeout,
            Arc::clone(&notify),
        )?;

        let mut stop = Vec::new();
        if !config.poll_interval.is_zero() {
            let conn = schema::open_reader(path, config.busy_timeout)?;
            stop.push(background::spawn_poller(
                conn,
                config.poll_interval,
                Arc::clone(&notify),
            )?);
        }
        if !config.compaction_interval.is_zero() {
            let conn = schema::open_reader(path, config.busy_timeout)?;
            let policy = background::CompactionPolicy {
                interval: config.compaction_interval,
                retention: config.retention,
                max_events: config.max_retained_events,
            };
            stop.push(background::spawn_compactor(conn, policy, write_tx.clone())?);
        }

        let readers = ReaderPool::new(path, config.readers.max(1), config.busy_timeout);
        Ok(Arc::new(SqliteStore {
            writes: write_tx,
            readers,
            notify,
            _stop: stop,
        }))
    }

    async fn submit(&self, op: WriteOp) -> Result<WriteOutcome> {
        let (reply, answer) = oneshot::channel();
        self.writes
            .send(WriteRequest { op, reply })
            .await
            .map_err(|_| StorageError::Backend("sqlite writer thread has stopped".into()))?;
        answer
            .await
            .map_err(|_| StorageError::Backend("sqlite writer thread dropped the request".into()))?
    }
}

fn unexpected(outcome: WriteOutcome) -> StorageError {
    StorageError::Backend(format!(
        "sqlite writer answered with an unexpected outcome: {outcome:?}"
    ))
}

#[async_trait]
impl Store for SqliteStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let key = key.to_owned();
        self.readers.run(move |conn| reader::get(conn, &key)).await
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        match self
            .submit(WriteOp::Create {
                key: key.to_owned(),
                value,
            })
            .await?
        {
            WriteOutcome::Written(rev) => Ok(rev),
            other => Err(unexpected(other)),
        }
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<Revision> {
        match self
            .submit(WriteOp::Update {
                key: key.to_owned(),
                value,
                expected,
            })
            .await?
        {
            WriteOutcome::Written(rev) => Ok(rev),
            other => Err(unexpected(other)),
        }
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue)> {
        match self
            .submit(WriteOp::Delete {
                key: key.to_owned(),
                expected,
            })
            .await?
        {
            WriteOutcome::Deleted(rev, kv) => Ok((rev, kv)),
            other => Err(unexpected(other)),
        }
    }

    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult> {
        let prefix = prefix.to_owned();
        self.readers
            .run(move |conn| reader::list(conn, &prefix, &opts))
            .await
    }

    async fn count(&self, prefix: &str) -> Result<u64> {
        let prefix = prefix.to_owned();
        self.readers
            .run(move |conn| reader::count(conn, &prefix))
            .await
    }

    async fn read_log(&self, after: Revision, limit: usize) -> Result<Vec<Event>> {
        self.readers
            .run(move |conn| reader::read_log(conn, after, limit))
            .await
    }

    async fn current_revision(&self) -> Result<Revision> {
        let (revision, _) = self
            .readers
            .run(|conn| Ok(schema::read_meta(conn)?))
            .await?;
        // Keep followers in this process at least as far as anything a caller has observed.
        self.notify.send_if_modified(|known| raise(known, revision));
        Ok(revision)
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        let (_, compacted) = self
            .readers
            .run(|conn| Ok(schema::read_meta(conn)?))
            .await?;
        Ok(compacted)
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        match self.submit(WriteOp::Compact { revision }).await? {
            WriteOutcome::Compacted => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    fn subscribe(&self) -> watch::Receiver<Revision> {
        self.notify.subscribe()
    }
}

/// Raises a published revision, never lowering it (several threads publish).
fn raise(known: &mut Revision, seen: Revision) -> bool {
    if seen > *known {
        *known = seen;
        true
    } else {
        false
    }
}

#[cfg(test)]
mod tests;
