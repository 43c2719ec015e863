//! Single-writer checks: conditions, snapshots, prefixes, values, notifications, compaction.

use std::time::Duration;

use bytes::Bytes;

use super::{fresh_store, list_all, read_all, state_at, violation, StoreFactory};
use crate::{EventKind, KeyValue, ListOptions, Result, StorageError};

fn keys(items: &[KeyValue]) -> Vec<&str> {
    items.iter().map(|kv| kv.key.as_str()).collect()
}

/// Create/update/delete conditions: AlreadyExists, NotFound, Conflict with the current
/// revision; create_revision survives updates; the log records prev revisions.
pub async fn conditional_writes<F: StoreFactory>() -> Result<()> {
    let (_location, store) = fresh_store::<F>().await?;
    let key = "/registry/pods/default/web";
    let r1 = store.create(key, Bytes::from_static(b"v1")).await?;
    assert!(r1 > 0, "the first revision must be positive");
    match store.create(key, Bytes::from_static(b"again")).await {
        Err(StorageError::AlreadyExists(k)) => assert_eq!(k, key),
        other => panic!("second create: expected AlreadyExists, got {other:?}"),
    }
    match store
        .update(key, Bytes::from_static(b"stale"), r1 + 1000)
        .await
    {
        Err(StorageError::Conflict {
            key: k,
            expected,
            current,
        }) => {
            assert_eq!((k.as_str(), expected, current), (key, r1 + 1000, r1));
        }
        other => panic!("stale update: expected Conflict, got {other:?}"),
    }
    let r2 = store.update(key, Bytes::from_static(b"v2"), r1).await?;
    assert!(r2 > r1, "update revision {r2} not above {r1}");
    let kv = store
        .get(key)
        .await?
        .ok_or_else(|| violation("updated key is missing"))?;
    assert_eq!(
        kv,
        KeyValue {
            key: key.into(),
            value: Bytes::from_static(b"v2"),
            mod_revision: r2,
            create_revision: r1,
            stale: false,
        }
    );
    match store
        .update("/registry/pods/default/none", Bytes::new(), r1)
        .await
    {
        Err(StorageError::NotFound(k)) => assert_eq!(k, "/registry/pods/default/none"),
        other => panic!("update of a missing key: expected NotFound, got {other:?}"),
    }
    match store.delete(key, Some(r1)).await {
        Err(StorageError::Conflict {
            expected, current, ..
        }) => assert_eq!((expected, current), (r1, r2)),
        other => panic!("stale delete: expected Conflict, got {other:?}"),
    }
    match store.delete("/registry/pods/default/none", None).await {
        Err(StorageError::NotFound(_)) => {}
        other => panic!("delete of a missing key: expected NotFound, got {other:?}"),
    }
    let (r3, deleted) = store.delete(key, Some(r2)).await?;
    assert!(r3 > r2);
    assert_eq!(deleted, kv, "delete must return the deleted version");
    // Failed conditions wrote nothing: the log holds exactly the three successful writes.
    let log = read_all(&store, 0).await?;
    let summary: Vec<_> = log
        .iter()
        .map(|e| (e.revision, e.kind, e.value.clone(), e.prev_revision))
        .collect();
    assert_eq!(
        summary,
        vec![
            (r1, EventKind::Added, Bytes::from_static(b"v1"), 0),
            (r2, EventKind::Modified, Bytes::from_static(b"v2"), r1),
            (r3, EventKind::Deleted, Bytes::from_static(b"v2"), r2),
        ]
    );
    assert_eq!(store.current_revision().await?, r3);
    // An unconditional delete works too.
    let r4 = store.create(key, Bytes::from_static(b"v3")).await?;
    let (r5, _) = store.delete(key, None).await?;
    assert!(r5 > r4 && r4 > r3);
    Ok(())
}

/// A deleted key is gone from get, list and count; recreating it starts a new incarnation.
pub async fn get_after_delete<F: StoreFactory>() -> Result<()> {
    let (_location, store) = fresh_store::<F>().await?;
    let key = "/registry/configmaps/ns/cm";
    let r1 = store.create(key, Bytes::from_static(b"a")).await?;
    store.delete(key, Some(r1)).await?;
    assert_eq!(store.get(key).await?, None);
    assert!(store
        .list("/registry/configmaps/", ListOptions::default())
        .await?
        .items
        .is_empty());
    assert_eq!(store.count("/registry/configmaps/").await?, 0);
    assert!(matches!(
        store.delete(key, None).await,
        Err(StorageError::NotFound(_))
    ));
    assert!(matches!(
        store.update(key, Bytes::new(), r1).await,
        Err(StorageError::NotFound(_))
    ));
    let r3 = store.create(key, Bytes::from_static(b"b")).await?;
    let kv = store
        .get(key)
        .await?
        .ok_or_else(|| violation("recreated key is missing"))?;
    assert_eq!(
        (kv.create_revision, kv.mod_revision, kv.value),
        (r3, r3, Bytes::from_static(b"b"))
    );
    Ok(())
}

