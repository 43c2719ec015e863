//! Idle HTTP/2 connections. kube closes a connection that has had no stream open for 90 s
//! (`http2.Server.IdleTimeout`); hyper has no such limit for HTTP/2 (its HTTP/1.1 timer covers
//! that protocol), so each HTTP/2 connection counts its requests in progress, an answer still
//! being sent included, and is told GOAWAY once it has had none for the idle time.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Requests in progress on one connection and when the last one ended.
pub(super) struct Activity {
    opened: Instant,
    in_progress: AtomicUsize,
    /// Milliseconds from `opened` to the end of the last request (0: none yet).
    last_end_ms: AtomicU64,
}

/// One request in progress; it ends when this is dropped (after its answer has been sent).
pub(super) struct InProgress(Arc<Activity>);

impl Activity {
    pub(super) fn new() -> Arc<Activity> {
        Arc::new(Activity { opened: Instant::now(), in_progress: AtomicUsize::new(0), last_end_ms: AtomicU64::new(0) })
    }

    pub(super) fn begin(self: &Arc<Self>) -> InProgress {
        self.in_progress.fetch_add(1, Ordering::SeqCst);
        InProgress(self.clone())
    }

    /// How long the connection has had no request in progress; None while one is.
    pub(super) fn idle_for(&self) -> Option<Duration> {
        if self.in_progress.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let since = Duration::from_millis(self.last_end_ms.load(Ordering::SeqCst));
        Some(self.opened.elapsed().saturating_sub(since))
    }

    /// Resolves once the connection has had no request in progress for `timeout`; it looks
    /// every quarter of `timeout`, so it resolves within 1.25 x `timeout` of the last end.
    pub(super) async fn until_idle_for(&self, timeout: Duration) {
        let mut every = tokio::time::interval((timeout / 4).max(Duration::from_millis(100)));
        loop {
            every.tick().await;
            if self.idle_for().is_some_and(|idle| idle >= timeout) {
                return;
            }
        }
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        let ended = u64::try_from(self.0.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.0.last_end_ms.store(ended, Ordering::SeqCst);
        self.0.in_progress.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_only_without_requests_in_progress() {
        let activity = Activity::new();
        assert!(activity.idle_for().is_some(), "a new connection is idle");
        let first = activity.begin();
        let second = activity.begin();
        assert_eq!(activity.idle_for(), None);
        drop(first);
        assert_eq!(activity.idle_for(), None, "one request is still in progress");
        drop(second);
        let idle = activity.idle_for().expect("idle again");
        assert!(idle < Duration::from_secs(5), "idle time counts from the last end: {idle:?}");
    }
}
