//! Building responses: encoded objects, Status errors and streaming bodies.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};
use hyper::body::{Frame, SizeHint};
use kapi_apimachinery::ApiError;
use kapi_protobuf_codec::{Codec, ProtobufError};
use serde_json::Value;

use crate::negotiation::{Encoding, Output};

/// The body type of every response: whole buffers or watch streams.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// A whole-buffer body.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

/// JSON as kube writes it: Go's `json.Encoder` ends every document with a newline, and
/// clients compare error texts byte for byte.
pub fn json_bytes(value: &impl serde::Serialize) -> Bytes {
    let mut bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

/// Marks an answer written in negotiated JSON (objects, lists, Tables, Status errors,
/// discovery): the ones kube-apiserver writes with its pretty serializer when the client asks
/// for it ([`crate::filters::pretty`]). Watch streams, OpenAPI documents and plain-text answers
/// carry no mark.
#[derive(Debug, Clone, Copy)]
pub struct NegotiatedJson;

/// A JSON answer from already encoded bytes, marked [`NegotiatedJson`].
pub fn json(status: StatusCode, bytes: impl Into<Bytes>) -> Response<Body> {
    let mut resp = Response::new(full(bytes));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp.extensions_mut().insert(NegotiatedJson);
    resp
}

/// Go's `json.MarshalIndent(v, "", "  ")` from compact JSON (kapi's own encoding): members and
/// elements one per line, two spaces per level, `": "` after keys, empty objects and arrays
/// kept as `{}` and `[]`, and no newline at the end (MarshalIndent writes none, unlike the
/// compact encoder). Strings are copied as they are.
pub fn indent_json(compact: &[u8]) -> Vec<u8> {
    let compact = compact.strip_suffix(b"\n").unwrap_or(compact);
    let mut out = Vec::with_capacity(compact.len() + compact.len() / 2);
    let newline = |out: &mut Vec<u8>, depth: usize| {
        out.push(b'\n');
        out.resize(out.len() + 2 * depth, b' ');
    };
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut bytes = compact.iter().copied().peekable();
    while let Some(b) = bytes.next() {
        if in_string {
            out.push(b);
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                out.push(b);
            }
            b'{' | b'[' => {
                out.push(b);
                match bytes.peek() {
                    Some(b'}' | b']') => out.extend(bytes.next()),
                    _ => {
                        depth += 1;
                        newline(&mut out, depth);
                    }
                }
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(b);
            }
            b',' => {
                out.push(b);
                newline(&mut out, depth);
            }
            b':' => out.extend_from_slice(b": "),
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => out.push(b),
        }
    }
    out
}

/// Encodes a JSON value in the negotiated encoding. YAML that cannot be written falls back to
/// JSON (YAML is a superset), so the answer is always decodable.
pub fn encode(value: &Value, output: Output) -> Result<Bytes, ProtobufError> {
    Ok(match output.encoding {
        Encoding::Yaml => match serde_saphyr::to_string(value) {
            Ok(s) => Bytes::from(s),
            Err(_) => json_bytes(value),
        },
        Encoding::Json => json_bytes(value),
        Encoding::Protobuf => Codec::global().encode(value)?,
    })
}

