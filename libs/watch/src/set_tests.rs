//! Behaviour of the caches against the in-memory test store.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kapi_storage::{DynStore, EventKind, Revision, Store};
use serde_json::{json, Value};

use crate::testing::MemStore;
use crate::{
    CacheConfig, CacheSet, EventType, Filter, TerminateReason, WatchError, WatchItem, WatchStart,
    Watcher,
};

const PODS: &str = "/registry/core/pods/";
const CMS: &str = "/registry/core/configmaps/";
const WAIT: Duration = Duration::from_secs(5);

fn pod(name: &str, app: &str) -> Bytes {
    Bytes::from(
        json!({"kind": "Pod", "metadata": {"name": name, "labels": {"app": app}}}).to_string(),
    )
}

fn key(ns: &str, name: &str) -> String {
    format!("{PODS}{ns}/{name}")
}

fn all() -> Filter {
    Arc::new(|_: &Value| true)
}

fn app(wanted: &'static str) -> Filter {
    Arc::new(move |v: &Value| v["metadata"]["labels"]["app"] == wanted)
}

fn config() -> CacheConfig {
    CacheConfig {
        retry_backoff: Duration::from_millis(20),
        ..CacheConfig::default()
    }
}

async fn start(store: &Arc<MemStore>, config: CacheConfig) -> Arc<CacheSet> {
    let dyn_store: DynStore = store.clone();
    CacheSet::start(dyn_store, vec![PODS.to_owned(), CMS.to_owned()], config)
        .await
        .unwrap()
}

/// Polls `check` every 10 ms for up to [`WAIT`].
async fn wait_until(check: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    check()
}

async fn next(w: &mut Watcher) -> Option<WatchItem> {
    tokio::time::timeout(WAIT, w.next())
        .await
        .expect("watcher stalled")
}

/// The next item, which must be an event: (type, revision, name, resourceVersion).
async fn next_event(w: &mut Watcher) -> (EventType, Revision, String, String) {
    match next(w).await {
        Some(WatchItem::Event { kind, event }) => (
            kind,
            event.revision,
            event.object["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            event.object["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        ),
        other => panic!("expected an event, got {other:?}"),
    }
}

async fn update(store: &MemStore, key: &str, value: Bytes) -> Revision {
    let cur = store.get(key).await.unwrap().unwrap();
    store.update(key, value, cur.mod_revision).await.unwrap()
}

#[tokio::test]
async fn filter_transitions_are_delivered_as_the_cacher_does() {
    let store = Arc::new(MemStore::new());
    let set = start(&store, config()).await;
    let cache = set.cache(PODS).unwrap();
    let mut web = cache.watch(PODS, WatchStart::After(0), app("web")).unwrap();
    let mut every = cache.watch(PODS, WatchStart::After(0), all()).unwrap();
    let k = key("ns", "p");

    let r1 = store.create(&k, pod("p", "web")).await.unwrap();
    let r2 = update(&store, &k, pod("p", "db")).await;
    let _r3 = update(&store, &k, pod("p", "db")).await;
    let r4 = update(&store, &k, pod("p", "web")).await;
    let r5 = update(&store, &k, pod("p", "web")).await;
    let (r6, _) = store.delete(&k, None).await.unwrap();

    let expected = [
        (EventType::Added, r1),
        (EventType::Deleted, r2),
        (EventType::Added, r4),
        (EventType::Modified, r5),
        (EventType::Deleted, r6),
    ];
    for (kind, rev) in expected {
        let (k2, r, name, rv) = next_event(&mut web).await;
        assert_eq!((k2, r, name.as_str()), (kind, rev, "p"));
        assert_eq!(
            rv,
            rev.to_string(),
            "resourceVersion is the write's revision"
        );
    }
    // The unfiltered watcher sees every store event with its own type.
    let kinds: Vec<EventType> = {
        let mut v = Vec::new();
        for _ in 0..6 {
            v.push(next_event(&mut every).await.0);
        }
        v
    };
    use EventType::*;
    assert_eq!(
        kinds,
        vec![Added, Modified, Modified, Modified, Modified, Deleted]
    );
    set.wait_for(r6, WAIT).await.unwrap();
    assert!(cache.get(&k).is_none());
}

#[tokio::test]
async fn deleted_events_carry_the_deletion_revision_and_transition_object() {
    let store = Arc::new(MemStore::new());
    let set = start(&store, config()).await;
    let cache = set.cache(PODS).unwrap();
    let mut w = cache.watch(PODS, WatchStart::After(0), app("web")).unwrap();
    let k = key("ns", "p");
    store.create(&k, pod("p", "web")).await.unwrap();
    let r2 = update(&store, &k, pod("p", "db")).await;
    next_event(&mut w).await;
    match next(&mut w).await {
        Some(WatchItem::Event {
            kind: EventType::Deleted,
            event,
        }) => {
            assert_eq!(event.kind, EventKind::Modified);
            // The object out of the filter is the new one, as kube-apiserver sends it.
            assert_eq!(event.object["metadata"]["labels"]["app"], "db");
            assert_eq!(
                event.prev_object.as_ref().unwrap()["metadata"]["labels"]["app"],
                "web"
            );
            assert_eq!(event.object["metadata"]["resourceVersion"], r2.to_string());
        }
        other => panic!("unexpected {other:?}"),
    }
    let (r3, _) = store.delete(&k, None).await.unwrap();
    let mut all_w = cache.watch(PODS, WatchStart::After(r2), all()).unwrap();
    let (kind, rev, _, rv) = next_event(&mut all_w).await;
    assert_eq!((kind, rev, rv), (EventType::Deleted, r3, r3.to_string()));
}

#[tokio::test]
async fn replay_within_the_window_then_live_without_gap_or_duplicate() {
    let store = Arc::new(MemStore::new());
    let set = start(&store, config()).await;
    let cache = set.cache(PODS).unwrap();
    let mut revs = Vec::new();
    for i in 0..5 {
        revs.push(
            store
                .create(&key("ns", &format!("p{i}")), pod(&format!("p{i}"), "web"))
                .await
                .unwrap(),
        );
    }
    // Another resource's writes interleave in the revision space.
    store
        .create(&format!("{CMS}ns/c"), pod("c", "x"))
        .await
        .unwrap();
    set.wait_for(revs[4], WAIT).await.unwrap();
    let mut w = cache
        .watch(PODS, WatchStart::After(revs[1]), all())
        .unwrap();
    let live = store
        .create(&key("ns", "p5"), pod("p5", "web"))
        .await
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(next_event(&mut w).await.1);
    }
    assert_eq!(seen, vec![revs[2], revs[3], revs[4], live]);
    assert_eq!(w.last_delivered(), live);
    // Nothing else is pending.
    assert!(tokio::time::timeout(Duration::from_millis(100), w.next())
        .await
        .is_err());
}

