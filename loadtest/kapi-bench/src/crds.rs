//! CRDs at scale: many generated CRDs (Crossplane-sized: about 20 KB of schema each) created
//! by concurrent clients, measured beside an empty server from the same run.
//!
//! - create -> Established latency of every CRD (the time from the create's answer to the
//!   watch event that carries `Established=True`), during the burst;
//! - RSS growth per CRD (kapi's RSS after the burst minus the empty server's, over N);
//! - discovery (`/apis`, aggregated v2) and OpenAPI v3 index answer times, empty vs N CRDs;
//! - GET / LIST / create rates of a custom resource beside a ConfigMap's, same client load.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Map, Value};

use crate::client::{Conn, Target};
use crate::stats::{ms, Samples};
use crate::{check, configmap, drive, Kapi};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
const NAMESPACE: &str = "crdbench";

struct Plan {
    crds: usize,
    clients: usize,
    objects: usize,
    concurrency: usize,
    reads: usize,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Plan { crds: 20, clients: 8, objects: 100, concurrency: 8, reads: 3 }
        } else {
            Plan { crds: 2000, clients: 8, objects: 2000, concurrency: 16, reads: 20 }
        }
    }
}

/// A CRD of about 20 KB of schema, as Crossplane providers generate them: a spec of 64 described
/// fields, some nested, and a status with conditions.
pub fn generated_crd(i: usize) -> Value {
    let mut fields = Map::new();
    for f in 0..64 {
        let description = format!("Field {f} of the generated resource: {}", "a description long enough to look like a generated one. ".repeat(3));
        let field = if f % 5 == 0 {
            json!({"type": "object", "description": description, "properties": {
                "name": {"type": "string", "description": "Name of the referenced object."},
                "namespace": {"type": "string", "description": "Namespace of the referenced object."},
                "policy": {"type": "object", "properties": {"resolve": {"type": "string", "enum": ["Always", "IfNotPresent"]}}}}})
        } else if f % 5 == 1 {
            json!({"type": "array", "description": description, "items": {"type": "string"}})
        } else if f % 5 == 2 {
            json!({"type": "integer", "format": "int64", "description": description})
        } else {
            json!({"type": "string", "description": description})
        };
        fields.insert(format!("field{f}"), field);
    }
    let plural = format!("things{i}");
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.bench.example.com")},
        "spec": {"group": "bench.example.com", "scope": "Namespaced",
                 "names": {"plural": plural, "kind": format!("Thing{i}"), "categories": ["bench"]},
                 "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                               "additionalPrinterColumns": [{"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}],
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "spec": {"type": "object", "properties": fields},
                                   "status": {"type": "object", "properties": {"conditions": {"type": "array", "items": {"type": "object", "properties": {
                                       "type": {"type": "string"}, "status": {"type": "string"}, "reason": {"type": "string"}, "message": {"type": "string"},
                                       "lastTransitionTime": {"type": "string", "format": "date-time"}}}}}}}}}}]}
    })
}

/// Times `n` GETs of `path` (with `accept`, if any) on one connection.
async fn time_gets(target: &Target, path: &str, accept: Option<&str>, n: usize) -> Result<(Samples, usize), String> {
    let mut conn = target.connect().await?;
    let mut lat = Vec::new();
    let mut bytes = 0;
    let started = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        let (status, body) = match accept {
            Some(a) => conn.get_accepting(path, a).await?,
            None => conn.send(Method::GET, path, None).await?,
        };
        lat.push(t.elapsed());
        check(status, StatusCode::OK, &body, path)?;
        bytes = body.len();
    }
    Ok((Samples::with(lat, started.elapsed()), bytes))
}

struct ReadTimes {
    apis: (Samples, usize),
    aggregated: (Samples, usize),
    openapi: (Samples, usize),
}

async fn read_times(target: &Target, n: usize) -> Result<ReadTimes, String> {
    Ok(ReadTimes {
        apis: time_gets(target, "/apis", None, n).await?,
        aggregated: time_gets(target, "/apis", Some(AGGREGATED), n).await?,
        openapi: time_gets(target, "/openapi/v3", None, n).await?,
    })
}

/// Collects, from a watch on CRDs, the moment each CRD was first seen Established.
async fn watch_established(target: Target, from: String, want: usize, seen: Arc<Mutex<HashMap<String, Instant>>>) -> Result<(), String> {
    let mut conn = target.connect().await?;
    let path = format!("{CRDS}?watch=1&resourceVersion={from}&timeoutSeconds=600");
    let resp = conn.start(Method::GET, &path, None).await?;
    let mut body = resp.into_body();
    let mut buf = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| e.to_string())?;
        let Some(data) = frame.data_ref() else { continue };
        buf.extend_from_slice(data);
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            let Ok(event) = serde_json::from_slice::<Value>(&line) else { continue };
            let crd = &event["object"];
            let established = crd["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == "Established" && c["status"] == "True");
            if established {
                let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                let mut seen = seen.lock().map_err(|e| e.to_string())?;
                seen.entry(name).or_insert_with(Instant::now);
                if seen.len() >= want {
                    return Ok(());
                }
            }
        }
    }
    Err("the CRD watch ended early".into())
}

