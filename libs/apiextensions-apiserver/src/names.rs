//! The status kube's CRD controllers converge to: accepted names and `NamesAccepted` (naming
//! controller), `Established` (establishing controller), `KubernetesAPIApprovalPolicyConformant`
//! (API approval controller). Pure: the tier's controller writes what this computes.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map, Value};

use crate::crd::{at, condition, set_condition, str_at, strings_at, API_APPROVAL, ESTABLISHED, NAMES_ACCEPTED};

/// The names the CRDs of one group have been granted (each CRD's own included, as kube
/// counts them): resource names (plural, singular, short names) and kinds (kind, list kind).
#[derive(Debug, Default)]
pub struct GroupNames {
    resources: HashSet<String>,
    kinds: HashSet<String>,
}

/// [`GroupNames`] of every group, from every stored CRD: built once per controller pass, so a
/// pass over N CRDs costs O(N), not O(N²).
pub fn names_by_group<'a>(all: impl Iterator<Item = &'a Value>) -> HashMap<String, GroupNames> {
    let mut groups: HashMap<String, GroupNames> = HashMap::new();
    for crd in all {
        let names = groups.entry(str_at(crd, "/spec/group").to_owned()).or_default();
        names.resources.insert(str_at(crd, "/status/acceptedNames/plural").to_owned());
        names.resources.insert(str_at(crd, "/status/acceptedNames/singular").to_owned());
        names.resources.extend(strings_at(crd, "/status/acceptedNames/shortNames"));
        names.kinds.insert(str_at(crd, "/status/acceptedNames/kind").to_owned());
        names.kinds.insert(str_at(crd, "/status/acceptedNames/listKind").to_owned());
    }
    groups
}

/// kube's `equalToAcceptedOrFresh`.
fn fresh(requested: &str, accepted: &str, used: &HashSet<String>) -> Result<(), String> {
    if requested == accepted || !used.contains(requested) {
        Ok(())
    } else {
        Err(format!("{requested:?} is already in use"))
    }
}