#[tokio::test]
async fn too_old_and_future_revisions_are_refused() {
    let store = Arc::new(MemStore::new());
    for i in 0..5 {
        store
            .create(&key("ns", &format!("a{i}")), pod("a", "web"))
            .await
            .unwrap();
    }
    let set = start(
        &store,
        CacheConfig {
            window: 3,
            ..config()
        },
    )
    .await;
    let cache = set.cache(PODS).unwrap();
    let loaded = set.revision();
    assert_eq!(loaded, 5);
    assert_eq!(cache.list(PODS).0.len(), 5);
    // Start-up replayed the log into the window, which keeps the last 3 events (3, 4, 5): a
    // watch may resume after 2 on a cache that just started, not after 1.
    match cache.watch(PODS, WatchStart::After(1), all()) {
        Err(WatchError::TooOld { requested, oldest }) => assert_eq!((requested, oldest), (1, 2)),
        other => panic!("unexpected {other:?}"),
    }
    cache.watch(PODS, WatchStart::After(2), all()).unwrap();
    cache.watch(PODS, WatchStart::After(loaded), all()).unwrap();
    let mut last = 0;
    for i in 0..5 {
        last = store
            .create(&key("ns", &format!("b{i}")), pod("b", "web"))
            .await
            .unwrap();
    }
    set.wait_for(last, WAIT).await.unwrap();
    // The window holds the last 3 events (6, 7, 8): watching after 5 still works, after 4 not.
    assert!(cache
        .watch(PODS, WatchStart::After(last - 3), all())
        .is_ok());
    match cache.watch(PODS, WatchStart::After(last - 4), all()) {
        Err(e @ WatchError::TooOld { .. }) => {
            assert_eq!(
                e.to_string(),
                format!("too old resource version: {} ({})", last - 4, last - 3)
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(matches!(
        cache.watch(PODS, WatchStart::After(last + 10), all()),
        Err(WatchError::FutureRevision { requested, current }) if requested == last + 10 && current == last
    ));
}

#[tokio::test]
async fn slow_watcher_is_cut_off_while_a_fast_one_gets_everything() {
    let store = Arc::new(MemStore::new());
    let set = start(
        &store,
        CacheConfig {
            watcher_buffer: 4,
            ..config()
        },
    )
    .await;
    let cache = set.cache(PODS).unwrap();
    let mut slow = cache.watch(PODS, WatchStart::After(0), all()).unwrap();
    let mut fast = cache.watch(PODS, WatchStart::After(0), all()).unwrap();
    let mut revs = Vec::new();
    for i in 0..20 {
        let rev = store
            .create(&key("ns", &format!("p{i}")), pod("p", "web"))
            .await
            .unwrap();
        // The fast watcher keeps up; the follower never waited for the slow one.
        assert_eq!(next_event(&mut fast).await.1, rev);
        revs.push(rev);
    }
    for rev in &revs[..4] {
        assert_eq!(next_event(&mut slow).await.1, *rev);
    }
    match next(&mut slow).await {
        Some(WatchItem::Terminated {
            last_delivered,
            reason,
        }) => {
            assert_eq!(reason, TerminateReason::TooSlow);
            assert_eq!(last_delivered, revs[3]);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(slow.next().await.is_none());
    assert_eq!(cache.watcher_count(), 1);
}

#[tokio::test]
async fn bookmarks_follow_every_event_up_to_their_revision() {
    let store = Arc::new(MemStore::new());
    let set = start(&store, config()).await;
    let cache = set.cache(PODS).unwrap();
    let mut w = cache.watch(PODS, WatchStart::After(0), app("web")).unwrap();
    let r1 = store
        .create(&key("ns", "a"), pod("a", "web"))
        .await
        .unwrap();
    store.create(&key("ns", "b"), pod("b", "db")).await.unwrap();
    let r3 = store
        .create(&key("ns", "c"), pod("c", "web"))
        .await
        .unwrap();
    // A write to another resource still moves the bookmark revision forward.
    let r4 = store
        .create(&format!("{CMS}ns/x"), pod("x", "web"))
        .await
        .unwrap();
    set.wait_for(r4, WAIT).await.unwrap();
    w.request_bookmark();
    assert_eq!(next_event(&mut w).await.1, r1);
    assert_eq!(next_event(&mut w).await.1, r3);
    match next(&mut w).await {
        Some(WatchItem::Bookmark(rev)) => assert_eq!(rev, r4),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(w.last_delivered(), r4);
}

#[tokio::test]
async fn initial_state_then_initial_events_end_then_live() {
    let store = Arc::new(MemStore::new());
    store.create(&key("a", "x"), pod("x", "web")).await.unwrap();
    store.create(&key("b", "y"), pod("y", "web")).await.unwrap();
    let set = start(&store, config()).await;
    let cache = set.cache(PODS).unwrap();
    let r3 = store.create(&key("a", "w"), pod("w", "web")).await.unwrap();
    store.create(&key("a", "z"), pod("z", "db")).await.unwrap();
    let r5 = update(&store, &key("a", "x"), pod("x", "web")).await;
    set.wait_for(r5, WAIT).await.unwrap();

    let ns_a = format!("{PODS}a/");
    let mut w = cache
        .watch(&ns_a, WatchStart::InitialState, app("web"))
        .unwrap();
    // Key order, current versions, filtered, namespace narrowed.
    assert_eq!(
        next_event(&mut w).await,
        (EventType::Added, r3, "w".into(), r3.to_string())
    );
    assert_eq!(
        next_event(&mut w).await,
        (EventType::Added, r5, "x".into(), r5.to_string())
    );
    assert_eq!(
        w.last_delivered(),
        0,
        "inside the initial state there is nothing to resume from"
    );
    match next(&mut w).await {
        Some(WatchItem::InitialEventsEnd(rev)) => assert_eq!(rev, r5),
        other => panic!("unexpected {other:?}"),
    }
    store.create(&key("b", "q"), pod("q", "web")).await.unwrap();
    let r7 = store.create(&key("a", "v"), pod("v", "web")).await.unwrap();
    assert_eq!(
        next_event(&mut w).await,
        (EventType::Added, r7, "v".into(), r7.to_string())
    );

    let (items, rev) = cache.list(&ns_a);
    assert_eq!(rev, r7);
    let names: Vec<_> = items
        .iter()
        .map(|o| o.object["metadata"]["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, vec!["v", "w", "x", "z"]);
    assert_eq!(cache.get(&key("a", "x")).unwrap().revision, r5);
}

#[tokio::test]
async fn wait_for_reads_the_log_at_once_for_commits_not_yet_announced() {
    let store = Arc::new(MemStore::new());
    let set = start(&store, config()).await;
    // Let the follower reach its idle wait before holding notifications back.
    let first = store
        .create(&key("ns", "first"), pod("first", "web"))
        .await
        .unwrap();
    set.wait_for(first, WAIT).await.unwrap();
    // A commit the follower was not told about (another process's, before its poll): the
    // waiting reader makes the follower read the log at once.
    store.set_silent(true);
    let rev = store
        .create(&key("ns", "a"), pod("a", "web"))
        .await
        .unwrap();
    assert!(set.revision() < rev);
    set.wait_for(rev, Duration::from_secs(1)).await.unwrap();
    assert_eq!(set.revision(), rev);
    assert!(set.cache(PODS).unwrap().get(&key("ns", "a")).is_some());
    assert_eq!(set.lag().revisions, 0);
    // A hint does the same without a reader waiting.
    let rev2 = store
        .create(&key("ns", "b"), pod("b", "web"))
        .await
        .unwrap();
    set.hint(rev2);
    set.wait_for(rev2, Duration::from_secs(1)).await.unwrap();
    // A hint beyond the log is not lag once the log has been read.
    set.hint(rev2 + 10);
    assert!(
        wait_until(|| set.lag().revisions == 0).await,
        "lag stuck at {:?}",
        set.lag()
    );
    set.shutdown();
    assert!(matches!(
        set.wait_for(rev2 + 100, WAIT).await,
        Err(WatchError::ShuttingDown)
    ));
}

#[tokio::test]
async fn compaction_past_the_follower_reloads_and_expires_watchers() {
    let store = Arc::new(MemStore::new());
    store
        .create(&key("ns", "old"), pod("old", "web"))
        .await
        .unwrap();
    let set = start(&store, config()).await;
    let cache = set.cache(PODS).unwrap();
    let mut w = cache.watch(PODS, WatchStart::After(0), all()).unwrap();
    let r2 = store
        .create(&key("ns", "a"), pod("a", "web"))
        .await
        .unwrap();
    assert_eq!(next_event(&mut w).await.1, r2);

    store.set_silent(true);
    store
        .create(&key("ns", "b"), pod("b", "web"))
        .await
        .unwrap();
    store.delete(&key("ns", "old"), None).await.unwrap();
    let last = store
        .create(&key("ns", "c"), pod("c", "web"))
        .await
        .unwrap();
    store.compact(last).await.unwrap();
    store.set_silent(false);

    match next(&mut w).await {
        Some(WatchItem::Terminated {
            last_delivered,
            reason,
        }) => {
            assert_eq!(reason, TerminateReason::Expired);
            assert_eq!(last_delivered, r2);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(w.next().await.is_none());
    set.wait_for(last, WAIT).await.unwrap();
    let (items, rev) = cache.list(PODS);
    assert_eq!(rev, last);
    let names: Vec<_> = items
        .iter()
        .map(|o| o.object["metadata"]["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, vec!["a", "b", "c"]);
    // The window restarts at the reload revision.
    assert!(matches!(
        cache.watch(PODS, WatchStart::After(r2), all()),
        Err(WatchError::TooOld { .. })
    ));
    let mut fresh = cache.watch(PODS, WatchStart::After(last), all()).unwrap();
    let r = store
        .create(&key("ns", "d"), pod("d", "web"))
        .await
        .unwrap();
    assert_eq!(next_event(&mut fresh).await.1, r);
}

#[tokio::test]
async fn shutdown_ends_watchers_and_refuses_new_ones() {
    let store = Arc::new(MemStore::new());
    let set = start(&store, config()).await;
    let cache = set.cache(PODS).unwrap();
    let mut w = cache.watch(PODS, WatchStart::After(0), all()).unwrap();
    let rev = store
        .create(&key("ns", "a"), pod("a", "web"))
        .await
        .unwrap();
    set.wait_for(rev, WAIT).await.unwrap();
    set.shutdown();
    // What was queued is still delivered, then the watch ends without an error.
    assert_eq!(next_event(&mut w).await.1, rev);
    assert!(next(&mut w).await.is_none());
    assert!(matches!(
        cache.watch(PODS, WatchStart::After(0), all()),
        Err(WatchError::ShuttingDown)
    ));
    assert!(set.cache("/registry/core/nope/").is_none());
}

#[tokio::test]
async fn dropped_watchers_unregister() {
    let store = Arc::new(MemStore::new());
    let set = start(&store, config()).await;
    let cache = set.cache(PODS).unwrap();
    let w = cache.watch(PODS, WatchStart::After(0), all()).unwrap();
    assert_eq!(cache.watcher_count(), 1);
    drop(w);
    assert_eq!(cache.watcher_count(), 0);
}

#[tokio::test]
async fn exact_revision_lists_undo_the_window() {
    let store = Arc::new(MemStore::new());
    store
        .create(&format!("{CMS}ns/cm"), pod("cm", "v1"))
        .await
        .unwrap();
    store.create(&key("ns", "a"), pod("a", "v1")).await.unwrap();
    let set = start(&store, config()).await;
    let cache = set.cache(PODS).unwrap();
    let r1 = set.revision();
    assert_eq!(r1, 2);
    let r2 = store.create(&key("ns", "b"), pod("b", "v1")).await.unwrap();
    let r3 = update(&store, &key("ns", "a"), pod("a", "v2")).await;
    store.delete(&key("ns", "b"), None).await.unwrap();
    let r5 = store
        .create(&key("other", "c"), pod("c", "v1"))
        .await
        .unwrap();
    set.wait_for(r5, WAIT).await.unwrap();

    let view = |rev| {
        let (items, at) = cache.list_at(PODS, rev).unwrap();
        assert_eq!(at, rev);
        items
            .iter()
            .map(|o| {
                let labels = &o.object["metadata"];
                assert_eq!(labels["resourceVersion"], o.revision.to_string());
                format!(
                    "{}@{}={}",
                    labels["name"].as_str().unwrap_or(""),
                    o.revision,
                    labels["labels"]["app"].as_str().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(view(r1), vec![format!("a@{r1}=v1")]);
    assert_eq!(view(r2), vec![format!("a@{r1}=v1"), format!("b@{r2}=v1")]);
    assert_eq!(view(r3), vec![format!("a@{r3}=v2"), format!("b@{r2}=v1")]);
    assert_eq!(view(r5), vec![format!("a@{r3}=v2"), format!("c@{r5}=v1")]);
    let (ns, _) = cache.list_at(&format!("{PODS}ns/"), r2).unwrap();
    assert_eq!(ns.len(), 2);
    // The cache was started from the log's horizon, so revisions before its start are there.
    assert_eq!(view(r1 - 1), Vec::<String>::new());
    assert!(matches!(
        cache.list_at(PODS, r5 + 1),
        Err(WatchError::FutureRevision { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_are_seen_exactly_once_in_order() {
    let store = Arc::new(MemStore::new());
    let set = start(&store, config()).await;
    let cache = set.cache(PODS).unwrap();
    let mut w = cache.watch(PODS, WatchStart::After(0), all()).unwrap();
    let per_writer = 50;
    let mut writers = Vec::new();
    for wi in 0..4 {
        let store = store.clone();
        writers.push(tokio::spawn(async move {
            let mut revs = Vec::new();
            for i in 0..per_writer {
                let k = key("ns", &format!("w{wi}-{}", i % 5));
                let rev = match store.get(&k).await.unwrap() {
                    Some(cur) => store
                        .update(&k, pod("p", "web"), cur.mod_revision)
                        .await
                        .unwrap(),
                    None => store.create(&k, pod("p", "web")).await.unwrap(),
                };
                revs.push(rev);
            }
            revs
        }));
    }
    let mut committed = Vec::new();
    for h in writers {
        committed.extend(h.await.unwrap());
    }
    committed.sort_unstable();
    let mut seen = Vec::new();
    while seen.len() < committed.len() {
        seen.push(next_event(&mut w).await.1);
    }
    assert_eq!(seen, committed);
    assert!(tokio::time::timeout(Duration::from_millis(100), w.next())
        .await
        .is_err());
}

#[tokio::test]
async fn caches_added_at_run_time_follow_the_log_from_their_load() {
    const WIDGETS: &str = "/registry/example.com/widgets/";
    let store = Arc::new(MemStore::new());
    let set = start(&store, config()).await;
    assert!(set.cache(WIDGETS).is_none());
    store.create(&key("ns", "before"), pod("before", "web")).await.unwrap();
    let first = store.create(&format!("{WIDGETS}ns/a"), pod("a", "web")).await.unwrap();
    set.wait_for(first, WAIT).await.unwrap();

    let cache = set.add(WIDGETS).await.unwrap();
    assert!(Arc::ptr_eq(&cache, &set.add(WIDGETS).await.unwrap()), "adding twice keeps one cache");
    let (items, at) = cache.list(WIDGETS);
    assert_eq!(at, first);
    assert_eq!(items.len(), 1);
    // The follower saw every event of the resource before its cache existed: watches resume
    // from the newest of them on, older revisions are gone.
    assert!(cache.watch(WIDGETS, WatchStart::After(first), all()).is_ok());
    assert!(matches!(cache.watch(WIDGETS, WatchStart::After(first - 1), all()), Err(WatchError::TooOld { .. })));
    let mut w = cache.watch(WIDGETS, WatchStart::After(at), all()).unwrap();
    let second = store.create(&format!("{WIDGETS}ns/b"), pod("b", "web")).await.unwrap();
    store.create(&key("ns", "p"), pod("p", "web")).await.unwrap();
    assert_eq!(next_event(&mut w).await, (EventType::Added, second, "b".into(), second.to_string()));

    set.remove(WIDGETS).await;
    assert!(set.cache(WIDGETS).is_none());
    loop {
        match next(&mut w).await {
            None => break,
            Some(WatchItem::Bookmark(_)) => continue,
            other => panic!("a removed cache's watcher ends, got {other:?}"),
        }
    }
}

fn pod_on(name: &str, node: Option<&str>) -> Bytes {
    let mut pod = json!({"kind": "Pod", "metadata": {"name": name}, "spec": {}});
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    Bytes::from(pod.to_string())
}

fn on_node(wanted: &'static str) -> Filter {
    Arc::new(move |v: &Value| v["spec"]["nodeName"].as_str().unwrap_or_default() == wanted)
}

fn node_index(value: &str) -> Option<crate::WatchIndex> {
    Some(crate::WatchIndex { pointer: "/spec/nodeName", value: value.to_owned() })
}

/// Kubelet-like watchers filed under their node get exactly what an unindexed watcher with
/// the same filter gets: the pods of their node, including a pod moving in (ADDED) or out
/// (DELETED), and unscheduled pods under "".
#[tokio::test]
async fn indexed_watchers_see_what_their_filter_passes() {
    let store = Arc::new(MemStore::new());
    let set = start(&store, config()).await;
    let cache = set.cache(PODS).unwrap();
    let mut a = cache.watch_indexed(PODS, WatchStart::After(0), on_node("a"), node_index("a")).unwrap();
    let mut b = cache.watch_indexed(PODS, WatchStart::After(0), on_node("b"), node_index("b")).unwrap();
    let mut unscheduled = cache.watch_indexed(PODS, WatchStart::After(0), on_node(""), node_index("")).unwrap();
    let mut plain_a = cache.watch(PODS, WatchStart::After(0), on_node("a")).unwrap();
    let c = cache.watch_indexed(PODS, WatchStart::After(0), on_node("c"), node_index("c")).unwrap();
    assert_eq!(cache.watcher_count(), 5);

    let k = key("ns", "p");
    let r1 = store.create(&k, pod_on("p", None)).await.unwrap();
    let r2 = update(&store, &k, pod_on("p", Some("a"))).await;
    let r3 = update(&store, &k, pod_on("p", Some("a"))).await;
    let r4 = update(&store, &k, pod_on("p", Some("b"))).await;
    let (r5, _) = store.delete(&k, None).await.unwrap();
    let q = key("ns", "q");
    let r6 = store.create(&q, pod_on("q", Some("a"))).await.unwrap();

    use EventType::*;
    let expect_a = [(Added, r2), (Modified, r3), (Deleted, r4), (Added, r6)];
    for w in [&mut a, &mut plain_a] {
        for (kind, rev) in expect_a {
            let (k2, r, _, _) = next_event(w).await;
            assert_eq!((k2, r), (kind, rev));
        }
    }
    for (kind, rev) in [(Added, r4), (Deleted, r5)] {
        let (k2, r, _, _) = next_event(&mut b).await;
        assert_eq!((k2, r), (kind, rev));
    }
    for (kind, rev) in [(Added, r1), (Deleted, r2)] {
        let (k2, r, _, _) = next_event(&mut unscheduled).await;
        assert_eq!((k2, r), (kind, rev));
    }
    // Nothing more for b: q is on a.
    assert!(tokio::time::timeout(Duration::from_millis(200), b.next()).await.is_err(), "b got another event");
    drop(c);
    assert_eq!(cache.watcher_count(), 4);
}
