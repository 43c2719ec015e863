//! kube's quota evaluators (`pkg/quota/v1/evaluator/core`, and the generic object counter)
//! over JSON objects: which quota resources a kind is charged in, what one object uses, which
//! writes change usage, and the pod scopes.

use std::collections::{BTreeMap, BTreeSet};

use kapi_admission::Operation;
use serde_json::Value;

use crate::quantity::Quantity;

/// Usage or limits by resource name, sorted as kube prints them.
pub type ResourceList = BTreeMap<String, Quantity>;

/// A list from a `{name: quantity}` JSON map (unparsable values are skipped: stored ones were
/// validated).
pub fn resource_list(value: Option<&Value>) -> ResourceList {
    value.and_then(Value::as_object).map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), Quantity::from_json(v)?))).collect()).unwrap_or_default()
}

/// The JSON map of a list, with kube's canonical quantities.
pub fn to_json(list: &ResourceList) -> Value {
    Value::Object(list.iter().map(|(k, v)| (k.clone(), Value::String(v.to_string()))).collect())
}

/// kube's `prettyPrint`: `name=quantity` sorted by name, comma-separated.
pub fn pretty(list: &ResourceList) -> String {
    list.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

fn one() -> Quantity {
    Quantity::parse("1").unwrap_or(Quantity::ZERO)
}

fn count(n: usize) -> Quantity {
    Quantity::parse(&n.to_string()).unwrap_or(Quantity::ZERO)
}

/// `a + b`, key by key.
pub fn add(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (k, v) in b {
        let sum = out.get(k).map_or(*v, |have| have.add(v));
        out.insert(k.clone(), sum);
    }
    out
}

/// kube's `SubtractWithNonNegativeResult`: `a - b` for the keys of `a`, never below zero.
pub fn subtract_non_negative(a: &ResourceList, b: &ResourceList) -> ResourceList {
    a.iter()
        .map(|(k, v)| {
            let left = match b.get(k) {
                Some(taken) if v.compare(taken).is_le() => Quantity::ZERO,
                Some(taken) => Quantity::parse(&format!("-{taken}")).map_or(*v, |neg| v.add(&neg)),
                None => *v,
            };
            (k.clone(), left)
        })
        .collect()
}

/// The entries of `list` named in `names` (kube's `Mask`).
pub fn mask(list: &ResourceList, names: &BTreeSet<String>) -> ResourceList {
    list.iter().filter(|(k, _)| names.contains(*k)).map(|(k, v)| (k.clone(), *v)).collect()
}

/// kube's `IsExtendedResourceName`: a qualified name outside `kubernetes.io`, not `requests.*`.
fn is_extended(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// How usage of one resource is measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evaluator {
    /// Pods: count, compute requests and limits, while not terminal.
    Pods,
    /// Services: count, load balancers, node ports.
    Services,
    /// PersistentVolumeClaims: count and requested storage, also per storage class.
    Claims,
    /// Any other namespaced resource: `count/<resource>[.<group>]`, and kube's legacy name for
    /// configmaps, secrets, resourcequotas and replicationcontrollers.
    Objects {
        /// `count/<resource>[.<group>]`.
        count: String,
        /// The legacy name, if any.
        legacy: Option<&'static str>,
    },
}

const POD_RESOURCES: &[&str] = &[
    "count/pods",
    "pods",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
];
const SERVICE_RESOURCES: &[&str] = &["count/services", "services", "services.loadbalancers", "services.nodeports"];
const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";

impl Evaluator {
    /// The evaluator of `group`/`resource`.
    pub fn of(group: &str, resource: &str) -> Evaluator {
        match (group, resource) {
            ("", "pods") => Evaluator::Pods,
            ("", "services") => Evaluator::Services,
            ("", "persistentvolumeclaims") => Evaluator::Claims,
            _ => {
                let legacy = match (group, resource) {
                    ("", "configmaps") => Some("configmaps"),
                    ("", "secrets") => Some("secrets"),
                    ("", "resourcequotas") => Some("resourcequotas"),
                    ("", "replicationcontrollers") => Some("replicationcontrollers"),
                    _ => None,
                };
                let count = if group.is_empty() { format!("count/{resource}") } else { format!("count/{resource}.{group}") };
                Evaluator::Objects { count, legacy }
            }
        }
    }

    /// Whether a write of `operation` can change usage (kube's `Handles`).
    pub fn handles(&self, operation: Operation) -> bool {
        match self {
            Evaluator::Services | Evaluator::Claims => matches!(operation, Operation::Create | Operation::Update),
            Evaluator::Pods | Evaluator::Objects { .. } => operation == Operation::Create,
        }
    }

    /// Whether this evaluator charges quota resource `name`.
    pub fn charges(&self, name: &str) -> bool {
        match self {
            Evaluator::Pods => {
                POD_RESOURCES.contains(&name)
                    || name.starts_with("hugepages-")
                    || name.starts_with("requests.hugepages-")
                    || name.strip_prefix("requests.").is_some_and(is_extended)
            }
            Evaluator::Services => SERVICE_RESOURCES.contains(&name),
            Evaluator::Claims => {
                matches!(name, "count/persistentvolumeclaims" | "persistentvolumeclaims" | "requests.storage")
                    || name.split_once(STORAGE_CLASS_SUFFIX).is_some_and(|(_, r)| r == "requests.storage" || r == "persistentvolumeclaims")
            }
            Evaluator::Objects { count, legacy } => name == count || Some(name) == *legacy,
        }
    }

    /// What `obj` uses (kube's `Usage`).
    pub fn usage(&self, obj: &Value, now: i64) -> ResourceList {
        match self {
            Evaluator::Pods => pod_usage(obj, now),
            Evaluator::Services => service_usage(obj),
            Evaluator::Claims => claim_usage(obj),
            Evaluator::Objects { count, legacy } => {
                let mut usage = ResourceList::from([(count.clone(), one())]);
                if let Some(legacy) = legacy {
                    usage.insert((*legacy).to_owned(), one());
                }
                usage
            }
        }
    }

    /// kube's `Constraints`: a quota on cpu or memory needs every container to say how much.
    pub fn constraints(&self, required: &BTreeSet<String>, obj: &Value) -> Result<(), String> {
        if *self != Evaluator::Pods {
            return Ok(());
        }
        const VALIDATED: &[&str] = &["cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"];
        let required: BTreeSet<&str> = required.iter().map(String::as_str).filter(|r| VALIDATED.contains(r)).collect();
        let mut missing: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for list in ["containers", "initContainers"] {
            for c in obj.pointer(&format!("/spec/{list}")).and_then(Value::as_array).into_iter().flatten() {
                let requests = resource_list(c.pointer("/resources/requests"));
                let limits = resource_list(c.pointer("/resources/limits"));
                let has = compute_usage(&requests, &limits);
                for r in required.iter().filter(|r| !has.contains_key(**r)) {
                    missing.entry(r).or_default().insert(c.get("name").and_then(Value::as_str).unwrap_or_default());
                }
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let parts: Vec<String> =
            missing.iter().map(|(r, names)| format!("{r} for: {}", names.iter().copied().collect::<Vec<_>>().join(","))).collect();
        Err(format!("must specify {}", parts.join("; ")))
    }

    /// Whether `obj` is in a quota's scope selector term (kube's `MatchesScope`): only pods
    /// have scopes; other kinds match no scoped quota.
    pub fn matches_scope(&self, scope: &str, operator: &str, values: &[String], obj: &Value) -> bool {
        if *self != Evaluator::Pods {
            return false;
        }
        let terminating = obj.pointer("/spec/activeDeadlineSeconds").and_then(Value::as_i64).is_some_and(|s| s >= 0);
        match scope {
            "Terminating" => terminating,
            "NotTerminating" => !terminating,
            "BestEffort" => best_effort(obj),
            "NotBestEffort" => !best_effort(obj),
            "PriorityClass" => {
                let class = obj.pointer("/spec/priorityClassName").and_then(Value::as_str).unwrap_or_default();
                match operator {
                    "In" => values.iter().any(|v| v == class),
                    "NotIn" => !values.iter().any(|v| v == class),
                    "Exists" => !class.is_empty(),
                    "DoesNotExist" => class.is_empty(),
                    _ => false,
                }
            }
            "CrossNamespacePodAffinity" => cross_namespace_affinity(obj),
            _ => false,
        }
    }
}

/// kube's `podComputeUsageHelper`: what requests and limits charge.
fn compute_usage(requests: &ResourceList, limits: &ResourceList) -> ResourceList {
    let mut usage = ResourceList::from([("pods".to_owned(), one())]);
    for name in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(q) = requests.get(name) {
            usage.insert(name.to_owned(), *q);
            usage.insert(format!("requests.{name}"), *q);
        }
        if let Some(q) = limits.get(name) {
            usage.insert(format!("limits.{name}"), *q);
        }
    }
    for (name, q) in requests {
        if name.starts_with("hugepages-") {
            usage.insert(name.clone(), *q);
            usage.insert(format!("requests.{name}"), *q);
        } else if is_extended(name) {
            usage.insert(format!("requests.{name}"), *q);
        }
    }
    usage
}

fn containers<'a>(pod: &'a Value, list: &str) -> impl Iterator<Item = &'a Value> {
    pod.pointer(&format!("/spec/{list}")).and_then(Value::as_array).into_iter().flatten()
}

