//! The OpenID Connect issuer of the e2e tests (`python/oidc_issuer.py`): a real HTTPS process
//! with its own CA serving discovery documents and a JWKS, signing tokens on request (with its
//! key, a key it does not publish, HMAC or nothing) and rotating its key; stopped on drop.

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::{json, Value};
use tempfile::TempDir;

use crate::process::{run_with_timeout, start_python_helper};
use crate::webhook::serving_certs;
use crate::{free_port, io_err, HarnessError};

/// A running issuer.
pub struct OidcIssuer {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: TempDir,
}

impl OidcIssuer {
    /// Makes a CA and a serving certificate for 127.0.0.1 and starts the issuer.
    pub fn start() -> Result<Self, HarnessError> {
        let dir = tempfile::Builder::new().prefix("kapi-oidc-issuer-").tempdir().map_err(io_err("creating the issuer dir"))?;
        serving_certs(dir.path(), "oidc-issuer.local")?;
        let port = free_port()?;
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let port_arg = port.to_string();
        let child = start_python_helper("oidc_issuer.py", &[port_arg.as_ref(), cert.as_os_str(), key.as_os_str()], "the OIDC issuer")?;
        Ok(OidcIssuer { child, port, dir })
    }

    /// The issuer URL (`path` "" for the main issuer, "/email" for the second).
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// The CA certificate file that signed the issuer's serving certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.ca_file()).expect("read the issuer CA")
    }

    fn call(&self, method: &str, path: &str, body: &Value) -> String {
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "--fail", "-X", method, "--cacert"])
            .arg(self.ca_file())
            .args(["-H", "Content-Type: application/json", "--data-binary"])
            .arg(body.to_string())
            .arg(format!("{}{path}", self.url("")));
        let out = run_with_timeout(&mut cmd, Duration::from_secs(20)).expect("curl the issuer");
        assert!(out.status.success(), "{method} {path}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A token with `claims`: `with` is "current" (the published key), "stranger" (a key the
    /// JWKS does not have), "hmac-public" (HS256 keyed by the public key) or "none"; `header`
    /// fields override the defaults.
    pub fn sign(&self, with: &str, header: Value, claims: Value) -> String {
        self.call("POST", "/sign", &json!({"with": with, "header": header, "claims": claims}))
    }

    /// Makes a new key the only published one; its kid.
    pub fn rotate(&self) -> String {
        let answer: Value = serde_json::from_str(&self.call("POST", "/rotate", &json!({}))).expect("rotate answer");
        answer["kid"].as_str().unwrap_or_default().to_owned()
    }

    /// The discovery and JWKS fetches so far.
    pub fn stats(&self) -> (u64, u64) {
        let answer: Value = serde_json::from_str(&self.call("GET", "/stats", &json!({}))).expect("stats answer");
        (answer["discovery"].as_u64().unwrap_or(0), answer["jwks"].as_u64().unwrap_or(0))
    }
}

impl Drop for OidcIssuer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