/// Listing a prefix with no keys: no items, no `more`, the current revision.
pub async fn list_of_empty_prefix<F: StoreFactory>() -> Result<()> {
    let (_location, store) = fresh_store::<F>().await?;
    let empty = store
        .list("/registry/secrets/", ListOptions::default())
        .await?;
    assert!(empty.items.is_empty() && !empty.more);
    assert_eq!(empty.revision, store.current_revision().await?);
    let before = store.create("/registry/other/x", Bytes::new()).await?;
    store.create("/registry/secrets/ns/s", Bytes::new()).await?;
    let limited = store
        .list(
            "/registry/nothing/",
            ListOptions {
                limit: Some(5),
                ..ListOptions::default()
            },
        )
        .await?;
    assert!(limited.items.is_empty() && !limited.more);
    assert_eq!(limited.revision, store.current_revision().await?);
    assert_eq!(store.count("/registry/nothing/").await?, 0);
    // Before its first key was written the prefix was empty too.
    let past = store
        .list(
            "/registry/secrets/",
            ListOptions {
                revision: Some(before),
                ..ListOptions::default()
            },
        )
        .await?;
    assert!(past.items.is_empty() && !past.more);
    assert_eq!(past.revision, before);
    Ok(())
}

/// Prefixes are byte prefixes: `/a/b/` excludes `/a/bc/...`, `/a/b` includes it.
pub async fn prefix_isolation<F: StoreFactory>() -> Result<()> {
    let (_location, store) = fresh_store::<F>().await?;
    for key in ["/a/b", "/a/b/1", "/a/b/2", "/a/bc/1", "/a/c/1", "/a/a/9"] {
        store.create(key, Bytes::from(key.to_owned())).await?;
    }
    let at = store.current_revision().await?;
    let current = store.list("/a/b/", ListOptions::default()).await?;
    assert_eq!(keys(&current.items), ["/a/b/1", "/a/b/2"]);
    let pinned = store
        .list(
            "/a/b/",
            ListOptions {
                revision: Some(at),
                ..ListOptions::default()
            },
        )
        .await?;
    assert_eq!(keys(&pinned.items), ["/a/b/1", "/a/b/2"]);
    assert_eq!(
        keys(&store.list("/a/bc/", ListOptions::default()).await?.items),
        ["/a/bc/1"]
    );
    assert_eq!(
        keys(&store.list("/a/b", ListOptions::default()).await?.items),
        ["/a/b", "/a/b/1", "/a/b/2", "/a/bc/1"]
    );
    assert_eq!(store.count("/a/b/").await?, 2);
    assert_eq!(store.count("/a/").await?, 6);
    // A start key before the prefix starts at the prefix; one inside it continues after it.
    let opts = |after: &str| ListOptions {
        start_after: Some(after.into()),
        ..ListOptions::default()
    };
    assert_eq!(
        keys(&store.list("/a/b/", opts("/a/a")).await?.items),
        ["/a/b/1", "/a/b/2"]
    );
    assert_eq!(
        keys(&store.list("/a/b/", opts("/a/b/1")).await?.items),
        ["/a/b/2"]
    );
    // Write something newer so the pinned read below is a past snapshot.
    store.create("/a/b/3", Bytes::new()).await?;
    let past = store
        .list(
            "/a/b/",
            ListOptions {
                revision: Some(at),
                ..ListOptions::default()
            },
        )
        .await?;
    assert_eq!(keys(&past.items), ["/a/b/1", "/a/b/2"]);
    Ok(())
}

