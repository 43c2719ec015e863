//! Reads: `get`, snapshot `list` and `count`.
//!
//! A list names one revision R (the first transaction's current revision unless the caller
//! gives one) and reads it in as many short transactions as it needs: each transaction checks
//! that R is still within `[compaction horizon, current]` and serves its part from `head` when
//! nothing was committed after R, else from `hist` (per key, the newest version at or before R,
//! unless that version is a deletion). Either index yields the same state, so pages of one list
//! stay on one snapshot however long the list takes.

use std::time::{Duration, Instant};

use foundationdb::options::StreamingMode;
use foundationdb::{FdbBindingError, RangeOption, Transaction};
use futures_util::future::try_join;
use futures_util::TryStreamExt;

use super::chunks;
use super::layout::{Cursor, Index, Layout, META_COMPACTED, META_LAST};
use super::records::{Head, Version};
use super::revision::{Revisions, Stamp};
use super::{corrupt, from_binding, store_error, Inner};
use crate::{EventKind, KeyValue, ListOptions, ListResult, Result, Revision, StorageError};

/// A transaction stops starting new reads after this long; FoundationDB aborts transactions
/// older than 5 s (`transaction_too_old`), so this leaves room for the reads in flight.
pub(super) const TXN_TIME_BUDGET: Duration = Duration::from_millis(1500);

/// The store-wide revisions, read in the caller's transaction.
#[derive(Debug, Clone, Copy)]
pub(super) struct Meta {
    pub(super) current: Revision,
    pub(super) compacted: Revision,
}

pub(super) fn decode_u64(value: Option<&[u8]>, what: &str) -> Result<u64, FdbBindingError> {
    match value {
        None => Ok(0),
        Some(bytes) => <[u8; 8]>::try_from(bytes)
            .map(u64::from_be_bytes)
            .map_err(|_| corrupt(format!("meta {what} is not a u64"))),
    }
}

/// Reads the current revision and the horizon. `last` is a snapshot read (no read conflict):
/// every write sets it, so a read-write transaction that read it serialisably (compaction)
/// would conflict with every concurrent write, and a slightly older value is harmless because
/// it only ever grows.
pub(super) async fn read_meta(
    trx: &Transaction,
    layout: &Layout,
    revs: &Revisions,
) -> Result<Meta, FdbBindingError> {
    let (last, compacted) = try_join(
        trx.get(&layout.meta(META_LAST), true),
        trx.get(&layout.meta(META_COMPACTED), false),
    )
    .await?;
    let current = match last {
        None => 0,
        Some(bytes) => {
            let stamp = Stamp::from_slice(&bytes).ok_or_else(|| corrupt("meta last"))?;
            revs.revision(stamp).map_err(store_error)?
        }
    };
    Ok(Meta {
        current,
        compacted: decode_u64(compacted.as_deref(), "compacted")?,
    })
}

pub(super) async fn get(inner: &Inner, key: &str) -> Result<Option<KeyValue>> {
    let (layout, revs) = (&inner.layout, &inner.revs);
    inner
        .db
        .run(|trx, _| async move {
            let Some(raw) = trx.get(&layout.head(key), false).await? else {
                return Ok(None);
            };
            let head = Head::decode(&raw).ok_or_else(|| corrupt(format!("head of {key}")))?;
            let value = chunks::read(&trx, layout, head.modified).await?;
            Ok(Some(KeyValue {
                key: key.to_owned(),
                value,
                mod_revision: revs.revision(head.modified).map_err(store_error)?,
                create_revision: revs.revision(head.created).map_err(store_error)?,
                stale: false,
            }))
        })
        .await
        .map_err(from_binding)
}

/// A key visible in the snapshot, without its value.
#[derive(Debug)]
pub(super) struct Visible {
    pub(super) key: String,
    pub(super) modified: Stamp,
    pub(super) created: Stamp,
}

/// One transaction's share of a scan: visible keys in order, and where to resume (`None`: the
/// prefix is exhausted).
#[derive(Debug)]
pub(super) struct Scan {
    pub(super) visible: Vec<Visible>,
    pub(super) next: Option<Cursor>,
}

/// The versions of one key read so far in `hist`; the newest at or before the snapshot wins.
struct Group {
    key: String,
    best: Option<(Stamp, Version)>,
}

