//! LimitRanger (kube's `plugin/pkg/admission/limitranger`): the LimitRanges of a namespace
//! give new Pods' containers their default requests and limits (noted in the
//! `kubernetes.io/limit-ranger` annotation), and bound what Pods, their containers and
//! PersistentVolumeClaims may ask for.

mod constraints;

use std::collections::BTreeMap;

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;
use kapi_registry::rest::RestStore;
use serde_json::{Map, Value};

use crate::lookup;
use crate::quantity::Quantity;

/// The annotation that says which defaults the plugin set.
pub const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// A resource list (`cpu: 500m`), by resource name.
pub(crate) type Resources = BTreeMap<String, Quantity>;

/// The plugin.
pub struct LimitRanger {
    rest: RestStore,
}

impl LimitRanger {
    /// The plugin over `rest`'s LimitRange cache.
    pub fn new(rest: RestStore) -> Self {
        LimitRanger { rest }
    }

    /// The namespace's LimitRanges with kube's API defaults, which kube applies when it stores
    /// them (kapi's registry does not yet, and the defaults decide what Pods get).
    fn limit_ranges(&self, namespace: &str) -> Result<Vec<Value>, ApiError> {
        let spec = lookup::spec("", "v1", "limitranges")?;
        Ok(lookup::list(&self.rest, spec, Some(namespace))
            .into_iter()
            .map(|lr| {
                let mut lr = (*lr).clone();
                if let Some(items) = lr.pointer_mut("/spec/limits").and_then(Value::as_array_mut) {
                    items.iter_mut().for_each(default_item);
                }
                lr
            })
            .collect())
    }
}

/// kube's `SetDefaults_LimitRangeItem`: for containers, the default limit falls back to the
/// max, and the default request to the default limit, then to the min.
fn default_item(item: &mut Value) {
    if item.get("type").and_then(Value::as_str) != Some("Container") {
        return;
    }
    let list = |item: &Value, field: &str| item.get(field).and_then(Value::as_object).cloned().unwrap_or_default();
    let mut default = list(item, "default");
    let mut default_request = list(item, "defaultRequest");
    for (k, v) in list(item, "max") {
        default.entry(k).or_insert(v);
    }
    for (k, v) in default.iter().chain(list(item, "min").iter()) {
        default_request.entry(k.clone()).or_insert_with(|| v.clone());
    }
    item["default"] = Value::Object(default);
    item["defaultRequest"] = Value::Object(default_request);
}

/// A resource list from JSON; entries that do not parse are left out (the registry refuses
/// them before admission).
pub(crate) fn resources(value: Option<&Value>) -> Resources {
    value
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), Quantity::from_json(v)?))).collect())
        .unwrap_or_default()
}

/// The kinds and writes kube's `SupportsAttributes` takes: Pods when created (their containers
/// cannot change afterwards), PersistentVolumeClaims when created or updated.
fn supports(attrs: &Attributes) -> bool {
    if !attrs.subresource.is_empty() || !attrs.kind.group.is_empty() {
        return false;
    }
    match attrs.kind.name.as_str() {
        "Pod" => attrs.operation == Operation::Create,
        "PersistentVolumeClaim" => true,
        _ => false,
    }
}

/// Objects being deleted are left alone, so that finalizers can still be removed.
fn deleting(attrs: &Attributes) -> bool {
    attrs.old_object.as_ref().and_then(|o| o.pointer("/metadata/deletionTimestamp")).is_some_and(|t| !t.is_null())
}

/// Sorts a JSON map's keys, as kube's encoder writes Go maps.
fn sort_keys(map: &mut Map<String, Value>) {
    let mut entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    map.extend(entries);
}

