//! `--only scale` (issue 19): kapi with many watchers, and with a large store.
//!
//! - Watchers: 10,000 watches of pods, each with `fieldSelector=spec.nodeName=<its node>` as
//!   kubelets watch, 100 streams on each HTTP/2 connection, while pods are created at 1,000 a
//!   second, each on one node. Reported: the delay from each create's acknowledgement to the
//!   event at its node's watcher, events missed, duplicated or sent to another node's watcher,
//!   kapi's CPU, and its memory per watcher.
//! - Restart: kapi on 300,000 ConfigMaps of about 1 KB is stopped and started again. Reported:
//!   time from start to `/readyz` (its watch caches loaded) and RSS against the objects' JSON.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};

use crate::client::H2Conn;
use crate::stats::{ms, Samples};
use crate::{check, drive, Kapi};

struct Plan {
    watchers: usize,
    streams_per_connection: usize,
    rate: u64,
    secs: u64,
    writers: usize,
    objects: usize,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Plan { watchers: 50, streams_per_connection: 10, rate: 50, secs: 2, writers: 4, objects: 500 }
        } else {
            Plan { watchers: 10_000, streams_per_connection: 100, rate: 1_000, secs: 10, writers: 32, objects: 300_000 }
        }
    }
}

const PODS: &str = "/api/v1/namespaces/scale/pods";
const CMS: &str = "/api/v1/namespaces/big/configmaps";

fn node(i: usize) -> String {
    format!("node-{i}")
}

/// What one watcher saw: (resourceVersion, pod name, when).
type Seen = Vec<(u64, String, Instant)>;

/// One kubelet-like watch until `stop` is set and the stream has been quiet for a moment.
async fn watch_node(mut conn: H2Conn, i: usize, from: String, opened: Arc<AtomicUsize>, stop: Arc<AtomicBool>) -> Result<Seen, String> {
    let path = format!("/api/v1/pods?watch=1&allowWatchBookmarks=false&resourceVersion={from}&fieldSelector=spec.nodeName%3D{}", node(i));
    let resp = conn.get(&path).await.map_err(|e| format!("opening the watch of {}: {e}", node(i)))?;
    if resp.status() != StatusCode::OK {
        return Err(format!("watch {}: HTTP {}", node(i), resp.status()));
    }
    opened.fetch_add(1, Ordering::Relaxed);
    let mut body = resp.into_body();
    let (mut buf, mut seen): (Vec<u8>, Seen) = (Vec::new(), Vec::new());
    loop {
        let frame = match tokio::time::timeout(Duration::from_millis(500), body.frame()).await {
            Ok(Some(frame)) => frame.map_err(|e| format!("watch {}: {e}", node(i)))?,
            Ok(None) => return Err(format!("watch {} ended early", node(i))),
            Err(_) if stop.load(Ordering::Relaxed) => return Ok(seen),
            Err(_) => continue,
        };
        let now = Instant::now();
        let Ok(data) = frame.into_data() else { continue };
        buf.extend_from_slice(&data);
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            let event: Value = serde_json::from_slice(&line).map_err(|e| format!("watch line: {e}"))?;
            let meta = &event["object"]["metadata"];
            let rv = meta["resourceVersion"].as_str().and_then(|s| s.parse().ok()).unwrap_or(0);
            seen.push((rv, meta["name"].as_str().unwrap_or_default().to_owned(), now));
        }
    }
}

struct WatchRun {
    connections: usize,
    rss_before: f64,
    rss_watching: f64,
    open_time: Duration,
    writes: usize,
    write_rate: f64,
    delays: Samples,
    missed: usize,
    duplicated: usize,
    misdelivered: usize,
    cpu: f64,
}

