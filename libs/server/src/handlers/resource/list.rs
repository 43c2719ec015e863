//! LIST and WATCH: query parameters, list encoding (borrowed from the watch cache), watch streams.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use kapi_apimachinery::fields::FieldSelector;
use kapi_apimachinery::labels::LabelSelector;
use kapi_apimachinery::resource_version;
use kapi_apimachinery::ApiError;
use kapi_registry::catalog::ResourceSpec;
use kapi_registry::rest::ListParams;
use serde_json::{json, Map, Value};

use super::HandlerResult;
use crate::negotiation::{Encoding, Output, Shape};
use crate::query::Query;
use crate::request_info::RequestInfo;
use crate::response;
use crate::scope::ResourceScope;
use crate::state::ApiServer;
use crate::transform::{self, IncludeObject};
use crate::watch_stream;

/// How long a watch lasts when nothing bounds it (a year: effectively until the client or
/// termination ends it).
const WATCH_WITHOUT_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

pub(super) fn list_meta(rev: u64, continue_token: Option<String>, remaining: Option<u64>) -> Value {
    let mut m = Map::new();
    m.insert("resourceVersion".into(), Value::String(rev.to_string()));
    if let Some(c) = continue_token {
        m.insert("continue".into(), Value::String(c));
        if let Some(r) = remaining.filter(|r| *r > 0) {
            m.insert("remainingItemCount".into(), Value::from(r));
        }
    }
    Value::Object(m)
}

/// A list (`PodList`): items of built-in kinds carry no kind/apiVersion, as kube-apiserver's
/// typed lists encode them; custom resources' (unstructured) items keep theirs.
pub(super) fn list_object<'a>(spec: &ResourceSpec, typed: bool, items: impl Iterator<Item = &'a Value>, meta: Value) -> Value {
    let items: Vec<Value> = items
        .map(|o| {
            let mut o = o.clone();
            if let Some(m) = o.as_object_mut().filter(|_| typed) {
                m.remove("kind");
                m.remove("apiVersion");
            }
            o
        })
        .collect();
    json!({"kind": format!("{}List", spec.kind), "apiVersion": spec.api_version(), "metadata": meta, "items": items})
}

/// How much of a streamed list is encoded at a time: one turn of a worker for its
/// connection. Measured under the noisy-neighbour flood (docs/perf.md): 32 KiB kept another
/// user's GET p99 at 5.5 ms where 64 KiB let it reach 9.7 ms; 16 KiB bought no lower p99 and
/// 16% fewer LISTs a second.
const LIST_CHUNK_BYTES: usize = 32 * 1024;

