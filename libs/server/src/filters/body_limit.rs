//! Reads the request body into memory, refusing more than `--max-request-body-bytes` (3 MiB,
//! kube's limit) with 413 before anything decodes it. Bodies of reads are not read at all.

use std::convert::Infallible;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use kapi_apimachinery::ApiError;
use tower::{Layer, Service, ServiceExt};

use super::{take_ready, ErrorOutput, ResponseFuture};
use crate::negotiation::Output;
use crate::response::{self, Body};

/// How much of an oversize body is read and thrown away so the client, still sending, gets to
/// read the 413 instead of a reset connection; past this the connection is closed.
const DRAIN_MAX_BYTES: usize = 64 << 20;

enum ReadError {
    TooLarge,
    Io(hyper::Error),
}

/// How much room to make for a body before reading it: its declared `Content-Length`, at most
/// `max_bytes`. A buffer grown as the body comes doubles its capacity on the way, and holds up to
/// twice the body (twenty 2.9 MB bodies stalled until the deadline took 100 MiB instead of 60);
/// room made but not yet written is not resident, so a client that announces a large body and
/// sends little costs what it sent.
fn initial_capacity(headers: &http::HeaderMap, max_bytes: usize) -> usize {
    headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map_or(0, |n| n.min(max_bytes))
}

/// Reads the whole body unless it exceeds `max_bytes`; the body stays usable for draining.
async fn read_limited(body: &mut Incoming, capacity: usize, max_bytes: usize) -> Result<Bytes, ReadError> {
    let mut buf = BytesMut::with_capacity(capacity);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(ReadError::Io)?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > max_bytes {
                return Err(ReadError::TooLarge);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf.freeze())
}

/// Layer of [`BodyLimit`].
#[derive(Debug, Clone, Copy)]
pub struct BodyLimitLayer {
    max_bytes: usize,
}

impl BodyLimitLayer {
    /// Bodies over `max_bytes` get 413.
    pub fn new(max_bytes: usize) -> Self {
        Self { max_bytes }
    }
}

impl<S> Layer<S> for BodyLimitLayer {
    type Service = BodyLimit<S>;
    fn layer(&self, inner: S) -> Self::Service {
        BodyLimit { inner, max_bytes: self.max_bytes }
    }
}

/// See the module docs.
#[derive(Debug, Clone)]
pub struct BodyLimit<S> {
    inner: S,
    max_bytes: usize,
}

impl<S> Service<Request<Incoming>> for BodyLimit<S>
where
    S: Service<Request<Bytes>, Response = Response<Body>, Error = Infallible, Future = ResponseFuture> + Clone + Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        let inner = take_ready(&mut self.inner);
        let max_bytes = self.max_bytes;
        Box::pin(async move {
            let output = req.extensions().get::<ErrorOutput>().map_or(Output::JSON, |o| o.0);
            let (parts, body) = req.into_parts();
            let bytes = if matches!(parts.method, Method::POST | Method::PUT | Method::PATCH | Method::DELETE) {
                let mut body = body;
                match read_limited(&mut body, initial_capacity(&parts.headers, max_bytes), max_bytes).await {
                    Ok(bytes) => bytes,
                    Err(ReadError::TooLarge) => {
                        super::drain_body(body, DRAIN_MAX_BYTES).await;
                        return Ok(response::error(&ApiError::too_large(max_bytes), output));
                    }
                    Err(ReadError::Io(e)) => {
                        return Ok(response::error(&ApiError::bad_request(format!("error reading the request body: {e}")), output));
                    }
                }
            } else {
                Bytes::new()
            };
            if let Some(audit) = parts.extensions.get::<super::audit::AuditHandle>() {
                let content_type = parts.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
                audit.request_body(content_type, &bytes);
            }
            inner.oneshot(Request::from_parts(parts, bytes)).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::initial_capacity;

    #[test]
    fn room_for_the_declared_length_within_the_limit() {
        let headers = |length: Option<&str>| {
            let mut h = http::HeaderMap::new();
            if let Some(l) = length {
                h.insert(http::header::CONTENT_LENGTH, http::HeaderValue::from_str(l).expect("header"));
            }
            h
        };
        assert_eq!(initial_capacity(&headers(Some("2900000")), 3 << 20), 2_900_000);
        assert_eq!(initial_capacity(&headers(Some("999999999")), 3 << 20), 3 << 20);
        assert_eq!(initial_capacity(&headers(None), 3 << 20), 0);
        assert_eq!(initial_capacity(&headers(Some("x")), 3 << 20), 0);
    }
}
