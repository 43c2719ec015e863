//! The min, max and limit-to-request ratio checks with kube's texts, per container, per Pod
//! (its effective requests and limits, init containers and sidecars counted as the scheduler
//! counts them) and per PersistentVolumeClaim.

use std::cmp::Ordering;

use serde_json::Value;

use super::{resources, Resources};
use crate::quantity::Quantity;

fn min(kind: &str, name: &str, enforced: &Quantity, requests: &Resources, limits: &Resources) -> Option<String> {
    let Some(request) = requests.get(name) else {
        return Some(format!("minimum {name} usage per {kind} is {enforced}.  No request is specified"));
    };
    if enforced.compare(request) == Ordering::Greater {
        return Some(format!("minimum {name} usage per {kind} is {enforced}, but request is {request}"));
    }
    match limits.get(name) {
        Some(limit) if enforced.compare(limit) == Ordering::Greater => {
            Some(format!("minimum {name} usage per {kind} is {enforced}, but limit is {limit}"))
        }
        _ => None,
    }
}

fn max(kind: &str, name: &str, enforced: &Quantity, requests: &Resources, limits: &Resources) -> Option<String> {
    let Some(limit) = limits.get(name) else {
        return Some(format!("maximum {name} usage per {kind} is {enforced}.  No limit is specified"));
    };
    if limit.compare(enforced) == Ordering::Greater {
        return Some(format!("maximum {name} usage per {kind} is {enforced}, but limit is {limit}"));
    }
    match requests.get(name) {
        Some(request) if request.compare(enforced) == Ordering::Greater => {
            Some(format!("maximum {name} usage per {kind} is {enforced}, but request is {request}"))
        }
        _ => None,
    }
}

/// The max for kinds whose limits are not user input (claims): only the request counts.
fn max_request(kind: &str, name: &str, enforced: &Quantity, requests: &Resources) -> Option<String> {
    match requests.get(name) {
        None => Some(format!("maximum {name} usage per {kind} is {enforced}.  No request is specified")),
        Some(request) if request.compare(enforced) == Ordering::Greater => {
            Some(format!("maximum {name} usage per {kind} is {enforced}, but request is {request}"))
        }
        Some(_) => None,
    }
}

fn ratio(kind: &str, name: &str, enforced: &Quantity, requests: &Resources, limits: &Resources) -> Option<String> {
    let prefix = format!("{name} max limit to request ratio per {kind} is {enforced}");
    let Some(request) = requests.get(name).filter(|q| !q.is_zero()) else {
        return Some(format!("{prefix}, but no request is specified or request is 0"));
    };
    let Some(limit) = limits.get(name).filter(|q| !q.is_zero()) else {
        return Some(format!("{prefix}, but no limit is specified or limit is 0"));
    };
    limit.exceeds_ratio(request, enforced).then(|| format!("{prefix}, but provided ratio is {}", Quantity::ratio_text(limit, request)))
}

/// min, max and ratio of one LimitRange item against one set of requests and limits.
fn check(item: &Value, kind: &str, requests: &Resources, limits: &Resources, errors: &mut Vec<String>) {
    for (name, enforced) in resources(item.get("min")) {
        errors.extend(min(kind, &name, &enforced, requests, limits));
    }
    for (name, enforced) in resources(item.get("max")) {
        errors.extend(max(kind, &name, &enforced, requests, limits));
    }
    for (name, enforced) in resources(item.get("maxLimitRequestRatio")) {
        errors.extend(ratio(kind, &name, &enforced, requests, limits));
    }
}

fn items(limit_range: &Value) -> impl Iterator<Item = (&Value, &str)> {
    limit_range
        .pointer("/spec/limits")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|item| (item, item.get("type").and_then(Value::as_str).unwrap_or("")))
}

fn containers<'a>(pod: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> {
    pod.pointer(&format!("/spec/{field}")).and_then(Value::as_array).into_iter().flatten()
}

fn add(total: &mut Resources, more: &Resources) {
    for (name, q) in more {
        let sum = match total.get(name) {
            Some(t) => t.add(q),
            None => *q,
        };
        total.insert(name.clone(), sum);
    }
}

fn keep_max(total: &mut Resources, other: &Resources) {
    for (name, q) in other {
        if total.get(name).is_none_or(|t| q.compare(t) == Ordering::Greater) {
            total.insert(name.clone(), *q);
        }
    }
}

/// kube's `podRequests` / `podLimits` over the spec: containers and sidecars add up, each
/// ordinary init container counts with the sidecars started before it, the larger of the two
/// wins; pod-level cpu and memory replace the sums.
fn effective(pod: &Value, field: &str) -> Resources {
    let of = |c: &Value| resources(c.pointer(&format!("/resources/{field}")));
    let mut total = Resources::new();
    for c in containers(pod, "containers") {
        add(&mut total, &of(c));
    }
    let (mut sidecars, mut init) = (Resources::new(), Resources::new());
    for c in containers(pod, "initContainers") {
        let own = of(c);
        let counted = if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            add(&mut total, &own);
            add(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut with_sidecars = own;
            add(&mut with_sidecars, &sidecars);
            with_sidecars
        };
        keep_max(&mut init, &counted);
    }
    keep_max(&mut total, &init);
    for (name, q) in resources(pod.pointer(&format!("/spec/resources/{field}"))) {
        if name == "cpu" || name == "memory" {
            total.insert(name, q);
        }
    }
    total
}

/// kube's `PodValidateLimitFunc`.
pub(super) fn pod(limit_range: &Value, pod: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    for (item, kind) in items(limit_range) {
        match kind {
            "Container" => {
                for c in containers(pod, "containers").chain(containers(pod, "initContainers")) {
                    let requests = resources(c.pointer("/resources/requests"));
                    let limits = resources(c.pointer("/resources/limits"));
                    check(item, kind, &requests, &limits, &mut errors);
                }
            }
            "Pod" => check(item, kind, &effective(pod, "requests"), &effective(pod, "limits"), &mut errors),
            _ => {}
        }
    }
    errors
}

/// kube's `PersistentVolumeClaimValidateLimitFunc`: only the requested storage counts, and an
/// update leaving a request as stored is not checked again (what is stored is valid).
pub(super) fn claim(limit_range: &Value, claim: &Value, old: Option<&Value>) -> Vec<String> {
    let requests = resources(claim.pointer("/spec/resources/requests"));
    let old_requests = resources(old.and_then(|o| o.pointer("/spec/resources/requests")));
    let unchanged = |name: &str| matches!((requests.get(name), old_requests.get(name)), (Some(a), Some(b)) if a == b);
    let mut errors = Vec::new();
    for (item, kind) in items(limit_range).filter(|(_, kind)| *kind == "PersistentVolumeClaim") {
        for (name, enforced) in resources(item.get("min")) {
            if !unchanged(&name) {
                errors.extend(min(kind, &name, &enforced, &requests, &Resources::new()));
            }
        }
        for (name, enforced) in resources(item.get("max")) {
            if !unchanged(&name) {
                errors.extend(max_request(kind, &name, &enforced, &requests));
            }
        }
    }
    errors
}
