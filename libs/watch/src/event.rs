//! Events and objects as the cache shares them between watchers and readers.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use kapi_storage::{EventKind, Revision};
use serde_json::Value;

/// Predicate a watcher applies to objects (label and field selectors, authorization scope).
/// It runs on the follower for every event under the cache lock, so it must be cheap and must
/// not block.
pub type Filter = Arc<dyn Fn(&Value) -> bool + Send + Sync>;

/// Event type as delivered to one watcher, after filter transitions; this is what goes into
/// the `type` field of a watch frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// The object entered the watcher's view (created, or modified into the filter).
    Added,
    /// The object changed and still matches.
    Modified,
    /// The object left the watcher's view (deleted, or modified out of the filter).
    Deleted,
}

impl EventType {
    /// The spelling used by Kubernetes watch frames.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// Encodings the server caches per event, so that a thousand watchers of one media type cost
/// one serialization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaSlot {
    /// `application/json`.
    Json,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

/// Lazily filled encodings of one object version. Shared between the live event and every
/// synthetic ADDED built later from the same version, hence separate from [`CachedEvent`].
#[derive(Debug, Default)]
pub(crate) struct EncodingCells {
    json: OnceLock<Bytes>,
    protobuf: OnceLock<Bytes>,
}

impl EncodingCells {
    fn slot(&self, media: MediaSlot) -> &OnceLock<Bytes> {
        match media {
            MediaSlot::Json => &self.json,
            MediaSlot::Protobuf => &self.protobuf,
        }
    }
}

/// One object version in the cache, as `list` and `get` return it.
#[derive(Debug, Clone)]
pub struct CachedObject {
    /// Full storage key.
    pub key: String,
    /// Revision of the last write (equals `metadata.resourceVersion` of `object`).
    pub revision: Revision,
    /// The object with `metadata.resourceVersion` set.
    pub object: Arc<Value>,
}

/// One change as the cache applied it; shared by every watcher that receives it.
#[derive(Debug)]
pub struct CachedEvent {
    /// Revision of the write (for deletions, the deletion revision).
    pub revision: Revision,
    /// Full storage key.
    pub key: String,
    /// What the store did; the type a watcher sees may differ after filter transitions.
    pub kind: EventKind,
    /// The object after the write; for deletions the last value, with `resourceVersion` set to
    /// the deletion revision.
    pub object: Arc<Value>,
    /// The version the cache held before this write, for filter transitions.
    pub prev_object: Option<Arc<Value>>,
    /// Revision of `prev_object` (0 when there is none).
    pub prev_revision: Revision,
    pub(crate) cells: Arc<EncodingCells>,
}

impl CachedEvent {
    pub(crate) fn new(
        revision: Revision,
        key: String,
        kind: EventKind,
        object: Arc<Value>,
        prev: Option<(Revision, Arc<Value>)>,
    ) -> Self {
        let (prev_revision, prev_object) = match prev {
            Some((r, o)) => (r, Some(o)),
            None => (0, None),
        };
        CachedEvent {
            revision,
            key,
            kind,
            object,
            prev_object,
            prev_revision,
            cells: Arc::default(),
        }
    }

    /// Builds an event around an existing version's encodings (synthetic ADDED events of an
    /// initial-state watch), so they share the bytes of the live event.
    pub(crate) fn with_cells(
        revision: Revision,
        key: String,
        kind: EventKind,
        object: Arc<Value>,
        cells: Arc<EncodingCells>,
    ) -> Self {
        CachedEvent {
            revision,
            key,
            kind,
            object,
            prev_object: None,
            prev_revision: 0,
            cells,
        }
    }

    /// Encodes the object once per media type and shares the bytes between all watchers.
    pub fn encoded(&self, media: MediaSlot, encode: impl FnOnce(&Value) -> Bytes) -> Bytes {
        self.cells
            .slot(media)
            .get_or_init(|| encode(&self.object))
            .clone()
    }
}

/// Why the cache ended a watcher early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminateReason {
    /// Its queue filled up: the client did not keep up with the event rate.
    TooSlow,
    /// The cache lost continuity with the store log (compaction) and was reloaded; events may
    /// have been missed, so the client must relist (410 Gone).
    Expired,
}

/// What a watcher receives, in revision order.
#[derive(Debug, Clone)]
pub enum WatchItem {
    /// A change, typed after filter transitions.
    Event {
        /// Type the client sees.
        kind: EventType,
        /// The shared event; encode with [`CachedEvent::encoded`].
        event: Arc<CachedEvent>,
    },
    /// Every matching event up to this revision was delivered before this item.
    Bookmark(Revision),
    /// Ends the synthetic ADDED events of an initial-state watch; the revision is the one the
    /// initial state is consistent at.
    InitialEventsEnd(Revision),
    /// The watcher was too slow (its queue filled) or the cache lost continuity (the log was
    /// compacted past it). Carries the last revision delivered so the client can resume.
    Terminated {
        /// Last revision the watcher handed out (0 if it ended inside its initial state).
        last_delivered: Revision,
        /// Why it ended.
        reason: TerminateReason,
    },
}

/// Why a stored value could not become a cached object.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DecodeError {
    #[error("value of {key} is not JSON: {source}")]
    Json {
        key: String,
        source: serde_json::Error,
    },
    #[error("value of {key} is not a JSON object")]
    NotObject { key: String },
}

/// Parses a stored value and stamps `metadata.resourceVersion`, since the stored bytes do not
/// carry a trustworthy one (the revision is only known after commit).
pub(crate) fn decode_object(
    key: &str,
    value: &[u8],
    revision: Revision,
) -> Result<Value, DecodeError> {
    let mut object: Value = serde_json::from_slice(value).map_err(|source| DecodeError::Json {
        key: key.to_owned(),
        source,
    })?;
    let Some(map) = object.as_object_mut() else {
        return Err(DecodeError::NotObject {
            key: key.to_owned(),
        });
    };
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    if !metadata.is_object() {
        *metadata = Value::Object(Default::default());
    }
    if let Some(meta) = metadata.as_object_mut() {
        meta.insert(
            "resourceVersion".to_owned(),
            Value::String(revision.to_string()),
        );
    }
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_sets_resource_version() {
        let v = decode_object(
            "/k",
            br#"{"metadata":{"name":"a","resourceVersion":"1"}}"#,
            42,
        )
        .unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], "42");
        assert_eq!(v["metadata"]["name"], "a");
        let v = decode_object("/k", br#"{"kind":"Pod"}"#, 7).unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn decode_rejects_non_objects() {
        assert!(decode_object("/k", b"[1]", 1).is_err());
        assert!(decode_object("/k", b"{", 1).is_err());
    }

    #[test]
    fn encoded_runs_once_per_slot_and_is_shared_by_synthetic_events() {
        let ev = CachedEvent::new(
            3,
            "/k".into(),
            EventKind::Added,
            Arc::new(Value::Null),
            None,
        );
        let mut calls = 0;
        let a = ev.encoded(MediaSlot::Json, |_| {
            calls += 1;
            Bytes::from_static(b"j")
        });
        let syn = CachedEvent::with_cells(
            3,
            "/k".into(),
            EventKind::Added,
            ev.object.clone(),
            ev.cells.clone(),
        );
        let b = syn.encoded(MediaSlot::Json, |_| {
            calls += 1;
            Bytes::from_static(b"other")
        });
        assert_eq!(a, b);
        assert_eq!(calls, 1);
        let p = ev.encoded(MediaSlot::Protobuf, |_| Bytes::from_static(b"p"));
        assert_eq!(p, Bytes::from_static(b"p"));
    }
}
