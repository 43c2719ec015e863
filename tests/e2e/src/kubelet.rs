//! The fake kubelet of the pod proxy tests (`python/fake_kubelet.py`): a real HTTPS process on
//! 127.0.0.1 that demands a client certificate, with its own CA; stopped by its PID on drop.
//!
//! One CA signs the kubelet's serving certificate (for 127.0.0.1) and the client certificate
//! kapi presents (`--kubelet-client-certificate`), as kubeadm's cluster CA does.

use std::path::PathBuf;
use std::process::Child;

use tempfile::TempDir;

use crate::process::start_python_helper;
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
        let port_arg = port.to_string();
        let (cert, key, ca) = (d.join("kubelet.crt"), d.join("kubelet.key"), d.join("ca.crt"));
        let args = [port_arg.as_ref(), cert.as_os_str(), key.as_os_str(), ca.as_os_str()];
        let child = start_python_helper("fake_kubelet.py", &args, "the fake kubelet")?;
        Ok(FakeKubelet { child, port, dir })
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