/// A response carrying an object.
pub fn object(status: StatusCode, value: &Value, output: Output) -> Response<Body> {
    let list = value.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"));
    // kube's span around encoding an answer.
    let span = kapi_otel::Span::child("SerializeObject", kapi_otel::SpanKind::Internal, || {
        let encoder = match output.encoding {
            Encoding::Json => "json",
            Encoding::Yaml => "yaml",
            Encoding::Protobuf => "protobuf",
        };
        vec![kapi_otel::KeyValue::new("mediaType", output.content_type(list)), kapi_otel::KeyValue::new("encoder", encoder)]
    });
    let encoded = encode(value, output);
    drop(span);
    let bytes = match encoded {
        Ok(bytes) => bytes,
        Err(e) => {
            // Negotiation only picks protobuf for kinds that have a message, so this is a bug.
            tracing::error!(kind = ?value.get("kind"), "protobuf encoding failed: {e}");
            let err = ApiError::internal(format!("encoding the response as protobuf: {e}"));
            let mut resp = Response::new(full(json_bytes(&err.to_status())));
            *resp.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            return resp;
        }
    };
    let mut resp = Response::new(full(bytes));
    *resp.status_mut() = status;
    if let Ok(ct) = HeaderValue::from_str(&output.content_type(list)) {
        resp.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    if output.encoding == Encoding::Json {
        resp.extensions_mut().insert(NegotiatedJson);
    }
    resp
}

/// Response extension: the Status of a failed request, for the audit event.
#[derive(Debug, Clone)]
pub struct ErrorStatus(pub Value);

/// A failed request as a `metav1.Status` (always JSON, as kube-apiserver does for errors a
/// client may not be able to decode otherwise... it uses the negotiated type when it can).
pub fn error(err: &ApiError, output: Output) -> Response<Body> {
    let output = output.plain();
    let status = err.to_status();
    let mut resp = object(StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), &status, output);
    resp.extensions_mut().insert(ErrorStatus(status));
    if let Some(secs) = err.details.as_ref().and_then(|d| d.retry_after_seconds).filter(|s| *s > 0) {
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    resp
}

/// Keeps `guard` alive until the body has been sent: a request counts as in flight while its
/// answer is still being written (a big list to a slow reader, a whole watch), as in kube,
/// whose handlers write the body before they return.
pub fn hold_until_sent<G: Send + Unpin + 'static>(resp: Response<Body>, guard: G) -> Response<Body> {
    resp.map(|inner| Guarded { inner, _guard: guard }.boxed_unsync())
}

/// A body holding a guard. It forwards the size, so a whole buffer still goes out with a
/// `Content-Length` rather than chunked (a body mapped frame by frame loses its size).
struct Guarded<G> {
    inner: Body,
    _guard: G,
}

impl<G: Unpin> hyper::body::Body for Guarded<G> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Plain text (health checks, metrics).
pub fn text(status: StatusCode, body: impl Into<Bytes>, content_type: &'static str) -> Response<Body> {
    let mut resp = Response::new(full(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut().insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    resp
}

/// kube's plain-text 429 (`message` and a newline) with `Retry-After`, as its in-flight limit
/// and its shutdown filter write it, not a Status.
pub fn too_many_requests(message: &str, retry_after: &'static str) -> Response<Body> {
    let mut resp = text(StatusCode::TOO_MANY_REQUESTS, format!("{message}\n"), "text/plain; charset=utf-8");
    resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static(retry_after));
    resp
}

/// Another server's answer body (a kubelet's, an aggregated API server's) as a response body,
/// streamed as it arrives: a read error ends it, as kube's `io.Copy` stops and the answer ends.
pub fn streamed(body: hyper::body::Incoming) -> Body {
    EndOnError(body).boxed_unsync()
}

struct EndOnError(hyper::body::Incoming);

impl hyper::body::Body for EndOnError {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match Pin::new(&mut self.0).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
            Poll::Ready(Some(Err(e))) => {
                tracing::debug!("proxied stream ended: {e}");
                Poll::Ready(None)
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}

/// A streamed answer that ends once `stop` turns true (a proxied watch when the server stops
/// taking requests: its own watches end then too, and clients resume on another replica from
/// their last resourceVersion). What was received before is passed on whole.
pub fn ending_when(body: Body, stop: tokio::sync::watch::Receiver<bool>) -> Body {
    let stop = async move {
        let mut stop = stop;
        let _ = stop.wait_for(|s| *s).await;
    };
    EndWhen { body, stop: Box::pin(stop), done: false }.boxed_unsync()
}

struct EndWhen {
    body: Body,
    stop: Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    done: bool,
}

impl hyper::body::Body for EndWhen {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if self.stop.as_mut().poll(cx).is_ready() {
            self.done = true;
            return Poll::Ready(None);
        }
        Poll::Pending
    }
}
