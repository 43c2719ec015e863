//! Conditional writes: one FoundationDB transaction reads the key's `head` (a read conflict on
//! exactly that key) and writes head, history, log entry and value together, so FoundationDB's
//! conflict detection serialises racing writers of one key across every process, while writers
//! of different keys never conflict (the store-wide `last` key is a blind atomic write).
//!
//! A failed condition (AlreadyExists, NotFound, Conflict) is returned as a value from the
//! transaction body, never as an error, so the retry loop of `Database::run` does not retry it;
//! only FoundationDB's retryable errors are retried.
//!
//! `commit_unknown_result`: every write also sets an idempotency marker, a random per-call id
//! whose value becomes the commit's versionstamp. Once an attempt may have committed, every
//! later attempt of the same call first reads the marker: found, the earlier attempt committed
//! and its result is returned instead of writing twice; absent, the earlier attempt did not
//! commit and cannot commit later (the marker read conflicts with it). Markers are cleared by
//! compaction after an hour.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use foundationdb::future::FdbSlice;
use foundationdb::options::MutationType;
use foundationdb::{FdbBindingError, FdbResult, Transaction};
use futures_util::future::try_join;

use super::chunks;
use super::layout::{with_placeholder, Layout, META_LAST};
use super::records::{Head, LogEntry, Version};
use super::revision::{Revisions, Stamp};
use super::{corrupt, from_binding, from_fdb, store_error, Inner};
use crate::{EventKind, KeyValue, Result, Revision, StorageError};

/// A write as the `Store` API asked for it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Op<'a> {
    Create { value: &'a [u8] },
    Update { value: &'a [u8], expected: Revision },
    Delete { expected: Option<Revision> },
}

/// What a successful write produced.
#[derive(Debug)]
pub(super) enum Outcome {
    Written(Revision),
    Deleted(Revision, KeyValue),
}

/// The commit's versionstamp, ready once the transaction committed.
type StampFuture = Box<dyn Future<Output = FdbResult<FdbSlice>> + Send + Unpin>;

/// How one attempt of the transaction body ended.
enum Attempt {
    /// A failed condition: nothing was written.
    Refused(StorageError),
    /// Mutations queued; the retry loop commits them.
    Applied {
        stamp: StampFuture,
        deleted: Option<(Head, Bytes)>,
    },
    /// An earlier attempt of this call committed (its marker is there).
    Committed {
        stamp: Stamp,
        deleted: Option<(Head, Bytes)>,
    },
}

/// Clock minute, for bucketing idempotency markers.
pub(super) fn unix_minute() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() / 60)
        .unwrap_or(0)
}

pub(super) async fn write(inner: &Inner, key: &str, op: Op<'_>) -> Result<Outcome> {
    let (layout, revs) = (&inner.layout, &inner.revs);
    let id: [u8; 16] = rand::random();
    let marker = layout.idem(unix_minute(), &id);
    let marker = marker.as_slice();
    // Sticky: `MaybeCommitted` only describes the attempt just before.
    let unsure = AtomicBool::new(false);
    let unsure = &unsure;
    let attempt = inner
        .db
        .run(|trx, maybe_committed| async move {
            if bool::from(maybe_committed) {
                unsure.store(true, Ordering::Relaxed);
            }
            if unsure.load(Ordering::Relaxed) {
                if let Some(found) = trx.get(marker, false).await? {
                    let stamp = Stamp::from_slice(&found)
                        .ok_or_else(|| corrupt("undecodable idempotency marker"))?;
                    let deleted = match op {
                        Op::Delete { .. } => Some(committed_delete(&trx, layout, stamp).await?),
                        _ => None,
                    };
                    return Ok(Attempt::Committed { stamp, deleted });
                }
            }
            let (head, read_version) =
                try_join(trx.get(&layout.head(key), false), trx.get_read_version()).await?;
            if !revs.writable_at(u64::try_from(read_version).unwrap_or(0)) {
                return Ok(Attempt::Refused(StorageError::Backend(format!(
                    "foundationdb: revision space of this store is exhausted (base version {}); \
                     migrate the objects to a fresh store directory",
                    revs.base()
                ))));
            }
            let head = match head {
                None => None,
                Some(raw) => {
                    Some(Head::decode(&raw).ok_or_else(|| corrupt(format!("head of {key}")))?)
                }
            };
            apply(&trx, layout, revs, key, op, head, marker).await
        })
        .await
        .map_err(from_binding)?;
    let (stamp, deleted) = match attempt {
        Attempt::Refused(refused) => return Err(refused),
        Attempt::Applied { stamp, deleted } => {
            let raw = stamp.await.map_err(from_fdb)?;
            let stamp = Stamp::from_slice(&raw).ok_or_else(|| {
                StorageError::Backend("foundationdb: commit versionstamp is not 10 bytes".into())
            })?;
            (stamp, deleted)
        }
        Attempt::Committed { stamp, deleted } => (stamp, deleted),
    };
    let revision = revs.revision(stamp)?;
    inner.observe(revision);
    match deleted {
        None => Ok(Outcome::Written(revision)),
        Some((head, value)) => Ok(Outcome::Deleted(
            revision,
            KeyValue {
                key: key.to_owned(),
                value,
                mod_revision: revs.revision(head.modified)?,
                create_revision: revs.revision(head.created)?,
                stale: false,
            },
        )),
    }
}

