//! API Priority and Fairness, the noisy neighbour of issue 22: one user floods kapi with full
//! LISTs of a large namespace from many concurrent clients while a second user does GETs and
//! small writes, a leader-election client renews a Lease and a `system:masters` client reads.
//! Run twice in one invocation, on a fresh kapi each time: `--enable-priority-and-fairness=false`
//! (max-in-flight only) and `=true`, every other flag at kapi's default. Before each flood the
//! same neighbours run alone (the baseline), and before that B alone as fast as kapi answers
//! (`rates`: what APF costs when nothing contends). Numbers only: a benchmark never asserts
//! timing.
//!
//! Where B's time goes: B has a FlowSchema of its own on the flood's priority level
//! (`global-default`, as kube's catch-all puts both users), so kapi's
//! `apiserver_flowcontrol_request_wait_duration_seconds` separates B's wait for seats from the
//! rest of its latency. The neighbours run on a thread and runtime of their own: clients on
//! other machines would not share the flood's run queue, so B's latency is kapi's.

mod rates;
mod report;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};

use crate::client::{Conn, Target};
use crate::stats::Samples;
use crate::{check, drive, Kapi};

const NAMESPACE: &str = "apf";
const CMS: &str = "/api/v1/namespaces/apf/configmaps";
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
/// kube-scheduler's Lease: kapi's own controllers hold `kube-controller-manager`'s (and renew
/// it every 2 s, which made this client's PUTs conflict), and kapi runs no scheduler.
const LEASE: &str = "kube-scheduler";
const FLOODER: &str = "apf-flooder";
const NEIGHBOUR: &str = "apf-neighbour";
/// B's FlowSchema: B alone, on the level kube's `global-default` FlowSchema gives A too.
const NEIGHBOUR_SCHEMA: &str = "apf-bench-neighbour";
const WAIT_METRIC: &str = "apiserver_flowcontrol_request_wait_duration_seconds_bucket{";
/// Classified to `leader-election` by kube's suggested FlowSchema `system-leader-election`.
const LEADER: &str = "system:kube-scheduler";
/// The one ConfigMap the neighbour and the masters client read (and the neighbour updates).
const TARGET_CM: &str = "neighbour";
/// A request of the neighbours that takes longer than this counts as an error.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

struct Plan {
    objects: usize,
    object_bytes: usize,
    flooders: usize,
    baseline: Duration,
    flood: Duration,
    neighbour_every: Duration,
    lease_every: Duration,
    masters_every: Duration,
    /// Each of `rates`' timed measurements, its untimed warm-up, and how many rounds.
    rates_window: Duration,
    rates_warmup: Duration,
    rates_rounds: usize,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Plan {
                objects: 50,
                object_bytes: 10_000,
                flooders: 4,
                baseline: Duration::from_secs(1),
                flood: Duration::from_secs(2),
                neighbour_every: Duration::from_millis(50),
                lease_every: Duration::from_millis(500),
                masters_every: Duration::from_millis(250),
                rates_window: Duration::from_millis(300),
                rates_warmup: Duration::from_millis(100),
                rates_rounds: 2,
            }
        } else {
            Plan {
                objects: 5_000,
                object_bytes: 10_000,
                flooders: 50,
                baseline: Duration::from_secs(10),
                flood: Duration::from_secs(20),
                neighbour_every: Duration::from_millis(50),
                lease_every: Duration::from_secs(2),
                masters_every: Duration::from_millis(250),
                rates_window: Duration::from_secs(10),
                rates_warmup: Duration::from_secs(2),
                rates_rounds: 3,
            }
        }
    }
}

/// What the neighbours measured in one phase.
#[derive(Default)]
struct Neighbours {
    gets: Samples,
    writes: Samples,
    errors: usize,
    first_error: Option<String>,
    renewals: Samples,
    renewal_errors: usize,
    /// The first failed renewal's error.
    renewal_error: Option<String>,
    masters: Samples,
    masters_errors: usize,
}

