//! One watcher: its bounded queue, the cache-side registration and filter transitions.

use std::sync::{Arc, Mutex};

use kapi_storage::{EventKind, Revision};
use tokio::sync::mpsc;

use crate::cache::Shared;
use crate::event::{CachedEvent, EventType, Filter, TerminateReason, WatchItem};

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStart {
    /// Only changes after `rev` (rev=0 or "now": from the cache's current revision).
    After(Revision),
    /// Synthetic ADDED events for the current matching objects, then `InitialEventsEnd`, then live.
    InitialState,
}

/// State both sides of a watcher see: the reason the cache ended it, if it did.
#[derive(Debug, Default)]
pub(crate) struct Link {
    terminated: Mutex<Option<TerminateReason>>,
}

impl Link {
    fn set(&self, reason: TerminateReason) {
        let mut t = self.terminated.lock().unwrap_or_else(|e| e.into_inner());
        t.get_or_insert(reason);
    }

    fn take(&self) -> Option<TerminateReason> {
        self.terminated
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }
}

/// The cache's side of a watcher, kept in the cache's list under its lock.
pub(crate) struct Entry {
    pub(crate) id: u64,
    key_prefix: String,
    filter: Filter,
    tx: mpsc::Sender<WatchItem>,
    link: Arc<Link>,
}

impl Entry {
    pub(crate) fn new(
        id: u64,
        key_prefix: String,
        filter: Filter,
        tx: mpsc::Sender<WatchItem>,
        link: Arc<Link>,
    ) -> Self {
        Entry {
            id,
            key_prefix,
            filter,
            tx,
            link,
        }
    }

    /// What this watcher should see of `event`, if anything.
    pub(crate) fn item_for(&self, event: &Arc<CachedEvent>) -> Option<WatchItem> {
        item_for(&self.key_prefix, &self.filter, event)
    }

    /// Queues an item without waiting. Returns false when the entry must be dropped: the
    /// receiver is gone, or the queue is full and the watcher is cut off as too slow.
    pub(crate) fn offer(&self, item: WatchItem) -> bool {
        match self.tx.try_send(item) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.link.set(TerminateReason::TooSlow);
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    /// Queues a bookmark if there is room; a full queue already holds plenty for the client to
    /// make progress with, so the bookmark is dropped rather than the watcher.
    pub(crate) fn offer_bookmark(&self, revision: Revision) {
        let _ = self.tx.try_send(WatchItem::Bookmark(revision));
    }

    /// Ends the watcher with a reason it reports after draining its queue (dropping `self`
    /// closes the queue).
    pub(crate) fn terminate(self, reason: TerminateReason) {
        self.link.set(reason);
    }
}

/// What a watcher of `key_prefix` with `filter` should see of `event`, if anything.
pub(crate) fn item_for(
    key_prefix: &str,
    filter: &Filter,
    event: &Arc<CachedEvent>,
) -> Option<WatchItem> {
    if !event.key.starts_with(key_prefix) {
        return None;
    }
    transition(event, filter).map(|kind| WatchItem::Event {
        kind,
        event: event.clone(),
    })
}

/// Applies kube-apiserver's cacher rules: a change that moves an object into the filter is
/// ADDED, out of it DELETED, and changes outside the filter are not delivered.
pub(crate) fn transition(event: &CachedEvent, filter: &Filter) -> Option<EventType> {
    match event.kind {
        EventKind::Added => filter(&event.object).then_some(EventType::Added),
        EventKind::Modified => {
            let now = filter(&event.object);
            let before = event.prev_object.as_deref().is_some_and(|p| filter(p));
            match (before, now) {
                (true, true) => Some(EventType::Modified),
                (false, true) => Some(EventType::Added),
                (true, false) => Some(EventType::Deleted),
                (false, false) => None,
            }
        }
        EventKind::Deleted => {
            let before = match event.prev_object.as_deref() {
                Some(p) => filter(p),
                None => filter(&event.object),
            };
            before.then_some(EventType::Deleted)
        }
    }
}

/// Receives one watch's items in revision order.
pub struct Watcher {
    rx: mpsc::Receiver<WatchItem>,
    link: Arc<Link>,
    cache: Arc<Shared>,
    id: u64,
    last_delivered: Revision,
    in_initial: bool,
    done: bool,
}

impl Watcher {
    pub(crate) fn new(
        rx: mpsc::Receiver<WatchItem>,
        link: Arc<Link>,
        cache: Arc<Shared>,
        id: u64,
        start: Revision,
        in_initial: bool,
    ) -> Self {
        Watcher {
            rx,
            link,
            cache,
            id,
            last_delivered: start,
            in_initial,
            done: false,
        }
    }

    /// The next item; `None` once the watch has ended (shutdown, or after `Terminated`).
    pub async fn next(&mut self) -> Option<WatchItem> {
        if self.done {
            return None;
        }
        match self.rx.recv().await {
            Some(item) => {
                match &item {
                    WatchItem::Event { event, .. } if !self.in_initial => {
                        self.last_delivered = event.revision;
                    }
                    WatchItem::Bookmark(rev) => self.last_delivered = *rev,
                    WatchItem::InitialEventsEnd(rev) => {
                        self.last_delivered = *rev;
                        self.in_initial = false;
                    }
                    _ => {}
                }
                Some(item)
            }
            None => {
                self.done = true;
                let last_delivered = if self.in_initial {
                    0
                } else {
                    self.last_delivered
                };
                self.link.take().map(|reason| WatchItem::Terminated {
                    last_delivered,
                    reason,
                })
            }
        }
    }

    /// Asks for a Bookmark at the cache's current revision, queued behind every matching event
    /// up to it. Dropped when the queue is full or the watcher has ended.
    pub fn request_bookmark(&self) {
        self.cache.bookmark(self.id);
    }

    /// The last revision handed out by `next` (0 while inside an initial state).
    pub fn last_delivered(&self) -> Revision {
        if self.in_initial {
            0
        } else {
            self.last_delivered
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.cache.unregister(self.id);
    }
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("id", &self.id)
            .field("last_delivered", &self.last_delivered)
            .field("done", &self.done)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn ev(kind: EventKind, obj: Value, prev: Option<Value>) -> CachedEvent {
        CachedEvent::new(
            5,
            "/k".into(),
            kind,
            Arc::new(obj),
            prev.map(|p| (4, Arc::new(p))),
        )
    }

    #[test]
    fn transitions_follow_the_cacher() {
        let f: Filter = Arc::new(|v: &Value| v["app"] == "web");
        let web = json!({"app": "web"});
        let db = json!({"app": "db"});
        let t = |e: CachedEvent| transition(&e, &f);
        assert_eq!(
            t(ev(EventKind::Added, web.clone(), None)),
            Some(EventType::Added)
        );
        assert_eq!(t(ev(EventKind::Added, db.clone(), None)), None);
        assert_eq!(
            t(ev(EventKind::Modified, web.clone(), Some(web.clone()))),
            Some(EventType::Modified)
        );
        assert_eq!(
            t(ev(EventKind::Modified, web.clone(), Some(db.clone()))),
            Some(EventType::Added)
        );
        assert_eq!(
            t(ev(EventKind::Modified, db.clone(), Some(web.clone()))),
            Some(EventType::Deleted)
        );
        assert_eq!(
            t(ev(EventKind::Modified, db.clone(), Some(db.clone()))),
            None
        );
        assert_eq!(
            t(ev(EventKind::Deleted, web.clone(), Some(web))),
            Some(EventType::Deleted)
        );
        assert_eq!(t(ev(EventKind::Deleted, db.clone(), Some(db))), None);
    }
}
