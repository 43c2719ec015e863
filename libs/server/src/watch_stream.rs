//! The HTTP side of a watch: turns a cache [`Watcher`] into kube-apiserver's chunked stream of
//! `{"type":...,"object":...}` frames, with bookmarks, timeouts and clean ends on shutdown.
//!
//! Objects are encoded once per media type in the cache and shared by all JSON watchers; only
//! transformed streams (Table, PartialObjectMetadata) encode per watcher.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use kapi_apimachinery::watch::{bookmark_object, json_frame, WatchEventType};
use kapi_apimachinery::ApiError;
use kapi_watch::{EventType, MediaSlot, TerminateReason, WatchItem, Watcher};
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::negotiation::{Encoding, Output, Shape};
use kapi_protobuf_codec::Codec;
use crate::response::Body;
use crate::state::ApiServer;
use crate::scope::ResourceScope;
use crate::transform::{self, IncludeObject};

/// What the client asked of its watch.
#[derive(Debug, Clone, Copy)]
pub struct WatchOptions {
    /// Representation of each event's object.
    pub output: Output,
    /// When the server ends the watch (client `timeoutSeconds` or a randomised default).
    pub timeout: Duration,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `sendInitialEvents`: end the initial events with an annotated bookmark.
    pub send_initial_events: bool,
    /// Table rows' object (Table watches only).
    pub include: IncludeObject,
}

struct StreamState {
    watcher: Watcher,
    scope: Arc<dyn ResourceScope>,
    opts: WatchOptions,
    deadline: Instant,
    next_bookmark: Instant,
    bookmark_interval: Duration,
    shutdown: watch::Receiver<bool>,
    /// `--shutdown-watch-termination-grace-period`.
    termination_grace: Duration,
    draining: bool,
    first_table: bool,
    done: bool,
}

fn event_type(kind: EventType) -> WatchEventType {
    match kind {
        EventType::Added => WatchEventType::Added,
        EventType::Modified => WatchEventType::Modified,
        EventType::Deleted => WatchEventType::Deleted,
    }
}

/// Serializes one object in the stream's encoding.
fn serialize(obj: &Value, encoding: Encoding) -> Bytes {
    match encoding {
        Encoding::Protobuf => Codec::global().encode(obj).unwrap_or_else(|e| {
            // Negotiation only offers protobuf for kinds that have a message.
            tracing::error!("protobuf encoding of a watch event failed: {e}");
            Bytes::new()
        }),
        Encoding::Json | Encoding::Yaml => Bytes::from(serde_json::to_vec(obj).unwrap_or_default()),
    }
}

/// One frame in a watch's framing: a JSON line or a length-prefixed protobuf WatchEvent.
fn frame(encoding: Encoding, t: WatchEventType, object: &[u8]) -> Bytes {
    match encoding {
        Encoding::Protobuf => Codec::global().watch_frame(t.as_str(), object),
        Encoding::Json | Encoding::Yaml => json_frame(t, object),
    }
}

