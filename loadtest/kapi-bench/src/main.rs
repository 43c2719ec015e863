//! `kapi-bench`: measures a running kapi (creates/s, gets/s, LIST of many ConfigMaps, watch
//! event latency, memory) beside two baselines measured in the same run on the same machine:
//! the raw SQLite store's commit rate and a minimal hyper HTTPS handler's request rate.
//!
//! `kapi-bench --kapi-bin target/release/kapi --out docs/perf-run.md`; `--quick` uses tiny
//! counts so a test can check the tool end to end; `--only replicas` runs one section.

mod admission;
mod aggregator;
mod apf;
mod audit;
mod authz;
mod client;
mod crds;
mod encryption;
mod etcd;
mod observability;
mod rapid_reset;
mod replicas;
mod scale;
mod stats;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use kapi_storage::Store;
use serde_json::{json, Value};

use client::{Conn, Target};
use stats::{ms, Samples};

#[derive(Parser)]
#[command(
    name = "kapi-bench",
    about = "Benchmarks kapi against same-run baselines"
)]
struct Cli {
    /// The kapi binary to start (use a release build for real numbers).
    #[arg(long)]
    kapi_bin: PathBuf,
    /// Tiny counts: checks that every step works, measures nothing meaningful.
    #[arg(long)]
    quick: bool,
    /// Also write the markdown report here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run only these sections (repeatable); all of them by default.
    #[arg(long, value_enum)]
    only: Vec<Section>,
    /// nats-server binary for the replicas section (default: `nats-server` on the PATH; without
    /// one the NATS measurements are reported as skipped).
    #[arg(long)]
    nats_server: Option<PathBuf>,
}

/// Sections of the report.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Section {
    /// Writes, reads, LIST, watch latency, memory of one kapi, with their baselines.
    Core,
    /// RBAC decisions and authorized GETs.
    Authz,
    /// Several replicas on one SQLite file: cross-replica watch latency (NATS vs polling),
    /// throughput through 1 vs 3 replicas.
    Replicas,
    /// Many generated CRDs: time to Established, RSS per CRD, discovery and OpenAPI answer
    /// times, custom resources beside ConfigMaps.
    Crds,
    /// Creates with no admission webhook, one and five no-op validating webhooks.
    Admission,
    /// Creates and GETs without auditing and with every request audited at Metadata.
    Audit,
    /// Creates and GETs without the request metrics, with metrics only (the default), with
    /// tracing sampling 0 and 100%, with audit at Metadata (blocking and batch), interleaved.
    Observability,
    /// Secret creates and GETs with identity, aescbc and a KMS v2 plugin.
    Encryption,
    /// API Priority and Fairness off vs on: one user floods with LISTs while another does GETs
    /// and writes, a leader-election client renews a Lease and system:masters reads.
    Apf,
    /// kapi on etcd: creates vs etcd's own put rate, GET and consistent LIST vs SQLite,
    /// cross-replica watch delay with NATS vs etcd's watch alone.
    Etcd,
    /// HTTP/2 rapid reset: authenticated GET latency and kapi's CPU and memory while a client
    /// opens and resets thousands of streams, unauthenticated and authenticated.
    RapidReset,
    /// The tiers split: GET and watch-event latency through kapi-aggregator vs straight to
    /// kapi-core (the binaries beside --kapi-bin).
    Aggregator,
    /// 10,000 kubelet-like pod watches (field selectors, HTTP/2) at 1,000 creates/s: delivery
    /// delay and memory per watcher; a restart on 300,000 ConfigMaps: time to ready and RSS.
    Scale,
}

struct Plan {
    objects: usize,
    concurrency: usize,
    lists: usize,
    watch_rate: u64,
    watch_secs: u64,
    watchers: [usize; 2],
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Plan {
                objects: 200,
                concurrency: 8,
                lists: 3,
                watch_rate: 50,
                watch_secs: 1,
                watchers: [1, 5],
            }
        } else {
            Plan {
                objects: 10_000,
                concurrency: 32,
                lists: 30,
                watch_rate: 200,
                watch_secs: 5,
                watchers: [1, 100],
            }
        }
    }
}

