//! Reads: a small pool of reader connections used from blocking threads, and the queries.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params, Connection, OptionalExtension, ToSql, TransactionBehavior};
use tokio::sync::Semaphore;

use super::schema::{self, KIND_ADDED, KIND_DELETED, KIND_MODIFIED};
use crate::{Event, EventKind, KeyValue, ListOptions, ListResult, Result, Revision, StorageError};

/// Reader connections, opened lazily, at most `size` in use at once. Work runs on tokio's
/// blocking pool so that no async worker ever waits on SQLite.
pub(super) struct ReaderPool {
    path: PathBuf,
    busy_timeout: Duration,
    idle: Arc<Mutex<Vec<Connection>>>,
    permits: Arc<Semaphore>,
}

impl std::fmt::Debug for ReaderPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaderPool")
            .field("path", &self.path)
            .field("available", &self.permits.available_permits())
            .finish_non_exhaustive()
    }
}

impl ReaderPool {
    pub(super) fn new(path: &Path, size: usize, busy_timeout: Duration) -> Self {
        Self {
            path: path.to_path_buf(),
            busy_timeout,
            idle: Arc::new(Mutex::new(Vec::with_capacity(size))),
            permits: Arc::new(Semaphore::new(size)),
        }
    }

    /// Runs `work` on a reader connection off the async threads.
    pub(super) async fn run<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| StorageError::Backend("sqlite reader pool is closed".into()))?;
        let idle = Arc::clone(&self.idle);
        let path = self.path.clone();
        let busy_timeout = self.busy_timeout;
        tokio::task::spawn_blocking(move || {
            // Held until the work is over, even if the caller stopped waiting.
            let _permit = permit;
            let pooled = idle
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .pop();
            let mut conn = match pooled {
                Some(conn) => conn,
                None => schema::open_reader(&path, busy_timeout)?,
            };
            let result = work(&mut conn);
            // A connection left inside a transaction (a panic would skip this) is not reused.
            if conn.is_autocommit() {
                idle.lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .push(conn);
            }
            result
        })
        .await
        .map_err(|e| StorageError::Backend(format!("sqlite read task failed: {e}")))?
    }
}

pub(super) fn get(conn: &mut Connection, key: &str) -> Result<Option<KeyValue>> {
    let kv = conn
        .prepare_cached("SELECT value, mod_revision, create_revision FROM current WHERE key = ?1")?
        .query_row(params![key], |row| {
            Ok(KeyValue {
                key: key.to_owned(),
                value: Bytes::from(row.get::<_, Vec<u8>>(0)?),
                mod_revision: row.get(1)?,
                create_revision: row.get(2)?,
                stale: false,
            })
        })
        .optional()?;
    Ok(kv)
}

/// Raw key bytes bound as TEXT: the range end of a prefix may not be valid UTF-8, and SQLite
/// compares TEXT bytewise (BINARY collation), which is exactly the order lists need.
struct TextBytes<'a>(&'a [u8]);

impl ToSql for TextBytes<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(ValueRef::Text(self.0)))
    }
}

/// The smallest byte string greater than every key starting with `prefix`. 0xFF never occurs
/// in UTF-8, so `[0xFF]` bounds every key when the prefix is empty.
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return end;
        }
    }
    vec![0xFF]
}

/// Where a page starts: `key >= prefix`, or `key > start_after` when that is further on.
fn lower_bound<'a>(prefix: &'a str, start_after: Option<&'a str>) -> (&'static str, &'a str) {
    match start_after {
        Some(after) if after >= prefix => (">", after),
        _ => (">=", prefix),
    }
}

