//! kapi on etcd (`--storage-backend=etcd3`), against baselines from the same run:
//!
//! - creates/s and p50/p99 through kapi at 32 connections vs the same etcd's own put rate from a
//!   32-writer etcd client (8 and 8 with `--quick`) (the ceiling any apiserver on that etcd works under);
//! - GET and consistent LIST latency on etcd vs on SQLite, same client, same objects;
//! - cross-replica watch delay among 3 replicas on etcd: NATS hints vs each replica following
//!   etcd's own watch.
//!
//! etcd runs as one member on loopback with its data directory in the temporary directory (so
//! on whatever disk `TMPDIR` is: each put is an fsync there).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use http::{Method, StatusCode};
use kapi_storage::etcd::testing::EtcdCluster;

use crate::client::Target;
use crate::replicas::{cm_path, find_nats, throughput, watch_run, Cluster, Load, Nats, Plan, WatchRun};
use crate::stats::{ms, Samples};
use crate::{check, spread, Kapi};

/// The same etcd's put rate from `concurrency` writers of `n` values the size of a ConfigMap.
async fn etcd_puts(endpoints: &[String], n: usize, concurrency: usize) -> Result<Samples, String> {
    let client = etcd_client::Client::connect(endpoints, None).await.map_err(|e| format!("etcd client: {e}"))?;
    let value = Arc::new(vec![b'x'; 400]);
    spread(
        n,
        concurrency,
        || {
            let kv = client.kv_client();
            async move { Ok(kv) }
        },
        move |mut kv: etcd_client::KvClient, i| {
            let value = value.clone();
            async move {
                kv.put(format!("/bench/puts/{i}"), value.as_slice(), None).await.map_err(|e| format!("put: {e}"))?;
                Ok(kv)
            }
        },
    )
    .await
}

/// The same number of writes in the shape kapi's creates take (a transaction comparing the
/// key's create revision, putting it and kapi's bookkeeping key), while one watch with previous
/// values follows them, as each kapi replica's change log does: etcd's own cost of kapi's
/// writes, without kapi.
async fn etcd_kapi_shaped(endpoints: &[String], n: usize, concurrency: usize) -> Result<Samples, String> {
    use etcd_client::{Compare, CompareOp, Txn, TxnOp, WatchOptions};
    let client = etcd_client::Client::connect(endpoints, None).await.map_err(|e| format!("etcd client: {e}"))?;
    let watch = client
        .watch_client()
        .watch("/bench/shaped/", Some(WatchOptions::new().with_prefix().with_prev_key()))
        .await
        .map_err(|e| format!("watch: {e}"))?;
    let follower = tokio::spawn(async move {
        let mut watch = watch;
        while let Ok(Some(_)) = watch.message().await {}
    });
    let value = Arc::new(vec![b'x'; 400]);
    let samples = spread(
        n,
        concurrency,
        || {
            let kv = client.kv_client();
            async move { Ok(kv) }
        },
        move |mut kv: etcd_client::KvClient, i| {
            let value = value.clone();
            async move {
                let key = format!("/bench/shaped/{i}");
                let txn = Txn::new()
                    .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                    .and_then([TxnOp::put(key, value.as_slice(), None), TxnOp::put("/bench.kapi/last-write", "", None)]);
                kv.txn(txn).await.map_err(|e| format!("txn: {e}"))?;
                Ok(kv)
            }
        },
    )
    .await;
    follower.abort();
    samples
}

/// `lists` consistent LISTs (no resourceVersion) of namespace `ns`, one after the other.
async fn consistent_lists(target: &Target, ns: &str, lists: usize) -> Result<Samples, String> {
    let path = cm_path(ns);
    spread(
        lists,
        1,
        || {
            let target = target.clone();
            async move { target.connect().await }
        },
        move |mut conn, _| {
            let path = path.clone();
            async move {
                let (status, body) = conn.send(Method::GET, &path, None).await?;
                check(status, StatusCode::OK, &body, "list")?;
                Ok(conn)
            }
        },
    )
    .await
}

struct Standalone {
    creates: Samples,
    gets: Samples,
    lists: Samples,
}

async fn standalone(bin: &Path, args: &[&str], plan: &Plan, lists: usize, label: &str) -> Result<Standalone, String> {
    let kapi = Kapi::start_with(bin, args)?;
    kapi.wait_ready().await?;
    let ns = format!("bench-{label}");
    let (creates, gets) = throughput(std::slice::from_ref(&kapi.target), plan, &ns).await.map_err(|e| format!("kapi on {label}: {e}"))?;
    let lists = consistent_lists(&kapi.target, &ns, lists).await?;
    Ok(Standalone { creates, gets, lists })
}

fn row(label: &str, s: &Samples) -> String {
    format!("| {label} | {} | {:.0} | {} | {} |\n", s.count(), s.per_second(), ms(s.percentile(0.5)), ms(s.percentile(0.99)))
}

fn watch_row(label: &str, w: &WatchRun) -> String {
    format!(
        "| {label} | {} | {} | {} | {} | {} | {} / {} |\n",
        w.cross.count(),
        ms(w.cross.percentile(0.5)),
        ms(w.cross.percentile(0.99)),
        ms(w.same.percentile(0.5)),
        ms(w.same.percentile(0.99)),
        w.missed,
        w.duplicated
    )
}

