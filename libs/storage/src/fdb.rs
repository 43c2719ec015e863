//! The FoundationDB backend (feature `fdb`): many kapi processes on many hosts share one store.
//!
//! # Where a store lives
//!
//! Each store is a directory of FoundationDB's directory layer (default path `kapi/default`,
//! layer tag `kapi`): the directory layer hands every path a short, unique key prefix, so several
//! kapi clusters (and other applications) share one FoundationDB cluster by choosing different
//! paths, and [`FdbStore::remove`] drops a whole store with one range clear. Under the prefix
//! `P` (object keys `k` are tuple-encoded strings, stamps are raw 10-byte versionstamps):
//!
//! | key                         | value                                         | written      |
//! |-----------------------------|-----------------------------------------------|--------------|
//! | `P m format`                | `kapi-fdb/1`                                  | at creation  |
//! | `P m base`                  | versionstamp of the creating transaction      | at creation  |
//! | `P m last`                  | versionstamp of the latest write              | every write  |
//! | `P m compacted`             | compaction horizon (u64 BE revision)          | compaction   |
//! | `P m compact-done`          | clean-up progress (u64 BE revision)           | compaction   |
//! | `P h k`                     | head: mod stamp, create stamp                 | every write  |
//! | `P v k stamp`               | history: kind, create stamp                   | every write  |
//! | `P l stamp`                 | change log: kind, prev stamp, create stamp, value length, key | every write |
//! | `P d stamp chunk`           | value bytes, in chunks of 90 000 bytes        | create/update |
//! | `P i minute id`             | idempotency marker: stamp of that write       | every write  |
//!
//! Every record that names a write's own version is written with `SetVersionstampedKey` or
//! `SetVersionstampedValue`, in the write's transaction: the log entry, the history entry and
//! the value chunks are keyed by the commit's versionstamp, and the head and `last` hold it as
//! their value. A value is stored once, at its write's stamp, and every record points at it; a
//! deletion's log entry points at the deleted version's value instead of copying it.
//!
//! # Revisions
//!
//! A versionstamp is the commit version (8 bytes) and the transaction's order in its commit batch
//! (2 bytes, below 2^15). The revision of a write is
//!
//! ```text
//! revision = (commit_version - base_version) << 15 | batch_order
//! ```
//!
//! where `base_version` is the commit version of the store's creation. Revisions are therefore
//! strictly increasing in commit order across every process, and a write learns its revision
//! from the transaction's versionstamp future after the commit. They are sparse (consecutive
//! writes differ by about 2^15 per elapsed version), which the `Store` contract allows. 49 bits
//! remain for versions: at FoundationDB's one million versions per second that is 2^49 µs, about
//! 17.8 years of cluster time after the store was created (each recovery skips about 100 M
//! versions, ~100 s). Revisions pass 2^63, which int64 parsers refuse, after ~8.9 years. Writes
//! are refused with a clear error shortly before the span ends; a store that old must be
//! migrated into a fresh directory (clients relist, as after an etcd restore).
//!
//! # FoundationDB's limits
//!
//! - 5 s per transaction: lists, counts and log reads are split into transactions that stop
//!   starting reads after 1.5 s or 8 MiB of values; a list at revision R reads its later
//!   transactions from the history keyspace at R, so it needs no old read version.
//! - 10 MB per transaction: the largest write holds one value (Kubernetes caps objects at
//!   1.5 MiB) plus small records; compaction cleans 512 log entries per transaction.
//! - 100 kB per value: values are chunked at 90 000 bytes, written and read whole in one
//!   transaction.
//!
//! # Compaction
//!
//! Horizon semantics are those of the SQLite backend: with horizon C, `list` works at every
//! revision in `[C, current]`, `read_log(after)` for every `after >= C`. See `compact.rs` for the
//! clean-up order.

mod chunks;
mod compact;
mod layout;
mod log;
mod network;
mod notify;
mod read;
mod records;
mod revision;
mod write;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use foundationdb::directory::{Directory, DirectoryLayer};
use foundationdb::options::{DatabaseOption, MutationType};
use foundationdb::{Database, FdbBindingError, FdbError};
use tokio::sync::watch;

use crate::{Event, KeyValue, ListOptions, ListResult, Result, Revision, StorageError, Store};

use layout::{with_placeholder, Layout, META_BASE, META_FORMAT};
use revision::{Revisions, Stamp};

pub use network::stop_network;

/// Layer tag of kapi's directories: opening a directory another application created under the
/// same path fails instead of mixing data.
const LAYER: &[u8] = b"kapi";

/// Layout version stored in `meta/format`; a store with another value is refused.
const FORMAT: &[u8] = b"kapi-fdb/1";