fn main() {
    let cli = Cli::parse();
    kapi_server::tls::install_crypto_provider();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(run(&cli)) {
        Ok(report) => {
            println!("{report}");
            if let Some(out) = &cli.out {
                if let Err(e) = std::fs::write(out, &report) {
                    eprintln!("kapi-bench: writing {}: {e}", out.display());
                    std::process::exit(1);
                }
            }
        }
        Err(e) => {
            eprintln!("kapi-bench: {e}");
            std::process::exit(1);
        }
    }
}

/// Runs `op(state, i)` for i in 0..n on `concurrency` tasks, each with its own state from
/// `init` (a connection, a store handle); returns every operation's latency.
async fn spread<S, I, IFut, F, Fut>(
    n: usize,
    concurrency: usize,
    init: I,
    op: F,
) -> Result<Samples, String>
where
    S: Send + 'static,
    I: Fn() -> IFut,
    IFut: std::future::Future<Output = Result<S, String>> + Send + 'static,
    F: Fn(S, usize) -> Fut + Send + Sync + 'static + Clone,
    Fut: std::future::Future<Output = Result<S, String>> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (state, next, op) = (init(), next.clone(), op.clone());
        tasks.push(tokio::spawn(async move {
            let mut state = state.await?;
            let mut lat = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, String>(lat);
                }
                let t = Instant::now();
                state = op(state, i).await?;
                lat.push(t.elapsed());
            }
        }));
    }
    let mut all = Vec::with_capacity(n);
    for t in tasks {
        all.extend(t.await.map_err(|e| e.to_string())??);
    }
    Ok(Samples::with(all, started.elapsed()))
}

/// Runs `op(conn, i)` for i in 0..n over `concurrency` kept-alive connections.
async fn drive<F, Fut>(
    target: &Target,
    n: usize,
    concurrency: usize,
    op: F,
) -> Result<Samples, String>
where
    F: Fn(Conn, usize) -> Fut + Send + Sync + 'static + Clone,
    Fut: std::future::Future<Output = Result<Conn, String>> + Send,
{
    spread(
        n,
        concurrency,
        || {
            let target = target.clone();
            async move { target.connect().await }
        },
        op,
    )
    .await
}

fn check(status: StatusCode, want: StatusCode, body: &[u8], what: &str) -> Result<(), String> {
    if status == want {
        Ok(())
    } else {
        Err(format!(
            "{what}: HTTP {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        ))
    }
}

fn configmap(name: &str) -> Bytes {
    Bytes::from(
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"bench": "yes"}},
            "data": {"payload": "x".repeat(128)}}))
        .unwrap_or_default(),
    )
}

async fn baseline_store(plan: &Plan) -> Result<Samples, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("bench.db");
    let store = tokio::task::spawn_blocking(move || {
        kapi_storage::sqlite::SqliteStore::open(&path, Default::default())
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())?;
    spread(
        plan.objects,
        plan.concurrency,
        || {
            let store = store.clone();
            async move { Ok(store) }
        },
        |store, i| async move {
            store
                .create(
                    &format!("/registry/core/configmaps/bench/cm-{i}"),
                    configmap(&format!("cm-{i}")),
                )
                .await
                .map_err(|e| e.to_string())?;
            Ok(store)
        },
    )
    .await
}