pub(super) fn list(conn: &mut Connection, prefix: &str, opts: &ListOptions) -> Result<ListResult> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
    let (current, compacted) = schema::read_meta(&tx)?;
    let at = match opts.revision {
        None => current,
        Some(r) if r > current => {
            return Err(StorageError::FutureRevision {
                requested: r,
                current,
            });
        }
        Some(r) if r < compacted => {
            return Err(StorageError::Compacted {
                requested: r,
                compacted,
            });
        }
        Some(r) => r,
    };
    let end = prefix_end(prefix);
    let (op, lower) = lower_bound(prefix, opts.start_after.as_deref());
    // One extra row tells whether more follow.
    let fetch = match opts.limit {
        Some(limit) => i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1),
        None => -1,
    };
    let history = at != current;
    let (rows_sql, count_sql) = if history {
        // The state at `at` (?4): per key, the newest log row at or before it, unless a delete.
        let visible = format!(
            "l.revision <= ?4 AND l.kind != {KIND_DELETED} AND l.revision = (\
             SELECT MAX(n.revision) FROM log AS n WHERE n.key = l.key AND n.revision <= ?4)"
        );
        (
            format!(
                "SELECT l.key, l.value, l.revision, l.create_revision FROM log AS l \
                 WHERE l.key {op} ?1 AND l.key < ?2 AND {visible} ORDER BY l.key LIMIT ?3"
            ),
            format!(
                "SELECT COUNT(*) FROM log AS l WHERE l.key {op} ?1 AND l.key < ?2 AND {visible}"
            ),
        )
    } else {
        (
            format!(
                "SELECT key, value, mod_revision, create_revision FROM current \
                 WHERE key {op} ?1 AND key < ?2 ORDER BY key LIMIT ?3"
            ),
            format!("SELECT COUNT(*) FROM current WHERE key {op} ?1 AND key < ?2"),
        )
    };
    // ?1 lower bound, ?2 range end, ?3 row limit, ?4 snapshot revision (history only).
    let bind = |fetch: i64, with_fetch: bool| -> Vec<Box<dyn ToSql + '_>> {
        let mut params: Vec<Box<dyn ToSql + '_>> = vec![Box::new(lower), Box::new(TextBytes(&end))];
        if with_fetch || history {
            params.push(Box::new(fetch));
        }
        if history {
            params.push(Box::new(at));
        }
        params
    };
    let mut items = Vec::new();
    {
        let mut stmt = tx.prepare_cached(&rows_sql)?;
        let mut rows = stmt.query(rusqlite::params_from_iter(bind(fetch, true)))?;
        while let Some(row) = rows.next()? {
            items.push(KeyValue {
                key: row.get(0)?,
                value: Bytes::from(row.get::<_, Vec<u8>>(1)?),
                mod_revision: row.get(2)?,
                create_revision: row.get(3)?,
                stale: false,
            });
        }
    }
    let more = opts.limit.is_some_and(|limit| items.len() > limit);
    let mut remaining = Some(0);
    if more {
        items.truncate(opts.limit.unwrap_or(items.len()));
        let total: u64 = tx
            .prepare_cached(&count_sql)?
            .query_row(rusqlite::params_from_iter(bind(-1, false)), |row| {
                row.get(0)
            })?;
        remaining = Some(total.saturating_sub(items.len() as u64));
    }
    tx.commit()?;
    Ok(ListResult {
        items,
        revision: at,
        more,
        remaining,
    })
}

pub(super) fn count(conn: &mut Connection, prefix: &str) -> Result<u64> {
    let end = prefix_end(prefix);
    let n = conn
        .prepare_cached("SELECT COUNT(*) FROM current WHERE key >= ?1 AND key < ?2")?
        .query_row(params![prefix, TextBytes(&end)], |row| row.get(0))?;
    Ok(n)
}

pub(super) fn read_log(conn: &mut Connection, after: Revision, limit: usize) -> Result<Vec<Event>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
    let (_, compacted) = schema::read_meta(&tx)?;
    if after < compacted {
        return Err(StorageError::Compacted {
            requested: after,
            compacted,
        });
    }
    let mut events = Vec::new();
    {
        let mut stmt = tx.prepare_cached(
            "SELECT revision, key, kind, value, prev_revision FROM log \
             WHERE revision > ?1 ORDER BY revision LIMIT ?2",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut rows = stmt.query(params![after, limit])?;
        while let Some(row) = rows.next()? {
            let kind = match row.get::<_, i64>(2)? {
                KIND_ADDED => EventKind::Added,
                KIND_MODIFIED => EventKind::Modified,
                KIND_DELETED => EventKind::Deleted,
                other => {
                    return Err(StorageError::Backend(format!(
                        "sqlite: log row has unknown kind {other}"
                    )))
                }
            };
            events.push(Event {
                revision: row.get(0)?,
                key: row.get(1)?,
                kind,
                value: Bytes::from(row.get::<_, Vec<u8>>(3)?),
                prev_revision: row.get(4)?,
            });
        }
    }
    tx.commit()?;
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_bounds_exactly_the_prefix() {
        assert_eq!(prefix_end("/a/b"), b"/a/c".to_vec());
        assert_eq!(prefix_end(""), vec![0xFF]);
        let end = prefix_end("/a/b/");
        assert!(b"/a/b/zzz".as_slice() < end.as_slice());
        assert!(b"/a/bc".as_slice() > end.as_slice() || !b"/a/bc".starts_with(b"/a/b/"));
        assert!(b"/a/b0".as_slice() >= end.as_slice());
    }

    #[test]
    fn lower_bound_prefers_start_after_inside_the_prefix() {
        assert_eq!(lower_bound("/a/", Some("/a/x")), (">", "/a/x"));
        assert_eq!(lower_bound("/a/", Some("/0")), (">=", "/a/"));
        assert_eq!(lower_bound("/a/", None), (">=", "/a/"));
    }
}
