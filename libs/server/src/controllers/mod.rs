//! In-process controllers for what kube-controller-manager does and users expect of any
//! cluster: namespace deletion ([`namespace`]), the `default` ServiceAccount and
//! `kube-root-ca.crt` ConfigMap of every namespace ([`service_accounts`]), ResourceQuota usage
//! kept exact ([`resource_quota`]), ownerReferences garbage collection
//! ([`garbage_collector`]), PodDisruptionBudget status ([`disruption`]) and ServiceCIDR
//! finalizers and readiness ([`service_cidr`]).
//!
//! `--controllers` picks them with kube-controller-manager's names and syntax (`*`, `name`,
//! `-name`), so a cluster with a real controller manager turns them off. Each follows the
//! watch caches, as kube's controllers follow informers, and queues the keys to reconcile; a
//! failed reconcile is queued again a second later. Workers take keys only while this replica
//! holds the controllers' Lease ([`leader_election`]); every write is conditional or
//! idempotent besides, so a moment of two leaders does no harm.

pub mod disruption;
pub mod garbage_collector;
pub mod leader_election;
pub mod namespace;
pub mod resource_quota;
pub mod service_accounts;
pub mod service_cidr;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kapi_registry::catalog::ResourceSpec;
use kapi_registry::rest::RestStore;
use kapi_watch::{CacheSet, EventType, WatchError, WatchItem};
use serde_json::Value;
use tokio::sync::Notify;

use crate::config::StartError;
use crate::rbac_sync::{initial_state, SyncError};
use crate::tier::Chain;
pub use leader_election::{Election, ElectionConfig, Leadership};

/// The field manager of the controllers' writes, as kube-controller-manager's user agent names
/// them.
pub(crate) const MANAGER: &str = "kube-controller-manager";

/// The controllers kapi runs, by kube-controller-manager's names (then the older aliases
/// `--controllers` also takes).
pub const KNOWN: &[(&str, &str)] = &[
    ("namespace-controller", "namespace"),
    ("serviceaccount-controller", "serviceaccount"),
    ("root-ca-certificate-publisher-controller", "root-ca-cert-publisher"),
    ("resourcequota-controller", "resourcequota"),
    ("garbage-collector-controller", "garbagecollector"),
    ("disruption-controller", "disruption"),
    // Added after kube-controller-manager's renaming: no older alias.
    ("service-cidr-controller", "service-cidr-controller"),
];

/// `--controllers`: which controllers run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    enabled: BTreeSet<&'static str>,
}

impl Default for Selection {
    /// `*`: every controller.
    fn default() -> Self {
        Selection { enabled: KNOWN.iter().map(|(name, _)| *name).collect() }
    }
}

impl Selection {
    /// kube-controller-manager's syntax: `*` enables every controller on by default, `foo`
    /// enables `foo`, `-foo` disables it; an empty list runs none.
    pub fn parse(items: &[String]) -> Result<Self, String> {
        let canonical = |name: &str| KNOWN.iter().find(|(full, alias)| *full == name || *alias == name).map(|(full, _)| *full);
        let mut enabled = BTreeSet::new();
        if items.iter().any(|i| i == "*") {
            enabled = Selection::default().enabled;
        }
        for item in items.iter().map(|i| i.trim()).filter(|i| !i.is_empty() && *i != "*") {
            let (off, name) = match item.strip_prefix('-') {
                Some(name) => (true, name),
                None => (false, item),
            };
            let name = canonical(name).ok_or_else(|| format!("{name:?} is not in the list of known controllers"))?;
            if off {
                enabled.remove(name);
            } else {
                enabled.insert(name);
            }
        }
        Ok(Selection { enabled })
    }

    /// Whether the controller `name` (its full name) runs.
    pub fn runs(&self, name: &str) -> bool {
        self.enabled.contains(name)
    }

    /// No controller runs.
    pub fn is_empty(&self) -> bool {
        self.enabled.is_empty()
    }
}

/// `--controllers` and the `--leader-elect*` flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerOptions {
    /// Which controllers run.
    pub selection: Selection,
    /// `--leader-elect`: run the workers only while holding the Lease.
    pub leader_elect: bool,
    /// The Lease's timings.
    pub election: ElectionConfig,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions { selection: Selection::default(), leader_elect: true, election: ElectionConfig::default() }
    }
}

/// What every controller starts from.
#[derive(Clone)]
pub struct ControllerContext {
    /// The watch caches they follow.
    pub caches: Arc<CacheSet>,
    /// Where they write.
    pub rest: RestStore,
    /// Which resources are served (custom resources included).
    pub chain: Chain,
    /// Whether this replica may act.
    pub leadership: Leadership,
}

