//! Checks with concurrent writers: commit order, isolated failures, snapshot pagination and the
//! completeness of the change log.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::task::JoinHandle;

use super::{fresh_store, read_all, state_at, violation, StoreFactory};
use crate::{DynStore, Event, EventKind, KeyValue, ListOptions, Result, Revision, StorageError};

const WRITERS: usize = 8;

async fn join_all<T>(tasks: Vec<JoinHandle<Result<T>>>) -> Result<Vec<T>> {
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        out.push(
            task.await
                .map_err(|e| violation(format!("writer task panicked: {e}")))??,
        );
    }
    Ok(out)
}

/// Eight concurrent writers: every acknowledged revision is unique, above every revision
/// acknowledged before the write started (commit order), and the log in revision order holds
/// exactly those writes.
pub async fn revisions_follow_commit_order<F: StoreFactory>() -> Result<()> {
    let (_location, store) = fresh_store::<F>().await?;
    let acked = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for t in 0..WRITERS {
        let (store, acked) = (Arc::clone(&store), Arc::clone(&acked));
        tasks.push(tokio::spawn(async move {
            let key = format!("/order/{t}");
            let mut writes: Vec<(Revision, String, Bytes)> = Vec::new();
            let mut last = 0;
            for i in 0..40u32 {
                let value = Bytes::from(format!("{t}-{i}"));
                let floor = acked.load(Ordering::SeqCst);
                let rev = if i == 0 {
                    store.create(&key, value.clone()).await?
                } else {
                    store.update(&key, value.clone(), last).await?
                };
                assert!(
                    rev > floor,
                    "revision {rev} not above {floor}, acknowledged earlier"
                );
                assert!(rev > last, "task {t}: revision {rev} after its own {last}");
                acked.fetch_max(rev, Ordering::SeqCst);
                last = rev;
                writes.push((rev, key.clone(), value));
            }
            Ok(writes)
        }));
    }
    let mut writes: Vec<_> = join_all(tasks).await?.into_iter().flatten().collect();
    let unique: HashSet<Revision> = writes.iter().map(|w| w.0).collect();
    assert_eq!(
        unique.len(),
        writes.len(),
        "two writes got the same revision"
    );
    writes.sort_by_key(|w| w.0);
    let log = read_all(&store, 0).await?;
    let logged: Vec<_> = log
        .iter()
        .map(|e| (e.revision, e.key.clone(), e.value.clone()))
        .collect();
    assert_eq!(
        logged, writes,
        "the log does not match the acknowledged writes"
    );
    assert_eq!(
        store.current_revision().await?,
        writes.last().map_or(0, |w| w.0)
    );
    Ok(())
}

/// Writes racing on one key: exactly one create and one conditional update win; the others fail
/// with AlreadyExists / Conflict while unrelated writes committed alongside them succeed.
pub async fn failed_conditions_fail_alone<F: StoreFactory>() -> Result<()> {
    let (_location, store) = fresh_store::<F>().await?;
    let shared = "/race/shared";
    let mut tasks = Vec::new();
    for t in 0..WRITERS {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let own = format!("/race/own-{t}");
            let (a, b) = tokio::join!(
                store.create(shared, Bytes::from(format!("{t}"))),
                store.create(&own, Bytes::new())
            );
            b?;
            match a {
                Ok(rev) => Ok(Some(rev)),
                Err(StorageError::AlreadyExists(_)) => Ok(None),
                Err(e) => Err(e),
            }
        }));
    }
    let created: Vec<Revision> = join_all(tasks).await?.into_iter().flatten().collect();
    assert_eq!(
        created.len(),
        1,
        "exactly one racing create must win, got {created:?}"
    );
    let base = created[0];
    assert_eq!(store.count("/race/own-").await?, WRITERS as u64);

    let mut tasks = Vec::new();
    for t in 0..WRITERS {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let more = format!("/race/more-{t}");
            let (a, b) = tokio::join!(
                store.update(shared, Bytes::from(format!("u{t}")), base),
                store.create(&more, Bytes::new())
            );
            b?;
            match a {
                Ok(rev) => Ok((Some(rev), None)),
                Err(StorageError::Conflict { current, .. }) => Ok((None, Some(current))),
                Err(e) => Err(e),
            }
        }));
    }
    let results = join_all(tasks).await?;
    let winners: Vec<Revision> = results.iter().filter_map(|r| r.0).collect();
    assert_eq!(
        winners.len(),
        1,
        "exactly one racing update must win, got {winners:?}"
    );
    for current in results.iter().filter_map(|r| r.1) {
        assert_eq!(
            current, winners[0],
            "a Conflict must carry the winner's revision"
        );
    }
    assert_eq!(store.count("/race/more-").await?, WRITERS as u64);
    Ok(())
}