fn keep_max(total: &mut ResourceList, other: &ResourceList) {
    for (k, v) in other {
        if total.get(k).is_none_or(|t| v.compare(t).is_gt()) {
            total.insert(k.clone(), *v);
        }
    }
}

/// kube's `PodRequests` / `PodLimits`: containers and sidecars add up, each ordinary init
/// container with the sidecars before it, the larger wins; pod-level cpu and memory replace.
fn pod_resources(pod: &Value, field: &str) -> ResourceList {
    let of = |c: &Value| resource_list(c.pointer(&format!("/resources/{field}")));
    let mut total = ResourceList::new();
    for c in containers(pod, "containers") {
        total = add(&total, &of(c));
    }
    let (mut sidecars, mut init) = (ResourceList::new(), ResourceList::new());
    for c in containers(pod, "initContainers") {
        let own = of(c);
        let counted = if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            total = add(&total, &own);
            sidecars = add(&sidecars, &own);
            sidecars.clone()
        } else {
            add(&own, &sidecars)
        };
        keep_max(&mut init, &counted);
    }
    keep_max(&mut total, &init);
    for (name, q) in resource_list(pod.pointer(&format!("/spec/resources/{field}"))) {
        if name == "cpu" || name == "memory" {
            total.insert(name, q);
        }
    }
    total
}

