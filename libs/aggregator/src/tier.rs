//! The aggregator at the head of the chain (kube-aggregator's `APIAggregator`): it follows the
//! APIService objects, proxies the group versions they hand to Services, lists those groups
//! in discovery at the place their priorities give them, and runs its controllers (local
//! APIService registration, availability).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use kapi_registry::catalog::{self, ResourceSpec};
use kapi_registry::rest::RestStore;
use kapi_server::lifecycle::{PostStartHook, PostStartHooks};
use kapi_server::tier::{builtin_group_order, Chain, Proxy, ServedGroup, Tier, TierBuilder, TierContext, TierFuture, CUSTOM_GROUP_ORDER};
use kapi_server::scope::{BuiltinScope, ResourceScope};
use kapi_server::StartError;
use kapi_webhook::{EndpointSliceResolver, ServiceResolver};
use serde_json::Value;

use crate::apiservice::{builtin_priority, sorted_by_group_and_version, ApiService, CRD_PRIORITY};
use crate::backends::{Backends, Split, OWN_GROUP};
use crate::checks::CheckQueue;
use crate::proxy::{OnFailure, RemoteProxy};
use crate::transport::{ProxyIdentity, Transport, TransportKey};

/// kube-aggregator's flags.
#[derive(Debug, Clone, Default)]
pub struct AggregatorOptions {
    /// `--proxy-client-cert-file`: the certificate presented to aggregated servers, which
    /// trust the identity headers it vouches for.
    pub proxy_client_cert_file: Option<PathBuf>,
    /// `--proxy-client-key-file`.
    pub proxy_client_key_file: Option<PathBuf>,
    /// The core and extensions tiers as services of their own (`kapi-aggregator`); `None`
    /// when they run in this process.
    pub backends: Option<Backends>,
}

/// Builds the aggregator tier.
#[derive(Default)]
pub struct AggregatorTierBuilder {
    options: AggregatorOptions,
    hooks: Vec<PostStartHook>,
}

impl AggregatorTierBuilder {
    /// An aggregator with these flags.
    pub fn new(options: AggregatorOptions) -> Self {
        AggregatorTierBuilder { options, hooks: Vec::new() }
    }
}

impl TierBuilder for AggregatorTierBuilder {
    fn register_hooks(&mut self, hooks: &mut PostStartHooks) {
        // kube-aggregator's hooks; the registration one completes after the first pass.
        self.hooks = ["start-kube-aggregator-informers", "apiservice-status-local-available-controller", "apiservice-status-remote-available-controller", "kube-apiserver-autoregistration"]
            .iter()
            .map(|name| hooks.register(name))
            .collect();
    }

    fn build(self: Box<Self>, ctx: TierContext) -> TierFuture<'static, Result<Arc<dyn Tier>, StartError>> {
        Box::pin(async move {
            let identity = read_identity(&self.options)?;
            let spec = catalog::find("apiregistration.k8s.io", "v1", "apiservices")
                .ok_or_else(|| StartError::Config("apiservices missing from the catalog".into()))?;
            let split = match &self.options.backends {
                Some(backends) => Some(Arc::new(Split::new(backends, identity.as_ref()).map_err(StartError::Config)?)),
                None => None,
            };
            // The aggregator's own group, served here when no core tier is in this process.
            let own_scope = split.as_ref().map(|_| Arc::new(BuiltinScope::new(spec, ctx.openapi.clone())) as Arc<dyn ResourceScope>);
            let tier = Arc::new(AggregatorTier {
                own_scope,
                shared: Arc::new(Shared {
                    split,
                    rest: ctx.rest.clone(),
                    spec,
                    identity,
                    resolver: Arc::new(EndpointSliceResolver::new(ctx.rest.clone())),
                    state: RwLock::new(Arc::new(State::default())),
                    discovered: RwLock::new(HashMap::new()),
                    transports: Mutex::new(HashMap::new()),
                    generation: Arc::new(AtomicU64::new(0)),
                    checks: Arc::new(CheckQueue::default()),
                }),
                hooks: Mutex::new(self.hooks),
            });
            Ok(tier as Arc<dyn Tier>)
        })
    }
}