/// Background writers that create, update and delete keys under `prefix` until stopped.
fn spawn_churn(
    store: &DynStore,
    prefix: &str,
    stop: &Arc<AtomicBool>,
    writers: usize,
) -> Vec<JoinHandle<Result<Vec<Event>>>> {
    (0..writers)
        .map(|t| {
            let (store, stop, prefix) = (Arc::clone(store), Arc::clone(stop), prefix.to_owned());
            tokio::spawn(async move {
                let mut acked = Vec::new();
                let mut live: BTreeMap<String, KeyValue> = BTreeMap::new();
                let mut i = 0u32;
                while !stop.load(Ordering::SeqCst) && i < 5_000 {
                    i += 1;
                    let key = format!("{prefix}w{t}-{}", i % 7);
                    let value = Bytes::from(format!("{t}/{i}"));
                    let event = match live.remove(&key) {
                        None => {
                            let rev = store.create(&key, value.clone()).await?;
                            live.insert(key.clone(), kv(&key, &value, rev, rev));
                            Event {
                                revision: rev,
                                key,
                                kind: EventKind::Added,
                                value,
                                prev_revision: 0,
                            }
                        }
                        Some(old) if i % 3 == 0 => {
                            let (rev, gone) = store.delete(&key, Some(old.mod_revision)).await?;
                            assert_eq!(gone, old, "delete returned another version");
                            Event {
                                revision: rev,
                                key,
                                kind: EventKind::Deleted,
                                value: old.value,
                                prev_revision: old.mod_revision,
                            }
                        }
                        Some(old) => {
                            let rev = store.update(&key, value.clone(), old.mod_revision).await?;
                            live.insert(key.clone(), kv(&key, &value, rev, old.create_revision));
                            Event {
                                revision: rev,
                                key,
                                kind: EventKind::Modified,
                                value,
                                prev_revision: old.mod_revision,
                            }
                        }
                    };
                    acked.push(event);
                }
                Ok(acked)
            })
        })
        .collect()
}

fn kv(key: &str, value: &Bytes, mod_revision: Revision, create_revision: Revision) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: value.clone(),
        mod_revision,
        create_revision,
        stale: false,
    }
}

/// Waits until the store has committed past `revision`, so that a page really races writes.
async fn wait_past(store: &DynStore, revision: Revision) -> Result<()> {
    let mut rx = store.subscribe();
    tokio::time::timeout(
        Duration::from_secs(10),
        rx.wait_for(|seen| *seen > revision),
    )
    .await
    .map_err(|_| violation(format!("no commit after revision {revision} within 10 s")))?
    .map_err(|_| violation("commit notifications closed"))?;
    Ok(())
}

