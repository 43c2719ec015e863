//! The extension API server of the aggregator tests (`python/metrics_apiserver.py`, a
//! metrics-server-shaped metrics.k8s.io/v1beta1): a real HTTPS process with its own serving CA
//! that trusts only the front-proxy CA's `front-proxy-client`, logging every request; it can be
//! stopped and started again on the same port, and is stopped by its PID on drop.

use std::path::{Path, PathBuf};
use std::process::Child;

use serde_json::Value;
use tempfile::TempDir;

use crate::process::start_python_helper;
use crate::webhook::{openssl, serving_certs};
use crate::{free_port, io_err, HarnessError};

/// A front-proxy CA and the client certificate kapi's aggregator presents under it
/// (`--proxy-client-cert-file`), as kubeadm makes them.
pub struct FrontProxyCerts {
    /// The CA the extension server trusts (`--requestheader-client-ca-file` of a kube server).
    pub ca: PathBuf,
    /// `front-proxy-client` certificate.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
    _dir: TempDir,
}

impl FrontProxyCerts {
    /// Makes the CA and the client certificate with openssl.
    pub fn make() -> Result<Self, HarnessError> {
        let dir = tempfile::Builder::new().prefix("kapi-front-proxy-").tempdir().map_err(io_err("creating the front-proxy dir"))?;
        let d = dir.path();
        openssl(d, &["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "1", "-subj", "/CN=front-proxy-ca"])?;
        openssl(d, &["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "client.key", "-out", "client.csr", "-subj", "/CN=front-proxy-client"])?;
        std::fs::write(d.join("ext.cnf"), "extendedKeyUsage=clientAuth\n").map_err(io_err("writing ext.cnf"))?;
        openssl(d, &["x509", "-req", "-in", "client.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", "client.crt", "-days", "1", "-extfile", "ext.cnf"])?;
        Ok(FrontProxyCerts { ca: d.join("ca.crt"), cert: d.join("client.crt"), key: d.join("client.key"), _dir: dir })
    }
}

/// A running (or stopped) metrics-server-shaped extension API server.
pub struct ExtensionApiServer {
    child: Option<Child>,
    /// Its port on 127.0.0.1 (kept across restarts).
    pub port: u16,
    /// Its serving CA, base64 as an APIService's `caBundle` wants it.
    pub ca_bundle: String,
    front_proxy_ca: PathBuf,
    log: PathBuf,
    dir: TempDir,
}

impl ExtensionApiServer {
    /// Makes a serving certificate for `metrics-server.kube-system.svc` (the TLS name of an
    /// APIService naming that Service) and starts the server on a free port.
    pub fn start(front_proxy_ca: &Path) -> Result<Self, HarnessError> {
        let dir = tempfile::Builder::new().prefix("kapi-extension-apiserver-").tempdir().map_err(io_err("creating the server dir"))?;
        let ca_bundle = serving_certs(dir.path(), "metrics-server.kube-system.svc")?;
        let log = dir.path().join("requests.jsonl");
        let mut server = ExtensionApiServer { child: None, port: free_port()?, ca_bundle, front_proxy_ca: front_proxy_ca.to_owned(), log, dir };
        server.resume()?;
        Ok(server)
    }

    /// Starts it again on its port after [`ExtensionApiServer::stop`].
    pub fn resume(&mut self) -> Result<(), HarnessError> {
        let port = self.port.to_string();
        let d = self.dir.path();
        let (cert, key) = (d.join("tls.crt"), d.join("tls.key"));
        let args = [port.as_ref(), cert.as_os_str(), key.as_os_str(), self.front_proxy_ca.as_os_str(), self.log.as_os_str()];
        self.child = Some(start_python_helper("metrics_apiserver.py", &args, "the extension API server")?);
        Ok(())
    }

    /// Every request so far: method, path, `user` and `groups` from the X-Remote headers, the
    /// `authorization` header it got (none expected) and the client certificate's CN.
    pub fn requests(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    /// Stops it (a test of what happens while it is down).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for ExtensionApiServer {
    fn drop(&mut self) {
        self.stop();
    }
}
