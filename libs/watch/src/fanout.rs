//! Cross-replica fan-out through NATS.
//!
//! NATS carries wake-up hints, not events: after a commit, the writing replica publishes the
//! commit's revision on one subject, and every replica that receives it tells its log follower
//! to read the store's change log now instead of at its next poll. Events reach watchers only
//! from the log, so the per-watcher guarantee (every event once, in revision order, whatever
//! replica wrote it) rests on the store alone, and NATS can lose, repeat or reorder hints
//! without harm:
//!
//! - a lost hint (slow consumer, NATS outage, a replica that reconnects) delays the event until
//!   the next hint or the store's own poll; the repair check below notices commits no hint
//!   announced and counts them;
//! - a compacted log is the follower's business: it reloads and its watchers get 410.
//!
//! Why not events: FoundationDB revisions are commit versionstamps, which are not contiguous,
//! so a receiver cannot tell a complete event stream from one with a gap without reading the
//! log; NATS messages are capped at 1 MB (below Kubernetes' 1.5 MiB objects); and JetStream
//! does not fsync each message by default, so it could never be the only copy. Reading the log
//! after a hint costs one range read per batch of commits (see docs/perf.md for the numbers).
//! For the same reason JetStream's history would add nothing here: the log is the history.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use kapi_storage::{DynStore, Event, KeyValue, ListOptions, ListResult, Result, Revision, Store};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::set::CacheSet;

/// Where and how replicas exchange hints.
#[derive(Debug, Clone)]
pub struct NatsConfig {
    /// `--nats-url`, e.g. `nats://127.0.0.1:4222` (comma-separated for a NATS cluster).
    pub url: String,
    /// Subject the replicas of one kapi cluster share (`--nats-subject`); another kapi cluster
    /// on the same NATS uses another subject.
    pub subject: String,
    /// How often the store's revision is compared with the hints received, to repair what NATS
    /// missed.
    pub repair_interval: Duration,
}

/// Why NATS fan-out could not start.
#[derive(Debug, thiserror::Error)]
pub enum FanoutError {
    /// The URL or options were refused by the client.
    #[error("connecting to NATS at {url}: {reason}")]
    Connect {
        /// `--nats-url`.
        url: String,
        /// The client's words.
        reason: String,
    },
    /// The subscription could not be registered.
    #[error("subscribing to {subject}: {reason}")]
    Subscribe {
        /// `--nats-subject`.
        subject: String,
        /// The client's words.
        reason: String,
    },
}

/// Counters for the metrics endpoint.
#[derive(Debug, Default)]
struct Stats {
    connected: AtomicBool,
    ever_connected: AtomicBool,
    reconnects: AtomicU64,
    repairs: AtomicU64,
    published: AtomicU64,
    received: AtomicU64,
    /// Highest revision a hint (or a repair) announced.
    announced: AtomicU64,
}

/// A copy of the fan-out counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FanoutStats {
    /// Whether the client is connected now.
    pub connected: bool,
    /// Connections re-established after a loss.
    pub reconnects: u64,
    /// Times the log held commits no hint had announced (NATS lost or delayed them), which the
    /// follower then read from the log.
    pub repairs: u64,
    /// Hints published by this replica.
    pub published: u64,
    /// Hints received (this replica's own included).
    pub received: u64,
}

/// One replica's end of the fan-out: publishes its commits, wakes its follower on others'.
/// Dropping it stops its tasks (the store then falls back to polling alone).
pub struct NatsFanout {
    stats: Arc<Stats>,
    commits: Arc<watch::Sender<Revision>>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for NatsFanout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsFanout").field("stats", &self.stats()).finish_non_exhaustive()
    }
}

impl NatsFanout {
    /// Connects (in the background: a replica starts and serves while NATS is down, following
    /// the log by polling) and starts the publisher, the subscriber and the repair check.
    pub async fn start(config: NatsConfig, store: DynStore, caches: Arc<CacheSet>) -> std::result::Result<NatsFanout, FanoutError> {
        let stats = Arc::new(Stats::default());
        let resync = Arc::new(Notify::new());
        let events = {
            let (stats, resync) = (stats.clone(), resync.clone());
            move |event: async_nats::Event| {
                let (stats, resync) = (stats.clone(), resync.clone());
                async move { on_event(&stats, &resync, event) }
            }
        };
        let client = async_nats::ConnectOptions::new()
            .name("kapi")
            .retry_on_initial_connect()
            .max_reconnects(None)
            .reconnect_delay_callback(|attempts| Duration::from_millis((attempts as u64 * 100).min(1000)))
            .event_callback(events)
            .connect(config.url.as_str())
            .await
            .map_err(|e| FanoutError::Connect { url: config.url.clone(), reason: e.to_string() })?;
        let subscriber = client
            .subscribe(config.subject.clone())
            .await
            .map_err(|e| FanoutError::Subscribe { subject: config.subject.clone(), reason: e.to_string() })?;
        stats.announced.store(caches.revision(), Ordering::SeqCst);
        let commits = Arc::new(watch::Sender::new(0));
        let tasks = vec![
            tokio::spawn(publish(client, config.subject.clone(), commits.subscribe(), stats.clone())),
            tokio::spawn(receive(subscriber, caches.clone(), stats.clone())),
            tokio::spawn(repair(store, caches, stats.clone(), resync, config.repair_interval)),
        ];
        Ok(NatsFanout { stats, commits, tasks })
    }