/// kube's `QuotaV1Pod`: terminal pods, and pods past their deletion grace, use no compute.
pub fn pod_counts(pod: &Value, now: i64) -> bool {
    if matches!(pod.pointer("/status/phase").and_then(Value::as_str), Some("Failed" | "Succeeded")) {
        return false;
    }
    let deleted = pod.pointer("/metadata/deletionTimestamp").and_then(Value::as_str).and_then(kapi_apimachinery::time::parse_rfc3339);
    let grace = pod.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64);
    !matches!((deleted, grace), (Some(at), Some(grace)) if now > at.unix_timestamp() + grace)
}

fn pod_usage(pod: &Value, now: i64) -> ResourceList {
    let mut usage = ResourceList::from([("count/pods".to_owned(), one())]);
    if pod_counts(pod, now) {
        usage = add(&usage, &compute_usage(&pod_resources(pod, "requests"), &pod_resources(pod, "limits")));
    }
    usage
}

/// kube's QoS BestEffort: no cpu or memory request or limit anywhere.
fn best_effort(pod: &Value) -> bool {
    let says = |v: Option<&Value>| resource_list(v).keys().any(|k| k == "cpu" || k == "memory");
    let in_containers = ["containers", "initContainers"]
        .iter()
        .flat_map(|l| containers(pod, l))
        .any(|c| says(c.pointer("/resources/requests")) || says(c.pointer("/resources/limits")));
    !in_containers && !says(pod.pointer("/spec/resources/requests")) && !says(pod.pointer("/spec/resources/limits"))
}

