//! ResourceQuota (kube's `staging/.../admission/plugin/resourcequota`): a write that would
//! take a namespace's usage over a quota's `status.hard` is refused with kube's `exceeded
//! quota` message; one that fits is charged to every matching quota's `status.used` before it
//! is stored.
//!
//! The charge is a conditional status write at the quota's resourceVersion: two replicas that
//! both admit against the same `used` cannot both win, and the loser checks again against the
//! fresh quota (read from the store, since its cache may not have the winner's write yet). What
//! an admitted write that later fails still holds is given back by the quota status controller,
//! which recounts `used` from the caches, as kube's resourcequota controller does.

pub mod usage;

use std::collections::BTreeSet;

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;
use kapi_registry::catalog::ResourceSpec;
use kapi_registry::rest::{RestStore, WriteHooks};
use kapi_registry::strategy::{CatalogStrategy, WriteTarget};
use serde_json::Value;
use usage::{add, mask, pretty, resource_list, subtract_non_negative};
pub use usage::{Evaluator, ResourceList};

use crate::lookup;

/// How often a charge is tried again after losing a race for a quota. kube tries four times
/// but batches a namespace's concurrent writes into one attempt; kapi charges each write on
/// its own, so it allows more rounds.
const ATTEMPTS: usize = 10;

/// The plugin.
pub struct ResourceQuota {
    rest: RestStore,
}

/// kube's scope selector terms of a quota: `spec.scopes` (each as `Exists`) and
/// `spec.scopeSelector.matchExpressions`, as (scope, operator, values).
pub fn scope_terms(quota: &Value) -> Vec<(String, String, Vec<String>)> {
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect()
    };
    let mut terms: Vec<_> = strings(quota.pointer("/spec/scopes")).into_iter().map(|s| (s, "Exists".to_owned(), Vec::new())).collect();
    for e in quota.pointer("/spec/scopeSelector/matchExpressions").and_then(Value::as_array).into_iter().flatten() {
        let field = |f: &str| e.get(f).and_then(Value::as_str).unwrap_or_default().to_owned();
        terms.push((field("scopeName"), field("operator"), strings(e.get("values"))));
    }
    terms
}

