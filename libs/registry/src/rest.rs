//! The generic REST store: one implementation of get, list, watch, create, update, patch,
//! delete and deletecollection for every stored resource.
//!
//! It mirrors kube-apiserver's `generic/registry.Store`: the call order of strategy hooks is
//! fixed here (system fields, prepare, default, validate, store) so that a resource only
//! supplies a [`Strategy`]. Objects are JSON values; storage keeps them without
//! `metadata.resourceVersion`, which is always the store revision of the last write and is
//! filled in on the way out.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kapi_apimachinery::fields::FieldSelector;
use kapi_apimachinery::labels::LabelSelector;
use kapi_apimachinery::resource_version::ResourceVersionMatch;
use kapi_apimachinery::{continue_token, time as ktime, ApiError, GroupResource, Result};
use kapi_storage::{DynStore, KeyValue, ListOptions, Revision, StorageError};
use kapi_watch::{CacheSet, Filter, RevisionReads, WatchError, WatchIndex, WatchStart, Watcher};
use rand::Rng;
use serde_json::{json, Map, Value};

use crate::catalog::ResourceSpec;
use crate::strategy::Strategy;

mod delete;
mod effects;
mod stored;
mod update;

pub use effects::{PendingEffects, WriteEffects};

pub use stored::decode_stored;
use stored::{encode_for_storage, set_resource_version};

/// How long a read waits for the watch cache to reach a revision before giving up.
const CACHE_WAIT: Duration = Duration::from_secs(3);
/// Records managedFields on a write: called with the stored object (None on create) and the
/// object about to be stored, after defaulting and validation.
pub type Tracker = dyn Fn(Option<&Value>, &mut Value) + Send + Sync;

/// A strategy step that needs the requester, which the store does not have (kube's strategies
/// read it from the request context): a CertificateSigningRequest records who asked. Runs on
/// create right after the strategy's own preparation, so admission cannot spoof it.
pub type Prepare = dyn Fn(&mut Value) + Send + Sync;

/// Admission at the store, where kube-apiserver runs it: mutating admission on the object a
/// write is about to make (before the strategy prepares, defaults and validates it), validating
/// admission after the strategy's validation, both inside the retry loop so that they see the
/// object the write stores. An error refuses the write and nothing is stored.
#[async_trait::async_trait]
pub trait StoreAdmission: Send + Sync {
    /// Mutating admission of a create (`old` None) or update.
    async fn mutate(&self, old: Option<&Value>, new: &mut Value) -> Result<()>;
    /// Validating admission of the object about to be stored.
    async fn validate(&self, old: Option<&Value>, new: &Value) -> Result<()>;
    /// Admission of a delete of `old` (kube runs both phases, with no new object).
    async fn delete(&self, old: &Value) -> Result<()>;
}

/// What a write runs besides the strategy: the managedFields tracker, a requester-dependent
/// preparation, and admission.
#[derive(Clone, Copy, Default)]
pub struct WriteHooks<'a> {
    /// Records managedFields.
    pub track: Option<&'a Tracker>,
    /// Prepares a created object from the requester.
    pub prepare: Option<&'a Prepare>,
    /// Mutating and validating admission.
    pub admission: Option<&'a dyn StoreAdmission>,
}

impl<'a> WriteHooks<'a> {
    /// Hooks of a write that only tracks managedFields.
    pub fn tracking(track: Option<&'a Tracker>) -> Self {
        WriteHooks { track, prepare: None, admission: None }
    }
}

/// What an asynchronous read-modify-write step answers: the desired object.
pub type MutateFuture<'m> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value>> + Send + 'm>>;

/// How often a patch or unconditional update retries after losing a race to another writer.
const MAX_UPDATE_RETRIES: usize = 8;
/// kube's `utilrand` alphabet for generateName suffixes (no vowels, no confusable digits).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The storage key of an object.
pub fn object_key(spec: &ResourceSpec, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if spec.namespaced => format!("{}{ns}/{name}", spec.key_prefix()),
        _ => format!("{}{name}", spec.key_prefix()),
    }
}

