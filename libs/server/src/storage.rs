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
    /// etcd v3 through `--etcd-servers` (kube-apiserver's `etcd3`; the `etcd` feature, on by
    /// default).
    Etcd3,
}

impl std::str::FromStr for StorageBackend {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sqlite" => Ok(Self::Sqlite),
            "fdb" | "foundationdb" => Ok(Self::Fdb),
            "etcd3" => Ok(Self::Etcd3),
            other => Err(format!("unknown storage backend {other:?} (sqlite, etcd3 or fdb)")),
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
        StorageBackend::Etcd3 => open_etcd(opts)?,
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

/// The `--etcd-*` flags.
#[derive(Debug, Clone)]
pub struct EtcdOptions {
    /// `--etcd-servers`: client URLs of the etcd members.
    pub servers: Vec<String>,
    /// `--etcd-prefix`: the etcd key prefix of this cluster's objects (kube's `/registry`).
    pub prefix: String,
    /// `--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`.
    pub ca_file: Option<std::path::PathBuf>,
    /// Client certificate presented to etcd.
    pub cert_file: Option<std::path::PathBuf>,
    /// Key of the client certificate.
    pub key_file: Option<std::path::PathBuf>,
    /// `--etcd-compaction-interval` (kube's 5 m; zero disables kapi's compactor).
    pub compaction_interval: Duration,
    /// `--etcd-count-metric-poll-period` (kube's 1 m; zero turns `apiserver_storage_objects` off).
    pub count_metric_poll_period: Duration,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            prefix: "/registry".into(),
            ca_file: None,
            cert_file: None,
            key_file: None,
            compaction_interval: Duration::from_secs(300),
            count_metric_poll_period: Duration::from_secs(60),
        }
    }
}

#[cfg(feature = "etcd")]
fn open_etcd(opts: &Options) -> Result<DynStore, StartError> {
    use kapi_storage::etcd::{EtcdConfig, EtcdStore, EtcdTls};
    let etcd = &opts.etcd;
    if etcd.servers.is_empty() {
        return Err(StartError::Config("--storage-backend=etcd3 needs --etcd-servers".into()));
    }
    let tls = (etcd.ca_file.is_some() || etcd.cert_file.is_some() || etcd.key_file.is_some())
        .then(|| EtcdTls { ca_file: etcd.ca_file.clone(), cert_file: etcd.cert_file.clone(), key_file: etcd.key_file.clone() });
    let config = EtcdConfig {
        endpoints: etcd.servers.clone(),
        prefix: etcd.prefix.trim_end_matches('/').to_owned(),
        tls,
        compaction_interval: etcd.compaction_interval,
        observer: Some(std::sync::Arc::new(crate::metrics::etcd::Observer)),
        ..EtcdConfig::default()
    };
    crate::metrics::scrape::report_object_counts(!etcd.count_metric_poll_period.is_zero());
    // Called from start-up's blocking thread, which may wait on the runtime.
    let store: DynStore = tokio::runtime::Handle::current().block_on(EtcdStore::open(config))?;
    Ok(store)
}

#[cfg(not(feature = "etcd"))]
fn open_etcd(_opts: &Options) -> Result<DynStore, StartError> {
    Err(StartError::Config("--storage-backend=etcd3: this kapi was built without etcd support (the `etcd` feature)".into()))
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
