//! kube-apiserver's `priority-and-fairness-config-producer` post-start hook (its
//! `bootstrapConfigurationEnsurer`): kube's suggested, then mandatory, PriorityLevelConfigurations
//! and FlowSchemas are created when missing; then the same pass runs again every minute and
//! whenever a configuration object changes, so a deleted mandatory object comes back at once.
//!
//! As kube's ensurer decides: a mandatory object's spec is always put back (validation refuses
//! changes to it, so this repairs deletions and older releases' objects; the `exempt` level's
//! `spec.exempt` is the administrator's and stays); a suggested one's
//! only while `apf.kubernetes.io/autoupdate-spec` is true (or, when the annotation is missing
//! or not a boolean, while the object is at generation 1, i.e. never changed by a user). The
//! annotation is then set to what was decided. Last, as kube's ensurer does, objects that are
//! annotated for auto-update (`true`) but are not part of the mandatory or suggested
//! configuration are deleted: the server wrote them (an older release's configuration), so it
//! takes them back; an object without the annotation, or with it `false` (or not a boolean),
//! is the user's and stays.
//!
//! Safe from several replicas at once: every step is a conditional create, an update of a
//! fresh read, or a delete conditional on the resourceVersion read, so a user's change made
//! meanwhile (say, the annotation set to `false`) is never overwritten nor deleted; the next
//! pass looks again.

use std::borrow::Cow;
use std::time::Duration;

use kapi_apimachinery::ApiError;
use kapi_flowcontrol::bootstrap::{self, AUTO_UPDATE};
use kapi_flowcontrol::{FlowSchema, PriorityLevel};
use kapi_registry::catalog::{self, ResourceSpec};
use kapi_registry::rest::{DeleteOptions, ListParams, RestStore, WriteHooks};
use kapi_registry::strategy::{CatalogStrategy, WriteTarget};
use serde_json::Value;

use super::FlowControl;

const GROUP: &str = "flowcontrol.apiserver.k8s.io";
/// kube's field manager for these writes.
const MANAGER: &str = "api-priority-and-fairness-config-producer-v1";
/// How often kube's ensurer runs again.
const PERIOD: Duration = Duration::from_secs(60);

/// Go's `strconv.ParseBool`, which kube applies to the annotation.
fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

fn annotation(obj: &Value) -> Option<bool> {
    obj.pointer("/metadata/annotations").and_then(|a| a.get(AUTO_UPDATE)).and_then(Value::as_str).and_then(parse_bool)
}

/// Whether the stored object's spec means the bootstrap one, read with kube's defaults (kube
/// compares the bootstrap spec defaulted with the stored one). The `exempt` level's
/// `spec.exempt` (its shares and lendable percent) is the administrator's, as kube's
/// `plcSpecEqualish` has it, and validation lets them change nothing else of it: the stored
/// values stand in for the bootstrap ones, unless there are none.
fn same_spec(resource: &str, current: &Value, expected: &Value) -> bool {
    if resource == "flowschemas" {
        return FlowSchema::from_object(current).is_some_and(|x| FlowSchema::from_object(expected).is_some_and(|y| x == y));
    }
    let mut expected = Cow::Borrowed(expected);
    if expected.pointer("/metadata/name").and_then(Value::as_str) == Some("exempt") {
        match current.pointer("/spec/exempt").filter(|e| !e.is_null()) {
            Some(exempt) => expected.to_mut()["spec"]["exempt"] = exempt.clone(),
            None => return false,
        }
    }
    PriorityLevel::from_object(current).is_some_and(|x| PriorityLevel::from_object(&expected).is_some_and(|y| x == y))
}

/// kube's `ReviseIfNeeded`: the object to write, or None when `current` is as it should be.
fn revise(resource: &str, current: &Value, expected: &Value, mandatory: bool) -> Option<Value> {
    let annotated = annotation(current);
    let generation = current.pointer("/metadata/generation").and_then(Value::as_i64);
    let auto_update = mandatory || annotated.unwrap_or(generation == Some(1));
    let update_annotation = annotated != Some(auto_update);
    let spec_changed = auto_update && !same_spec(resource, current, expected);
    if !update_annotation && !spec_changed {
        return None;
    }
    let mut new = current.clone();
    if spec_changed {
        new["spec"] = expected["spec"].clone();
    }
    if update_annotation {
        let meta = &mut new["metadata"];
        if !meta.get("annotations").is_some_and(Value::is_object) {
            meta["annotations"] = Value::Object(Default::default());
        }
        meta["annotations"][AUTO_UPDATE] = Value::String(auto_update.to_string());
    }
    Some(new)
}