/// The field a watch's selector pins, where the watch cache indexes it: a pod's node (one
/// kubelet per node watches its pods so) or any object's name (informers of one object). The
/// values are read as the field set reads them: the string, or "" when absent.
fn watch_index(spec: &ResourceSpec, fields: &FieldSelector) -> Option<WatchIndex> {
    let pinned = |field: &str, pointer: &'static str| fields.requires_exact_match(field).map(|v| WatchIndex { pointer, value: v.to_owned() });
    let node = if spec.group.is_empty() && spec.resource == "pods" { pinned("spec.nodeName", "/spec/nodeName") } else { None };
    node.or_else(|| pinned("metadata.name", "/metadata/name"))
}

/// The key prefix of a list: the whole resource, or one namespace of it.
pub fn list_prefix(spec: &ResourceSpec, namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) if spec.namespaced => format!("{}{ns}/", spec.key_prefix()),
        _ => spec.key_prefix(),
    }
}

fn group_resource(spec: &ResourceSpec) -> GroupResource {
    GroupResource::new(spec.group, spec.resource)
}

/// Maps storage failures to the Status errors kube-apiserver answers with.
pub fn storage_error(spec: &ResourceSpec, name: &str, err: StorageError) -> ApiError {
    let gr = group_resource(spec);
    match err {
        StorageError::AlreadyExists(_) => ApiError::already_exists(&gr, name),
        StorageError::NotFound(_) => ApiError::not_found(&gr, name),
        StorageError::Conflict { .. } => ApiError::stale_update(&gr, name),
        StorageError::Compacted { requested, compacted } => {
            ApiError::resource_expired(format!("too old resource version: {requested} ({compacted})"))
        }
        StorageError::FutureRevision { requested, current } => {
            ApiError::timeout(format!("Too large resource version: {requested}, current: {current}"))
        }
        StorageError::Backend(e) => ApiError::internal(e),
    }
}

fn watch_error(err: WatchError) -> ApiError {
    match err {
        WatchError::TooOld { requested, oldest } => ApiError::resource_expired(format!("too old resource version: {requested} ({oldest})")),
        WatchError::Timeout => ApiError::timeout("Too large resource version: timed out waiting for the cache"),
        other => ApiError::internal(other),
    }
}

fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"].as_object_mut().expect("metadata was just made an object")
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    meta(obj).and_then(|m| m.get(field)).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Whether `obj` is a Namespace whose `spec.finalizers` still hold it (kube's
/// `ShouldDeleteNamespaceDuringUpdate` answers no while they do).
fn held_by_spec_finalizers(spec: &ResourceSpec, obj: &Value) -> bool {
    spec.group.is_empty() && spec.resource == "namespaces" && obj.pointer("/spec/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty())
}

fn finalizers(obj: &Value) -> Vec<String> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

/// The resourceVersion a write names, read as kube's versioner reads it: absent, empty and
/// "0" all mean none (`ObjectResourceVersion` parses "0" to 0, "unset").
fn named_resource_version(obj: &Value) -> Result<Option<Revision>> {
    match meta_str(obj, "resourceVersion") {
        None => Ok(None),
        Some(rv) => Ok(kapi_apimachinery::resource_version::parse(rv)?.filter(|rv| *rv != 0)),
    }
}

/// kube's answer to a PUT without resourceVersion for a kind whose strategy says
/// `AllowUnconditionalUpdate() == false` (store.go: the qualified "kind" is the resource).
fn resource_version_required(spec: &ResourceSpec, name: &str) -> ApiError {
    let field = "metadata.resourceVersion";
    let cause = kapi_apimachinery::Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("{field}: Invalid value: 0x0: must be specified for an update"),
        field: field.into(),
    };
    ApiError::invalid(spec.group, spec.resource, name, vec![cause])
}

/// Query parameters of a list or watch, already parsed.
#[derive(Debug, Clone, Default)]
pub struct ListParams {
    /// `labelSelector`.
    pub labels: Option<LabelSelector>,
    /// `fieldSelector`.
    pub fields: Option<FieldSelector>,
    /// `limit` (0 or absent: no limit).
    pub limit: Option<usize>,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`, parsed: `None` unset, `Some(0)` any.
    pub resource_version: Option<Revision>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<ResourceVersionMatch>,
    /// `sendInitialEvents` (watch only).
    pub send_initial_events: bool,
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct ListPage {
    /// Matching objects, in key order.
    pub items: Vec<Arc<Value>>,
    /// The revision the page is consistent at.
    pub resource_version: Revision,
    /// Token for the next page.
    pub continue_token: Option<String>,
    /// Items after this page (before filtering), when known.
    pub remaining: Option<u64>,
    /// Objects read and tested against the selectors (kube's fetched and evaluated counts).
    pub examined: u64,
}

/// `DeleteOptions` that change what delete does.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `propagationPolicy`: Orphan, Background or Foreground.
    pub propagation_policy: Option<String>,
    /// `preconditions.uid`.
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub precondition_resource_version: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

/// What a delete did.
#[derive(Debug, Clone)]
pub struct DeleteOutcome {
    /// The object as deleted, or as marked for deletion.
    pub object: Value,
    /// True when the object is gone; false when finalizers or a grace period keep it.
    pub deleted: bool,
}

/// Write effects by (group, resource).
type EffectsByResource = Vec<((&'static str, &'static str), Arc<dyn WriteEffects>)>;

/// The generic store over one [`kapi_storage::Store`] and its watch caches.
#[derive(Clone)]
pub struct RestStore {
    store: DynStore,
    caches: Arc<CacheSet>,
    /// The store's current revision for consistent reads, one read per batch of readers.
    revisions: Arc<RevisionReads>,
    /// Resources whose writes reserve something besides the object (Services' addresses).
    effects: Arc<EffectsByResource>,
}

impl RestStore {
    /// Wraps a store and the watch caches that follow it.
    pub fn new(store: DynStore, caches: Arc<CacheSet>) -> Self {
        let revisions = Arc::new(RevisionReads::new(store.clone()));
        Self { store, caches, revisions, effects: Arc::default() }
    }

    /// This store with `effects` around every write of `group`/`resource`.
    pub fn with_effects(mut self, group: &'static str, resource: &'static str, effects: Arc<dyn WriteEffects>) -> Self {
        let mut all = (*self.effects).clone();
        all.retain(|(key, _)| *key != (group, resource));
        all.push(((group, resource), effects));
        self.effects = Arc::new(all);
        self
    }

    fn effects_for(&self, spec: &ResourceSpec) -> Option<&dyn WriteEffects> {
        self.effects.iter().find(|((g, r), _)| *g == spec.group && *r == spec.resource).map(|(_, e)| e.as_ref())
    }

    /// Gives back what a deleted object held.
    async fn after_delete(&self, spec: &ResourceSpec, obj: &Value) {
        if let Some(effects) = self.effects_for(spec) {
            effects.after_delete(obj).await;
        }
    }

    /// The underlying store (health checks, bootstrap).
    pub fn store(&self) -> &DynStore {
        &self.store
    }

    /// The watch caches.
    pub fn caches(&self) -> &Arc<CacheSet> {
        &self.caches
    }

    async fn read(&self, spec: &ResourceSpec, key: &str, name: &str) -> Result<Option<KeyValue>> {
        self.store.get(key).await.map_err(|e| storage_error(spec, name, e))
    }

    /// GET of one object: a consistent read. From the resource's watch cache once it has
    /// reached the store's current revision (read after the request arrived, shared with the
    /// other reads waiting for it), as kube's consistent reads from cache; from the store for a
    /// resource without a cache.
    pub async fn get(&self, strategy: &dyn Strategy, namespace: Option<&str>, name: &str) -> Result<Value> {
        let spec = strategy.spec();
        let key = object_key(spec, namespace, name);
        if let Some(cache) = self.caches.cache(&spec.key_prefix()) {
            let current = self.current_revision(spec).await?;
            match self.caches.wait_for(current, CACHE_WAIT).await {
                Ok(()) => {
                    return match cache.get(&key) {
                        Some(cached) => Ok((*cached.object).clone()),
                        None => Err(ApiError::not_found(&group_resource(spec), name)),
                    }
                }
                // A cache held back (its log follower reconnecting to the store) must not fail
                // GETs the store itself can answer.
                Err(WatchError::Timeout) => tracing::warn!(resource = spec.resource, current, "watch cache behind; GET read from the store"),
                Err(e) => return Err(watch_error(e)),
            }
        }
        match self.read(spec, &key, name).await? {
            Some(kv) => decode_stored(&kv),
            None => Err(ApiError::not_found(&group_resource(spec), name)),
        }
    }

    /// The store's current revision for a consistent read of `spec`.
    async fn current_revision(&self, spec: &ResourceSpec) -> Result<Revision> {
        self.revisions.current().await.map_err(|e| storage_error(spec, "", e))
    }

    fn predicate<'a>(strategy: &'a dyn Strategy, params: &'a ListParams) -> impl Fn(&Value) -> bool + 'a {
        move |obj: &Value| {
            if let Some(sel) = &params.labels {
                let labels = meta(obj).and_then(|m| m.get("labels")).and_then(Value::as_object);
                if !sel.matches(labels) {
                    return false;
                }
            }
            if let Some(sel) = &params.fields {
                if !sel.is_empty() && !sel.matches(&strategy.field_set(obj)) {
                    return false;
                }
            }
            true
        }
    }

    /// LIST with kube-apiserver's resourceVersion semantics: consistent lists and `rv=0` from the
    /// watch cache, paginated and exact-revision lists from a store snapshot.
    pub async fn list(&self, strategy: &dyn Strategy, namespace: Option<&str>, params: &ListParams) -> Result<ListPage> {
        let spec = strategy.spec();
        let prefix = list_prefix(spec, namespace);
        let limit = params.limit.filter(|l| *l > 0);
        let from_cache = params.continue_token.is_none()
            && params.resource_version_match != Some(ResourceVersionMatch::Exact)
            && (params.resource_version == Some(0) || limit.is_none());
        if from_cache {
            let cache = self.caches.cache(&spec.key_prefix()).ok_or_else(|| ApiError::internal(format!("no watch cache for {}", spec.resource)))?;
            let wait_for = match params.resource_version {
                None => self.current_revision(spec).await?,
                Some(rv) => rv,
            };
            self.caches.wait_for(wait_for, CACHE_WAIT).await.map_err(watch_error)?;
            let (objects, rev) = cache.list(&prefix);
            let examined = objects.len() as u64;
            let pred = Self::predicate(strategy, params);
            let items = objects.into_iter().map(|o| o.object).filter(|o| pred(o)).collect();
            return Ok(ListPage { items, resource_version: rev, continue_token: None, remaining: None, examined });
        }

        let (revision, mut start_after) = match &params.continue_token {
            Some(token) => {
                let t = continue_token::decode(token)?;
                (Some(t.revision), Some(format!("{}{}", spec.key_prefix(), t.start_after_key)))
            }
            None => (params.resource_version.filter(|rv| *rv > 0), None),
        };
        let want = limit.unwrap_or(usize::MAX);
        let pred = Self::predicate(strategy, params);
        let mut items = Vec::new();
        let mut examined = 0u64;
        let mut snapshot = revision;
        loop {
            let page_size = (want - items.len()).clamp(1, 1000);
            let page = self
                .store
                .list(&prefix, ListOptions { start_after: start_after.clone(), limit: Some(page_size), revision: snapshot })
                .await
                .map_err(|e| match e {
                StorageError::Compacted { .. } if params.continue_token.is_some() => ApiError::continue_expired(),
                e => storage_error(spec, "", e),
            })?;
            snapshot = Some(page.revision);
            for kv in &page.items {
                examined += 1;
                let obj = decode_stored(kv)?;
                if pred(&obj) {
                    items.push(Arc::new(obj));
                }
                start_after = Some(kv.key.clone());
                if items.len() >= want {
                    break;
                }
            }
            let last_consumed = page.items.last().map(|kv| kv.key.clone());
            let exhausted = !page.more && start_after == last_consumed;
            if exhausted || page.items.is_empty() {
                return Ok(ListPage { items, resource_version: page.revision, continue_token: None, remaining: None, examined });
            }
            if items.len() >= want {
                let last = start_after.unwrap_or_default();
                let relative = last.strip_prefix(&spec.key_prefix()).unwrap_or(&last).to_owned();
                let remaining = self.remaining_after(&prefix, &last, page.revision).await;
                return Ok(ListPage {
                    items,
                    resource_version: page.revision,
                    continue_token: Some(continue_token::encode(page.revision, &relative)),
                    remaining,
                    examined,
                });
            }
        }
    }

    async fn remaining_after(&self, prefix: &str, last: &str, rev: Revision) -> Option<u64> {
        // Counting costs one more snapshot scan of keys; kube reports it only when cheap.
        let rest = self.store.list(prefix, ListOptions { start_after: Some(last.to_owned()), limit: Some(1), revision: Some(rev) }).await.ok()?;
        if rest.items.is_empty() {
            return Some(0);
        }
        rest.remaining.map(|r| r + rest.items.len() as u64)
    }

    /// WATCH from the watch cache. `rv` unset or 0 starts with synthetic ADDED events of the
    /// current state, as kube-apiserver does; a revision resumes after it.
    pub async fn watch(&self, strategy: &dyn Strategy, namespace: Option<&str>, params: &ListParams) -> Result<Watcher> {
        let spec = strategy.spec();
        let cache = self.caches.cache(&spec.key_prefix()).ok_or_else(|| ApiError::internal(format!("no watch cache for {}", spec.resource)))?;
        let start = match params.resource_version {
            None | Some(0) => WatchStart::InitialState,
            Some(rv) if params.send_initial_events => {
                self.caches.wait_for(rv, CACHE_WAIT).await.map_err(watch_error)?;
                WatchStart::InitialState
            }
            Some(rv) => {
                self.caches.wait_for(rv, CACHE_WAIT).await.map_err(watch_error)?;
                WatchStart::After(rv)
            }
        };
        let start = if params.resource_version.is_none() && params.send_initial_events {
            let current = self.current_revision(spec).await?;
            self.caches.wait_for(current, CACHE_WAIT).await.map_err(watch_error)?;
            WatchStart::InitialState
        } else {
            start
        };
        let strategy_spec = spec;
        let labels = params.labels.clone();
        let fields = params.fields.clone();
        let index = fields.as_ref().and_then(|f| watch_index(spec, f));
        let filter: Filter = Arc::new(move |obj: &Value| {
            if let Some(sel) = &labels {
                let l = meta(obj).and_then(|m| m.get("labels")).and_then(Value::as_object);
                if !sel.matches(l) {
                    return false;
                }
            }
            if let Some(sel) = &fields {
                if !sel.is_empty() && !sel.matches(&crate::fields::field_set(strategy_spec, obj)) {
                    return false;
                }
            }
            true
        });
        cache.watch_indexed(&list_prefix(spec, namespace), start, filter, index).map_err(watch_error)
    }

    fn check_type_and_namespace(spec: &ResourceSpec, obj: &mut Value, namespace: Option<&str>) -> Result<()> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the body of the request must be a JSON or YAML object"));
        }
        let api_version = spec.api_version();
        match obj.get("apiVersion").and_then(Value::as_str) {
            None | Some("") => obj["apiVersion"] = Value::String(api_version.clone()),
            Some(v) if v == api_version => {}
            Some(v) => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({v}) does not match the expected API version ({api_version})"
                )))
            }
        }
        match obj.get("kind").and_then(Value::as_str) {
            None | Some("") => obj["kind"] = Value::String(spec.kind.to_owned()),
            Some(k) if k == spec.kind => {}
            Some(k) => return Err(ApiError::bad_request(format!("the kind in the data ({k}) does not match the expected kind ({})", spec.kind))),
        }
        let body_ns = meta_str(obj, "namespace").map(str::to_owned);
        if spec.namespaced {
            let ns = namespace.unwrap_or_default();
            match body_ns {
                None => {
                    meta_mut(obj).insert("namespace".into(), Value::String(ns.to_owned()));
                }
                Some(b) if b == ns => {}
                Some(_) => {
                    return Err(ApiError::bad_request("the namespace of the provided object does not match the namespace sent on the request"))
                }
            }
        } else if body_ns.is_some() {
            meta_mut(obj).remove("namespace");
        }
        Ok(())
    }

    /// CREATE: system fields, generateName, prepare, defaults, validation, then a conditional
    /// create in storage.
    pub async fn create(
        &self,
        strategy: &dyn Strategy,
        namespace: Option<&str>,
        mut obj: Value,
        dry_run: bool,
        hooks: WriteHooks<'_>,
    ) -> Result<Value> {
        let spec = strategy.spec();
        Self::check_type_and_namespace(spec, &mut obj, namespace)?;
        if let Some(admission) = hooks.admission {
            // Admission sees the object defaulted, as kube decodes it with defaults first.
            strategy.apply_defaults(&mut obj);
            admission.mutate(None, &mut obj).await?;
            Self::check_type_and_namespace(spec, &mut obj, namespace)?;
        }
        if meta_str(&obj, "name").is_none() {
            if let Some(prefix) = meta_str(&obj, "generateName").map(str::to_owned) {
                let mut rng = rand::thread_rng();
                let suffix: String = (0..5).map(|_| NAME_ALPHABET[rng.gen_range(0..NAME_ALPHABET.len())] as char).collect();
                let mut base = prefix;
                // kube trims the prefix so that the generated name stays within 63 characters.
                base.truncate(58);
                meta_mut(&mut obj).insert("name".into(), Value::String(format!("{base}{suffix}")));
            }
        }
        {
            let m = meta_mut(&mut obj);
            m.insert("uid".into(), Value::String(uuid::Uuid::new_v4().to_string()));
            m.insert("creationTimestamp".into(), Value::String(ktime::now_rfc3339()));
            m.remove("resourceVersion");
            m.remove("deletionTimestamp");
            m.remove("deletionGracePeriodSeconds");
            m.remove("selfLink");
            // Kinds that track generation start at 1; the others keep what the client sent,
            // as kube's BeforeCreate does not touch it.
            if strategy.generation().set_on_create() {
                m.insert("generation".into(), Value::from(1));
            }
        }
        crate::omitempty::omit_empty(spec, &mut obj);
        strategy.prepare_for_create(&mut obj);
        if let Some(prepare) = hooks.prepare {
            prepare(&mut obj);
        }
        strategy.apply_defaults(&mut obj);
        let name = meta_str(&obj, "name").unwrap_or_default().to_owned();
        let causes = strategy.validate(&obj);
        if !causes.is_empty() {
            return Err(ApiError::invalid(spec.group, spec.kind, &name, causes));
        }
        if let Some(track) = hooks.track {
            track(None, &mut obj);
        }
        if let Some(admission) = hooks.admission {
            admission.validate(None, &obj).await?;
        }
        let pending = match self.effects_for(spec) {
            Some(effects) => Some(effects.begin_create(&mut obj, dry_run).await?),
            None => None,
        };
        if dry_run {
            if let Some(pending) = pending {
                pending.finish(false).await;
            }
            return Ok(obj);
        }
        let key = object_key(spec, namespace, &name);
        let created = match encode_for_storage(&obj) {
            Ok(value) => self.store.create(&key, value).await.map_err(|e| storage_error(spec, &name, e)),
            Err(e) => Err(e),
        };
        if let Some(pending) = pending {
            pending.finish(created.is_ok()).await;
        }
        set_resource_version(&mut obj, created?);
        Ok(obj)
    }

    /// Current labels of an object, for callers that need them without decoding twice.
    pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
        meta(obj)
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .map(|l| l.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned()))).collect())
            .unwrap_or_default()
    }
}
