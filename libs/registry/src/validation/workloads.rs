//! Controller validation: selectors against template labels, restart policies, counts, the
//! Job's generated selector and the CronJob schedule.

use kapi_apimachinery::labels::LabelSelector;
use kapi_apimachinery::Cause;
use serde_json::{Map, Value};

use super::pod::validate_template;
use super::{immutable, non_negative, positive, str_at};

const ALWAYS: &[&str] = &["Always"];
const JOB_RESTART: &[&str] = &["OnFailure", "Never"];

/// The apps/v1 controllers' shared checks: selector required and non-empty, template labels
/// matched by it, template valid with restartPolicy Always, replicas not negative.
fn validate_controller(obj: &Value, what: &str, with_replicas: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let selector = spec.get("selector").filter(|s| !s.is_null());
    let template = spec.get("template");
    match selector {
        None => {
            causes.push(Cause::required("spec.selector", ""));
            // kube's nil selector matches nothing, so the template check fails too.
            causes.push(selector_mismatch(template, "spec.template"));
        }
        Some(sel) => match LabelSelector::from_json(sel) {
            Err(e) => causes.push(Cause::invalid("spec.selector", sel, &e)),
            Ok(parsed) => {
                if parsed.is_empty() {
                    causes.push(Cause::invalid("spec.selector", sel, &format!("empty selector is invalid for {what}")));
                } else if !parsed.matches(template_labels(template)) {
                    causes.push(selector_mismatch(template, "spec.template"));
                }
            }
        },
    }
    causes.extend(validate_template(template, "spec.template", Some(ALWAYS)));
    if with_replicas {
        causes.extend(non_negative(obj, "/spec/replicas", "spec.replicas"));
    }
    causes.extend(non_negative(obj, "/spec/minReadySeconds", "spec.minReadySeconds"));
    causes.extend(non_negative(obj, "/spec/revisionHistoryLimit", "spec.revisionHistoryLimit"));
    causes
}

fn template_labels(template: Option<&Value>) -> Option<&Map<String, Value>> {
    template.and_then(|t| t.pointer("/metadata/labels")).and_then(Value::as_object)
}

fn selector_mismatch(template: Option<&Value>, path: &str) -> Cause {
    let labels = template.and_then(|t| t.pointer("/metadata/labels")).cloned().unwrap_or(Value::Null);
    Cause::invalid(&format!("{path}.metadata.labels"), &labels, "`selector` does not match template `labels`")
}

pub(super) fn validate_deployment(obj: &Value) -> Vec<Cause> {
    let mut causes = validate_controller(obj, "deployment", true);
    let strategy = obj.pointer("/spec/strategy").unwrap_or(&Value::Null);
    let rolling = strategy.get("rollingUpdate").filter(|r| !r.is_null());
    match (str_at(strategy, "/type"), rolling) {
        ("Recreate", Some(_)) => causes.push(Cause::forbidden(
            "spec.strategy.rollingUpdate",
            "may not be specified when strategy `type` is 'Recreate'",
        )),
        ("RollingUpdate", Some(ru)) => {
            let unavailable = ru.get("maxUnavailable").unwrap_or(&Value::Null);
            let surge = ru.get("maxSurge").unwrap_or(&Value::Null);
            let base = "spec.strategy.rollingUpdate";
            causes.extend(int_or_percent(unavailable, &format!("{base}.maxUnavailable")));
            causes.extend(int_or_percent(surge, &format!("{base}.maxSurge")));
            if is_zero(unavailable) && is_zero(surge) {
                causes.push(Cause::invalid(
                    &format!("{base}.maxUnavailable"),
                    unavailable,
                    "may not be 0 when `maxSurge` is 0",
                ));
            }
            if percent(unavailable).is_some_and(|p| p > 100) {
                causes.push(Cause::invalid(
                    &format!("{base}.maxUnavailable"),
                    unavailable,
                    "must not be greater than 100%",
                ));
            }
        }
        _ => {}
    }
    let min_ready = obj.pointer("/spec/minReadySeconds").and_then(Value::as_i64).unwrap_or(0);
    if let Some(deadline) = obj.pointer("/spec/progressDeadlineSeconds").filter(|v| !v.is_null()) {
        causes.extend(non_negative(obj, "/spec/progressDeadlineSeconds", "spec.progressDeadlineSeconds"));
        if deadline.as_i64().is_some_and(|d| d <= min_ready) {
            causes.push(Cause::invalid(
                "spec.progressDeadlineSeconds",
                deadline,
                "must be greater than minReadySeconds",
            ));
        }
    }
    causes
}

