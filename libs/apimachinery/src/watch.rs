//! Watch event framing for the JSON stream (`{"type":...,"object":...}` per line).
//!
//! A frame is built from already-encoded object bytes so that an event is serialized once and
//! the same bytes are shared by every watcher on the resource.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{json, Map, Value};

/// The `type` of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchEventType {
    /// An object was created (or is part of the initial state).
    Added,
    /// An object was updated.
    Modified,
    /// An object was deleted; the object is its last state.
    Deleted,
    /// A progress marker carrying only a resourceVersion.
    Bookmark,
    /// The watch failed; the object is a `Status`.
    Error,
}

impl WatchEventType {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
            Self::Bookmark => "BOOKMARK",
            Self::Error => "ERROR",
        }
    }

    /// Parses the wire spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ADDED" => Self::Added,
            "MODIFIED" => Self::Modified,
            "DELETED" => Self::Deleted,
            "BOOKMARK" => Self::Bookmark,
            "ERROR" => Self::Error,
            _ => return None,
        })
    }
}

/// One newline-terminated JSON watch frame around `object_json` (which must be one JSON value).
pub fn json_frame(t: WatchEventType, object_json: &[u8]) -> Bytes {
    const HEAD: &[u8] = b"{\"type\":\"";
    const MID: &[u8] = b"\",\"object\":";
    let ty = t.as_str().as_bytes();
    let mut buf = BytesMut::with_capacity(HEAD.len() + ty.len() + MID.len() + object_json.len() + 2);
    buf.put_slice(HEAD);
    buf.put_slice(ty);
    buf.put_slice(MID);
    buf.put_slice(object_json);
    buf.put_slice(b"}\n");
    buf.freeze()
}

/// Annotation that marks the bookmark ending the initial events of a streaming list.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// The object of a BOOKMARK event: only kind, apiVersion and `metadata.resourceVersion`
/// (plus the initial-events-end annotation when it closes a streaming list's initial state).
pub fn bookmark_object(api_version: &str, kind: &str, rv: u64, initial_events_end: bool) -> Value {
    let mut metadata = Map::new();
    metadata.insert("resourceVersion".into(), Value::String(rv.to_string()));
    if initial_events_end {
        metadata.insert("annotations".into(), json!({ INITIAL_EVENTS_END_ANNOTATION: "true" }));
    }
    json!({"kind": kind, "apiVersion": api_version, "metadata": metadata})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_is_one_json_line() {
        let obj = br#"{"kind":"Pod","metadata":{"name":"a"}}"#;
        let f = json_frame(WatchEventType::Added, obj);
        assert_eq!(&f[..], &b"{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\"}}}\n"[..]);
        let v: Value = serde_json::from_slice(&f).unwrap_or(Value::Null);
        assert_eq!(v["type"], "ADDED");
        assert_eq!(v["object"]["metadata"]["name"], "a");
        for t in [
            WatchEventType::Added,
            WatchEventType::Modified,
            WatchEventType::Deleted,
            WatchEventType::Bookmark,
            WatchEventType::Error,
        ] {
            assert_eq!(WatchEventType::parse(t.as_str()), Some(t));
        }
    }

    #[test]
    fn bookmarks() {
        let b = bookmark_object("v1", "Pod", 12, false);
        assert_eq!(b, json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "12"}}));
        let b = bookmark_object("apps/v1", "Deployment", 13, true);
        assert_eq!(b["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
        assert_eq!(b["metadata"]["resourceVersion"], "13");
    }
}
