//! The authentication and authorization webhook of the e2e tests (`python/auth_webhook.py`): a
//! real HTTPS process with its own CA answering TokenReviews at `/authenticate` and
//! SubjectAccessReviews at `/authorize`, logging every call; stopped by its PID on drop.

use std::path::PathBuf;
use std::process::Child;

use serde_json::Value;
use tempfile::TempDir;

use crate::process::start_python_helper;
use crate::webhook::serving_certs;
use crate::{free_port, io_err, HarnessError};

/// A running auth webhook.
pub struct AuthWebhook {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: TempDir,
}

impl AuthWebhook {
    /// Makes a CA and a serving certificate for 127.0.0.1 and starts the webhook.
    pub fn start() -> Result<Self, HarnessError> {
        let dir = tempfile::Builder::new().prefix("kapi-auth-webhook-").tempdir().map_err(io_err("creating the webhook dir"))?;
        serving_certs(dir.path(), "auth-webhook.local")?;
        let port = free_port()?;
        let mut webhook = AuthWebhook { child: None, port, dir };
        webhook.launch()?;
        Ok(webhook)
    }

    fn launch(&mut self) -> Result<(), HarnessError> {
        let d = self.dir.path();
        let (cert, key, log) = (d.join("tls.crt"), d.join("tls.key"), d.join("calls.log"));
        let port = self.port.to_string();
        self.child =
            Some(start_python_helper("auth_webhook.py", &[port.as_ref(), cert.as_os_str(), key.as_os_str(), log.as_os_str()], "the auth webhook")?);
        Ok(())
    }

    /// A kubeconfig for kapi naming the webhook's `path`, trusting its CA, presenting the bearer
    /// token the webhook expects (or `token`).
    pub fn kubeconfig(&self, path: &str, token: &str) -> PathBuf {
        let file = self.dir.path().join(format!("{}.kubeconfig", path.trim_matches('/')));
        let ca = self.dir.path().join("ca.crt");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: webhook\n  cluster:\n    server: https://127.0.0.1:{}{path}\n    certificate-authority: {}\nusers:\n- name: kapi\n  user:\n    token: {token}\ncontexts:\n- name: webhook\n  context:\n    cluster: webhook\n    user: kapi\ncurrent-context: webhook\n",
            self.port,
            ca.display()
        );
        std::fs::write(&file, text).expect("write the webhook kubeconfig");
        file
    }

    /// The calls so far, one JSON object each (`path`, `apiVersion`, `spec`).
    pub fn calls(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("calls.log")).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    /// Stops the webhook (a test of what happens while it is down).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port.
    pub fn restart(&mut self) -> Result<(), HarnessError> {
        self.stop();
        self.launch()
    }
}

impl Drop for AuthWebhook {
    fn drop(&mut self) {
        self.stop();
    }
}