fn read_identity(options: &AggregatorOptions) -> Result<Option<ProxyIdentity>, StartError> {
    let read = |flag: &str, path: &PathBuf| std::fs::read(path).map_err(|source| StartError::Io { context: format!("{flag}: reading {}", path.display()), source });
    match (&options.proxy_client_cert_file, &options.proxy_client_key_file) {
        (Some(cert), Some(key)) => Ok(Some(ProxyIdentity { cert: read("--proxy-client-cert-file", cert)?, key: read("--proxy-client-key-file", key)? })),
        (None, None) => Ok(None),
        _ => Err(StartError::Config("--proxy-client-cert-file and --proxy-client-key-file must be given together".into())),
    }
}

/// The aggregator tier.
pub struct AggregatorTier {
    shared: Arc<Shared>,
    own_scope: Option<Arc<dyn ResourceScope>>,
    hooks: Mutex<Vec<PostStartHook>>,
}

/// (group, version).
type GroupVersion = (String, String);
/// A remote group version's aggregated discovery resources, and whether they are current.
type Discovered = (Arc<Vec<Value>>, bool);

/// What the tier's handlers and controllers share.
pub(crate) struct Shared {
    pub(crate) rest: RestStore,
    pub(crate) spec: &'static ResourceSpec,
    identity: Option<ProxyIdentity>,
    pub(crate) resolver: Arc<dyn ServiceResolver>,
    state: RwLock<Arc<State>>,
    /// Aggregated discovery of each remote group version, and whether it is current.
    discovered: RwLock<HashMap<GroupVersion, Discovered>>,
    transports: Mutex<HashMap<TransportKey, Arc<Transport>>>,
    pub(crate) generation: Arc<AtomicU64>,
    /// The tiers behind a split aggregator.
    pub(crate) split: Option<Arc<Split>>,
    pub(crate) checks: Arc<CheckQueue>,
}

/// The APIServices as last seen, and what routing derives from them.
#[derive(Default)]
pub(crate) struct State {
    /// By name: the parsed APIService and the stored object.
    pub(crate) services: BTreeMap<String, (ApiService, Arc<Value>)>,
    remote: HashMap<GroupVersion, Arc<RemoteProxy>>,
    groups: Vec<ServedGroup>,
}

impl State {
    /// Whether an APIService hands `group`/`version` to a Service.
    pub(crate) fn is_remote(&self, group: &str, version: &str) -> bool {
        self.remote.contains_key(&(group.to_owned(), version.to_owned()))
    }
}

impl OnFailure for CheckQueue {
    fn failed(&self, apiservice: &str) {
        self.add(apiservice);
    }
}