/// A minimal hyper HTTPS server with the same TLS stack, answering a small fixed JSON body.
async fn baseline_http(plan: &Plan, pki_dir: &Path) -> Result<Samples, String> {
    let pki = kapi_server::pki::ensure_pki(pki_dir, &["localhost".into(), "127.0.0.1".into()])
        .map_err(|e| e.to_string())?;
    let tls = kapi_server::tls::server_config(
        &pki.serving_cert_pem,
        &pki.serving_key_pem,
        Some(&pki.ca_cert_pem),
    )
    .map_err(|e| e.to_string())?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let server = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let _ = tcp.set_nodelay(true);
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(|_req| async {
                    let body = http_body_util::Full::new(Bytes::from_static(
                        br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":200}"#,
                    ));
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(body))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    let target = Target::new(
        addr.to_string(),
        &pki.ca_cert_pem,
        Some((&pki.admin_cert_pem, &pki.admin_key_pem)),
    )?;
    let samples = drive(
        &target,
        plan.objects,
        plan.concurrency,
        |mut conn, _| async move {
            let (status, body) = conn.send(Method::GET, "/", None).await?;
            check(status, StatusCode::OK, &body, "baseline GET")?;
            Ok(conn)
        },
    )
    .await;
    server.abort();
    samples
}

struct Kapi {
    child: Child,
    target: Target,
    data: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

/// How long kapi may take to print its serving address.
const KAPI_START_TIMEOUT: Duration = Duration::from_secs(60);

impl Kapi {
    fn start(bin: &Path) -> Result<Kapi, String> {
        Self::start_with(bin, &[])
    }

    fn start_with(bin: &Path, args: &[&str]) -> Result<Kapi, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let data = dir.path().join("data");
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        Self::start_in(bin, data, &args, Some(dir), None)
    }

    /// Starts kapi on `data` (which may be shared with other replicas) and waits, at most
    /// `KAPI_START_TIMEOUT`, for its serving address; `dir` is removed when it stops; stderr
    /// goes to `log` if given.
    fn start_in(
        bin: &Path,
        data: PathBuf,
        args: &[String],
        dir: Option<tempfile::TempDir>,
        log: Option<&Path>,
    ) -> Result<Kapi, String> {
        let stderr = match log {
            Some(path) => Stdio::from(
                std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?,
            ),
            None => Stdio::null(),
        };
        let mut child = Command::new(bin)
            .args(["--secure-port", "0", "--log-level", "warn", "--data-dir"])
            .arg(&data)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads the address, then keeps draining stdout so kapi never writes into a closed pipe.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Some(a) = line.strip_prefix("Serving securely on ") {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(a.trim().to_owned());
                    }
                }
            }
        });
        let started = rx.recv_timeout(KAPI_START_TIMEOUT).map_err(|e| match e {
            std::sync::mpsc::RecvTimeoutError::Timeout => {
                format!("kapi did not serve within {KAPI_START_TIMEOUT:?}")
            }
            std::sync::mpsc::RecvTimeoutError::Disconnected => "kapi exited before serving".into(),
        });
        let target = started.and_then(|addr| {
            let read = |f: &str| {
                std::fs::read_to_string(data.join("pki").join(f)).map_err(|e| format!("{f}: {e}"))
            };
            Target::new(
                addr,
                &read("ca.crt")?,
                Some((&read("admin.crt")?, &read("admin.key")?)),
            )
        });
        match target {
            Ok(target) => Ok(Kapi {
                child,
                target,
                data,
                _dir: dir,
            }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                let log = log
                    .and_then(|p| std::fs::read_to_string(p).ok())
                    .unwrap_or_default();
                Err(format!(
                    "{e}{}{}",
                    if log.is_empty() { "" } else { ": " },
                    log.trim()
                ))
            }
        }
    }

    /// Waits until `/readyz` passes: "Serving securely on" only means the listener is up.
    async fn wait_ready(&self) -> Result<(), String> {
        let mut last = String::new();
        for _ in 0..600 {
            if let Ok(mut conn) = self.target.connect().await {
                match conn.send(Method::GET, "/readyz", None).await {
                    Ok((status, _)) if status == StatusCode::OK => return Ok(()),
                    Ok((status, body)) => last = format!("{status}: {}", String::from_utf8_lossy(&body)),
                    Err(e) => last = e,
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("kapi did not pass /readyz within 60s: {last}"))
    }

    /// A target presenting a client certificate for `user` (not a member of system:masters),
    /// issued by this server's CA.
    fn target_for(&self, user: &str, groups: &[&str]) -> Result<Target, String> {
        let read = |f: &str| {
            std::fs::read_to_string(self.data.join("pki").join(f)).map_err(|e| format!("{f}: {e}"))
        };
        let pki = kapi_server::pki::Pki {
            ca_cert_pem: read("ca.crt")?,
            ca_key_pem: read("ca.key")?,
            serving_cert_pem: read("apiserver.crt")?,
            serving_key_pem: read("apiserver.key")?,
            admin_cert_pem: read("admin.crt")?,
            admin_key_pem: read("admin.key")?,
        };
        let (cert, key) = kapi_server::pki::issue_client_cert(&pki, user, groups).map_err(|e| e.to_string())?;
        Target::new(self.target.addr.clone(), &pki.ca_cert_pem, Some((&cert, &key)))
    }

    /// CPU time (user + system) kapi has used so far, in seconds: the cost of a burst, read
    /// beside its latency because on a busy machine the latency also measures the neighbours.
    fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // Fields after the command name (which may hold spaces) start at state: utime and
        // stime are the 12th and 13th of them, in clock ticks (100 per second on Linux).
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let ticks: f64 = after.split_whitespace().skip(11).take(2).filter_map(|v| v.parse::<f64>().ok()).sum();
        ticks / 100.0
    }

    /// (VmRSS, VmHWM) in MiB.
    fn memory(&self) -> (f64, f64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
                .map_or(0.0, |kib| kib / 1024.0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }
}

impl Drop for Kapi {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const NS: &str = "/api/v1/namespaces/bench/configmaps";

/// Reads watch events until every revision in `want` was seen; returns receive times by rv.
async fn watch_collect(
    target: Target,
    from_rv: String,
    last_rv: Arc<std::sync::Mutex<Option<u64>>>,
) -> Result<Vec<(u64, Instant)>, String> {
    let mut conn = target.connect().await?;
    let resp = conn
        .start(
            Method::GET,
            &format!("{NS}?watch=true&resourceVersion={from_rv}&timeoutSeconds=120"),
            None,
        )
        .await?;
    if resp.status() != StatusCode::OK {
        return Err(format!("watch: HTTP {}", resp.status()));
    }
    let mut body = resp.into_body();
    let mut buf: Vec<u8> = Vec::new();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if Instant::now() > deadline {
            return Err("watch timed out".into());
        }
        // Short waits, so the end condition (set by the writer when it is done) is re-checked
        // even when the last event arrived before it was set.
        let frame = match tokio::time::timeout(Duration::from_millis(100), body.frame()).await {
            Ok(frame) => frame,
            Err(_) => {
                let last = *last_rv.lock().map_err(|e| e.to_string())?;
                if last.is_some_and(|last| seen.last().is_some_and(|(rv, _)| *rv >= last)) {
                    return Ok(seen);
                }
                continue;
            }
        };
        let Some(frame) = frame else {
            return Err("watch ended early".into());
        };
        let frame = frame.map_err(|e| e.to_string())?;
        let now = Instant::now();
        if let Ok(data) = frame.into_data() {
            buf.extend_from_slice(&data);
            while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=pos).collect();
                let event: Value =
                    serde_json::from_slice(&line).map_err(|e| format!("watch line: {e}"))?;
                let rv = event
                    .pointer("/object/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .and_then(|s| s.parse().ok());
                if let Some(rv) = rv {
                    seen.push((rv, now));
                }
            }
        }
        let done = last_rv
            .lock()
            .map_err(|e| e.to_string())?
            .is_some_and(|last| seen.last().is_some_and(|(rv, _)| *rv >= last));
        if done {
            return Ok(seen);
        }
    }
}

