//! Talking to the kubelet: a log GET whose body streams to the client (kube's
//! `LocationStreamer` and its response checker), and the upgrade-aware proxy of exec, attach
//! and portforward (kube's `UpgradeAwareHandler`): the client's upgrade request goes to the
//! kubelet, the kubelet's 101 comes back, and then the bytes of both directions are copied
//! until either side ends, through bounded buffers, on the async workers without blocking.

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use kapi_apimachinery::{ApiError, GroupResource};

use crate::kubelet::{KubeletAddress, KubeletClient, KubeletError};
use crate::response::Body;

/// How much of a kubelet's failure answer becomes the error message (kube's `maxReadLength`).
const MAX_ERROR_BODY: usize = 50_000;

/// Request headers that stay here: credentials kapi consumed (kube's authentication and
/// impersonation filters delete them too) and what hyper writes itself.
fn forwarded(name: &header::HeaderName) -> bool {
    !(name == header::HOST
        || name == header::AUTHORIZATION
        || name == header::CONTENT_LENGTH
        || name == header::TRANSFER_ENCODING
        || name.as_str().starts_with("impersonate-"))
}

/// Sends one request to the kubelet and reads its answer's head within `--kubelet-timeout`.
async fn exchange(
    kubelet: &KubeletClient,
    to: &KubeletAddress,
    insecure: bool,
    request: Request<Empty<Bytes>>,
) -> Result<Response<Incoming>, KubeletError> {
    let tls = kubelet.connect(to, insecure).await?;
    let (mut sender, conn) = http1::handshake(TokioIo::new(tls)).await.map_err(|e| KubeletError::Http(e.to_string()))?;
    // The connection task ends with the exchange (and with the upgraded stream, if any).
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!("kubelet connection: {e}");
        }
    });
    tokio::time::timeout(kubelet.timeout(), sender.send_request(request))
        .await
        .map_err(|_| KubeletError::Http("net/http: timeout awaiting response headers".into()))?
        .map_err(|e| KubeletError::Http(e.to_string()))
}

/// `GET .../pods/<name>/log`: the kubelet's `containerLogs` answer, streamed as it comes
/// (a followed log never ends on its own); a failure answer is mapped as kube's
/// `GenericHttpResponseChecker` maps it.
pub(super) async fn stream_log(kubelet: &KubeletClient, to: &KubeletAddress, target: &str, insecure: bool, pod: &str) -> Result<Response<Body>, ApiError> {
    let request = Request::get(target)
        .header(header::HOST, to.to_string())
        .body(Empty::new())
        .map_err(|e| ApiError::internal(format!("building the kubelet request: {e}")))?;
    let url = format!("https://{to}{target}");
    let answer = exchange(kubelet, to, insecure, request).await.map_err(|e| e.into_api_error(&format!("Get {url:?}")))?;
    let status = answer.status();
    if !(200..=206).contains(&status.as_u16()) {
        return Err(failure(status, answer.into_body(), pod).await);
    }
    let mut resp = Response::new(crate::response::streamed(answer.into_body()));
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(resp)
}