#[derive(Default)]
struct Flood {
    lists: AtomicUsize,
    rejected: AtomicUsize,
    other: AtomicUsize,
    bytes: AtomicU64,
}

struct ModeResult {
    apf: bool,
    list_bytes: usize,
    /// (client, FlowSchema, priority level).
    levels: Vec<(String, String, String)>,
    rates: rates::Rates,
    baseline: Neighbours,
    flood: Neighbours,
    lists: usize,
    rejected: usize,
    other: usize,
    flood_bytes: u64,
    flood_secs: f64,
    rss_before: f64,
    rss_peak: f64,
    kapi_cpu: f64,
    bench_cpu: f64,
    /// B's requests dispatched during the flood, by APF wait: (upper bound in seconds, count),
    /// cumulative as Prometheus buckets are (APF on only).
    b_waits: Vec<(f64, u64)>,
}

/// Runs both modes and returns the report section.
pub async fn run(bin: &std::path::Path, quick: bool) -> Result<String, String> {
    let plan = Plan::new(quick);
    let off = mode(bin, &plan, false).await.map_err(|e| format!("apf off: {e}"))?;
    let on = mode(bin, &plan, true).await.map_err(|e| format!("apf on: {e}"))?;
    Ok(report::report(&plan, &off, &on))
}

fn configmap(name: &str, bytes: usize) -> Bytes {
    let v = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"payload": "x".repeat(bytes)}});
    Bytes::from(v.to_string())
}

async fn post(conn: &mut Conn, path: &str, body: Value, what: &str) -> Result<(), String> {
    let (status, resp) = conn.send(Method::POST, path, Some(Bytes::from(body.to_string()))).await?;
    check(status, StatusCode::CREATED, &resp, what)
}

