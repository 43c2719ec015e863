//! Which store a replica runs on: `--storage-backend`, and how it notices other replicas'
//! commits (`--storage-poll-interval`; NATS hints come on top, see `kapi_watch::NatsFanout`).

use std::path::Path;
use std::time::Duration;

use kapi_storage::sqlite::{SqliteConfig, SqliteStore};
use kapi_storage::DynStore;

use crate::config::{Options, StartError};

/// `--storage-backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StorageBackend {
    /// One SQLite file under `--data-dir`, shareable by replicas on one host.
    #[default]
    Sqlite,
    /// FoundationDB through `--fdb-cluster-file` (binaries built with the `fdb` feature).
    Fdb,
}

impl std::str::FromStr for StorageBackend {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sqlite" => Ok(Self::Sqlite),
            "fdb" | "foundationdb" => Ok(Self::Fdb),
            other => Err(format!("unknown storage backend {other:?} (sqlite or fdb)")),
        }
    }
}

/// Polling pace without NATS: other replicas' writes reach this replica's watchers within about
/// this long (docs/perf.md has the measured latency).
pub const POLL_WITHOUT_NATS: Duration = Duration::from_millis(100);
/// Polling pace with NATS: only a safety net, since hints wake the follower at once.
pub const POLL_WITH_NATS: Duration = Duration::from_secs(1);

/// How often the store is polled for commits made by other processes.
pub fn poll_interval(opts: &Options) -> Duration {
    opts.storage_poll_interval.unwrap_or(if opts.nats_url.is_some() { POLL_WITH_NATS } else { POLL_WITHOUT_NATS })
}

/// Opens the configured store. Blocking (file IO, network boot): call it off the async workers.
/// With `--encryption-provider-config`, every backend sits behind the encrypting store, so
/// values of encrypted resources leave the process sealed.
pub fn open(opts: &Options) -> Result<DynStore, StartError> {
    let store = match opts.storage_backend {
        StorageBackend::Sqlite => open_sqlite(&opts.data_dir.join("kapi.db"), opts)?,
        StorageBackend::Fdb => open_fdb(opts)?,
    };
    Ok(match &opts.encryption {
        Some(config) => std::sync::Arc::new(kapi_encryption::EncryptedStore::live(store, config.clone())),
        None => store,
    })
}

fn open_sqlite(path: &Path, opts: &Options) -> Result<DynStore, StartError> {
    // Compact at least as often as the window is long, so a short window (tests, small
    // deployments) really bounds the log; never more than once a second.
    let defaults = SqliteConfig::default();
    let config = SqliteConfig {
        retention: opts.compaction_window,
        compaction_interval: defaults.compaction_interval.min(opts.compaction_window).max(Duration::from_secs(1)),
        poll_interval: poll_interval(opts),
        ..defaults
    };
    Ok(SqliteStore::open(path, config)?)
}

#[cfg(feature = "fdb")]
fn open_fdb(opts: &Options) -> Result<DynStore, StartError> {
    use kapi_storage::fdb::{FdbConfig, FdbStore};
    let defaults = FdbConfig::default();
    let config = FdbConfig {
        cluster_file: opts.fdb_cluster_file.clone(),
        directory: opts.fdb_directory.split('/').filter(|s| !s.is_empty()).map(str::to_owned).collect(),
        retention: opts.compaction_window,
        // FoundationDB watches report other replicas' commits at once; the poll is a fallback.
        poll_interval: opts.storage_poll_interval.unwrap_or(defaults.poll_interval),
        ..defaults
    };
    if config.directory.is_empty() {
        return Err(StartError::Config("--fdb-directory must name a directory (e.g. kapi/prod)".into()));
    }
    // Called from start-up's blocking thread, which may wait on the runtime.
    let store: DynStore = tokio::runtime::Handle::current().block_on(FdbStore::open(config))?;
    Ok(store)
}

#[cfg(not(feature = "fdb"))]
fn open_fdb(_opts: &Options) -> Result<DynStore, StartError> {
    Err(StartError::Config(
        "--storage-backend=fdb: this kapi was built without FoundationDB support (build with `--features fdb`, see docs/foundationdb.md)".into(),
    ))
}
