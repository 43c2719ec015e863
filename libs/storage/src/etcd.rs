//! The etcd v3 backend (feature `etcd`, on by default): kapi on the store every Kubernetes
//! operator already runs, with etcd's consensus under the replicas.
//!
//! # Mapping the Store contract onto etcd
//!
//! - Revisions are etcd's revisions: an object's `resourceVersion` is the `mod_revision` etcd
//!   gave its last write, as in kube-apiserver.
//! - Writes are one transaction each, comparing the key's `mod_revision` (update, delete) or
//!   `create_revision == 0` (create), and putting the bookkeeping key `<prefix>.kapi/last-write`
//!   in the same transaction. etcd's revision is global to the whole etcd (other clusters'
//!   prefixes, kube's compactor key), so the store's own current revision is that key's
//!   `mod_revision`: the revision of this store's latest write. Waiting for "the current
//!   revision" (consistent reads through the watch cache, a replica catching up) therefore waits
//!   for an event the change log really carries, with no reliance on etcd's progress
//!   notifications (which etcd before 3.5.13 / 3.4.31 could send ahead of pending events).
//! - Lists read one revision: a current list reads its keys and the bookkeeping key in one
//!   transaction; later pages pin that revision.
//! - The change log is a watch from a revision (`log.rs`), with etcd's history behind it
//!   (`history.rs`); compaction is etcd's (`compact.rs`), and a compacted revision answers
//!   [`StorageError::Compacted`] (410 Gone at the API).
//!
//! # Failures
//!
//! Every request is bounded by [`EtcdConfig::request_timeout`] and asks for a leader (gRPC
//! metadata `hasleader`), so a member without quorum fails fast instead of hanging; the failure is
//! a [`StorageError::Backend`], a 5xx Status. A write that timed out may still have committed (as
//! in kube-apiserver); no write is ever partly applied. The client balances over every endpoint
//! and detects dead connections with HTTP/2 keep-alive pings; the change-log watch reconnects
//! from the revision it has reached, so watchers see neither gaps nor duplicates.
//!
//! etcd refuses requests larger than its `--max-request-bytes` (1.5 MiB by default): run etcd
//! with at least 2 MiB so that objects of Kubernetes' maximum size (1.5 MiB) fit, as kubeadm does.

mod compact;
mod errors;
mod history;
mod keys;
mod log;
#[cfg(any(test, feature = "conformance"))]
pub mod testing;

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions, Identity, KvClient, TlsOptions, Txn, TxnOp, TxnOpResponse,
    WatchClient,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::{Event, KeyValue, ListOptions, ListResult, Result, Revision, StorageError, Store};

use errors::{classify, EtcdFailure};
use keys::{key_after, KeySpace};
use log::{ChangeLog, Follower, WindowLimits};

/// Client certificate and CA for etcd over TLS (`--etcd-cafile`, `--etcd-certfile`,
/// `--etcd-keyfile`); endpoints must then be `https://` URLs.
#[derive(Debug, Clone, Default)]
pub struct EtcdTls {
    /// CA bundle etcd's serving certificates are checked against; the system roots without it.
    pub ca_file: Option<PathBuf>,
    /// Client certificate (PEM) presented to etcd.
    pub cert_file: Option<PathBuf>,
    /// Key of `cert_file` (PEM).
    pub key_file: Option<PathBuf>,
}

/// Sees every etcd request, for kube's `etcd_request_duration_seconds` family of metrics.
pub trait EtcdObserver: Send + Sync + 'static {
    /// One request: kube's operation name (`get`, `list`, `create`, `update`, `delete`,
    /// `listWithCount`, `compact`), the store key or prefix it was about, how long it took and
    /// whether etcd answered (a failed condition is an answer).
    fn observe(&self, operation: &'static str, key: &str, elapsed: Duration, answered: bool);
}