/// Namespace, RBAC for the three users, the seeded ConfigMaps, the Lease.
async fn setup(kapi: &Kapi, plan: &Plan) -> Result<(), String> {
    let mut conn = kapi.target.connect().await?;
    post(&mut conn, "/api/v1/namespaces", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}), "namespace").await?;
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let grants = [
        ("apf-bench-flooder", FLOODER, json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}])),
        ("apf-bench-neighbour", NEIGHBOUR, json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create", "update"]}])),
        ("apf-bench-leader", LEADER, json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}])),
    ];
    for (name, user, rules) in grants {
        post(&mut conn, &format!("{rbac}/clusterroles"), json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules}), "cluster role").await?;
        post(&mut conn, &format!("{rbac}/clusterrolebindings"), json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]}), "cluster role binding").await?;
    }
    let schema = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": NEIGHBOUR_SCHEMA},
        "spec": {"priorityLevelConfiguration": {"name": "global-default"}, "matchingPrecedence": 9800, "distinguisherMethod": {"type": "ByUser"},
            "rules": [{"subjects": [{"kind": "User", "user": {"name": NEIGHBOUR}}],
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": true}]}]}});
    post(&mut conn, "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas", schema, "neighbour's FlowSchema").await?;
    let (status, resp) = conn.send(Method::POST, CMS, Some(configmap(TARGET_CM, 100))).await?;
    check(status, StatusCode::CREATED, &resp, "neighbour's configmap")?;
    let size = plan.object_bytes;
    drive(&kapi.target, plan.objects, 16, move |mut conn, i| async move {
        let (status, body) = conn.send(Method::POST, CMS, Some(configmap(&format!("big-{i}"), size))).await?;
        check(status, StatusCode::CREATED, &body, "seed")?;
        Ok(conn)
    })
    .await?;
    // The leader creates its Lease once RBAC lets it (the authorizer follows the bindings).
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": LEASE},
        "spec": {"holderIdentity": "bench", "leaseDurationSeconds": 15, "acquireTime": micro_time_now(), "renewTime": micro_time_now()}});
    let mut leader = kapi.target_for(LEADER, &[])?.connect().await?;
    let mut flooder = kapi.target_for(FLOODER, &[])?.connect().await?;
    let mut neighbour = kapi.target_for(NEIGHBOUR, &[])?.connect().await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (s1, b1) = leader.send(Method::POST, LEASES, Some(Bytes::from(lease.to_string()))).await?;
        let (s2, b2) = flooder.send(Method::GET, &format!("{CMS}?limit=1"), None).await?;
        let (s3, b3) = neighbour.send(Method::GET, &format!("{CMS}/{TARGET_CM}"), None).await?;
        let lease_ok = s1 == StatusCode::CREATED || s1 == StatusCode::CONFLICT;
        if lease_ok && s2 == StatusCode::OK && s3 == StatusCode::OK {
            return Ok(());
        }
        if Instant::now() > deadline {
            check(s1, StatusCode::CREATED, &b1, "lease")?;
            check(s2, StatusCode::OK, &b2, "flooder's list")?;
            check(s3, StatusCode::OK, &b3, "neighbour's get")?;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The FlowSchema and priority level each client is classified to, from the
/// `X-Kubernetes-PF-FlowSchema-UID` and `-PriorityLevel-UID` headers of one of its requests
/// (APF on only).
async fn levels(kapi: &Kapi) -> Result<Vec<(String, String, String)>, String> {
    let mut admin = kapi.target.connect().await?;
    let mut names: HashMap<String, String> = HashMap::new();
    for kind in ["prioritylevelconfigurations", "flowschemas"] {
        let (status, body) = admin.send(Method::GET, &format!("/apis/flowcontrol.apiserver.k8s.io/v1/{kind}"), None).await?;
        check(status, StatusCode::OK, &body, kind)?;
        let v: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        for o in v["items"].as_array().into_iter().flatten() {
            names.insert(o["metadata"]["uid"].as_str().unwrap_or_default().to_owned(), o["metadata"]["name"].as_str().unwrap_or_default().to_owned());
        }
    }
    let name = |resp: &hyper::Response<hyper::body::Incoming>, header: &str| {
        let uid = resp.headers().get(header).and_then(|h| h.to_str().ok()).unwrap_or_default();
        names.get(uid).cloned().unwrap_or_else(|| format!("(no header: {uid:?})"))
    };
    let probes = [
        ("user A (flooder): LIST", Some(FLOODER), format!("{CMS}?limit=1")),
        ("user B (neighbour): GET", Some(NEIGHBOUR), format!("{CMS}/{TARGET_CM}")),
        ("leader election: GET lease", Some(LEADER), format!("{LEASES}/{LEASE}")),
        ("system:masters: GET", None, format!("{CMS}/{TARGET_CM}")),
    ];
    let mut out = Vec::new();
    for (who, user, path) in probes {
        let target = match user {
            Some(u) => kapi.target_for(u, &[])?,
            None => kapi.target.clone(),
        };
        let resp = target.connect().await?.start(Method::GET, &path, None).await?;
        let (schema, level) = (name(&resp, "x-kubernetes-pf-flowschema-uid"), name(&resp, "x-kubernetes-pf-prioritylevel-uid"));
        let _ = resp.into_body().collect().await;
        out.push((who.to_owned(), schema, level));
    }
    Ok(out)
}

fn micro_time_now() -> String {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    // Days since the epoch to a civil date (H. Hinnant's algorithm).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let rem = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_micros()
    )
}

/// One request of a neighbour, timed; `Err` carries what went wrong (the connection is then
/// replaced).
async fn timed(conn: &mut Option<Conn>, target: &Target, method: Method, path: &str, body: Option<Bytes>, want: StatusCode) -> Result<(Duration, Bytes), String> {
    let t = Instant::now();
    let result = tokio::time::timeout(REQUEST_TIMEOUT, async {
        if conn.is_none() {
            *conn = Some(target.connect().await?);
        }
        let c = conn.as_mut().ok_or("no connection")?;
        c.send(method, path, body).await
    })
    .await;
    let elapsed = t.elapsed();
    match result {
        Ok(Ok((status, body))) if status == want => Ok((elapsed, body)),
        Ok(Ok((status, body))) => Err(format!("{path}: HTTP {status}: {}", String::from_utf8_lossy(&body[..body.len().min(200)]))),
        Ok(Err(e)) => {
            *conn = None;
            Err(format!("{path}: {e}"))
        }
        Err(_) => {
            *conn = None;
            Err(format!("{path}: no answer within {REQUEST_TIMEOUT:?}"))
        }
    }
}

fn ticker(every: Duration) -> tokio::time::Interval {
    let mut t = tokio::time::interval(every);
    t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    t
}

/// User B until `end`: GETs of one ConfigMap, and every fifth request a small write (a create
/// or an update of that ConfigMap, in turn).
async fn neighbour(target: Target, every: Duration, end: Instant, phase: &'static str) -> (Samples, Samples, usize, Option<String>) {
    let (mut gets, mut writes, mut errors, mut first) = (Vec::new(), Vec::new(), 0, None);
    let mut conn = None;
    let mut tick = ticker(every);
    let started = Instant::now();
    for k in 0.. {
        tick.tick().await;
        if Instant::now() >= end {
            break;
        }
        let (method, path, body, want) = match k % 10 {
            4 => (Method::POST, CMS.to_owned(), Some(configmap(&format!("b-{phase}-{k}"), 100)), StatusCode::CREATED),
            9 => (Method::PUT, format!("{CMS}/{TARGET_CM}"), Some(configmap(TARGET_CM, 100)), StatusCode::OK),
            _ => (Method::GET, format!("{CMS}/{TARGET_CM}"), None, StatusCode::OK),
        };
        let is_write = method != Method::GET;
        match timed(&mut conn, &target, method, &path, body, want).await {
            Ok((d, _)) if is_write => writes.push(d),
            Ok((d, _)) => gets.push(d),
            Err(e) => {
                errors += 1;
                first.get_or_insert(e);
            }
        }
    }
    let elapsed = started.elapsed();
    (Samples::with(gets, elapsed), Samples::with(writes, elapsed), errors, first)
}

/// Runs `step` every `every` until `end`: the latencies of the steps that succeeded, how many
/// failed, and the first failure.
async fn periodic<F, Fut>(every: Duration, end: Instant, mut step: F) -> (Samples, usize, Option<String>)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let (mut lat, mut errors, mut first) = (Vec::new(), 0, None);
    let mut tick = ticker(every);
    let started = Instant::now();
    loop {
        tick.tick().await;
        if Instant::now() >= end {
            break;
        }
        let t = Instant::now();
        match step().await {
            Ok(()) => lat.push(t.elapsed()),
            Err(e) => {
                errors += 1;
                first.get_or_insert(e);
            }
        }
    }
    (Samples::with(lat, started.elapsed()), errors, first)
}

