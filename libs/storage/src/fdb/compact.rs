//! Compaction: the horizon first, then the clean-up, in bounded transactions.
//!
//! `compact(C)` commits the new horizon before deleting anything. Every reader checks the
//! horizon in the same transaction as its data, so it either sees the old horizon with the old
//! data intact, or the new one and answers `Compacted`; clean-up never races a reader.
//!
//! Clean-up walks the log entries at or below the horizon that no clean-up has processed yet
//! (`meta/compact-done` .. `meta/compacted`), [`BATCH`] per transaction, and for each entry E:
//!
//! - deletes the version E superseded (`hist` and `data` at E's previous stamp): a snapshot at
//!   any R >= C sees E or something newer for that key, never the older version;
//! - if E is a deletion, also deletes its tombstone (no snapshot at R >= C needs it);
//! - deletes E's log entry (`read_log` never reads below the horizon).
//!
//! The newest version of a key at or below C stays (`hist` + `data`): snapshots between C and
//! the key's next write are built from it, exactly like the SQLite backend keeps each key's
//! newest row. The cost is proportional to the events compacted, never to the store's size.
//! Several processes may compact at once: each batch reads and advances `compact-done`, so
//! FoundationDB serialises them.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use foundationdb::{FdbBindingError, KeySelector, Transaction};
use futures_util::future::try_join;
use tokio::sync::watch;

use super::layout::{Layout, META_COMPACTED, META_COMPACT_DONE};
use super::log::headers;
use super::read::{decode_u64, read_meta};
use super::revision::{Revisions, VERSIONS_PER_SECOND};
use super::write::unix_minute;
use super::{from_binding, store_error, Inner};
use crate::{EventKind, Result, Revision, StorageError};

/// Log entries cleaned per transaction (each costs a few small clears).
const BATCH: usize = 512;

/// Idempotency markers are kept this many minutes: far longer than any retry of one write.
const MARKER_MINUTES: u64 = 60;

pub(super) async fn compact(inner: &Inner, revision: Revision) -> Result<()> {
    let (layout, revs) = (&inner.layout, &inner.revs);
    inner
        .db
        .run(|trx, _| async move {
            let meta = read_meta(&trx, layout, revs).await?;
            if revision > meta.current {
                return Ok(Err(StorageError::FutureRevision {
                    requested: revision,
                    current: meta.current,
                }));
            }
            if revision > meta.compacted {
                trx.set(&layout.meta(META_COMPACTED), &revision.to_be_bytes());
            }
            Ok(Ok(()))
        })
        .await
        .map_err(from_binding)??;
    // Also finishes a clean-up that an earlier, interrupted compaction left behind.
    while !inner
        .db
        .run(|trx, _| async move { clean_batch(&trx, layout, revs).await })
        .await
        .map_err(from_binding)?
    {}
    Ok(())
}

/// Cleans up to [`BATCH`] entries; true when the clean-up has reached the horizon.
async fn clean_batch(
    trx: &Transaction,
    layout: &Layout,
    revs: &Revisions,
) -> Result<bool, FdbBindingError> {
    let (compacted, done) = try_join(
        trx.get(&layout.meta(META_COMPACTED), false),
        trx.get(&layout.meta(META_COMPACT_DONE), false),
    )
    .await?;
    let compacted = decode_u64(compacted.as_deref(), "compacted")?;
    let done = decode_u64(done.as_deref(), "compact-done")?;
    if done >= compacted {
        return Ok(true);
    }
    let begin = layout.log_after(revs.stamp(done));
    let end = layout.log_after(revs.stamp(compacted));
    let entries = headers(trx, layout, begin.clone(), end.clone(), BATCH).await?;
    for (stamp, entry) in &entries {
        if let Some(prev) = entry.prev {
            trx.clear(&layout.hist(&entry.key, prev));
            let (from, to) = layout.data_range(prev);
            trx.clear_range(&from, &to);
        }
        if entry.kind == EventKind::Deleted {
            trx.clear(&layout.hist(&entry.key, *stamp));
        }
    }
    let reached = match entries.last() {
        Some((last, _)) if entries.len() == BATCH => {
            trx.clear_range(&begin, &layout.log_after(*last));
            revs.revision(*last).map_err(store_error)?
        }
        _ => {
            trx.clear_range(&begin, &end);
            let (from, to) = layout.idem_before(unix_minute().saturating_sub(MARKER_MINUTES));
            trx.clear_range(&from, &to);
            compacted
        }
    };
    trx.set(&layout.meta(META_COMPACT_DONE), &reached.to_be_bytes());
    Ok(reached >= compacted)
}

/// When and how far automatic compaction goes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Policy {
    pub(super) interval: Duration,
    pub(super) retention: Duration,
    /// 0: no bound on the number of events.
    pub(super) max_events: u64,
}

/// The horizon that keeps the events of the last `retention` but at most `max_events` events
/// (the newer of the two), or `None` when it is not past the current horizon.
///
/// Time is measured in FoundationDB versions (about [`VERSIONS_PER_SECOND`]), so no clock of
/// this host is involved; recoveries make versions jump ahead, which only shortens retention.
/// The event bound resolves a key selector `max_events` log keys before the end, which the
/// storage servers walk without returning values.
async fn plan(inner: &Inner, policy: Policy) -> Result<Option<Revision>> {
    let (layout, revs) = (&inner.layout, &inner.revs);
    inner
        .db
        .run(|trx, _| async move {
            let (meta, read_version) = try_join(read_meta(&trx, layout, revs), async {
                trx.get_read_version().await.map_err(FdbBindingError::from)
            })
            .await?;
            let keep = u64::try_from(policy.retention.as_micros())
                .unwrap_or(u64::MAX)
                .saturating_mul(VERSIONS_PER_SECOND / 1_000_000);
            let read_version = u64::try_from(read_version).unwrap_or(0);
            let by_time = revs.at_version(read_version.saturating_sub(keep));
            let by_count = if policy.max_events == 0 {
                0
            } else {
                let back = i32::try_from(policy.max_events).unwrap_or(i32::MAX);
                let selector = KeySelector::new(Cow::Owned(layout.log_end()), false, -back);
                let key = trx.get_key(&selector, true).await?;
                match layout.log_stamp(&key) {
                    Some(stamp) => revs.revision(stamp).map_err(store_error)?,
                    None => 0,
                }
            };
            let target = by_time.max(by_count).min(meta.current);
            Ok((target > meta.compacted).then_some(target))
        })
        .await
        .map_err(from_binding)
}

/// Runs automatic compaction every `policy.interval` until `stop` is dropped.
pub(super) fn spawn(inner: Arc<Inner>, policy: Policy, mut stop: watch::Receiver<()>) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                () = tokio::time::sleep(policy.interval) => {}
            }
            let outcome = match plan(&inner, policy).await {
                Ok(Some(target)) => compact(&inner, target).await.map(|()| Some(target)),
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            };
            match outcome {
                Ok(Some(revision)) => tracing::debug!(revision, "foundationdb store compacted"),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "foundationdb automatic compaction failed"),
            }
        }
    });
}