/// Paging through a prefix with a small limit while writers run: every page reports the first
/// page's revision, no key repeats or goes missing, and the union is the state at that revision.
pub async fn paginated_snapshot_under_writes<F: StoreFactory>() -> Result<()> {
    let (_location, store) = fresh_store::<F>().await?;
    let prefix = "/page/";
    for i in 0..40 {
        store
            .create(&format!("{prefix}seed-{i:02}"), Bytes::from(format!("{i}")))
            .await?;
    }
    let seeded = store.current_revision().await?;
    let stop = Arc::new(AtomicBool::new(false));
    let writers = spawn_churn(&store, prefix, &stop, 4);
    // Let the writers create, update and delete for a while so the snapshot has history.
    wait_past(&store, seeded + 80).await?;

    let limit = 5;
    let first = store
        .list(
            prefix,
            ListOptions {
                limit: Some(limit),
                ..ListOptions::default()
            },
        )
        .await?;
    let at = first.revision;
    let mut seen: Vec<KeyValue> = Vec::new();
    let mut page = first;
    let mut remaining_claims = Vec::new();
    loop {
        assert_eq!(page.revision, at, "a page left the first page's snapshot");
        assert!(page.items.len() <= limit);
        seen.extend(page.items.iter().cloned());
        remaining_claims.push((seen.len(), page.remaining));
        if !page.more {
            break;
        }
        wait_past(&store, store.current_revision().await?).await?;
        let start_after = seen.last().map(|kv| kv.key.clone());
        page = store
            .list(
                prefix,
                ListOptions {
                    limit: Some(limit),
                    revision: Some(at),
                    start_after,
                },
            )
            .await?;
    }
    stop.store(true, Ordering::SeqCst);
    join_all(writers).await?;

    assert!(
        store.current_revision().await? > at,
        "writers never ran past the snapshot"
    );
    for pair in seen.windows(2) {
        assert!(
            pair[0].key < pair[1].key,
            "key {} repeated or out of order",
            pair[1].key
        );
    }
    let expected: Vec<KeyValue> = state_at(&read_all(&store, 0).await?, prefix, at)
        .into_values()
        .collect();
    assert_eq!(
        seen, expected,
        "pages differ from the state at revision {at}"
    );
    for (consumed, remaining) in remaining_claims {
        if let Some(remaining) = remaining {
            assert_eq!(
                remaining as usize,
                expected.len() - consumed,
                "wrong remaining count"
            );
        }
    }
    Ok(())
}

/// The change log, read by a concurrent follower and again afterwards, holds every
/// acknowledged write exactly once, in revision order, with kind, value and prev revision.
pub async fn change_log_is_complete_and_ordered<F: StoreFactory>() -> Result<()> {
    let (_location, store) = fresh_store::<F>().await?;
    let start = store.current_revision().await?;
    let stop = Arc::new(AtomicBool::new(false));
    let writers = spawn_churn(&store, "/log/", &stop, 6);
    let done = Arc::new(AtomicU64::new(u64::MAX));
    let follower = {
        let (store, done) = (Arc::clone(&store), Arc::clone(&done));
        tokio::spawn(async move {
            let mut rx = store.subscribe();
            let mut followed: Vec<Event> = Vec::new();
            let mut position = start;
            loop {
                let page = store.read_log(position, 16).await?;
                if let Some(last) = page.last() {
                    for event in &page {
                        assert!(
                            event.revision > position,
                            "log went backwards at {}",
                            event.revision
                        );
                        position = event.revision;
                    }
                    assert_eq!(position, last.revision);
                    followed.extend(page);
                    continue;
                }
                if position >= done.load(Ordering::SeqCst) {
                    return Ok::<_, StorageError>(followed);
                }
                let _ = tokio::time::timeout(Duration::from_millis(50), rx.changed()).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    wait_past(&store, start + 100).await?;
    stop.store(true, Ordering::SeqCst);
    let mut acked: Vec<Event> = join_all(writers).await?.into_iter().flatten().collect();
    acked.sort_by_key(|e| e.revision);
    assert!(
        acked.len() >= 20,
        "writers acknowledged only {} writes",
        acked.len()
    );
    done.store(store.current_revision().await?, Ordering::SeqCst);
    let followed = tokio::time::timeout(Duration::from_secs(30), follower)
        .await
        .map_err(|_| violation("the follower never caught up"))?
        .map_err(|e| violation(format!("follower panicked: {e}")))??;
    assert_eq!(
        followed, acked,
        "the followed log differs from the acknowledged writes"
    );
    assert_eq!(
        read_all(&store, start).await?,
        acked,
        "the log differs from the acknowledged writes"
    );
    Ok(())
}
