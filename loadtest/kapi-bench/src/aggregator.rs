//! `--only aggregator` (issue 18): what the aggregator's hop costs in a split deployment. One
//! kapi-core, one kapi-extensions and one kapi-aggregator share a data directory; GETs of one
//! ConfigMap go straight to core and through the aggregator, in alternating rounds; then one
//! watcher on each path sees the same writes (made through core), and each event's delay after
//! the write's acknowledgement is compared.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::client::Target;
use crate::stats::{ms, Samples};
use crate::{check, configmap, drive, watch_collect, Kapi, NS};

struct Plan {
    gets: usize,
    rounds: usize,
    writes: u64,
    rate: u64,
}

/// Sequential GETs (latency) and GETs over 8 connections (throughput) of one object.
async fn gets(target: &Target, plan: &Plan, concurrency: usize) -> Result<Samples, String> {
    drive(target, plan.gets, concurrency, |mut conn, _| async move {
        let (status, body) = conn.send(Method::GET, &format!("{NS}/one"), None).await?;
        check(status, StatusCode::OK, &body, "GET")?;
        Ok(conn)
    })
    .await
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// The section.
pub async fn run(kapi_bin: &Path, quick: bool) -> Result<String, String> {
    let plan = if quick { Plan { gets: 100, rounds: 1, writes: 20, rate: 50 } } else { Plan { gets: 5_000, rounds: 5, writes: 1_000, rate: 100 } };
    let bin = |name: &str| kapi_bin.with_file_name(name);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let data = dir.path().join("data");
    let tier: Vec<String> = ["--endpoint-reconciler-type", "none"].iter().map(|s| (*s).to_owned()).collect();
    let core = Kapi::start_in(&bin("kapi-core"), data.clone(), &tier, None, None)?;
    core.wait_ready().await?;
    let extensions = Kapi::start_in(&bin("kapi-extensions"), data.clone(), &tier, None, None)?;
    extensions.wait_ready().await?;
    let front: Vec<String> = vec![
        "--core-url".into(),
        format!("https://{}", core.target.addr),
        "--extensions-url".into(),
        format!("https://{}", extensions.target.addr),
    ];
    let aggregator = Kapi::start_in(&bin("kapi-aggregator"), data, &front, Some(dir), None)?;
    aggregator.wait_ready().await?;

    let mut conn = core.target.connect().await?;
    let (status, body) = conn.send(Method::POST, "/api/v1/namespaces", Some(Bytes::from(r#"{"metadata":{"name":"bench"}}"#))).await?;
    check(status, StatusCode::CREATED, &body, "create namespace")?;
    let (status, body) = conn.send(Method::POST, NS, Some(configmap("one"))).await?;
    check(status, StatusCode::CREATED, &body, "create")?;

    // GETs: alternating rounds, medians of the rounds' percentiles.
    let paths = [("straight to kapi-core", core.target.clone()), ("through kapi-aggregator", aggregator.target.clone())];
    let mut p50 = [Vec::new(), Vec::new()];
    let mut p99 = [Vec::new(), Vec::new()];
    let mut rate = [Vec::new(), Vec::new()];
    for round in 0..plan.rounds {
        let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let one = gets(&paths[i].1, &plan, 1).await?;
            p50[i].push(one.percentile(0.5));
            p99[i].push(one.percentile(0.99));
            rate[i].push(gets(&paths[i].1, &plan, 8).await?.per_second());
        }
    }

    // Watch events: the same writes, one watcher on each path.
    let (status, body) = conn.send(Method::POST, NS, Some(configmap("watched"))).await?;
    check(status, StatusCode::CREATED, &body, "create watched")?;
    let created: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    let from = created["metadata"]["resourceVersion"].as_str().unwrap_or("0").to_owned();
    let last = Arc::new(std::sync::Mutex::new(None));
    let watchers: Vec<_> = paths.iter().map(|(_, t)| tokio::spawn(watch_collect(t.clone(), from.clone(), last.clone()))).collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let interval = Duration::from_secs_f64(1.0 / plan.rate as f64);
    let start = Instant::now();
    let mut acked = Vec::new();
    for i in 0..plan.writes {
        tokio::time::sleep_until((start + interval * i as u32).into()).await;
        let body = Bytes::from(serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "watched"}, "data": {"i": i.to_string()}})).unwrap_or_default());
        let (status, resp) = conn.send(Method::PUT, &format!("{NS}/watched"), Some(body)).await?;
        let at = Instant::now();
        check(status, StatusCode::OK, &resp, "update watched")?;
        let v: Value = serde_json::from_slice(&resp).map_err(|e| e.to_string())?;
        let rv: u64 = v["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()).ok_or("no resourceVersion")?;
        acked.push((rv, at));
    }
    *last.lock().map_err(|e| e.to_string())? = acked.last().map(|a| a.0);
    let mut delays = Vec::new();
    for w in watchers {
        let seen: std::collections::HashMap<u64, Instant> = w.await.map_err(|e| e.to_string())??.into_iter().collect();
        let d: Vec<Duration> = acked
            .iter()
            .map(|(rv, at)| seen.get(rv).map(|t| t.saturating_duration_since(*at)).ok_or_else(|| format!("a watcher missed resourceVersion {rv}")))
            .collect::<Result<_, _>>()?;
        delays.push(Samples::with(d, start.elapsed()));
    }

    let mut report = String::from("## The aggregator's hop (`kapi-bench --only aggregator`)\n\n");
    report.push_str(&format!(
        "kapi-core, kapi-extensions and kapi-aggregator on one data directory (SQLite), TLS with a client certificate, HTTP/1.1 keep-alive. \
         GETs of one ConfigMap: {} sequential (latency) and {} over 8 connections (rate) per path, {} round(s) alternating the order, medians of the rounds. \
         Watch: {} updates through kapi-core at {}/s, one watcher per path, delay from each update's acknowledgement to its event.\n\n",
        plan.gets, plan.gets, plan.rounds, plan.writes, plan.rate
    ));
    report.push_str("| path | GET p50 | GET p99 | GETs/s (8 conns) | watch event p50 | watch event p99 |\n|---|---|---|---|---|---|\n");
    let rate_median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or_default()
    };
    for (i, (name, _)) in paths.iter().enumerate() {
        report.push_str(&format!(
            "| {name} | {} | {} | {:.0} | {} | {} |\n",
            ms(median(p50[i].clone())),
            ms(median(p99[i].clone())),
            rate_median(&rate[i]),
            ms(delays[i].percentile(0.5)),
            ms(delays[i].percentile(0.99))
        ));
    }
    let hop = |a: Duration, b: Duration| (a.as_secs_f64() - b.as_secs_f64()) * 1000.0;
    let (get50, get99) = (hop(median(p50[1].clone()), median(p50[0].clone())), hop(median(p99[1].clone()), median(p99[0].clone())));
    let (w50, w99) = (hop(delays[1].percentile(0.5), delays[0].percentile(0.5)), hop(delays[1].percentile(0.99), delays[0].percentile(0.99)));
    let verdict = |v: f64, target: f64| if v <= target { "met" } else { "**missed**" };
    report.push_str(&format!(
        "\nThe hop adds {get50:.3} ms at p50 and {get99:.3} ms at p99 to a GET, {w50:.3} ms and {w99:.3} ms to a watch event \
         (targets: at most 0.3 ms p50 and 1 ms p99: GET p50 {}, GET p99 {}, watch p50 {}, watch p99 {}).\n\n",
        verdict(get50, 0.3),
        verdict(get99, 1.0),
        verdict(w50, 0.3),
        verdict(w99, 1.0)
    ));
    Ok(report)
}
