//! kube's APF config controller (`priority-and-fairness-config-consumer`): follows the
//! FlowSchema and PriorityLevelConfiguration watch caches and rebuilds the flow-control
//! snapshot on every change, so a change made through any replica applies here as soon as this
//! replica's cache has it (well within kube's one second).
//!
//! Each resource is followed by an initial-state watch, as the RBAC index is
//! ([`crate::rbac_sync::initial_state`]); a watch the cache cuts off is re-established from a
//! fresh initial state.
//!
//! It also keeps kube's `Dangling` condition on every stored FlowSchema: "True" (`NotFound`)
//! while its level does not exist (the schema is then skipped in matching, as kube skips it),
//! "False" (`Found`) once it does. As kube's controller, a write is a forced server-side apply
//! of status under `api-priority-and-fairness-config-consumer-v1`, made only when the stored
//! condition's status, reason or message differ, and at most `WRITES_PER_WINDOW` (5) times per
//! schema a minute, so that replicas that disagree (during an upgrade) cannot fight at full
//! speed. The writes run in their own task (`StatusWriter`), never under the objects' lock
//! nor in the watch loop, which only wakes it; each decides from the object it writes (a
//! stale cached copy conflicts and is read again), so several replicas converge on one write.
//! The mandatory objects imagined before they are stored have no status to write.
//!
//! As kube, a level "exists" when it is stored and reads as one: a schema naming a mandatory
//! level that is not stored (yet) is marked dangling, though matching uses the imagined level.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kapi_apimachinery::ApiError;
use kapi_flowcontrol::PriorityLevel;
use kapi_registry::catalog::{self, ResourceSpec};
use kapi_registry::rest::{RestStore, WriteHooks};
use kapi_registry::strategy::{CatalogStrategy, WriteTarget};
use kapi_watch::{CacheSet, EventType, WatchError, WatchItem, Watcher};
use serde_json::{json, Value};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::FlowControl;
use crate::rbac_sync::{initial_state, SyncError};

const GROUP: &str = "flowcontrol.apiserver.k8s.io";
const RESOURCES: [&str; 2] = ["flowschemas", "prioritylevelconfigurations"];

/// kube's field manager for the status writes (`ConfigConsumerAsFieldManager`).
const MANAGER: &str = "api-priority-and-fairness-config-consumer-v1";
/// The FlowSchema condition this controller owns.
const DANGLING: &str = "Dangling";
/// How many status writes one schema may get per [`WINDOW`] (kube delays a sixth).
const WRITES_PER_WINDOW: usize = 5;
const WINDOW: Duration = Duration::from_secs(60);
/// How soon a failed write is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// The stored objects by resource, then name.
type Objects = Arc<Mutex<[BTreeMap<String, Arc<Value>>; 2]>>;

