//! A one-way latch, as kube-apiserver's lifecycle signals: once signaled it stays signaled, and
//! any number of tasks can wait for it or ask whether it fired.

use tokio::sync::watch;

/// One named lifecycle event (kube's `lifecycleSignal`).
#[derive(Debug)]
pub struct Signal {
    name: &'static str,
    fired: watch::Sender<bool>,
}

impl Signal {
    /// A signal that has not fired.
    pub fn new(name: &'static str) -> Self {
        Self { name, fired: watch::Sender::new(false) }
    }

    /// kube's name of the event, for logs.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Fires the signal (again is a no-op).
    pub fn signal(&self) {
        if !self.fired.send_replace(true) {
            tracing::info!(name = self.name, "lifecycle signal");
        }
    }

    /// Whether the signal fired.
    pub fn is_signaled(&self) -> bool {
        *self.fired.borrow()
    }

    /// Resolves once the signal has fired.
    pub async fn signaled(&self) {
        let mut rx = self.fired.subscribe();
        // The sender lives as long as `self`, so the wait cannot fail.
        let _ = rx.wait_for(|fired| *fired).await;
    }

    /// A receiver that sees the signal fire (for `select!` loops that outlive a borrow).
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.fired.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::Signal;

    #[tokio::test]
    async fn fires_once_and_wakes_waiters() {
        let s = std::sync::Arc::new(Signal::new("Test"));
        assert!(!s.is_signaled());
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.signaled().await }
        });
        s.signal();
        s.signal();
        waiter.await.unwrap();
        assert!(s.is_signaled());
        s.signaled().await;
    }
}