    /// Wraps the store writes go through, so that each acknowledged commit is announced.
    pub fn announcing(&self, store: DynStore) -> DynStore {
        Arc::new(Announcing { inner: store, commits: self.commits.clone() })
    }

    /// The counters, for metrics.
    pub fn stats(&self) -> FanoutStats {
        let s = &self.stats;
        FanoutStats {
            connected: s.connected.load(Ordering::SeqCst),
            reconnects: s.reconnects.load(Ordering::SeqCst),
            repairs: s.repairs.load(Ordering::SeqCst),
            published: s.published.load(Ordering::SeqCst),
            received: s.received.load(Ordering::SeqCst),
        }
    }
}

impl Drop for NatsFanout {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn on_event(stats: &Stats, resync: &Notify, event: async_nats::Event) {
    match event {
        async_nats::Event::Connected => {
            stats.connected.store(true, Ordering::SeqCst);
            if stats.ever_connected.swap(true, Ordering::SeqCst) {
                stats.reconnects.fetch_add(1, Ordering::SeqCst);
                tracing::info!("reconnected to NATS; checking the log for commits missed meanwhile");
            } else {
                tracing::info!("connected to NATS");
            }
            resync.notify_one();
        }
        async_nats::Event::Disconnected => {
            stats.connected.store(false, Ordering::SeqCst);
            tracing::warn!("disconnected from NATS; following the change log by polling until it is back");
        }
        async_nats::Event::SlowConsumer(_) => {
            tracing::warn!("NATS dropped hints for this slow consumer; the repair check will catch up from the log");
        }
        other => tracing::debug!("NATS: {other}"),
    }
}

/// Publishes the newest local commit; commits made while a publish is under way coalesce into
/// the next one, so a burst of writes costs a few messages, not one per write.
async fn publish(client: async_nats::Client, subject: String, mut commits: watch::Receiver<Revision>, stats: Arc<Stats>) {
    while commits.changed().await.is_ok() {
        let rev = *commits.borrow_and_update();
        match client.publish(subject.clone(), Bytes::from(rev.to_string())).await {
            Ok(()) => {
                stats.published.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => tracing::debug!("publishing hint {rev}: {e}"),
        }
    }
}

async fn receive(mut subscriber: async_nats::Subscriber, caches: Arc<CacheSet>, stats: Arc<Stats>) {
    use futures_util::StreamExt;
    while let Some(message) = subscriber.next().await {
        let Some(rev) = std::str::from_utf8(&message.payload).ok().and_then(|s| s.parse::<Revision>().ok()) else {
            tracing::warn!(subject = %message.subject, "ignoring a malformed hint");
            continue;
        };
        stats.received.fetch_add(1, Ordering::Relaxed);
        stats.announced.fetch_max(rev, Ordering::SeqCst);
        caches.hint(rev);
    }
}

/// Compares the store's revision with what hints announced. A commit that was already in the
/// store at the previous check and is still unannounced was missed by NATS (outage, dropped
/// message, a replica that died between commit and publish): count a repair and make the
/// follower read the log. After a reconnect the check runs at once, without the grace tick.
async fn repair(store: DynStore, caches: Arc<CacheSet>, stats: Arc<Stats>, resync: Arc<Notify>, interval: Duration) {
    let mut seen_before: Revision = 0;
    loop {
        let reconnected = tokio::select! {
            () = tokio::time::sleep(interval) => false,
            () = resync.notified() => true,
        };
        let current = match store.current_revision().await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("repair check: reading the store revision: {e}");
                continue;
            }
        };
        let announced = stats.announced.load(Ordering::SeqCst);
        let missed = if reconnected { current > announced } else { seen_before > announced };
        if missed {
            stats.repairs.fetch_add(1, Ordering::SeqCst);
            stats.announced.fetch_max(current, Ordering::SeqCst);
            tracing::info!(announced, current, "commits reached the log without a NATS hint; reading them from the log");
            caches.hint(current);
        }
        seen_before = current;
    }
}

/// The store writes go through: each acknowledged commit is handed to the publisher.
struct Announcing {
    inner: DynStore,
    commits: Arc<watch::Sender<Revision>>,
}

impl Announcing {
    fn announce(&self, rev: Revision) {
        self.commits.send_if_modified(|r| {
            let newer = rev > *r;
            *r = (*r).max(rev);
            newer
        });
    }
}

#[async_trait]
impl Store for Announcing {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>> {
        self.inner.get(key).await
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        let rev = self.inner.create(key, value).await?;
        self.announce(rev);
        Ok(rev)
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<Revision> {
        let rev = self.inner.update(key, value, expected).await?;
        self.announce(rev);
        Ok(rev)
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue)> {
        let (rev, kv) = self.inner.delete(key, expected).await?;
        self.announce(rev);
        Ok((rev, kv))
    }

    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult> {
        self.inner.list(prefix, opts).await
    }

    async fn count(&self, prefix: &str) -> Result<u64> {
        self.inner.count(prefix).await
    }

    async fn read_log(&self, after: Revision, limit: usize) -> Result<Vec<Event>> {
        self.inner.read_log(after, limit).await
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

    fn subscribe(&self) -> watch::Receiver<Revision> {
        self.inner.subscribe()
    }
}
