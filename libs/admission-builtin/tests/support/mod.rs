//! A RestStore over real SQLite in a temp dir with every stored resource's watch cache (as
//! the server has them), objects created through the registry's strategies (so defaults and
//! validation run), and one plugin in a `kapi_admission::Chain`.

#![allow(dead_code)]

use std::time::Duration;

use kapi_admission::attributes::Gvx;
use kapi_admission::{AdmissionPlugin, Attributes, Chain, Operation, Outcome};
use kapi_apimachinery::ApiError;
use kapi_auth::UserInfo;
use kapi_registry::catalog::{self, Serving};
use kapi_registry::rest::{DeleteOptions, RestStore, WriteHooks};
use kapi_registry::strategy::CatalogStrategy;
use kapi_storage::sqlite::{SqliteConfig, SqliteStore};
use kapi_storage::DynStore;
use kapi_watch::{CacheConfig, CacheSet};
use serde_json::{json, Value};

pub struct Cluster {
    _dir: tempfile::TempDir,
    pub rest: RestStore,
    pub chain: Chain,
}

impl Cluster {
    /// A store with the `default` namespace, and the plugin `make` builds over it.
    pub async fn new(make: impl FnOnce(RestStore) -> Box<dyn AdmissionPlugin>) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let store: DynStore = SqliteStore::open(&dir.path().join("kapi.db"), SqliteConfig::default()).expect("open sqlite");
        let mut prefixes: Vec<String> =
            catalog::resources().iter().filter(|r| matches!(r.serving, Serving::Stored)).map(|r| r.key_prefix()).collect();
        prefixes.sort();
        prefixes.dedup();
        let caches = CacheSet::start(store.clone(), prefixes, CacheConfig::default()).await.expect("caches");
        let rest = RestStore::new(store, caches);
        let chain = Chain::new(vec![make(rest.clone())]);
        let cluster = Cluster { _dir: dir, rest, chain };
        cluster.namespace("default").await;
        cluster
    }

    /// Creates `obj` through the registry (defaults and validation run, no admission) and
    /// waits until the watch cache has it.
    pub async fn create(&self, group: &str, version: &str, resource: &str, obj: Value) -> Value {
        let spec = catalog::find(group, version, resource).expect("served");
        let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).map(str::to_owned);
        let created = self
            .rest
            .create(&CatalogStrategy(spec), ns.as_deref(), obj, false, WriteHooks::default())
            .await
            .unwrap_or_else(|e| panic!("create {resource}: {e}"));
        self.settle(&created).await;
        created
    }

    /// Deletes an object and waits for the cache.
    pub async fn delete(&self, group: &str, version: &str, resource: &str, ns: Option<&str>, name: &str) -> Value {
        let spec = catalog::find(group, version, resource).expect("served");
        let out = self.rest.delete(&CatalogStrategy(spec), ns, name, &DeleteOptions::default()).await.expect("delete");
        self.settle(&out.object).await;
        out.object
    }

    async fn settle(&self, obj: &Value) {
        let rv: u64 = obj["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
        self.rest.caches().wait_for(rv, Duration::from_secs(5)).await.expect("cache caught up");
    }

    pub async fn namespace(&self, name: &str) -> Value {
        self.create("", "v1", "namespaces", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})).await
    }

    /// Runs the chain's mutating then validating phases, as the store does.
    pub async fn admit(&self, attrs: &mut Attributes) -> (Result<(), ApiError>, Outcome) {
        let mut outcome = Outcome::default();
        let mut r = self.chain.admit(attrs, &mut outcome).await;
        if r.is_ok() {
            r = self.chain.validate(attrs, &mut outcome).await;
        }
        (r, outcome)
    }
}

/// The attributes of `operation` on `resource` (`group/version/resource` and its kind) for
/// `obj`, as an administrator.
pub fn attrs(operation: Operation, gvr: (&str, &str, &str), kind: &str, ns: &str, name: &str, obj: Option<Value>, old: Option<Value>) -> Attributes {
    let (group, version, resource) = gvr;
    let options = match operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        _ => "DeleteOptions",
    };
    Attributes {
        kind: Gvx { group: group.into(), version: version.into(), name: kind.into() },
        resource: Gvx { group: group.into(), version: version.into(), name: resource.into() },
        subresource: String::new(),
        namespace: ns.into(),
        name: name.into(),
        operation,
        options: json!({"kind": options, "apiVersion": "meta.k8s.io/v1"}),
        dry_run: false,
        user: UserInfo::new("admin", ["system:masters", "system:authenticated"]),
        object: obj,
        old_object: old,
        reinvocation: Default::default(),
    }
}

/// Creating `obj`, whose group, version and kind are read from it.
pub fn create_attrs(resource: &str, obj: Value) -> Attributes {
    let api_version = obj["apiVersion"].as_str().unwrap().to_owned();
    let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
    let kind = obj["kind"].as_str().unwrap().to_owned();
    let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default().to_owned();
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    attrs(Operation::Create, (group, version, resource), &kind, &ns, &name, Some(obj), None)
}

pub fn pod(ns: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec})
}
