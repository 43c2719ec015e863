//! Watch caches: one log follower per store feeds one cache per resource, which serves
//! watches, cached lists and consistent reads, and fans events out to watchers in process.
//! Across replicas, [`NatsFanout`] wakes each replica's follower when another one commits.
//!
//! Guarantees, per watcher: events in revision order, each exactly once, no gap between
//! history (replay or initial state) and live events. A watcher that falls behind is cut off
//! (`Terminated { reason: TooSlow }`) instead of stalling the follower; when the store's log is
//! compacted past the follower, the caches reload and every watcher ends with `Expired` so its
//! client relists (410 Gone).
//!
//! Stored values carry no trustworthy `metadata.resourceVersion`; the cache stamps the revision
//! of each write (for deletions, the deletion revision) as a decimal string.
#![warn(missing_docs)]

mod cache;
mod config;
mod consistent;
mod error;
mod event;
mod fanout;
mod index;
mod set;
#[cfg(test)]
mod testing;
mod watcher;

pub use cache::ResourceCache;
pub use config::CacheConfig;
pub use consistent::RevisionReads;
pub use error::WatchError;
pub use event::{
    CachedEvent, CachedObject, EventType, Filter, MediaSlot, TerminateReason, WatchItem,
};
pub use fanout::{FanoutError, FanoutStats, NatsConfig, NatsFanout};
pub use index::WatchIndex;
pub use kapi_storage::Revision;
pub use set::{CacheSet, FollowerLag};
pub use watcher::{WatchStart, Watcher};
