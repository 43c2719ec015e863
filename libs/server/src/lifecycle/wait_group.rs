//! kube's `SafeWaitGroup`: counts requests in flight so shutdown can wait for them, and refuses
//! new ones once the wait has begun (the caller then answers 503 or 429 instead of serving).

use std::sync::Arc;

use tokio::sync::watch;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct State {
    in_flight: usize,
    closed: bool,
}

/// Requests in flight of one kind (non-long-running, or watches).
#[derive(Debug, Clone, Default)]
pub struct RequestWaitGroup {
    state: Arc<watch::Sender<State>>,
}

/// Held while one request runs; dropping it marks the request done.
#[derive(Debug)]
#[must_use = "the request counts as in flight only while the guard lives"]
pub struct InFlight {
    state: Arc<watch::Sender<State>>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.state.send_modify(|s| s.in_flight -= 1);
    }
}

impl RequestWaitGroup {
    /// An open, empty group.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one more request, or `None` once [`RequestWaitGroup::wait`] has begun.
    pub fn add(&self) -> Option<InFlight> {
        let added = self.state.send_if_modified(|s| {
            if s.closed {
                return false;
            }
            s.in_flight += 1;
            true
        });
        added.then(|| InFlight { state: self.state.clone() })
    }

    /// Requests counted now.
    pub fn len(&self) -> usize {
        self.state.borrow().in_flight
    }

    /// Whether no request is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Refuses new requests from now on and resolves when the last one in flight is done.
    pub async fn wait(&self) {
        self.state.send_modify(|s| s.closed = true);
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|s| s.in_flight == 0).await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::RequestWaitGroup;

    #[tokio::test]
    async fn wait_refuses_new_requests_and_waits_for_running_ones() {
        let group = RequestWaitGroup::new();
        let running = group.add().expect("open group");
        assert_eq!(group.len(), 1);
        let waiting = tokio::spawn({
            let group = group.clone();
            async move { group.wait().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(group.add().is_none(), "no new request once the wait began");
        assert!(!waiting.is_finished());
        drop(running);
        tokio::time::timeout(Duration::from_secs(1), waiting).await.expect("wait ends").unwrap();
        assert!(group.is_empty());
    }
}
