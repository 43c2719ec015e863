//! API Priority and Fairness at run time (`--enable-priority-and-fairness`), over the no-IO
//! crate `kapi-flowcontrol`:
//!
//! - [`FlowControl`] holds the configuration in force as a snapshot: the schemas in matching
//!   order, each level's UID, bounds and queues ([`level::Level`]). The filter
//!   (`filters::priority_and_fairness`) classifies against it;
//! - [`controller`] (kube's `priority-and-fairness-config-consumer`) rebuilds the snapshot
//!   from the FlowSchema and PriorityLevelConfiguration watch caches on every change;
//! - [`producer`] (kube's `priority-and-fairness-config-producer`) keeps kube's mandatory and
//!   suggested objects stored;
//! - [`borrowing`] moves seats between levels every 10 s, by their demand.

pub mod borrowing;
pub mod controller;
pub mod debug;
pub mod dropped;
pub mod level;
pub mod producer;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use http::HeaderValue;
use kapi_flowcontrol::{allocate, bootstrap, classify, flow_hash, Config, LevelLimits, PriorityLevel, RequestDigest};
use serde_json::Value;
use tokio::sync::Notify;

use self::level::Level;

/// A priority level of the snapshot.
#[derive(Debug)]
pub struct LevelEntry {
    /// The object's `metadata.uid` ("" for a mandatory level not stored yet), as the header
    /// value every answer of the level carries.
    pub uid: HeaderValue,
    /// Its configuration.
    pub config: PriorityLevel,
    /// Its bounds for the server's limit.
    pub limits: LevelLimits,
    /// Its queues; None for exempt levels.
    pub queues: Option<Arc<Level>>,
}

/// The configuration in force.
#[derive(Debug, Default)]
pub struct Snapshot {
    config: Config,
    schema_uids: HashMap<String, HeaderValue>,
    levels: HashMap<String, LevelEntry>,
}

/// Where a request goes, for the filter.
#[derive(Debug)]
pub struct Decision {
    /// The matching FlowSchema's name (the metrics' `flow_schema`).
    pub schema: String,
    /// Its level's name (the metrics' `priority_level`).
    pub level: String,
    /// The matching FlowSchema's UID (the `X-Kubernetes-PF-FlowSchema-UID` header).
    pub schema_uid: HeaderValue,
    /// Its level's UID (the `X-Kubernetes-PF-PriorityLevel-UID` header).
    pub level_uid: HeaderValue,
    /// The level's queues; None for exempt levels.
    pub queues: Option<Arc<Level>>,
    /// The flow's hash (schema and distinguisher).
    pub flow_hash: u64,
    /// The most seats one request of the level may take.
    pub max_seats: u32,
}

/// A UID as a header value, built once per configuration rather than per answer.
fn header_value(uid: &str) -> HeaderValue {
    HeaderValue::from_str(uid).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn uid_of(obj: &Value) -> String {
    obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_owned()
}

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
}

/// The stored objects plus the mandatory ones that are missing: kube's config controller
/// imagines those, so `exempt` and `catch-all` apply even before they are (re)created.
fn with_mandatory(stored: &[Value], mandatory: Vec<Value>) -> Vec<Value> {
    let mut all = stored.to_vec();
    all.extend(mandatory.into_iter().filter(|m| !stored.iter().any(|s| name_of(s) == name_of(m))));
    all
}