/// Where the store lives and how to reach it; `Default` gives kube-apiserver's defaults.
#[derive(Clone)]
pub struct EtcdConfig {
    /// etcd client URLs (`--etcd-servers`); requests are balanced over all of them.
    pub endpoints: Vec<String>,
    /// etcd key prefix of this store (`--etcd-prefix`, default `/registry`).
    pub prefix: String,
    /// Prefix of the store keys that `prefix` replaces: `/registry` for kapi's keys, empty to
    /// keep any store key below `prefix` (the conformance suite's keys).
    pub store_root: String,
    /// TLS towards etcd.
    pub tls: Option<EtcdTls>,
    /// Bound on every etcd request (default 10 s).
    pub request_timeout: Duration,
    /// Bound on connecting to one endpoint (default 5 s).
    pub dial_timeout: Duration,
    /// kube's compactor interval (`--etcd-compaction-interval`, default 5 minutes; zero disables).
    pub compaction_interval: Duration,
    /// Most events kept in memory for readers of the change log (default 10 000)...
    pub window_events: usize,
    /// ...and most value bytes (default 64 MiB); older positions are read from etcd's history.
    pub window_bytes: usize,
    /// Sees every request.
    pub observer: Option<Arc<dyn EtcdObserver>>,
}

impl Default for EtcdConfig {
    fn default() -> Self {
        Self {
            endpoints: vec!["http://127.0.0.1:2379".into()],
            prefix: "/registry".into(),
            store_root: "/registry".into(),
            tls: None,
            request_timeout: Duration::from_secs(10),
            dial_timeout: Duration::from_secs(5),
            compaction_interval: Duration::from_secs(300),
            window_events: 10_000,
            window_bytes: 64 << 20,
            observer: None,
        }
    }
}

impl std::fmt::Debug for EtcdConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdConfig")
            .field("endpoints", &self.endpoints)
            .field("prefix", &self.prefix)
            .field("store_root", &self.store_root)
            .field("tls", &self.tls.is_some())
            .field("request_timeout", &self.request_timeout)
            .field("compaction_interval", &self.compaction_interval)
            .finish_non_exhaustive()
    }
}

/// Largest answer accepted from etcd: a list page or a watch batch of large objects.
const MAX_MESSAGE: usize = 1 << 30;
/// HTTP/2 keep-alive towards etcd: above etcd's `--grpc-keepalive-min-time` (5 s), short enough
/// to give up on a stopped member within seconds.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(6);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(4);
/// Requests that never reached a member are sent again this many times...
const CONNECT_RETRIES: u32 = 4;
/// ...after this pause times the attempt.
const CONNECT_RETRY_PAUSE: Duration = Duration::from_millis(25);

/// A [`Store`] on etcd.
pub struct EtcdStore {
    kv: KvClient,
    watch: WatchClient,
    keys: KeySpace,
    log: Arc<ChangeLog>,
    /// Highest revision this process's writes got: readers of the log wait for it.
    acked: AtomicU64,
    commits: watch::Sender<Revision>,
    /// etcd's compaction horizon as far as this process knows (never above the real one).
    compacted: Arc<AtomicU64>,
    /// The last chunk read from etcd's history, for readers behind the window.
    history: Mutex<Option<history::Chunk>>,
    timeout: Duration,
    observer: Option<Arc<dyn EtcdObserver>>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore").field("keys", &self.keys).finish_non_exhaustive()
    }
}