/// A JSON list answer written as the client reads it: the list's head, then its items about
/// [`LIST_CHUNK_BYTES`] at a time, each chunk encoded when the connection wants the next one.
/// A LIST of 100,000 objects then holds the cached objects it shares with the watch cache and
/// a chunk or two, not a copy of the whole answer (30 MB of JSON, twice that while the buffer
/// grows). The chunks are encoded on the bulk runtime ([`crate::bulk`]), two at most ahead of
/// the connection, so the request workers only write them out; without it they are encoded
/// in the connection's own task, which yields between chunks so that a big list never stalls
/// a worker for long. The bytes are those the whole-list encoding (`ListRef`, in the tests)
/// writes.
fn stream_json_list(spec: &ResourceSpec, typed: bool, items: Vec<Arc<Value>>, meta: &Value) -> http::Response<response::Body> {
    use futures_util::StreamExt;
    use http_body_util::BodyExt;
    let mut head = Vec::with_capacity(256);
    head.extend_from_slice(br#"{"kind":"#);
    let _ = serde_json::to_writer(&mut head, &format!("{}List", spec.kind));
    head.extend_from_slice(br#","apiVersion":"#);
    let _ = serde_json::to_writer(&mut head, &spec.api_version());
    head.extend_from_slice(br#","metadata":"#);
    let _ = serde_json::to_writer(&mut head, meta);
    head.extend_from_slice(br#","items":["#);
    let mut chunks = ListChunks { items, typed, next: 0, head: Some(head) };
    let frame = |chunk| Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(chunk));
    let body = match crate::bulk::handle() {
        Some(bulk) => {
            let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(2);
            bulk.spawn(async move {
                while let Some(chunk) = chunks.next_chunk() {
                    // The client went away: stop encoding.
                    if tx.send(chunk).await.is_err() {
                        return;
                    }
                }
            });
            futures_util::stream::unfold(rx, move |mut rx| async move { rx.recv().await.map(|chunk| (frame(chunk), rx)) }).boxed()
        }
        None => futures_util::stream::unfold(chunks, move |mut chunks| async move {
            if chunks.head.is_none() {
                // Back of the run queue between chunks: the connection would otherwise encode
                // and write chunk after chunk in one turn while its client keeps up (megabytes,
                // tens of milliseconds), and every other request on this worker would wait.
                tokio::task::yield_now().await;
            }
            chunks.next_chunk().map(|chunk| (frame(chunk), chunks))
        })
        .boxed(),
    };
    let mut resp = http::Response::new(http_body_util::StreamBody::new(body).boxed_unsync());
    resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    resp.extensions_mut().insert(response::NegotiatedJson);
    resp
}

/// A JSON list's bytes in chunks: the head (with the first items), then the items about
/// [`LIST_CHUNK_BYTES`] at a time, the last chunk with the list's end.
struct ListChunks {
    items: Vec<Arc<Value>>,
    typed: bool,
    /// The next item to write; past the end once the list's end is written.
    next: usize,
    /// The list's head, still to send.
    head: Option<Vec<u8>>,
}

impl ListChunks {
    fn next_chunk(&mut self) -> Option<bytes::Bytes> {
        if self.next > self.items.len() {
            return None;
        }
        let mut buf = self.head.take().unwrap_or_else(|| Vec::with_capacity(LIST_CHUNK_BYTES + 4096));
        let mut i = self.next;
        while i < self.items.len() && buf.len() < LIST_CHUNK_BYTES {
            if i > 0 {
                buf.push(b',');
            }
            // Values always encode; a failure would be a bug, and ends the list short.
            let _ = serde_json::to_writer(&mut buf, &ItemRef(&self.items[i], self.typed));
            i += 1;
        }
        if i == self.items.len() {
            buf.extend_from_slice(b"]}\n");
            i += 1;
        }
        self.next = i;
        Some(bytes::Bytes::from(buf))
    }
}

/// A list serialized whole from borrowed items: what [`stream_json_list`] writes in chunks.
#[cfg(test)]
#[derive(serde::Serialize)]
struct ListRef<'a> {
    kind: String,
    #[serde(rename = "apiVersion")]
    api_version: String,
    metadata: &'a Value,
    items: ItemsRef<'a>,
}

/// The items of a [`ListRef`]; `typed` drops each item's `kind` and `apiVersion`.
#[cfg(test)]
struct ItemsRef<'a> {
    items: &'a [Arc<Value>],
    typed: bool,
}

#[cfg(test)]
impl serde::Serialize for ItemsRef<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.items.iter().map(|item| ItemRef(item, self.typed)))
    }
}

/// One list item, in stored order; without `kind` and `apiVersion` when typed.
struct ItemRef<'a>(&'a Value, bool);

impl serde::Serialize for ItemRef<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self.0.as_object() {
            Some(fields) if self.1 => {
                let mut map = serializer.serialize_map(None)?;
                for (k, v) in fields.iter().filter(|(k, _)| k.as_str() != "kind" && k.as_str() != "apiVersion") {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
            _ => self.0.serialize(serializer),
        }
    }
}