/// Whether any pod (anti-)affinity term reaches other namespaces.
fn cross_namespace_affinity(pod: &Value) -> bool {
    let terms = |kind: &str| -> Vec<Value> {
        let Some(a) = pod.pointer(&format!("/spec/affinity/{kind}")) else { return Vec::new() };
        let required = a.get("requiredDuringSchedulingIgnoredDuringExecution").and_then(Value::as_array).cloned().unwrap_or_default();
        let preferred = a.get("preferredDuringSchedulingIgnoredDuringExecution").and_then(Value::as_array).cloned().unwrap_or_default();
        required.into_iter().chain(preferred.into_iter().filter_map(|p| p.get("podAffinityTerm").cloned())).collect()
    };
    ["podAffinity", "podAntiAffinity"].iter().flat_map(|k| terms(k)).any(|t| {
        t.get("namespaceSelector").is_some_and(|s| !s.is_null()) || t.get("namespaces").and_then(Value::as_array).is_some_and(|n| !n.is_empty())
    })
}

fn service_usage(svc: &Value) -> ResourceList {
    let ports = svc.pointer("/spec/ports").and_then(Value::as_array).cloned().unwrap_or_default();
    let (mut balancers, mut node_ports) = (Quantity::ZERO, Quantity::ZERO);
    match svc.pointer("/spec/type").and_then(Value::as_str) {
        Some("NodePort") => node_ports = count(ports.len()),
        Some("LoadBalancer") => {
            balancers = one();
            // Without allocated node ports only the ports that name one count.
            let allocate = svc.pointer("/spec/allocateLoadBalancerNodePorts").and_then(Value::as_bool) != Some(false);
            node_ports = if allocate {
                count(ports.len())
            } else {
                count(ports.iter().filter(|p| p.get("nodePort").and_then(Value::as_i64).is_some_and(|n| n != 0)).count())
            };
        }
        _ => {}
    }
    ResourceList::from([
        ("count/services".to_owned(), one()),
        ("services".to_owned(), one()),
        ("services.loadbalancers".to_owned(), balancers),
        ("services.nodeports".to_owned(), node_ports),
    ])
}

/// kube's claim usage: the larger of the requested and the allocated storage.
fn claim_usage(pvc: &Value) -> ResourceList {
    let mut usage = ResourceList::from([("count/persistentvolumeclaims".to_owned(), one()), ("persistentvolumeclaims".to_owned(), one())]);
    let class = pvc
        .pointer("/spec/storageClassName")
        .and_then(Value::as_str)
        .or_else(|| pvc.pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class").and_then(Value::as_str))
        .filter(|c| !c.is_empty());
    if let Some(class) = class {
        usage.insert(format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"), one());
    }
    let requested = resource_list(pvc.pointer("/spec/resources/requests")).get("storage").copied();
    let allocated = resource_list(pvc.pointer("/status/allocatedResources")).get("storage").copied();
    let storage = match (requested, allocated) {
        (Some(r), Some(a)) if a.compare(&r).is_gt() => Some(a),
        (Some(r), _) => Some(r),
        (None, a) => a,
    };
    if let Some(storage) = storage {
        usage.insert("requests.storage".to_owned(), storage);
        if let Some(class) = class {
            usage.insert(format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"), storage);
        }
    }
    usage
}