pub(super) fn percent(v: &Value) -> Option<i64> {
    v.as_str()?.strip_suffix('%')?.parse().ok()
}

fn is_zero(v: &Value) -> bool {
    v.as_i64() == Some(0) || percent(v) == Some(0)
}

pub(super) fn int_or_percent(v: &Value, field: &str) -> Vec<Cause> {
    match v {
        Value::Null => Vec::new(),
        Value::Number(n) if n.as_i64().is_some_and(|n| n < 0) => {
            vec![Cause::invalid(field, v, "must be greater than or equal to 0")]
        }
        Value::Number(_) => Vec::new(),
        Value::String(s) => match percent(v) {
            Some(p) if p < 0 => vec![Cause::invalid(field, v, "must be greater than or equal to 0")],
            Some(_) => Vec::new(),
            None => vec![Cause::invalid(field, &Value::from(s.as_str()), "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")],
        },
        _ => vec![Cause::invalid(field, v, "must be an integer or percentage (e.g '5%')")],
    }
}

pub(super) fn validate_replica_set(obj: &Value) -> Vec<Cause> {
    validate_controller(obj, "deployment", true)
}

pub(super) fn validate_stateful_set(obj: &Value) -> Vec<Cause> {
    // As kube does, the template is validated as if each volumeClaimTemplate were a volume of
    // the pod, so containers may mount the claims by name.
    let claims: Vec<Value> = obj
        .pointer("/spec/volumeClaimTemplates")
        .and_then(Value::as_array)
        .map(|vcts| {
            vcts.iter()
                .filter_map(|vct| vct.pointer("/metadata/name").and_then(Value::as_str))
                .map(|name| serde_json::json!({"name": name, "persistentVolumeClaim": {"claimName": name}}))
                .collect()
        })
        .unwrap_or_default();
    let with_claims;
    let obj = if claims.is_empty() {
        obj
    } else {
        let mut copy = obj.clone();
        if let Some(spec) = copy.pointer_mut("/spec/template/spec").and_then(Value::as_object_mut) {
            let volumes = spec.entry("volumes").or_insert_with(|| Value::Array(Vec::new()));
            if let Some(list) = volumes.as_array_mut() {
                list.extend(claims);
            }
        }
        with_claims = copy;
        &with_claims
    };
    let mut causes = validate_controller(obj, "statefulset", true);
    let strategy = obj.pointer("/spec/updateStrategy").unwrap_or(&Value::Null);
    if str_at(strategy, "/type") == "OnDelete" && strategy.get("rollingUpdate").is_some_and(|r| !r.is_null()) {
        causes.push(Cause::invalid(
            "spec.updateStrategy.rollingUpdate",
            strategy.get("rollingUpdate").unwrap_or(&Value::Null),
            "only allowed for updateStrategy 'RollingUpdate'",
        ));
    }
    causes.extend(non_negative(
        obj,
        "/spec/updateStrategy/rollingUpdate/partition",
        "spec.updateStrategy.rollingUpdate.partition",
    ));
    causes
}

pub(super) fn validate_daemon_set(obj: &Value) -> Vec<Cause> {
    validate_controller(obj, "daemonset", false)
}

pub(super) fn validate_replication_controller(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let selector = spec.get("selector").and_then(Value::as_object);
    let template = spec.get("template");
    match selector.filter(|s| !s.is_empty()) {
        None => causes.push(Cause::required("spec.selector", "")),
        Some(sel) => {
            let labels = template_labels(template);
            let matches = sel.iter().all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
            if !matches {
                causes.push(selector_mismatch(template, "spec.template"));
            }
        }
    }
    causes.extend(validate_template(template, "spec.template", Some(ALWAYS)));
    causes.extend(non_negative(obj, "/spec/replicas", "spec.replicas"));
    causes.extend(non_negative(obj, "/spec/minReadySeconds", "spec.minReadySeconds"));
    causes
}

