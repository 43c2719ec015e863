//! One resource's cache: current objects, a window of recent events and its watchers, all
//! under one lock so that registering a watcher and replaying its history cannot race the
//! follower.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use kapi_storage::{EventKind, Revision};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::config::CacheConfig;
use crate::error::WatchError;
use crate::index::{WatchIndex, Watchers};
use crate::event::{
    CachedEvent, CachedObject, EncodingCells, EventType, Filter, TerminateReason, WatchItem,
};
use crate::watcher::{item_for, Entry, Link, WatchStart, Watcher};

/// Current version of one key: the object and its encodings, without the previous version so
/// that a quiet object does not keep its predecessor alive.
struct Current {
    revision: Revision,
    object: Arc<Value>,
    cells: Arc<EncodingCells>,
}

struct State {
    objects: BTreeMap<String, Current>,
    window: VecDeque<Arc<CachedEvent>>,
    /// Oldest revision a watch may start after: every later event of this resource is in
    /// `window`.
    window_start: Revision,
    revision: Revision,
    watchers: Watchers,
    closed: bool,
}

/// The lock-protected part, shared with watchers so they can ask for bookmarks and
/// unregister on drop.
pub(crate) struct Shared {
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn bookmark(&self, id: u64) {
        let st = self.lock();
        if let Some(entry) = st.watchers.find(id) {
            entry.offer_bookmark(st.revision);
        }
    }

    pub(crate) fn unregister(&self, id: u64) {
        self.lock().watchers.remove(id);
    }
}

