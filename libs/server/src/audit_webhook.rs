//! The audit webhook backend (`--audit-webhook-config-file`): events POSTed as an
//! audit.k8s.io/v1 EventList to the webhook a kubeconfig names, as kube-apiserver's. In `batch`
//! mode (kube's default) events wait in a bounded buffer and go in batches of at most
//! `max_size`, or when `max_wait` has passed since the batch's first event, at most `qps`
//! batches a second (burst `burst`), each retried with kube's backoff from `initial_backoff`;
//! a full buffer drops events (counted as errors) rather than hold requests up. In
//! `blocking` modes each event is sent before its request goes on.

use std::time::Duration;

use bytes::Bytes;
use kapi_audit::Mode;
use kapi_webhook::{Client, ClientConfig};
use tokio::sync::mpsc;

/// The `--audit-webhook-*` flags.
#[derive(Debug, Clone)]
pub struct AuditWebhookOptions {
    /// The webhook, from `--audit-webhook-config-file`.
    pub config: ClientConfig,
    /// `--audit-webhook-mode`.
    pub mode: Mode,
    /// `--audit-webhook-batch-buffer-size` (10000).
    pub buffer_size: usize,
    /// `--audit-webhook-batch-max-size` (400).
    pub max_size: usize,
    /// `--audit-webhook-batch-max-wait` (30s).
    pub max_wait: Duration,
    /// `--audit-webhook-batch-throttle-enable` with `-qps` (10) and `-burst` (15); None: no
    /// throttling.
    pub throttle: Option<(f64, u32)>,
    /// `--audit-webhook-initial-backoff` (10s).
    pub initial_backoff: Duration,
}

/// The webhook a kubeconfig names (kapi's binary reaches kapi-webhook through here).
pub fn kubeconfig(path: &std::path::Path) -> Result<ClientConfig, String> {
    ClientConfig::from_kubeconfig(path)
}

/// kube's timeout of one audit webhook call.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Tries of one batch (kube's `DefaultRetryBackoffWithInitialDelay`: 5 steps, ×1.5).
const TRIES: u32 = 5;

/// The backend: cheap to clone.
#[derive(Clone)]
pub struct AuditWebhook {
    client: Client,
    options: AuditWebhookOptions,
    queue: Option<mpsc::Sender<Vec<u8>>>,
}

/// An EventList of serialized events (each a JSON object, with or without a trailing newline).
fn event_list(events: &[Vec<u8>]) -> Bytes {
    let mut body = br#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":["#.to_vec();
    for (i, event) in events.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(event.strip_suffix(b"\n").unwrap_or(event));
    }
    body.extend_from_slice(b"]}");
    Bytes::from(body)
}

impl AuditWebhook {
    /// Starts the backend (its batching task in batch mode).
    pub fn start(client: Client, options: AuditWebhookOptions) -> AuditWebhook {
        let queue = (options.mode == Mode::Batch).then(|| {
            let (tx, rx) = mpsc::channel(options.buffer_size.max(1));
            tokio::spawn(batcher(client.clone(), options.clone(), rx));
            tx
        });
        AuditWebhook { client, options, queue }
    }

    /// Hands one serialized event to the webhook as the mode says; an error only in
    /// blocking-strict mode.
    pub async fn write_line(&self, line: Vec<u8>) -> Result<(), String> {
        match &self.queue {
            Some(queue) => {
                if queue.try_send(line).is_err() {
                    crate::metrics::audit_error("webhook");
                    tracing::warn!("the audit webhook buffer is full: an event was dropped");
                }
                Ok(())
            }
            None => match send(&self.client, &self.options, &[line]).await {
                Ok(()) => Ok(()),
                Err(e) if self.options.mode == Mode::BlockingStrict => Err(e),
                Err(_) => Ok(()),
            },
        }
    }
}

/// One batch, retried with kube's backoff; failures are logged and counted.
async fn send(client: &Client, options: &AuditWebhookOptions, events: &[Vec<u8>]) -> Result<(), String> {
    let body = event_list(events);
    let mut delay = options.initial_backoff;
    let mut last = String::new();
    for attempt in 0..TRIES {
        match client.post(&options.config, body.clone(), CALL_TIMEOUT).await {
            Ok(()) => return Ok(()),
            Err(e) => last = e.to_string(),
        }
        if attempt + 1 < TRIES {
            tokio::time::sleep(delay).await;
            delay = delay.mul_f64(1.5);
        }
    }
    for _ in events {
        crate::metrics::audit_error("webhook");
    }
    tracing::error!(events = events.len(), "the audit webhook failed: {last}");
    Err(last)
}

/// Collects batches and sends them, throttled; each batch goes out on a task of its own, so a
/// webhook slow to answer does not hold the next batches back.
async fn batcher(client: Client, options: AuditWebhookOptions, mut events: mpsc::Receiver<Vec<u8>>) {
    let mut tokens = options.throttle.map(|(_, burst)| f64::from(burst));
    let mut refilled = tokio::time::Instant::now();
    loop {
        let Some(first) = events.recv().await else { return };
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + options.max_wait;
        while batch.len() < options.max_size {
            tokio::select! {
                event = events.recv() => match event {
                    Some(event) => batch.push(event),
                    None => break,
                },
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        if let (Some(available), Some((qps, burst))) = (tokens.as_mut(), options.throttle) {
            let now = tokio::time::Instant::now();
            *available = (*available + now.duration_since(refilled).as_secs_f64() * qps).min(f64::from(burst));
            refilled = now;
            if *available < 1.0 {
                let wait = Duration::from_secs_f64((1.0 - *available) / qps.max(1e-9));
                tokio::time::sleep(wait).await;
                *available = 1.0;
                refilled = tokio::time::Instant::now();
            }
            *available -= 1.0;
        }
        let (client, options) = (client.clone(), options.clone());
        tokio::spawn(async move {
            let _ = send(&client, &options, &batch).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::event_list;

    #[test]
    fn event_lists_join_serialized_events() {
        let body = event_list(&[b"{\"a\":1}\n".to_vec(), b"{\"b\":2}".to_vec()]);
        let list: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(list["kind"], "EventList");
        assert_eq!(list["items"], serde_json::json!([{"a": 1}, {"b": 2}]));
    }
}