/// Values of Kubernetes' maximum object size (1.5 MiB) round-trip through every read path.
pub async fn large_values<F: StoreFactory>() -> Result<()> {
    let (_location, store) = fresh_store::<F>().await?;
    let big = |seed: u8| -> Bytes {
        Bytes::from(
            (0..1_572_864usize)
                .map(|i| (i % 251) as u8 ^ seed)
                .collect::<Vec<u8>>(),
        )
    };
    let key = "/registry/configmaps/ns/big";
    let r1 = store.create(key, big(0)).await?;
    let r2 = store.update(key, big(7), r1).await?;
    let got = store
        .get(key)
        .await?
        .ok_or_else(|| violation("large value missing"))?;
    assert!(got.value == big(7), "large value corrupted by get");
    let listed = store
        .list("/registry/configmaps/", ListOptions::default())
        .await?;
    assert!(
        listed.items.len() == 1 && listed.items[0].value == big(7),
        "corrupted by list"
    );
    let past = store
        .list(
            "/registry/configmaps/",
            ListOptions {
                revision: Some(r1),
                ..ListOptions::default()
            },
        )
        .await?;
    assert!(
        past.items.len() == 1 && past.items[0].value == big(0),
        "corrupted by past list"
    );
    let (_, deleted) = store.delete(key, Some(r2)).await?;
    assert!(deleted.value == big(7), "corrupted by delete");
    let log = read_all(&store, 0).await?;
    assert_eq!(log.len(), 3);
    assert!(log[0].value == big(0) && log[1].value == big(7) && log[2].value == big(7));
    Ok(())
}

/// `subscribe()` observes a commit made through the same store.
pub async fn subscribe_observes_commits<F: StoreFactory>() -> Result<()> {
    let (_location, store) = fresh_store::<F>().await?;
    let mut rx = store.subscribe();
    let rev = store.create("/registry/ns/x", Bytes::new()).await?;
    tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|seen| *seen >= rev))
        .await
        .map_err(|_| violation(format!("subscriber never saw revision {rev}")))?
        .map_err(|_| violation("commit notifications closed"))?;
    assert!(
        *store.subscribe().borrow() >= rev,
        "a new subscriber starts behind a known commit"
    );
    Ok(())
}

/// Lists at past revisions show exactly the replayed state, including deleted and recreated
/// keys, with the same revision on every page.
pub async fn snapshots_at_past_revisions<F: StoreFactory>() -> Result<()> {
    let (_location, store) = fresh_store::<F>().await?;
    let mut checkpoints = vec![store.current_revision().await?];
    for round in 0..4u8 {
        for i in 0..6u8 {
            let key = format!("/snap/{i}");
            match store.get(&key).await? {
                None => {
                    store.create(&key, Bytes::from(vec![round, i])).await?;
                }
                Some(kv) if (i + round) % 3 == 0 => {
                    store.delete(&key, Some(kv.mod_revision)).await?;
                }
                Some(kv) => {
                    store
                        .update(&key, Bytes::from(vec![round, i]), kv.mod_revision)
                        .await?;
                }
            }
        }
        store
            .create(&format!("/snapx/{round}"), Bytes::new())
            .await?;
        checkpoints.push(store.current_revision().await?);
    }
    let log = read_all(&store, 0).await?;
    for at in checkpoints {
        let expected: Vec<KeyValue> = state_at(&log, "/snap/", at).into_values().collect();
        let (revision, items) = list_all(&store, "/snap/", Some(at)).await?;
        assert_eq!(revision, at);
        assert_eq!(
            items, expected,
            "snapshot at {at} differs from the replayed log"
        );
        let paged = store
            .list(
                "/snap/",
                ListOptions {
                    revision: Some(at),
                    limit: Some(2),
                    start_after: None,
                },
            )
            .await?;
        assert_eq!(paged.more, expected.len() > 2);
        if let Some(remaining) = paged.remaining {
            assert_eq!(remaining as usize, expected.len().saturating_sub(2));
        }
    }
    Ok(())
}

