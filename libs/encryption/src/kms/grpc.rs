//! A minimal gRPC client of `v2.KeyManagementService` over a Unix socket: HTTP/2 (h2) with
//! gRPC's framing (a 5-byte prefix: compressed flag 0, big-endian length), `content-type:
//! application/grpc`, `te: trailers`, `grpc-timeout`, and the status read from the
//! `grpc-status`/`grpc-message` trailers (or headers, for trailers-only answers).
//!
//! One HTTP/2 connection is kept and shared by concurrent calls (streams); a call that finds it
//! broken drops it, so the next call dials again. Every call is bounded by the provider's
//! timeout. Errors read as grpc-go prints them (`rpc error: code = Unavailable desc = ...`),
//! which is what kube-apiserver's messages embed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use tokio::net::UnixStream;

/// The gRPC service path prefix.
const SERVICE: &str = "/v2.KeyManagementService/";
/// Bound on an answer's size: the messages are a few hundred bytes.
const MAX_MESSAGE: usize = 4 << 20;

/// A failed call: a gRPC status code and its description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// The gRPC code (14 Unavailable, 4 DeadlineExceeded, ...).
    pub code: u32,
    /// What went wrong.
    pub message: String,
}

impl RpcError {
    fn new(code: u32, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into() }
    }
}

const UNKNOWN: u32 = 2;
const DEADLINE_EXCEEDED: u32 = 4;
const INTERNAL: u32 = 13;
const UNAVAILABLE: u32 = 14;

fn code_name(code: u32) -> String {
    const NAMES: [&str; 17] = [
        "OK",
        "Canceled",
        "Unknown",
        "InvalidArgument",
        "DeadlineExceeded",
        "NotFound",
        "AlreadyExists",
        "PermissionDenied",
        "ResourceExhausted",
        "FailedPrecondition",
        "Aborted",
        "OutOfRange",
        "Unimplemented",
        "Internal",
        "Unavailable",
        "DataLoss",
        "Unauthenticated",
    ];
    NAMES.get(code as usize).map_or_else(|| format!("Code({code})"), |n| (*n).to_owned())
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rpc error: code = {} desc = {}", code_name(self.code), self.message)
    }
}

