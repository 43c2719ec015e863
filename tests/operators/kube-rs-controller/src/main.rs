//! A small but real kube-rs operator, used unchanged by kapi's e2e test
//! (`tests/e2e/tests/operator_kube_rs.rs`): the `kube` crate's runtime `Controller` (a
//! reflector-backed watcher with its own backoff and resume logic) reconciles the test's
//! `Counter` custom resources (`counters.ops.kapi.dev/v1`):
//!
//! * every object gets the finalizer `ops.kapi.dev/cleanup` through `kube::runtime::finalizer`
//!   (a JSON patch with a `test` op, as any kube-rs operator does);
//! * `status.observedValue`, `status.observedMessage` and `status.observedGeneration` are
//!   written through the status subresource (merge patch) whenever they lag the spec;
//! * a deleted object (deletionTimestamp set) is cleaned up and its finalizer removed.
//!
//! Usage: `kube-rs-controller <kubeconfig>`. It runs until killed. Nothing here knows about
//! kapi: it must behave exactly as against kube-apiserver, reconnecting on its own when the
//! server restarts. It prints `stats ...` every second (objects cached, reconciles, status writes,
//! cleanups, errors) and every error, so the test can report on the run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{finalizer, Event};
use kube::runtime::watcher;
use kube::{Client, Config, CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The finalizer this operator owns.
const FINALIZER: &str = "ops.kapi.dev/cleanup";

/// The test CRD's spec: a value and an optional message the operator mirrors into the status.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(group = "ops.kapi.dev", version = "v1", kind = "Counter", namespaced, status = "CounterStatus")]
#[serde(rename_all = "camelCase")]
pub struct CounterSpec {
    pub value: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What the operator last reconciled.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CounterStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_value: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Why one reconcile failed; the controller retries it after a short delay.
#[derive(Debug)]
struct ReconcileError(String);

impl std::fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ReconcileError {}

/// Shared by every reconcile: the client and the counters printed in the stats lines.
struct Context {
    client: Client,
    reconciles: AtomicU64,
    status_writes: AtomicU64,
    cleanups: AtomicU64,
    errors: AtomicU64,
}

async fn reconcile(counter: Arc<Counter>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    ctx.reconciles.fetch_add(1, Ordering::Relaxed);
    let namespace = counter.namespace().ok_or_else(|| ReconcileError("Counter without a namespace".into()))?;
    let name = counter.name_any();
    let api: Api<Counter> = Api::namespaced(ctx.client.clone(), &namespace);
    finalizer(&api, FINALIZER, counter, |event| async {
        match event {
            Event::Apply(counter) => apply(&api, &counter, &ctx).await,
            Event::Cleanup(_) => {
                ctx.cleanups.fetch_add(1, Ordering::Relaxed);
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e| ReconcileError(format!("{namespace}/{name}: {e}")))
}

/// Writes the status through the subresource when it lags the spec.
async fn apply(api: &Api<Counter>, counter: &Counter, ctx: &Context) -> Result<Action, ReconcileError> {
    let generation = counter.metadata.generation;
    let status = counter.status.clone().unwrap_or_default();
    if status.observed_generation == generation
        && status.observed_value == Some(counter.spec.value)
        && status.observed_message == counter.spec.message
    {
        return Ok(Action::await_change());
    }
    let patch = json!({"status": {
        "observedValue": counter.spec.value,
        "observedMessage": counter.spec.message,
        "observedGeneration": generation,
    }});
    api.patch_status(&counter.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| ReconcileError(format!("status of {}: {e}", counter.name_any())))?;
    ctx.status_writes.fetch_add(1, Ordering::Relaxed);
    Ok(Action::await_change())
}

fn error_policy(_counter: Arc<Counter>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    ctx.errors.fetch_add(1, Ordering::Relaxed);
    eprintln!("reconcile error: {error}");
    Action::requeue(Duration::from_millis(500))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: kube-rs-controller <kubeconfig>")?;
    let kubeconfig = Kubeconfig::read_from(&path)?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(config)?;
    let ctx = Arc::new(Context {
        client: client.clone(),
        reconciles: AtomicU64::new(0),
        status_writes: AtomicU64::new(0),
        cleanups: AtomicU64::new(0),
        errors: AtomicU64::new(0),
    });

    let counters: Api<Counter> = Api::all(client);
    let controller = Controller::new(counters, watcher::Config::default());
    let store = controller.store();
    {
        // A stats line every second. Not gated on `store.wait_until_ready()`: the Controller's
        // own runner awaits that same DelayedInit, whose oneshot receiver keeps one waker, so
        // a second concurrent waiter can starve one of the two (kube-runtime 5.0).
        let ctx = ctx.clone();
        tokio::spawn(async move {
            loop {
                println!(
                    "stats cached={} reconciles={} status_writes={} cleanups={} errors={}",
                    store.len(),
                    ctx.reconciles.load(Ordering::Relaxed),
                    ctx.status_writes.load(Ordering::Relaxed),
                    ctx.cleanups.load(Ordering::Relaxed),
                    ctx.errors.load(Ordering::Relaxed)
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
    }
    controller
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                eprintln!("controller: {e}");
            }
        })
        .await;
    Ok(())
}
