//! Workload printers: deployments, replica sets, stateful sets, daemon sets, jobs, cron jobs,
//! replication controllers and pod templates.

use serde_json::{json, Value};
use time::OffsetDateTime;

use kapi_apimachinery::time::parse_rfc3339;

use super::{
    age, col, container_cells, duration_between, format_labels, int_at, name, selector_string, since, str_at, wide,
    ColumnDef, AGE, NAME,
};

const CONTAINERS: ColumnDef = wide("Containers", "string", "Names of each container in the template.");
const IMAGES: ColumnDef = wide("Images", "string", "Images referenced by each container in the template.");

pub(super) const DEPLOYMENT: &[ColumnDef] = &[
    NAME,
    col("Ready", "string", "Number of the pod with ready state"),
    col("Up-to-date", "string", "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
    col("Available", "string", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels."),
];

pub(super) const REPLICA_SET: &[ColumnDef] = &[
    NAME,
    col("Desired", "integer", "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller"),
    col("Current", "integer", "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller"),
    col("Ready", "integer", "The number of ready replicas for this replica set."),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", "Selector is a label query over pods that should match the replica count. Label keys and values that must match in order to be controlled by this replica set. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"),
];

pub(super) const REPLICATION_CONTROLLER: &[ColumnDef] = &[
    NAME,
    col("Desired", "integer", "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller"),
    col("Current", "integer", "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller"),
    col("Ready", "integer", "The number of ready replicas for this replication controller."),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template. Label keys and values that must match in order to be controlled by this replication controller, if empty defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"),
];

pub(super) const STATEFUL_SET: &[ColumnDef] =
    &[NAME, col("Ready", "string", "Number of the pod with ready state"), AGE, CONTAINERS, IMAGES];

pub(super) const DAEMON_SET: &[ColumnDef] = &[
    NAME,
    col("Desired", "integer", "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/"),
    col("Current", "integer", "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/"),
    col("Ready", "integer", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready."),
    col("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod"),
    col("Available", "integer", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)"),
    col("Node Selector", "string", "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/"),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", "A label query over pods that are managed by the daemon set. Must match in order to be controlled. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"),
];

const JOB_SELECTOR_DESC: &str = "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";

pub(super) const JOB: &[ColumnDef] = &[
    NAME,
    col("Status", "string", "Status of the job."),
    col("Completions", "string", "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs."),
    col("Duration", "string", "Time required to complete the job."),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", JOB_SELECTOR_DESC),
];

pub(super) const CRON_JOB: &[ColumnDef] = &[
    NAME,
    col("Schedule", "string", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
    col("Timezone", "string", "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones"),
    col("Suspend", "boolean", "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions. Defaults to false."),
    col("Active", "integer", "A list of pointers to currently running jobs."),
    col("Last Schedule", "string", "Information when was the last time the job was successfully scheduled."),
    AGE,
    CONTAINERS,
    IMAGES,
    wide("Selector", "string", JOB_SELECTOR_DESC),
];

pub(super) const POD_TEMPLATE: &[ColumnDef] = &[
    NAME,
    col("Containers", "string", "Names of each container in the template."),
    col("Images", "string", "Images referenced by each container in the template."),
    col("Pod Labels", "string", "The labels for the pod template."),
];

pub(super) fn deployment(obj: &Value, now: OffsetDateTime) -> Vec<Value> {
    let (containers, images) = container_cells(obj.pointer("/spec/template/spec"));
    vec![
        name(obj),
        json!(format!("{}/{}", int_at(obj, "/status/readyReplicas"), int_at(obj, "/spec/replicas"))),
        json!(int_at(obj, "/status/updatedReplicas")),
        json!(int_at(obj, "/status/availableReplicas")),
        age(obj, now),
        containers,
        images,
        json!(selector_string(obj.pointer("/spec/selector"))),
    ]
}

/// ReplicaSet and ReplicationController rows: the same columns, the selector printed as given.
fn replica_row(obj: &Value, now: OffsetDateTime, selector: String) -> Vec<Value> {
    let (containers, images) = container_cells(obj.pointer("/spec/template/spec"));
    vec![
        name(obj),
        json!(int_at(obj, "/spec/replicas")),
        json!(int_at(obj, "/status/replicas")),
        json!(int_at(obj, "/status/readyReplicas")),
        age(obj, now),
        containers,
        images,
        json!(selector),
    ]
}

pub(super) fn replica_set(obj: &Value, now: OffsetDateTime) -> Vec<Value> {
    replica_row(obj, now, selector_string(obj.pointer("/spec/selector")))
}

pub(super) fn replication_controller(obj: &Value, now: OffsetDateTime) -> Vec<Value> {
    replica_row(obj, now, format_labels(obj.pointer("/spec/selector")))
}

pub(super) fn stateful_set(obj: &Value, now: OffsetDateTime) -> Vec<Value> {
    let (containers, images) = container_cells(obj.pointer("/spec/template/spec"));
    vec![
        name(obj),
        json!(format!("{}/{}", int_at(obj, "/status/readyReplicas"), int_at(obj, "/spec/replicas"))),
        age(obj, now),
        containers,
        images,
    ]
}

pub(super) fn daemon_set(obj: &Value, now: OffsetDateTime) -> Vec<Value> {
    let (containers, images) = container_cells(obj.pointer("/spec/template/spec"));
    vec![
        name(obj),
        json!(int_at(obj, "/status/desiredNumberScheduled")),
        json!(int_at(obj, "/status/currentNumberScheduled")),
        json!(int_at(obj, "/status/numberReady")),
        json!(int_at(obj, "/status/updatedNumberScheduled")),
        json!(int_at(obj, "/status/numberAvailable")),
        json!(format_labels(obj.pointer("/spec/template/spec/nodeSelector"))),
        age(obj, now),
        containers,
        images,
        json!(selector_string(obj.pointer("/spec/selector"))),
    ]
}

fn has_true_condition(obj: &Value, kind: &str) -> bool {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| str_at(c, "/type") == kind && str_at(c, "/status") == "True"))
}

pub(super) fn job(obj: &Value, now: OffsetDateTime) -> Vec<Value> {
    let succeeded = int_at(obj, "/status/succeeded");
    let completions = match obj.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match int_at(obj, "/spec/parallelism") {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let time = |p: &str| obj.pointer(p).and_then(Value::as_str).and_then(parse_rfc3339);
    let duration = match (time("/status/startTime"), time("/status/completionTime")) {
        (None, _) => String::new(),
        (Some(start), None) => duration_between(start, now),
        (Some(start), Some(end)) => duration_between(start, end),
    };
    let deleting = obj.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null());
    let status = if has_true_condition(obj, "Complete") {
        "Complete"
    } else if has_true_condition(obj, "Failed") {
        "Failed"
    } else if deleting {
        "Terminating"
    } else if has_true_condition(obj, "Suspended") {
        "Suspended"
    } else if has_true_condition(obj, "FailureTarget") {
        "FailureTarget"
    } else if has_true_condition(obj, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let (containers, images) = container_cells(obj.pointer("/spec/template/spec"));
    vec![
        name(obj),
        json!(status),
        json!(completions),
        json!(duration),
        age(obj, now),
        containers,
        images,
        json!(selector_string(obj.pointer("/spec/selector"))),
    ]
}

pub(super) fn cron_job(obj: &Value, now: OffsetDateTime) -> Vec<Value> {
    let last = match obj.pointer("/status/lastScheduleTime").filter(|v| !v.is_null()) {
        Some(t) => since(Some(t), now),
        None => "<none>".to_string(),
    };
    let tz = obj.pointer("/spec/timeZone").and_then(Value::as_str).unwrap_or("<none>");
    let suspend = match obj.pointer("/spec/suspend").and_then(Value::as_bool) {
        Some(b) => b.to_string(),
        None => "<unset>".to_string(),
    };
    let active = obj.pointer("/status/active").and_then(Value::as_array).map_or(0, Vec::len);
    let (containers, images) = container_cells(obj.pointer("/spec/jobTemplate/spec/template/spec"));
    vec![
        name(obj),
        json!(str_at(obj, "/spec/schedule")),
        json!(tz),
        json!(suspend),
        json!(active),
        json!(last),
        age(obj, now),
        containers,
        images,
        json!(selector_string(obj.pointer("/spec/jobTemplate/spec/selector"))),
    ]
}

pub(super) fn pod_template(obj: &Value) -> Vec<Value> {
    let (containers, images) = container_cells(obj.pointer("/template/spec"));
    vec![name(obj), containers, images, json!(format_labels(obj.pointer("/template/metadata/labels")))]
}