/// The leader-election client: every `every`, GET the Lease and PUT it back renewed (as
/// client-go's leader election does); the latency of a renewal is both requests.
async fn leader(target: Target, every: Duration, end: Instant) -> (Samples, usize, Option<String>) {
    let conn = tokio::sync::Mutex::new(None);
    let path = format!("{LEASES}/{LEASE}");
    periodic(every, end, || async {
        let mut conn = conn.lock().await;
        let (_, body) = timed(&mut conn, &target, Method::GET, &path, None, StatusCode::OK).await?;
        let mut lease: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
        lease["spec"]["renewTime"] = json!(micro_time_now());
        timed(&mut conn, &target, Method::PUT, &path, Some(Bytes::from(lease.to_string())), StatusCode::OK).await.map(|_| ())
    })
    .await
}

/// The `system:masters` client: occasional GETs.
async fn masters(target: Target, every: Duration, end: Instant) -> (Samples, usize, Option<String>) {
    let conn = tokio::sync::Mutex::new(None);
    let path = format!("{CMS}/{TARGET_CM}");
    periodic(every, end, || async {
        timed(&mut *conn.lock().await, &target, Method::GET, &path, None, StatusCode::OK).await.map(|_| ())
    })
    .await
}

/// All three neighbours for `duration`, concurrently, on a thread and runtime of their own (so
/// the flood's clients in this process do not delay them).
async fn neighbours(kapi: &Kapi, plan: &Plan, duration: Duration, phase: &'static str) -> Result<Neighbours, String> {
    let end = Instant::now() + duration;
    let (b, l, m) = (kapi.target_for(NEIGHBOUR, &[])?, kapi.target_for(LEADER, &[])?, kapi.target.clone());
    let (b_every, l_every, m_every) = (plan.neighbour_every, plan.lease_every, plan.masters_every);
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("neighbours".into())
        .spawn(move || {
            let out = tokio::runtime::Builder::new_current_thread().enable_all().build().map(|rt| {
                rt.block_on(async move {
                    let ((gets, writes, errors, first_error), (renewals, renewal_errors, renewal_error), (masters, masters_errors, _)) =
                        tokio::join!(neighbour(b, b_every, end, phase), leader(l, l_every, end), masters(m, m_every, end));
                    Neighbours { gets, writes, errors, first_error, renewals, renewal_errors, renewal_error, masters, masters_errors }
                })
            });
            let _ = tx.send(out.map_err(|e| e.to_string()));
        })
        .map_err(|e| e.to_string())?;
    rx.await.map_err(|e| e.to_string())?
}