/// Gives `container` the defaults it lacks; returns what kube's annotation says about it.
fn merge_container(container: &mut Value, limits: &Resources, requests: &Resources, prefix: &str, notes: &mut Vec<String>) {
    let name = lookup::str_at(container, "/name").to_owned();
    let Some(container) = container.as_object_mut() else { return };
    let resources = container.entry("resources").or_insert_with(|| Value::Object(Map::new()));
    if !resources.is_object() {
        *resources = Value::Object(Map::new());
    }
    let mut set = |field: &str, defaults: &Resources| -> Vec<String> {
        let mut added = Vec::new();
        if defaults.is_empty() {
            return added;
        }
        let list = resources.as_object_mut().map(|r| r.entry(field).or_insert_with(|| Value::Object(Map::new())));
        let Some(Value::Object(list)) = list else { return added };
        for (k, v) in defaults {
            if !list.contains_key(k) {
                list.insert(k.clone(), Value::String(v.to_string()));
                added.push(k.clone());
            }
        }
        if !added.is_empty() {
            sort_keys(list);
        }
        added
    };
    let set_limits = set("limits", limits);
    let set_requests = set("requests", requests);
    // The resource names come sorted from the BTreeMap, as kube sorts them.
    if !set_requests.is_empty() {
        notes.push(format!("{} request for {prefix} {name}", set_requests.join(", ")));
    }
    if !set_limits.is_empty() {
        notes.push(format!("{} limit for {prefix} {name}", set_limits.join(", ")));
    }
}

/// kube's `PodMutateLimitFunc` for one LimitRange.
fn default_pod(limit_range: &Value, pod: &mut Value) {
    let (mut limits, mut requests) = (Resources::new(), Resources::new());
    for item in limit_range.pointer("/spec/limits").and_then(Value::as_array).into_iter().flatten() {
        if item.get("type").and_then(Value::as_str) == Some("Container") {
            requests.extend(resources(item.get("defaultRequest")));
            limits.extend(resources(item.get("default")));
        }
    }
    let mut notes = Vec::new();
    for (field, prefix) in [("containers", "container"), ("initContainers", "init container")] {
        for container in pod.pointer_mut(&format!("/spec/{field}")).and_then(Value::as_array_mut).into_iter().flatten() {
            merge_container(container, &limits, &requests, prefix, &mut notes);
        }
    }
    if notes.is_empty() {
        return;
    }
    let Some(meta) = pod.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    let annotations = meta.entry("annotations").or_insert_with(|| Value::Object(Map::new()));
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(ANNOTATION.into(), Value::String(format!("LimitRanger plugin set: {}", notes.join("; "))));
        sort_keys(annotations);
    }
}

/// kube's aggregate error text: one message as is, several (duplicates dropped) in brackets.
fn aggregate(errors: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errors {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    match seen.len() {
        1 => seen.remove(0),
        _ => format!("[{}]", seen.join(", ")),
    }
}

#[async_trait]
impl AdmissionPlugin for LimitRanger {
    fn name(&self) -> &'static str {
        "LimitRanger"
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
    }

    async fn admit(&self, attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !supports(attrs) || deleting(attrs) || attrs.kind.name != "Pod" {
            return Ok(());
        }
        let limit_ranges = self.limit_ranges(&attrs.namespace)?;
        if let Some(pod) = attrs.object.as_mut() {
            for limit_range in &limit_ranges {
                default_pod(limit_range, pod);
            }
        }
        Ok(())
    }

    async fn validate(&self, attrs: &Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !supports(attrs) || deleting(attrs) {
            return Ok(());
        }
        let Some(obj) = attrs.object.as_ref() else { return Ok(()) };
        for limit_range in self.limit_ranges(&attrs.namespace)? {
            let errors = match attrs.kind.name.as_str() {
                "Pod" => constraints::pod(&limit_range, obj),
                _ => constraints::claim(&limit_range, obj, attrs.old_object.as_ref()),
            };
            if !errors.is_empty() {
                return Err(attrs.forbidden(&aggregate(errors)));
            }
        }
        Ok(())
    }
}