fn conflict(key: &str, expected: Revision, current: Revision) -> Attempt {
    Attempt::Refused(StorageError::Conflict {
        key: key.to_owned(),
        expected,
        current,
    })
}

fn value_len(value: &[u8]) -> Result<u32, FdbBindingError> {
    u32::try_from(value.len()).map_err(|_| {
        store_error(StorageError::Backend(format!(
            "foundationdb: a value of {} bytes is too large",
            value.len()
        )))
    })
}

/// Checks the condition against `head` and queues the mutations of the write.
async fn apply(
    trx: &Transaction,
    layout: &Layout,
    revs: &Revisions,
    key: &str,
    op: Op<'_>,
    head: Option<Head>,
    marker: &[u8],
) -> Result<Attempt, FdbBindingError> {
    let deleted = match (op, head) {
        (Op::Create { value }, None) => {
            put(trx, layout, key, EventKind::Added, value, None)?;
            None
        }
        (Op::Create { .. }, Some(_)) => {
            return Ok(Attempt::Refused(StorageError::AlreadyExists(
                key.to_owned(),
            )));
        }
        (Op::Update { .. } | Op::Delete { .. }, None) => {
            return Ok(Attempt::Refused(StorageError::NotFound(key.to_owned())));
        }
        (Op::Update { value, expected }, Some(head)) => {
            let current = revs.revision(head.modified).map_err(store_error)?;
            if expected != current {
                return Ok(conflict(key, expected, current));
            }
            put(trx, layout, key, EventKind::Modified, value, Some(head))?;
            None
        }
        (Op::Delete { expected }, Some(head)) => {
            let current = revs.revision(head.modified).map_err(store_error)?;
            if let Some(expected) = expected.filter(|expected| *expected != current) {
                return Ok(conflict(key, expected, current));
            }
            // A delete's log entry refers to the deleted version's value instead of copying it.
            let old = chunks::read(trx, layout, head.modified).await?;
            trx.clear(&layout.head(key));
            trx.atomic_op(
                &layout.hist_placeholder(key),
                &Version::encode(EventKind::Deleted, Some(head.created)),
                MutationType::SetVersionstampedKey,
            );
            trx.atomic_op(
                &layout.log_placeholder(),
                &LogEntry::encode(
                    EventKind::Deleted,
                    key,
                    Some(head.modified),
                    Some(head.created),
                    value_len(&old)?,
                ),
                MutationType::SetVersionstampedKey,
            );
            Some((head, old))
        }
    };
    // Blind atomic writes: they add no read conflicts, so unrelated writers never collide here.
    let own_stamp = with_placeholder(Vec::new(), &[]);
    trx.atomic_op(
        &layout.meta(META_LAST),
        &own_stamp,
        MutationType::SetVersionstampedValue,
    );
    trx.atomic_op(marker, &own_stamp, MutationType::SetVersionstampedValue);
    Ok(Attempt::Applied {
        stamp: Box::new(trx.get_versionstamp()),
        deleted,
    })
}

/// Queues a create (`prior` = None) or update of `key` to `value`.
fn put(
    trx: &Transaction,
    layout: &Layout,
    key: &str,
    kind: EventKind,
    value: &[u8],
    prior: Option<Head>,
) -> Result<(), FdbBindingError> {
    let created = prior.map(|head| head.created);
    trx.atomic_op(
        &layout.head(key),
        &Head::placeholder(created),
        MutationType::SetVersionstampedValue,
    );
    trx.atomic_op(
        &layout.hist_placeholder(key),
        &Version::encode(kind, created),
        MutationType::SetVersionstampedKey,
    );
    trx.atomic_op(
        &layout.log_placeholder(),
        &LogEntry::encode(
            kind,
            key,
            prior.map(|head| head.modified),
            created,
            value_len(value)?,
        ),
        MutationType::SetVersionstampedKey,
    );
    chunks::write(trx, layout, value)
}

/// What a delete that committed in an earlier attempt removed, rebuilt from its log entry.
async fn committed_delete(
    trx: &Transaction,
    layout: &Layout,
    stamp: Stamp,
) -> Result<(Head, Bytes), FdbBindingError> {
    let raw = trx.get(&layout.log(stamp), false).await?.ok_or_else(|| {
        corrupt("a delete committed, but its log entry is already compacted away")
    })?;
    let entry = LogEntry::decode(&raw, stamp)
        .ok_or_else(|| corrupt(format!("log entry at {:02x?}", stamp.0)))?;
    let prev = entry.prev.ok_or_else(|| {
        corrupt(format!(
            "delete at {:02x?} has no previous version",
            stamp.0
        ))
    })?;
    let value = chunks::read(trx, layout, prev).await?;
    Ok((
        Head {
            modified: prev,
            created: entry.created,
        },
        value,
    ))
}