pub async fn run(bin: &Path, nats_bin: Option<&Path>, quick: bool) -> Result<String, String> {
    let started = Instant::now();
    let plan = Plan::new(quick);
    let lists = if quick { 3 } else { 30 };
    let etcd = tokio::task::spawn_blocking(EtcdCluster::single).await.map_err(|e| e.to_string())?.map_err(|e| format!("etcd: {e}"))?;
    let servers = etcd.endpoints().join(",");
    let on_etcd = ["--storage-backend", "etcd3", "--etcd-servers", servers.as_str()];

    let puts = etcd_puts(&etcd.endpoints(), plan.objects, plan.concurrency).await?;
    let shaped = etcd_kapi_shaped(&etcd.endpoints(), plan.objects, plan.concurrency).await?;
    let kapi_etcd = standalone(bin, &on_etcd, &plan, lists, "etcd").await?;
    let kapi_sqlite = standalone(bin, &[], &plan, lists, "sqlite").await?;

    // Cross-replica watch delay: writes spread over 3 replicas at a rate the machine sustains.
    let load = Load { rate: if quick { 50 } else { 100 }, secs: if quick { 1 } else { 5 }, spread: true };
    let mut watch_rows = String::new();
    let nats_bin = find_nats(nats_bin);
    let mut modes: Vec<(&str, Option<Nats>)> = Vec::new();
    if let Some(nats_bin) = &nats_bin {
        modes.push(("NATS hints", Some(Nats::start(nats_bin)?)));
    }
    modes.push(("etcd watch only", None));
    let replica_args: Vec<String> = on_etcd.iter().map(|s| (*s).to_owned()).collect();
    let next = AtomicUsize::new(0);
    for (label, nats) in modes {
        let cluster = Cluster::start_with(bin, plan.replicas, nats, replica_args.clone()).await?;
        let mode = format!("etcd{}", next.fetch_add(1, Ordering::Relaxed));
        let w = watch_run(&cluster, &plan, load, &mode).await?;
        watch_rows.push_str(&watch_row(label, &w));
    }
    if nats_bin.is_none() {
        watch_rows.push_str("| NATS hints | skipped: nats-server not found | | | | | |\n");
    }

    let ratio = kapi_etcd.creates.per_second() / puts.per_second().max(f64::MIN_POSITIVE);
    let shaped_ratio = kapi_etcd.creates.per_second() / shaped.per_second().max(f64::MIN_POSITIVE);
    let mut r = String::new();
    r.push_str("## kapi on etcd\n\n");
    r.push_str(&format!(
        "One etcd member (etcd `{}`) on loopback, data in `TMPDIR`. {} ConfigMaps created then read back over {} connections (HTTP/1.1 keep-alive, TLS); the etcd baseline puts as many 400-byte values from {} etcd-client tasks over one gRPC channel. Consistent LISTs (no resourceVersion) of the namespace's {} ConfigMaps, one at a time.\n\n",
        etcd_version(),
        plan.objects,
        plan.concurrency,
        plan.concurrency,
        plan.objects,
    ));
    r.push_str("| operation | count | per second | p50 | p99 |\n|---|---|---|---|---|\n");
    r.push_str(&row(&format!("etcd put, {}-writer etcd client (baseline)", plan.concurrency), &puts));
    r.push_str(&row(&format!("etcd transaction shaped like kapi's create, {}-writer etcd client, one prev_kv watch", plan.concurrency), &shaped));
    r.push_str(&row("create through kapi on etcd", &kapi_etcd.creates));
    r.push_str(&row("create through kapi on SQLite", &kapi_sqlite.creates));
    r.push_str(&row("GET through kapi on etcd", &kapi_etcd.gets));
    r.push_str(&row("GET through kapi on SQLite", &kapi_sqlite.gets));
    r.push_str(&row("consistent LIST through kapi on etcd", &kapi_etcd.lists));
    r.push_str(&row("consistent LIST through kapi on SQLite", &kapi_sqlite.lists));
    r.push_str(&format!(
        "\nkapi's creates on etcd reach **{ratio:.2}x** the etcd put rate (target at least 0.5x), and {shaped_ratio:.2}x etcd's rate of transactions shaped like kapi's creates.\n\n"
    ));
    r.push_str(&format!(
        "Cross-replica watch delay, {} replicas on that etcd, {} writes/s for {} s spread over the replicas, {} watchers per replica; latency from a write's acknowledgement to its event at a watcher on another replica (cross) or the same one (same):\n\n| replicas learn of commits through | cross pairs | cross p50 | cross p99 | same p50 | same p99 | missed / duplicated |\n|---|---|---|---|---|---|---|\n",
        plan.replicas, load.rate, load.secs, plan.watchers_per_replica
    ));
    r.push_str(&watch_rows);
    r.push_str(&format!("\nThis section ran in {:.0} s.\n\n", started.elapsed().as_secs_f64()));
    Ok(r)
}

fn etcd_version() -> String {
    let out = std::process::Command::new(kapi_storage::etcd::testing::etcd_binary()).arg("--version").output();
    out.ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).lines().next().map(|l| l.trim_start_matches("etcd Version: ").to_owned()))
        .unwrap_or_else(|| "unknown".into())
}