impl Group {
    fn into_visible(self) -> Option<Visible> {
        match self.best {
            Some((stamp, version)) if version.kind != EventKind::Deleted => Some(Visible {
                key: self.key,
                modified: stamp,
                created: version.created,
            }),
            _ => None,
        }
    }
}

/// Reads visible keys of `prefix` from `cursor` until `want` are found, the prefix ends, or the
/// transaction's time budget is spent (after some progress).
#[allow(clippy::too_many_arguments)]
pub(super) async fn scan(
    trx: &Transaction,
    layout: &Layout,
    index: Index,
    at: Stamp,
    prefix: &str,
    cursor: &Cursor,
    want: usize,
    deadline: Instant,
) -> Result<Scan, FdbBindingError> {
    let begin = layout.cursor_key(index, prefix, cursor);
    let (_, end) = layout.prefix_range(index, prefix);
    let mut out = Scan {
        visible: Vec::new(),
        next: None,
    };
    if begin >= end {
        return Ok(out);
    }
    let mut range = RangeOption::from((begin, end));
    range.mode = StreamingMode::Iterator;
    let mut batches = trx.get_ranges(range, false);
    let mut group: Option<Group> = None;
    // Where to resume if the budget runs out: the first key not fully handled.
    let mut resume: Option<Cursor> = None;
    while let Some(batch) = batches.try_next().await? {
        for kv in batch.iter() {
            match index {
                Index::Head => {
                    let key = layout
                        .head_key(kv.key())
                        .ok_or_else(|| corrupt("undecodable head key"))?;
                    let head = Head::decode(kv.value())
                        .ok_or_else(|| corrupt(format!("head of {key}")))?;
                    out.visible.push(Visible {
                        key: key.clone(),
                        modified: head.modified,
                        created: head.created,
                    });
                    if out.visible.len() >= want {
                        out.next = Some(Cursor::After(key));
                        return Ok(out);
                    }
                    resume = Some(Cursor::After(key));
                }
                Index::Hist => {
                    let (key, stamp) = layout
                        .hist_key(kv.key())
                        .ok_or_else(|| corrupt("undecodable hist key"))?;
                    if group.as_ref().is_some_and(|g| g.key != key) {
                        if let Some(visible) = group.take().and_then(Group::into_visible) {
                            out.visible.push(visible);
                        }
                        if out.visible.len() >= want {
                            out.next = Some(Cursor::At(key));
                            return Ok(out);
                        }
                        // The new key's versions may continue past this transaction.
                        resume = Some(Cursor::At(key.clone()));
                    }
                    let current = group.get_or_insert(Group { key, best: None });
                    if stamp <= at {
                        let version = Version::decode(kv.value(), stamp)
                            .ok_or_else(|| corrupt(format!("hist of {}", current.key)))?;
                        current.best = Some((stamp, version));
                    }
                }
            }
        }
        if resume.is_some() && Instant::now() >= deadline {
            out.next = resume;
            return Ok(out);
        }
    }
    if let Some(visible) = group.and_then(Group::into_visible) {
        out.visible.push(visible);
    }
    Ok(out)
}

/// How one list transaction ended.
enum Next {
    Done { more: bool },
    Continue(Cursor),
}

struct Step {
    revision: Revision,
    items: Vec<KeyValue>,
    next: Next,
}

/// Which index serves a snapshot at `revision` in a transaction that sees `meta`, or why none.
fn view(revision: Revision, meta: Meta) -> Result<Index, StorageError> {
    if revision > meta.current {
        return Err(StorageError::FutureRevision {
            requested: revision,
            current: meta.current,
        });
    }
    if revision < meta.compacted {
        return Err(StorageError::Compacted {
            requested: revision,
            compacted: meta.compacted,
        });
    }
    Ok(if revision == meta.current {
        Index::Head
    } else {
        Index::Hist
    })
}

