//! End-to-end harness: starts the real `kapi` binary on a private data dir and a free port, and
//! drives it with real clients (kubectl, curl, the Python client).
//!
//! Every wait is bounded, every process is stopped by its PID, and the server log is printed when
//! a test panics so a failure can be diagnosed from the test output alone.

#![forbid(unsafe_code)]

pub mod changes;
pub mod flowcontrol;
pub mod linearizability;
pub mod reflector;
pub mod soak;
mod haproxy;
mod kubelet;
pub mod load;
mod nats;
mod process;
mod split;
pub mod raw;
mod request;
pub mod scan;
mod admission_webhook;
mod auth_webhook;
mod extension_apiserver;
mod oidc_issuer;
mod otlp_receiver;
mod webhook;

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

pub use haproxy::Haproxy;
pub use kubelet::{FakeKubelet, KUBELET_CLIENT_CN};
pub use nats::{free_port, NatsServer, NatsTap};
pub use process::{run_with_timeout, Connections, OutputExt, Streaming};
pub use request::{Credential, Endpoint, HttpResponse, RawAnswer, Request};
pub use admission_webhook::AdmissionWebhook;
pub use auth_webhook::AuthWebhook;
pub use extension_apiserver::{ExtensionApiServer, FrontProxyCerts};
pub use oidc_issuer::OidcIssuer;
pub use otlp_receiver::OtlpReceiver;
pub use webhook::ConversionWebhook;

/// How long the server may take to print its "Serving securely on" line, and then to pass
/// `/readyz`.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a graceful shutdown may take before the harness falls back to SIGKILL.
const TERMINATE_TIMEOUT: Duration = Duration::from_secs(30);
/// Upper bound for any single client command (kubectl, curl) run by the harness.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
const READY_LINE: &str = "Serving securely on ";

/// Why the harness could not do what a test asked. Tests usually `expect` these: a harness
/// failure is a test failure, but the message must say which step broke.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error("cannot find the kapi binary at {0} (build it with `cargo build -p kapi` or set KAPI_BIN)")]
    BinaryMissing(PathBuf),
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
    #[error("kapi exited before it was ready ({status}); log:\n{log}")]
    ExitedEarly { status: String, log: String },
    #[error("kapi did not print its ready line within {timeout:?}; log:\n{log}")]
    StartTimeout { timeout: Duration, log: String },
    #[error("kapi did not pass /readyz within {timeout:?}; last answer {last}; log:\n{log}")]
    NotReady { timeout: Duration, last: String, log: String },
    #[error("cannot parse the ready line {0:?}")]
    BadReadyLine(String),
    #[error("command {command} timed out after {timeout:?}")]
    Timeout { command: String, timeout: Duration },
    #[error("cannot find {0} on PATH")]
    NotOnPath(String),
    #[error("kapi is not running")]
    NotRunning,
}

fn io_err(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> HarnessError {
    let context = context.into();
    move |source| HarnessError::Io { context, source }
}

/// The User-Agent of the harness's curl requests. kube pretty-prints JSON for agents starting
/// with `curl` (a person at a terminal); the harness is a program and reads compact JSON unless
/// a test sends its own User-Agent header.
pub const HARNESS_AGENT: &str = "kapi-e2e";

/// Locates the kapi binary: `KAPI_BIN`, or `target/debug/kapi` next to the test's deps folder.
pub fn kapi_binary() -> Result<PathBuf, HarnessError> {
    if let Some(bin) = std::env::var_os("KAPI_BIN") {
        let bin = PathBuf::from(bin);
        return if bin.is_file() { Ok(bin) } else { Err(HarnessError::BinaryMissing(bin)) };
    }
    let exe = std::env::current_exe().map_err(io_err("reading the test executable path"))?;
    let candidate = exe
        .parent()
        .and_then(Path::parent)
        .map(|debug| debug.join("kapi"))
        .ok_or_else(|| HarnessError::BinaryMissing(exe.clone()))?;
    if candidate.is_file() {
        Ok(candidate)
    } else {
        Err(HarnessError::BinaryMissing(candidate))
    }
}

/// Finds `name` on PATH, the way a shell's `command -v` does.
pub fn which(name: &str) -> Result<PathBuf, HarnessError> {
    let path = std::env::var_os("PATH").ok_or_else(|| HarnessError::NotOnPath(name.to_owned()))?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| HarnessError::NotOnPath(name.to_owned()))
}