struct WatchResult {
    watchers: usize,
    after_ack: Samples,
    after_send: Samples,
}

async fn watch_latency(kapi: &Kapi, plan: &Plan, watchers: usize) -> Result<WatchResult, String> {
    let mut conn = kapi.target.connect().await?;
    let name = format!("watched-{watchers}");
    let (status, body) = conn.send(Method::POST, NS, Some(configmap(&name))).await?;
    check(status, StatusCode::CREATED, &body, "create watched")?;
    let created: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    let from_rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_owned();
    let last_rv = Arc::new(std::sync::Mutex::new(None));
    let mut handles = Vec::new();
    for _ in 0..watchers {
        handles.push(tokio::spawn(watch_collect(
            kapi.target.clone(),
            from_rv.clone(),
            last_rv.clone(),
        )));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let writes = plan.watch_rate * plan.watch_secs;
    let interval = Duration::from_secs_f64(1.0 / plan.watch_rate as f64);
    let mut sent = Vec::new();
    let start = Instant::now();
    for i in 0..writes {
        tokio::time::sleep_until((start + interval * i as u32).into()).await;
        let body = Bytes::from(
            serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"i": i.to_string()}}))
                .unwrap_or_default(),
        );
        let t0 = Instant::now();
        let (status, resp) = conn
            .send(Method::PUT, &format!("{NS}/{name}"), Some(body))
            .await?;
        let t1 = Instant::now();
        check(status, StatusCode::OK, &resp, "update watched")?;
        let v: Value = serde_json::from_slice(&resp).map_err(|e| e.to_string())?;
        let rv: u64 = v["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or("no resourceVersion")?;
        sent.push((rv, t0, t1));
    }
    let elapsed = start.elapsed();
    *last_rv.lock().map_err(|e| e.to_string())? = sent.last().map(|s| s.0);
    let mut after_ack = Vec::new();
    let mut after_send = Vec::new();
    for h in handles {
        let seen = h.await.map_err(|e| e.to_string())??;
        let by_rv: std::collections::HashMap<u64, Instant> = seen.into_iter().collect();
        for (rv, t0, t1) in &sent {
            let recv = by_rv
                .get(rv)
                .ok_or_else(|| format!("a watcher missed resourceVersion {rv}"))?;
            after_ack.push(recv.saturating_duration_since(*t1));
            after_send.push(recv.saturating_duration_since(*t0));
        }
    }
    Ok(WatchResult {
        watchers,
        after_ack: Samples::with(after_ack, elapsed),
        after_send: Samples::with(after_send, elapsed),
    })
}

