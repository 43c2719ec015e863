//! The change log on etcd: one watch over the store's whole key range, from the revision the
//! log has reached, with previous values (`prev_kv`), feeding a bounded in-memory window.
//!
//! The window holds every event of the store in `(start, end]`, in revision order. `read_log`
//! serves from it; positions before `start` (a reader further behind than the window, or a
//! process that just opened the store) are read from etcd's own history by a short watch from
//! that position (`history.rs`). When etcd compacts past the follower (it was disconnected for
//! longer than the compaction interval), the window restarts after the compacted revision and
//! older positions answer `Compacted`, as on every backend.
//!
//! The follower reconnects after any failure (member down, leader lost, stream reset) from
//! `end + 1`, so no event is delivered twice or skipped across reconnects.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use etcd_client::{EventType, WatchClient, WatchOptions};
use tokio::sync::watch;

use super::keys::KeySpace;
use crate::{Event, EventKind, Revision};

/// Bounds of the in-memory window.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WindowLimits {
    pub(crate) events: usize,
    pub(crate) bytes: usize,
}

/// Events in `(start, end]`, every one of them.
#[derive(Debug)]
struct Window {
    events: VecDeque<Event>,
    bytes: usize,
    start: Revision,
    end: Revision,
    limits: WindowLimits,
}

impl Window {
    fn push(&mut self, event: Event) {
        if event.revision < self.end {
            return;
        }
        self.end = event.revision;
        self.bytes += event.value.len() + event.key.len();
        self.events.push_back(event);
        while self.events.len() > self.limits.events.max(1) || (self.bytes > self.limits.bytes && self.events.len() > 1) {
            let Some(dropped) = self.events.pop_front() else { break };
            self.bytes -= dropped.value.len() + dropped.key.len();
            self.start = dropped.revision;
        }
    }

    /// Events after `after`, or None when `after` is before the window.
    fn after(&self, after: Revision, limit: usize) -> Option<Vec<Event>> {
        if after < self.start {
            return None;
        }
        let first = self.events.partition_point(|e| e.revision <= after);
        Some(self.events.range(first..).take(limit).cloned().collect())
    }
}

/// The window plus the follower's progress, shared by the store and its follower task.
#[derive(Debug)]
pub(crate) struct ChangeLog {
    window: Mutex<Window>,
    /// The window's `end`: readers wait on it for the follower to reach their own writes.
    end: watch::Sender<Revision>,
}

impl ChangeLog {
    /// An empty window that starts after `at` (the store's current revision when it opened).
    pub(crate) fn new(at: Revision, limits: WindowLimits) -> Self {
        let window = Window { events: VecDeque::new(), bytes: 0, start: at, end: at, limits };
        Self { window: Mutex::new(window), end: watch::channel(at).0 }
    }

    fn lock(&self) -> MutexGuard<'_, Window> {
        // A panic while holding the lock leaves a consistent window (pushes are whole).
        self.window.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn start(&self) -> Revision {
        self.lock().start
    }

    pub(crate) fn end(&self) -> Revision {
        self.lock().end
    }

    pub(crate) fn after(&self, after: Revision, limit: usize) -> Option<Vec<Event>> {
        self.lock().after(after, limit)
    }

    /// Waits until every event up to `target` is in the window; false on timeout.
    pub(crate) async fn reach(&self, target: Revision, timeout: Duration) -> bool {
        let mut end = self.end.subscribe();
        let reached = matches!(tokio::time::timeout(timeout, end.wait_for(|end| *end >= target)).await, Ok(Ok(_)));
        reached
    }

    fn append(&self, events: Vec<Event>) -> Revision {
        let mut window = self.lock();
        for event in events {
            window.push(event);
        }
        let end = window.end;
        drop(window);
        self.end.send_if_modified(|seen| std::mem::replace(seen, end) != end);
        end
    }

    /// etcd compacted past the follower: nothing up to `compacted` can be replayed any more.
    fn restart_after(&self, compacted: Revision) {
        let mut window = self.lock();
        if compacted <= window.end {
            return;
        }
        window.events.clear();
        window.bytes = 0;
        window.start = compacted;
        window.end = compacted;
        drop(window);
        self.end.send_replace(compacted);
    }
}

/// Converts one etcd event of the store's range; None for keys outside the store.
pub(crate) fn convert(keys: &KeySpace, event: &etcd_client::Event) -> Option<Event> {
    let kv = event.kv()?;
    let key = keys.to_store(kv.key())?;
    let revision = u64::try_from(kv.mod_revision()).ok()?;
    let prev = event.prev_kv();
    let prev_revision = prev.and_then(|p| u64::try_from(p.mod_revision()).ok()).unwrap_or(0);
    Some(match event.event_type() {
        EventType::Put if kv.create_revision() == kv.mod_revision() => {
            Event { revision, key, kind: EventKind::Added, value: kv.value().to_vec().into(), prev_revision: 0 }
        }
        EventType::Put => Event { revision, key, kind: EventKind::Modified, value: kv.value().to_vec().into(), prev_revision },
        EventType::Delete => {
            Event { revision, key, kind: EventKind::Deleted, value: prev.map(|p| p.value().to_vec().into()).unwrap_or_default(), prev_revision }
        }
    })
}