/// The versioned kubectl (`kubectl.1.27`, ...) installed beside the real default kubectl.
pub fn versioned_kubectl(version: &str) -> Result<PathBuf, HarnessError> {
    let default = which("kubectl")?;
    let real = std::fs::canonicalize(&default).map_err(io_err(format!("resolving {}", default.display())))?;
    let dir = real.parent().ok_or_else(|| HarnessError::NotOnPath(format!("kubectl.{version}")))?;
    let candidate = dir.join(format!("kubectl.{version}"));
    if candidate.is_file() {
        Ok(candidate)
    } else {
        Err(HarnessError::NotOnPath(candidate.display().to_string()))
    }
}

/// The versioned kubectl a test needs, or None after saying why the test skips: the older
/// kubectls (`kubectl.1.27` ... `kubectl.1.33`) exist only on machines that installed them
/// beside kubectl; `scripts/test.sh` installs the default kubectl alone.
pub fn versioned_kubectl_or_skip(version: &str) -> Option<PathBuf> {
    match versioned_kubectl(version) {
        Ok(bin) => Some(bin),
        Err(e) => {
            eprintln!("skipping what needs kubectl {version}: it is not installed here ({e})");
            None
        }
    }
}

/// Whether `out` is kubectl's report that it deleted `object` (`configmap "a"`) of
/// `namespace`, whatever kubectl's version: `configmap "a" deleted`, or since kubectl 1.36
/// `configmap "a" deleted from ns namespace`; `suffix` (such as ` (server dry run)`) follows.
pub fn is_deletion_report(out: &str, object: &str, namespace: &str, suffix: &str) -> bool {
    let out = out.trim();
    out == format!("{object} deleted{suffix}") || out == format!("{object} deleted from {namespace} namespace{suffix}")
}

/// Shared log sink: both output pipes append here so the order of lines is roughly preserved.
type LogSink = Arc<Mutex<File>>;

/// A running (or stopped) kapi on its own temp data dir (or sharing another's, see
/// [`Kapi::start_replica`]). Dropping it kills the process and removes the data dir once no
/// replica uses it; when the current thread is panicking the log is printed first.
///
/// Starting waits for the "Serving securely on" line, then for `/readyz` to pass: the listener
/// is up before post-start hooks have run.
pub struct Kapi {
    dir: Arc<TempDir>,
    /// The binary, beside `kapi` (`kapi`, `kapi-aggregator`, `kapi-core`, `kapi-extensions`).
    binary: &'static str,
    args: Vec<String>,
    child: Option<Child>,
    port: u16,
    log_path: PathBuf,
    pumps: Vec<JoinHandle<()>>,
    /// With `KAPI_E2E_SPLIT` set: the kapi-core and kapi-extensions replicas behind this
    /// kapi-aggregator (see [`Kapi::start_with`]).
    behind: Vec<Kapi>,
    /// With `KAPI_E2E_SPLIT` set: haproxy in front of this kapi-aggregator and a second one
    /// (in `behind`); clients and the admin kubeconfig go through it.
    front: Option<Haproxy>,
    /// With `KAPI_E2E_SPLIT` set: the nats-server the tiers share for watch fan-out.
    nats: Option<NatsServer>,
}

impl Kapi {
    /// Starts kapi with default flags on a fresh data dir.
    pub fn start() -> Result<Self, HarnessError> {
        Self::start_with(&[])
    }