fn row(label: &str, empty: &(Samples, usize), full: &(Samples, usize)) -> String {
    format!(
        "| {label} | {} / {} ({} B) | {} / {} ({} B) |\n",
        ms(empty.0.percentile(0.5)),
        ms(empty.0.percentile(0.99)),
        empty.1,
        ms(full.0.percentile(0.5)),
        ms(full.0.percentile(0.99)),
        full.1
    )
}

async fn create_namespace(target: &Target) -> Result<(), String> {
    let mut conn = target.connect().await?;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    let (status, body) = conn.send(Method::POST, "/api/v1/namespaces", Some(Bytes::from(ns.to_string()))).await?;
    check(status, StatusCode::CREATED, &body, "create namespace")
}

/// Creates, GETs and LISTs `objects` objects at `collection` with `body(i)`.
async fn object_rates(target: &Target, plan: &Plan, collection: &str, body: fn(usize) -> Bytes) -> Result<(Samples, Samples, Samples), String> {
    let path = collection.to_owned();
    let creates = drive(target, plan.objects, plan.concurrency, move |mut conn: Conn, i| {
        let path = path.clone();
        async move {
            let (status, answer) = conn.send(Method::POST, &path, Some(body(i))).await?;
            check(status, StatusCode::CREATED, &answer, "create")?;
            Ok(conn)
        }
    })
    .await?;
    let path = collection.to_owned();
    let gets = drive(target, plan.objects, plan.concurrency, move |mut conn: Conn, i| {
        let path = format!("{path}/o-{i}");
        async move {
            let (status, answer) = conn.send(Method::GET, &path, None).await?;
            check(status, StatusCode::OK, &answer, "get")?;
            Ok(conn)
        }
    })
    .await?;
    let lists = time_gets(target, collection, None, plan.reads).await?.0;
    Ok((creates, gets, lists))
}

fn configmap_body(i: usize) -> Bytes {
    let mut cm: Value = serde_json::from_slice(&configmap(&format!("o-{i}"))).unwrap_or_default();
    cm["metadata"]["name"] = json!(format!("o-{i}"));
    Bytes::from(cm.to_string())
}

fn thing_body(i: usize) -> Bytes {
    let obj = json!({"apiVersion": "bench.example.com/v1", "kind": "Thing0", "metadata": {"name": format!("o-{i}"), "labels": {"bench": "yes"}},
                     "spec": {"field3": "x".repeat(128), "field2": 7}});
    Bytes::from(obj.to_string())
}