impl Snapshot {
    /// The snapshot of the stored objects for a server limit of `server_limit` seats. Levels
    /// of `previous` whose queuing did not change keep their queues (with their waiting and
    /// running requests) under the new limit; a level whose queuing changed gets new queues,
    /// and the old ones drain: the requests they hold run and dispatch the rest of them as
    /// they finish, nothing new enters them.
    pub fn build(schemas: &[Value], levels: &[Value], server_limit: u32, previous: &Snapshot) -> Snapshot {
        let schemas = with_mandatory(schemas, bootstrap::mandatory_schemas());
        let levels = with_mandatory(levels, bootstrap::mandatory_levels());
        let config = Config::from_objects(&schemas, &levels);
        let limits = allocate(server_limit, &config.levels);
        let level_uids: HashMap<&str, String> = levels.iter().map(|l| (name_of(l), uid_of(l))).collect();
        let mut entries = HashMap::new();
        for (level, limits) in config.levels.iter().zip(limits) {
            let queues = (!level.exempt).then(|| match previous.levels.get(&level.name) {
                Some(LevelEntry { config: old, queues: Some(queues), .. }) if !old.exempt && old.queuing == level.queuing => {
                    queues.set_limit(limits.nominal, limits.headroom());
                    queues.clone()
                }
                _ => Level::named(&level.name, level.queuing, limits.nominal, limits.headroom()),
            });
            // kube's limit series; a limited level's current limit follows its queues' (borrowing
            // moves it), an exempt level is never limited and keeps its nominal seats.
            crate::metrics::flowcontrol_level_limits(&level.name, limits.nominal, limits.min, limits.max);
            if queues.is_none() {
                crate::metrics::flowcontrol_current_limit(&level.name, limits.nominal);
            }
            let uid = header_value(level_uids.get(level.name.as_str()).map_or("", String::as_str));
            entries.insert(level.name.clone(), LevelEntry { uid, config: level.clone(), limits, queues });
        }
        for gone in previous.levels.keys().filter(|name| !entries.contains_key(*name)) {
            crate::metrics::flowcontrol_forget_level(gone);
        }
        let schema_uids = schemas.iter().map(|s| (name_of(s).to_owned(), header_value(&uid_of(s)))).collect();
        Snapshot { config, schema_uids, levels: entries }
    }

    /// The level called `name`.
    pub fn level(&self, name: &str) -> Option<&LevelEntry> {
        self.levels.get(name)
    }

    /// Classifies a request; None only when nothing matches (the imagined `catch-all` always
    /// does, so never in practice).
    pub fn decide(&self, digest: &RequestDigest<'_>) -> Option<Decision> {
        let class = classify(&self.config, digest)?;
        let entry = self.levels.get(&class.level.name)?;
        let (schema, distinguisher) = class.flow(digest);
        Some(Decision {
            level: class.level.name.clone(),
            schema_uid: self.schema_uids.get(&schema).cloned().unwrap_or_else(|| HeaderValue::from_static("")),
            level_uid: entry.uid.clone(),
            queues: entry.queues.clone(),
            flow_hash: flow_hash(&schema, &distinguisher),
            max_seats: entry.limits.max_seats,
            schema,
        })
    }
}

/// The flow control of one server.
#[derive(Debug)]
pub struct FlowControl {
    /// `--max-requests-inflight` + `--max-mutating-requests-inflight`.
    server_limit: u32,
    snapshot: RwLock<Arc<Snapshot>>,
    next_id: AtomicU64,
    /// Signalled on every change of a FlowSchema or PriorityLevelConfiguration (the producer
    /// restores what was deleted or changed).
    changed: Arc<Notify>,
    /// Each level's recent rejections, for its 429s' `Retry-After`.
    dropped: dropped::DroppedRequests,
}

impl FlowControl {
    /// Flow control sharing `server_limit` seats, with only the mandatory objects until the
    /// controller loads the stored ones.
    pub fn new(server_limit: u32) -> Arc<FlowControl> {
        let snapshot = Snapshot::build(&[], &[], server_limit, &Snapshot::default());
        Arc::new(FlowControl { server_limit, snapshot: RwLock::new(Arc::new(snapshot)), next_id: AtomicU64::new(1), changed: Arc::new(Notify::new()), dropped: Default::default() })
    }

    /// The configuration in force.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the configuration with the one of the stored objects.
    pub fn reload(&self, schemas: &[Value], levels: &[Value]) {
        let mut current = self.snapshot.write().unwrap_or_else(|e| e.into_inner());
        *current = Arc::new(Snapshot::build(schemas, levels, self.server_limit, &current));
    }

