//! SQLite-specific behaviour; the backend-neutral contract is checked by the conformance suite
//! (wired in `tests/sqlite_conformance.rs`).

use std::time::Duration;

use bytes::Bytes;

use super::background::{plan, CompactionPolicy};
use super::*;

fn quiet() -> SqliteConfig {
    SqliteConfig {
        compaction_interval: Duration::ZERO,
        ..SqliteConfig::default()
    }
}

fn open_in(dir: &tempfile::TempDir, config: SqliteConfig) -> Arc<SqliteStore> {
    match SqliteStore::open(&dir.path().join("kapi.db"), config) {
        Ok(store) => store,
        Err(e) => panic!("open failed: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_handles_on_one_file_share_one_revision_sequence() -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| StorageError::Backend(e.to_string()))?;
    let a = open_in(&dir, quiet());
    let b = open_in(
        &dir,
        SqliteConfig {
            poll_interval: Duration::from_millis(10),
            ..quiet()
        },
    );
    let mut seen_by_b = b.subscribe();
    let mut last = 0;
    for i in 0..20 {
        let store = if i % 2 == 0 { &a } else { &b };
        let rev = store
            .create(&format!("/k/{i}"), Bytes::from_static(b"v"))
            .await?;
        assert!(rev > last, "revision {rev} after {last}");
        last = rev;
    }
    assert_eq!(a.current_revision().await?, last);
    assert_eq!(b.current_revision().await?, last);
    // B learns about A's commits through its poller.
    let c = a.create("/k/from-a", Bytes::from_static(b"v")).await?;
    tokio::time::timeout(Duration::from_secs(5), seen_by_b.wait_for(|r| *r >= c))
        .await
        .map_err(|_| StorageError::Backend("poller never published".into()))?
        .map_err(|e| StorageError::Backend(e.to_string()))?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn reopening_keeps_data_and_revision() -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| StorageError::Backend(e.to_string()))?;
    let store = open_in(&dir, quiet());
    let r1 = store.create("/x/1", Bytes::from_static(b"one")).await?;
    let r2 = store.update("/x/1", Bytes::from_static(b"two"), r1).await?;
    drop(store);
    let store = open_in(&dir, quiet());
    assert_eq!(store.current_revision().await?, r2);
    assert_eq!(*store.subscribe().borrow(), r2);
    let kv = store
        .get("/x/1")
        .await?
        .ok_or_else(|| StorageError::NotFound("/x/1".into()))?;
    assert_eq!(
        (kv.value.as_ref(), kv.mod_revision, kv.create_revision),
        (&b"two"[..], r2, r1)
    );
    assert_eq!(store.create("/x/2", Bytes::new()).await?, r2 + 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn automatic_compaction_follows_the_event_bound() -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| StorageError::Backend(e.to_string()))?;
    let config = SqliteConfig {
        compaction_interval: Duration::from_millis(20),
        retention: Duration::from_secs(3600),
        max_retained_events: 5,
        ..SqliteConfig::default()
    };
    let store = open_in(&dir, config);
    let mut rev = store.create("/c/a", Bytes::from_static(b"0")).await?;
    for i in 1..12u8 {
        rev = store.update("/c/a", Bytes::from(vec![i]), rev).await?;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while store.compacted_revision().await? != rev - 5 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "compaction never reached {}",
            rev - 5
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Exactly the newest five events stay readable.
    assert_eq!(store.read_log(rev - 5, 100).await?.len(), 5);
    assert!(matches!(
        store.read_log(rev - 6, 100).await,
        Err(StorageError::Compacted { .. })
    ));
    Ok(())
}

#[test]
fn plan_picks_the_horizon_that_keeps_fewer_events() -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| StorageError::Backend(e.to_string()))?;
    let path = dir.path().join("plan.db");
    let conn = schema::open_writer(&path, Duration::from_secs(1))?;
    // Ten events, one per second from t=1000 s.
    for rev in 1..=10u64 {
        conn.execute(
            "INSERT INTO log (revision, key, kind, value, prev_revision, create_revision, \
             committed_at) VALUES (?1, 'k', 1, x'', 0, 1, ?2)",
            rusqlite::params![rev, 1_000_000 + 1000 * rev as i64],
        )?;
    }
    conn.execute("UPDATE meta SET revision = 10", [])?;
    let policy = |retention_s, max_events| CompactionPolicy {
        interval: Duration::from_secs(1),
        retention: Duration::from_secs(retention_s),
        max_events,
    };
    let now = 1_000_000 + 10_500; // half a second after the last event
                                  // Keep the last 3.5 s: events 8, 9, 10 -> horizon 7.
    assert_eq!(plan(&conn, &policy(3, 0), now + 500)?, Some(7));
    // The count bound is tighter: keep 2 events -> horizon 8.
    assert_eq!(plan(&conn, &policy(3, 2), now + 500)?, Some(8));
    // The time bound is tighter.
    assert_eq!(plan(&conn, &policy(3, 9), now + 500)?, Some(7));
    // Nothing recent: everything but the current snapshot goes.
    assert_eq!(plan(&conn, &policy(1, 0), now + 60_000)?, Some(10));
    // Nothing to do below the current horizon.
    conn.execute("UPDATE meta SET compacted = 8", [])?;
    assert_eq!(plan(&conn, &policy(3, 0), now + 500)?, None);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_writes_get_contiguous_revisions() -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| StorageError::Backend(e.to_string()))?;
    let store = open_in(&dir, quiet());
    let mut tasks = Vec::new();
    for t in 0..16 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let mut revs = Vec::new();
            for i in 0..25 {
                revs.push(
                    store
                        .create(&format!("/g/{t}/{i}"), Bytes::from_static(b"v"))
                        .await?,
                );
            }
            Ok::<_, StorageError>(revs)
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(
            task.await
                .map_err(|e| StorageError::Backend(e.to_string()))??,
        );
    }
    all.sort_unstable();
    // This backend allocates revisions without gaps.
    assert_eq!(all, (1..=400).collect::<Vec<_>>());
    Ok(())
}

#[test]
fn writer_connection_is_wal_with_full_sync() -> Result<()> {
    let dir = tempfile::tempdir().map_err(|e| StorageError::Backend(e.to_string()))?;
    let conn = schema::open_writer(&dir.path().join("p.db"), Duration::from_secs(1))?;
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |row| row.get(0))?;
    let sync: i64 = conn.query_row("PRAGMA synchronous", [], |row| row.get(0))?;
    assert_eq!(
        (mode.as_str(), sync),
        ("wal", 2),
        "WAL with synchronous=FULL (2)"
    );
    Ok(())
}
