//! The writer thread: group commit of queued writes in one `BEGIN IMMEDIATE` transaction.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::{mpsc, oneshot, watch};

use super::schema::{read_meta, KIND_ADDED, KIND_DELETED, KIND_MODIFIED};
use crate::{KeyValue, Result, Revision, StorageError};

/// One write as the store API asked for it.
#[derive(Debug)]
pub(super) enum WriteOp {
    Create {
        key: String,
        value: Bytes,
    },
    Update {
        key: String,
        value: Bytes,
        expected: Revision,
    },
    Delete {
        key: String,
        expected: Option<Revision>,
    },
    Compact {
        revision: Revision,
    },
}

/// What a successful write produced.
#[derive(Debug)]
pub(super) enum WriteOutcome {
    Written(Revision),
    Deleted(Revision, KeyValue),
    Compacted,
}

/// A queued write and the caller waiting for its answer.
#[derive(Debug)]
pub(super) struct WriteRequest {
    pub(super) op: WriteOp,
    pub(super) reply: oneshot::Sender<Result<WriteOutcome>>,
}

/// Starts the thread that owns `conn` and serves `requests` until every sender is gone; a
/// transaction waits at most `busy_budget` for another process's write lock.
pub(super) fn spawn(
    conn: Connection,
    requests: mpsc::Receiver<WriteRequest>,
    max_batch: usize,
    busy_budget: Duration,
    notify: Arc<watch::Sender<Revision>>,
) -> Result<()> {
    std::thread::Builder::new()
        .name("kapi-sqlite-writer".into())
        .spawn(move || {
            if let Err(e) = super::busy::install(&conn, busy_budget) {
                tracing::warn!(error = %e, "sqlite writer keeps SQLite's own busy handler");
            }
            run(conn, requests, max_batch, &notify)
        })
        .map(|_| ())
        .map_err(|e| StorageError::Backend(format!("cannot start sqlite writer thread: {e}")))
}

fn run(
    conn: Connection,
    mut requests: mpsc::Receiver<WriteRequest>,
    max_batch: usize,
    notify: &watch::Sender<Revision>,
) {
    let mut batch = Vec::with_capacity(max_batch);
    while let Some(first) = requests.blocking_recv() {
        batch.push(first);
        while batch.len() < max_batch {
            match requests.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let ops: Vec<&WriteOp> = batch.iter().map(|r| &r.op).collect();
        match commit_batch(&conn, &ops) {
            Ok((results, revision)) => {
                notify.send_if_modified(|known| super::raise(known, revision));
                for (request, result) in batch.drain(..).zip(results) {
                    // A caller that gave up is not an error: its write is committed anyway.
                    let _ = request.reply.send(result);
                }
            }
            Err(e) => {
                tracing::error!(error = %e, writes = batch.len(), "sqlite write batch failed");
                let message = format!("sqlite: write transaction failed: {e}");
                for request in batch.drain(..) {
                    let _ = request
                        .reply
                        .send(Err(StorageError::Backend(message.clone())));
                }
            }
        }
    }
}

/// The transaction-wide state a write advances; never cached across transactions because
/// other processes may commit in between.
struct TxState {
    revision: Revision,
    compacted: Revision,
    committed_at: i64,
}

/// Runs every op in one transaction and commits once. `Ok` carries one result per op (a failed
/// condition fails only its own op) and the store revision after the commit; `Err` means nothing
/// was committed.
fn commit_batch(
    conn: &Connection,
    ops: &[&WriteOp],
) -> rusqlite::Result<(Vec<Result<WriteOutcome>>, Revision)> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    match apply_all(conn, ops).and_then(|out| conn.execute_batch("COMMIT").map(|()| out)) {
        Ok(out) => Ok(out),
        Err(e) => {
            if !conn.is_autocommit() {
                if let Err(rollback) = conn.execute_batch("ROLLBACK") {
                    tracing::error!(error = %rollback, "sqlite rollback failed");
                }
            }
            Err(e)
        }
    }
}

fn apply_all(
    conn: &Connection,
    ops: &[&WriteOp],
) -> rusqlite::Result<(Vec<Result<WriteOutcome>>, Revision)> {
    let (revision, compacted) = read_meta(conn)?;
    let mut state = TxState {
        revision,
        compacted,
        committed_at: now_millis(),
    };
    let mut results = Vec::with_capacity(ops.len());
    for op in ops {
        conn.execute_batch("SAVEPOINT write_op")?;
        match apply(conn, &mut state, op) {
            Ok(result) => {
                conn.execute_batch("RELEASE write_op")?;
                results.push(result);
            }
            Err(e) => {
                if conn.is_autocommit() {
                    // SQLite rolled the whole transaction back (IO error, disk full).
                    return Err(e);
                }
                conn.execute_batch("ROLLBACK TO write_op; RELEASE write_op")?;
                results.push(Err(e.into()));
            }
        }
    }
    conn.prepare_cached("UPDATE meta SET revision = ?1, compacted = ?2 WHERE id = 1")?
        .execute(params![state.revision, state.compacted])?;
    Ok((results, state.revision))
}