/// Shared by Job and the CronJob's job template (`prefix` is the path to the JobSpec).
fn validate_job_spec(spec: &Value, prefix: &str, check_selector: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    for key in [
        "parallelism",
        "completions",
        "backoffLimit",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
        "ttlSecondsAfterFinished",
    ] {
        causes.extend(non_negative(spec, &format!("/{key}"), &format!("{prefix}.{key}")));
    }
    causes.extend(positive(spec, "/activeDeadlineSeconds", &format!("{prefix}.activeDeadlineSeconds")));
    if str_at(spec, "/completionMode") == "Indexed" && spec.get("completions").is_none_or(Value::is_null) {
        causes.push(Cause::required(&format!("{prefix}.completions"), "when completion mode is Indexed"));
    }
    let template = spec.get("template");
    if check_selector {
        match spec.get("selector").filter(|s| !s.is_null()) {
            None => causes.push(Cause::required(&format!("{prefix}.selector"), "")),
            Some(sel) => match LabelSelector::from_json(sel) {
                Err(e) => causes.push(Cause::invalid(&format!("{prefix}.selector"), sel, &e)),
                Ok(parsed) => {
                    if !parsed.is_empty() && !parsed.matches(template_labels(template)) {
                        causes.push(selector_mismatch(template, &format!("{prefix}.template")));
                    }
                }
            },
        }
    }
    causes.extend(validate_template(template, &format!("{prefix}.template"), Some(JOB_RESTART)));
    causes
}

pub(super) fn validate_job(obj: &Value) -> Vec<Cause> {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let mut causes = validate_job_spec(spec, "spec", true);
    if spec.get("manualSelector").and_then(Value::as_bool) != Some(true) {
        causes.extend(validate_generated_selector(obj));
    }
    causes
}

/// With a generated selector, the Job's pods must carry its uid and name, and the selector
/// must select on the uid.
fn validate_generated_selector(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let uid = str_at(obj, "/metadata/uid");
    let name = str_at(obj, "/metadata/name");
    if uid.is_empty() {
        causes.push(Cause::required("metadata.uid", ""));
    }
    let labels = obj.pointer("/spec/template/metadata/labels").and_then(Value::as_object);
    for (keys, want) in [(crate::defaults::JOB_UID_LABELS, uid), (crate::defaults::JOB_NAME_LABELS, name)] {
        for key in keys {
            if let Some(v) = labels.and_then(|l| l.get(key)) {
                if v.as_str() != Some(want) {
                    causes.push(Cause::invalid(
                        &format!("spec.template.metadata.labels[{key}]"),
                        v,
                        &format!("must be '{want}'"),
                    ));
                }
            }
        }
    }
    if let Some(sel) = obj.pointer("/spec/selector").filter(|s| !s.is_null()) {
        let mut expected = Map::new();
        expected.insert(crate::defaults::JOB_UID_LABELS[1].to_string(), Value::from(uid));
        let matches = LabelSelector::from_json(sel).map(|s| s.matches(Some(&expected))).unwrap_or(false);
        if !matches {
            causes.push(Cause::invalid("spec.selector", sel, "`selector` not auto-generated"));
        }
    }
    causes
}

pub(super) fn validate_cron_job(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = str_at(obj, "/metadata/name");
    if name.len() > 52 {
        causes.push(Cause::invalid("metadata.name", &Value::from(name), "must be no more than 52 characters"));
    }
    let schedule = str_at(obj, "/spec/schedule");
    if schedule.is_empty() {
        causes.push(Cause::required("spec.schedule", ""));
    } else if schedule.contains("TZ") {
        causes.push(Cause::invalid(
            "spec.schedule",
            &Value::from(schedule),
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        ));
    } else if let Err(e) = parse_cron(schedule) {
        causes.push(Cause::invalid("spec.schedule", &Value::from(schedule), &e));
    }
    if let Some(tz) = obj.pointer("/spec/timeZone").and_then(Value::as_str) {
        if tz.is_empty() || tz.contains(' ') || tz.starts_with('/') || tz.contains("..") {
            causes.push(Cause::invalid("spec.timeZone", &Value::from(tz), "unknown time zone"));
        }
    }
    causes.extend(non_negative(obj, "/spec/startingDeadlineSeconds", "spec.startingDeadlineSeconds"));
    causes.extend(non_negative(obj, "/spec/successfulJobsHistoryLimit", "spec.successfulJobsHistoryLimit"));
    causes.extend(non_negative(obj, "/spec/failedJobsHistoryLimit", "spec.failedJobsHistoryLimit"));
    let job_spec = obj.pointer("/spec/jobTemplate/spec").unwrap_or(&Value::Null);
    causes.extend(validate_job_spec(job_spec, "spec.jobTemplate.spec", false));
    causes
}