fn spec(resource: &str) -> Result<&'static ResourceSpec, ApiError> {
    catalog::find(GROUP, "v1", resource).ok_or_else(|| ApiError::internal(format!("{resource} missing from the catalog")))
}

async fn ensure(rest: &RestStore, resource: &str, expected: &Value, mandatory: bool) -> Result<(), ApiError> {
    let spec = spec(resource)?;
    let strategy = CatalogStrategy(spec);
    let name = expected.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let track = crate::field_manager::tracker(spec, crate::field_manager::writer(spec, MANAGER.into(), ""));
    let hooks = WriteHooks::tracking(track.as_deref());
    for _ in 0..10 {
        let current = match rest.get(&strategy, None, name).await {
            Ok(current) => current,
            Err(e) if e.code == 404 => match rest.create(&strategy, None, expected.clone(), false, hooks).await {
                // Another replica created it first: revise theirs.
                Err(e) if e.code == 409 => continue,
                other => return other.map(drop),
            },
            Err(e) => return Err(e),
        };
        if revise(resource, &current, expected, mandatory).is_none() {
            return Ok(());
        }
        let result = rest
            .update_with(&strategy, None, name, WriteTarget::Main, false, hooks, |stored| {
                Ok(revise(resource, stored, expected, mandatory).unwrap_or_else(|| stored.clone()))
            })
            .await;
        match result {
            // Deleted, or changed by another writer meanwhile: look again.
            Err(e) if e.code == 404 || e.code == 409 => continue,
            other => return other.map(drop),
        }
    }
    Err(ApiError::internal(format!("{resource} {name:?} kept changing while it was ensured")))
}

/// kube's `RemoveUnwantedObjects` test: an object the server would delete, given the names of
/// the configuration it keeps.
fn unwanted(obj: &Value, wanted: &[&str]) -> bool {
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    !wanted.contains(&name) && annotation(obj) == Some(true)
}