async fn watchers(kapi_bin: &Path, plan: &Plan) -> Result<WatchRun, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let log = dir.path().join("kapi.log");
    let kapi = Kapi::start_in(kapi_bin, dir.path().join("data"), &[], None, Some(&log))?;
    let run = watch_run(&kapi, plan).await;
    run.map_err(|e| {
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        format!("{e}; kapi's log ends:\n{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"))
    })
}

async fn watch_run(kapi: &Kapi, plan: &Plan) -> Result<WatchRun, String> {
    kapi.wait_ready().await?;
    let mut admin = kapi.target.connect().await?;
    let (status, body) = admin.send(Method::POST, "/api/v1/namespaces", Some(Bytes::from(r#"{"metadata":{"name":"scale"}}"#))).await?;
    check(status, StatusCode::CREATED, &body, "create namespace")?;
    let created: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    let from = created["metadata"]["resourceVersion"].as_str().unwrap_or("0").to_owned();

    let rss_before = kapi.memory().0;
    let opened = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let connections = plan.watchers.div_ceil(plan.streams_per_connection);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(plan.watchers);
    for c in 0..connections {
        let conn = kapi.target.connect_h2().await.map_err(|e| format!("opening watch connection {c}: {e}"))?;
        for i in (c * plan.streams_per_connection)..((c + 1) * plan.streams_per_connection).min(plan.watchers) {
            tasks.push((i, tokio::spawn(watch_node(conn.clone(), i, from.clone(), opened.clone(), stop.clone()))));
        }
    }
    while opened.load(Ordering::Relaxed) < plan.watchers {
        if started.elapsed() > Duration::from_secs(120) {
            return Err(format!("{} of {} watches open after 120 s", opened.load(Ordering::Relaxed), plan.watchers));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let open_time = started.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_watching = kapi.memory().0;

    // Open-loop creates: write k at start + k/rate, on node k mod watchers.
    let total = (plan.rate * plan.secs) as usize;
    let interval = Duration::from_secs_f64(1.0 / plan.rate as f64);
    let cpu_before = kapi.cpu_seconds();
    let start = Instant::now();
    let mut writers = Vec::new();
    for w in 0..plan.writers {
        let (target, writers_n) = (kapi.target.clone(), plan.writers);
        let watchers_n = plan.watchers;
        writers.push(tokio::spawn(async move {
            let mut conn = target.connect().await?;
            let mut acks = Vec::new();
            for k in (w..total).step_by(writers_n) {
                tokio::time::sleep_until((start + interval * k as u32).into()).await;
                let body = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p-{k}")},
                    "spec": {"nodeName": node(k % watchers_n), "containers": [{"name": "c", "image": "busybox"}]}});
                let (status, resp) = conn.send(Method::POST, PODS, Some(Bytes::from(body.to_string()))).await.map_err(|e| format!("creating pod p-{k}: {e}"))?;
                let at = Instant::now();
                check(status, StatusCode::CREATED, &resp, "create pod")?;
                let v: Value = serde_json::from_slice(&resp).map_err(|e| e.to_string())?;
                let rv: u64 = v["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()).ok_or("no resourceVersion")?;
                acks.push((k, rv, at));
            }
            Ok::<_, String>(acks)
        }));
    }
    let mut acks = Vec::with_capacity(total);
    for w in writers {
        acks.extend(w.await.map_err(|e| e.to_string())??);
    }
    let elapsed = start.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cpu = kapi.cpu_seconds() - cpu_before;
    stop.store(true, Ordering::Relaxed);
    let mut by_node: HashMap<usize, Seen> = HashMap::new();
    for (i, task) in tasks {
        by_node.insert(i, task.await.map_err(|e| e.to_string())??);
    }

    let (mut delays, mut missed, mut duplicated) = (Vec::with_capacity(total), 0, 0);
    for (k, rv, at) in &acks {
        let seen = by_node.get(&(k % plan.watchers)).map(Vec::as_slice).unwrap_or_default();
        let hits: Vec<&Instant> = seen.iter().filter(|(r, _, _)| r == rv).map(|(_, _, t)| t).collect();
        match hits.as_slice() {
            [] => missed += 1,
            [t] => delays.push(t.saturating_duration_since(*at)),
            [t, ..] => {
                duplicated += 1;
                delays.push(t.saturating_duration_since(*at));
            }
        }
    }
    let misdelivered = by_node
        .iter()
        .map(|(i, seen)| seen.iter().filter(|(_, name, _)| name.strip_prefix("p-").and_then(|k| k.parse::<usize>().ok()).is_none_or(|k| k % plan.watchers != *i)).count())
        .sum();
    Ok(WatchRun {
        connections,
        rss_before,
        rss_watching,
        open_time,
        writes: acks.len(),
        write_rate: acks.len() as f64 / elapsed.as_secs_f64(),
        delays: Samples::with(delays, elapsed),
        missed,
        duplicated,
        misdelivered,
        cpu: cpu / elapsed.as_secs_f64().max(f64::EPSILON),
    })
}

struct RestartRun {
    rss_idle: f64,
    create_rate: f64,
    json_bytes: usize,
    rss_loaded: f64,
    stop_time: Duration,
    ready_time: Duration,
    rss_restarted: f64,
    items: u64,
}

/// A ConfigMap of about 1 KB of JSON.
fn configmap(i: usize) -> Bytes {
    Bytes::from(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i:06}"), "labels": {"app": "scale", "shard": (i % 16).to_string()}},
        "data": {"payload": "x".repeat(800)}}).to_string())
}

async fn restart(kapi_bin: &Path, plan: &Plan) -> Result<RestartRun, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let data = dir.path().join("data");
    let args: Vec<String> = Vec::new();
    let kapi = Kapi::start_in(kapi_bin, data.clone(), &args, None, None)?;
    kapi.wait_ready().await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_idle = kapi.memory().0;
    let mut conn = kapi.target.connect().await?;
    let (status, body) = conn.send(Method::POST, "/api/v1/namespaces", Some(Bytes::from(r#"{"metadata":{"name":"big"}}"#))).await?;
    check(status, StatusCode::CREATED, &body, "create namespace")?;
    let creates = drive(&kapi.target, plan.objects, 32, |mut conn, i| async move {
        let (status, body) = conn.send(Method::POST, CMS, Some(configmap(i))).await.map_err(|e| format!("creating ConfigMap {i}: {e}"))?;
        check(status, StatusCode::CREATED, &body, "create")?;
        Ok(conn)
    })
    .await?;
    // The connection that made the namespace may have idled out during the creates.
    let mut conn = kapi.target.connect().await?;
    let (status, one) = conn.send(Method::GET, &format!("{CMS}/cm-000000"), None).await.map_err(|e| format!("GET one: {e}"))?;
    check(status, StatusCode::OK, &one, "GET one")?;
    let rss_loaded = kapi.memory().0;
    let t = Instant::now();
    drop(conn);
    drop(kapi);
    let stop_time = t.elapsed();

    let t = Instant::now();
    let kapi = Kapi::start_in(kapi_bin, data, &args, None, None)?;
    kapi.wait_ready().await?;
    let ready_time = t.elapsed();
    let rss_restarted = kapi.memory().0;
    // The restarted server serves them all: a page of one names how many remain.
    let mut conn = kapi.target.connect().await?;
    let (status, page) = conn.send(Method::GET, &format!("{CMS}?limit=1"), None).await?;
    check(status, StatusCode::OK, &page, "LIST limit=1")?;
    let page: Value = serde_json::from_slice(&page).map_err(|e| e.to_string())?;
    let mut items = page["metadata"]["remainingItemCount"].as_u64().unwrap_or(0) + page["items"].as_array().map_or(0, |a| a.len() as u64);
    // Every namespace also holds the cluster's CA bundle, published by kapi's controller.
    if conn.send(Method::GET, &format!("{CMS}/kube-root-ca.crt"), None).await?.0 == StatusCode::OK {
        items -= 1;
    }
    if items != plan.objects as u64 {
        return Err(format!("after the restart the namespace lists {items} ConfigMaps, not {}", plan.objects));
    }
    drop(dir);
    Ok(RestartRun {
        rss_idle,
        create_rate: creates.per_second(),
        json_bytes: one.len(),
        rss_loaded,
        stop_time,
        ready_time,
        rss_restarted,
        items,
    })
}

/// The section.
pub async fn run(kapi_bin: &Path, quick: bool) -> Result<String, String> {
    let plan = Plan::new(quick);
    let w = watchers(kapi_bin, &plan).await?;
    let r = restart(kapi_bin, &plan).await?;
    let mut report = String::from("## Scale: many watchers, a large store (`kapi-bench --only scale`)\n\n");
    report.push_str(&format!(
        "{} pod watches, each `fieldSelector=spec.nodeName=<its node>` (one node each, as kubelets watch), {} streams on each of {} HTTP/2 connections; \
         pods created open-loop at {}/s for {} s over {} connections, each on one node; delay from each create's acknowledgement to its node's event.\n\n",
        plan.watchers, plan.streams_per_connection, w.connections, plan.rate, plan.secs, plan.writers
    ));
    let per_watcher_kib = (w.rss_watching - w.rss_before) * 1024.0 / plan.watchers as f64;
    report.push_str("| watchers | all open after | creates (rate) | delivery p50 | delivery p99 | missed / duplicated / to another node | kapi CPU (cores) | RSS before / with the watches | memory per watcher |\n|---|---|---|---|---|---|---|---|---|\n");
    report.push_str(&format!(
        "| {} | {:.1} s | {} ({:.0}/s) | {} | {} | {} / {} / {} | {:.2} | {:.0} / {:.0} MiB | {:.1} KiB |\n\n",
        plan.watchers,
        w.open_time.as_secs_f64(),
        w.writes,
        w.write_rate,
        ms(w.delays.percentile(0.5)),
        ms(w.delays.percentile(0.99)),
        w.missed,
        w.duplicated,
        w.misdelivered,
        w.cpu,
        w.rss_before,
        w.rss_watching,
        per_watcher_kib,
    ));
    let per_object = (r.rss_restarted - r.rss_idle) * 1024.0 * 1024.0 / plan.objects as f64;
    report.push_str(&format!(
        "{} ConfigMaps of {} bytes of JSON each (as a GET answers one), created over 32 connections, then kapi stopped (SIGTERM) and started again on the same data directory.\n\n",
        plan.objects, r.json_bytes
    ));
    report.push_str("| objects | created at | RSS idle (empty) | RSS after the creates | stop took | start to ready | RSS when ready | cache memory per object | vs its JSON |\n|---|---|---|---|---|---|---|---|---|\n");
    report.push_str(&format!(
        "| {} | {:.0}/s | {:.0} MiB | {:.0} MiB | {:.1} s | {:.1} s | {:.0} MiB | {:.0} bytes | {:.1}x |\n\n",
        r.items,
        r.create_rate,
        r.rss_idle,
        r.rss_loaded,
        r.stop_time.as_secs_f64(),
        r.ready_time.as_secs_f64(),
        r.rss_restarted,
        per_object,
        per_object / r.json_bytes as f64,
    ));
    report.push_str(&format!(
        "Targets (issue 19): every event delivered once ({}), start to ready within 15 s ({}), memory per object at most 1.5x its JSON ({}).\n\n",
        if w.missed + w.duplicated + w.misdelivered == 0 { "met" } else { "**missed**" },
        if r.ready_time <= Duration::from_secs(15) { "met" } else { "**missed**" },
        if per_object <= 1.5 * r.json_bytes as f64 { "met" } else { "**missed**" },
    ));
    Ok(report)
}
