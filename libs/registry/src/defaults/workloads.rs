//! Workload defaults (apps/v1, batch/v1, core/v1 ReplicationController) and the Job selector
//! kube generates on create.

use serde_json::{json, Value};

use super::pod::{default_pvc_spec_at, default_template_at};
use super::{for_each_item, get_mut, object_at_mut, set_default};

pub(super) fn default_deployment(obj: &mut Value) {
    set_default(obj, &["spec", "replicas"], json!(1));
    set_default(obj, &["spec", "strategy", "type"], json!("RollingUpdate"));
    if obj.pointer("/spec/strategy/type").and_then(Value::as_str) == Some("RollingUpdate") {
        set_default(obj, &["spec", "strategy", "rollingUpdate", "maxUnavailable"], json!("25%"));
        set_default(obj, &["spec", "strategy", "rollingUpdate", "maxSurge"], json!("25%"));
    }
    set_default(obj, &["spec", "revisionHistoryLimit"], json!(10));
    set_default(obj, &["spec", "progressDeadlineSeconds"], json!(600));
    default_template_at(obj, &["spec", "template"]);
}

pub(super) fn default_replica_set(obj: &mut Value) {
    set_default(obj, &["spec", "replicas"], json!(1));
    default_template_at(obj, &["spec", "template"]);
}

pub(super) fn default_replication_controller(obj: &mut Value) {
    // core/v1 still derives the selector and the object's labels from the template.
    let template_labels =
        obj.pointer("/spec/template/metadata/labels").and_then(Value::as_object).filter(|m| !m.is_empty()).cloned();
    if let Some(labels) = template_labels {
        let empty = |v: Option<&Value>| v.and_then(Value::as_object).is_none_or(|m| m.is_empty());
        if empty(obj.pointer("/spec/selector")) {
            if let Some(spec) = object_at_mut(obj, &["spec"]) {
                spec.insert("selector".into(), Value::Object(labels.clone()));
            }
        }
        if empty(obj.pointer("/metadata/labels")) {
            if let Some(meta) = object_at_mut(obj, &["metadata"]) {
                meta.insert("labels".into(), Value::Object(labels));
            }
        }
    }
    set_default(obj, &["spec", "replicas"], json!(1));
    default_template_at(obj, &["spec", "template"]);
}

pub(super) fn default_stateful_set(obj: &mut Value) {
    set_default(obj, &["spec", "podManagementPolicy"], json!("OrderedReady"));
    if obj.pointer("/spec/updateStrategy/type").and_then(Value::as_str).is_none_or(str::is_empty) {
        set_default(obj, &["spec", "updateStrategy", "type"], json!("RollingUpdate"));
        set_default(obj, &["spec", "updateStrategy", "rollingUpdate"], json!({}));
    }
    let rolling = obj.pointer("/spec/updateStrategy/type").and_then(Value::as_str) == Some("RollingUpdate");
    if rolling && obj.pointer("/spec/updateStrategy/rollingUpdate").is_some_and(Value::is_object) {
        set_default(obj, &["spec", "updateStrategy", "rollingUpdate", "partition"], json!(0));
    }
    set_default(obj, &["spec", "persistentVolumeClaimRetentionPolicy", "whenDeleted"], json!("Retain"));
    set_default(obj, &["spec", "persistentVolumeClaimRetentionPolicy", "whenScaled"], json!("Retain"));
    set_default(obj, &["spec", "replicas"], json!(1));
    set_default(obj, &["spec", "revisionHistoryLimit"], json!(10));
    default_template_at(obj, &["spec", "template"]);
    for_each_item(obj, &["spec", "volumeClaimTemplates"], |pvc| {
        default_pvc_spec_at(pvc, &["spec"]);
        // kube defaults the template's status on every decode, so it reads back as Pending.
        set_default(pvc, &["status", "phase"], json!("Pending"));
    });
}

pub(super) fn default_daemon_set(obj: &mut Value) {
    set_default(obj, &["spec", "updateStrategy", "type"], json!("RollingUpdate"));
    if obj.pointer("/spec/updateStrategy/type").and_then(Value::as_str) == Some("RollingUpdate") {
        set_default(obj, &["spec", "updateStrategy", "rollingUpdate", "maxUnavailable"], json!(1));
        set_default(obj, &["spec", "updateStrategy", "rollingUpdate", "maxSurge"], json!(0));
    }
    set_default(obj, &["spec", "revisionHistoryLimit"], json!(10));
    default_template_at(obj, &["spec", "template"]);
}

