//! APF's cost when nothing contends (issue 22: at most 3%): user B alone, each of a few kept-alive
//! connections sending its next request as soon as the last is answered, for a fixed time. B
//! falls in a limited level (`global-default`), not the exempt one, so with APF on every request
//! is classified, queued (for no time) and given seats; with it off only max-in-flight counts it.
//!
//! The machine's run-to-run noise is of the size of the target, so GETs and creates alternate
//! over several rounds and the report takes medians; an untimed warm-up first lets the fresh
//! kapi (and its caches, after the seeding) settle.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use serde_json::json;

use super::{b_wait_buckets, configmap, post, timed, Plan, NEIGHBOUR};
use crate::client::{Conn, Target};
use crate::stats::Samples;
use crate::{check, drive, Kapi};

/// A namespace of its own: the flood LISTs `apf`, which the creates would otherwise grow.
const NAMESPACE: &str = "apf-rates";
const CMS: &str = "/api/v1/namespaces/apf-rates/configmaps";
/// The ConfigMap the GETs read.
const TARGET: &str = "rates-target";
/// Payload of every ConfigMap here: small, so that the requests cost what APF would add to.
pub(super) const PAYLOAD: usize = 100;
/// B's concurrent connections: well under the seats of its level with APF on (kube's
/// `global-default` gets some 50 of the default 600), so nothing waits for a seat.
pub(super) const CONNECTIONS: usize = 8;

/// One timed measurement of one kind of request.
pub(super) struct Window {
    pub samples: Samples,
    pub errors: usize,
    pub first_error: Option<String>,
    /// kapi's CPU seconds over the window.
    pub cpu: f64,
}

/// Every round, in run order.
pub(super) struct Rates {
    pub gets: Vec<Window>,
    pub creates: Vec<Window>,
    /// B's requests of the timed rounds by APF wait: cumulative buckets (APF on only).
    pub waits: Vec<(f64, u64)>,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Get,
    Create,
}

/// What the connections did in one window, and the connections, to be reused.
struct Pass {
    latencies: Vec<Duration>,
    elapsed: Duration,
    errors: usize,
    first_error: Option<String>,
    created: Vec<String>,
    conns: Vec<Option<Conn>>,
}

/// The phase, on kapi as `setup` left it (B's RBAC and, with APF on, its FlowSchema in force).
pub(super) async fn measure(kapi: &Kapi, plan: &Plan, apf: bool) -> Result<Rates, String> {
    let mut admin = kapi.target.connect().await?;
    post(&mut admin, "/api/v1/namespaces", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}), "rates namespace").await?;
    let (status, body) = admin.send(Method::POST, CMS, Some(configmap(TARGET, PAYLOAD))).await?;
    check(status, StatusCode::CREATED, &body, "rates configmap")?;
    let b = kapi.target_for(NEIGHBOUR, &[])?;
    let mut conns = Vec::new();
    for _ in 0..CONNECTIONS {
        conns.push(Some(b.connect().await?));
    }
    for kind in [Kind::Get, Kind::Create] {
        let pass = window(&b, conns, kind, plan.rates_warmup, "warm").await?;
        conns = pass.conns;
        delete(kapi, pass.created).await?;
    }
    let waits_before = if apf { b_wait_buckets(kapi).await? } else { Vec::new() };
    let (mut gets, mut creates) = (Vec::new(), Vec::new());
    for round in 0..plan.rates_rounds {
        for kind in [Kind::Get, Kind::Create] {
            let cpu0 = kapi.cpu_seconds();
            let pass = window(&b, conns, kind, plan.rates_window, &format!("r{round}")).await?;
            let cpu = kapi.cpu_seconds() - cpu0;
            conns = pass.conns;
            // Outside the window, so that every round starts from the same store.
            delete(kapi, pass.created).await?;
            let w = Window { samples: Samples::with(pass.latencies, pass.elapsed), errors: pass.errors, first_error: pass.first_error, cpu };
            if kind == Kind::Get {
                gets.push(w);
            } else {
                creates.push(w);
            }
        }
    }
    let waits = if apf {
        let after = b_wait_buckets(kapi).await?;
        after.iter().map(|&(le, n)| (le, n - waits_before.iter().find(|b| b.0 == le).map_or(0, |b| b.1))).collect()
    } else {
        Vec::new()
    };
    Ok(Rates { gets, creates, waits })
}

/// Every connection requests in a loop until `length` is over; the window lasts until the last
/// answer, so the rate counts every request it measured.
async fn window(target: &Target, conns: Vec<Option<Conn>>, kind: Kind, length: Duration, tag: &str) -> Result<Pass, String> {
    let started = Instant::now();
    let end = started + length;
    let tasks: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(c, mut conn)| {
            let (target, prefix) = (target.clone(), format!("{tag}-{c}"));
            tokio::spawn(async move {
                let (mut latencies, mut errors, mut first_error, mut created) = (Vec::new(), 0, None, Vec::new());
                let get = format!("{CMS}/{TARGET}");
                for k in 0.. {
                    if Instant::now() >= end {
                        break;
                    }
                    let result = match kind {
                        Kind::Get => timed(&mut conn, &target, Method::GET, &get, None, StatusCode::OK).await,
                        Kind::Create => {
                            let name = format!("{prefix}-{k}");
                            let body = configmap(&name, PAYLOAD);
                            // Even a failed create may have been stored: deleted all the same.
                            created.push(name);
                            timed(&mut conn, &target, Method::POST, CMS, Some(body), StatusCode::CREATED).await
                        }
                    };
                    match result {
                        Ok((d, _)) => latencies.push(d),
                        Err(e) => {
                            errors += 1;
                            first_error.get_or_insert(e);
                        }
                    }
                }
                (latencies, errors, first_error, created, conn)
            })
        })
        .collect();
    let mut pass = Pass { latencies: Vec::new(), elapsed: Duration::ZERO, errors: 0, first_error: None, created: Vec::new(), conns: Vec::new() };
    for t in tasks {
        let (latencies, errors, first_error, created, conn) = t.await.map_err(|e| e.to_string())?;
        pass.latencies.extend(latencies);
        pass.errors += errors;
        if pass.first_error.is_none() {
            pass.first_error = first_error;
        }
        pass.created.extend(created);
        pass.conns.push(conn);
    }
    pass.elapsed = started.elapsed();
    Ok(pass)
}

/// Deletes `names` as the admin (exempt, so B's APF numbers see none of it).
async fn delete(kapi: &Kapi, names: Vec<String>) -> Result<(), String> {
    if names.is_empty() {
        return Ok(());
    }
    let names = Arc::new(names);
    drive(&kapi.target, names.len(), CONNECTIONS, move |mut conn, i| {
        let path = format!("{CMS}/{}", names[i]);
        async move {
            let (status, body) = conn.send(Method::DELETE, &path, None).await?;
            if status != StatusCode::NOT_FOUND {
                check(status, StatusCode::OK, &body, "delete")?;
            }
            Ok(conn)
        }
    })
    .await
    .map(|_| ())
}
