//! kube's validatingadmissionpolicy-status controller, in process: follows the
//! ValidatingAdmissionPolicy watch cache and, for each policy whose `metadata.generation` is
//! newer than its `status.observedGeneration`, type-checks its expressions against the schemas
//! of the kinds it matches ([`kapi_admission_policy::type_checking`]) and writes
//! `status.typeChecking` and `status.observedGeneration` through the status subresource.
//!
//! Built-in kinds are typed by kapi-openapi's schemas with references resolved; kinds without
//! one (custom resources) are skipped, as kube skips kinds whose schema it cannot resolve.
//! Every replica runs it: they compute the same status, the write keeps a newer
//! `observedGeneration` another replica wrote, and a write that changes nothing is skipped.

use std::sync::Arc;
use std::time::Duration;

use kapi_admission_policy::{type_checking, SchemaResolver};
use kapi_registry::catalog::{self, ResourceSpec};
use kapi_registry::rest::{RestStore, WriteHooks};
use kapi_registry::strategy::{CatalogStrategy, WriteTarget};
use kapi_watch::{CacheSet, EventType, WatchError, WatchItem};
use serde_json::Value;

use crate::rbac_sync::{initial_state, SyncError};
use crate::tier::Chain;

/// The field manager of the status, as kube's controller names itself.
const MANAGER: &str = "validatingadmissionpolicy-status-controller";
/// Attempts at writing one policy's status before waiting for its next change.
const ATTEMPTS: u32 = 5;

/// The kinds the server serves and the schemas of the built-in ones.
struct ServerSchemas(Chain);

impl SchemaResolver for ServerSchemas {
    fn kinds_for(&self, group: &str, version: &str, resource: &str) -> Vec<String> {
        let served = self.0.resources_in(group, version);
        served.iter().filter(|s| s.resource == resource).map(|s| s.kind.to_owned()).collect()
    }

    fn schema(&self, group: &str, version: &str, kind: &str) -> Option<Value> {
        kapi_openapi::structural_schema(group, version, kind)
    }
}

/// Starts the controller in the background.
pub fn start(caches: Arc<CacheSet>, rest: RestStore, tiers: Chain) {
    tokio::spawn(run(caches, rest, Arc::new(ServerSchemas(tiers))));
}

async fn run(caches: Arc<CacheSet>, rest: RestStore, schemas: Arc<ServerSchemas>) {
    let Some(spec) = catalog::find("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies") else { return };
    loop {
        let (objects, mut watcher) = match initial_state(&caches, spec).await {
            Ok(found) => found,
            Err(SyncError::Watch(WatchError::ShuttingDown)) => return,
            Err(e) => {
                tracing::warn!("validatingadmissionpolicy-status: {e}; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        for policy in objects {
            reconcile(&rest, spec, &schemas, policy).await;
        }
        loop {
            match watcher.next().await {
                Some(WatchItem::Event { event, kind: EventType::Added | EventType::Modified }) => {
                    reconcile(&rest, spec, &schemas, event.object.clone()).await;
                }
                Some(WatchItem::Event { .. } | WatchItem::Bookmark(_) | WatchItem::InitialEventsEnd(_)) => {}
                // cut off: start again from the cache's current state
                Some(WatchItem::Terminated { .. }) => break,
                None => return,
            }
        }
    }
}

fn generation(policy: &Value, pointer: &str) -> i64 {
    policy.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// kube's `reconcile`: nothing to do once the generation was observed.
async fn reconcile(rest: &RestStore, spec: &'static ResourceSpec, schemas: &Arc<ServerSchemas>, policy: Arc<Value>) {
    let observed_at = generation(&policy, "/metadata/generation");
    if observed_at <= generation(&policy, "/status/observedGeneration") {
        return;
    }
    let name = policy.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    // compiling every expression against every matched kind's schema is CPU work
    let resolver = schemas.clone();
    let checked = tokio::task::spawn_blocking(move || type_checking(&policy, resolver.as_ref())).await;
    let Ok(checked) = checked else { return };
    let strategy = CatalogStrategy(spec);
    let track = crate::field_manager::tracker(spec, crate::field_manager::writer(spec, MANAGER.into(), "status"));
    for attempt in 1..=ATTEMPTS {
        let hooks = WriteHooks::tracking(track.as_deref());
        let result = rest
            .update_with(&strategy, None, &name, WriteTarget::Status, false, hooks, |current| {
                let mut next = current.clone();
                // another replica (or a later reconcile) got there first
                if generation(current, "/status/observedGeneration") >= observed_at {
                    return Ok(next);
                }
                next["status"]["observedGeneration"] = Value::from(observed_at);
                next["status"]["typeChecking"] = checked.clone();
                Ok(next)
            })
            .await;
        match result {
            Ok(_) => return,
            // deleted meanwhile
            Err(e) if e.code == 404 => return,
            Err(e) => {
                tracing::warn!(policy = %name, attempt, "writing the type checking status failed: {e}");
                tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use kapi_admission_policy::SchemaResolver;
    use serde_json::json;

    /// The built-in schemas alone, as the controller's resolver reads them.
    struct Builtins;

    impl SchemaResolver for Builtins {
        fn kinds_for(&self, group: &str, version: &str, resource: &str) -> Vec<String> {
            kapi_registry::catalog::find(group, version, resource).map(|s| vec![s.kind.to_owned()]).unwrap_or_default()
        }

        fn schema(&self, group: &str, version: &str, kind: &str) -> Option<serde_json::Value> {
            kapi_openapi::structural_schema(group, version, kind)
        }
    }

    #[test]
    fn a_field_deployments_lack_is_reported_as_kube_reports_it() {
        let policy = json!({"metadata": {"name": "p"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["deployments"]}]},
            "validations": [
                {"expression": "object.spec.replicas <= 5 && object.spec.template.spec.containers.all(c, c.image != '')"},
                {"expression": "object.spec.replicaz <= 5"},
            ]}});
        let checked = kapi_admission_policy::type_checking(&policy, &Builtins);
        let want = "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicaz'\n | object.spec.replicaz <= 5\n | ...........^\n";
        assert_eq!(
            checked,
            json!({"expressionWarnings": [{"fieldRef": "spec.validations[1].expression", "warning": want}]})
        );
    }
}
