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

/// Reads the whole body unless it exceeds `max_bytes`; the body stays usable for draining.
async fn read_limited(body: &mut Incoming, max_bytes: usize) -> Result<Bytes, ReadError> {
    let mut buf = BytesMut::new();
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
                match read_limited(&mut body, max_bytes).await {
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