/// Compaction: older snapshots and log positions answer `Compacted`; the horizon and everything
/// after it stays readable; compaction never goes backwards or into the future.
pub async fn compaction_horizon<F: StoreFactory>() -> Result<()> {
    let (_location, store) = fresh_store::<F>().await?;
    let v = |s: &'static str| Bytes::from_static(s.as_bytes());
    let r1 = store.create("/c/k1", v("1a")).await?;
    let r2 = store.update("/c/k1", v("1b"), r1).await?;
    let r3 = store.update("/c/k1", v("1c"), r2).await?;
    let r4 = store.create("/c/k2", v("2a")).await?;
    store.delete("/c/k2", Some(r4)).await?;
    let r6 = store.create("/c/k3", v("3a")).await?;
    let r7 = store.create("/c/k4", v("4a")).await?;
    let r8 = store.update("/c/k4", v("4b"), r7).await?;
    let before = read_all(&store, 0).await?;

    store.compact(r6).await?;
    assert_eq!(store.compacted_revision().await?, r6);
    for old in [r1, r2, r6 - 1] {
        match store
            .list(
                "/c/",
                ListOptions {
                    revision: Some(old),
                    ..ListOptions::default()
                },
            )
            .await
        {
            Err(StorageError::Compacted {
                requested,
                compacted,
            }) => {
                assert_eq!((requested, compacted), (old, r6));
            }
            other => panic!("list at compacted revision {old}: expected Compacted, got {other:?}"),
        }
        match store.read_log(old, 10).await {
            Err(StorageError::Compacted {
                requested,
                compacted,
            }) => {
                assert_eq!((requested, compacted), (old, r6));
            }
            other => panic!("read_log after {old}: expected Compacted, got {other:?}"),
        }
    }
    // The horizon itself is readable, as log position and as snapshot.
    let tail = store.read_log(r6, 100).await?;
    assert_eq!(
        tail,
        before
            .iter()
            .filter(|e| e.revision > r6)
            .cloned()
            .collect::<Vec<_>>()
    );
    let (_, at_horizon) = list_all(&store, "/c/", Some(r6)).await?;
    assert_eq!(
        at_horizon,
        state_at(&before, "/c/", r6)
            .into_values()
            .collect::<Vec<_>>()
    );
    assert_eq!(keys(&at_horizon), ["/c/k1", "/c/k3"]);
    assert_eq!(at_horizon[0].value, v("1c"));
    assert_eq!(
        (at_horizon[0].mod_revision, at_horizon[0].create_revision),
        (r3, r1)
    );

    // A past snapshot after the horizon, once newer writes exist.
    let r9 = store.update("/c/k1", v("1d"), r3).await?;
    let (_, at_r8) = list_all(&store, "/c/", Some(r8)).await?;
    assert_eq!(
        at_r8,
        state_at(&before, "/c/", r8)
            .into_values()
            .collect::<Vec<_>>()
    );
    let now = store
        .get("/c/k1")
        .await?
        .ok_or_else(|| violation("k1 lost by compaction"))?;
    assert_eq!((now.mod_revision, now.create_revision), (r9, r1));

    // Going backwards is a no-op; the future is refused.
    store.compact(r2).await?;
    assert_eq!(store.compacted_revision().await?, r6);
    match store.compact(r9 + 1000).await {
        Err(StorageError::FutureRevision { requested, .. }) => assert_eq!(requested, r9 + 1000),
        other => {
            panic!("compaction past the current revision: expected FutureRevision, got {other:?}")
        }
    }
    match store
        .list(
            "/c/",
            ListOptions {
                revision: Some(r9 + 1000),
                ..ListOptions::default()
            },
        )
        .await
    {
        Err(StorageError::FutureRevision { requested, current }) => {
            assert_eq!(requested, r9 + 1000);
            assert!(current >= r9);
        }
        other => panic!("list in the future: expected FutureRevision, got {other:?}"),
    }
    // Compacting to the current revision keeps the current state listable.
    store.compact(r9).await?;
    let (_, all) = list_all(&store, "/c/", Some(r9)).await?;
    assert_eq!(keys(&all), ["/c/k1", "/c/k3", "/c/k4"]);
    assert!(store.read_log(r9, 10).await?.is_empty());
    Ok(())
}

/// Closing and reopening a store keeps state, log and revision.
pub async fn reopen_preserves_state<F: StoreFactory>() -> Result<()> {
    let location = F::fresh()?;
    let store = F::open(location.address()).await?;
    let r1 = store.create("/r/a", Bytes::from_static(b"a")).await?;
    store.create("/r/b", Bytes::from_static(b"b")).await?;
    store.update("/r/a", Bytes::from_static(b"a2"), r1).await?;
    store.delete("/r/b", None).await?;
    let revision = store.current_revision().await?;
    let log = read_all(&store, 0).await?;
    let (_, items) = list_all(&store, "/r/", None).await?;
    drop(store);
    let reopened = F::open(location.address()).await?;
    assert_eq!(reopened.current_revision().await?, revision);
    assert_eq!(read_all(&reopened, 0).await?, log);
    assert_eq!(list_all(&reopened, "/r/", None).await?, (revision, items));
    let next = reopened.create("/r/c", Bytes::new()).await?;
    assert!(
        next > revision,
        "revision {next} reused after reopen (was {revision})"
    );
    Ok(())
}
