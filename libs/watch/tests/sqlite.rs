//! The watch cache against the real SQLite backend.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kapi_storage::sqlite::{SqliteConfig, SqliteStore};
use kapi_storage::{DynStore, EventKind, ListOptions, Revision};
use kapi_watch::{CacheConfig, CacheSet, EventType, Filter, WatchItem, WatchStart};
use serde_json::{json, Value};

const PODS: &str = "/registry/core/pods/";
const WAIT: Duration = Duration::from_secs(20);

fn pod(name: &str, gen: usize) -> Bytes {
    Bytes::from(
        json!({"kind": "Pod", "metadata": {"name": name}, "spec": {"gen": gen}}).to_string(),
    )
}

fn open(dir: &tempfile::TempDir) -> DynStore {
    SqliteStore::open(&dir.path().join("kapi.db"), SqliteConfig::default()).expect("open sqlite")
}

/// One writer's committed operations: (revision, key, kind).
async fn write_some(
    store: DynStore,
    writer: usize,
    ops: usize,
) -> Vec<(Revision, String, EventKind)> {
    let mut done = Vec::new();
    for i in 0..ops {
        let name = format!("w{writer}-{}", i % 4);
        let key = format!("{PODS}ns/{name}");
        let (rev, kind) = match store.get(&key).await.expect("get") {
            Some(cur) if i % 7 == 6 => (
                store
                    .delete(&key, Some(cur.mod_revision))
                    .await
                    .expect("delete")
                    .0,
                EventKind::Deleted,
            ),
            Some(cur) => (
                store
                    .update(&key, pod(&name, i), cur.mod_revision)
                    .await
                    .expect("update"),
                EventKind::Modified,
            ),
            None => (
                store.create(&key, pod(&name, i)).await.expect("create"),
                EventKind::Added,
            ),
        };
        done.push((rev, key, kind));
    }
    done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_committed_write_reaches_a_watcher_once_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(&dir);
    store
        .create(&format!("{PODS}ns/pre"), pod("pre", 0))
        .await
        .expect("seed");
    let set = CacheSet::start(store.clone(), vec![PODS.to_owned()], CacheConfig::default())
        .await
        .expect("start");
    let cache = set.cache(PODS).expect("cache");
    let all: Filter = Arc::new(|_: &Value| true);
    let mut w = cache
        .watch(PODS, WatchStart::InitialState, all)
        .expect("watch");

    let writers: Vec<_> = (0..4)
        .map(|i| tokio::spawn(write_some(store.clone(), i, 60)))
        .collect();
    let mut committed = Vec::new();
    for h in writers {
        committed.extend(h.await.expect("writer"));
    }
    committed.sort_by_key(|c| c.0);

    match tokio::time::timeout(WAIT, w.next()).await.expect("stalled") {
        Some(WatchItem::Event {
            kind: EventType::Added,
            event,
        }) => assert_eq!(event.key, format!("{PODS}ns/pre")),
        other => panic!("unexpected {other:?}"),
    }
    let start = match tokio::time::timeout(WAIT, w.next()).await.expect("stalled") {
        Some(WatchItem::InitialEventsEnd(rev)) => rev,
        other => panic!("unexpected {other:?}"),
    };
    let live: Vec<_> = committed.iter().filter(|c| c.0 > start).cloned().collect();
    for (rev, key, kind) in &live {
        match tokio::time::timeout(WAIT, w.next()).await.expect("stalled") {
            Some(WatchItem::Event { event, .. }) => {
                assert_eq!((event.revision, &event.key, event.kind), (*rev, key, *kind));
                assert_eq!(event.object["metadata"]["resourceVersion"], rev.to_string());
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(200), w.next())
            .await
            .is_err(),
        "no extra events"
    );

    // Consistent read: once caught up with the store, the cache equals a store list.
    let current = store.current_revision().await.expect("rev");
    set.wait_for(current, WAIT).await.expect("caught up");
    let (cached, at) = cache.list(PODS);
    assert_eq!(at, current);
    let listed = store
        .list(PODS, ListOptions::default())
        .await
        .expect("list");
    let cached: HashMap<_, _> = cached.iter().map(|o| (o.key.clone(), o.revision)).collect();
    let stored: HashMap<_, _> = listed
        .items
        .iter()
        .map(|kv| (kv.key.clone(), kv.mod_revision))
        .collect();
    assert_eq!(cached, stored);
    set.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_another_handle_on_the_same_file_reach_watchers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let here = open(&dir);
    let there = open(&dir);
    let set = CacheSet::start(here, vec![PODS.to_owned()], CacheConfig::default())
        .await
        .expect("start");
    let cache = set.cache(PODS).expect("cache");
    let all: Filter = Arc::new(|_: &Value| true);
    let mut w = cache.watch(PODS, WatchStart::After(0), all).expect("watch");
    let key = format!("{PODS}ns/remote");
    let rev = there.create(&key, pod("remote", 1)).await.expect("create");
    match tokio::time::timeout(WAIT, w.next()).await.expect("stalled") {
        Some(WatchItem::Event {
            kind: EventType::Added,
            event,
        }) => {
            assert_eq!((event.revision, event.key.as_str()), (rev, key.as_str()));
        }
        other => panic!("unexpected {other:?}"),
    }
    set.wait_for(rev, WAIT).await.expect("caught up");
    assert_eq!(cache.get(&key).expect("cached").revision, rev);
}
