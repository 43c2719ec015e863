//! Replicas: several kapi processes sharing one SQLite file (`--data-dir`), measured in one run.
//!
//! - Cross-replica watch latency: watchers spread over the replicas, writers spread over the
//!   replicas, a fixed write schedule; each event is matched to its write by resourceVersion and
//!   the latency (event line received − POST response received) is split into cross-replica
//!   pairs (writer's replica ≠ watcher's) and same-replica pairs (the baseline, same load).
//!   Run twice: with `--nats-url` (commit hints through a real nats-server) and without it (each
//!   replica polls the store every 100 ms).
//! - Throughput of creates and GETs through a standalone kapi, through one replica of three and
//!   spread over three, same client concurrency.
//! - RSS per replica, and the NATS hint counters from `/metrics`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::json;
use tokio::sync::watch;

use crate::client::{Conn, Target};
use crate::stats::{ms, Samples};
use crate::{check, configmap, spread, Kapi};

/// How long a replica or nats-server may take to start, a watcher to connect, a request to answer.
const START_TIMEOUT: Duration = Duration::from_secs(60);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);
/// How long watchers may trail the last acknowledged write before the run gives up on them.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) struct Plan {
    pub(crate) replicas: usize,
    pub(crate) watchers_per_replica: usize,
    writers_per_replica: usize,
    /// Watch runs per mode, in order: a rate the machine sustains with every write on one
    /// replica (cross-replica events then wait for the hint or the poll, nothing else), the same
    /// rate with writes spread, and the target rate with writes spread.
    loads: Vec<Load>,
    pub(crate) objects: usize,
    pub(crate) concurrency: usize,
}

/// A write schedule: `rate` creates a second for `secs` seconds, spread over the replicas or
/// all through the first one.
#[derive(Clone, Copy)]
pub(crate) struct Load {
    pub(crate) rate: u64,
    pub(crate) secs: u64,
    pub(crate) spread: bool,
}

impl Load {
    fn writes(self) -> usize {
        (self.rate * self.secs) as usize
    }

    fn writers(self) -> &'static str {
        if self.spread {
            "all replicas"
        } else {
            "replica 1 only"
        }
    }
}

impl Plan {
    pub(crate) fn new(quick: bool) -> Self {
        if quick {
            Plan {
                replicas: 2,
                watchers_per_replica: 2,
                writers_per_replica: 1,
                loads: vec![Load {
                    rate: 50,
                    secs: 1,
                    spread: true,
                }],
                objects: 100,
                concurrency: 4,
            }
        } else {
            Plan {
                replicas: 3,
                watchers_per_replica: 100,
                writers_per_replica: 8,
                loads: vec![
                    Load {
                        rate: 100,
                        secs: 5,
                        spread: false,
                    },
                    Load {
                        rate: 100,
                        secs: 5,
                        spread: true,
                    },
                    Load {
                        rate: 1000,
                        secs: 5,
                        spread: true,
                    },
                ],
                objects: 10_000,
                concurrency: 32,
            }
        }
    }

    fn watchers(&self) -> usize {
        self.replicas * self.watchers_per_replica
    }
}

