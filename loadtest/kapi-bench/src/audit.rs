//! Audit cost: ConfigMap creates and GETs against a kapi without auditing and one that audits
//! every request at level Metadata to a file (the default blocking mode: each event is written
//! before its request answers), measured one after the other in the same run.

use std::path::Path;

use http::{Method, StatusCode};
use serde_json::json;

use crate::stats::{ms, Samples};
use crate::{check, configmap, drive, Kapi};

pub(crate) struct Plan {
    pub(crate) objects: usize,
    pub(crate) concurrency: usize,
}

impl Plan {
    pub(crate) fn new(quick: bool) -> Self {
        if quick {
            Plan { objects: 200, concurrency: 4 }
        } else {
            Plan { objects: 5_000, concurrency: 8 }
        }
    }
}

pub(crate) const POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\"]\nrules:\n- level: Metadata\n";

/// Creates `plan.objects` ConfigMaps, then GETs each; `mark(i)` is called before the creates
/// (0), between the creates and the GETs (1) and after the GETs (2).
pub(crate) async fn workload(
    kapi: &Kapi,
    plan: &Plan,
    mut mark: impl FnMut(usize),
) -> Result<(Samples, Samples), String> {
    let mut conn = kapi.target.connect().await?;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}});
    let (status, body) = conn.send(Method::POST, "/api/v1/namespaces", Some(bytes::Bytes::from(ns.to_string()))).await?;
    check(status, StatusCode::CREATED, &body, "create namespace")?;
    mark(0);
    let creates = drive(&kapi.target, plan.objects, plan.concurrency, |mut conn, i| async move {
        let (status, body) = conn.send(Method::POST, crate::NS, Some(configmap(&format!("cm-{i}")))).await?;
        check(status, StatusCode::CREATED, &body, "create")?;
        Ok(conn)
    })
    .await?;
    mark(1);
    let gets = drive(&kapi.target, plan.objects, plan.concurrency, |mut conn, i| async move {
        let (status, body) = conn.send(Method::GET, &format!("{}/cm-{i}", crate::NS), None).await?;
        check(status, StatusCode::OK, &body, "get")?;
        Ok(conn)
    })
    .await?;
    mark(2);
    Ok((creates, gets))
}

fn row(label: &str, s: &Samples, base: &Samples) -> String {
    format!(
        "| {label} | {:.0} | {:.1}% | {} | {} |\n",
        s.per_second(),
        100.0 * (1.0 - s.per_second() / base.per_second().max(1e-9)),
        ms(s.percentile(0.5)),
        ms(s.percentile(0.99))
    )
}

/// The workload against a kapi auditing every request at Metadata in `mode`; the events written.
async fn audited(kapi_bin: &Path, plan: &Plan, mode: &str) -> Result<(Samples, Samples, usize), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).map_err(|e| e.to_string())?;
    let log = dir.path().join("audit.log");
    let (policy, log_arg) = (policy.to_string_lossy().into_owned(), log.to_string_lossy().into_owned());
    let kapi = Kapi::start_with(kapi_bin, &["--audit-policy-file", &policy, "--audit-log-path", &log_arg, "--audit-log-mode", mode])?;
    kapi.wait_ready().await?;
    let (creates, gets) = workload(&kapi, plan, |_| {}).await?;
    drop(kapi);
    let lines = std::fs::read_to_string(&log).map(|t| t.lines().count()).unwrap_or(0);
    if lines < 2 * plan.objects {
        return Err(format!("the audit log has {lines} events for {} requests ({mode})", 2 * plan.objects));
    }
    Ok((creates, gets, lines))
}

/// The section.
pub async fn run(kapi_bin: &Path, quick: bool) -> Result<String, String> {
    let plan = Plan::new(quick);
    let plain = Kapi::start(kapi_bin)?;
    plain.wait_ready().await?;
    let (creates, gets) = workload(&plain, &plan, |_| {}).await?;
    drop(plain);

    let (audited_creates, audited_gets, lines) = audited(kapi_bin, &plan, "blocking").await?;
    let (batch_creates, batch_gets, _) = audited(kapi_bin, &plan, "batch").await?;

    let mut report = String::from("## Audit logging\n\n");
    report.push_str(&format!(
        "{} ConfigMap creates then {} GETs over {} connections, against kapi without auditing and with every request audited at Metadata (blocking mode, one JSON line per event to a file: {lines} events).\n\n",
        plan.objects, plan.objects, plan.concurrency
    ));
    report.push_str("| requests | per second | cost | p50 | p99 |\n|---|---|---|---|---|\n");
    report.push_str(&row("creates, no audit", &creates, &creates));
    report.push_str(&row("creates, audit Metadata", &audited_creates, &creates));
    report.push_str(&row("creates, audit Metadata, batch mode", &batch_creates, &creates));
    report.push_str(&row("GETs, no audit", &gets, &gets));
    report.push_str(&row("GETs, audit Metadata", &audited_gets, &gets));
    report.push_str(&row("GETs, audit Metadata, batch mode", &batch_gets, &gets));
    let worst = [(audited_creates.per_second(), creates.per_second()), (audited_gets.per_second(), gets.per_second())]
        .iter()
        .map(|(a, b)| 100.0 * (1.0 - a / b.max(1e-9)))
        .fold(f64::MIN, f64::max);
    let batch_worst = [(batch_creates.per_second(), creates.per_second()), (batch_gets.per_second(), gets.per_second())]
        .iter()
        .map(|(a, b)| 100.0 * (1.0 - a / b.max(1e-9)))
        .fold(f64::MIN, f64::max);
    report.push_str(&format!(
        "\nAudit at Metadata costs at most {worst:.1}% of the rate in blocking mode (kube's default for the log; target: at most 10%: {}), {batch_worst:.1}% in batch mode.\n\n",
        if worst <= 10.0 { "met" } else { "missed" }
    ));
    Ok(report)
}
