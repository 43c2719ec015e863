//! The storage seam of kapi: an ordered key-value space with conditional writes and a
//! commit-ordered change log, as `../shared/DESIGN.md` ("Storage") lays out.
//!
//! This crate doc is the design guide for backends:
//!
//! - Keys are `/registry/<group>/<resource>/<namespace>/<name>` strings; lists scan a prefix
//!   in key order.
//! - Every committed write gets a [`Revision`] strictly greater than every earlier commit, across
//!   the whole store and every process sharing it. An object's `metadata.resourceVersion` is the
//!   revision of its last write.
//! - Writes are conditional (create if absent; update/delete if the revision still matches):
//!   the API turns a failed condition into `409 Conflict`.
//! - Each write appends one [`Event`] to the change log in the same transaction. Reading the log
//!   after revision R yields every later event in order, with no gaps, or
//!   [`StorageError::Compacted`].
//! - A list reads one snapshot; pages of one list name the same snapshot revision.
//! - Compaction forgets log entries and snapshots older than the compacted revision; asking for
//!   them is [`StorageError::Compacted`], which the API maps to `410 Gone`.
//!
//! Values are opaque bytes: the API layer stores JSON and sets `resourceVersion` itself from the
//! returned revision, so a backend never parses objects.
#![warn(missing_docs)]
// The workspace forbids unsafe code; only the FoundationDB network boot needs an exception.
#![cfg_attr(not(feature = "fdb"), forbid(unsafe_code))]

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

pub mod sqlite;

#[cfg(feature = "etcd")]
pub mod etcd;

#[cfg(feature = "fdb")]
pub mod fdb;

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;

/// A store-wide, commit-ordered write counter. Fits a `uint64` as some clients parse it so.
pub type Revision = u64;

/// Backend failures that the API maps to Status errors.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// Create of a key that exists.
    #[error("key {0} already exists")]
    AlreadyExists(String),
    /// Update or delete of a key that does not exist.
    #[error("key {0} not found")]
    NotFound(String),
    /// The expected revision no longer matches; carries the current value so that callers can
    /// report or retry without another read.
    #[error("key {key} changed: expected revision {expected}, current {current}")]
    Conflict {
        /// The key written.
        key: String,
        /// Revision the caller expected.
        expected: Revision,
        /// Revision found.
        current: Revision,
    },
    /// The requested revision is older than the compaction horizon.
    #[error("revision {requested} is compacted (oldest available {compacted})")]
    Compacted {
        /// Revision asked for.
        requested: Revision,
        /// The compaction horizon: the oldest revision still readable.
        compacted: Revision,
    },
    /// The requested revision is newer than anything committed.
    #[error("revision {requested} is in the future (current {current})")]
    FutureRevision {
        /// Revision asked for.
        requested: Revision,
        /// Current store revision.
        current: Revision,
    },
    /// The backend failed (IO, corruption, lost connection).
    #[error("storage backend: {0}")]
    Backend(String),
}

/// Result alias for storage calls.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// One stored object version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// Full key.
    pub key: String,
    /// Opaque value bytes.
    pub value: Bytes,
    /// Revision of the last write of this key.
    pub mod_revision: Revision,
    /// Revision at which this incarnation of the key was created.
    pub create_revision: Revision,
    /// The value was read through an encryption key or provider other than the one that
    /// writes now (kube's "stale" transform): an update must be written even when it changes
    /// nothing, so that rewriting objects re-encrypts them (key rotation). Backends answer
    /// false; the encrypting store sets it.
    pub stale: bool,
}

/// What a change-log entry did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The key was created.
    Added,
    /// The key was updated.
    Modified,
    /// The key was deleted.
    Deleted,
}

/// One change-log entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Revision of this write.
    pub revision: Revision,
    /// Key written.
    pub key: String,
    /// What happened.
    pub kind: EventKind,
    /// The value after the write; for `Deleted`, the last value before deletion.
    pub value: Bytes,
    /// Revision of the previous version of the key (0 for `Added`).
    pub prev_revision: Revision,
}

/// Parameters of a snapshot list.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// Start strictly after this key (pagination); `None` starts at the prefix.
    pub start_after: Option<String>,
    /// At most this many items; `None` for all.
    pub limit: Option<usize>,
    /// Read the snapshot at this revision; `None` for the current revision.
    pub revision: Option<Revision>,
}

/// One page of a snapshot list.
#[derive(Debug, Clone, Default)]
pub struct ListResult {
    /// Items in key order.
    pub items: Vec<KeyValue>,
    /// Snapshot revision every item was read at.
    pub revision: Revision,
    /// More items follow the last one in this snapshot.
    pub more: bool,
    /// Items left after this page, when the backend knows it cheaply.
    pub remaining: Option<u64>,
}

/// The storage contract every backend implements and the conformance suite checks.
///
/// Methods are async; backends that block (SQLite) run their work off the async worker threads.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Reads the current value of a key.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>>;

    /// Creates a key that must not exist; returns the new revision.
    async fn create(&self, key: &str, value: Bytes) -> Result<Revision>;

    /// Replaces a key whose last write has revision `expected`; returns the new revision.
    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<Revision>;

    /// Deletes a key, if `expected` is given only when its last write has that revision.
    /// Returns the deletion revision and the value that was deleted.
    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue)>;

    /// Lists keys under `prefix` from one consistent snapshot.
    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult>;

    /// Counts keys under `prefix` at the current revision (for metrics and `remainingItemCount`).
    async fn count(&self, prefix: &str) -> Result<u64>;

    /// Reads up to `limit` change-log events with revision greater than `after`, in order.
    async fn read_log(&self, after: Revision, limit: usize) -> Result<Vec<Event>>;

    /// The revision of the latest commit (0 for an empty store).
    async fn current_revision(&self) -> Result<Revision>;

    /// The oldest revision still readable (log and snapshots).
    async fn compacted_revision(&self) -> Result<Revision>;

    /// Forgets log entries and snapshots older than `revision`.
    async fn compact(&self, revision: Revision) -> Result<()>;

    /// Subscribes to commit notifications: the receiver sees the latest revision this process
    /// knows to be committed. Backends shared by several processes also notice foreign commits
    /// (by polling or a broker), so followers need no other wake-up.
    fn subscribe(&self) -> tokio::sync::watch::Receiver<Revision>;
}

/// Shared handle to a store.
pub type DynStore = Arc<dyn Store>;
