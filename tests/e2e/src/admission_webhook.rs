//! The admission webhook of the e2e tests (`python/admission_webhook.py`): a real HTTPS process
//! with its own CA, whose answer depends on the URL path, logging every call; stopped by its
//! PID on drop.

use std::path::PathBuf;
use std::process::Child;

use serde_json::{json, Value};
use tempfile::TempDir;

use crate::process::start_python_helper;
use crate::webhook::serving_certs;
use crate::{free_port, io_err, HarnessError};

/// A running admission webhook.
pub struct AdmissionWebhook {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its CA certificate, base64 as a `caBundle` wants it.
    pub ca_bundle: String,
    log: PathBuf,
    _dir: TempDir,
}

impl AdmissionWebhook {
    /// Makes certificates for `adm.default.svc` and 127.0.0.1 and starts the webhook on a free
    /// port once it says it listens.
    pub fn start() -> Result<Self, HarnessError> {
        let dir = tempfile::Builder::new().prefix("kapi-admission-webhook-").tempdir().map_err(io_err("creating the webhook dir"))?;
        let d = dir.path();
        let ca_bundle = serving_certs(d, "adm.default.svc")?;
        let port = free_port()?;
        let port_arg = port.to_string();
        let (cert, key, log) = (d.join("tls.crt"), d.join("tls.key"), d.join("calls.jsonl"));
        let args = [port_arg.as_ref(), cert.as_os_str(), key.as_os_str(), log.as_os_str()];
        let child = start_python_helper("admission_webhook.py", &args, "the admission webhook")?;
        Ok(AdmissionWebhook { child, port, ca_bundle, log, _dir: dir })
    }

    /// A `clientConfig` calling `path` (with its query) by URL.
    pub fn client_config(&self, path: &str) -> Value {
        json!({"url": format!("https://127.0.0.1:{}{path}", self.port), "caBundle": self.ca_bundle})
    }

    /// Every call so far whose path is `path` (without query): the logged lines, each with
    /// `path`, `query` and the review's `request`.
    pub fn calls(&self, path: &str) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).filter(|c| c["path"] == path).collect()
    }

    /// Stops the webhook (a test of what happens while it is down).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for AdmissionWebhook {
    fn drop(&mut self) {
        self.stop();
    }
}
