//! Tuning of the caches.

use std::time::Duration;

/// Sizes and pacing of the caches of one store.
#[derive(Debug, Clone)]
pub struct CacheConfig {
    /// Events kept per resource: how far back a watch can resume without a relist.
    pub window: usize,
    /// Per-watcher queue length; a watcher whose queue is full is cut off rather than allowed
    /// to stall the follower and everyone else.
    pub watcher_buffer: usize,
    /// Log events read per `read_log` call.
    pub log_batch: usize,
    /// Keys per page when loading a snapshot.
    pub load_page: usize,
    /// Pause before retrying after a store failure.
    pub retry_backoff: Duration,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            window: 4096,
            watcher_buffer: 1024,
            log_batch: 1000,
            load_page: 5000,
            retry_backoff: Duration::from_millis(500),
        }
    }
}