/// Settings of the FoundationDB backend; `Default` gives the production values for the kapi
/// cluster named `default`.
#[derive(Debug, Clone)]
pub struct FdbConfig {
    /// Cluster file to connect with; `None` uses FoundationDB's default resolution
    /// (`FDB_CLUSTER_FILE`, then `/etc/foundationdb/fdb.cluster`).
    pub cluster_file: Option<PathBuf>,
    /// Directory-layer path of this kapi cluster's store; kapi clusters sharing one
    /// FoundationDB must use different paths (see [`FdbConfig::for_cluster`]).
    pub directory: Vec<String>,
    /// Automatic compaction keeps the events committed within this window (default 5 minutes)...
    pub retention: Duration,
    /// ...but never more than this many events (default 100 000; 0 removes the count bound).
    pub max_retained_events: u64,
    /// How often automatic compaction runs (default 60 s; zero disables it). Every replica runs
    /// it; concurrent compactions are safe.
    pub compaction_interval: Duration,
    /// Fallback poll for commits of other processes, behind a FoundationDB watch that normally
    /// reports them at once (default 1 s; zero relies on the watch alone).
    pub poll_interval: Duration,
    /// Bound on one store operation including its retries (default 10 s; zero: unbounded).
    /// Without it, an unreachable cluster makes calls wait forever; an operation that times out
    /// fails with a backend error, and a write that timed out may or may not have committed.
    pub transaction_timeout: Duration,
}

impl Default for FdbConfig {
    fn default() -> Self {
        Self::for_cluster("default")
    }
}

impl FdbConfig {
    /// Production settings for the kapi cluster `name`, stored under directory `kapi/<name>`.
    pub fn for_cluster(name: &str) -> Self {
        Self {
            cluster_file: None,
            directory: vec!["kapi".to_owned(), name.to_owned()],
            retention: Duration::from_secs(5 * 60),
            max_retained_events: 100_000,
            compaction_interval: Duration::from_secs(60),
            poll_interval: Duration::from_secs(1),
            transaction_timeout: Duration::from_secs(10),
        }
    }
}

/// State shared by the store handle and its background tasks.
struct Inner {
    db: Database,
    layout: Layout,
    revs: Revisions,
    notify: watch::Sender<Revision>,
}

impl Inner {
    /// Publishes a revision known to be committed, never lowering what subscribers saw.
    fn observe(&self, revision: Revision) {
        self.notify.send_if_modified(|known| {
            if revision > *known {
                *known = revision;
                true
            } else {
                false
            }
        });
    }
}

/// A [`Store`] in a FoundationDB directory, shareable by any number of kapi processes.
///
/// Dropping the last handle stops its watch and compaction tasks.
pub struct FdbStore {
    inner: Arc<Inner>,
    // Dropping it closes the background tasks' stop channel.
    _stop: watch::Sender<()>,
}

impl std::fmt::Debug for FdbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FdbStore")
            .field("layout", &self.inner.layout)
            .field("base_version", &self.inner.revs.base())
            .finish_non_exhaustive()
    }
}

impl FdbStore {
    /// Connects, creates the store's directory and records if needed, and starts the commit
    /// watch and automatic compaction (tokio tasks: call it inside a runtime). The first call in
    /// a process also starts FoundationDB's client network thread (API version 730).
    pub async fn open(config: FdbConfig) -> Result<Arc<FdbStore>> {
        let db = connect(&config)?;
        let root = open_directory(&db, &config.directory).await?;
        let layout = Layout::new(root);
        let base = initialise(&db, &layout).await?;
        let inner = Arc::new(Inner {
            db,
            layout,
            revs: Revisions::new(base),
            notify: watch::Sender::new(0),
        });
        let current = current_revision(&inner).await?;
        tracing::debug!(
            directory = ?config.directory,
            base_version = base,
            current,
            "foundationdb store opened"
        );
        let (stop, stopped) = watch::channel(());
        if !config.compaction_interval.is_zero() {
            let policy = compact::Policy {
                interval: config.compaction_interval,
                retention: config.retention,
                max_events: config.max_retained_events,
            };
            compact::spawn(Arc::clone(&inner), policy, stopped.clone());
        }
        notify::spawn(Arc::clone(&inner), config.poll_interval, stopped);
        Ok(Arc::new(FdbStore { inner, _stop: stop }))
    }

    /// Deletes the store at `config.directory` and everything in it; true if it existed. For
    /// decommissioning a kapi cluster and for test clean-up: processes still using the store
    /// fail afterwards.
    pub async fn remove(config: &FdbConfig) -> Result<bool> {
        let db = connect(config)?;
        let path = config.directory.as_slice();
        db.run(|trx, _| async move {
            Ok(DirectoryLayer::default()
                .remove_if_exists(&trx, path)
                .await?)
        })
        .await
        .map_err(from_binding)
    }
}

fn connect(config: &FdbConfig) -> Result<Database> {
    network::ensure_running()?;
    let path = match &config.cluster_file {
        None => None,
        Some(path) => Some(path.to_str().ok_or_else(|| {
            StorageError::Backend(format!(
                "foundationdb: cluster file path {} is not UTF-8",
                path.display()
            ))
        })?),
    };
    let db = Database::new(path).map_err(from_fdb)?;
    if !config.transaction_timeout.is_zero() {
        let ms = i32::try_from(config.transaction_timeout.as_millis()).unwrap_or(i32::MAX);
        db.set_option(DatabaseOption::TransactionTimeout(ms))
            .map_err(from_fdb)?;
    }
    Ok(db)
}