fn spec(resource: &'static str) -> Result<&'static ResourceSpec, SyncError> {
    catalog::find(GROUP, "v1", resource).ok_or(SyncError::NoCache(resource))
}

fn key(obj: &Value) -> String {
    obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// Rebuilds the snapshot from the objects as they are now.
fn rebuild(fc: &FlowControl, objects: &Objects) {
    let (schemas, levels): (Vec<Value>, Vec<Value>) = {
        let objects = objects.lock().unwrap_or_else(|e| e.into_inner());
        let values = |m: &BTreeMap<String, Arc<Value>>| m.values().map(|v| Value::clone(v)).collect();
        (values(&objects[0]), values(&objects[1]))
    };
    fc.reload(&schemas, &levels);
    fc.changed.notify_one();
}

async fn load(caches: &CacheSet, which: usize, objects: &Objects) -> Result<Watcher, SyncError> {
    let (initial, watcher) = initial_state(caches, spec(RESOURCES[which])?).await?;
    objects.lock().unwrap_or_else(|e| e.into_inner())[which] = initial.into_iter().map(|o| (key(&o), o)).collect();
    Ok(watcher)
}

/// Loads the stored configuration into `fc`, then keeps it current, and the schemas'
/// `Dangling` conditions true, in background tasks.
pub async fn start(rest: RestStore, fc: Arc<FlowControl>) -> Result<(), SyncError> {
    let caches = rest.caches().clone();
    let objects: Objects = Arc::default();
    let mut watchers = Vec::new();
    for which in 0..RESOURCES.len() {
        watchers.push(load(&caches, which, &objects).await?);
    }
    rebuild(&fc, &objects);
    let statuses = Arc::new(Notify::new());
    statuses.notify_one();
    tokio::spawn(StatusWriter { rest, objects: objects.clone(), recent: HashMap::new() }.run(statuses.clone()));
    for (which, watcher) in watchers.into_iter().enumerate() {
        tokio::spawn(follow(caches.clone(), which, watcher, objects.clone(), fc.clone(), statuses.clone()));
    }
    Ok(())
}

async fn follow(caches: Arc<CacheSet>, which: usize, mut watcher: Watcher, objects: Objects, fc: Arc<FlowControl>, statuses: Arc<Notify>) {
    loop {
        match watcher.next().await {
            Some(WatchItem::Event { event, kind }) => {
                {
                    let mut objects = objects.lock().unwrap_or_else(|e| e.into_inner());
                    let name = key(&event.object);
                    match kind {
                        EventType::Added | EventType::Modified => objects[which].insert(name, event.object.clone()),
                        EventType::Deleted => objects[which].remove(&name),
                    };
                }
                rebuild(&fc, &objects);
                statuses.notify_one();
            }
            Some(WatchItem::Bookmark(_) | WatchItem::InitialEventsEnd(_)) => {}
            Some(WatchItem::Terminated { reason, .. }) => {
                tracing::warn!(resource = RESOURCES[which], ?reason, "flow-control watch ended; reloading");
                loop {
                    match load(&caches, which, &objects).await {
                        Ok(w) => {
                            watcher = w;
                            break;
                        }
                        Err(SyncError::Watch(WatchError::ShuttingDown)) => return,
                        Err(e) => {
                            tracing::warn!(resource = RESOURCES[which], "flow-control reload failed: {e}");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                    }
                }
                rebuild(&fc, &objects);
                statuses.notify_one();
            }
            None => return,
        }
    }
}

/// kube's `Dangling` condition for a schema naming `level`: (status, reason, message).
fn dangling(level: &str, found: bool) -> (&'static str, &'static str, String) {
    if found {
        ("False", "Found", format!("This FlowSchema references the PriorityLevelConfiguration object named {level:?} and it exists"))
    } else {
        ("True", "NotFound", format!("This FlowSchema references the PriorityLevelConfiguration object named {level:?} but there is no such object"))
    }
}

/// The `Dangling` condition to write on `schema` given the levels that exist, with its
/// lastTransitionTime; None when the stored one already says it (kube compares status, reason
/// and message only, so a write is not repeated for its time).
fn condition_for(schema: &Value, found: &HashSet<String>) -> Option<Value> {
    let level = schema.pointer("/spec/priorityLevelConfiguration/name").and_then(Value::as_str).unwrap_or_default();
    let (status, reason, message) = dangling(level, found.contains(level));
    let stored = schema
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|conditions| conditions.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(DANGLING)));
    let text = |c: Option<&Value>, field: &str| c.and_then(|c| c.get(field)).and_then(Value::as_str).unwrap_or_default().to_owned();
    if text(stored, "status") == status && text(stored, "reason") == reason && text(stored, "message") == message {
        return None;
    }
    Some(json!({"type": DANGLING, "status": status, "lastTransitionTime": kapi_apimachinery::time::now_rfc3339(), "reason": reason, "message": message}))
}

/// The names of the stored levels that read as levels (kube ignores broken ones).
fn found_levels(levels: &BTreeMap<String, Arc<Value>>) -> HashSet<String> {
    levels.iter().filter(|(_, l)| PriorityLevel::from_object(l).is_some()).map(|(name, _)| name.clone()).collect()
}

/// The task that writes the schemas' `Dangling` conditions (kube's single config worker does
/// them after each digest, outside its lock). Woken after every change of the objects; it
/// looks at all of them again, so wake-ups that arrive while it writes coalesce.
struct StatusWriter {
    rest: RestStore,
    objects: Objects,
    /// When each schema's recent writes were made, oldest first, for the rate limit.
    recent: HashMap<String, VecDeque<Instant>>,
}

impl StatusWriter {
    async fn run(mut self, wake: Arc<Notify>) {
        let mut again: Option<Instant> = None;
        loop {
            match again {
                Some(at) => tokio::select! {
                    () = wake.notified() => {}
                    () = tokio::time::sleep_until(at) => {}
                },
                None => wake.notified().await,
            }
            again = self.pass().await;
        }
    }

    /// Writes every condition that differs from what is stored; answers when to look again
    /// for the ones held back (rate-limited or failed).
    async fn pass(&mut self) -> Option<Instant> {
        let (schemas, found) = {
            let objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
            (objects[0].values().cloned().collect::<Vec<_>>(), found_levels(&objects[1]))
        };
        let now = Instant::now();
        self.recent.retain(|name, times| {
            times.retain(|t| now.duration_since(*t) < WINDOW);
            !times.is_empty() && schemas.iter().any(|s| key(s) == *name)
        });
        let mut again: Option<Instant> = None;
        let mut later = |at: Instant| again = Some(again.map_or(at, |a| a.min(at)));
        for schema in &schemas {
            if condition_for(schema, &found).is_none() {
                continue;
            }
            let name = key(schema);
            if let Some(times) = self.recent.get(&name).filter(|t| t.len() >= WRITES_PER_WINDOW) {
                later(times[0] + WINDOW);
                continue;
            }
            match write_condition(&self.rest, schema, &found).await {
                Ok(true) => self.recent.entry(name).or_default().push_back(Instant::now()),
                Ok(false) => {}
                // Deleted meanwhile: its DELETED event is on its way.
                Err(e) if e.code == 404 => {}
                Err(e) => {
                    tracing::warn!(flowschema = name, "writing the Dangling condition failed: {e}");
                    later(Instant::now() + RETRY);
                }
            }
        }
        again
    }
}

/// Applies the schema's `Dangling` condition to its status (forced, as kube's controller),
/// starting from the cached copy; decided again on the object read when that copy was stale,
/// so a condition another replica wrote meanwhile is not written twice. Answers whether
/// something was written.
async fn write_condition(rest: &RestStore, cached: &Value, found: &HashSet<String>) -> Result<bool, ApiError> {
    let spec = catalog::find(GROUP, "v1", "flowschemas").ok_or_else(|| ApiError::internal("flowschemas missing from the catalog"))?;
    let schema = kapi_openapi::apply_schema(spec.group, spec.version, spec.kind).ok_or_else(|| ApiError::internal("no apply schema for FlowSchema"))?;
    let writer = crate::field_manager::writer(spec, MANAGER.into(), "status");
    let name = key(cached);
    // The status strategy keeps only the new status; the managedFields the apply computed are
    // put back after it, as for a client's apply of status.
    let managed: Arc<Mutex<Option<Value>>> = Arc::default();
    let last = Arc::clone(&managed);
    let restore = move |_: Option<&Value>, new: &mut Value| {
        let Some(fields) = last.lock().unwrap_or_else(|e| e.into_inner()).clone() else { return };
        if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("managedFields".into(), fields);
        }
    };
    let mut wrote = false;
    rest.update_from_cached(&CatalogStrategy(spec), None, &name, WriteTarget::Status, WriteHooks::tracking(Some(&restore)), cached, |current| {
        let Some(condition) = condition_for(current, found) else {
            wrote = false;
            *managed.lock().unwrap_or_else(|e| e.into_inner()) = None;
            return Ok(current.clone());
        };
        let config = json!({"apiVersion": spec.api_version(), "kind": spec.kind, "metadata": {"name": name}, "status": {"conditions": [condition]}});
        let applied = kapi_fieldmanager::apply(Some(current), &config, &schema, &writer, true)?;
        *managed.lock().unwrap_or_else(|e| e.into_inner()) = applied.pointer("/metadata/managedFields").cloned();
        wrote = true;
        Ok(applied)
    })
    .await?;
    Ok(wrote)
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};
    use std::sync::Arc;

    use kapi_registry::catalog;
    use kapi_registry::rest::{RestStore, WriteHooks};
    use kapi_registry::strategy::{CatalogStrategy, WriteTarget};
    use kapi_storage::sqlite::{SqliteConfig, SqliteStore};
    use kapi_watch::{CacheConfig, CacheSet};
    use serde_json::json;

    use super::{condition_for, Objects, StatusWriter, MANAGER, WINDOW, WRITES_PER_WINDOW};

    fn schema(level: &str, conditions: serde_json::Value) -> serde_json::Value {
        json!({"metadata": {"name": "s"}, "spec": {"priorityLevelConfiguration": {"name": level}}, "status": {"conditions": conditions}})
    }

    #[test]
    fn conditions_say_whether_the_level_exists_in_kubes_words() {
        let found: HashSet<String> = ["there".to_owned()].into();
        let c = condition_for(&schema("there", json!([])), &found).unwrap();
        assert_eq!((c["type"].as_str(), c["status"].as_str(), c["reason"].as_str()), (Some("Dangling"), Some("False"), Some("Found")));
        assert_eq!(c["message"], "This FlowSchema references the PriorityLevelConfiguration object named \"there\" and it exists");
        assert!(c["lastTransitionTime"].as_str().is_some_and(|t| t.ends_with('Z')), "{c}");
        let c = condition_for(&schema("gone", json!([])), &found).unwrap();
        assert_eq!((c["status"].as_str(), c["reason"].as_str()), (Some("True"), Some("NotFound")));
        assert_eq!(c["message"], "This FlowSchema references the PriorityLevelConfiguration object named \"gone\" but there is no such object");
    }

    #[test]
    fn a_condition_that_says_the_same_is_not_written_again_whatever_its_time() {
        let found: HashSet<String> = ["there".to_owned()].into();
        let written = condition_for(&schema("there", json!([])), &found).unwrap();
        let mut stored = written.clone();
        stored["lastTransitionTime"] = json!("2020-01-01T00:00:00Z");
        let other = json!({"type": "Other", "status": "True"});
        assert!(condition_for(&schema("there", json!([other, stored])), &found).is_none());
        // The level went away: the same stored condition is now wrong.
        assert!(condition_for(&schema("there", json!([stored])), &HashSet::new()).is_some());
        // Another message (a level renamed in the spec) is a change too.
        assert!(condition_for(&schema("elsewhere", json!([stored])), &["elsewhere".to_owned()].into()).is_some());
    }

    /// A writer over real storage holding one FlowSchema `s` that names the missing level `gone`.
    async fn writer_over_storage(dir: &std::path::Path) -> (StatusWriter, RestStore) {
        let spec = catalog::find(super::GROUP, "v1", "flowschemas").unwrap();
        let levels = catalog::find(super::GROUP, "v1", "prioritylevelconfigurations").unwrap();
        let store: kapi_storage::DynStore = SqliteStore::open(&dir.join("kapi.db"), SqliteConfig::default()).unwrap();
        let caches = CacheSet::start(store.clone(), vec![spec.key_prefix(), levels.key_prefix()], CacheConfig::default()).await.unwrap();
        let rest = RestStore::new(store, caches);
        let fs = json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema", "metadata": {"name": "s"},
            "spec": {"priorityLevelConfiguration": {"name": "gone"}, "matchingPrecedence": 500,
                     "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:authenticated"}}],
                                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}});
        rest.create(&CatalogStrategy(spec), None, fs, false, WriteHooks::default()).await.unwrap();
        let objects: Objects = Arc::default();
        let writer = StatusWriter { rest: rest.clone(), objects, recent: HashMap::new() };
        (writer, rest)
    }

    /// The stored schema, also put where the writer looks (as the watch would).
    async fn reload(writer: &StatusWriter, rest: &RestStore) -> serde_json::Value {
        let spec = catalog::find(super::GROUP, "v1", "flowschemas").unwrap();
        let stored = rest.get(&CatalogStrategy(spec), None, "s").await.unwrap();
        writer.objects.lock().unwrap()[0].insert("s".into(), Arc::new(stored.clone()));
        stored
    }

    #[tokio::test]
    async fn a_schema_someone_keeps_flipping_gets_at_most_five_writes_a_minute() {
        let dir = std::env::temp_dir().join(format!("kapi-apf-status-{}-{:?}", std::process::id(), std::time::SystemTime::now()));
        std::fs::create_dir_all(&dir).unwrap();
        let (mut writer, rest) = writer_over_storage(&dir).await;
        let spec = catalog::find(super::GROUP, "v1", "flowschemas").unwrap();
        let dangling = |obj: &serde_json::Value| obj["status"]["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == "Dangling").cloned());
        let mut first = None;
        for round in 0..=WRITES_PER_WINDOW {
            let before = reload(&writer, &rest).await;
            let again = writer.pass().await;
            first.get_or_insert_with(tokio::time::Instant::now);
            let after = reload(&writer, &rest).await;
            if round < WRITES_PER_WINDOW {
                assert!(again.is_none(), "round {round}");
                let written = dangling(&after).unwrap_or_else(|| panic!("round {round}: {after}"));
                assert_eq!((written["status"].as_str(), written["reason"].as_str()), (Some("True"), Some("NotFound")), "round {round}");
                let ours = after["metadata"]["managedFields"].as_array().unwrap().iter().find(|e| e["manager"] == MANAGER).cloned().unwrap();
                assert_eq!((ours["operation"].as_str(), ours["subresource"].as_str()), (Some("Apply"), Some("status")));
                assert_eq!(after["spec"], before["spec"]);
                // A pass with nothing to change writes nothing.
                assert!(writer.pass().await.is_none());
                assert_eq!(reload(&writer, &rest).await["metadata"]["resourceVersion"], after["metadata"]["resourceVersion"], "round {round}");
            } else {
                assert_eq!(after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"], "a sixth write within the minute");
                let at = again.expect("looks again once the window has room");
                let wait = at.duration_since(first.unwrap());
                assert!(wait <= WINDOW && wait > WINDOW - std::time::Duration::from_secs(10), "{wait:?}");
            }
            // Someone who disagrees (another replica's view) writes the opposite.
            let flipped = json!({"type": "Dangling", "status": "False", "reason": "Found", "message": "theirs", "lastTransitionTime": "2024-01-01T00:00:00Z"});
            rest.update_with(&CatalogStrategy(spec), None, "s", WriteTarget::Status, false, WriteHooks::default(), |cur| {
                let mut next = cur.clone();
                next["status"] = json!({"conditions": [flipped.clone()]});
                Ok(next)
            })
            .await
            .unwrap();
        }
        // Stale cached copies: the writer decides on what it reads, and writes nothing when it
        // is already so.
        let mut fresh = StatusWriter { rest: rest.clone(), objects: Arc::default(), recent: HashMap::new() };
        let stale = reload(&fresh, &rest).await;
        rest.update_with(&CatalogStrategy(spec), None, "s", WriteTarget::Status, false, WriteHooks::default(), |cur| {
            let mut next = cur.clone();
            next["status"] = json!({"conditions": [condition_for(cur, &HashSet::new()).unwrap()]});
            Ok(next)
        })
        .await
        .unwrap();
        let settled = rest.get(&CatalogStrategy(spec), None, "s").await.unwrap();
        assert_ne!(stale["metadata"]["resourceVersion"], settled["metadata"]["resourceVersion"]);
        assert!(fresh.pass().await.is_none());
        assert!(fresh.recent.is_empty(), "no write counted");
        let now = rest.get(&CatalogStrategy(spec), None, "s").await.unwrap();
        assert_eq!(now["metadata"]["resourceVersion"], settled["metadata"]["resourceVersion"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