/// The watch cache of one resource (one key prefix).
pub struct ResourceCache {
    prefix: String,
    window: usize,
    watcher_buffer: usize,
    next_id: AtomicU64,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ResourceCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceCache")
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl ResourceCache {
    pub(crate) fn new(prefix: String, config: &CacheConfig) -> Self {
        ResourceCache {
            prefix,
            window: config.window,
            watcher_buffer: config.watcher_buffer.max(1),
            next_id: AtomicU64::new(1),
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    objects: BTreeMap::new(),
                    window: VecDeque::new(),
                    window_start: 0,
                    revision: 0,
                    watchers: Watchers::default(),
                    closed: false,
                }),
            }),
        }
    }

    /// The key prefix this cache holds.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Current objects whose key starts with `key_prefix` (namespace narrowing), in key order,
    /// plus the revision they are consistent at.
    pub fn list(&self, key_prefix: &str) -> (Vec<CachedObject>, Revision) {
        let st = self.shared.lock();
        let items = st
            .objects
            .range::<str, _>((
                std::ops::Bound::Included(key_prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(key_prefix))
            .map(|(k, c)| CachedObject {
                key: k.clone(),
                revision: c.revision,
                object: c.object.clone(),
            })
            .collect();
        (items, st.revision)
    }

    /// The current version of one key.
    pub fn get(&self, key: &str) -> Option<CachedObject> {
        let st = self.shared.lock();
        st.objects.get(key).map(|c| CachedObject {
            key: key.to_owned(),
            revision: c.revision,
            object: c.object.clone(),
        })
    }

    /// Objects under `key_prefix` as they were at `revision` (exact-revision lists), rebuilt
    /// by undoing the window's later events; `revision` 0 means now.
    pub fn list_at(
        &self,
        key_prefix: &str,
        revision: Revision,
    ) -> Result<(Vec<CachedObject>, Revision), WatchError> {
        let st = self.shared.lock();
        if revision == 0 || revision == st.revision {
            drop(st);
            return Ok(self.list(key_prefix));
        }
        if revision > st.revision {
            return Err(WatchError::FutureRevision {
                requested: revision,
                current: st.revision,
            });
        }
        if revision < st.window_start {
            return Err(WatchError::TooOld {
                requested: revision,
                oldest: st.window_start,
            });
        }
        let mut view: BTreeMap<&str, (Revision, &Arc<Value>)> = st
            .objects
            .range::<str, _>((
                std::ops::Bound::Included(key_prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(key_prefix))
            .map(|(k, c)| (k.as_str(), (c.revision, &c.object)))
            .collect();
        let from = st.window.partition_point(|e| e.revision <= revision);
        for event in st
            .window
            .range(from..)
            .rev()
            .filter(|e| e.key.starts_with(key_prefix))
        {
            match &event.prev_object {
                Some(prev) if event.kind != EventKind::Added => {
                    view.insert(event.key.as_str(), (event.prev_revision, prev));
                }
                _ => {
                    view.remove(event.key.as_str());
                }
            }
        }
        let items = view
            .into_iter()
            .map(|(k, (rev, o))| CachedObject {
                key: k.to_owned(),
                revision: rev,
                object: o.clone(),
            })
            .collect();
        Ok((items, revision))
    }

    /// Revision the cache's content is consistent at.
    pub fn revision(&self) -> Revision {
        self.shared.lock().revision
    }

    /// Oldest revision a watch can start after.
    pub fn oldest_revision(&self) -> Revision {
        self.shared.lock().window_start
    }

    /// Number of objects held (for metrics).
    pub fn len(&self) -> usize {
        self.shared.lock().objects.len()
    }

    /// Whether the cache holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of registered watchers (for metrics).
    pub fn watcher_count(&self) -> usize {
        self.shared.lock().watchers.len()
    }

    /// Starts a watch on keys under `key_prefix` whose objects pass `filter`.
    ///
    /// History (replay or initial state) is taken under the lock that registers the watcher,
    /// so nothing is missed or repeated between it and live events.
    pub fn watch(
        &self,
        key_prefix: &str,
        start: WatchStart,
        filter: Filter,
    ) -> Result<Watcher, WatchError> {
        self.watch_indexed(key_prefix, start, filter, None)
    }

    /// [`ResourceCache::watch`] for a watcher whose filter only passes objects with `index`'s
    /// field at its value (before or after a change): it is offered only those objects' events
    /// instead of every event, which is what lets one replica serve a kubelet per node.
    pub fn watch_indexed(
        &self,
        key_prefix: &str,
        start: WatchStart,
        filter: Filter,
        index: Option<WatchIndex>,
    ) -> Result<Watcher, WatchError> {
        let mut st = self.shared.lock();
        if st.closed {
            return Err(WatchError::ShuttingDown);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let link = Arc::new(Link::default());

        let mut history = Vec::new();
        let (start_rev, in_initial) = match start {
            WatchStart::After(0) => (st.revision, false),
            WatchStart::After(rev) => {
                if rev > st.revision {
                    return Err(WatchError::FutureRevision {
                        requested: rev,
                        current: st.revision,
                    });
                }
                if rev < st.window_start {
                    return Err(WatchError::TooOld {
                        requested: rev,
                        oldest: st.window_start,
                    });
                }
                let from = st.window.partition_point(|e| e.revision <= rev);
                history.extend(
                    st.window
                        .range(from..)
                        .filter_map(|e| item_for(key_prefix, &filter, e)),
                );
                (rev, false)
            }
            WatchStart::InitialState => {
                let range = st
                    .objects
                    .range::<str, _>((
                        std::ops::Bound::Included(key_prefix),
                        std::ops::Bound::Unbounded,
                    ))
                    .take_while(|(k, _)| k.starts_with(key_prefix));
                for (key, cur) in range {
                    if filter(&cur.object) {
                        let event = CachedEvent::with_cells(
                            cur.revision,
                            key.clone(),
                            EventKind::Added,
                            cur.object.clone(),
                            cur.cells.clone(),
                        );
                        history.push(WatchItem::Event {
                            kind: EventType::Added,
                            event: Arc::new(event),
                        });
                    }
                }
                history.push(WatchItem::InitialEventsEnd(st.revision));
                (0, true)
            }
        };

        // Room for the whole history plus the live buffer, so history never cuts the watcher.
        let (tx, rx) = mpsc::channel(self.watcher_buffer + history.len());
        let entry = Entry::new(id, key_prefix.to_owned(), filter, tx, link.clone());
        for item in history {
            if !entry.offer(item) {
                tracing::error!(prefix = %self.prefix, "watch history did not fit its queue");
                return Err(WatchError::ShuttingDown);
            }
        }
        st.watchers.push(entry, index);
        drop(st);
        Ok(Watcher::new(
            rx,
            link,
            self.shared.clone(),
            id,
            start_rev,
            in_initial,
        ))
    }

    /// Applies one log event. `object` is the decoded value with `resourceVersion` stamped;
    /// `None` when it could not be decoded (then a deletion still removes the key, using the
    /// last cached version).
    pub(crate) fn apply(
        &self,
        revision: Revision,
        key: String,
        kind: EventKind,
        object: Option<Value>,
    ) {
        let mut st = self.shared.lock();
        if revision <= st.revision {
            // Already part of a snapshot this cache was (re)loaded from.
            return;
        }
        st.revision = revision;
        let prev = match kind {
            EventKind::Deleted => st.objects.remove(&key),
            EventKind::Added | EventKind::Modified => st.objects.get(&key).map(|c| Current {
                revision: c.revision,
                object: c.object.clone(),
                cells: c.cells.clone(),
            }),
        };
        let object = match (object, &prev, kind) {
            (Some(o), _, _) => Arc::new(o),
            (None, Some(p), EventKind::Deleted) => {
                let mut o = (*p.object).clone();
                if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.insert(
                        "resourceVersion".into(),
                        Value::String(revision.to_string()),
                    );
                }
                Arc::new(o)
            }
            (None, _, _) => return,
        };
        let event = Arc::new(CachedEvent::new(
            revision,
            key.clone(),
            kind,
            object.clone(),
            prev.map(|p| (p.revision, p.object)),
        ));
        if kind != EventKind::Deleted {
            st.objects.insert(
                key,
                Current {
                    revision,
                    object,
                    cells: event.cells.clone(),
                },
            );
        }
        st.window.push_back(event.clone());
        while st.window.len() > self.window {
            match st.window.pop_front() {
                Some(old) => st.window_start = old.revision,
                None => break,
            }
        }
        if self.window == 0 {
            st.window_start = revision;
        }
        st.watchers.dispatch(&event);
    }

    /// Records that the follower has applied the log up to `revision` even if this resource
    /// saw no event, so bookmarks and lists report progress.
    pub(crate) fn advance(&self, revision: Revision) {
        let mut st = self.shared.lock();
        if revision > st.revision {
            st.revision = revision;
        }
    }

    /// Replaces the content with a snapshot at `revision`; watchers can no longer be served
    /// without a gap, so each ends with `Expired`.
    pub(crate) fn reset(&self, items: Vec<(String, Revision, Value)>, revision: Revision) {
        self.reset_from(items, revision, revision);
    }

    /// [`ResourceCache::reset`] for a snapshot known to hold every change of this resource
    /// after `window_start` (no event of it in `(window_start, revision]`): watches may resume
    /// from any revision from `window_start` on.
    pub(crate) fn reset_from(&self, items: Vec<(String, Revision, Value)>, revision: Revision, window_start: Revision) {
        let objects = items
            .into_iter()
            .map(|(k, rev, o)| {
                (
                    k,
                    Current {
                        revision: rev,
                        object: Arc::new(o),
                        cells: Arc::default(),
                    },
                )
            })
            .collect();
        let mut st = self.shared.lock();
        st.objects = objects;
        st.window.clear();
        st.window_start = window_start.min(revision);
        st.revision = revision;
        for w in st.watchers.take() {
            w.terminate(TerminateReason::Expired);
        }
    }

    /// Ends every watcher without a reason (they see `None` after draining) and refuses new ones.
    pub(crate) fn close(&self) {
        let mut st = self.shared.lock();
        st.closed = true;
        st.watchers.take();
    }
}
