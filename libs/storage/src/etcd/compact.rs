//! Compaction on etcd: the compaction horizon, and kube-apiserver's periodic compactor.
//!
//! etcd compacts its whole key space at once, so the horizon is etcd's, shared by every store
//! (and every kube-apiserver) on that etcd. Its value is not in any API answer; reads below it
//! fail, so [`probe`] finds it by bisection over cheap count-only reads.
//!
//! The periodic compactor is kube's (`storage/etcd3/compact.go`): every interval each replica
//! tries a compare-and-swap on the version of the key `compact_rev_key`; the one that wins
//! records the current revision and compacts to the revision recorded one interval earlier.
//! So etcd keeps at least one interval of history, and only one replica (or apiserver sharing
//! the etcd) compacts per interval, however many run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Compare, CompareOp, GetOptions, KvClient, Txn, TxnOp, TxnOpResponse};

use super::errors::{self, classify, EtcdFailure};
use crate::{Revision, StorageError};

/// kube-apiserver's compaction bookkeeping key, outside every prefix: compaction is global.
pub(crate) const COMPACT_REV_KEY: &[u8] = b"compact_rev_key";

/// Whether etcd can still read at `revision`.
async fn readable(kv: &KvClient, revision: Revision) -> Result<bool, StorageError> {
    let options = GetOptions::new().with_revision(i64::try_from(revision).unwrap_or(i64::MAX)).with_count_only();
    match kv.clone().get(COMPACT_REV_KEY, Some(options)).await {
        Ok(_) => Ok(true),
        Err(e) => match classify(&e) {
            EtcdFailure::Compacted => Ok(false),
            // Revisions in [floor, current] are never in the future.
            _ => Err(errors::backend(&e)),
        },
    }
}

/// etcd's compaction horizon: the oldest readable revision, 0 when nothing was ever compacted.
/// `floor` is a revision known to be at or below the horizon.
pub(crate) async fn probe(kv: &KvClient, floor: Revision) -> Result<Revision, StorageError> {
    let current = kv
        .clone()
        .get(COMPACT_REV_KEY, Some(GetOptions::new().with_count_only()))
        .await
        .map_err(|e| errors::backend(&e))?
        .header()
        .map(|h| u64::try_from(h.revision()).unwrap_or(0))
        .unwrap_or(0);
    let mut low = floor.max(1);
    if low >= current {
        return Ok(floor);
    }
    if readable(kv, low).await? {
        // Nothing below `floor` was readable, and `floor` is: it is the horizon (1 means none).
        return Ok(if low == 1 { 0 } else { low });
    }
    // Invariant: `low` is compacted away, `high` is readable (the current revision always is).
    let mut high = current;
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if readable(kv, middle).await? {
            high = middle;
        } else {
            low = middle;
        }
    }
    Ok(high)
}

/// Compacts etcd to `revision` unless it already is; keeps `horizon` up to date.
pub(crate) async fn compact(kv: &KvClient, horizon: &AtomicU64, revision: Revision) -> Result<(), StorageError> {
    if revision <= horizon.load(Ordering::SeqCst) {
        return Ok(());
    }
    match kv.clone().compact(i64::try_from(revision).unwrap_or(i64::MAX), None).await {
        Ok(_) => {
            horizon.fetch_max(revision, Ordering::SeqCst);
            Ok(())
        }
        Err(e) => match classify(&e) {
            // Someone compacted further already: going backwards is a no-op.
            EtcdFailure::Compacted => {
                let found = probe(kv, horizon.load(Ordering::SeqCst)).await?;
                horizon.fetch_max(found, Ordering::SeqCst);
                Ok(())
            }
            // The member that answered has not applied `revision` yet (callers check the
            // store's revision first, so this is a lagging member).
            EtcdFailure::FutureRevision => {
                Err(StorageError::Backend(format!("etcd: compaction to revision {revision} refused: the answering member has not reached it")))
            }
            EtcdFailure::Other => Err(errors::backend(&e)),
        },
    }
}

/// One round of kube's compactor: `(version seen, revision recorded)` carried to the next round.
async fn round(kv: &KvClient, horizon: &AtomicU64, seen: i64, recorded: Revision) -> Result<(i64, Revision), StorageError> {
    let txn = Txn::new()
        .when([Compare::version(COMPACT_REV_KEY, CompareOp::Equal, seen)])
        .and_then([TxnOp::put(COMPACT_REV_KEY, recorded.to_string(), None)])
        .or_else([TxnOp::get(COMPACT_REV_KEY, None)]);
    let response = kv.clone().txn(txn).await.map_err(|e| errors::backend(&e))?;
    let current = response.header().map(|h| u64::try_from(h.revision()).unwrap_or(0)).unwrap_or(0);
    if !response.succeeded() {
        // Another compactor won this interval: take its version and try again next time.
        let version = response
            .op_responses()
            .into_iter()
            .find_map(|op| match op {
                TxnOpResponse::Get(get) => get.kvs().first().map(|kv| kv.version()),
                _ => None,
            })
            .unwrap_or(seen);
        return Ok((version, current));
    }
    if recorded > 0 {
        compact(kv, horizon, recorded).await?;
        tracing::info!(revision = recorded, "compacted etcd");
    }
    Ok((seen + 1, current))
}

/// Runs kube's compactor every `interval` until the store is dropped (the task is aborted).
pub(crate) async fn run_compactor(kv: KvClient, horizon: Arc<AtomicU64>, interval: Duration) {
    let (mut seen, mut recorded) = (0i64, 0u64);
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        match round(&kv, &horizon, seen, recorded).await {
            Ok((version, revision)) => (seen, recorded) = (version, revision),
            Err(e) => tracing::warn!(error = %e, "etcd compaction round failed"),
        }
    }
}