/// B's cumulative APF wait buckets (upper bound in seconds, count) from kapi's `/metrics`.
async fn b_wait_buckets(kapi: &Kapi) -> Result<Vec<(f64, u64)>, String> {
    let mut conn = kapi.target.connect().await?;
    let (status, body) = conn.send(Method::GET, "/metrics", None).await?;
    check(status, StatusCode::OK, &body, "metrics")?;
    let schema = format!("flow_schema=\"{NEIGHBOUR_SCHEMA}\"");
    let mut buckets: Vec<(f64, u64)> = Vec::new();
    for line in String::from_utf8_lossy(&body).lines() {
        let Some(rest) = line.strip_prefix(WAIT_METRIC) else { continue };
        if !rest.contains(&schema) || !rest.contains("execute=\"true\"") {
            continue;
        }
        let le = rest.split("le=\"").nth(1).and_then(|v| v.split('"').next()).unwrap_or_default();
        let le = if le == "+Inf" { f64::INFINITY } else { le.parse().map_err(|_| format!("bucket bound {le:?}"))? };
        let count = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).unwrap_or_default() as u64;
        match buckets.iter_mut().find(|(b, _)| *b == le) {
            Some(b) => b.1 += count,
            None => buckets.push((le, count)),
        }
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(buckets)
}

/// One full LIST, its body read and dropped frame by frame.
async fn list_once(conn: &mut Conn) -> Result<(StatusCode, u64), String> {
    let resp = conn.start(Method::GET, CMS, None).await?;
    let status = resp.status();
    let mut body = resp.into_body();
    let mut bytes = 0;
    while let Some(frame) = body.frame().await {
        if let Some(data) = frame.map_err(|e| e.to_string())?.data_ref() {
            bytes += data.len() as u64;
        }
    }
    Ok((status, bytes))
}

/// One of user A's clients: full LISTs in a loop until `end` (what is in flight then is
/// dropped, not counted); after a 429 it waits the `Retry-After` second, as client-go does.
async fn flooder(target: Target, end: Instant, flood: Arc<Flood>) {
    let mut conn: Option<Conn> = None;
    while Instant::now() < end {
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match tokio::time::timeout_at(end.into(), target.connect()).await {
                Ok(Ok(c)) => conn.insert(c),
                Ok(Err(_)) => {
                    flood.other.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                Err(_) => return,
            },
        };
        match tokio::time::timeout_at(end.into(), list_once(c)).await {
            Err(_) => return,
            Ok(Ok((StatusCode::OK, bytes))) => {
                flood.lists.fetch_add(1, Ordering::Relaxed);
                flood.bytes.fetch_add(bytes, Ordering::Relaxed);
            }
            Ok(Ok((StatusCode::TOO_MANY_REQUESTS, _))) => {
                flood.rejected.fetch_add(1, Ordering::Relaxed);
                let _ = tokio::time::timeout_at(end.into(), tokio::time::sleep(Duration::from_secs(1))).await;
            }
            Ok(Ok(_)) => {
                flood.other.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Err(_)) => {
                flood.other.fetch_add(1, Ordering::Relaxed);
                conn = None;
            }
        }
    }
}