/// Applies one op. The outer error is SQLite failing; the inner one a failed condition.
/// `state` changes only when the op fully succeeded.
fn apply(
    conn: &Connection,
    state: &mut TxState,
    op: &WriteOp,
) -> rusqlite::Result<Result<WriteOutcome>> {
    match op {
        WriteOp::Create { key, value } => {
            if head(conn, key)?.is_some() {
                return Ok(Err(StorageError::AlreadyExists(key.clone())));
            }
            let rev = state.revision + 1;
            conn.prepare_cached(
                "INSERT INTO current (key, value, mod_revision, create_revision) \
                 VALUES (?1, ?2, ?3, ?3)",
            )?
            .execute(params![key, value.as_ref(), rev])?;
            append(conn, state, rev, key, KIND_ADDED, value, 0, rev)?;
            state.revision = rev;
            Ok(Ok(WriteOutcome::Written(rev)))
        }
        WriteOp::Update {
            key,
            value,
            expected,
        } => {
            let Some(old) = head(conn, key)? else {
                return Ok(Err(StorageError::NotFound(key.clone())));
            };
            if old.mod_revision != *expected {
                return Ok(Err(conflict(key, *expected, old.mod_revision)));
            }
            let rev = state.revision + 1;
            conn.prepare_cached("UPDATE current SET value = ?2, mod_revision = ?3 WHERE key = ?1")?
                .execute(params![key, value.as_ref(), rev])?;
            append(
                conn,
                state,
                rev,
                key,
                KIND_MODIFIED,
                value,
                old.mod_revision,
                old.create_revision,
            )?;
            state.revision = rev;
            Ok(Ok(WriteOutcome::Written(rev)))
        }
        WriteOp::Delete { key, expected } => {
            let Some(old) = head(conn, key)? else {
                return Ok(Err(StorageError::NotFound(key.clone())));
            };
            if let Some(expected) = expected {
                if old.mod_revision != *expected {
                    return Ok(Err(conflict(key, *expected, old.mod_revision)));
                }
            }
            let rev = state.revision + 1;
            conn.prepare_cached("DELETE FROM current WHERE key = ?1")?
                .execute(params![key])?;
            append(
                conn,
                state,
                rev,
                key,
                KIND_DELETED,
                &old.value,
                old.mod_revision,
                old.create_revision,
            )?;
            state.revision = rev;
            Ok(Ok(WriteOutcome::Deleted(rev, old)))
        }
        WriteOp::Compact { revision } => {
            if *revision > state.revision {
                return Ok(Err(StorageError::FutureRevision {
                    requested: *revision,
                    current: state.revision,
                }));
            }
            if *revision > state.compacted {
                compact(conn, *revision)?;
                state.compacted = *revision;
            }
            Ok(Ok(WriteOutcome::Compacted))
        }
    }
}

fn conflict(key: &str, expected: Revision, current: Revision) -> StorageError {
    StorageError::Conflict {
        key: key.to_owned(),
        expected,
        current,
    }
}

fn head(conn: &Connection, key: &str) -> rusqlite::Result<Option<KeyValue>> {
    conn.prepare_cached("SELECT value, mod_revision, create_revision FROM current WHERE key = ?1")?
        .query_row(params![key], |row| {
            Ok(KeyValue {
                key: key.to_owned(),
                value: Bytes::from(row.get::<_, Vec<u8>>(0)?),
                mod_revision: row.get(1)?,
                create_revision: row.get(2)?,
                stale: false,
            })
        })
        .optional()
}

#[allow(clippy::too_many_arguments)]
fn append(
    conn: &Connection,
    state: &TxState,
    rev: Revision,
    key: &str,
    kind: i64,
    value: &Bytes,
    prev_revision: Revision,
    create_revision: Revision,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO log (revision, key, kind, value, prev_revision, create_revision, committed_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        rev,
        key,
        kind,
        value.as_ref(),
        prev_revision,
        create_revision,
        state.committed_at
    ])?;
    Ok(())
}

/// Drops log rows older than `revision`, except each key's newest row at or before `revision`
/// when it is not a delete: those rows are the snapshot at `revision` that later snapshots build on.
fn compact(conn: &Connection, revision: Revision) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "DELETE FROM log WHERE revision < ?1 AND (kind = ?2 OR EXISTS (\
             SELECT 1 FROM log AS newer WHERE newer.key = log.key \
             AND newer.revision > log.revision AND newer.revision <= ?1))",
    )?
    .execute(params![revision, KIND_DELETED])?;
    Ok(())
}

/// Commit time stamped on log rows, for time-based compaction.
pub(super) fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
