//! A RestStore over real SQLite in a temp dir with the watch caches the plugin reads, objects
//! created through the registry's strategies (so their validation runs), and the plugin in a
//! `kapi_admission::Chain`.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kapi_admission::attributes::Gvx;
use kapi_admission::{Attributes, Chain, Operation, Outcome};
use kapi_admission_policy::{
    AuthzAttributes, AuthzDecision, BuiltinResolver, CelAuthorizer, MutatingAdmissionPolicy, ValidatingAdmissionPolicy,
};
use kapi_apimachinery::ApiError;
use kapi_auth::UserInfo;
use kapi_registry::catalog;
use kapi_registry::rest::{RestStore, WriteHooks};
use kapi_registry::strategy::CatalogStrategy;
use kapi_storage::sqlite::{SqliteConfig, SqliteStore};
use kapi_storage::DynStore;
use kapi_watch::{CacheConfig, CacheSet};
use serde_json::{json, Value};

const CACHED: &[(&str, &str, &str)] = &[
    ("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings"),
    ("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings"),
    ("", "v1", "namespaces"),
    ("", "v1", "configmaps"),
    ("apps", "v1", "deployments"),
];

/// Allows what its rules allow: `(user, verb, resource)`.
#[derive(Default)]
pub struct Rules {
    pub allowed: Vec<(String, String, String)>,
    pub asked: Mutex<Vec<AuthzAttributes>>,
}

impl CelAuthorizer for Rules {
    fn authorize(&self, a: &AuthzAttributes) -> AuthzDecision {
        self.asked.lock().unwrap().push(a.clone());
        let allowed = self.allowed.iter().any(|(u, v, r)| *u == a.user.name && *v == a.verb && *r == a.resource);
        AuthzDecision {
            allowed,
            reason: if allowed { "allowed by rule".into() } else { "no rule".into() },
            error: None,
        }
    }
}

pub struct Cluster {
    _dir: tempfile::TempDir,
    pub rest: RestStore,
    pub chain: Chain,
    pub authorizer: Arc<Rules>,
}

impl Cluster {
    pub async fn new() -> Cluster {
        Self::with_authorizer(Rules::default()).await
    }