/// VmRSS of `pid` in MiB.
fn rss(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// CPU seconds this process (the benchmark's clients) has used.
fn own_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: f64 = after.split_whitespace().skip(11).take(2).filter_map(|v| v.parse::<f64>().ok()).sum();
    ticks / 100.0
}

async fn mode(bin: &std::path::Path, plan: &Plan, apf: bool) -> Result<ModeResult, String> {
    let flag = format!("--enable-priority-and-fairness={apf}");
    let kapi = Kapi::start_with(bin, &[&flag])?;
    kapi.wait_ready().await?;
    setup(&kapi, plan).await?;
    let levels = if apf {
        // The configuration controller takes B's FlowSchema up within a second or so.
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let levels = levels(&kapi).await?;
            if levels.iter().any(|(_, schema, _)| schema == NEIGHBOUR_SCHEMA) || Instant::now() > deadline {
                break levels;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    } else {
        Vec::new()
    };
    let rates = rates::measure(&kapi, plan, apf).await?;
    let list_bytes = {
        let mut conn = kapi.target.connect().await?;
        list_once(&mut conn).await?.1 as usize
    };
    let baseline = neighbours(&kapi, plan, plan.baseline, "baseline").await?;

    let pid = kapi.child.id();
    let rss_before = rss(pid);
    let peak = Arc::new(Mutex::new(rss_before));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                let now = rss(pid);
                if let Ok(mut p) = peak.lock() {
                    *p = p.max(now);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let waits_before = if apf { b_wait_buckets(&kapi).await? } else { Vec::new() };
    let (cpu0, own0) = (kapi.cpu_seconds(), own_cpu_seconds());
    let started = Instant::now();
    let end = started + plan.flood;
    let flood = Arc::new(Flood::default());
    let a = kapi.target_for(FLOODER, &[])?;
    let flooders: Vec<_> = (0..plan.flooders).map(|_| tokio::spawn(flooder(a.clone(), end, flood.clone()))).collect();
    let during = neighbours(&kapi, plan, plan.flood, "flood").await?;
    for f in flooders {
        f.await.map_err(|e| e.to_string())?;
    }
    let flood_secs = started.elapsed().as_secs_f64();
    let (cpu1, own1) = (kapi.cpu_seconds(), own_cpu_seconds());
    sampling.store(false, Ordering::Relaxed);
    sampler.await.map_err(|e| e.to_string())?;
    let rss_peak = *peak.lock().map_err(|e| e.to_string())?;
    let b_waits = if apf {
        let after = b_wait_buckets(&kapi).await?;
        after.iter().map(|&(le, n)| (le, n - waits_before.iter().find(|b| b.0 == le).map_or(0, |b| b.1))).collect()
    } else {
        Vec::new()
    };
    drop(kapi);
    Ok(ModeResult {
        apf,
        list_bytes,
        levels,
        rates,
        baseline,
        flood: during,
        lists: flood.lists.load(Ordering::Relaxed),
        rejected: flood.rejected.load(Ordering::Relaxed),
        other: flood.other.load(Ordering::Relaxed),
        flood_bytes: flood.bytes.load(Ordering::Relaxed),
        flood_secs,
        rss_before,
        rss_peak,
        kapi_cpu: (cpu1 - cpu0) / flood_secs,
        bench_cpu: (own1 - own0) / flood_secs,
        b_waits,
    })
}