/// A watch that cannot start where the client asked (its resourceVersion is too old): kube's
/// watch cache answers 200 with one ERROR event carrying the 410 Status, and clients relist on
/// it (an HTTP 410 makes some, such as kube-rs, retry the same resourceVersion for ever).
pub fn respond_error(err: &ApiError, output: Output) -> Response<Body> {
    let status = serialize(&err.to_status(), output.encoding);
    let mut resp = Response::new(crate::response::full(frame(output.encoding, WatchEventType::Error, &status)));
    *resp.status_mut() = StatusCode::OK;
    let content_type = match output.encoding {
        Encoding::Protobuf => format!("{};stream=watch", output.content_type(false)),
        _ => output.content_type(false),
    };
    if let Ok(ct) = HeaderValue::from_str(&content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    resp
}

impl StreamState {
    fn frame(&self, t: WatchEventType, object: &[u8]) -> Bytes {
        frame(self.opts.output.encoding, t, object)
    }

    fn encode_object(&mut self, obj: &Value) -> Bytes {
        let value = match self.opts.output.shape {
            Shape::Table => {
                let with_columns = std::mem::replace(&mut self.first_table, false);
                let meta = json!({"resourceVersion": obj.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null)});
                self.scope.table(&mut std::iter::once(obj), meta, self.opts.include, with_columns)
            }
            Shape::PartialMetadata => transform::partial_metadata(obj),
            Shape::Object | Shape::DiscoveryV2 => return serialize(obj, self.opts.output.encoding),
        };
        serialize(&value, self.opts.output.encoding)
    }

    fn bookmark(&self, rev: u64, initial_events_end: bool) -> Bytes {
        let spec = self.scope.spec();
        let obj = bookmark_object(&spec.api_version(), spec.kind, rev, initial_events_end);
        self.frame(WatchEventType::Bookmark, &serialize(&obj, self.opts.output.encoding))
    }

    /// The next frame to send, or `None` when the watch ends.
    async fn next_frame(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        loop {
            tokio::select! {
                item = self.watcher.next() => match item? {
                    WatchItem::Event { kind, event } => {
                        let t = event_type(kind);
                        let encoding = self.opts.output.encoding;
                        if self.scope.converts() && matches!(self.opts.output.shape, Shape::Object) {
                            // Stored in another version: convert per watcher version, so the
                            // shared per-event encodings (storage version) are not used.
                            let converted = match self.scope.convert_from_storage(event.object.as_ref().clone()).await {
                                Ok(obj) => obj,
                                Err(e) => {
                                    tracing::error!("converting a watch event: {}", e.message);
                                    continue;
                                }
                            };
                            return Some(self.frame(t, &serialize(&converted, encoding)));
                        }
                        if let Some(defaulted) = self.scope.read_defaults(&event.object) {
                            // An object that predates its schema's defaults: answered
                            // defaulted, so not from the event's shared encodings.
                            let bytes = self.encode_object(&defaulted);
                            return Some(self.frame(t, &bytes));
                        }
                        let bytes = match (self.opts.output.shape, encoding) {
                            (Shape::Object | Shape::DiscoveryV2, Encoding::Protobuf) => {
                                event.encoded(MediaSlot::Protobuf, |o| serialize(o, encoding))
                            }
                            (Shape::Object | Shape::DiscoveryV2, _) => event.encoded(MediaSlot::Json, |o| serialize(o, encoding)),
                            (Shape::Table | Shape::PartialMetadata, _) => self.encode_object(&event.object),
                        };
                        return Some(self.frame(t, &bytes));
                    }
                    WatchItem::Bookmark(rev) => {
                        if self.opts.allow_bookmarks {
                            return Some(self.bookmark(rev, false));
                        }
                    }
                    WatchItem::InitialEventsEnd(rev) => {
                        if self.opts.send_initial_events && self.opts.allow_bookmarks {
                            return Some(self.bookmark(rev, true));
                        }
                    }
                    WatchItem::Terminated { reason: TerminateReason::Expired, last_delivered } => {
                        self.done = true;
                        let err = ApiError::resource_expired(format!("too old resource version: {last_delivered}"));
                        let status = serialize(&err.to_status(), self.opts.output.encoding);
                        return Some(self.frame(WatchEventType::Error, &status));
                    }
                    // Too slow or shut down: end the stream; the client resumes from its last
                    // resourceVersion.
                    WatchItem::Terminated { .. } => return None,
                },
                _ = tokio::time::sleep_until(self.deadline) => return None,
                changed = self.shutdown.changed(), if !self.draining => {
                    if changed.is_err() || *self.shutdown.borrow() {
                        // Draining: end at a random moment within the grace period, so the
                        // clients of this replica do not all re-list elsewhere at once.
                        let grace = self.termination_grace.as_millis() as u64;
                        if grace == 0 {
                            return None;
                        }
                        self.draining = true;
                        let end = Instant::now() + Duration::from_millis(rand::random::<u64>() % grace);
                        self.deadline = self.deadline.min(end);
                    }
                }
                _ = tokio::time::sleep_until(self.next_bookmark), if self.opts.allow_bookmarks => {
                    self.watcher.request_bookmark();
                    self.next_bookmark = Instant::now() + self.bookmark_interval;
                }
            }
        }
    }
}

/// Starts streaming a watch response.
pub fn respond(srv: &Arc<ApiServer>, scope: Arc<dyn ResourceScope>, watcher: Watcher, opts: WatchOptions) -> Response<Body> {
    let now = Instant::now();
    let events = srv.metrics.watch_events(scope.spec());
    let state = StreamState {
        watcher,
        scope,
        opts,
        deadline: now + opts.timeout,
        next_bookmark: now + srv.options.bookmark_interval,
        bookmark_interval: srv.options.bookmark_interval,
        shutdown: {
            // A watch that starts as draining begins still ends (its first poll sees a change).
            let mut rx = srv.lifecycle.not_accepting_new_requests.subscribe();
            rx.mark_changed();
            rx
        },
        termination_grace: srv.options.watch_termination_grace,
        draining: false,
        first_table: true,
        done: false,
    };
    let frames = futures_util::stream::unfold(state, |mut st| async move {
        let frame = st.next_frame().await?;
        Some((Ok::<_, std::convert::Infallible>(Frame::data(frame)), st))
    })
    .inspect(move |f| events.observe(f.as_ref().ok().and_then(Frame::data_ref).map_or(0, Bytes::len)));
    let mut resp = Response::new(StreamBody::new(frames.boxed()).boxed_unsync());
    *resp.status_mut() = StatusCode::OK;
    let content_type = match opts.output.encoding {
        Encoding::Protobuf => format!("{};stream=watch", opts.output.content_type(false)),
        _ => opts.output.content_type(false),
    };
    if let Ok(ct) = HeaderValue::from_str(&content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    resp
}
