//! The server chain, as kube-apiserver's `CreateServerChain`: each tier serves its own groups
//! and hands what it does not serve to the next one (its delegation target); the end of the
//! chain answers 404.
//!
//! A tier declares its groups (with their place in `/apis`), the resources of each served
//! version and a [`ResourceScope`] per resource; the verb handlers, discovery and routing are
//! the generic server's and work the same for every tier. In one process the chain is
//! core -> extensions -> NotFound; the same values let a later tier (the aggregator) sit in
//! front, or a tier run as a process of its own.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use kapi_openapi::OpenApi;
use kapi_registry::catalog::{self, ResourceSpec, Serving};
use kapi_registry::rest::RestStore;
use kapi_storage::Revision;
use serde_json::Value;

use crate::health::checks::Informers;
use crate::lifecycle::{Lifecycle, PostStartHooks};
use crate::scope::{BuiltinScope, ResourceScope};
use crate::StartError;

/// A boxed future, for the async parts of the tier seam.
pub type TierFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One group a tier serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedGroup {
    /// Group name (empty: the core group, served at `/api`).
    pub name: String,
    /// Served versions, preferred first.
    pub versions: Vec<String>,
    /// Place in `/apis`: lower first; equal places sort by name. Built-in groups keep kube's
    /// order; custom resource groups come after them, by name (kube's APIService priorities).
    pub order: u32,
}

/// Place of groups that follow every built-in group (custom resource groups).
pub const CUSTOM_GROUP_ORDER: u32 = 1_000_000;

/// One server of the chain.
pub trait Tier: Send + Sync {
    /// kube's name for the server (`kube-apiserver`, `apiextensions-apiserver`), for logs.
    fn name(&self) -> &'static str;

    /// The groups this tier serves now.
    fn groups(&self) -> Vec<ServedGroup>;

    /// The resources of one served group version, in discovery order.
    fn resources_in(&self, group: &str, version: &str) -> Vec<&'static ResourceSpec>;

    /// The scope of a resource this tier serves.
    fn scope(&self, group: &str, version: &str, resource: &str) -> Option<Arc<dyn ResourceScope>>;

    /// Resolves once the tier's view of what it serves includes everything committed up to
    /// `revision` (a replica that has not yet seen a CRD another replica created must not
    /// answer 404 for it). Tiers whose resources never change resolve at once.
    fn sync(&self, _revision: Revision) -> TierFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    /// Changes whenever what the tier serves changes (groups, resources, their scopes), so
    /// that documents derived from the chain (aggregated discovery) are rebuilt only then.
    /// Tiers whose resources never change keep 0.
    fn generation(&self) -> u64 {
        0
    }

    /// The server of a group version this tier hands to another process (kube-aggregator's
    /// APIServices backed by a Service): its requests, discovery of it included, are proxied.
    fn proxy(&self, _group: &str, _version: &str) -> Option<Arc<dyn Proxy>> {
        None
    }

    /// Aggregated discovery's resources of a proxied group version, as its server last
    /// described them, and whether that description is current (`false`: kube's `Stale`, the
    /// server could not be asked). `None` for group versions this tier does not proxy.
    fn remote_resources(&self, _group: &str, _version: &str) -> Option<(Arc<Vec<Value>>, bool)> {
        None
    }

    /// Called once the whole chain is built: a tier that follows what the others serve (the
    /// aggregator's registration of local APIServices) starts from here.
    fn start(&self, _chain: &Chain) {}

    /// Resolves once discovery documents built from this tier include every group the store
    /// defines now that this tier can know of (a split aggregator re-reads the extensions
    /// tier's discovery when its CRD cache has Established CRDs that discovery lacks), so a
    /// client that saw a CRD Established finds its resources. Most tiers resolve at once.
    fn discovery_sync(&self) -> TierFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }

    /// Where the OpenAPI documents come from when another process has the complete ones (a
    /// split aggregator: the extensions tier's hold the built-in kinds and every CRD).
    fn openapi_proxy(&self) -> Option<Arc<dyn Proxy>> {
        None
    }
}

/// A group version served by another process, reached through this one.
pub trait Proxy: Send + Sync {
    /// Forwards one request (already authenticated and authorized) as `user`.
    fn serve(&self, head: http::request::Parts, body: bytes::Bytes, user: kapi_auth::UserInfo) -> TierFuture<'static, http::Response<crate::response::Body>>;
}

