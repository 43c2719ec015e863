//! `read_log`: the change log is a range of versionstamped keys, so "every event after R, in
//! commit order, with no gaps" is one forward range read from R's stamp. A transaction reading
//! at version V sees exactly the commits at or below V, and every later commit gets a larger
//! stamp, so a follower that resumes after its last event can never skip one.

use std::time::Instant;

use foundationdb::future::FdbValues;
use foundationdb::options::StreamingMode;
use foundationdb::{FdbBindingError, RangeOption, Transaction};
use futures_util::TryStreamExt;

use super::chunks;
use super::layout::{Layout, META_COMPACTED};
use super::read::{decode_u64, TXN_TIME_BUDGET};
use super::records::LogEntry;
use super::revision::{Revisions, Stamp};
use super::{corrupt, from_binding, store_error, Inner};
use crate::{Event, Result, Revision, StorageError};

/// Most log entries one call reads (callers page by their last revision anyway).
const MAX_EVENTS_PER_CALL: usize = 10_000;

/// Reads the log entries (headers only) in `[begin, end)`, at most `limit`, with their stamps.
pub(super) async fn headers(
    trx: &Transaction,
    layout: &Layout,
    begin: Vec<u8>,
    end: Vec<u8>,
    limit: usize,
) -> Result<Vec<(Stamp, LogEntry)>, FdbBindingError> {
    let mut range = RangeOption::from((begin, end));
    range.limit = Some(limit);
    range.mode = StreamingMode::WantAll;
    let batches: Vec<FdbValues> = trx.get_ranges(range, false).try_collect().await?;
    let mut entries = Vec::new();
    for kv in batches.iter().flat_map(|batch| batch.iter()) {
        let stamp = layout
            .log_stamp(kv.key())
            .ok_or_else(|| corrupt("undecodable log key"))?;
        let entry = LogEntry::decode(kv.value(), stamp)
            .ok_or_else(|| corrupt(format!("log entry at {:02x?}", stamp.0)))?;
        entries.push((stamp, entry));
    }
    Ok(entries)
}

fn revision(revs: &Revisions, stamp: Stamp) -> Result<Revision, FdbBindingError> {
    revs.revision(stamp).map_err(store_error)
}

pub(super) async fn read_log(inner: &Inner, after: Revision, limit: usize) -> Result<Vec<Event>> {
    let (layout, revs) = (&inner.layout, &inner.revs);
    inner
        .db
        .run(|trx, _| async move {
            let deadline = Instant::now() + TXN_TIME_BUDGET;
            let compacted = trx.get(&layout.meta(META_COMPACTED), false).await?;
            let compacted = decode_u64(compacted.as_deref(), "compacted")?;
            if after < compacted {
                return Ok(Err(StorageError::Compacted {
                    requested: after,
                    compacted,
                }));
            }
            if limit == 0 {
                return Ok(Ok(Vec::new()));
            }
            let entries = headers(
                &trx,
                layout,
                layout.log_after(revs.stamp(after)),
                layout.log_end(),
                limit.min(MAX_EVENTS_PER_CALL),
            )
            .await?;
            let stamps: Vec<Stamp> = entries
                .iter()
                .map(|(stamp, entry)| entry.value_stamp(*stamp))
                .collect();
            let values = chunks::read_many(&trx, layout, &stamps, deadline).await?;
            let mut events = Vec::with_capacity(values.len());
            for ((stamp, entry), value) in entries.into_iter().zip(values) {
                if usize::try_from(entry.value_len).ok() != Some(value.len()) {
                    return Err(corrupt(format!(
                        "log entry at {:02x?} announces {} bytes, its value has {}",
                        stamp.0,
                        entry.value_len,
                        value.len()
                    )));
                }
                events.push(Event {
                    revision: revision(revs, stamp)?,
                    key: entry.key,
                    kind: entry.kind,
                    value,
                    prev_revision: match entry.prev {
                        Some(prev) => revision(revs, prev)?,
                        None => 0,
                    },
                });
            }
            Ok(Ok(events))
        })
        .await
        .map_err(from_binding)?
}