impl Shared {
    /// The current state.
    pub(crate) fn state(&self) -> Arc<State> {
        self.state.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Rebuilds routing after APIServices changed (`objects`: every APIService now).
    pub(crate) fn set_services(&self, objects: impl IntoIterator<Item = Arc<Value>>) {
        let services: BTreeMap<String, (ApiService, Arc<Value>)> =
            objects.into_iter().filter_map(|o| ApiService::from_object(&o).map(|s| (s.name.clone(), (s, o)))).collect();
        let mut remote = HashMap::new();
        for (service, _) in services.values().filter(|(s, _)| s.service.is_some()) {
            let transport = self.transport(service);
            let proxy = RemoteProxy { service: service.clone(), transport, resolver: self.resolver.clone(), on_failure: self.checks.clone() };
            remote.insert((service.group.clone(), service.version.clone()), Arc::new(proxy));
        }
        let all: Vec<ApiService> = services.values().map(|(s, _)| s.clone()).collect();
        let groups = sorted_by_group_and_version(&all)
            .into_iter()
            .filter(|g| !g[0].group.is_empty() && g.iter().any(|s| s.service.is_some()))
            .map(|g| {
                let priority = g.iter().map(|s| s.group_priority).max().unwrap_or(0);
                ServedGroup { name: g[0].group.clone(), versions: g.iter().map(|s| s.version.clone()).collect(), order: order_for(&g[0].group, priority) }
            })
            .collect();
        *self.state.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(State { services, remote, groups });
        self.generation.fetch_add(1, Ordering::Relaxed);
    }

    /// The transport of a remote APIService (shared by the APIServices with its settings; the
    /// availability check probes through it too).
    pub(crate) fn transport(&self, service: &ApiService) -> Result<Arc<Transport>, String> {
        let key = TransportKey::of(service).ok_or("no service reference")?;
        let mut transports = self.transports.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = transports.get(&key) {
            return Ok(t.clone());
        }
        let transport = Arc::new(Transport::new(&key, self.identity.as_ref())?);
        transports.insert(key, transport.clone());
        Ok(transport)
    }

    /// Records what a discovery probe of a remote group version found (`None`: it failed, and
    /// what was known before stays, marked stale).
    pub(crate) fn discovered(&self, group: &str, version: &str, resources: Option<Vec<Value>>) {
        let mut discovered = self.discovered.write().unwrap_or_else(|p| p.into_inner());
        let key = (group.to_owned(), version.to_owned());
        let next = match resources {
            Some(r) => (Arc::new(r), true),
            None => (discovered.get(&key).map(|(r, _)| r.clone()).unwrap_or_default(), false),
        };
        let changed = discovered.get(&key).is_none_or(|(r, current)| *current != next.1 || **r != *next.0);
        discovered.insert(key, next);
        if changed {
            self.generation.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Where a group of another server stands among the chain's groups: by kube's priorities, the
/// built-in groups' from kube's table, custom resource groups' 1000, ties by name.
fn order_for(group: &str, priority: i64) -> u32 {
    if priority < CRD_PRIORITY.0 {
        return CUSTOM_GROUP_ORDER + u32::try_from(20_000 - priority.max(0)).unwrap_or(0);
    }
    if priority == CRD_PRIORITY.0 {
        return CUSTOM_GROUP_ORDER;
    }
    // Before the first built-in group it outranks (lower priority, or equal and a later name);
    // a built-in group kube's table does not list (the aggregator's own, first) ranks as the
    // group before it.
    let mut last = 20_000;
    for g in catalog::groups() {
        let p = builtin_priority(g.name, "v1").map_or(last, |(p, _)| p);
        last = p;
        if p < priority || (p == priority && g.name > group) {
            return builtin_group_order(g.name).unwrap_or(CUSTOM_GROUP_ORDER).saturating_sub(5);
        }
    }
    CUSTOM_GROUP_ORDER - 5
}

impl Tier for AggregatorTier {
    fn name(&self) -> &'static str {
        "kube-aggregator"
    }

    fn groups(&self) -> Vec<ServedGroup> {
        let mut groups = self.shared.state().groups.clone();
        if let Some(split) = &self.shared.split {
            groups.extend(split.groups());
            groups.push(ServedGroup { name: OWN_GROUP.into(), versions: vec!["v1".into()], order: builtin_group_order(OWN_GROUP).unwrap_or(0) });
        }
        groups
    }

    fn resources_in(&self, group: &str, version: &str) -> Vec<&'static ResourceSpec> {
        match &self.own_scope {
            Some(_) if group == OWN_GROUP => catalog::resources_in(group, version).collect(),
            _ => Vec::new(),
        }
    }

    fn scope(&self, group: &str, version: &str, resource: &str) -> Option<Arc<dyn ResourceScope>> {
        let own = self.own_scope.as_ref()?;
        (group == OWN_GROUP && version == "v1" && resource == "apiservices").then(|| own.clone())
    }

    fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::Relaxed)
    }

    fn proxy(&self, group: &str, version: &str) -> Option<Arc<dyn Proxy>> {
        // Every resource request asks: the key is built only when some APIService is remote.
        let state = self.shared.state();
        if let Some(remote) = (!state.remote.is_empty()).then(|| state.remote.get(&(group.to_owned(), version.to_owned()))).flatten() {
            return Some(remote.clone() as Arc<dyn Proxy>);
        }
        self.shared.split.as_ref()?.route(group).map(|b| b as Arc<dyn Proxy>)
    }