/// Parses list/watch query parameters with kube-apiserver's validation.
pub fn list_params(spec: &ResourceSpec, query: &Query) -> Result<ListParams, ApiError> {
    let labels = match query.get("labelSelector").filter(|s| !s.is_empty()) {
        Some(s) => Some(LabelSelector::parse(s)?),
        None => None,
    };
    let fields = match query.get("fieldSelector").filter(|s| !s.is_empty()) {
        Some(s) => {
            let sel = FieldSelector::parse(s)?;
            let mut supported: Vec<&str> = vec!["metadata.name"];
            if spec.namespaced {
                supported.push("metadata.namespace");
            }
            supported.extend_from_slice(spec.field_selectors);
            sel.check_supported(&supported)?;
            Some(sel)
        }
        None => None,
    };
    let watch = query.bool("watch")?.unwrap_or(false);
    let send_initial_events = query.bool("sendInitialEvents")?;
    resource_version::validate_list_options_with_continue(
        query.get("resourceVersion"),
        query.get("resourceVersionMatch"),
        send_initial_events,
        watch,
        query.get("continue"),
    )?;
    resource_version::validate_continue_rv(query.get("resourceVersion"), query.get("continue"))?;
    let rv = resource_version::parse(query.get("resourceVersion").unwrap_or(""))?;
    let rv_match = resource_version::parse_match(query.get("resourceVersionMatch").unwrap_or(""))?;
    let limit = query.u64("limit")?.map(|l| l as usize);
    Ok(ListParams {
        labels,
        fields,
        limit,
        continue_token: query.get("continue").filter(|c| !c.is_empty()).map(str::to_owned),
        resource_version: rv,
        resource_version_match: rv_match,
        send_initial_events: send_initial_events.unwrap_or(false),
    })
}

pub(super) async fn list(srv: &Arc<ApiServer>, scope: &dyn ResourceScope, ns: Option<&str>, query: &Query, output: Output) -> HandlerResult {
    let spec = scope.spec();
    let strategy = scope.strategy();
    let params = list_params(spec, query)?;
    let mut page = srv.rest.list(strategy, ns, &params).await?;
    {
        let spec = scope.spec();
        let resource = if spec.group.is_empty() { spec.resource.to_owned() } else { format!("{}.{}", spec.resource, spec.group) };
        crate::metrics::storage_list(&resource, page.examined, page.items.len() as u64);
    }
    if !scope.converts() {
        for item in page.items.iter_mut() {
            if let Some(defaulted) = scope.read_defaults(item) {
                *item = Arc::new(defaulted);
            }
        }
    }
    let meta = list_meta(page.resource_version, page.continue_token, page.remaining);
    let value = match output.shape {
        Shape::Table => {
            let include = IncludeObject::parse(query.get("includeObject")).map_err(ApiError::bad_request)?;
            scope.table(&mut page.items.iter().map(|a| a.as_ref()), meta, include, true)
        }
        Shape::PartialMetadata => transform::partial_metadata_list(page.items.iter().map(|a| a.as_ref()), meta),
        Shape::Object | Shape::DiscoveryV2 if scope.converts() => {
            let items = scope.convert_list_from_storage(page.items.iter().map(|o| o.as_ref().clone()).collect()).await?;
            list_object(spec, scope.typed_lists(), items.iter(), meta)
        }
        Shape::Object | Shape::DiscoveryV2 if output.encoding == Encoding::Json => {
            // The common case (informers, kubectl -o json): streamed from the cached objects,
            // as kube (1.33 on) streams JSON lists, instead of encoded whole first.
            return Ok(stream_json_list(spec, scope.typed_lists(), page.items, &meta));
        }
        Shape::Object | Shape::DiscoveryV2 => list_object(spec, scope.typed_lists(), page.items.iter().map(|a| a.as_ref()), meta),
    };
    Ok(response::object(StatusCode::OK, &value, output))
}