impl ControllerContext {
    /// A work queue whose keys are taken only while this replica leads.
    pub(crate) fn queue(&self) -> Arc<Queue> {
        Arc::new(Queue { pending: Mutex::default(), wake: Notify::new(), leadership: self.leadership.clone() })
    }
}

/// Starts the selected controllers; `data_dir` holds the cluster CA the root CA publisher
/// publishes. Returns the election, to be released when the server stops.
pub async fn start(
    opts: &ControllerOptions,
    data_dir: &Path,
    caches: Arc<CacheSet>,
    rest: RestStore,
    chain: Chain,
) -> Result<Option<Election>, StartError> {
    let selection = &opts.selection;
    if selection.is_empty() {
        tracing::info!("no in-process controllers (--controllers)");
        return Ok(None);
    }
    let election = opts.leader_elect.then(|| {
        let identity = format!("{}_{}", crate::endpoints::lease::hostname(), uuid::Uuid::new_v4());
        leader_election::start(rest.clone(), identity, opts.election.clone())
    });
    let leadership = election.as_ref().map_or_else(Leadership::always, |e| e.leadership.clone());
    let ctx = ControllerContext { caches, rest, chain, leadership };
    let (accounts, root_ca) = (selection.runs("serviceaccount-controller"), selection.runs("root-ca-certificate-publisher-controller"));
    if accounts || root_ca {
        let ca = match root_ca {
            true => {
                let path = data_dir.join("pki").join("ca.crt");
                let ca = tokio::fs::read_to_string(&path)
                    .await
                    .map_err(|source| StartError::Io { context: format!("reading the cluster CA {}", path.display()), source })?;
                Some(ca)
            }
            false => None,
        };
        service_accounts::start(&ctx, accounts, ca);
    }
    if selection.runs("resourcequota-controller") {
        resource_quota::start(&ctx);
    }
    if selection.runs("disruption-controller") {
        disruption::start(&ctx);
    }
    if selection.runs("namespace-controller") {
        namespace::start(&ctx);
    }
    if selection.runs("garbage-collector-controller") {
        garbage_collector::start(&ctx);
    }
    if selection.runs(service_cidr::NAME) {
        service_cidr::start(&ctx);
    }
    Ok(election)
}

/// A string field of an object, "" when absent.
pub(crate) fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// A controller's write to an object another hand deleted meanwhile has nothing left to do.
pub(crate) fn gone_is_done<T>(result: Result<T, kapi_apimachinery::ApiError>) -> Result<(), kapi_apimachinery::ApiError> {
    match result {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Keys waiting to be reconciled, each once however often it was added (kube's work queue);
/// taken only while this replica leads.
pub(crate) struct Queue {
    pending: Mutex<BTreeSet<String>>,
    wake: Notify,
    leadership: Leadership,
}

impl Queue {
    /// Queues `key`.
    pub(crate) fn add(&self, key: impl Into<String>) {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).insert(key.into());
        self.wake.notify_one();
    }

    /// Queues `key` again after a pause (a reconcile failed).
    pub(crate) fn retry(self: &Arc<Self>, key: String) {
        let queue = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            queue.add(key);
        });
    }

    /// The next key, waiting for one and for this replica to lead.
    pub(crate) async fn next(&self) -> String {
        loop {
            self.leadership.led().await;
            if let Some(key) = self.pending.lock().unwrap_or_else(|e| e.into_inner()).pop_first() {
                return key;
            }
            self.wake.notified().await;
        }
    }
}

/// Follows `spec`'s cache until the caches shut down: `on` sees every object of the initial
/// state as added, then every change. A watch the cache cuts off is opened again from a fresh
/// initial state (so `on` sees everything again, which reconciling tolerates).
pub async fn follow(caches: Arc<CacheSet>, spec: &'static ResourceSpec, mut on: impl FnMut(EventType, &Value) + Send) {
    loop {
        let mut watcher = match initial_state(&caches, spec).await {
            Ok((objects, watcher)) => {
                for obj in &objects {
                    on(EventType::Added, obj);
                }
                watcher
            }
            Err(SyncError::Watch(WatchError::ShuttingDown)) => return,
            Err(e) => {
                tracing::warn!(resource = spec.resource, "controller watch failed: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        loop {
            match watcher.next().await {
                Some(WatchItem::Event { event, kind }) => on(kind, &event.object),
                Some(WatchItem::Bookmark(_) | WatchItem::InitialEventsEnd(_)) => {}
                Some(WatchItem::Terminated { .. }) => break,
                None => return,
            }
        }
    }
}
