//! Background threads: the poller that notices commits of other processes, and automatic
//! compaction. Each ends when its stop channel disconnects (the store was dropped).

use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::{mpsc, oneshot, watch};

use super::schema::read_meta;
use super::writer::{now_millis, WriteOp, WriteRequest};
use crate::{Result, Revision, StorageError};

fn spawn_loop(
    name: &str,
    interval: Duration,
    mut tick: impl FnMut() + Send + 'static,
) -> Result<Sender<()>> {
    let (stop, stopped): (Sender<()>, Receiver<()>) = channel();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            // A message or a disconnect (the store was dropped) ends the loop.
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                tick();
            }
        })
        .map_err(|e| StorageError::Backend(format!("cannot start thread {name}: {e}")))?;
    Ok(stop)
}

/// Publishes the stored revision every `interval`, so that followers in this process wake up
/// for commits made by other processes on the same file.
pub(super) fn spawn_poller(
    conn: Connection,
    interval: Duration,
    notify: Arc<watch::Sender<Revision>>,
) -> Result<Sender<()>> {
    spawn_loop("kapi-sqlite-poller", interval, move || {
        match read_meta(&conn) {
            Ok((revision, _)) => {
                notify.send_if_modified(|known| super::raise(known, revision));
            }
            Err(e) => tracing::warn!(error = %e, "sqlite revision poll failed"),
        }
    })
}

/// When and how far automatic compaction goes.
#[derive(Debug, Clone, Copy)]
pub(super) struct CompactionPolicy {
    pub(super) interval: Duration,
    pub(super) retention: Duration,
    /// 0: no bound on the number of events.
    pub(super) max_events: u64,
}

/// Plans a compaction horizon on a reader connection and hands it to the writer thread.
pub(super) fn spawn_compactor(
    conn: Connection,
    policy: CompactionPolicy,
    writes: mpsc::Sender<WriteRequest>,
) -> Result<Sender<()>> {
    spawn_loop("kapi-sqlite-compactor", policy.interval, move || {
        let target = match plan(&conn, &policy, now_millis()) {
            Ok(Some(target)) => target,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "sqlite compaction planning failed");
                return;
            }
        };
        let (reply, answer) = oneshot::channel();
        let request = WriteRequest {
            op: WriteOp::Compact { revision: target },
            reply,
        };
        if writes.blocking_send(request).is_err() {
            return;
        }
        match answer.blocking_recv() {
            Ok(Ok(_)) => tracing::debug!(revision = target, "sqlite store compacted"),
            Ok(Err(e)) => tracing::warn!(error = %e, revision = target, "sqlite compaction failed"),
            Err(_) => {}
        }
    })
}

/// The horizon that keeps the events of the last `retention` but at most `max_events` events
/// (the newer of the two horizons), or `None` when it is not past the current one.
///
/// With horizon C the readable events are those with revision > C (see the module docs), so
/// keeping N events means C = current - N; revisions are contiguous in this backend.
pub(super) fn plan(
    conn: &Connection,
    policy: &CompactionPolicy,
    now_ms: i64,
) -> rusqlite::Result<Option<Revision>> {
    let (current, compacted) = read_meta(conn)?;
    let retention_ms = i64::try_from(policy.retention.as_millis()).unwrap_or(i64::MAX);
    let cutoff = now_ms.saturating_sub(retention_ms);
    let oldest_recent: Option<Revision> = conn
        .prepare_cached("SELECT MIN(revision) FROM log WHERE revision > ?1 AND committed_at >= ?2")?
        .query_row(params![compacted, cutoff], |row| row.get(0))
        .optional()?
        .flatten();
    let by_time = match oldest_recent {
        Some(revision) => revision.saturating_sub(1),
        None => current,
    };
    let by_count = if policy.max_events == 0 {
        0
    } else {
        current.saturating_sub(policy.max_events)
    };
    let target = by_time.max(by_count).min(current);
    Ok((target > compacted).then_some(target))
}