/// Everything the follower task needs.
pub(crate) struct Follower {
    pub(crate) log: Arc<ChangeLog>,
    pub(crate) watch: WatchClient,
    pub(crate) keys: KeySpace,
    pub(crate) compacted: Arc<AtomicU64>,
    pub(crate) commits: watch::Sender<Revision>,
}

const BACKOFF_FIRST: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

impl Follower {
    /// Runs until the store is dropped (the task is aborted then).
    pub(crate) async fn run(self) {
        let mut backoff = BACKOFF_FIRST;
        loop {
            match self.watch_once(&mut backoff).await {
                Ok(()) => tracing::debug!("etcd change-log watch ended; re-watching"),
                Err(e) => tracing::warn!(error = %e, "etcd change-log watch failed; re-watching"),
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// One watch stream, from the window's end, until it fails or etcd cancels it.
    async fn watch_once(&self, backoff: &mut Duration) -> Result<(), etcd_client::Error> {
        let from = self.log.end() + 1;
        let (start, end) = self.keys.whole();
        let options = WatchOptions::new().with_range(end).with_start_revision(i64::try_from(from).unwrap_or(i64::MAX)).with_prev_key();
        let mut stream = self.watch.clone().watch(start, Some(options)).await?;
        while let Some(response) = stream.message().await? {
            if response.compact_revision() > 0 {
                let compacted = u64::try_from(response.compact_revision()).unwrap_or(0);
                tracing::warn!(from, compacted, "etcd compacted past the change-log watch; events before it are gone");
                self.compacted.fetch_max(compacted, Ordering::SeqCst);
                self.log.restart_after(compacted);
                self.announce(compacted);
                return Ok(());
            }
            if response.canceled() {
                tracing::warn!(reason = response.cancel_reason(), "etcd canceled the change-log watch");
                return Ok(());
            }
            *backoff = BACKOFF_FIRST;
            if response.events().is_empty() {
                continue;
            }
            let events: Vec<Event> = response.events().iter().filter_map(|e| convert(&self.keys, e)).collect();
            let end = self.log.append(events);
            self.announce(end);
        }
        Ok(())
    }

    fn announce(&self, revision: Revision) {
        self.commits.send_if_modified(|seen| {
            let newer = revision > *seen;
            if newer {
                *seen = revision;
            }
            newer
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(revision: Revision, size: usize) -> Event {
        Event { revision, key: format!("/k/{revision}"), kind: EventKind::Added, value: vec![0; size].into(), prev_revision: 0 }
    }

    #[test]
    fn window_keeps_a_contiguous_tail() {
        let log = ChangeLog::new(10, WindowLimits { events: 3, bytes: usize::MAX });
        assert_eq!(log.after(10, 10), Some(vec![]));
        assert_eq!(log.after(9, 10), None);
        log.append(vec![event(12, 1), event(15, 1), event(16, 1)]);
        assert_eq!(log.after(12, 10).unwrap().iter().map(|e| e.revision).collect::<Vec<_>>(), [15, 16]);
        log.append(vec![event(20, 1)]);
        // 12 was dropped: the window now covers (12, 20].
        assert_eq!(log.start(), 12);
        assert_eq!(log.after(11, 10), None);
        assert_eq!(log.after(12, 2).unwrap().iter().map(|e| e.revision).collect::<Vec<_>>(), [15, 16]);
        assert_eq!(log.end(), 20);
    }

    #[test]
    fn window_is_bounded_in_bytes_but_keeps_the_newest() {
        let log = ChangeLog::new(0, WindowLimits { events: 100, bytes: 100 });
        log.append(vec![event(1, 60), event(2, 60)]);
        assert_eq!(log.start(), 1);
        log.append(vec![event(3, 500)]);
        assert_eq!((log.start(), log.end()), (2, 3));
        assert_eq!(log.after(2, 10).unwrap().len(), 1);
    }

    #[test]
    fn compaction_restarts_the_window() {
        let log = ChangeLog::new(0, WindowLimits { events: 100, bytes: usize::MAX });
        log.append(vec![event(1, 1)]);
        log.restart_after(7);
        assert_eq!((log.start(), log.end()), (7, 7));
        assert_eq!(log.after(6, 10), None);
        log.restart_after(3);
        assert_eq!(log.end(), 7);
    }
}