    pub async fn with_authorizer(rules: Rules) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let store: DynStore =
            SqliteStore::open(&dir.path().join("kapi.db"), SqliteConfig::default()).expect("open sqlite");
        let prefixes = CACHED.iter().map(|(g, v, r)| catalog::find(g, v, r).expect("served").key_prefix()).collect();
        let caches = CacheSet::start(store.clone(), prefixes, CacheConfig::default()).await.expect("caches");
        let rest = RestStore::new(store, caches);
        let authorizer = Arc::new(rules);
        let mutating = MutatingAdmissionPolicy::new(rest.clone(), Arc::new(BuiltinResolver), Some(authorizer.clone()));
        let validating =
            ValidatingAdmissionPolicy::new(rest.clone(), Arc::new(BuiltinResolver), Some(authorizer.clone()));
        // kube's order: mutating policies run before validating ones
        let chain = Chain::new(vec![Box::new(mutating), Box::new(validating)]);
        let cluster = Cluster { _dir: dir, rest, chain, authorizer };
        cluster.namespace("default", json!({})).await;
        cluster
    }

    /// Creates `obj` through the registry (defaults and validation run) and waits until the
    /// watch cache has it.
    pub async fn create(&self, group: &str, resource: &str, obj: Value) -> Result<Value, ApiError> {
        let spec = catalog::find(group, "v1", resource).expect("served");
        let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).map(str::to_owned);
        let created =
            self.rest.create(&CatalogStrategy(spec), ns.as_deref(), obj, false, WriteHooks::default()).await?;
        self.settle(&created).await;
        Ok(created)
    }

    /// Replaces `obj` and waits for the cache.
    pub async fn update(&self, group: &str, resource: &str, obj: Value) -> Value {
        let spec = catalog::find(group, "v1", resource).expect("served");
        let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).map(str::to_owned);
        let name = obj["metadata"]["name"].as_str().unwrap().to_owned();
        let target = kapi_registry::strategy::WriteTarget::Main;
        let updated = self
            .rest
            .update(&CatalogStrategy(spec), ns.as_deref(), &name, obj, target, false, WriteHooks::default())
            .await
            .expect("update");
        self.settle(&updated).await;
        updated
    }

    async fn settle(&self, obj: &Value) {
        let rv: u64 = obj["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
        self.rest.caches().wait_for(rv, Duration::from_secs(5)).await.expect("cache caught up");
    }

    pub async fn namespace(&self, name: &str, labels: Value) {
        self.create(
            "",
            "namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}),
        )
        .await
        .expect("namespace");
    }

    pub async fn policy(&self, policy: Value) {
        self.create("admissionregistration.k8s.io", "validatingadmissionpolicies", policy).await.expect("policy");
    }

    pub async fn binding(&self, name: &str, policy: &str, spec: Value) {
        let mut spec = spec;
        spec["policyName"] = json!(policy);
        if spec.get("validationActions").is_none() {
            spec["validationActions"] = json!(["Deny"]);
        }
        let b = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name}, "spec": spec});
        self.create("admissionregistration.k8s.io", "validatingadmissionpolicybindings", b).await.expect("binding");
    }

    pub async fn mutating_policy(&self, name: &str, spec: Value) {
        let mut spec = spec;
        // required, as kube's validation has it
        if spec.get("reinvocationPolicy").is_none() {
            spec["reinvocationPolicy"] = json!("Never");
        }
        let p = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy", "metadata": {"name": name}, "spec": spec});
        self.create("admissionregistration.k8s.io", "mutatingadmissionpolicies", p).await.expect("mutating policy");
    }

    pub async fn mutating_binding(&self, name: &str, policy: &str, spec: Value) {
        let mut spec = spec;
        spec["policyName"] = json!(policy);
        let b = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": name}, "spec": spec});
        self.create("admissionregistration.k8s.io", "mutatingadmissionpolicybindings", b)
            .await
            .expect("mutating binding");
    }

    /// Runs the mutating phase of the chain: the object as mutated, or the refusal.
    pub async fn mutate(&self, attrs: &Attributes) -> Result<Value, ApiError> {
        let mut attrs = attrs.clone();
        let mut outcome = Outcome::default();
        self.chain.admit(&mut attrs, &mut outcome).await?;
        Ok(attrs.object.unwrap_or_default())
    }

    /// Runs the validating phase of the chain.
    pub async fn admit(&self, attrs: &Attributes) -> (Result<(), ApiError>, Outcome) {
        let mut outcome = Outcome::default();
        let r = self.chain.validate(attrs, &mut outcome).await;
        (r, outcome)
    }
}

/// A policy on deployments (CREATE and UPDATE) with `validations`, and what else `extra`
/// puts in its spec.
pub fn deployment_policy(name: &str, validations: Value, extra: Value) -> Value {
    let mut spec = json!({
        "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
        "validations": validations,
    });
    if let Value::Object(m) = extra {
        for (k, v) in m {
            spec[k] = v;
        }
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name}, "spec": spec})
}

pub fn deployment(ns: &str, name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
}

/// The attributes of creating `obj` (a Deployment) as `user`.
pub fn create_deployment(obj: Value, user: &str) -> Attributes {
    Attributes {
        kind: Gvx { group: "apps".into(), version: "v1".into(), name: "Deployment".into() },
        resource: Gvx { group: "apps".into(), version: "v1".into(), name: "deployments".into() },
        subresource: String::new(),
        namespace: obj["metadata"]["namespace"].as_str().unwrap_or_default().into(),
        name: obj["metadata"]["name"].as_str().unwrap_or_default().into(),
        operation: Operation::Create,
        options: json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}),
        dry_run: false,
        user: UserInfo::new(user, ["system:authenticated"]),
        object: Some(obj),
        old_object: None,
        reinvocation: Default::default(),
    }
}