impl Drop for EtcdStore {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Why a call to etcd failed.
enum CallError {
    Timeout(Duration),
    Etcd(etcd_client::Error),
}

impl CallError {
    fn into_storage(self) -> StorageError {
        match self {
            CallError::Timeout(after) => StorageError::Backend(format!("etcd: request timed out after {after:?}")),
            CallError::Etcd(e) => errors::backend(&e),
        }
    }
}

fn revision_of(value: i64) -> Revision {
    u64::try_from(value).unwrap_or(0)
}

fn etcd_revision(value: Revision) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

async fn read_pem(path: &PathBuf) -> Result<Vec<u8>> {
    tokio::fs::read(path).await.map_err(|e| StorageError::Backend(format!("reading {}: {e}", path.display())))
}

async fn tls_options(tls: &EtcdTls) -> Result<TlsOptions> {
    let mut options = TlsOptions::new().with_enabled_roots();
    if let Some(ca) = &tls.ca_file {
        options = options.ca_certificate(Certificate::from_pem(read_pem(ca).await?));
    }
    match (&tls.cert_file, &tls.key_file) {
        (Some(cert), Some(key)) => options = options.identity(Identity::from_pem(read_pem(cert).await?, read_pem(key).await?)),
        (None, None) => {}
        _ => return Err(StorageError::Backend("--etcd-certfile and --etcd-keyfile go together".into())),
    }
    Ok(options)
}

impl EtcdStore {
    /// Connects, reads where the store stands and starts its change-log follower (and the
    /// compactor, unless its interval is zero). Fails if etcd cannot be reached within the
    /// request timeout.
    pub async fn open(config: EtcdConfig) -> Result<Arc<Self>> {
        if config.endpoints.is_empty() {
            return Err(StorageError::Backend("no etcd endpoints (--etcd-servers)".into()));
        }
        if !config.prefix.starts_with('/') {
            return Err(StorageError::Backend(format!("the etcd prefix {:?} must start with /", config.prefix)));
        }
        let mut options = ConnectOptions::new()
            .with_connect_timeout(config.dial_timeout)
            .with_keep_alive(KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT)
            .with_require_leader(true);
        if let Some(tls) = &config.tls {
            options = options.with_tls(tls_options(tls).await?);
        }
        let connect = Client::connect(&config.endpoints, Some(options));
        let client = match tokio::time::timeout(config.request_timeout, connect).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return Err(errors::backend(&e)),
            Err(_) => return Err(StorageError::Backend(format!("etcd: connecting timed out after {:?}", config.request_timeout))),
        };
        let kv = client.kv_client().max_decoding_message_size(MAX_MESSAGE).max_encoding_message_size(MAX_MESSAGE);
        let watch = client.watch_client().max_decoding_message_size(MAX_MESSAGE);
        let keys = KeySpace::new(&config.store_root, &config.prefix);
        let mut store = Self {
            kv,
            watch,
            keys,
            log: Arc::new(ChangeLog::new(0, WindowLimits { events: config.window_events, bytes: config.window_bytes })),
            acked: AtomicU64::new(0),
            commits: watch::channel(0).0,
            compacted: Arc::new(AtomicU64::new(0)),
            history: Mutex::new(None),
            timeout: config.request_timeout,
            observer: config.observer.clone(),
            tasks: Vec::new(),
        };
        let current = store.current_revision().await?;
        let horizon = store.call("compact", "", compact::probe(&store.kv, 0)).await.map_err(CallError::into_storage)??;
        store.compacted.store(horizon, Ordering::SeqCst);
        store.log = Arc::new(ChangeLog::new(current, WindowLimits { events: config.window_events, bytes: config.window_bytes }));
        store.commits.send_replace(current);
        let follower = Follower {
            log: store.log.clone(),
            watch: store.watch.clone(),
            keys: store.keys.clone(),
            compacted: store.compacted.clone(),
            commits: store.commits.clone(),
        };
        store.tasks.push(tokio::spawn(follower.run()));
        if !config.compaction_interval.is_zero() {
            store.tasks.push(tokio::spawn(compact::run_compactor(store.kv.clone(), store.compacted.clone(), config.compaction_interval)));
        }
        Ok(Arc::new(store))
    }