/// Go's spelling of the usual socket errors (`connect: no such file or directory`).
fn io_text(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// gRPC's percent-encoding of `grpc-message`.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The client of one plugin socket.
pub struct GrpcClient {
    path: PathBuf,
    conn: tokio::sync::Mutex<Option<h2::client::SendRequest<Bytes>>>,
}

impl GrpcClient {
    /// A client of the socket at `path` (dialled on first use).
    pub fn new(path: &Path) -> Self {
        GrpcClient { path: path.to_owned(), conn: tokio::sync::Mutex::new(None) }
    }

    async fn sender(&self) -> Result<h2::client::SendRequest<Bytes>, RpcError> {
        let mut conn = self.conn.lock().await;
        if let Some(s) = conn.as_ref() {
            return Ok(s.clone());
        }
        let dial_error = |e: String| {
            RpcError::new(
                UNAVAILABLE,
                format!("connection error: desc = \"transport: Error while dialing: dial unix {}: connect: {e}\"", self.path.display()),
            )
        };
        let stream = UnixStream::connect(&self.path).await.map_err(|e| dial_error(io_text(&e)))?;
        let (sender, connection) = h2::client::handshake(stream).await.map_err(|e| dial_error(e.to_string()))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "KMS plugin connection closed");
            }
        });
        *conn = Some(sender.clone());
        Ok(sender)
    }

    async fn forget(&self) {
        *self.conn.lock().await = None;
    }

    /// Calls `method` with the encoded request; the encoded answer.
    pub async fn call(&self, method: &str, request: &[u8], timeout: Duration) -> Result<Vec<u8>, RpcError> {
        match tokio::time::timeout(timeout, self.call_inner(method, request, timeout)).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err((e, broken))) => {
                if broken {
                    self.forget().await;
                }
                Err(e)
            }
            Err(_) => {
                // The connection may be wedged: dial again next time.
                self.forget().await;
                Err(RpcError::new(DEADLINE_EXCEEDED, "context deadline exceeded"))
            }
        }
    }

    /// The answer, or the error and whether the connection is to be dropped.
    async fn call_inner(&self, method: &str, request: &[u8], timeout: Duration) -> Result<Vec<u8>, (RpcError, bool)> {
        let transport = |e: h2::Error| (RpcError::new(UNAVAILABLE, format!("error reading from server: {e}")), true);
        let sender = self.sender().await.map_err(|e| (e, true))?;
        let mut sender = sender.ready().await.map_err(transport)?;
        let req = http::Request::builder()
            .method("POST")
            .uri(format!("http://localhost{SERVICE}{method}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("grpc-timeout", format!("{}m", timeout.as_millis().max(1)))
            .body(())
            .map_err(|e| (RpcError::new(INTERNAL, e.to_string()), false))?;
        let (response, mut send) = sender.send_request(req, false).map_err(transport)?;
        let mut frame = Vec::with_capacity(request.len() + 5);
        frame.push(0);
        frame.extend_from_slice(&(request.len() as u32).to_be_bytes());
        frame.extend_from_slice(request);
        send.send_data(Bytes::from(frame), true).map_err(transport)?;
        let response = response.await.map_err(transport)?;
        let (parts, mut body) = response.into_parts();
        if parts.status != http::StatusCode::OK {
            return Err((RpcError::new(UNAVAILABLE, format!("unexpected HTTP status code received from server: {}", parts.status.as_u16())), false));
        }
        // Trailers-only answers carry the status in the headers.
        if let Some(status) = grpc_status(&parts.headers) {
            status.map_err(|e| (e, false))?;
        }
        let mut data = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(transport)?;
            let _ = body.flow_control().release_capacity(chunk.len());
            data.extend_from_slice(&chunk);
            if data.len() > MAX_MESSAGE + 5 {
                return Err((RpcError::new(INTERNAL, "grpc: received message larger than max"), false));
            }
        }
        let trailers = body.trailers().await.map_err(transport)?;
        match trailers.as_ref().and_then(grpc_status) {
            Some(status) => status.map_err(|e| (e, false))?,
            None if parts.headers.contains_key("grpc-status") => {}
            None => return Err((RpcError::new(INTERNAL, "server closed the stream without sending trailers"), false)),
        }
        if data.len() < 5 {
            return Err((RpcError::new(INTERNAL, "grpc: the server sent no message"), false));
        }
        if data[0] != 0 {
            return Err((RpcError::new(INTERNAL, "grpc: compressed messages are not supported"), false));
        }
        let len = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
        if data.len() != len + 5 {
            return Err((RpcError::new(INTERNAL, "grpc: the message length does not match its frame"), false));
        }
        data.drain(..5);
        Ok(data)
    }
}

/// `grpc-status` (and `grpc-message`) of a header block, if present.
fn grpc_status(headers: &http::HeaderMap) -> Option<Result<(), RpcError>> {
    let status = headers.get("grpc-status")?;
    let code = status.to_str().ok().and_then(|s| s.parse::<u32>().ok()).unwrap_or(UNKNOWN);
    if code == 0 {
        return Some(Ok(()));
    }
    let message = headers.get("grpc-message").and_then(|m| m.to_str().ok()).map(percent_decode).unwrap_or_default();
    Some(Err(RpcError::new(code, message)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_grpc_go_prints_them() {
        let e = RpcError::new(UNAVAILABLE, "connection error");
        assert_eq!(e.to_string(), "rpc error: code = Unavailable desc = connection error");
        assert_eq!(percent_decode("bad%20key%3A%20x"), "bad key: x");
        assert_eq!(percent_decode("100%"), "100%");
        let mut h = http::HeaderMap::new();
        h.insert("grpc-status", "3".parse().unwrap());
        h.insert("grpc-message", "no%20such%20key".parse().unwrap());
        assert_eq!(grpc_status(&h), Some(Err(RpcError::new(3, "no such key"))));
        assert_eq!(RpcError::new(3, "x").to_string(), "rpc error: code = InvalidArgument desc = x");
    }

    #[tokio::test]
    async fn a_missing_socket_is_unavailable_with_the_dial_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kms.sock");
        let client = GrpcClient::new(&path);
        let err = client.call("Status", &[], Duration::from_secs(1)).await.unwrap_err();
        assert_eq!(err.code, UNAVAILABLE);
        assert_eq!(
            err.message,
            format!("connection error: desc = \"transport: Error while dialing: dial unix {}: connect: no such file or directory\"", path.display())
        );
    }
}
