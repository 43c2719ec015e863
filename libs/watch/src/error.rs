//! Errors of the watch cache, each one mapping to one API answer.

use kapi_storage::{Revision, StorageError};

/// Failures the server turns into Status errors.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The requested revision fell out of the resource's event window: 410 Expired
    /// `too old resource version: <requested> (<oldest>)`.
    #[error("too old resource version: {requested} ({oldest})")]
    TooOld {
        /// Revision the client asked to start after.
        requested: Revision,
        /// Oldest revision a watch can still start after.
        oldest: Revision,
    },
    /// The requested revision is newer than what the cache has applied; the server waits with
    /// [`crate::CacheSet::wait_for`] first and answers 504 "Too large resource version" if that
    /// times out.
    #[error("too large resource version: {requested}, current resource version: {current}")]
    FutureRevision {
        /// Revision asked for.
        requested: Revision,
        /// Revision the cache has applied.
        current: Revision,
    },
    /// The cache did not reach the requested revision in time.
    #[error("timed out waiting for the watch cache to reach the requested revision")]
    Timeout,
    /// The cache set was shut down.
    #[error("the watch cache is shutting down")]
    ShuttingDown,
    /// The store failed while loading.
    #[error(transparent)]
    Storage(#[from] StorageError),
}