/// What a tier is built with, once storage and the watch caches are up.
#[derive(Clone)]
pub struct TierContext {
    /// The generic REST store (and through it the store and the caches).
    pub rest: RestStore,
    /// The OpenAPI documents and schemas of the built-in kinds.
    pub openapi: Arc<OpenApi>,
    /// Lifecycle of the process (tiers' controllers stop with it).
    pub lifecycle: Arc<Lifecycle>,
    /// Informer sync state behind `/readyz/informer-sync`.
    pub informers: Arc<Informers>,
}

/// Builds a tier of the chain (kube's `config.Complete().New(delegate)`).
pub trait TierBuilder: Send {
    /// Registers the tier's post-start hooks before serving starts, so that `/readyz` waits
    /// for them from the first request.
    fn register_hooks(&mut self, hooks: &mut PostStartHooks);

    /// Builds the tier and starts its controllers.
    fn build(self: Box<Self>, ctx: TierContext) -> TierFuture<'static, Result<Arc<dyn Tier>, StartError>>;
}

/// Groups the extensions tier owns even though the built-in catalog describes them.
const EXTENSION_GROUPS: &[&str] = &["apiextensions.k8s.io"];

/// The core tier (kube-apiserver proper): every built-in group of the catalog except those
/// of the extensions tier.
pub struct CoreTier {
    scopes: HashMap<(&'static str, &'static str, &'static str), Arc<dyn ResourceScope>>,
}

impl CoreTier {
    /// One scope per served built-in resource.
    pub fn new(openapi: Arc<OpenApi>) -> Self {
        let scopes = catalog::resources()
            .iter()
            .filter(|r| !EXTENSION_GROUPS.contains(&r.group))
            .map(|r| ((r.group, r.version, r.resource), Arc::new(BuiltinScope::new(r, openapi.clone())) as Arc<dyn ResourceScope>))
            .collect();
        Self { scopes }
    }
}

/// Builds the core tier.
#[derive(Debug, Default)]
pub struct CoreTierBuilder;

impl TierBuilder for CoreTierBuilder {
    fn register_hooks(&mut self, _hooks: &mut PostStartHooks) {}

    fn build(self: Box<Self>, ctx: TierContext) -> TierFuture<'static, Result<Arc<dyn Tier>, StartError>> {
        Box::pin(async move { Ok(Arc::new(CoreTier::new(ctx.openapi.clone())) as Arc<dyn Tier>) })
    }
}

/// Where a built-in group stands in kube's `/apis` order.
/// (Spaced by ten, so that groups of other servers can be placed between them.)
pub fn builtin_group_order(group: &str) -> Option<u32> {
    catalog::groups().iter().position(|g| g.name == group).map(|i| (i as u32 + 1) * 10)
}

impl Tier for CoreTier {
    fn name(&self) -> &'static str {
        "kube-apiserver"
    }

    fn groups(&self) -> Vec<ServedGroup> {
        let core = ServedGroup { name: String::new(), versions: vec!["v1".into()], order: 0 };
        let named = catalog::groups().iter().filter(|g| !EXTENSION_GROUPS.contains(&g.name)).map(|g| ServedGroup {
            name: g.name.to_owned(),
            versions: g.versions.iter().map(|v| (*v).to_owned()).collect(),
            order: builtin_group_order(g.name).unwrap_or(0),
        });
        std::iter::once(core).chain(named).collect()
    }

    fn resources_in(&self, group: &str, version: &str) -> Vec<&'static ResourceSpec> {
        if EXTENSION_GROUPS.contains(&group) {
            return Vec::new();
        }
        catalog::resources_in(group, version).collect()
    }

    fn scope(&self, group: &str, version: &str, resource: &str) -> Option<Arc<dyn ResourceScope>> {
        let spec = catalog::find(group, version, resource)?;
        self.scopes.get(&(spec.group, spec.version, spec.resource)).cloned()
    }
}

/// The tiers in delegation order; what none serves is 404.
#[derive(Clone)]
pub struct Chain {
    tiers: Vec<Arc<dyn Tier>>,
    /// Documents derived from the chain, by name, with the tiers' generations they were
    /// built at.
    derived: Arc<Mutex<HashMap<&'static str, Derived>>>,
}