pub(super) async fn watch(
    srv: &Arc<ApiServer>,
    scope: &Arc<dyn ResourceScope>,
    ns: Option<&str>,
    info: &RequestInfo,
    query: &Query,
    output: Output,
) -> HandlerResult {
    let mut params = list_params(scope.spec(), query)?;
    // `GET .../pods/<name>?watch=1` and `/watch/.../pods/<name>` watch one object.
    if !info.name.is_empty() {
        let by_name = FieldSelector::parse(&format!("metadata.name={}", info.name))?;
        params.fields = Some(by_name);
    }
    // kube: the client's timeoutSeconds; when absent or 0, a random time in
    // [min, 2*min) of --min-request-timeout, so watches do not all end (and relist) together;
    // with --min-request-timeout=0, no server-side end at all.
    let timeout = match query.u64("timeoutSeconds")?.filter(|s| *s > 0) {
        Some(s) => Duration::from_secs(s),
        None if srv.options.min_request_timeout.is_zero() => WATCH_WITHOUT_TIMEOUT,
        None => srv.options.min_request_timeout.mul_f64(1.0 + rand::random::<f64>()),
    };
    let allow_bookmarks = query.bool("allowWatchBookmarks")?.unwrap_or(false);
    let watcher = match srv.rest.watch(scope.strategy(), ns, &params).await {
        Ok(watcher) => watcher,
        Err(e) if e.code == 410 => return Ok(watch_stream::respond_error(&e, output)),
        Err(e) => return Err(e),
    };
    Ok(watch_stream::respond(
        srv,
        scope.clone(),
        watcher,
        watch_stream::WatchOptions {
            output,
            timeout,
            allow_bookmarks,
            send_initial_events: params.send_initial_events,
            include: IncludeObject::parse(query.get("includeObject")).map_err(ApiError::bad_request)?,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrowed_list_encoding_equals_the_built_list() {
        let spec = kapi_registry::catalog::find("", "v1", "configmaps").expect("configmaps");
        let items: Vec<Arc<Value>> = (0..3)
            .map(|i| {
                Arc::new(json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": format!("c{i}"), "resourceVersion": "7"}, "data": {"k": "v"}}))
            })
            .collect();
        let meta = list_meta(9, Some("tok".into()), Some(4));
        let built = list_object(spec, true, items.iter().map(|a| a.as_ref()), meta.clone());
        let borrowed =
            ListRef { kind: "ConfigMapList".into(), api_version: "v1".into(), metadata: &meta, items: ItemsRef { items: &items, typed: true } };
        let bytes = serde_json::to_vec(&borrowed).unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), built);
        assert!(built["items"][0].get("kind").is_none(), "list items carry no kind");
        assert_eq!(built["items"][2]["metadata"]["name"], "c2");
    }

    /// The streamed answer's bytes and how many chunks they came in.
    fn streamed(items: Vec<Arc<Value>>, meta: &Value) -> (Vec<u8>, usize) {
        use http_body_util::BodyExt;
        let spec = kapi_registry::catalog::find("", "v1", "configmaps").expect("configmaps");
        let resp = stream_json_list(spec, true, items, meta);
        assert_eq!(resp.headers()[http::header::CONTENT_TYPE], "application/json");
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        runtime.block_on(async {
            let mut body = resp.into_body();
            let (mut bytes, mut chunks) = (Vec::new(), 0);
            while let Some(frame) = body.frame().await {
                let data = frame.expect("frame").into_data().expect("data");
                assert!(data.len() <= LIST_CHUNK_BYTES + 8 * 1024, "a chunk of {} bytes", data.len());
                bytes.extend_from_slice(&data);
                chunks += 1;
            }
            (bytes, chunks)
        })
    }

    #[test]
    fn streamed_lists_are_the_borrowed_encoding_in_chunks() {
        let meta = list_meta(9, Some("tok".into()), Some(4));
        for n in [0usize, 1, 3, 5_000] {
            let items: Vec<Arc<Value>> = (0..n)
                .map(|i| Arc::new(json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": format!("c{i}")}, "data": {"k": "v".repeat(50)}})))
                .collect();
            let borrowed = ListRef { kind: "ConfigMapList".into(), api_version: "v1".into(), metadata: &meta, items: ItemsRef { items: &items, typed: true } };
            let mut whole = serde_json::to_vec(&borrowed).unwrap();
            whole.push(b'\n');
            let (bytes, chunks) = streamed(items, &meta);
            assert_eq!(String::from_utf8_lossy(&bytes), String::from_utf8_lossy(&whole), "{n} items");
            if n == 5_000 {
                assert!(chunks >= whole.len() / (LIST_CHUNK_BYTES + 8 * 1024), "{chunks} chunks for {} bytes", whole.len());
            }
        }
    }
}