/// kube's `Matches`: the quota limits something the evaluator charges, and `obj` is in every
/// one of its scopes.
pub fn quota_matches(evaluator: &Evaluator, quota: &Value, hard: &ResourceList, obj: &Value) -> bool {
    hard.keys().any(|k| evaluator.charges(k)) && scope_terms(quota).iter().all(|(s, op, values)| evaluator.matches_scope(s, op, values, obj))
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

impl ResourceQuota {
    /// The plugin over `rest`'s ResourceQuota cache.
    pub fn new(rest: RestStore) -> Self {
        ResourceQuota { rest }
    }

    /// kube's `CheckRequest`: the quotas to write (index and new `used`), or the refusal.
    fn check(&self, attrs: &Attributes, evaluator: &Evaluator, quotas: &[Value]) -> Result<Vec<(usize, ResourceList)>, ApiError> {
        let Some(obj) = attrs.object.as_ref() else { return Ok(Vec::new()) };
        let mut interesting = Vec::new();
        for (i, quota) in quotas.iter().enumerate() {
            let hard = resource_list(quota.pointer("/status/hard"));
            if !quota_matches(evaluator, quota, &hard, obj) {
                continue;
            }
            let name = lookup::str_at(quota, "/metadata/name");
            let restricted: BTreeSet<String> = hard.keys().filter(|k| evaluator.charges(k)).cloned().collect();
            evaluator.constraints(&restricted, obj).map_err(|e| attrs.forbidden(&format!("failed quota: {name}: {e}")))?;
            let used = resource_list(quota.pointer("/status/used"));
            if restricted.iter().any(|r| !used.contains_key(r)) {
                let names = restricted.iter().cloned().collect::<Vec<_>>().join(",");
                return Err(attrs.forbidden(&format!("status unknown for quota: {name}, resources: {names}")));
            }
            interesting.push(i);
        }
        if interesting.is_empty() {
            return Ok(Vec::new());
        }
        let now = now();
        let usage = evaluator.usage(obj, now);
        let previous = match (attrs.operation, attrs.old_object.as_ref()) {
            (Operation::Update, Some(old)) if !lookup::str_at(old, "/metadata/resourceVersion").is_empty() => Some(old),
            (Operation::Update, None) => {
                return Err(attrs.forbidden("unable to get previous usage since prior version of object was not found"));
            }
            _ => None,
        };
        let mut charges = Vec::new();
        for i in interesting {
            let quota = &quotas[i];
            // An update is charged only what it adds, where the old object counted too.
            let delta = match previous {
                Some(old) if quota_matches(evaluator, quota, &resource_list(quota.pointer("/status/hard")), old) => {
                    subtract_non_negative(&usage, &evaluator.usage(old, now))
                }
                _ => usage.clone(),
            };
            let delta: ResourceList = delta.into_iter().filter(|(_, q)| !q.is_zero()).collect();
            if delta.is_empty() {
                continue;
            }
            let hard = resource_list(quota.pointer("/status/hard"));
            let used = resource_list(quota.pointer("/status/used"));
            let requested = mask(&delta, &hard.keys().cloned().collect());
            let new_used = add(&used, &requested);
            let names: BTreeSet<String> = requested.keys().cloned().collect();
            let exceeded: BTreeSet<String> =
                mask(&new_used, &names).iter().filter(|(k, v)| hard.get(*k).is_some_and(|h| v.compare(h).is_gt())).map(|(k, _)| k.clone()).collect();
            if !exceeded.is_empty() {
                return Err(attrs.forbidden(&format!(
                    "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                    lookup::str_at(quota, "/metadata/name"),
                    pretty(&mask(&requested, &exceeded)),
                    pretty(&mask(&used, &exceeded)),
                    pretty(&mask(&hard, &exceeded))
                )));
            }
            if !requested.is_empty() {
                charges.push((i, new_used));
            }
        }
        Ok(charges)
    }

    /// `quotas` as the store has them now (those deleted meanwhile left out).
    async fn live(&self, spec: &'static ResourceSpec, namespace: &str, quotas: &[Value]) -> Result<Vec<Value>, ApiError> {
        let mut out = Vec::new();
        for quota in quotas {
            match self.rest.get(&CatalogStrategy(spec), Some(namespace), lookup::str_at(quota, "/metadata/name")).await {
                Ok(q) => out.push(q),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Writes `used` into the quota's status if it is still at the resourceVersion it was
    /// read at.
    async fn charge(&self, spec: &'static ResourceSpec, quota: &Value, used: &ResourceList) -> Result<(), ApiError> {
        let mut updated = quota.clone();
        updated["status"]["used"] = usage::to_json(used);
        let (ns, name) = (lookup::str_at(quota, "/metadata/namespace"), lookup::str_at(quota, "/metadata/name"));
        self.rest.update(&CatalogStrategy(spec), Some(ns), name, updated, WriteTarget::Status, false, WriteHooks::default()).await.map(|_| ())
    }
}

#[async_trait]
impl AdmissionPlugin for ResourceQuota {
    fn name(&self) -> &'static str {
        "ResourceQuota"
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
    }

    async fn validate(&self, attrs: &Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        // Subresources and cluster-scoped objects (namespaces among them) are not quota's.
        if !attrs.subresource.is_empty() || attrs.namespace.is_empty() {
            return Ok(());
        }
        let evaluator = Evaluator::of(&attrs.resource.group, &attrs.resource.name);
        if !evaluator.handles(attrs.operation) {
            return Ok(());
        }
        let spec = lookup::spec("", "v1", "resourcequotas")?;
        let mut quotas: Vec<Value> = lookup::list(&self.rest, spec, Some(&attrs.namespace)).iter().map(|q| (**q).clone()).collect();
        let mut last_conflict = None;
        let mut fresh = false;
        for _ in 0..ATTEMPTS {
            if quotas.is_empty() {
                return Ok(());
            }
            let charges = match self.check(attrs, &evaluator, &quotas) {
                Ok(charges) => charges,
                // The cache may lag behind charges made through this or another replica: a
                // refusal is only given from the stored quotas, so its numbers are exact.
                Err(_) if !fresh => {
                    quotas = self.live(spec, &attrs.namespace, &quotas).await?;
                    self.check(attrs, &evaluator, &quotas)?
                }
                Err(e) => return Err(e),
            };
            // A dry run is checked, never charged.
            if attrs.dry_run || charges.is_empty() {
                return Ok(());
            }
            let mut lost = Vec::new();
            for (i, used) in charges {
                match self.charge(spec, &quotas[i], &used).await {
                    Ok(()) => {}
                    Err(e) if e.code == 409 => {
                        lost.push(lookup::str_at(&quotas[i], "/metadata/name").to_owned());
                        last_conflict = Some(e);
                    }
                    // Deleted meanwhile: nothing left to charge.
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            // Only the quotas whose charge lost a race are checked again, fresh from the store;
            // the others hold this write's charge already.
            quotas.retain(|q| lost.iter().any(|l| l == lookup::str_at(q, "/metadata/name")));
            quotas = self.live(spec, &attrs.namespace, &quotas).await?;
            fresh = true;
        }
        match last_conflict {
            Some(e) if !quotas.is_empty() => Err(e),
            _ => Ok(()),
        }
    }
}