    fn remote_resources(&self, group: &str, version: &str) -> Option<(Arc<Vec<Value>>, bool)> {
        let key = (group.to_owned(), version.to_owned());
        if !self.shared.state().remote.contains_key(&key) {
            return self.shared.split.as_ref()?.resources(group, version);
        }
        Some(self.shared.discovered.read().unwrap_or_else(|p| p.into_inner()).get(&key).cloned().unwrap_or_default())
    }

    fn discovery_sync(&self) -> TierFuture<'_, ()> {
        Box::pin(async move {
            if let Some(split) = &self.shared.split {
                // A consistent read of the CRDs: another tier or replica may have just
                // established one that this process's cache has not seen yet (a client that
                // saw it Established through one aggregator asks another for discovery).
                let caches = self.shared.rest.caches();
                if let Ok(revision) = self.shared.rest.store().current_revision().await {
                    let _ = caches.wait_for(revision, Duration::from_secs(2)).await;
                }
                let served = established_crd_versions(&self.shared);
                split.catch_up(&served, &self.shared.generation).await;
            }
        })
    }

    fn openapi_proxy(&self) -> Option<Arc<dyn Proxy>> {
        self.shared.split.as_ref().map(|split| split.extensions() as Arc<dyn Proxy>)
    }

    fn start(&self, chain: &Chain) {
        let hooks = std::mem::take(&mut *self.hooks.lock().unwrap_or_else(|p| p.into_inner()));
        crate::controllers::start(self.shared.clone(), chain.clone(), hooks);
    }
}

/// The served group versions of the Established CRDs in this process's CRD cache.
pub(crate) fn established_crd_versions(shared: &Shared) -> Vec<(String, String)> {
    let Some(spec) = catalog::find("apiextensions.k8s.io", "v1", "customresourcedefinitions") else { return Vec::new() };
    let Some(cache) = shared.rest.caches().cache(&spec.key_prefix()) else { return Vec::new() };
    let mut out = Vec::new();
    for crd in cache.list(&spec.key_prefix()).0 {
        let o = &crd.object;
        let established = o.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| {
            cs.iter().any(|c| c.get("type").and_then(Value::as_str) == Some("Established") && c.get("status").and_then(Value::as_str) == Some("True"))
        });
        if !established {
            continue;
        }
        let group = o.pointer("/spec/group").and_then(Value::as_str).unwrap_or_default();
        for v in o.pointer("/spec/versions").and_then(Value::as_array).into_iter().flatten() {
            if v.get("served").and_then(Value::as_bool) == Some(true) {
                if let Some(name) = v.get("name").and_then(Value::as_str) {
                    out.push((group.to_owned(), name.to_owned()));
                }
            }
        }
    }
    out
}

/// kube's automatic local APIService of a group version this process serves: its name and
/// priorities (custom resource group versions: kube's CRD priorities; built-in groups kube's
/// table does not list sit below the listed ones).
pub(crate) fn local_apiservice(group: &str, version: &str, custom: bool) -> (String, i64, i64) {
    let (gp, vp) = if custom { CRD_PRIORITY } else { builtin_priority(group, version).unwrap_or((15_000, 9)) };
    (format!("{version}.{group}"), gp, vp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_of_other_servers_sit_where_their_priorities_place_them() {
        // metrics-server's 100: after every custom resource group.
        assert!(order_for("metrics.k8s.io", 100) > CUSTOM_GROUP_ORDER);
        assert!(order_for("a", 10) > order_for("b", 100));
        assert_eq!(order_for("x.example", 1000), CUSTOM_GROUP_ORDER);
        // 17850: between apps (17800) and the core group's 18000, so just before apps.
        assert_eq!(order_for("early.example", 17850), builtin_group_order("apps").unwrap() - 5);
        // Equal to apps: by name, "aaa" first.
        assert_eq!(order_for("aaa", 17800), builtin_group_order("apps").unwrap() - 5);
        assert!(order_for("zzz", 17800) > builtin_group_order("apps").unwrap());
        // Above every built-in custom group: before the last built-in, after the first.
        let o = order_for("mid.example", 2000);
        assert!(o > builtin_group_order("apps").unwrap() && o < CUSTOM_GROUP_ORDER);
    }
}
