//! Raw HTTPS requests to a server: the request builder, the answers, who sends them, and an
//! [`Endpoint`] that sends them through curl from any thread.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::{io_err, run_with_timeout, Connections, HarnessError, COMMAND_TIMEOUT, HARNESS_AGENT};

/// Result of a raw HTTPS request: the status code and the body (JSON when it parses, else a
/// JSON string holding the raw text).
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    pub body: Value,
    pub raw: String,
}

impl HttpResponse {
    /// `reason` of a `metav1.Status` body (empty when absent).
    pub fn reason(&self) -> &str {
        self.body.get("reason").and_then(Value::as_str).unwrap_or("")
    }

    /// `message` of a `metav1.Status` body (empty when absent).
    pub fn message(&self) -> &str {
        self.body.get("message").and_then(Value::as_str).unwrap_or("")
    }
}

/// An answer with its raw headers, from [`Kapi::get_with_headers`].
#[derive(Debug, Clone)]
pub struct RawAnswer {
    pub status: u16,
    /// The header block, lowercased.
    pub headers: String,
    pub body: String,
}

/// One raw request for [`Kapi::request`]; a builder so bad-input tables stay readable.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub body: Option<Vec<u8>>,
    pub content_type: Option<String>,
    pub accept: Option<String>,
    /// Send the admin client certificate (false: anonymous TLS client).
    pub client_cert: bool,
    /// Send this client certificate and key (PEM files) instead of the admin one.
    pub other_cert: Option<(PathBuf, PathBuf)>,
    /// Extra request headers (bearer tokens, impersonation).
    pub headers: Vec<(String, String)>,
}

impl Request {
    pub fn new(method: &str, path: &str) -> Self {
        Self {
            method: method.to_owned(),
            path: path.to_owned(),
            body: None,
            content_type: None,
            accept: Some("application/json".to_owned()),
            client_cert: true,
            other_cert: None,
            headers: Vec::new(),
        }
    }

    /// Adds a request header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Sends the request as `cred` instead of the admin.
    pub fn as_user(mut self, cred: &Credential) -> Self {
        match cred {
            Credential::Anonymous => self.client_cert = false,
            Credential::Token(token) => {
                self.client_cert = false;
                self = self.header("Authorization", &format!("Bearer {token}"));
            }
            Credential::Cert { cert, key } => self.other_cert = Some((cert.clone(), key.clone())),
        }
        self
    }

    pub fn get(path: &str) -> Self {
        Self::new("GET", path)
    }

    /// A JSON body with `application/json`.
    pub fn json(mut self, body: &Value) -> Self {
        self.body = Some(body.to_string().into_bytes());
        self.content_type = Some("application/json".to_owned());
        self
    }

    /// Raw bytes with an explicit content type.
    pub fn raw(mut self, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self.content_type = Some(content_type.to_owned());
        self
    }

    pub fn accept(mut self, accept: &str) -> Self {
        self.accept = Some(accept.to_owned());
        self
    }

    pub fn without_client_cert(mut self) -> Self {
        self.client_cert = false;
        self
    }

    /// Presents another client certificate (for example one from another kapi's CA).
    pub fn with_client_cert(mut self, cert: PathBuf, key: PathBuf) -> Self {
        self.other_cert = Some((cert, key));
        self
    }
}

/// How a non-admin test client authenticates.
#[derive(Debug, Clone)]
pub enum Credential {
    /// No credentials at all.
    Anonymous,
    /// `Authorization: Bearer <token>`.
    Token(String),
    /// A client certificate and its key (PEM files).
    Cert { cert: PathBuf, key: PathBuf },
}

/// A server's address and the admin credentials to reach it, usable from any thread.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// The PKI directory (ca.crt, admin.crt, admin.key).
    pub pki: PathBuf,
    pub(crate) scratch: PathBuf,
}

impl Endpoint {
    /// An address in front of servers using the PKI in `pki` (a load balancer); request bodies
    /// are staged in `scratch`.
    pub fn new(url: String, pki: PathBuf, scratch: PathBuf) -> Self {
        Self { url, pki, scratch }
    }

    /// One HTTPS request through curl; status 0 when no answer came (connection refused).
    pub fn try_request(&self, req: &Request) -> Result<HttpResponse, HarnessError> {
        let (mut cmd, body_file) = self.curl(req)?;
        let out = run_with_timeout(&mut cmd, COMMAND_TIMEOUT)?;
        drop(body_file);
        Ok(curl_answer(&out.stdout))
    }

    /// [`Endpoint::try_request`] whose curl is registered in `connections` while it runs, so
    /// that a fault injector can cut it ([`Connections::cut`]). With no answer (status 0),
    /// `raw` is curl's error (`curl: (7) ...` when it could not connect: nothing was sent).
    pub fn try_request_cuttable(&self, req: &Request, connections: &Connections) -> Result<HttpResponse, HarnessError> {
        let (mut cmd, body_file) = self.curl(req)?;
        let out = connections.run(&mut cmd)?;
        drop(body_file);
        let mut answer = curl_answer(&out.stdout);
        if answer.status == 0 && answer.raw.is_empty() {
            answer.raw = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        }
        Ok(answer)
    }

    /// The curl command for `req` (and the staged body file, to keep until it has run).
    fn curl(&self, req: &Request) -> Result<(Command, Option<tempfile::NamedTempFile>), HarnessError> {
        let pki = &self.pki;
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "--max-time", "30", "-X", &req.method, "-w", "\n%{http_code}", "-A", HARNESS_AGENT])
            .arg("--cacert")
            .arg(pki.join("ca.crt"));
        if let Some((cert, key)) = &req.other_cert {
            cmd.arg("--cert").arg(cert).arg("--key").arg(key);
        } else if req.client_cert {
            cmd.arg("--cert").arg(pki.join("admin.crt")).arg("--key").arg(pki.join("admin.key"));
        }
        if let Some(accept) = &req.accept {
            cmd.arg("-H").arg(format!("Accept: {accept}"));
        }
        if let Some(ct) = &req.content_type {
            cmd.arg("-H").arg(format!("Content-Type: {ct}"));
        }
        for (name, value) in &req.headers {
            cmd.arg("-H").arg(format!("{name}: {value}"));
        }
        let body_file = match &req.body {
            Some(body) => {
                let f = tempfile::NamedTempFile::new_in(&self.scratch).map_err(io_err("creating a body file"))?;
                std::fs::write(f.path(), body).map_err(io_err("writing a body file"))?;
                cmd.arg("--data-binary").arg(format!("@{}", f.path().display()));
                Some(f)
            }
            None => None,
        };
        cmd.arg(format!("{}{}", self.url, req.path));
        Ok((cmd, body_file))
    }

}

/// curl's output (`-w "\n%{http_code}"`) as an answer.
fn curl_answer(stdout: &[u8]) -> HttpResponse {
    let text = String::from_utf8_lossy(stdout).into_owned();
    let (raw, code) = match text.rsplit_once('\n') {
        Some((raw, code)) => (raw.to_owned(), code.trim().to_owned()),
        None => (String::new(), text.trim().to_owned()),
    };
    let status = code.parse::<u16>().unwrap_or(0);
    let body = serde_json::from_str(&raw).unwrap_or_else(|_| Value::String(raw.clone()));
    HttpResponse { status, body, raw }
}