/// The status `crd` should have, given the names its group has granted; None when it has it
/// already.
pub fn desired_status(crd: &Value, granted: &GroupNames) -> Option<Value> {
    let (resources, kinds) = (&granted.resources, &granted.kinds);
    let requested = at(crd, "/spec/names").cloned().unwrap_or_else(|| json!({}));
    let accepted = at(crd, "/status/acceptedNames").cloned().unwrap_or_else(|| json!({}));
    let mut names = match &accepted {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    let mut conflict: Option<(&str, String)> = None;
    for (field, reason, used) in [("plural", "PluralConflict", resources), ("singular", "SingularConflict", resources)] {
        match fresh(str_at(&requested, &format!("/{field}")), str_at(&accepted, &format!("/{field}")), used) {
            Ok(()) => set_name(&mut names, field, requested.get(field)),
            Err(e) => conflict = Some((reason, e)),
        }
    }
    let wanted_short = requested.get("shortNames").cloned().unwrap_or(Value::Null);
    if wanted_short != accepted.get("shortNames").cloned().unwrap_or(Value::Null) {
        let have: HashSet<String> = strings_at(&accepted, "/shortNames").into_iter().collect();
        let errors: Vec<String> = strings_at(&requested, "/shortNames")
            .iter()
            .filter(|s| !have.contains(*s))
            .filter_map(|s| fresh(s, "", resources).err())
            .collect();
        match errors.len() {
            0 => set_name(&mut names, "shortNames", requested.get("shortNames")),
            1 => conflict = Some(("ShortNamesConflict", errors[0].clone())),
            _ => conflict = Some(("ShortNamesConflict", format!("[{}]", errors.join(", ")))),
        }
    }
    for (field, reason) in [("kind", "KindConflict"), ("listKind", "ListKindConflict")] {
        match fresh(str_at(&requested, &format!("/{field}")), str_at(&accepted, &format!("/{field}")), kinds) {
            Ok(()) => set_name(&mut names, field, requested.get(field)),
            Err(e) => conflict = Some((reason, e)),
        }
    }
    set_name(&mut names, "categories", requested.get("categories"));
    for required in ["plural", "kind"] {
        names.entry(required).or_insert_with(|| Value::from(""));
    }

    let mut status = crd.get("status").and_then(Value::as_object).cloned().unwrap_or_default();
    status.insert("acceptedNames".into(), Value::Object(names));
    let accepted_ok = conflict.is_none();
    match &conflict {
        None => set_condition(&mut status, NAMES_ACCEPTED, "True", "NoConflicts", "no conflicts found"),
        Some((reason, message)) => set_condition(&mut status, NAMES_ACCEPTED, "False", reason, message),
    }
    // kube's naming controller sets Established False ("Installing") once the names are
    // accepted and the establishing controller then sets it True; both are applied here in one
    // write, so a CRD goes from no conditions to Established in one step.
    let established = condition(crd, ESTABLISHED).and_then(|c| c.get("status")).and_then(Value::as_str) == Some("True");
    if established {
        // Established stays once reached (renames later conflict without unserving).
    } else if accepted_ok {
        set_condition(&mut status, ESTABLISHED, "True", "InitialNamesAccepted", "the initial names have been accepted");
    } else {
        set_condition(&mut status, ESTABLISHED, "False", "NotAccepted", "not all names are accepted");
    }
    if let Some((state, reason, message)) = api_approval(crd) {
        set_condition(&mut status, API_APPROVAL, state, reason, &message);
    }
    let status = Value::Object(status);
    (crd.get("status") != Some(&status)).then_some(status)
}

fn set_name(names: &mut Map<String, Value>, field: &str, value: Option<&Value>) {
    match value.filter(|v| !v.is_null()) {
        Some(v) => {
            names.insert(field.into(), v.clone());
        }
        None => {
            names.remove(field);
        }
    }
}

/// kube's API approval condition for protected community groups (`k8s.io`, `kubernetes.io`
/// and their subdomains); None for other groups.
fn api_approval(crd: &Value) -> Option<(&'static str, &'static str, String)> {
    const ANNOTATION: &str = "api-approved.kubernetes.io";
    let group = str_at(crd, "/spec/group");
    let protected = group == "k8s.io" || group.ends_with(".k8s.io") || group == "kubernetes.io" || group.ends_with(".kubernetes.io");
    if !protected {
        return None;
    }
    let annotation = at(crd, "/metadata/annotations").and_then(|a| a.get(ANNOTATION)).and_then(Value::as_str).unwrap_or_default();
    let url_like = annotation
        .split_once("://")
        .is_some_and(|(scheme, rest)| !scheme.is_empty() && !rest.is_empty() && !rest.starts_with('/') && !annotation.contains(' '));
    Some(if annotation.is_empty() {
        (
            "False",
            "MissingAnnotation",
            format!("protected groups must have approval annotation {ANNOTATION:?}, see https://github.com/kubernetes/enhancements/pull/1111"),
        )
    } else if annotation.starts_with("unapproved") {
        ("False", "UnapprovedAnnotation", format!("not approved: {annotation:?}"))
    } else if url_like {
        ("True", "ApprovedAnnotation", format!("approved in {annotation}"))
    } else {
        (
            "False",
            "InvalidAnnotation",
            format!("protected groups must have approval annotation {ANNOTATION:?} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(name: &str, plural: &str, kind: &str, short: &[&str]) -> Value {
        json!({"metadata": {"name": format!("{plural}.example.com"), "uid": name},
               "spec": {"group": "example.com", "names": {"plural": plural, "singular": plural.trim_end_matches('s'), "kind": kind, "listKind": format!("{kind}List"), "shortNames": short}}})
    }

    fn granted(all: &[&Value]) -> GroupNames {
        names_by_group(all.iter().copied()).remove("example.com").unwrap_or_default()
    }

    fn accept(mut c: Value, others: &[Value]) -> Value {
        let all: Vec<&Value> = others.iter().chain(std::iter::once(&c)).collect();
        let status = desired_status(&c, &granted(&all)).expect("a change");
        c["status"] = status;
        c
    }

    #[test]
    fn fresh_names_are_accepted_and_established() {
        let c = accept(crd("a", "widgets", "Widget", &["wd"]), &[]);
        assert_eq!(c["status"]["acceptedNames"]["plural"], "widgets");
        assert_eq!(c["status"]["acceptedNames"]["shortNames"], json!(["wd"]));
        assert!(crate::crd::is_true(&c, NAMES_ACCEPTED) && crate::crd::is_true(&c, ESTABLISHED));
        assert!(desired_status(&c, &granted(&[&c])).is_none(), "converged");
    }

    #[test]
    fn conflicting_names_are_refused_with_kubes_reasons() {
        let first = accept(crd("a", "widgets", "Widget", &["wd"]), &[]);
        let second = accept(crd("b", "gadgets", "Widget", &["wd"]), std::slice::from_ref(&first));
        let cond = condition(&second, NAMES_ACCEPTED).unwrap();
        assert_eq!(cond["status"], "False");
        assert_eq!(cond["reason"], "ListKindConflict");
        assert_eq!(cond["message"], "\"WidgetList\" is already in use");
        assert_eq!(condition(&second, ESTABLISHED).unwrap()["reason"], "NotAccepted");
        assert_eq!(second["status"]["acceptedNames"]["plural"], "gadgets");
        assert!(second["status"]["acceptedNames"].get("shortNames").is_none());
    }

    #[test]
    fn protected_groups_need_approval() {
        let mut c = crd("a", "widgets", "Widget", &[]);
        c["spec"]["group"] = json!("x.k8s.io");
        let status = desired_status(&c, &GroupNames::default()).unwrap();
        let cond = status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == API_APPROVAL).unwrap().clone();
        assert_eq!((cond["status"].as_str(), cond["reason"].as_str()), (Some("False"), Some("MissingAnnotation")));
        c["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": "https://github.com/kubernetes/kubernetes/pull/78458"});
        let status = desired_status(&c, &GroupNames::default()).unwrap();
        let cond = status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == API_APPROVAL).unwrap().clone();
        assert_eq!(cond["message"], "approved in https://github.com/kubernetes/kubernetes/pull/78458");
    }
}