    /// Runs one etcd call under the request timeout, reporting it to the observer.
    async fn call<T, E, F>(&self, operation: &'static str, key: &str, call: F) -> std::result::Result<std::result::Result<T, E>, CallError>
    where
        F: Future<Output = std::result::Result<T, E>>,
    {
        let started = Instant::now();
        let outcome = tokio::time::timeout(self.timeout, call).await;
        if let Some(observer) = &self.observer {
            observer.observe(operation, key, started.elapsed(), matches!(outcome, Ok(Ok(_))));
        }
        outcome.map_err(|_| CallError::Timeout(self.timeout))
    }

    /// One etcd request under the request timeout, reported to the observer. A request that
    /// never left (its member's connection could not be made: a member down, restarting) is
    /// sent again, to whichever member the balancer picks next, within the same timeout.
    async fn etcd<T, F, Fut>(&self, operation: &'static str, key: &str, call: F) -> std::result::Result<T, CallError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = std::result::Result<T, etcd_client::Error>>,
    {
        let started = Instant::now();
        let mut retries = 0;
        let outcome = loop {
            let left = self.timeout.saturating_sub(started.elapsed());
            match tokio::time::timeout(left, call()).await {
                Err(_) => break Err(CallError::Timeout(self.timeout)),
                Ok(Err(e)) if errors::never_sent(&e) && retries < CONNECT_RETRIES => {
                    retries += 1;
                    tokio::time::sleep(CONNECT_RETRY_PAUSE * retries).await;
                }
                Ok(answer) => break answer.map_err(CallError::Etcd),
            }
        };
        if let Some(observer) = &self.observer {
            observer.observe(operation, key, started.elapsed(), outcome.is_ok());
        }
        outcome
    }

    fn etcd_key(&self, key: &str) -> Result<Vec<u8>> {
        self.keys.to_etcd(key).ok_or_else(|| StorageError::Backend(format!("key {key:?} is outside this store")))
    }

    fn key_value(&self, kv: &etcd_client::KeyValue) -> Result<KeyValue> {
        let key = self.keys.to_store(kv.key()).ok_or_else(|| errors::unexpected(format!("key {:?}", String::from_utf8_lossy(kv.key()))))?;
        Ok(KeyValue {
            key,
            value: Bytes::copy_from_slice(kv.value()),
            mod_revision: revision_of(kv.mod_revision()),
            create_revision: revision_of(kv.create_revision()),
            stale: false,
        })
    }

    /// A write committed at `revision`: readers of the log and subscribers learn it.
    fn acknowledge(&self, revision: Revision) -> Revision {
        self.acked.fetch_max(revision, Ordering::SeqCst);
        self.commits.send_if_modified(|seen| {
            let newer = revision > *seen;
            if newer {
                *seen = revision;
            }
            newer
        });
        revision
    }

    /// The conditional write shared by create, update and delete: `write` and the bookkeeping
    /// put when `condition` holds, otherwise a read of the key to say why not.
    async fn conditional(&self, operation: &'static str, key: &str, condition: Compare, write: TxnOp) -> Result<(bool, etcd_client::TxnResponse)> {
        let etcd_key = self.etcd_key(key)?;
        let txn = Txn::new()
            .when([condition])
            .and_then([write, TxnOp::put(self.keys.last_write(), Vec::new(), None)])
            .or_else([TxnOp::get(etcd_key, None)]);
        let response = self
            .etcd(operation, key, || {
                let (mut kv, txn) = (self.kv.clone(), txn.clone());
                async move { kv.txn(txn).await }
            })
            .await
            .map_err(CallError::into_storage)?;
        Ok((response.succeeded(), response))
    }

    /// The current value of the key read by a failed condition's else branch.
    fn found(&self, response: &etcd_client::TxnResponse) -> Result<Option<KeyValue>> {
        for op in response.op_responses() {
            if let TxnOpResponse::Get(get) = op {
                return get.kvs().first().map(|kv| self.key_value(kv)).transpose();
            }
        }
        Ok(None)
    }

    fn header_revision(response: &etcd_client::TxnResponse) -> Result<Revision> {
        response.header().map(|h| revision_of(h.revision())).filter(|r| *r > 0).ok_or_else(|| errors::unexpected("a write without revision"))
    }

    /// A list at a pinned revision or, with `at == None`, at the current one together with the
    /// store's current revision (read in the same transaction).
    async fn range(&self, prefix: &str, opts: &ListOptions) -> Result<(Vec<etcd_client::KeyValue>, bool, i64, Revision)> {
        let (start, end) = self.keys.prefix_range(prefix);
        let start = match opts.start_after.as_deref().and_then(|k| self.keys.to_etcd(k)) {
            Some(after) if key_after(&after) > start => key_after(&after),
            _ => start,
        };
        if start >= end {
            return Ok((
                Vec::new(),
                false,
                0,
                match opts.revision {
                    Some(at) => at,
                    None => self.current_revision().await?,
                },
            ));
        }
        let mut get = GetOptions::new().with_range(end);
        if let Some(limit) = opts.limit {
            get = get.with_limit(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        let operation = if opts.limit.is_some() { "listWithCount" } else { "list" };
        match opts.revision {
            Some(at) => {
                let get = get.with_revision(etcd_revision(at));
                match self
                    .etcd(operation, prefix, || {
                        let (mut kv, start, get) = (self.kv.clone(), start.clone(), get.clone());
                        async move { kv.get(start, Some(get)).await }
                    })
                    .await
                {
                    Ok(mut response) => Ok((response.take_kvs(), response.more(), response.count(), at)),
                    Err(CallError::Etcd(e)) => Err(self.revision_error(at, e).await),
                    Err(timeout) => Err(timeout.into_storage()),
                }
            }
            None => {
                let txn = Txn::new().and_then([TxnOp::get(start, Some(get)), TxnOp::get(self.keys.last_write(), None)]);
                let response = self
                    .etcd(operation, prefix, || {
                        let (mut kv, txn) = (self.kv.clone(), txn.clone());
                        async move { kv.txn(txn).await }
                    })
                    .await
                    .map_err(CallError::into_storage)?;
                let mut ops = response.op_responses().into_iter();
                let (Some(TxnOpResponse::Get(mut items)), Some(TxnOpResponse::Get(marker))) = (ops.next(), ops.next()) else {
                    return Err(errors::unexpected("a list transaction without its reads"));
                };
                let kvs = items.take_kvs();
                // A key written into the store's range by another client than kapi has no
                // bookkeeping write: the list is at least as new as its newest item.
                let newest = kvs.iter().map(|kv| revision_of(kv.mod_revision())).max().unwrap_or(0);
                let revision = marker.kvs().first().map(|kv| revision_of(kv.mod_revision())).unwrap_or(0).max(newest);
                Ok((kvs, items.more(), items.count(), revision))
            }
        }
    }

    /// What a refused read at `at` means.
    async fn revision_error(&self, at: Revision, error: etcd_client::Error) -> StorageError {
        match classify(&error) {
            EtcdFailure::Compacted => match self.compacted_revision().await {
                Ok(compacted) => StorageError::Compacted { requested: at, compacted },
                Err(e) => e,
            },
            EtcdFailure::FutureRevision => match self.current_revision().await {
                Ok(current) => StorageError::FutureRevision { requested: at, current },
                Err(e) => e,
            },
            EtcdFailure::Other => errors::backend(&error),
        }
    }

    /// Change-log events after `after` from etcd's history and then the window.
    async fn log_from(&self, after: Revision, limit: usize) -> Result<Vec<Event>> {
        let mut events: Vec<Event> = Vec::new();
        let mut position = after;
        while events.len() < limit {
            if let Some(tail) = self.log.after(position, limit - events.len()) {
                events.extend(tail);
                break;
            }
            let cached = self.history.lock().unwrap_or_else(|p| p.into_inner()).as_ref().and_then(|c| c.serve(position, limit - events.len()));
            if let Some((page, reached)) = cached {
                events.extend(page);
                position = reached;
                continue;
            }
            let until = self.log.start();
            let started = Instant::now();
            let page = history::read(&self.watch, &self.keys, position, until, history::CHUNK_EVENTS.max(limit), self.timeout).await;
            if let Some(observer) = &self.observer {
                observer.observe("watch", "", started.elapsed(), page.is_ok());
            }
            *self.history.lock().unwrap_or_else(|p| p.into_inner()) = Some(history::Chunk::new(position, until, page?));
        }
        Ok(events)
    }
}

#[async_trait]
impl Store for EtcdStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        let etcd_key = self.etcd_key(key)?;
        let response = self
            .etcd("get", key, || {
                let (mut kv, key) = (self.kv.clone(), etcd_key.clone());
                async move { kv.get(key, None).await }
            })
            .await
            .map_err(CallError::into_storage)?;
        response.kvs().first().map(|kv| self.key_value(kv)).transpose()
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        let etcd_key = self.etcd_key(key)?;
        let condition = Compare::create_revision(etcd_key.clone(), CompareOp::Equal, 0);
        let (done, response) = self.conditional("create", key, condition, TxnOp::put(etcd_key, value.to_vec(), None)).await?;
        if !done {
            return Err(StorageError::AlreadyExists(key.to_owned()));
        }
        Ok(self.acknowledge(Self::header_revision(&response)?))
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<Revision> {
        let etcd_key = self.etcd_key(key)?;
        let condition = Compare::mod_revision(etcd_key.clone(), CompareOp::Equal, etcd_revision(expected));
        let (done, response) = self.conditional("update", key, condition, TxnOp::put(etcd_key, value.to_vec(), None)).await?;
        if !done {
            return Err(match self.found(&response)? {
                None => StorageError::NotFound(key.to_owned()),
                Some(current) => StorageError::Conflict { key: key.to_owned(), expected, current: current.mod_revision },
            });
        }
        Ok(self.acknowledge(Self::header_revision(&response)?))
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue)> {
        let etcd_key = self.etcd_key(key)?;
        let condition = match expected {
            Some(expected) => Compare::mod_revision(etcd_key.clone(), CompareOp::Equal, etcd_revision(expected)),
            None => Compare::create_revision(etcd_key.clone(), CompareOp::Greater, 0),
        };
        let delete = TxnOp::delete(etcd_key, Some(DeleteOptions::new().with_prev_key()));
        let (done, response) = self.conditional("delete", key, condition, delete).await?;
        if !done {
            return Err(match (self.found(&response)?, expected) {
                (Some(current), Some(expected)) => StorageError::Conflict { key: key.to_owned(), expected, current: current.mod_revision },
                _ => StorageError::NotFound(key.to_owned()),
            });
        }
        let revision = self.acknowledge(Self::header_revision(&response)?);
        let deleted = response.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Delete(mut delete) => delete.take_prev_kvs().into_iter().next(),
            _ => None,
        });
        match deleted {
            Some(kv) => Ok((revision, self.key_value(&kv)?)),
            // `expected == Some(0)` matched a missing key: nothing was deleted.
            None => Err(StorageError::NotFound(key.to_owned())),
        }
    }

    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult> {
        if opts.revision == Some(0) {
            // Before the first write: etcd would read revision 0 as "current".
            return Ok(ListResult { items: Vec::new(), revision: 0, more: false, remaining: Some(0) });
        }
        if opts.limit == Some(0) {
            let revision = match opts.revision {
                Some(at) => at,
                None => self.current_revision().await?,
            };
            let more = self.count(prefix).await? > 0;
            return Ok(ListResult { items: Vec::new(), revision, more, remaining: None });
        }
        let (kvs, more, count, revision) = self.range(prefix, &opts).await?;
        let items = kvs.iter().map(|kv| self.key_value(kv)).collect::<Result<Vec<_>>>()?;
        let remaining = more.then(|| u64::try_from(count).unwrap_or(0).saturating_sub(items.len() as u64));
        Ok(ListResult { items, revision, more, remaining: Some(remaining.unwrap_or(0)) })
    }

    async fn count(&self, prefix: &str) -> Result<u64> {
        let (start, end) = self.keys.prefix_range(prefix);
        if start >= end {
            return Ok(0);
        }
        let options = GetOptions::new().with_range(end).with_count_only();
        let response = self
            .etcd("listWithCount", prefix, || {
                let (mut kv, start, options) = (self.kv.clone(), start.clone(), options.clone());
                async move { kv.get(start, Some(options)).await }
            })
            .await
            .map_err(CallError::into_storage)?;
        Ok(u64::try_from(response.count()).unwrap_or(0))
    }

    async fn read_log(&self, after: Revision, limit: usize) -> Result<Vec<Event>> {
        let compacted = self.compacted.load(Ordering::SeqCst);
        if after < compacted {
            return Err(StorageError::Compacted { requested: after, compacted });
        }
        if limit == 0 {
            return Ok(Vec::new());
        }
        // This process's own writes are in the log before it answers, as on every backend.
        let target = self.acked.load(Ordering::SeqCst);
        if !self.log.reach(target, self.timeout).await {
            return Err(StorageError::Backend(format!("etcd: the change-log watch has not reached revision {target} within {:?}", self.timeout)));
        }
        self.log_from(after, limit).await
    }

    async fn current_revision(&self) -> Result<Revision> {
        let marker = self.keys.last_write();
        let response = self
            .etcd("get", "", || {
                let (mut kv, marker) = (self.kv.clone(), marker.clone());
                async move { kv.get(marker, None).await }
            })
            .await
            .map_err(CallError::into_storage)?;
        Ok(response.kvs().first().map(|kv| revision_of(kv.mod_revision())).unwrap_or(0))
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        let floor = self.compacted.load(Ordering::SeqCst);
        let horizon = self.call("compact", "", compact::probe(&self.kv, floor)).await.map_err(CallError::into_storage)??;
        self.compacted.fetch_max(horizon, Ordering::SeqCst);
        Ok(self.compacted.load(Ordering::SeqCst))
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let current = self.current_revision().await?;
        if revision > current {
            return Err(StorageError::FutureRevision { requested: revision, current });
        }
        self.call("compact", "", compact::compact(&self.kv, &self.compacted, revision)).await.map_err(CallError::into_storage)?
    }

    fn subscribe(&self) -> watch::Receiver<Revision> {
        self.commits.subscribe()
    }
}