pub(super) fn default_job(obj: &mut Value) {
    let unset = |obj: &Value, p: &str| obj.pointer(p).is_none_or(Value::is_null);
    if unset(obj, "/spec/completions") && unset(obj, "/spec/parallelism") {
        set_default(obj, &["spec", "completions"], json!(1));
    }
    set_default(obj, &["spec", "parallelism"], json!(1));
    let backoff = if unset(obj, "/spec/backoffLimitPerIndex") { json!(6) } else { json!(i32::MAX) };
    set_default(obj, &["spec", "backoffLimit"], backoff);
    copy_template_labels_if_unlabelled(obj);
    set_default(obj, &["spec", "completionMode"], json!("NonIndexed"));
    set_default(obj, &["spec", "suspend"], json!(false));
    let has_failure_policy = !unset(obj, "/spec/podFailurePolicy");
    if let Some(policy) = get_mut(obj, &["spec", "podFailurePolicy"]) {
        for_each_item(policy, &["rules"], |rule| {
            for_each_item(rule, &["onPodConditions"], |pattern| set_default(pattern, &["status"], json!("True")));
        });
    }
    let replacement = if has_failure_policy { "Failed" } else { "TerminatingOrFailed" };
    set_default(obj, &["spec", "podReplacementPolicy"], json!(replacement));
    default_template_at(obj, &["spec", "template"]);
}

pub(super) fn default_cron_job(obj: &mut Value) {
    set_default(obj, &["spec", "concurrencyPolicy"], json!("Allow"));
    set_default(obj, &["spec", "suspend"], json!(false));
    set_default(obj, &["spec", "successfulJobsHistoryLimit"], json!(3));
    set_default(obj, &["spec", "failedJobsHistoryLimit"], json!(1));
    default_template_at(obj, &["spec", "jobTemplate", "spec", "template"]);
}

/// batch/v1 gives an unlabelled Job its template's labels.
fn copy_template_labels_if_unlabelled(obj: &mut Value) {
    let Some(labels) = obj.pointer("/spec/template/metadata/labels").and_then(Value::as_object).cloned() else {
        return;
    };
    if obj.pointer("/metadata/labels").and_then(Value::as_object).is_none_or(|m| m.is_empty()) {
        if let Some(meta) = object_at_mut(obj, &["metadata"]) {
            meta.insert("labels".into(), Value::Object(labels));
        }
    }
}

/// Label keys kube puts on a Job's pods: the legacy ones and the `batch.kubernetes.io/` ones.
pub const JOB_UID_LABELS: [&str; 2] = ["controller-uid", "batch.kubernetes.io/controller-uid"];
/// Label keys carrying the Job's name on its pods.
pub const JOB_NAME_LABELS: [&str; 2] = ["job-name", "batch.kubernetes.io/job-name"];

/// kube's Job `generateSelector` (unless `spec.manualSelector` is true): pod labels with the
/// Job's uid and name, and a selector on `batch.kubernetes.io/controller-uid`. Needs
/// `metadata.uid`, which the caller sets before `prepare_for_create`. Labels the user already
/// set are kept, and validation reports a mismatch.
pub(super) fn generate_job_selector(obj: &mut Value) {
    if obj.pointer("/spec/manualSelector").and_then(Value::as_bool) != Some(true) {
        let uid = obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("").to_string();
        let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
        if let Some(labels) = object_at_mut(obj, &["spec", "template", "metadata", "labels"]) {
            for key in JOB_UID_LABELS {
                labels.entry(key).or_insert_with(|| json!(uid));
            }
            for key in JOB_NAME_LABELS {
                labels.entry(key).or_insert_with(|| json!(name));
            }
        }
        if let Some(match_labels) = object_at_mut(obj, &["spec", "selector", "matchLabels"]) {
            match_labels.entry(JOB_UID_LABELS[1]).or_insert_with(|| json!(uid));
        }
    }
    // kube defaults labels from the template again when it decodes the stored Job, so an
    // unlabelled Job reads back with the generated labels.
    copy_template_labels_if_unlabelled(obj);
}
