//! HTTP/1.1 written by hand over TLS, for what well-behaved clients never do: a head or a body
//! left unfinished, a keep-alive connection left idle.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::load::tls_client_config;

/// A TLS connection to a kapi, read with a 60 s bound.
pub struct RawConnection {
    stream: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
}

impl RawConnection {
    /// Connects to `127.0.0.1:port`, trusting `ca` and presenting `cert`/`key`.
    pub fn open(port: u16, ca: &Path, cert: &Path, key: &Path) -> RawConnection {
        let config = Arc::new(tls_client_config(ca, cert, key));
        let tcp = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        tcp.set_read_timeout(Some(Duration::from_secs(60))).expect("read timeout");
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("server name");
        let conn = rustls::ClientConnection::new(config, name).expect("TLS client");
        RawConnection { stream: rustls::StreamOwned::new(conn, tcp) }
    }

    /// Sends `bytes` as they are.
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
        self.stream.flush().expect("flush");
    }

    /// Reads one answer (head and body, as text, chunks as sent); stops early, with what
    /// came, when the server closes the connection.
    pub fn read_answer(&mut self) -> String {
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        while !complete(&answer) {
            match self.stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&answer).into_owned()
    }

    /// How long until the server closes the connection, failing if it sends anything
    /// meanwhile; None when it is still open after the 60 s read bound.
    pub fn time_to_close(&mut self) -> Option<Duration> {
        let started = Instant::now();
        let mut buf = [0u8; 4096];
        match self.stream.read(&mut buf) {
            Ok(0) => Some(started.elapsed()),
            Ok(n) => panic!("the server sent {n} bytes on a connection expected to close"),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => None,
            Err(_) => Some(started.elapsed()),
        }
    }
}

/// What one HTTP/2 GET showed, from [`http2_get`].
#[derive(Debug)]
pub struct Http2Get {
    pub status: u16,
    pub body: String,
    /// From sending the request to the end of the answer.
    pub took: Duration,
    /// The stream limit of the server's SETTINGS.
    pub max_streams: usize,
    /// From the end of the answer until the server closed the (otherwise unused, still wanted)
    /// connection; None when it was still open 30 s later.
    pub closed_after: Option<Duration>,
}

/// One GET of `path` as `cert` over a connection negotiated with ALPN `h2`, then the
/// connection is kept, unused, until the server closes it.
pub fn http2_get(port: u16, ca: &Path, cert: &Path, key: &Path, path: &str) -> Http2Get {
    http2_get_as(port, tls_client_config(ca, cert, key), None, path)
}

/// [`http2_get`] without a client certificate, with `Authorization: Bearer <token>` when given
/// (an anonymous or token client).
pub fn http2_get_without_cert(port: u16, ca: &Path, token: Option<&str>, path: &str) -> Http2Get {
    http2_get_as(port, crate::load::tls_client_config_without_cert(ca), token, path)
}

fn http2_get_as(port: u16, mut config: rustls::ClientConfig, token: Option<&str>, path: &str) -> Http2Get {
    config.alpn_protocols = vec![b"h2".to_vec()];
    let token = token.map(str::to_owned);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async move {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("server name");
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config)).connect(name, tcp).await.expect("TLS");
        // `client` stays alive to the end: dropping it would make this side close the connection.
        let (mut client, mut conn) = h2::client::handshake(tls).await.expect("HTTP/2 handshake");
        let mut request = http::Request::get(format!("https://localhost:{port}{path}"));
        if let Some(token) = &token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let request = request.body(()).expect("request");
        let started = Instant::now();
        let (answer, _) = client.send_request(request, true).expect("send");
        tokio::pin!(answer);
        // The connection may end right behind the answer (an unauthenticated client's GOAWAY):
        // the answer is read all the same.
        let mut ended_early = None;
        let answer = tokio::select! {
            answer = &mut answer => answer.expect("answer"),
            _ = &mut conn => {
                ended_early = Some(Instant::now());
                answer.await.expect("answer")
            }
        };
        let max_streams = conn.max_concurrent_send_streams();
        let (ended_tx, ended_rx) = tokio::sync::oneshot::channel::<Instant>();
        match ended_early {
            Some(at) => {
                let _ = ended_tx.send(at);
            }
            None => {
                tokio::spawn(async move {
                    let _ = conn.await;
                    let _ = ended_tx.send(Instant::now());
                });
            }
        }
        let status = answer.status().as_u16();
        let mut body = answer.into_body();
        let mut bytes = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.unwrap_or_else(|e| panic!("the answer broke off: {e}"));
            let _ = body.flow_control().release_capacity(chunk.len());
            bytes.extend_from_slice(&chunk);
        }
        let took = started.elapsed();
        let ended_at = Instant::now();
        let closed_after = tokio::time::timeout(Duration::from_secs(30), ended_rx)
            .await
            .ok()
            .and_then(Result::ok)
            .map(|closed| closed.saturating_duration_since(ended_at));
        drop(client);
        Http2Get { status, body: String::from_utf8_lossy(&bytes).into_owned(), took, max_streams, closed_after }
    })
}

/// Whether `answer` holds a whole HTTP/1.1 response, sized by `Content-Length` or chunked.
fn complete(answer: &[u8]) -> bool {
    let text = String::from_utf8_lossy(answer);
    let Some((head, body)) = text.split_once("\r\n\r\n") else { return false };
    let head = head.to_ascii_lowercase();
    if head.contains("transfer-encoding: chunked") {
        return body == "0\r\n\r\n" || body.ends_with("\r\n0\r\n\r\n");
    }
    let length = head.lines().find_map(|l| l.strip_prefix("content-length:").map(|v| v.trim().parse::<usize>().unwrap_or(0)));
    length.is_some_and(|n| body.len() >= n)
}
