//! The CRD conversion webhook of the e2e tests (`python/conversion_webhook.py`, apps.demo.io
//! v1alpha1 <-> v1): a real HTTPS process with its own CA, stopped by its PID on drop.

use std::path::Path;
use std::process::{Child, Command};

use tempfile::TempDir;

use crate::process::start_python_helper;
use crate::{free_port, io_err, HarnessError};

/// A running conversion webhook.
pub struct ConversionWebhook {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its CA certificate, base64 as a CRD's `caBundle` wants it.
    pub ca_bundle: String,
    _dir: TempDir,
}

pub(crate) fn openssl(dir: &Path, args: &[&str]) -> Result<Vec<u8>, HarnessError> {
    let out = Command::new("openssl").args(args).current_dir(dir).output().map_err(io_err("running openssl"))?;
    if !out.status.success() {
        return Err(HarnessError::Io {
            context: format!("openssl {}", args.join(" ")),
            source: std::io::Error::other(String::from_utf8_lossy(&out.stderr).into_owned()),
        });
    }
    Ok(out.stdout)
}

/// Makes a CA (`ca.crt`) and a serving certificate (`tls.crt`, `tls.key`) for `dns_name` and
/// 127.0.0.1 in `dir`; answers the CA base64-encoded, as a `caBundle` wants it.
pub(crate) fn serving_certs(dir: &Path, dns_name: &str) -> Result<String, HarnessError> {
    openssl(dir, &["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "1", "-subj", "/CN=e2e-webhook-ca"])?;
    openssl(dir, &["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "tls.key", "-out", "tls.csr", "-subj", &format!("/CN={dns_name}")])?;
    std::fs::write(dir.join("ext.cnf"), format!("subjectAltName=DNS:{dns_name},IP:127.0.0.1\n")).map_err(io_err("writing ext.cnf"))?;
    openssl(dir, &["x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", "tls.crt", "-days", "1", "-extfile", "ext.cnf"])?;
    Ok(String::from_utf8_lossy(&openssl(dir, &["base64", "-A", "-in", "ca.crt"])?).trim().to_owned())
}

impl ConversionWebhook {
    /// Makes a CA and a serving certificate for `conv.default.svc` and 127.0.0.1, and starts the
    /// webhook on a free port once it says it listens.
    pub fn start() -> Result<Self, HarnessError> {
        let dir = tempfile::Builder::new().prefix("kapi-webhook-").tempdir().map_err(io_err("creating the webhook dir"))?;
        let d = dir.path();
        let ca_bundle = serving_certs(d, "conv.default.svc")?;
        let port = free_port()?;
        let port_arg = port.to_string();
        let (cert, key) = (d.join("tls.crt"), d.join("tls.key"));
        let child = start_python_helper("conversion_webhook.py", &[port_arg.as_ref(), cert.as_os_str(), key.as_os_str()], "the conversion webhook")?;
        Ok(ConversionWebhook { child, port, ca_bundle, _dir: dir })
    }

    /// Stops the webhook (a test of what happens while it is down).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ConversionWebhook {
    fn drop(&mut self) {
        self.stop();
    }
}
