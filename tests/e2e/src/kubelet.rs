//! The fake kubelet of the pod proxy tests (`python/fake_kubelet.py`): a real HTTPS process on
//! 127.0.0.1 that demands a client certificate, with its own CA; stopped by its PID on drop.
//!
//! One CA signs the kubelet's serving certificate (for 127.0.0.1) and the client certificate
//! kapi presents (`--kubelet-client-certificate`), as kubeadm's cluster CA does.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use tempfile::TempDir;

use crate::webhook::openssl;
use crate::{free_port, io_err, HarnessError};

/// The common name of the client certificate kapi gets for kubelets (kubeadm's).
pub const KUBELET_CLIENT_CN: &str = "kube-apiserver-kubelet-client";

/// A running fake kubelet.
pub struct FakeKubelet {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: TempDir,
}

impl FakeKubelet {
    /// Makes the CA and certificates and starts the kubelet on a free port once it listens.
    pub fn start() -> Result<Self, HarnessError> {
        let dir = tempfile::Builder::new().prefix("kapi-kubelet-").tempdir().map_err(io_err("creating the kubelet dir"))?;
        let d = dir.path();
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
        openssl(d, &[&["req", "-x509"][..], &ec, &["-keyout", "ca.key", "-out", "ca.crt", "-days", "1", "-subj", "/CN=e2e-kubelet-ca"]].concat())?;
        let sign = |name: &str, subject: &str, ext: &str| -> Result<(), HarnessError> {
            let (key, csr, crt, cnf) = (format!("{name}.key"), format!("{name}.csr"), format!("{name}.crt"), format!("{name}.cnf"));
            openssl(d, &[&["req"][..], &ec, &["-keyout", &key, "-out", &csr, "-subj", subject]].concat())?;
            std::fs::write(d.join(&cnf), ext).map_err(io_err("writing an extension file"))?;
            openssl(d, &["x509", "-req", "-in", &csr, "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", &crt, "-days", "1", "-extfile", &cnf])?;
            Ok(())
        };
        sign("kubelet", "/CN=node-1", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")?;
        sign(
            "apiserver-kubelet-client",
            &format!("/CN={KUBELET_CLIENT_CN}/O=kubeadm:cluster-admins"),
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n",
        )?;
        let port = free_port()?;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/fake_kubelet.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .arg(d.join("kubelet.crt"))
            .arg(d.join("kubelet.key"))
            .arg(d.join("ca.crt"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(io_err("starting the fake kubelet"))?;
        let mut line = String::new();
        if let Some(stdout) = child.stdout.take() {
            BufReader::new(stdout).read_line(&mut line).map_err(io_err("reading the fake kubelet's output"))?;
        }
        let kubelet = FakeKubelet { child, port, dir };
        if line.trim() != "ready" {
            return Err(HarnessError::Io { context: "the fake kubelet did not start".into(), source: std::io::Error::other(line) });
        }
        Ok(kubelet)
    }

    /// The CA of the kubelet's serving certificate (`--kubelet-certificate-authority`).
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// kapi's client certificate and key for kubelets (`--kubelet-client-certificate`, `-key`).
    pub fn client_cert(&self) -> (PathBuf, PathBuf) {
        (self.dir.path().join("apiserver-kubelet-client.crt"), self.dir.path().join("apiserver-kubelet-client.key"))
    }

    /// kapi's `--kubelet-*` flags for this kubelet.
    pub fn kapi_flags(&self) -> Vec<String> {
        let (cert, key) = self.client_cert();
        vec![
            format!("--kubelet-client-certificate={}", cert.display()),
            format!("--kubelet-client-key={}", key.display()),
            format!("--kubelet-certificate-authority={}", self.ca().display()),
        ]
    }
}

impl Drop for FakeKubelet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