/// One transaction's part of a snapshot read: resolves the revision (`at`, else the current
/// one), refuses compacted or future revisions, and scans visible keys from `cursor`. The
/// outer `Result` is FoundationDB's (retried by the caller's loop), the inner one the store's
/// answer.
#[allow(clippy::too_many_arguments)]
async fn scan_snapshot(
    trx: &Transaction,
    layout: &Layout,
    revs: &Revisions,
    at: Option<Revision>,
    prefix: &str,
    cursor: &Cursor,
    want: usize,
    deadline: Instant,
) -> Result<Result<(Revision, Scan), StorageError>, FdbBindingError> {
    let meta = read_meta(trx, layout, revs).await?;
    let revision = at.unwrap_or(meta.current);
    let index = match view(revision, meta) {
        Ok(index) => index,
        Err(refused) => return Ok(Err(refused)),
    };
    let scan = scan(trx, layout, index, revs.stamp(revision), prefix, cursor, want, deadline).await?;
    Ok(Ok((revision, scan)))
}

pub(super) async fn list(inner: &Inner, prefix: &str, opts: &ListOptions) -> Result<ListResult> {
    let (layout, revs) = (&inner.layout, &inner.revs);
    let limit = opts.limit.unwrap_or(usize::MAX);
    let mut cursor = match &opts.start_after {
        Some(after) if after.as_str() >= prefix => Cursor::After(after.clone()),
        _ => Cursor::Start,
    };
    let mut fixed: Option<Revision> = None;
    let mut items: Vec<KeyValue> = Vec::new();
    loop {
        let needed = limit - items.len();
        let cursor_ref = &cursor;
        let step = inner
            .db
            .run(|trx, _| async move {
                let deadline = Instant::now() + TXN_TIME_BUDGET;
                let at = fixed.or(opts.revision);
                let (revision, scan) =
                    match scan_snapshot(&trx, layout, revs, at, prefix, cursor_ref, needed.saturating_add(1), deadline).await? {
                        Ok(found) => found,
                        Err(refused) => return Ok(Err(refused)),
                    };
                let take = scan.visible.len().min(needed);
                let stamps: Vec<Stamp> = scan.visible[..take].iter().map(|v| v.modified).collect();
                let values = chunks::read_many(&trx, layout, &stamps, deadline).await?;
                let fetched = values.len();
                let mut page = Vec::with_capacity(fetched);
                for (visible, value) in scan.visible.iter().zip(values) {
                    page.push(KeyValue {
                        key: visible.key.clone(),
                        value,
                        mod_revision: revs.revision(visible.modified).map_err(store_error)?,
                        create_revision: revs.revision(visible.created).map_err(store_error)?,
                        stale: false,
                    });
                }
                let next = if fetched < take {
                    Next::Continue(Cursor::At(scan.visible[fetched].key.clone()))
                } else if scan.visible.len() > needed {
                    Next::Done { more: true }
                } else {
                    match scan.next {
                        None => Next::Done { more: false },
                        Some(cursor) => Next::Continue(cursor),
                    }
                };
                Ok(Ok(Step {
                    revision,
                    items: page,
                    next,
                }))
            })
            .await
            .map_err(from_binding)??;
        fixed = Some(step.revision);
        items.extend(step.items);
        match step.next {
            Next::Done { more } => {
                return Ok(ListResult {
                    items,
                    revision: step.revision,
                    more,
                    // Counting what follows would scan the rest of the prefix; Kubernetes'
                    // remainingItemCount is optional.
                    remaining: (!more).then_some(0),
                });
            }
            Next::Continue(next) => cursor = next,
        }
    }
}

/// Counts at the first transaction's current revision, continuing from `hist` at that revision
/// when a large prefix needs several transactions, so the count is one snapshot's.
pub(super) async fn count(inner: &Inner, prefix: &str) -> Result<u64> {
    let (layout, revs) = (&inner.layout, &inner.revs);
    let mut cursor = Cursor::Start;
    let mut fixed: Option<Revision> = None;
    let mut total = 0u64;
    loop {
        let cursor_ref = &cursor;
        let (revision, found, next) = inner
            .db
            .run(|trx, _| async move {
                let deadline = Instant::now() + TXN_TIME_BUDGET;
                Ok(scan_snapshot(&trx, layout, revs, fixed, prefix, cursor_ref, usize::MAX, deadline)
                    .await?
                    .map(|(revision, scan)| (revision, scan.visible.len() as u64, scan.next)))
            })
            .await
            .map_err(from_binding)??;
        fixed = Some(revision);
        total += found;
        match next {
            None => return Ok(total),
            Some(next) => cursor = next,
        }
    }
}