/// `nats-server -js` on a free loopback port; dropping it kills the process by its PID.
pub(crate) struct Nats {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Nats {
    pub(crate) fn start(bin: &Path) -> Result<Nats, String> {
        let dir = tempfile::Builder::new()
            .prefix("kapi-bench-nats-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("probing a free port: {e}"))?
            .port();
        let log_path = dir.path().join("nats.log");
        let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(dir.path().join("jetstream"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        let nats = Nats {
            child,
            url: format!("nats://127.0.0.1:{port}"),
            _dir: dir,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(nats);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "nats-server did not listen within {START_TIMEOUT:?}: {}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        ))
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `nats-server` from `--nats-server` or the PATH.
pub(crate) fn find_nats(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_owned());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("nats-server"))
        .find(|p| p.is_file())
}

/// Replicas on one shared data directory (the first creates the database and certificates).
/// Fields drop in order: the replicas first, then nats-server, then the directory.
pub(crate) struct Cluster {
    replicas: Vec<Kapi>,
    _nats: Option<Nats>,
    _dir: tempfile::TempDir,
}

impl Cluster {
    async fn start(bin: &Path, n: usize, nats: Option<Nats>) -> Result<Cluster, String> {
        Self::start_with(bin, n, nats, Vec::new()).await
    }

    /// Replicas with extra flags (another storage backend).
    pub(crate) async fn start_with(bin: &Path, n: usize, nats: Option<Nats>, extra: Vec<String>) -> Result<Cluster, String> {
        let dir = tempfile::Builder::new()
            .prefix("kapi-bench-replicas-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let data = dir.path().join("data");
        let mut args: Vec<String> = match &nats {
            Some(n) => vec!["--nats-url".into(), n.url.clone()],
            None => Vec::new(),
        };
        args.extend(extra);
        let start = |i: usize| {
            let (bin, data, args) = (bin.to_owned(), data.clone(), args.clone());
            let log = dir.path().join(format!("replica-{i}.log"));
            tokio::task::spawn_blocking(move || Kapi::start_in(&bin, data, &args, None, Some(&log)))
        };
        // The first replica creates the database and the PKI; the others start together after.
        let first = start(0).await.map_err(|e| e.to_string())??;
        let mut replicas = vec![first];
        let others: Vec<_> = (1..n).map(start).collect();
        let mut failed = None;
        for h in others {
            match h.await.map_err(|e| e.to_string()).and_then(|r| r) {
                Ok(k) => replicas.push(k),
                Err(e) => failed = Some(e),
            }
        }
        if let Some(e) = failed {
            return Err(format!("starting a replica: {e}"));
        }
        Ok(Cluster {
            replicas,
            _nats: nats,
            _dir: dir,
        })
    }

    pub(crate) fn targets(&self) -> Vec<Target> {
        self.replicas.iter().map(|k| k.target.clone()).collect()
    }
}

async fn timed<T>(
    what: &str,
    f: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    tokio::time::timeout(REQUEST_TIMEOUT, f)
        .await
        .map_err(|_| format!("{what}: no answer within {REQUEST_TIMEOUT:?}"))?
}

pub(crate) fn cm_path(ns: &str) -> String {
    format!("/api/v1/namespaces/{ns}/configmaps")
}

/// The value of the first `"key":"value"` in a JSON line, without parsing the whole line
/// (300 watchers at 1,000 events/s are 300,000 lines a second for a client on the same CPUs).
fn string_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("\"{key}\":\"");
    let at = line.find(&pat)? + pat.len();
    let len = line[at..].find('"')?;
    Some(&line[at..at + len])
}

/// Creates namespace `ns` on the first replica, then proves every replica can write into it
/// (each creates a probe object, retried until its view of the namespace caught up). Returns the
/// highest probe revision: watches from it see only what comes after.
async fn namespace(targets: &[Target], ns: &str) -> Result<u64, String> {
    let mut conn = targets[0].connect().await?;
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
    let (status, resp) = timed(
        "create namespace",
        conn.send(
            Method::POST,
            "/api/v1/namespaces",
            Some(Bytes::from(body.to_string())),
        ),
    )
    .await?;
    check(status, StatusCode::CREATED, &resp, "create namespace")?;
    let mut from = 0;
    for (i, t) in targets.iter().enumerate() {
        let mut conn = t.connect().await?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (status, resp) = timed(
                "probe create",
                conn.send(
                    Method::POST,
                    &cm_path(ns),
                    Some(configmap(&format!("probe-{i}"))),
                ),
            )
            .await?;
            if status == StatusCode::CREATED {
                let rv = std::str::from_utf8(&resp)
                    .ok()
                    .and_then(|s| string_field(s, "resourceVersion"))
                    .and_then(|s| s.parse::<u64>().ok())
                    .ok_or("probe: no resourceVersion")?;
                from = from.max(rv);
                break;
            }
            if Instant::now() > deadline {
                check(status, StatusCode::CREATED, &resp, "probe create")?;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(from)
}

/// What one watcher saw: (resourceVersion, receive time) per event line, and why it stopped
/// early if it did.
struct Seen {
    events: Vec<(u64, Instant)>,
    ended: Option<String>,
}

/// The last write's revision and when to stop waiting for it, set once the writers are done.
type Done = Option<(u64, Instant)>;

async fn watcher(
    target: Target,
    path: String,
    ready: Arc<AtomicUsize>,
    mut done: watch::Receiver<Done>,
    capacity: usize,
) -> Result<Seen, String> {
    let hard_deadline = Instant::now() + Duration::from_secs(300);
    let mut conn = timed("watch connect", target.connect()).await?;
    let resp = timed("watch", conn.start(Method::GET, &path, None)).await?;
    if resp.status() != StatusCode::OK {
        return Err(format!("watch: HTTP {}", resp.status()));
    }
    ready.fetch_add(1, Ordering::SeqCst);
    let mut body = resp.into_body();
    let mut buf: Vec<u8> = Vec::new();
    let mut seen = Seen {
        events: Vec::with_capacity(capacity),
        ended: None,
    };
    let mut max_rv = 0;
    loop {
        let target = *done.borrow_and_update();
        if let Some((last, give_up)) = target {
            if max_rv >= last {
                break;
            }
            if Instant::now() >= give_up {
                seen.ended = Some(format!(
                    "still waiting for {last} (at {max_rv}) {DRAIN_TIMEOUT:?} after the last write"
                ));
                break;
            }
        }
        if Instant::now() >= hard_deadline {
            seen.ended = Some("watch ran for 300 s".into());
            break;
        }
        let wake = target.map_or(hard_deadline, |(_, g)| g.min(hard_deadline));
        tokio::select! {
            frame = body.frame() => {
                let now = Instant::now();
                let frame = match frame {
                    None => { seen.ended = Some("the server closed the watch".into()); break; }
                    Some(Err(e)) => { seen.ended = Some(format!("watch stream: {e}")); break; }
                    Some(Ok(frame)) => frame,
                };
                let Ok(data) = frame.into_data() else { continue };
                buf.extend_from_slice(&data);
                let mut start = 0;
                while let Some(pos) = buf[start..].iter().position(|b| *b == b'\n') {
                    let line = std::str::from_utf8(&buf[start..start + pos]).map_err(|e| format!("watch line: {e}"))?;
                    start += pos + 1;
                    if string_field(line, "type") == Some("ERROR") {
                        seen.ended = Some(format!("ERROR event: {}", &line[..line.len().min(200)]));
                    } else if let Some(rv) = string_field(line, "resourceVersion").and_then(|s| s.parse::<u64>().ok()) {
                        seen.events.push((rv, now));
                        max_rv = max_rv.max(rv);
                    }
                }
                buf.drain(..start);
                if seen.ended.is_some() {
                    break;
                }
            }
            changed = done.changed() => {
                if changed.is_err() {
                    seen.ended = Some("the bench stopped waiting".into());
                    break;
                }
            }
            () = tokio::time::sleep_until(wake.into()) => {}
        }
    }
    Ok(seen)
}

/// One acknowledged write.
struct Write {
    rv: u64,
    replica: usize,
    scheduled: Instant,
    sent: Instant,
    ack: Instant,
}

/// Creates `load.writes()` ConfigMaps on a fixed schedule of `load.rate` a second, write `i`
/// going to replica `i % replicas` (or all to the first) over `writers_per_replica`
/// connections per replica written to.
async fn write_schedule(
    targets: &[Target],
    plan: &Plan,
    load: Load,
    ns: &str,
    prefix: &str,
) -> Result<(Vec<Write>, Instant), String> {
    let targets = if load.spread { targets } else { &targets[..1] };
    let total = load.writes();
    let interval = Duration::from_secs_f64(1.0 / load.rate as f64);
    let stride = targets.len() * plan.writers_per_replica;
    let mut conns = Vec::new();
    for (r, t) in targets.iter().enumerate() {
        for k in 0..plan.writers_per_replica {
            conns.push((r, r + targets.len() * k, t.connect().await?));
        }
    }
    let start = Instant::now() + Duration::from_millis(100);
    let mut tasks = Vec::new();
    for (replica, first, mut conn) in conns {
        let (path, prefix) = (cm_path(ns), prefix.to_owned());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            let mut i = first;
            while i < total {
                let scheduled = start + interval * i as u32;
                tokio::time::sleep_until(scheduled.into()).await;
                let body = Bytes::from(
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("{prefix}-{i}")}, "data": {"i": i.to_string()}})
                        .to_string(),
                );
                let sent = Instant::now();
                let (status, resp) = timed("scheduled create", conn.send(Method::POST, &path, Some(body))).await?;
                let ack = Instant::now();
                check(status, StatusCode::CREATED, &resp, "scheduled create")?;
                let rv = std::str::from_utf8(&resp)
                    .ok()
                    .and_then(|s| string_field(s, "resourceVersion"))
                    .and_then(|s| s.parse::<u64>().ok())
                    .ok_or("create: no resourceVersion")?;
                out.push(Write { rv, replica, scheduled, sent, ack });
                i += stride;
            }
            Ok::<_, String>(out)
        }));
    }
    let mut writes = Vec::with_capacity(total);
    for t in tasks {
        writes.extend(t.await.map_err(|e| e.to_string())??);
    }
    Ok((writes, start))
}

pub(crate) struct WatchRun {
    load: Load,
    pub(crate) cross: Samples,
    pub(crate) same: Samples,
    post: Samples,
    write_rate: f64,
    max_behind: Duration,
    expected: usize,
    delivered: usize,
    delivery_rate: f64,
    pub(crate) missed: usize,
    pub(crate) duplicated: usize,
    unknown: usize,
    early: usize,
    ended: Vec<String>,
    drain: Duration,
}

impl WatchRun {
    /// Whether the writes kept (95% of) the schedule and every watcher kept up with them: got
    /// every event, with no backlog left (the last event within a second of the last ack).
    fn sustained(&self) -> bool {
        self.write_rate >= 0.95 * self.load.rate as f64
            && self.missed == 0
            && self.ended.is_empty()
            && self.drain < Duration::from_secs(1)
    }
}

pub(crate) async fn watch_run(
    cluster: &Cluster,
    plan: &Plan,
    load: Load,
    mode: &str,
) -> Result<WatchRun, String> {
    let ns = &format!(
        "watch-{mode}-{}-{}",
        load.rate,
        if load.spread { "spread" } else { "one" }
    );
    let prefix = &format!("{mode}-{}", load.rate);
    let targets = cluster.targets();
    let from = namespace(&targets, ns).await?;
    let ready = Arc::new(AtomicUsize::new(0));
    let (done_tx, done_rx) = watch::channel::<Done>(None);
    let path = format!(
        "{}?watch=true&resourceVersion={from}&timeoutSeconds=600",
        cm_path(ns)
    );
    let mut watchers = Vec::new();
    for j in 0..plan.watchers() {
        let replica = j % targets.len();
        watchers.push((
            replica,
            tokio::spawn(watcher(
                targets[replica].clone(),
                path.clone(),
                ready.clone(),
                done_rx.clone(),
                load.writes(),
            )),
        ));
    }
    let deadline = Instant::now() + START_TIMEOUT;
    while ready.load(Ordering::SeqCst) < plan.watchers() {
        if Instant::now() > deadline || watchers.iter().any(|(_, h)| h.is_finished()) {
            for (_, h) in &watchers {
                h.abort();
            }
            return Err(format!(
                "{mode}: only {} of {} watchers started",
                ready.load(Ordering::SeqCst),
                plan.watchers()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let written = write_schedule(&targets, plan, load, ns, prefix).await;
    let (writes, start) = match written {
        Ok(w) => w,
        Err(e) => {
            for (_, h) in &watchers {
                h.abort();
            }
            return Err(format!("{mode} writes: {e}"));
        }
    };
    let last_ack = writes.iter().map(|w| w.ack).max().unwrap_or(start);
    let last_rv = writes.iter().map(|w| w.rv).max().unwrap_or(0);
    done_tx.send_replace(Some((last_rv, Instant::now() + DRAIN_TIMEOUT)));

    let by_rv: HashMap<u64, usize> = writes.iter().enumerate().map(|(i, w)| (w.rv, i)).collect();
    let (mut cross, mut same) = (Vec::new(), Vec::new());
    let (mut delivered, mut missed, mut duplicated, mut unknown, mut early) = (0, 0, 0, 0, 0);
    let mut ended = Vec::new();
    let mut last_event = start;
    for (replica, h) in watchers {
        let seen = h.await.map_err(|e| e.to_string())??;
        if let Some(why) = seen.ended {
            ended.push(format!("watcher on replica {}: {why}", replica + 1));
        }
        let mut got = vec![false; writes.len()];
        for (rv, at) in seen.events {
            let Some(&i) = by_rv.get(&rv) else {
                unknown += 1;
                continue;
            };
            if std::mem::replace(&mut got[i], true) {
                duplicated += 1;
                continue;
            }
            delivered += 1;
            last_event = last_event.max(at);
            let w = &writes[i];
            if at < w.ack {
                early += 1;
            }
            let lat = at.saturating_duration_since(w.ack);
            if w.replica == replica {
                same.push(lat)
            } else {
                cross.push(lat)
            }
        }
        missed += got.iter().filter(|g| !**g).count();
    }
    drop(done_tx);
    let window = last_event.saturating_duration_since(start);
    let write_elapsed = last_ack.saturating_duration_since(start);
    Ok(WatchRun {
        load,
        cross: Samples::with(cross, window),
        same: Samples::with(same, window),
        post: Samples::with(
            writes.iter().map(|w| w.ack - w.sent).collect(),
            write_elapsed,
        ),
        write_rate: writes.len() as f64 / write_elapsed.as_secs_f64().max(1e-9),
        max_behind: writes
            .iter()
            .map(|w| w.sent.saturating_duration_since(w.scheduled))
            .max()
            .unwrap_or_default(),
        expected: writes.len() * plan.watchers(),
        delivered,
        delivery_rate: delivered as f64 / window.as_secs_f64().max(1e-9),
        missed,
        duplicated,
        unknown,
        early,
        ended,
        drain: last_event.saturating_duration_since(last_ack),
    })
}

/// Creates then GETs `plan.objects` ConfigMaps over `plan.concurrency` connections spread
/// round-robin over `targets`.
pub(crate) async fn throughput(
    targets: &[Target],
    plan: &Plan,
    ns: &str,
) -> Result<(Samples, Samples), String> {
    namespace(targets, ns).await?;
    let connect = |targets: &[Target]| {
        let next = Arc::new(AtomicUsize::new(0));
        let targets = targets.to_vec();
        move || {
            let t = targets[next.fetch_add(1, Ordering::Relaxed) % targets.len()].clone();
            async move { t.connect().await }
        }
    };
    let path = cm_path(ns);
    let creates = {
        let path = path.clone();
        spread(
            plan.objects,
            plan.concurrency,
            connect(targets),
            move |mut conn: Conn, i| {
                let path = path.clone();
                async move {
                    let (status, body) = timed(
                        "create",
                        conn.send(Method::POST, &path, Some(configmap(&format!("cm-{i}")))),
                    )
                    .await?;
                    check(status, StatusCode::CREATED, &body, "create")?;
                    Ok(conn)
                }
            },
        )
        .await?
    };
    let gets = spread(
        plan.objects,
        plan.concurrency,
        connect(targets),
        move |mut conn: Conn, i| {
            let path = format!("{path}/cm-{i}");
            async move {
                let (status, body) = timed("get", conn.send(Method::GET, &path, None)).await?;
                check(status, StatusCode::OK, &body, "get")?;
                Ok(conn)
            }
        },
    )
    .await?;
    Ok((creates, gets))
}

/// kapi_nats_hints_published_total, kapi_nats_hints_received_total, kapi_watch_cache_repairs_total.
async fn nats_counters(kapi: &Kapi) -> Result<[u64; 3], String> {
    let mut conn = kapi.target.connect().await?;
    let (status, body) = timed("metrics", conn.send(Method::GET, "/metrics", None)).await?;
    check(status, StatusCode::OK, &body, "metrics")?;
    let text = String::from_utf8_lossy(&body);
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map_or(0, |v| v as u64)
    };
    Ok([
        value("kapi_nats_hints_published_total"),
        value("kapi_nats_hints_received_total"),
        value("kapi_watch_cache_repairs_total"),
    ])
}

fn mib((rss, peak): (f64, f64)) -> String {
    format!("{rss:.1} / {peak:.1} MiB")
}

/// The 1-minute load average (other work on the machine shows in every number here).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

pub async fn run(bin: &Path, nats_bin: Option<&Path>, quick: bool) -> Result<String, String> {
    let plan = Plan::new(quick);
    let started = Instant::now();
    let load_before = load_average();
    let n = plan.replicas;
    let nats_bin = find_nats(nats_bin);

    // 1. NATS fan-out: watch runs, hint counters, then throughput through one replica and all.
    let mut runs: Vec<(&str, WatchRun)> = Vec::new();
    let mut nats_part = None;
    if let Some(nats_bin) = &nats_bin {
        let nats = Nats::start(nats_bin)?;
        let cluster = Cluster::start(bin, n, Some(nats)).await?;
        for &load in &plan.loads {
            runs.push((
                "NATS fan-out",
                watch_run(&cluster, &plan, load, "nats").await?,
            ));
        }
        let mem_watch: Vec<_> = cluster.replicas.iter().map(Kapi::memory).collect();
        let mut counters = Vec::new();
        for k in &cluster.replicas {
            counters.push(nats_counters(k).await?);
        }
        let targets = cluster.targets();
        let one = throughput(&targets[..1], &plan, "tput-one")
            .await
            .map_err(|e| format!("through 1 of {n}: {e}"))?;
        let all = throughput(&targets, &plan, "tput-all")
            .await
            .map_err(|e| format!("through {n}: {e}"))?;
        let mem_tput: Vec<_> = cluster.replicas.iter().map(Kapi::memory).collect();
        drop(cluster);
        nats_part = Some((mem_watch, counters, one, all, mem_tput));
    }

    // 2. Log polling only (no --nats-url, default poll interval).
    let cluster = Cluster::start(bin, n, None).await?;
    for &load in &plan.loads {
        runs.push((
            "log polling (100 ms)",
            watch_run(&cluster, &plan, load, "poll").await?,
        ));
    }
    let mem_poll: Vec<_> = cluster.replicas.iter().map(Kapi::memory).collect();
    drop(cluster);

    // 3. A standalone kapi with the same throughput workload.
    let single = Kapi::start(bin)?;
    let alone = throughput(std::slice::from_ref(&single.target), &plan, "tput-single")
        .await
        .map_err(|e| format!("standalone: {e}"))?;
    let mem_single = single.memory();
    drop(single);
    let load_after = load_average();

    let mut r = String::new();
    r.push_str("## Replicas (NATS fan-out vs log polling)\n\n");
    let rates: Vec<String> = plan
        .loads
        .iter()
        .map(|l| format!("{}/s for {} s to {}", l.rate, l.secs, l.writers()))
        .collect();
    r.push_str(&format!(
        "{n} kapi replicas share one SQLite file (one `--data-dir`); a fresh set per mode. {} watchers ({} per replica) watch one namespace from the same resourceVersion; {} writer connections ({} per replica) create ConfigMaps on a fixed schedule ({}), write i going to replica i mod {n} when spread over all replicas. Latency is from the POST's response (the write's acknowledgement) to the event line at a watcher, matched by resourceVersion; **cross-replica** pairs are those where the write went to another replica than the watcher's, **same-replica** pairs (write and watch on one replica) are the baseline from the same run and load. Load average (1 min) of the machine at the start / end of this section: {load_before} / {load_after}.\n\n",
        plan.watchers(), plan.watchers_per_replica, n * plan.writers_per_replica, plan.writers_per_replica, rates.join(", then ")
    ));
    r.push_str("| mode | target writes/s | writes to | pairs | events | ack → event p50 | p90 | p99 | max |\n|---|---|---|---|---|---|---|---|---|\n");
    for (label, w) in &runs {
        for (pairs, s) in [("cross-replica", &w.cross), ("same-replica", &w.same)] {
            r.push_str(&format!(
                "| {label} | {} | {} | {pairs} | {} | {} | {} | {} | {} |\n",
                w.load.rate,
                w.load.writers(),
                s.count(),
                ms(s.percentile(0.5)),
                ms(s.percentile(0.9)),
                ms(s.percentile(0.99)),
                ms(s.percentile(1.0))
            ));
        }
    }
    if nats_bin.is_none() {
        r.push_str("| NATS fan-out | skipped: nats-server not found (PATH or --nats-server) | | | | | | | |\n");
    }
    r.push_str(&format!(
        "\nRates. Deliveries/s counts every watcher's events from the first scheduled write to the last event received ({} watchers × the write rate when kept up); the target counts as sustained when the writes kept 95% of the schedule and every watcher got every event with no backlog (its last event within 1 s of the last ack).\n\n| mode | target writes/s | writes to | writes/s achieved | latest write vs schedule | POST p50 / p99 | events delivered | deliveries/s | per watcher /s | last event after last ack | missed | duplicated | sustained |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        plan.watchers()
    ));
    for (label, w) in &runs {
        r.push_str(&format!(
            "| {label} | {} | {} | {:.0} | {} | {} / {} | {} of {} | {:.0} | {:.0} | {} | {} | {} | {} |\n",
            w.load.rate,
            w.load.writers(),
            w.write_rate,
            ms(w.max_behind),
            ms(w.post.percentile(0.5)),
            ms(w.post.percentile(0.99)),
            w.delivered,
            w.expected,
            w.delivery_rate,
            w.delivery_rate / plan.watchers() as f64,
            ms(w.drain),
            w.missed,
            w.duplicated,
            if w.sustained() { "yes" } else { "**no**" }
        ));
    }
    r.push('\n');
    for (label, w) in &runs {
        let rate = format!("{}/s to {}", w.load.rate, w.load.writers());
        if w.early > 0 {
            r.push_str(&format!(
                "- {label} at {rate}: {} events reached a watcher before the writer had read the POST's response (counted as 0 ms).\n",
                w.early
            ));
        }
        if w.unknown > 0 {
            r.push_str(&format!(
                "- {label} at {rate}: {} events matched no write of this run.\n",
                w.unknown
            ));
        }
        if !w.ended.is_empty() {
            r.push_str(&format!(
                "- {label} at {rate}: {} watchers ended early; first: {}\n",
                w.ended.len(),
                w.ended[0]
            ));
        }
    }
    if let Some((_, counters, ..)) = &nats_part {
        let list: Vec<String> = counters
            .iter()
            .enumerate()
            .map(|(i, [p, rcv, rep])| {
                format!(
                    "replica {}: {p} published, {rcv} received, {rep} repairs",
                    i + 1
                )
            })
            .collect();
        r.push_str(&format!("- NATS hint counters after the watch runs (`/metrics`, start-up writes included): {}.\n", list.join("; ")));
    }
    r.push_str(&format!(
        "\nThroughput: {} creates then {} GETs of ConfigMaps over {} connections (HTTP/1.1 keep-alive, TLS), the same client each time; the replicas are the NATS set above.\n\n| topology | creates/s | create p50 | create p99 | GETs/s | GET p50 | GET p99 |\n|---|---|---|---|---|---|---|\n",
        plan.objects, plan.objects, plan.concurrency
    ));
    let mut rows = vec![("1 kapi, standalone".to_owned(), &alone)];
    if let Some((_, _, one, all, _)) = &nats_part {
        rows.push((
            format!("1 of {n} replicas (all connections to replica 1)"),
            one,
        ));
        rows.push((format!("{n} replicas (connections spread evenly)"), all));
    }
    for (label, (c, g)) in rows {
        r.push_str(&format!(
            "| {label} | {:.0} | {} | {} | {:.0} | {} | {} |\n",
            c.per_second(),
            ms(c.percentile(0.5)),
            ms(c.percentile(0.99)),
            g.per_second(),
            ms(g.percentile(0.5)),
            ms(g.percentile(0.99))
        ));
    }
    r.push_str("\nMemory per replica (VmRSS / VmHWM):\n\n| replica | NATS: after the watch runs | NATS: after throughput | polling: after the watch runs |\n|---|---|---|---|\n");
    for (i, poll) in mem_poll.iter().enumerate() {
        let (a, b) = match &nats_part {
            Some((mw, _, _, _, mt)) => (mib(mw[i]), mib(mt[i])),
            None => ("—".into(), "—".into()),
        };
        r.push_str(&format!("| {} | {a} | {b} | {} |\n", i + 1, mib(*poll)));
    }
    r.push_str(&format!(
        "| standalone kapi after throughput | {} | | |\n",
        mib(mem_single)
    ));
    r.push_str(&format!(
        "\nThis section ran in {:.0} s.\n\n",
        started.elapsed().as_secs_f64()
    ));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_field_reads_the_first_match() {
        let line = r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"144"},"data":{"resourceVersion":"9"}}}"#;
        assert_eq!(string_field(line, "type"), Some("ADDED"));
        assert_eq!(string_field(line, "resourceVersion"), Some("144"));
        assert_eq!(string_field(line, "missing"), None);
    }
}