    /// Starts kapi with extra flags (for example `--watch-cache-size 8`) on a fresh data dir.
    ///
    /// With `KAPI_E2E_SPLIT` set in the environment the "kapi" is a split deployment: a
    /// nats-server, a kapi-core and a kapi-extensions replica with these flags (but
    /// `--secure-port`), in front of them two kapi-aggregators with them all, and haproxy in
    /// front of those, which
    /// is what the test talks to; so the same tests check that the tiers as separate services
    /// behind a load balancer answer as the all-in-one does. Restarts and signals reach the
    /// first aggregator only (it keeps its port, so haproxy finds it again).
    pub fn start_with(args: &[&str]) -> Result<Self, HarnessError> {
        if std::env::var_os("KAPI_E2E_SPLIT").is_some() {
            return Self::start_split(args);
        }
        let dir = tempfile::Builder::new().prefix("kapi-e2e-").tempdir().map_err(io_err("creating the data dir"))?;
        let log_path = dir.path().join("kapi.log");
        let mut kapi = Self {
            dir: Arc::new(dir),
            binary: "kapi",
            args: args.iter().map(|s| (*s).to_owned()).collect(),
            child: None,
            port: 0,
            log_path,
            pumps: Vec::new(),
            behind: Vec::new(),
            front: None,
            nats: None,
        };
        kapi.spawn(true)?;
        Ok(kapi)
    }

    fn replica(&self, args: &[&str]) -> Self {
        let replicas = std::fs::read_dir(self.dir.path()).map(|d| d.count()).unwrap_or(0);
        Self {
            dir: self.dir.clone(),
            binary: "kapi",
            args: args.iter().map(|s| (*s).to_owned()).collect(),
            child: None,
            port: 0,
            log_path: self.dir.path().join(format!("kapi-replica-{replicas}.log")),
            pumps: Vec::new(),
            behind: Vec::new(),
            front: None,
            nats: None,
        }
    }

    /// Starts another replica on this one's data dir (shared database and certificates) with
    /// its own flags, port and log. The shared admin kubeconfig names the replica started
    /// last, so talk to replicas with [`Kapi::request`], which uses each one's own URL.
    pub fn start_replica(&self, args: &[&str]) -> Result<Self, HarnessError> {
        let mut kapi = self.replica(args);
        kapi.spawn(true)?;
        Ok(kapi)
    }

    /// Starts another binary of the project (`kapi-core`, `kapi-extensions`,
    /// `kapi-aggregator`: one tier each) on this one's data dir, as [`Kapi::start_replica`].
    pub fn start_tier(&self, binary: &'static str, args: &[&str]) -> Result<Self, HarnessError> {
        let mut kapi = self.replica(args);
        kapi.binary = binary;
        kapi.spawn(true)?;
        Ok(kapi)
    }

    /// Starts `binary` (see [`Kapi::start_tier`]) first, on a fresh data dir.
    pub fn start_binary(binary: &'static str, args: &[&str]) -> Result<Self, HarnessError> {
        let dir = tempfile::Builder::new().prefix("kapi-e2e-").tempdir().map_err(io_err("creating the data dir"))?;
        let log_path = dir.path().join(format!("{binary}.log"));
        let mut kapi = Self { dir: Arc::new(dir), binary, args: args.iter().map(|s| (*s).to_owned()).collect(), child: None, port: 0, log_path, pumps: Vec::new(), behind: Vec::new(), front: None, nats: None };
        kapi.spawn(true)?;
        Ok(kapi)
    }

    /// Starts `n` replicas at the same moment on one fresh data dir (they race to create the
    /// database and certificates), and waits until each is ready.
    pub fn start_replicas(n: usize, args: &[&str]) -> Result<Vec<Self>, HarnessError> {
        let dir = tempfile::Builder::new().prefix("kapi-e2e-").tempdir().map_err(io_err("creating the data dir"))?;
        let first = Self {
            log_path: dir.path().join("kapi.log"),
            dir: Arc::new(dir),
            binary: "kapi",
            args: args.iter().map(|s| (*s).to_owned()).collect(),
            child: None,
            port: 0,
            pumps: Vec::new(),
            behind: Vec::new(),
            front: None,
            nats: None,
        };
        let mut replicas = vec![first];
        while replicas.len() < n {
            // Each replica's log file exists before the next is named.
            let next = replicas[0].replica(args);
            File::create(&next.log_path).map_err(io_err(format!("creating {}", next.log_path.display())))?;
            replicas.push(next);
        }
        let mut launched = Vec::new();
        for kapi in &mut replicas {
            launched.push(kapi.launch()?);
        }
        for (kapi, ready_rx) in replicas.iter_mut().zip(launched) {
            kapi.await_start(ready_rx, true)?;
        }
        Ok(replicas)
    }

