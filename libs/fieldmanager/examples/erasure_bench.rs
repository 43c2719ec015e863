//! Measures what handing the schema through [`ApplySchema`] costs against calling the generic
//! functions with the concrete built-in node, as the handlers did before custom resources
//! could apply: a Deployment's server-side apply (a re-apply with one change over an object
//! with managedFields) and an Update's tracking. Run with
//! `cargo run --release -p kapi-fieldmanager --example erasure_bench`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use kapi_fieldmanager::{apply, track_update, ApplySchema, FieldSet, Path, Writer};
use serde_json::{json, Value};

fn writer(manager: &str) -> Writer {
    Writer {
        manager: manager.into(),
        api_version: "apps/v1".into(),
        subresource: String::new(),
        reset: FieldSet::from_paths(&[Path::fields(&["status"])]),
        now: "2026-01-01T00:00:00Z".into(),
    }
}

fn deployment(image: &str, replicas: u32) -> Value {
    let containers: Vec<Value> = (0..4)
        .map(|i| {
            json!({"name": format!("c{i}"), "image": image,
                "ports": [{"containerPort": 8080 + i, "protocol": "TCP"}, {"containerPort": 9090 + i, "protocol": "TCP"}],
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m"}},
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]})
        })
        .collect();
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web", "tier": "front"}, "annotations": {"a": "b"}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": containers,
                "volumes": [{"name": "data", "emptyDir": {}}], "tolerations": [{"key": "k", "operator": "Exists"}]}}}})
}

/// The medians, per call, of `rounds` alternating timings of `iters` calls of `a` and of `b`
/// (alternating so that a busy machine slows both alike).
fn time_pair(rounds: usize, iters: u32, mut a: impl FnMut(), mut b: impl FnMut()) -> (Duration, Duration) {
    let once = |f: &mut dyn FnMut()| {
        let start = Instant::now();
        for _ in 0..iters {
            f();
        }
        start.elapsed() / iters
    };
    let (mut xs, mut ys): (Vec<Duration>, Vec<Duration>) = (0..rounds).map(|_| (once(&mut a), once(&mut b))).unzip();
    xs.sort();
    ys.sort();
    (xs[rounds / 2], ys[rounds / 2])
}

fn main() {
    let Some(node) = kapi_openapi::apply_schema("apps", "v1", "Deployment") else {
        eprintln!("no Deployment schema");
        return;
    };
    let first = deployment("nginx:1.25", 2);
    let live = match apply(None, &first, &node, &writer("kubectl"), false) {
        Ok(v) => v,
        Err(e) => return eprintln!("apply: {}", e.message),
    };
    let config = deployment("nginx:1.27", 3);
    let (rounds, iters) = (21, 100);
    let mut updated = live.clone();
    updated["spec"]["replicas"] = json!(5);
    let apply_times = time_pair(
        rounds,
        iters,
        || {
            black_box(apply(Some(black_box(&live)), &config, &node, &writer("kubectl"), false).is_ok());
        },
        || {
            let schema = ApplySchema::new(node);
            black_box(schema.apply(Some(black_box(&live)), &config, &writer("kubectl"), false).is_ok());
        },
    );
    let track_times = time_pair(
        rounds,
        iters,
        || {
            let mut new = updated.clone();
            track_update(Some(black_box(&live)), &mut new, &node, &writer("scaler"));
            black_box(new);
        },
        || {
            let mut new = updated.clone();
            ApplySchema::new(node).track_update(Some(black_box(&live)), &mut new, &writer("scaler"));
            black_box(new);
        },
    );
    let results = [("apply", apply_times.0, apply_times.1), ("track_update", track_times.0, track_times.1)];
    for (what, baseline, erased) in results {
        let change = (erased.as_secs_f64() / baseline.as_secs_f64() - 1.0) * 100.0;
        println!("{what:>12}: generic {baseline:>10.1?}  ApplySchema {erased:>10.1?}  ({change:+.1}%)");
    }
}