/// A derived document and the tiers' generations it was built at.
type Derived = (Vec<u64>, Arc<Value>);

impl Chain {
    /// The chain of `tiers`, first to last.
    pub fn new(tiers: Vec<Arc<dyn Tier>>) -> Self {
        Self { tiers, derived: Arc::default() }
    }

    /// The document called `name` that `build` derives from the chain, built again only
    /// after a tier's [`Tier::generation`] moved (aggregated discovery lists every resource:
    /// with thousands of CRDs, tens of milliseconds per build).
    pub fn derived(&self, name: &'static str, build: impl FnOnce(&Chain) -> Value) -> Arc<Value> {
        let generations: Vec<u64> = self.tiers.iter().map(|t| t.generation()).collect();
        if let Some((at, doc)) = self.derived.lock().unwrap_or_else(|p| p.into_inner()).get(name) {
            if *at == generations {
                return doc.clone();
            }
        }
        // Built outside the lock; a concurrent build of the same generation is equal.
        let doc = Arc::new(build(self));
        self.derived.lock().unwrap_or_else(|p| p.into_inner()).insert(name, (generations, doc.clone()));
        doc
    }

    /// The proxy of a group version another process serves (the first tier that has one).
    pub fn proxy(&self, group: &str, version: &str) -> Option<Arc<dyn Proxy>> {
        self.tiers.iter().find_map(|t| t.proxy(group, version))
    }

    /// Aggregated discovery's resources of a proxied group version, and whether they are current.
    pub fn remote_resources(&self, group: &str, version: &str) -> Option<(Arc<Vec<Value>>, bool)> {
        self.tiers.iter().find_map(|t| t.remote_resources(group, version))
    }

    /// The server of the OpenAPI documents when another process has them ([`Tier::openapi_proxy`]).
    pub fn openapi_proxy(&self) -> Option<Arc<dyn Proxy>> {
        self.tiers.iter().find_map(|t| t.openapi_proxy())
    }

    /// Moves whenever what any tier serves moves ([`Tier::generation`]).
    pub fn generation(&self) -> u64 {
        self.tiers.iter().fold(0u64, |sum, t| sum.wrapping_add(t.generation()))
    }

    /// Tells every tier the chain is complete ([`Tier::start`]).
    pub fn start(&self) {
        for tier in &self.tiers {
            tier.start(self);
        }
    }

    /// The scope of a resource: the first tier that serves it.
    pub fn scope(&self, group: &str, version: &str, resource: &str) -> Option<Arc<dyn ResourceScope>> {
        self.tiers.iter().find_map(|t| t.scope(group, version, resource))
    }

    /// Every served group, in `/apis` order (the core group first).
    pub fn groups(&self) -> Vec<ServedGroup> {
        let mut groups: Vec<ServedGroup> = Vec::new();
        for group in self.tiers.iter().flat_map(|t| t.groups()) {
            if !groups.iter().any(|g| g.name == group.name) {
                groups.push(group);
            }
        }
        groups.sort_by(|a, b| (a.order, &a.name).cmp(&(b.order, &b.name)));
        groups
    }

    /// The served group called `name`.
    pub fn group(&self, name: &str) -> Option<ServedGroup> {
        self.tiers.iter().flat_map(|t| t.groups()).find(|g| g.name == name)
    }

    /// The resources of one group version, from the tier that serves the group.
    pub fn resources_in(&self, group: &str, version: &str) -> Vec<&'static ResourceSpec> {
        self.tiers.iter().map(|t| t.resources_in(group, version)).find(|r| !r.is_empty()).unwrap_or_default()
    }

    /// Every stored resource the chain serves now (watch caches, RBAC sync).
    pub fn stored_resources(&self) -> Vec<&'static ResourceSpec> {
        self.groups()
            .iter()
            .flat_map(|g| g.versions.iter().flat_map(move |v| self.resources_in(&g.name, v)))
            .filter(|r| r.serving == Serving::Stored)
            .collect()
    }

    /// Waits until every tier's discovery is current ([`Tier::discovery_sync`]).
    pub async fn discovery_sync(&self) {
        for tier in &self.tiers {
            tier.discovery_sync().await;
        }
    }

    /// Waits until every tier has seen what is committed up to `revision`.
    pub async fn sync(&self, revision: Revision) {
        for tier in &self.tiers {
            tier.sync(revision).await;
        }
    }
}