    /// Starts a stopped server again on the same data dir and flags (it picks a new port and
    /// rewrites the kubeconfig).
    pub fn restart(&mut self) -> Result<(), HarnessError> {
        if self.child.is_some() {
            self.kill9();
        }
        self.spawn(true)
    }

    /// Like [`Kapi::restart`], but returns as soon as the listener is up, before the server is
    /// ready (to observe start-up).
    pub fn restart_listening(&mut self) -> Result<(), HarnessError> {
        if self.child.is_some() {
            self.kill9();
        }
        self.spawn(false)
    }

    /// Waits (bounded) until `/readyz` answers 200.
    pub fn wait_ready(&self, timeout: Duration) -> Result<(), HarnessError> {
        self.wait_ready_at(&self.endpoint(), timeout)
    }

    /// Waits (bounded) until `/readyz` at `endpoint` answers 200.
    fn wait_ready_at(&self, endpoint: &Endpoint, timeout: Duration) -> Result<(), HarnessError> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match endpoint.try_request(&Request::get("/readyz").accept("*/*")) {
                Ok(r) if r.status == 200 => return Ok(()),
                Ok(r) => format!("{}: {}", r.status, r.raw),
                Err(e) => e.to_string(),
            };
            if Instant::now() >= deadline {
                return Err(HarnessError::NotReady { timeout, last, log: self.log() });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The `--data-dir` (database, certificates, kubeconfig).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn spawn(&mut self, wait_ready: bool) -> Result<(), HarnessError> {
        let ready_rx = self.launch()?;
        self.await_start(ready_rx, wait_ready)?;
        self.aim_kubeconfig_at_front()
    }

    /// Starts the process; its stdout lines arrive on the returned channel.
    fn launch(&mut self) -> Result<mpsc::Receiver<String>, HarnessError> {
        let bin = kapi_binary()?;
        let bin = if self.binary == "kapi" { bin } else { bin.with_file_name(self.binary) };
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .map_err(io_err(format!("opening {}", self.log_path.display())))?;
        let sink: LogSink = Arc::new(Mutex::new(log));
        let mut cmd = Command::new(&bin);
        // A free port unless the test fixes one (replicas behind a load balancer keep theirs).
        if !self.args.iter().any(|a| a == "--secure-port" || a.starts_with("--secure-port=")) {
            cmd.arg("--secure-port").arg("0");
        }
        cmd.arg("--bind-address")
            .arg("127.0.0.1")
            .arg("--data-dir")
            .arg(self.data_dir())
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(io_err(format!("spawning {}", bin.display())))?;
        let (ready_tx, ready_rx) = mpsc::sync_channel::<String>(16);
        if let Some(out) = child.stdout.take() {
            self.pumps.push(pump(out, sink.clone(), Some(ready_tx)));
        }
        if let Some(err) = child.stderr.take() {
            self.pumps.push(pump(err, sink, None));
        }
        self.child = Some(child);
        Ok(ready_rx)
    }

    /// Waits for the ready line (and then `/readyz` when asked).
    fn await_start(&mut self, ready_rx: mpsc::Receiver<String>, wait_ready: bool) -> Result<(), HarnessError> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.kill9();
                return Err(HarnessError::StartTimeout { timeout: START_TIMEOUT, log: self.log() });
            }
            match ready_rx.recv_timeout(left.min(Duration::from_millis(500))) {
                Ok(line) => {
                    if let Some(rest) = line.split(READY_LINE).nth(1) {
                        let port = rest
                            .trim()
                            .rsplit(':')
                            .next()
                            .and_then(|p| p.parse::<u16>().ok())
                            .ok_or_else(|| HarnessError::BadReadyLine(line.clone()))?;
                        self.port = port;
                        if wait_ready {
                            let left = deadline.saturating_duration_since(Instant::now());
                            // This process, not the load balancer in front of it.
                            let own = Endpoint { url: format!("https://127.0.0.1:{port}"), ..self.endpoint() };
                            if let Err(e) = self.wait_ready_at(&own, left) {
                                self.kill9();
                                return Err(e);
                            }
                        }
                        return Ok(());
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = self
                        .child
                        .as_mut()
                        .map(|c| match c.wait() {
                            Ok(s) => s.to_string(),
                            Err(e) => e.to_string(),
                        })
                        .unwrap_or_default();
                    self.child = None;
                    self.join_pumps();
                    return Err(HarnessError::ExitedEarly { status, log: self.log() });
                }
            }
        }
    }

    fn join_pumps(&mut self) {
        for p in self.pumps.drain(..) {
            let _ = p.join();
        }
    }

    /// The process id of the running server.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Where clients connect: the server's port, or haproxy's in front of a split deployment.
    pub fn port(&self) -> u16 {
        self.front.as_ref().map_or(self.port, Haproxy::port)
    }

    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port())
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.data_dir().join("kubeconfig")
    }

    /// Where this server answers, detached from the process handle so that client threads can
    /// keep using it while the test restarts or kills the server.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint { url: self.url(), pki: self.pki_dir(), scratch: self.dir.path().to_owned() }
    }

    pub fn pki_dir(&self) -> PathBuf {
        self.data_dir().join("pki")
    }

    /// Everything the server printed so far.
    pub fn log(&self) -> String {
        let mut log = std::fs::read_to_string(&self.log_path).unwrap_or_default();
        for tier in &self.behind {
            log.push_str(&format!("\n===== {} =====\n{}", tier.binary, tier.log()));
        }
        log
    }

    /// SIGKILL (no chance to flush or clean up) and reap the process.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.join_pumps();
    }

    /// SIGTERM through the `kill` command, then wait (bounded) for a clean exit. Returns the exit
    /// code (None when it had to be SIGKILLed or died by a signal).
    pub fn terminate(&mut self) -> Result<Option<i32>, HarnessError> {
        let mut child = self.child.take().ok_or(HarnessError::NotRunning)?;
        let pid = child.id().to_string();
        let out = run_with_timeout(Command::new("kill").args(["-TERM", &pid]), Duration::from_secs(10))?;
        if !out.status.success() {
            let _ = child.kill();
        }
        let deadline = Instant::now() + TERMINATE_TIMEOUT;
        let code = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status.code(),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        self.join_pumps();
        Ok(code)
    }

    /// Sends a signal (for example "KILL") by PID through the `kill` command without reaping
    /// the process, so other threads can keep using `&self` while the server dies under them.
    pub fn signal(&self, sig: &str) -> Result<(), HarnessError> {
        let pid = self.pid().ok_or(HarnessError::NotRunning)?.to_string();
        let out = run_with_timeout(Command::new("kill").arg(format!("-{sig}")).arg(&pid), Duration::from_secs(10))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(HarnessError::Io {
                context: format!("kill -{sig} {pid}"),
                source: std::io::Error::other(String::from_utf8_lossy(&out.stderr).into_owned()),
            })
        }
    }

    /// Writes `text` (a manifest, a script) under this server's data directory; its path.
    pub fn write_file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.data_dir().join(name);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    /// Runs the default `kubectl` against this server.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_with(Path::new("kubectl"), args)
    }

    /// Runs `kubectl.<version>` (for example "1.27") against this server.
    pub fn kubectl_as(&self, version: &str, args: &[&str]) -> Output {
        match versioned_kubectl(version) {
            Ok(bin) => self.kubectl_with(&bin, args),
            Err(e) => panic!("{e}"),
        }
    }

    /// Runs the given kubectl binary with `--kubeconfig` set, bounded by [`COMMAND_TIMEOUT`].
    pub fn kubectl_with(&self, bin: &Path, args: &[&str]) -> Output {
        let mut cmd = self.kubectl_command(bin, args);
        match run_with_timeout(&mut cmd, COMMAND_TIMEOUT) {
            Ok(out) => out,
            Err(e) => panic!("kubectl {}: {e}", args.join(" ")),
        }
    }

    /// A ready-to-spawn kubectl command (for background use such as `get --watch`).
    pub fn kubectl_command(&self, bin: &Path, args: &[&str]) -> Command {
        self.kubectl_command_with(bin, &self.kubeconfig(), args)
    }

    fn kubectl_command_with(&self, bin: &Path, kubeconfig: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(bin);
        cmd.arg("--kubeconfig").arg(kubeconfig).args(args);
        // Keep kubectl away from the user's cache and config.
        cmd.env("KUBECACHEDIR", self.dir.path().join("kubecache"));
        cmd.env_remove("KUBECONFIG");
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Issues a client certificate from this server's CA with `openssl` (CN = user, O = groups).
    pub fn issue_client_cert(&self, user: &str, groups: &[&str]) -> Credential {
        let pki = self.pki_dir();
        let base = self.dir.path().join(format!("client-{}", user.replace([':', '/'], "_")));
        let (key, csr, cert) = (base.with_extension("key"), base.with_extension("csr"), base.with_extension("crt"));
        let mut subject = format!("/CN={user}");
        for g in groups {
            subject.push_str(&format!("/O={g}"));
        }
        let run = |args: &[&std::ffi::OsStr]| {
            let out = Command::new("openssl").args(args).output().unwrap_or_else(|e| panic!("openssl: {e}"));
            assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        run(&["req".as_ref(), "-new".as_ref(), "-newkey".as_ref(), "ec".as_ref(), "-pkeyopt".as_ref(), "ec_paramgen_curve:P-256".as_ref(),
            "-nodes".as_ref(), "-keyout".as_ref(), key.as_os_str(), "-out".as_ref(), csr.as_os_str(), "-subj".as_ref(), subject.as_ref()]);
        // A v3 certificate with client-auth usage: webpki refuses v1 certificates.
        let ext = base.with_extension("ext");
        if let Err(e) = std::fs::write(&ext, "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n") {
            panic!("writing {}: {e}", ext.display());
        }
        run(&["x509".as_ref(), "-req".as_ref(), "-extfile".as_ref(), ext.as_os_str(), "-in".as_ref(), csr.as_os_str(), "-CA".as_ref(), pki.join("ca.crt").as_os_str(),
            "-CAkey".as_ref(), pki.join("ca.key").as_os_str(), "-CAcreateserial".as_ref(), "-days".as_ref(), "1".as_ref(),
            "-out".as_ref(), cert.as_os_str()]);
        Credential::Cert { cert, key }
    }

    /// Writes a kubeconfig for `cred` (named `name`) pointing at this server; the file follows
    /// the server's current port only until a restart.
    pub fn kubeconfig_for(&self, name: &str, cred: &Credential) -> PathBuf {
        let user = match cred {
            Credential::Anonymous => serde_json::json!({}),
            Credential::Token(token) => serde_json::json!({"token": token}),
            Credential::Cert { cert, key } => serde_json::json!({"client-certificate": cert, "client-key": key}),
        };
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kapi", "cluster": {"server": self.url(), "certificate-authority": self.pki_dir().join("ca.crt")}}],
            "users": [{"name": name, "user": user}],
            "contexts": [{"name": name, "context": {"cluster": "kapi", "user": name}}],
            "current-context": name,
        });
        let path = self.dir.path().join(format!("kubeconfig-{}", name.replace([':', '/'], "_")));
        if let Err(e) = std::fs::write(&path, config.to_string()) {
            panic!("writing {}: {e}", path.display());
        }
        path
    }

    /// Runs the default kubectl with another kubeconfig (see [`Kapi::kubeconfig_for`]).
    pub fn kubectl_config(&self, kubeconfig: &Path, args: &[&str]) -> Output {
        let mut cmd = self.kubectl_command_with(Path::new("kubectl"), kubeconfig, args);
        match run_with_timeout(&mut cmd, COMMAND_TIMEOUT) {
            Ok(out) => out,
            Err(e) => panic!("kubectl {}: {e}", args.join(" ")),
        }
    }

    /// One HTTPS request through curl with the admin client certificate (unless told not to).
    pub fn request(&self, req: &Request) -> HttpResponse {
        match self.try_request(req) {
            Ok(r) => r,
            Err(e) => panic!("{} {}: {e}", req.method, req.path),
        }
    }

    pub fn try_request(&self, req: &Request) -> Result<HttpResponse, HarnessError> {
        self.endpoint().try_request(req)
    }

    /// An HTTP/1.1 GET through curl keeping the response headers (lowercased), for checks on
    /// `Retry-After`, `Connection` and the like. `cert`: None for no client certificate,
    /// Some((cert, key)) for another one; the admin certificate when `admin` is true.
    pub fn get_with_headers(&self, path: &str, admin: bool, cert: Option<&(PathBuf, PathBuf)>) -> RawAnswer {
        let pki = self.pki_dir();
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "--http1.1", "--max-time", "60", "-D", "-", "-o", "-", "-w", "\n%{http_code}", "-A", HARNESS_AGENT])
            .arg("--cacert")
            .arg(pki.join("ca.crt"));
        match (cert, admin) {
            (Some((c, k)), _) => {
                cmd.arg("--cert").arg(c).arg("--key").arg(k);
            }
            (None, true) => {
                cmd.arg("--cert").arg(pki.join("admin.crt")).arg("--key").arg(pki.join("admin.key"));
            }
            (None, false) => {}
        }
        cmd.arg(format!("{}{path}", self.url()));
        let out = match run_with_timeout(&mut cmd, Duration::from_secs(90)) {
            Ok(out) => out,
            Err(e) => panic!("GET {path}: {e}"),
        };
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (rest, code) = text.rsplit_once('\n').unwrap_or(("", ""));
        let (headers, body) = rest.split_once("\r\n\r\n").unwrap_or((rest, ""));
        RawAnswer { status: code.trim().parse().unwrap_or(0), headers: headers.to_ascii_lowercase(), body: body.to_owned() }
    }

    /// GET returning the parsed JSON body; panics (with the answer) unless the status is 200.
    pub fn get_json(&self, path: &str) -> Value {
        let r = self.request(&Request::get(path));
        assert_eq!(r.status, 200, "GET {path}: {}", r.raw);
        r.body
    }
}