/// The standard five-field cron syntax plus `@` descriptors, with robfig/cron's messages.
fn parse_cron(schedule: &str) -> Result<(), String> {
    if let Some(descriptor) = schedule.strip_prefix('@') {
        return match descriptor {
            "yearly" | "annually" | "monthly" | "weekly" | "daily" | "midnight" | "hourly" => Ok(()),
            d if d.starts_with("every ") => Ok(()),
            _ => Err(format!("unrecognized descriptor: {schedule}")),
        };
    }
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!("expected exactly 5 fields, found {}: [{}]", fields.len(), fields.join(" ")));
    }
    const MONTHS: &[&str] = &["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
    const DAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
    let bounds: [(i64, i64, &[&str], i64); 5] =
        [(0, 59, &[], 0), (0, 23, &[], 0), (1, 31, &[], 0), (1, 12, MONTHS, 1), (0, 6, DAYS, 0)];
    for (field, (min, max, names, name_base)) in fields.iter().zip(bounds) {
        for part in field.split(',') {
            parse_cron_part(part, min, max, names, name_base)?;
        }
    }
    Ok(())
}

fn parse_cron_part(expr: &str, min: i64, max: i64, names: &[&str], name_base: i64) -> Result<(), String> {
    let (range, step) = match expr.split_once('/') {
        Some((r, s)) => (r, Some(s)),
        None => (expr, None),
    };
    let value = |s: &str| -> Result<i64, String> {
        if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
            return Ok(i as i64 + name_base);
        }
        s.parse::<i64>()
            .map_err(|_| format!("failed to parse int from {s}: strconv.Atoi: parsing \"{s}\": invalid syntax"))
    };
    let (start, end) = if range == "*" || range == "?" {
        (min, max)
    } else if let Some((a, b)) = range.split_once('-') {
        (value(a)?, value(b)?)
    } else {
        let v = value(range)?;
        (v, v)
    };
    if let Some(step) = step {
        let s = step.parse::<i64>().map_err(|_| {
            format!("failed to parse int from {step}: strconv.Atoi: parsing \"{step}\": invalid syntax")
        })?;
        if s <= 0 {
            return Err(format!("step of range should be a positive number: {expr}"));
        }
    }
    if start < min {
        return Err(format!("beginning of range ({start}) below minimum ({min}): {expr}"));
    }
    if end > max {
        return Err(format!("end of range ({end}) above maximum ({max}): {expr}"));
    }
    if start > end {
        return Err(format!("beginning of range ({start}) beyond end of range ({end}): {expr}"));
    }
    Ok(())
}

const STS_MUTABLE: &[&str] =
    &["replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy", "minReadySeconds"];

pub(super) fn validate_stateful_set_update(new: &Value, old: &Value) -> Vec<Cause> {
    let strip = |v: &Value| {
        let mut spec = v.get("spec").cloned().unwrap_or(Value::Null);
        if let Some(map) = spec.as_object_mut() {
            for key in STS_MUTABLE {
                map.remove(*key);
            }
        }
        spec
    };
    if strip(new) != strip(old) {
        vec![Cause::forbidden(
            "spec",
            "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden",
        )]
    } else {
        Vec::new()
    }
}

/// Pod template fields a suspended Job may still change (scheduling directives).
const JOB_TEMPLATE_MUTABLE_WHEN_SUSPENDED: &[&str] = &["nodeSelector", "tolerations", "affinity", "schedulingGates"];

pub(super) fn validate_job_update(new: &Value, old: &Value) -> Vec<Cause> {
    let mut causes = immutable(new, old, "/spec/selector", "spec.selector");
    causes.extend(immutable(new, old, "/spec/completionMode", "spec.completionMode"));
    causes.extend(immutable(new, old, "/spec/podFailurePolicy", "spec.podFailurePolicy"));
    let indexed = str_at(new, "/spec/completionMode") == "Indexed";
    // Elastic indexed Jobs may scale completions together with parallelism.
    let elastic = indexed && new.pointer("/spec/completions") == new.pointer("/spec/parallelism");
    if !elastic {
        causes.extend(immutable(new, old, "/spec/completions", "spec.completions"));
    }
    let suspended = old.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);
    let template = |v: &Value| {
        let mut t = v.pointer("/spec/template").cloned().unwrap_or(Value::Null);
        if suspended {
            if let Some(meta) = t.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("labels");
                meta.remove("annotations");
            }
            if let Some(spec) = t.get_mut("spec").and_then(Value::as_object_mut) {
                for key in JOB_TEMPLATE_MUTABLE_WHEN_SUSPENDED {
                    spec.remove(*key);
                }
            }
        }
        t
    };
    if template(new) != template(old) {
        causes.push(Cause::invalid(
            "spec.template",
            new.pointer("/spec/template").unwrap_or(&Value::Null),
            "field is immutable",
        ));
    }
    causes
}