/// Deletes the stored objects of `resource` that [`unwanted`] picks, each only while it is
/// still the version read.
async fn remove_unwanted(rest: &RestStore, resource: &str, keep: &[Value]) -> Result<(), ApiError> {
    let spec = spec(resource)?;
    let strategy = CatalogStrategy(spec);
    let wanted: Vec<&str> = keep.iter().filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str)).collect();
    let stored = rest.list(&strategy, None, &ListParams::default()).await?;
    for obj in stored.items.iter().filter(|o| unwanted(o, &wanted)) {
        let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let version = obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).map(str::to_owned);
        let opts = DeleteOptions { precondition_resource_version: version, ..DeleteOptions::default() };
        match rest.delete(&strategy, None, name, &opts).await {
            Ok(_) => tracing::info!("deleted the {resource} {name:?}: annotated for auto-update, no longer part of the configuration"),
            // Gone already, or changed since it was read (perhaps opted out): the next pass
            // decides on what is stored then.
            Err(e) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One pass: the suggested configuration, then the mandatory one, then the removal of what is
/// neither (kube's order).
pub async fn ensure_all(rest: &RestStore) -> Result<(), ApiError> {
    let passes = [
        ("prioritylevelconfigurations", bootstrap::suggested_levels(), false),
        ("flowschemas", bootstrap::suggested_schemas(), false),
        ("prioritylevelconfigurations", bootstrap::mandatory_levels(), true),
        ("flowschemas", bootstrap::mandatory_schemas(), true),
    ];
    for (resource, objects, mandatory) in &passes {
        for expected in objects {
            ensure(rest, resource, expected, *mandatory).await?;
        }
    }
    remove_unwanted(rest, "flowschemas", &[bootstrap::mandatory_schemas(), bootstrap::suggested_schemas()].concat()).await?;
    remove_unwanted(rest, "prioritylevelconfigurations", &[bootstrap::mandatory_levels(), bootstrap::suggested_levels()].concat()).await
}

/// After the hook's first pass: runs again every [`PERIOD`] and on every configuration change,
/// until the process ends.
pub async fn keep(rest: RestStore, fc: std::sync::Arc<FlowControl>) {
    let changed = fc.changed();
    loop {
        tokio::select! {
            () = changed.notified() => {}
            () = tokio::time::sleep(PERIOD) => {}
        }
        if let Err(e) = ensure_all(&rest).await {
            tracing::warn!("ensuring the priority-and-fairness configuration failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use kapi_flowcontrol::bootstrap::{self, AUTO_UPDATE};
    use serde_json::json;

    use super::{revise, unwanted};

    fn named<'a>(objects: &'a [serde_json::Value], name: &str) -> &'a serde_json::Value {
        objects.iter().find(|o| o["metadata"]["name"] == name).unwrap()
    }

    #[test]
    fn mandatory_specs_always_come_back() {
        let levels = bootstrap::mandatory_levels();
        let expected = named(&levels, "catch-all");
        let mut current = expected.clone();
        current["metadata"]["annotations"][AUTO_UPDATE] = json!("false");
        current["spec"]["limited"]["nominalConcurrencyShares"] = json!(50);
        let new = revise("prioritylevelconfigurations", &current, expected, true).unwrap();
        assert_eq!(new["spec"], expected["spec"]);
        assert_eq!(new["metadata"]["annotations"][AUTO_UPDATE], "true");
        assert!(revise("prioritylevelconfigurations", &new, expected, true).is_none(), "a revised object is stable");
    }

    #[test]
    fn suggested_specs_follow_the_annotation_then_the_generation() {
        let schemas = bootstrap::suggested_schemas();
        let expected = named(&schemas, "global-default");
        let mut current = expected.clone();
        current["spec"]["matchingPrecedence"] = json!(5);
        current["metadata"]["generation"] = json!(2);
        let new = revise("flowschemas", &current, expected, false).unwrap();
        assert_eq!(new["spec"]["matchingPrecedence"], 9900, "annotated true: restored");

        current["metadata"]["annotations"][AUTO_UPDATE] = json!("False");
        assert!(revise("flowschemas", &current, expected, false).is_none(), "opted out: left alone");

        current["metadata"]["annotations"] = json!({});
        let new = revise("flowschemas", &current, expected, false).unwrap();
        assert_eq!(new["spec"]["matchingPrecedence"], 5, "changed by a user (generation 2): kept");
        assert_eq!(new["metadata"]["annotations"][AUTO_UPDATE], "false", "and marked so");

        current["metadata"]["generation"] = json!(1);
        let new = revise("flowschemas", &current, expected, false).unwrap();
        assert_eq!(new["spec"]["matchingPrecedence"], 9900, "never changed: kept up to date");
    }

    #[test]
    fn specs_that_differ_only_by_defaults_are_not_changes() {
        let levels = bootstrap::mandatory_levels();
        let expected = named(&levels, "catch-all");
        let mut stored = expected.clone();
        stored["spec"]["limited"].as_object_mut().unwrap().remove("lendablePercent");
        assert_ne!(stored, *expected);
        assert!(revise("prioritylevelconfigurations", &stored, expected, true).is_none());
        let expected = named(&levels, "exempt");
        let mut stored = expected.clone();
        stored["spec"]["exempt"] = json!({});
        assert!(revise("prioritylevelconfigurations", &stored, expected, true).is_none());
        // The administrator's shares and lendable percent of the exempt level stay.
        stored["spec"]["exempt"] = json!({"nominalConcurrencyShares": 40, "lendablePercent": 25});
        assert!(revise("prioritylevelconfigurations", &stored, expected, true).is_none());
        // Without them, the fixed spec is written back whole, as kube does.
        stored["spec"].as_object_mut().unwrap().remove("exempt");
        assert_eq!(revise("prioritylevelconfigurations", &stored, expected, true).unwrap()["spec"], expected["spec"]);
    }

    #[test]
    fn only_objects_annotated_true_outside_the_configuration_are_unwanted() {
        let wanted = ["exempt", "global-default"];
        let obj = |name: &str, annotation: Option<&str>| match annotation {
            Some(a) => json!({"metadata": {"name": name, "annotations": {AUTO_UPDATE: a}}}),
            None => json!({"metadata": {"name": name}}),
        };
        assert!(unwanted(&obj("old-default", Some("true")), &wanted));
        // Go's ParseBool spellings count.
        assert!(unwanted(&obj("old-default", Some("T")), &wanted));
        assert!(!unwanted(&obj("global-default", Some("true")), &wanted), "part of the configuration");
        assert!(!unwanted(&obj("mine", Some("false")), &wanted), "opted out");
        assert!(!unwanted(&obj("mine", None), &wanted), "never annotated: a user's");
        assert!(!unwanted(&obj("mine", Some("yes")), &wanted), "not a boolean: kube leaves it for a human");
    }
}