impl Drop for Kapi {
    fn drop(&mut self) {
        self.kill9();
        if std::thread::panicking() {
            eprintln!("===== kapi log ({}) =====\n{}\n===== end of kapi log =====", self.log_path.display(), self.log());
        }
    }
}

/// Copies a child's pipe line by line into the log; stdout lines also go to `ready` (until the
/// receiver is gone) so `spawn` can see the ready line.
fn pump(pipe: impl Read + Send + 'static, sink: LogSink, ready: Option<mpsc::SyncSender<String>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut ready = ready;
        let mut reader = BufReader::new(pipe);
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if let Ok(mut f) = sink.lock() {
                        let _ = f.write_all(line.as_bytes());
                    }
                    if let Some(tx) = &ready {
                        if tx.send(line.trim_end().to_owned()).is_err() || line.contains(READY_LINE) {
                            ready = None;
                        }
                    }
                }
            }
        }
    })
}

/// The directory holding the e2e fixtures.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
}

/// Polls `check` every 200 ms until it returns Some or `timeout` passes.
pub fn wait_for<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_builder_sets_json_body_and_type() {
        let r = Request::new("POST", "/api/v1/namespaces").json(&serde_json::json!({"a": 1}));
        assert_eq!(r.content_type.as_deref(), Some("application/json"));
        assert_eq!(r.body.as_deref(), Some(&b"{\"a\":1}"[..]));
        assert!(r.client_cert);
        assert!(!r.clone().without_client_cert().client_cert);
    }

    #[test]
    fn which_finds_sh_and_rejects_missing() {
        assert!(which("sh").is_ok());
        assert!(matches!(which("definitely-not-a-command-xyz"), Err(HarnessError::NotOnPath(_))));
    }

    #[test]
    fn wait_for_times_out() {
        let start = Instant::now();
        assert_eq!(wait_for(Duration::from_millis(300), || None::<()>), None);
        assert!(start.elapsed() >= Duration::from_millis(300));
        assert_eq!(wait_for(Duration::from_secs(1), || Some(3)), Some(3));
    }
}
