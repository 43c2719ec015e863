//! The availability controllers' work queue: APIService names to check, each once however
//! often it was added (kube's work queue), bounded by the number of APIServices.

use std::collections::BTreeSet;
use std::sync::Mutex;

use tokio::sync::Notify;

/// Names waiting for a check.
#[derive(Default)]
pub(crate) struct CheckQueue {
    pending: Mutex<BTreeSet<String>>,
    wake: Notify,
}

impl CheckQueue {
    /// Queues `name`.
    pub(crate) fn add(&self, name: &str) {
        let added = self.pending.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_owned());
        if added {
            self.wake.notify_one();
        }
    }

    /// The next name, waiting for one.
    pub(crate) async fn next(&self) -> String {
        loop {
            let notified = self.wake.notified();
            if let Some(name) = self.pending.lock().unwrap_or_else(|p| p.into_inner()).pop_first() {
                return name;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn names_come_once_in_order_and_a_waiter_wakes_for_a_new_one() {
        let queue = std::sync::Arc::new(CheckQueue::default());
        queue.add("b");
        queue.add("a");
        queue.add("b");
        assert_eq!(queue.next().await, "a");
        assert_eq!(queue.next().await, "b");
        let waiter = tokio::spawn({
            let queue = queue.clone();
            async move { queue.next().await }
        });
        tokio::task::yield_now().await;
        queue.add("c");
        assert_eq!(waiter.await.unwrap(), "c");
    }
}