async fn run(cli: &Cli) -> Result<String, String> {
    let plan = Plan::new(cli.quick);
    let wants = |s: Section| cli.only.is_empty() || cli.only.contains(&s);
    let mut report = String::new();
    let machine = machine();
    report.push_str(&format!(
        "# kapi-bench report\n\n{machine}\nkapi binary: `{}`{}\n",
        cli.kapi_bin.display(),
        if cli.quick { " (**--quick: counts too small to mean anything**)" } else { "" },
    ));
    if wants(Section::Core) {
        report.push_str(&format!(
            "Concurrency {} connections (HTTP/1.1 keep-alive, TLS with a client certificate); {} objects.\n",
            plan.concurrency, plan.objects
        ));
    }
    report.push('\n');
    if wants(Section::Core) {
        report.push_str(&core(cli, &plan).await?);
    }
    if wants(Section::Authz) {
        report.push_str(&authz::run(&cli.kapi_bin, cli.quick).await?);
    }
    if wants(Section::Replicas) {
        let nats = cli.nats_server.as_deref();
        report.push_str(&replicas::run(&cli.kapi_bin, nats, cli.quick).await?);
    }
    if wants(Section::Crds) {
        report.push_str(&crds::run(&cli.kapi_bin, cli.quick).await?);
    }
    if wants(Section::Admission) {
        report.push_str(&admission::run(&cli.kapi_bin, cli.quick).await?);
    }
    if wants(Section::Audit) {
        report.push_str(&audit::run(&cli.kapi_bin, cli.quick).await?);
    }
    if wants(Section::Observability) {
        report.push_str(&observability::run(&cli.kapi_bin, cli.quick).await?);
    }
    if wants(Section::Encryption) {
        report.push_str(&encryption::run(&cli.kapi_bin, cli.quick).await?);
    }
    if wants(Section::Apf) {
        report.push_str(&apf::run(&cli.kapi_bin, cli.quick).await?);
    }
    if wants(Section::Etcd) {
        report.push_str(&etcd::run(&cli.kapi_bin, cli.nats_server.as_deref(), cli.quick).await?);
    }
    if wants(Section::RapidReset) {
        report.push_str(&rapid_reset::run(&cli.kapi_bin, cli.quick).await?);
    }
    if wants(Section::Aggregator) {
        report.push_str(&aggregator::run(&cli.kapi_bin, cli.quick).await?);
    }
    if wants(Section::Scale) {
        report.push_str(&scale::run(&cli.kapi_bin, cli.quick).await?);
    }
    Ok(report)
}