async fn open_directory(db: &Database, path: &[String]) -> Result<Vec<u8>> {
    if path.is_empty() {
        return Err(StorageError::Backend(
            "foundationdb: the store directory path is empty".into(),
        ));
    }
    db.run(|trx, _| async move {
        let directory = DirectoryLayer::default()
            .create_or_open(&trx, path, None, Some(LAYER))
            .await?;
        Ok(directory.bytes()?.to_vec())
    })
    .await
    .map_err(from_binding)
}

/// Writes the format and base records of a new store (racing processes serialise on the
/// format key) and returns the base commit version.
async fn initialise(db: &Database, layout: &Layout) -> Result<u64> {
    db.run(|trx, _| async move {
        match trx.get(&layout.meta(META_FORMAT), false).await? {
            Some(format) if format.as_ref() == FORMAT => Ok(Ok(())),
            Some(format) => Ok(Err(StorageError::Backend(format!(
                "foundationdb: the store has layout {:?}, this kapi knows {:?}",
                String::from_utf8_lossy(&format),
                String::from_utf8_lossy(FORMAT)
            )))),
            None => {
                trx.set(&layout.meta(META_FORMAT), FORMAT);
                trx.atomic_op(
                    &layout.meta(META_BASE),
                    &with_placeholder(Vec::new(), &[]),
                    MutationType::SetVersionstampedValue,
                );
                Ok(Ok(()))
            }
        }
    })
    .await
    .map_err(from_binding)??;
    let base = db
        .run(|trx, _| async move { Ok(trx.get(&layout.meta(META_BASE), false).await?) })
        .await
        .map_err(from_binding)?;
    let stamp = base
        .as_deref()
        .and_then(Stamp::from_slice)
        .ok_or_else(|| StorageError::Backend("foundationdb: the store has no base".into()))?;
    Ok(stamp.version())
}

async fn current_revision(inner: &Inner) -> Result<Revision> {
    let (layout, revs) = (&inner.layout, &inner.revs);
    let meta = inner
        .db
        .run(|trx, _| async move { read::read_meta(&trx, layout, revs).await })
        .await
        .map_err(from_binding)?;
    inner.observe(meta.current);
    Ok(meta.current)
}

/// A domain answer or data error raised inside a transaction body: not retried by
/// `Database::run`, turned back into the `StorageError` by [`from_binding`].
fn store_error(error: StorageError) -> FdbBindingError {
    FdbBindingError::CustomError(Box::new(error))
}

fn corrupt(what: impl Into<String>) -> FdbBindingError {
    store_error(StorageError::Backend(format!(
        "foundationdb: damaged store record: {}",
        what.into()
    )))
}

fn from_fdb(error: FdbError) -> StorageError {
    StorageError::Backend(format!(
        "foundationdb error {}: {}",
        error.code(),
        error.message()
    ))
}

fn from_binding(error: FdbBindingError) -> StorageError {
    match error {
        FdbBindingError::CustomError(inner) => match inner.downcast::<StorageError>() {
            Ok(error) => *error,
            Err(other) => StorageError::Backend(format!("foundationdb: {other}")),
        },
        other => match other.get_fdb_error() {
            Some(error) => from_fdb(error),
            None => StorageError::Backend(format!("foundationdb: {other}")),
        },
    }
}

fn unexpected(outcome: write::Outcome) -> StorageError {
    StorageError::Backend(format!(
        "foundationdb: a write answered with an unexpected outcome: {outcome:?}"
    ))
}

#[async_trait]
impl Store for FdbStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        read::get(&self.inner, key).await
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        match write::write(&self.inner, key, write::Op::Create { value: &value }).await? {
            write::Outcome::Written(revision) => Ok(revision),
            other => Err(unexpected(other)),
        }
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<Revision> {
        let op = write::Op::Update {
            value: &value,
            expected,
        };
        match write::write(&self.inner, key, op).await? {
            write::Outcome::Written(revision) => Ok(revision),
            other => Err(unexpected(other)),
        }
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue)> {
        match write::write(&self.inner, key, write::Op::Delete { expected }).await? {
            write::Outcome::Deleted(revision, kv) => Ok((revision, kv)),
            other => Err(unexpected(other)),
        }
    }

    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult> {
        read::list(&self.inner, prefix, &opts).await
    }

    async fn count(&self, prefix: &str) -> Result<u64> {
        read::count(&self.inner, prefix).await
    }

    async fn read_log(&self, after: Revision, limit: usize) -> Result<Vec<Event>> {
        log::read_log(&self.inner, after, limit).await
    }

    async fn current_revision(&self) -> Result<Revision> {
        current_revision(&self.inner).await
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        let (layout, revs) = (&self.inner.layout, &self.inner.revs);
        let meta = self
            .inner
            .db
            .run(|trx, _| async move { read::read_meta(&trx, layout, revs).await })
            .await
            .map_err(from_binding)?;
        Ok(meta.compacted)
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        compact::compact(&self.inner, revision).await
    }

    fn subscribe(&self) -> watch::Receiver<Revision> {
        self.inner.notify.subscribe()
    }
}