/// The section's report.
pub async fn run(kapi_bin: &std::path::Path, quick: bool) -> Result<String, String> {
    let plan = Plan::new(quick);
    let kapi = Kapi::start(kapi_bin)?;
    kapi.wait_ready().await?;
    let target = kapi.target.clone();
    create_namespace(&target).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rss_empty, _) = kapi.memory();
    let empty = read_times(&target, plan.reads).await?;

    let mut conn = target.connect().await?;
    let (status, body) = conn.send(Method::GET, CRDS, None).await?;
    check(status, StatusCode::OK, &body, "list CRDs")?;
    let from: Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
    let from = from["metadata"]["resourceVersion"].as_str().unwrap_or("0").to_owned();
    let seen = Arc::new(Mutex::new(HashMap::new()));
    let watcher = tokio::spawn(watch_established(target.clone(), from, plan.crds, seen.clone()));

    let cpu_before = kapi.cpu_seconds();
    let created: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let bodies: Arc<Vec<Bytes>> = Arc::new((0..plan.crds).map(|i| Bytes::from(generated_crd(i).to_string())).collect());
    let schema_bytes = bodies.iter().map(Bytes::len).sum::<usize>() / plan.crds.max(1);
    let (created2, bodies2) = (created.clone(), bodies.clone());
    let burst = drive(&target, plan.crds, plan.clients, move |mut conn: Conn, i| {
        let (created, bodies) = (created2.clone(), bodies2.clone());
        async move {
            let (status, answer) = conn.send(Method::POST, CRDS, Some(bodies[i].clone())).await?;
            check(status, StatusCode::CREATED, &answer, "create CRD")?;
            let now = Instant::now();
            created.lock().map_err(|e| e.to_string())?.insert(format!("things{i}.bench.example.com"), now);
            Ok(conn)
        }
    })
    .await?;
    match tokio::time::timeout(Duration::from_secs(300), watcher).await {
        Ok(done) => done.map_err(|e| e.to_string())??,
        Err(_) => return Err("not every CRD became Established within 300 s".into()),
    }
    let latencies: Vec<Duration> = {
        let created = created.lock().map_err(|e| e.to_string())?;
        let seen = seen.lock().map_err(|e| e.to_string())?;
        created.iter().filter_map(|(name, at)| seen.get(name).map(|s| s.saturating_duration_since(*at))).collect()
    };
    let established = Samples::with(latencies, burst.elapsed);
    let burst_cpu = kapi.cpu_seconds() - cpu_before;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rss_burst, _) = kapi.memory();
    let full = read_times(&target, plan.reads).await?;
    // After the reads: the OpenAPI parts and documents of the CRDs are built by then.
    let (rss_full, hwm) = kapi.memory();

    let things = format!("/apis/bench.example.com/v1/namespaces/{NAMESPACE}/things0");
    let configmaps = format!("/api/v1/namespaces/{NAMESPACE}/configmaps");
    let (cm_create, cm_get, cm_list) = object_rates(&target, &plan, &configmaps, configmap_body).await?;
    let (cr_create, cr_get, cr_list) = object_rates(&target, &plan, &things, thing_body).await?;

    let mut out = String::new();
    out.push_str(&format!(
        "## CRDs at scale\n\n{} generated CRDs ({} KB of JSON each, 64 described fields, status subresource, a printer column) created by {} concurrent clients in {:.1} s ({:.0} CRDs/s); baseline: the same server before the burst.\n\n",
        plan.crds,
        schema_bytes / 1024,
        plan.clients,
        burst.elapsed.as_secs_f64(),
        burst.per_second()
    ));
    out.push_str(&format!(
        "| create -> Established | p50 {} | p99 {} | max {} |\n|---|---|---|---|\n\n",
        ms(established.percentile(0.5)),
        ms(established.percentile(0.99)),
        ms(established.percentile(1.0))
    ));
    out.push_str(&format!(
        "kapi's CPU time from the first create to the last Established: {burst_cpu:.1} s ({:.2} ms per CRD).\n\n",
        burst_cpu * 1000.0 / plan.crds.max(1) as f64
    ));
    let growth = (rss_full - rss_empty).max(0.0);
    out.push_str(&format!(
        "RSS: empty {rss_empty:.1} MiB, with {} CRDs {rss_full:.1} MiB once discovery and OpenAPI have been read ({rss_burst:.1} MiB just after the burst, peak {hwm:.1} MiB): **{:.3} MiB per CRD** ({:.0} KiB).\n\n",
        plan.crds,
        growth / plan.crds as f64,
        growth * 1024.0 / plan.crds as f64
    ));
    out.push_str(&format!("| answer (p50 / p99, size) | empty server | {} CRDs |\n|---|---|---|\n", plan.crds));
    out.push_str(&row("`GET /apis`", &empty.apis, &full.apis));
    out.push_str(&row("`GET /apis` aggregated v2", &empty.aggregated, &full.aggregated));
    out.push_str(&row("`GET /openapi/v3`", &empty.openapi, &full.openapi));
    out.push_str(&format!(
        "\n{} objects each, {} connections; with the {} CRDs installed:\n\n| | creates/s | create p50 / p99 | GETs/s | GET p50 / p99 | LIST of {} p50 / p99 |\n|---|---|---|---|---|---|\n",
        plan.objects, plan.concurrency, plan.crds, plan.objects
    ));
    for (label, c, g, l) in [("ConfigMap", &cm_create, &cm_get, &cm_list), ("custom resource", &cr_create, &cr_get, &cr_list)] {
        out.push_str(&format!(
            "| {label} | {:.0} | {} / {} | {:.0} | {} / {} | {} / {} |\n",
            c.per_second(),
            ms(c.percentile(0.5)),
            ms(c.percentile(0.99)),
            g.per_second(),
            ms(g.percentile(0.5)),
            ms(g.percentile(0.99)),
            ms(l.percentile(0.5)),
            ms(l.percentile(0.99))
        ));
    }
    out.push_str(&format!(
        "\nCustom resource / ConfigMap: creates {:.0}%, GETs {:.0}%.\n\n",
        100.0 * cr_create.per_second() / cm_create.per_second().max(1e-9),
        100.0 * cr_get.per_second() / cm_get.per_second().max(1e-9)
    ));
    Ok(out)
}