/// Writes, reads, LIST, watch latency and memory of one kapi, with the baselines.
async fn core(cli: &Cli, plan: &Plan) -> Result<String, String> {
    let mut report = String::new();
    let store = baseline_store(plan)
        .await
        .map_err(|e| format!("baseline store: {e}"))?;
    let pki_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let http = baseline_http(plan, pki_dir.path())
        .await
        .map_err(|e| format!("baseline http: {e}"))?;

    let kapi = Kapi::start(&cli.kapi_bin)?;
    kapi.wait_ready().await?;
    let mem_idle = kapi.memory();
    {
        let mut conn = kapi.target.connect().await?;
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}});
        let (status, body) = conn
            .send(
                Method::POST,
                "/api/v1/namespaces",
                Some(Bytes::from(ns.to_string())),
            )
            .await?;
        check(status, StatusCode::CREATED, &body, "create namespace")?;
    }
    let creates = drive(
        &kapi.target,
        plan.objects,
        plan.concurrency,
        |mut conn, i| async move {
            let (status, body) = conn
                .send(Method::POST, NS, Some(configmap(&format!("cm-{i}"))))
                .await?;
            check(status, StatusCode::CREATED, &body, "create")?;
            Ok(conn)
        },
    )
    .await
    .map_err(|e| format!("kapi creates: {e}"))?;
    let mem_created = kapi.memory();
    let gets = drive(
        &kapi.target,
        plan.objects,
        plan.concurrency,
        |mut conn, i| async move {
            let (status, body) = conn
                .send(Method::GET, &format!("{NS}/cm-{i}"), None)
                .await?;
            check(status, StatusCode::OK, &body, "get")?;
            Ok(conn)
        },
    )
    .await
    .map_err(|e| format!("kapi gets: {e}"))?;

    let mut conn = kapi.target.connect().await?;
    let mut list_lat = Vec::new();
    let mut list_bytes = 0;
    let lists_started = Instant::now();
    for _ in 0..plan.lists {
        let t = Instant::now();
        let (status, body) = conn.send(Method::GET, NS, None).await?;
        list_lat.push(t.elapsed());
        check(status, StatusCode::OK, &body, "list")?;
        let v: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        let n = v["items"].as_array().map_or(0, Vec::len);
        if n < plan.objects {
            return Err(format!(
                "list returned {n} items, expected at least {}",
                plan.objects
            ));
        }
        list_bytes = body.len();
    }
    let lists = Samples::with(list_lat, lists_started.elapsed());
    let paged_started = Instant::now();
    let mut token = String::new();
    let mut paged_items = 0;
    loop {
        let path = if token.is_empty() {
            format!("{NS}?limit=500")
        } else {
            format!("{NS}?limit=500&continue={token}")
        };
        let (status, body) = conn.send(Method::GET, &path, None).await?;
        check(status, StatusCode::OK, &body, "paged list")?;
        let v: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        // The namespace's own kube-root-ca.crt is not one of the benchmark's objects.
        paged_items += v["items"].as_array().map_or(0, |items| items.iter().filter(|i| i["metadata"]["name"] != "kube-root-ca.crt").count());
        token = v["metadata"]["continue"].as_str().unwrap_or("").to_owned();
        if token.is_empty() {
            break;
        }
    }
    let paged = paged_started.elapsed();
    let mem_listed = kapi.memory();

    let mut watch_results = Vec::new();
    for w in plan.watchers {
        watch_results.push(watch_latency(&kapi, plan, w).await?);
    }
    let mem_watched = kapi.memory();

    report.push_str("## Writes and reads\n\n| measurement | count | rate | p50 | p99 | baseline | kapi / baseline |\n|---|---|---|---|---|---|---|\n");
    report.push_str(&format!(
        "| baseline: SQLite store creates (same store code, no HTTP) | {} | {:.0}/s | {} | {} | — | — |\n",
        store.count(), store.per_second(), ms(store.percentile(0.5)), ms(store.percentile(0.99))
    ));
    report.push_str(&format!(
        "| baseline: minimal hyper HTTPS handler GETs | {} | {:.0}/s | {} | {} | — | — |\n",
        http.count(),
        http.per_second(),
        ms(http.percentile(0.5)),
        ms(http.percentile(0.99))
    ));
    report.push_str(&format!(
        "| kapi: POST ConfigMap | {} | {:.0}/s | {} | {} | store {:.0}/s | {:.2} |\n",
        creates.count(),
        creates.per_second(),
        ms(creates.percentile(0.5)),
        ms(creates.percentile(0.99)),
        store.per_second(),
        creates.per_second() / store.per_second()
    ));
    report.push_str(&format!(
        "| kapi: GET ConfigMap | {} | {:.0}/s | {} | {} | hyper {:.0}/s | {:.2} |\n\n",
        gets.count(),
        gets.per_second(),
        ms(gets.percentile(0.5)),
        ms(gets.percentile(0.99)),
        http.per_second(),
        gets.per_second() / http.per_second()
    ));
    report.push_str(&format!(
        "## LIST of {} ConfigMaps\n\n| measurement | count | p50 | p99 | response size |\n|---|---|---|---|---|\n| full list (consistent read, watch cache) | {} | {} | {} | {:.1} MiB |\n| paginated, limit=500 (store snapshot), whole walk | 1 | {} | {} | {paged_items} items |\n\n",
        plan.objects, lists.count(), ms(lists.percentile(0.5)), ms(lists.percentile(0.99)),
        list_bytes as f64 / (1024.0 * 1024.0), ms(paged), ms(paged)
    ));
    report.push_str(&format!(
        "## Watch event latency\n\nOne writer updates a ConfigMap {} times a second for {} s; every watcher must see every event.\n\n| watchers | events delivered | ack → event p50 | ack → event p99 | send → event p50 | send → event p99 |\n|---|---|---|---|---|---|\n",
        plan.watch_rate, plan.watch_secs
    ));
    for w in &watch_results {
        report.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            w.watchers,
            w.after_ack.count(),
            ms(w.after_ack.percentile(0.5)),
            ms(w.after_ack.percentile(0.99)),
            ms(w.after_send.percentile(0.5)),
            ms(w.after_send.percentile(0.99))
        ));
    }
    report.push_str(&format!(
        "\n## Memory of the kapi process (VmRSS / VmHWM)\n\n| phase | RSS | peak |\n|---|---|---|\n| idle after start | {:.1} MiB | {:.1} MiB |\n| after {} creates | {:.1} MiB | {:.1} MiB |\n| after the lists | {:.1} MiB | {:.1} MiB |\n| after the watch runs | {:.1} MiB | {:.1} MiB |\n",
        mem_idle.0, mem_idle.1, plan.objects, mem_created.0, mem_created.1, mem_listed.0, mem_listed.1, mem_watched.0, mem_watched.1
    ));
    drop(kapi);
    Ok(report)
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|k| k.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / (1024.0 * 1024.0));
    format!(
        "Machine: {cpus} CPUs ({model}), {mem:.0} GiB RAM, Linux {}.\n",
        kernel.trim()
    )
}
