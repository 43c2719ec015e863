//! Idle HTTP/1.1 connections kept per endpoint, so that a webhook called on every write pays
//! for TCP and TLS once rather than per call (Go's `http.Transport` does the same for kube).
//!
//! A connection is only ever used by one call at a time: a call takes an idle one or dials,
//! and gives it back once the answer is read whole. What a server closed while the connection
//! sat idle is noticed when it is taken (hyper's connection task has seen the EOF) or, in the
//! race where the close crosses the request, by the call, which then retries once on a fresh
//! connection.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;

/// Idle connections kept per endpoint: enough for the bursts of one webhook, bounded so that a
/// burst does not pin sockets forever.
const MAX_IDLE_PER_ENDPOINT: usize = 32;
/// How long an unused connection is kept; Go's `http.DefaultTransport`'s `IdleConnTimeout`.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// What makes connections interchangeable: where they go and what they trust.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub host: String,
    pub port: u16,
    pub server_name: String,
    pub ca_bundle: Arc<[u8]>,
    /// The client certificate presented, if any: connections are not shared across identities.
    pub identity: Option<Arc<[u8]>>,
}

/// One open connection.
pub(crate) struct Conn {
    pub sender: SendRequest<Full<Bytes>>,
    /// Both ends, for Go's `read tcp <local>-><peer>` texts.
    pub local: SocketAddr,
    pub peer: SocketAddr,
    /// The task that drives the connection; aborting it closes the socket.
    pub task: tokio::task::AbortHandle,
    idle_since: Instant,
}

impl Conn {
    pub fn new(sender: SendRequest<Full<Bytes>>, local: SocketAddr, peer: SocketAddr, task: tokio::task::AbortHandle) -> Conn {
        Conn { sender, local, peer, task, idle_since: Instant::now() }
    }
}

impl Drop for Conn {
    /// A connection given up mid-call (a timeout) would otherwise stay open until the webhook
    /// answers.
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Default)]
pub(crate) struct Pool {
    state: Mutex<State>,
}

struct State {
    idle: HashMap<Key, Vec<Conn>>,
    swept: Instant,
}

impl Default for State {
    fn default() -> State {
        State { idle: HashMap::new(), swept: Instant::now() }
    }
}

impl Pool {
    /// The most recently used idle connection to `key` that is still open.
    pub async fn take(&self, key: &Key) -> Option<Conn> {
        loop {
            let mut conn = {
                let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
                let conns = state.idle.get_mut(key)?;
                let conn = conns.pop();
                if conns.is_empty() {
                    state.idle.remove(key);
                }
                conn?
            };
            if conn.idle_since.elapsed() < IDLE_TIMEOUT && !conn.sender.is_closed() && conn.sender.ready().await.is_ok() {
                return Some(conn);
            }
        }
    }

    /// Keeps `conn` for the next call to `key`, unless it is closed or enough are kept.
    pub fn put(&self, key: Key, mut conn: Conn) {
        if conn.sender.is_closed() {
            return;
        }
        conn.idle_since = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.swept.elapsed() > IDLE_TIMEOUT {
            // Endpoints no longer called would keep their sockets otherwise.
            state.swept = Instant::now();
            state.idle.retain(|_, conns| {
                conns.retain(|c| c.idle_since.elapsed() < IDLE_TIMEOUT && !c.sender.is_closed());
                !conns.is_empty()
            });
        }
        let conns = state.idle.entry(key).or_default();
        conns.retain(|c| !c.sender.is_closed());
        if conns.len() < MAX_IDLE_PER_ENDPOINT {
            conns.push(conn);
        }
    }
}