/// kube's response checker: the kubelet's words become the message, by status.
async fn failure(status: StatusCode, body: Incoming, pod: &str) -> ApiError {
    let mut text = Vec::new();
    let mut body = body;
    while let Some(Ok(frame)) = body.frame().await {
        if let Ok(data) = frame.into_data() {
            let room = MAX_ERROR_BODY - text.len();
            text.extend_from_slice(&data[..data.len().min(room)]);
            if text.len() == MAX_ERROR_BODY {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&text).into_owned();
    match status.as_u16() {
        500 => ApiError::internal(text),
        400 => ApiError::bad_request(text),
        code => ApiError::generic_server_response(code, &GroupResource::new("", "pods/log"), pod, &text),
    }
}

/// kube's `httpstream.IsUpgradeRequest`: a `Connection` header naming `upgrade`.
pub fn is_upgrade(head: &http::request::Parts) -> bool {
    head.headers.get_all(header::CONNECTION).iter().any(|v| v.to_str().is_ok_and(|v| v.to_ascii_lowercase().contains("upgrade")))
}

/// Exec, attach, portforward: the client's upgrade request, re-aimed at the kubelet.
pub(super) async fn upgrade(kubelet: &KubeletClient, to: &KubeletAddress, target: &str, head: &http::request::Parts) -> Result<Response<Body>, ApiError> {
    if !is_upgrade(head) {
        return Err(ApiError::bad_request("Upgrade request required"));
    }
    let Some(client_upgrade) = head.extensions.get::<hyper::upgrade::OnUpgrade>().cloned() else {
        return Err(ApiError::bad_request("Upgrade request required"));
    };
    let mut request = Request::builder().method(head.method.clone()).uri(target).header(header::HOST, to.to_string());
    for (name, value) in head.headers.iter().filter(|(name, _)| forwarded(name)) {
        request = request.header(name, value);
    }
    let request = request.body(Empty::new()).map_err(|e| ApiError::internal(format!("building the kubelet request: {e}")))?;
    let mut answer = exchange(kubelet, to, false, request).await.map_err(|e| e.into_api_error("error dialing backend"))?;
    let status = answer.status();
    if status != StatusCode::SWITCHING_PROTOCOLS {
        if status.as_u16() < 400 {
            return Err(ApiError::new(500, kapi_apimachinery::StatusReason::Unknown, format!("invalid upgrade response: status code {}", status.as_u16())));
        }
        // The kubelet's refusal goes to the client as it is (kube writes its raw bytes).
        let (mut parts, body) = answer.into_parts();
        parts.headers.remove(header::TRANSFER_ENCODING);
        parts.headers.remove(header::CONNECTION);
        return Ok(Response::from_parts(parts, crate::response::streamed(body)));
    }
    let kubelet_upgrade = hyper::upgrade::on(&mut answer);
    tokio::spawn(async move {
        match tokio::try_join!(client_upgrade, kubelet_upgrade) {
            Ok((client, kubelet)) => splice(TokioIo::new(client), TokioIo::new(kubelet)).await,
            Err(e) => tracing::debug!("pod connect upgrade failed: {e}"),
        }
    });
    // The 101 with the kubelet's headers (Upgrade, Sec-WebSocket-Accept and -Protocol,
    // X-Stream-Protocol-Version): the client negotiated with the kubelet through us.
    let (parts, _) = answer.into_parts();
    Ok(Response::from_parts(parts, Empty::new().map_err(|never| match never {}).boxed_unsync()))
}

/// Copies both directions until one of them ends, then closes both, as kube's proxy does.
pub async fn splice<A, B>(client: A, kubelet: B)
where
    A: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    B: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut kubelet_read, mut kubelet_write) = tokio::io::split(kubelet);
    let up = tokio::io::copy(&mut client_read, &mut kubelet_write);
    let down = tokio::io::copy(&mut kubelet_read, &mut client_write);
    tokio::select! {
        r = up => tracing::debug!(?r, "pod connect: client side ended"),
        r = down => tracing::debug!(?r, "pod connect: kubelet side ended"),
    }
    use tokio::io::AsyncWriteExt;
    let _ = client_write.shutdown().await;
    let _ = kubelet_write.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn splice_copies_both_ways_and_closes_both_when_one_side_ends() {
        let (client, mut client_peer) = tokio::io::duplex(64);
        let (kubelet, mut kubelet_peer) = tokio::io::duplex(64);
        let task = tokio::spawn(splice(client, kubelet));
        client_peer.write_all(b"stdin").await.unwrap();
        let mut buf = [0u8; 5];
        kubelet_peer.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"stdin");
        kubelet_peer.write_all(b"out").await.unwrap();
        let mut buf = [0u8; 3];
        client_peer.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"out");
        // The kubelet closes: the client's side is closed too.
        drop(kubelet_peer);
        task.await.unwrap();
        let mut rest = Vec::new();
        assert_eq!(client_peer.read_to_end(&mut rest).await.unwrap(), 0);
    }

    #[test]
    fn upgrade_requests_are_told_by_their_connection_header() {
        let head = |conn: &str| Request::get("/").header(header::CONNECTION, conn).body(()).unwrap().into_parts().0;
        assert!(is_upgrade(&head("Upgrade")));
        assert!(is_upgrade(&head("keep-alive, upgrade")));
        assert!(!is_upgrade(&head("keep-alive")));
        assert!(forwarded(&header::HeaderName::from_static("sec-websocket-protocol")));
        assert!(!forwarded(&header::AUTHORIZATION));
        assert!(!forwarded(&header::HeaderName::from_static("impersonate-user")));
    }
}
