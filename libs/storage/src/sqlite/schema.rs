//! Connection set-up and the schema, shared by the writer, the readers and the background threads.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags};

use crate::{Result, Revision, StorageError};

/// Bumped when the layout changes, so that an old binary refuses a newer file.
const SCHEMA_VERSION: i64 = 1;

/// `log.kind` values.
pub(super) const KIND_ADDED: i64 = 0;
pub(super) const KIND_MODIFIED: i64 = 1;
pub(super) const KIND_DELETED: i64 = 2;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS log (
    revision        INTEGER PRIMARY KEY,
    key             TEXT    NOT NULL,
    kind            INTEGER NOT NULL,
    value           BLOB    NOT NULL,
    prev_revision   INTEGER NOT NULL,
    create_revision INTEGER NOT NULL,
    committed_at    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS log_key_revision ON log (key, revision);
CREATE TABLE IF NOT EXISTS current (
    key             TEXT    PRIMARY KEY,
    value           BLOB    NOT NULL,
    mod_revision    INTEGER NOT NULL,
    create_revision INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    revision  INTEGER NOT NULL,
    compacted INTEGER NOT NULL
);
INSERT OR IGNORE INTO meta (id, revision, compacted) VALUES (1, 0, 0);
";

fn open_conn(path: &Path, busy_timeout: Duration) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    // Several processes share the file: wait for their locks instead of failing at once.
    conn.busy_timeout(busy_timeout)?;
    Ok(conn)
}

/// Opens the write connection: WAL, fsync before a commit returns, and the schema in place.
///
/// Switching a new file to WAL mode answers SQLITE_BUSY at once, without the busy handler,
/// while another process does the same: replicas starting together on a fresh data dir retry
/// here, within the busy timeout, instead of failing.
pub(super) fn open_writer(path: &Path, busy_timeout: Duration) -> Result<Connection> {
    let deadline = Instant::now() + busy_timeout;
    loop {
        let attempt = open_conn(path, busy_timeout).map_err(WriterSetup::Sqlite).and_then(|conn| set_up_writer(path, &conn).map(|()| conn));
        match attempt {
            Ok(conn) => return Ok(conn),
            Err(WriterSetup::Sqlite(e))
                if matches!(e.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)) && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(WriterSetup::Sqlite(e)) => return Err(e.into()),
            Err(WriterSetup::Refused(e)) => return Err(e),
        }
    }
}

/// Why the writer's set-up failed: SQLite (maybe busy), or a file kapi must not use.
enum WriterSetup {
    Sqlite(rusqlite::Error),
    Refused(StorageError),
}

impl From<rusqlite::Error> for WriterSetup {
    fn from(e: rusqlite::Error) -> Self {
        WriterSetup::Sqlite(e)
    }
}

fn set_up_writer(path: &Path, conn: &Connection) -> std::result::Result<(), WriterSetup> {
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(WriterSetup::Refused(StorageError::Backend(format!(
            "sqlite: cannot switch {} to WAL mode (journal_mode is {mode})",
            path.display()
        ))));
    }
    conn.execute_batch("PRAGMA synchronous = FULL;")?;
    conn.execute_batch("BEGIN IMMEDIATE;")?;
    let version: i64 = match conn.query_row("PRAGMA user_version", [], |row| row.get(0)) {
        Ok(v) => v,
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK;");
            return Err(e.into());
        }
    };
    if version > SCHEMA_VERSION {
        let _ = conn.execute_batch("ROLLBACK;");
        return Err(WriterSetup::Refused(StorageError::Backend(format!(
            "sqlite: {} has schema version {version}, this kapi knows {SCHEMA_VERSION}",
            path.display()
        ))));
    }
    let init = conn
        .execute_batch(SCHEMA)
        .and_then(|()| conn.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION};")))
        .and_then(|()| conn.execute_batch("COMMIT;"));
    if let Err(e) = init {
        let _ = conn.execute_batch("ROLLBACK;");
        return Err(e.into());
    }
    Ok(())
}

/// Opens a connection that only reads (the pool, the poller, the compaction planner).
pub(super) fn open_reader(path: &Path, busy_timeout: Duration) -> Result<Connection> {
    let conn = open_conn(path, busy_timeout)?;
    conn.execute_batch("PRAGMA query_only = ON;")?;
    Ok(conn)
}

/// Reads `(current revision, compacted revision)`; inside a transaction it is that snapshot's.
pub(super) fn read_meta(conn: &Connection) -> rusqlite::Result<(Revision, Revision)> {
    conn.prepare_cached("SELECT revision, compacted FROM meta WHERE id = 1")?
        .query_row([], |row| Ok((row.get::<_, u64>(0)?, row.get::<_, u64>(1)?)))
}