    /// kube's borrowing adjustment: every limited level's seats for the next period, from
    /// its seat demand over the last one (see [`borrowing`]). Exempt levels are not limited
    /// and take no part (their default share is 0 in kube too).
    pub fn rebalance(&self) {
        let snapshot = self.snapshot();
        let limited: Vec<(&LevelLimits, &Arc<Level>)> = snapshot.levels.values().filter_map(|e| e.queues.as_ref().map(|q| (&e.limits, q))).collect();
        let inputs: Vec<_> = limited.iter().map(|(limits, queues)| (**limits, queues.take_demand())).collect();
        for ((limits, queues), current) in limited.iter().zip(kapi_flowcontrol::borrowing_limits(&inputs)) {
            queues.set_limit(current, limits.headroom());
        }
    }

    /// A fresh request id.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Wakes on configuration object changes.
    pub fn changed(&self) -> Arc<Notify> {
        self.changed.clone()
    }

    /// The levels' rejections, which set the `Retry-After` of their 429s.
    pub fn dropped(&self) -> &dropped::DroppedRequests {
        &self.dropped
    }
}

#[cfg(test)]
mod tests {
    use kapi_flowcontrol::{bootstrap, RequestDigest};
    use serde_json::Value;

    use super::{FlowControl, Snapshot};

    fn stored(mut objects: Vec<Value>) -> Vec<Value> {
        for o in &mut objects {
            let name = o["metadata"]["name"].as_str().unwrap().to_owned();
            o["metadata"]["uid"] = Value::String(format!("uid-{name}"));
        }
        objects
    }

    fn user(groups: &[String]) -> RequestDigest<'_> {
        RequestDigest { user: "alice", groups, is_resource: true, verb: "get", resource: "pods", namespace: "default", ..Default::default() }
    }

    #[test]
    fn mandatory_objects_apply_before_they_are_stored() {
        let fc = FlowControl::new(600);
        let masters = vec!["system:masters".to_owned()];
        let d = fc.snapshot().decide(&user(&masters)).unwrap();
        assert!(d.queues.is_none(), "exempt");
        assert_eq!(d.schema_uid, "", "an imagined object has no UID yet");
        let others = vec!["system:authenticated".to_owned()];
        let d = fc.snapshot().decide(&user(&others)).unwrap();
        assert!(d.queues.is_some(), "catch-all limits");
    }

    #[test]
    fn uids_come_from_the_stored_objects_and_unchanged_levels_keep_their_queues() {
        let schemas = stored([bootstrap::mandatory_schemas(), bootstrap::suggested_schemas()].concat());
        let mut levels = stored([bootstrap::mandatory_levels(), bootstrap::suggested_levels()].concat());
        let first = Snapshot::build(&schemas, &levels, 600, &Snapshot::default());
        let groups = vec!["system:authenticated".to_owned()];
        let d = first.decide(&user(&groups)).unwrap();
        assert_eq!((d.schema_uid.to_str().unwrap(), d.level_uid.to_str().unwrap()), ("uid-global-default", "uid-global-default"));

        // Fewer shares for workload-low: every nominal limit moves, no queuing changes.
        let low = levels.iter_mut().find(|l| l["metadata"]["name"] == "workload-low").unwrap();
        low["spec"]["limited"]["nominalConcurrencyShares"] = 10.into();
        let second = Snapshot::build(&schemas, &levels, 600, &first);
        let queues = |s: &Snapshot, name: &str| s.level(name).unwrap().queues.clone().unwrap();
        assert!(std::sync::Arc::ptr_eq(&queues(&first, "global-default"), &queues(&second, "global-default")));
        assert!(second.level("global-default").unwrap().limits.nominal > first.level("global-default").unwrap().limits.nominal);

        // Other queuing: new queues.
        let global = levels.iter_mut().find(|l| l["metadata"]["name"] == "global-default").unwrap();
        global["spec"]["limited"]["limitResponse"]["queuing"]["queues"] = 16.into();
        let third = Snapshot::build(&schemas, &levels, 600, &second);
        assert!(!std::sync::Arc::ptr_eq(&queues(&second, "global-default"), &queues(&third, "global-default")));
    }
}
