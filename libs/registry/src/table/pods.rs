//! kube's `printPod`: the READY count, the STATUS reason logic and RESTARTS with the time of
//! the last restart.

use serde_json::{json, Value};
use time::OffsetDateTime;

use kapi_apimachinery::time::parse_rfc3339;

use super::{age, col, duration_between, name, str_at, wide, ColumnDef, AGE, NAME};

pub(super) const COLUMNS: &[ColumnDef] = &[
    NAME,
    col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
    col("Status", "string", "The aggregate status of the containers in this pod."),
    col("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
    AGE,
    wide("IP", "string", "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."),
    wide("Node", "string", "NodeName is a request to schedule this pod onto a specific node. If it is non-empty, the scheduler simply schedules this pod onto that node, assuming that it fits resource requirements."),
    wide("Nominated Node", "string", "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled."),
    wide("Readiness Gates", "string", "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates"),
];

fn list<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer).and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

fn time_at(v: &Value, pointer: &str) -> Option<OffsetDateTime> {
    v.pointer(pointer).and_then(Value::as_str).and_then(parse_rfc3339)
}

/// When the container last terminated before its current run, if ever.
fn last_termination(status: &Value) -> Option<OffsetDateTime> {
    time_at(status, "/lastState/terminated/finishedAt")
}

fn later(a: Option<OffsetDateTime>, b: Option<OffsetDateTime>) -> Option<OffsetDateTime> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn has_true_condition(pod: &Value, kind: &str) -> bool {
    list(pod, "/status/conditions").iter().any(|c| str_at(c, "/type") == kind && str_at(c, "/status") == "True")
}

/// A terminated state's reason, or `Signal:N` / `ExitCode:N` when it has none.
fn terminated_reason(t: &Value, prefix: &str) -> String {
    let reason = str_at(t, "/reason");
    if !reason.is_empty() {
        return format!("{prefix}{reason}");
    }
    let signal = t.get("signal").and_then(Value::as_i64).unwrap_or(0);
    if signal != 0 {
        format!("{prefix}Signal:{signal}")
    } else {
        format!("{prefix}ExitCode:{}", t.get("exitCode").and_then(Value::as_i64).unwrap_or(0))
    }
}

pub(super) fn cells(pod: &Value, now: OffsetDateTime) -> Vec<Value> {
    let init_specs = list(pod, "/spec/initContainers");
    let is_sidecar = |container_name: &str| {
        init_specs.iter().any(|c| str_at(c, "/name") == container_name && str_at(c, "/restartPolicy") == "Always")
    };
    let mut total = list(pod, "/spec/containers").len();
    total += init_specs.iter().filter(|c| str_at(c, "/restartPolicy") == "Always").count();

    let phase = str_at(pod, "/status/phase");
    let mut reason = match str_at(pod, "/status/reason") {
        "" => phase.to_string(),
        r => r.to_string(),
    };
    if list(pod, "/status/conditions")
        .iter()
        .any(|c| str_at(c, "/type") == "PodScheduled" && str_at(c, "/reason") == "SchedulingGated")
    {
        reason = "SchedulingGated".to_string();
    }

    let mut restarts: i64 = 0;
    let mut sidecar_restarts: i64 = 0;
    let mut last_restart: Option<OffsetDateTime> = None;
    let mut last_sidecar_restart: Option<OffsetDateTime> = None;
    let mut ready = 0;
    let mut initializing = false;
    let init_statuses = list(pod, "/status/initContainerStatuses");
    for (i, c) in init_statuses.iter().enumerate() {
        let count = c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
        restarts += count;
        last_restart = later(last_restart, last_termination(c));
        let sidecar = is_sidecar(str_at(c, "/name"));
        if sidecar {
            sidecar_restarts += count;
            last_sidecar_restart = later(last_sidecar_restart, last_termination(c));
        }
        let terminated = c.pointer("/state/terminated").filter(|t| t.is_object());
        let waiting_reason = str_at(c, "/state/waiting/reason");
        if terminated.is_some_and(|t| t.get("exitCode").and_then(Value::as_i64).unwrap_or(0) == 0) {
            continue;
        }
        if sidecar && c.get("started").and_then(Value::as_bool) == Some(true) {
            if c.get("ready").and_then(Value::as_bool) == Some(true) {
                ready += 1;
            }
            continue;
        }
        reason = if let Some(t) = terminated {
            terminated_reason(t, "Init:")
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{i}/{}", init_specs.len())
        };
        initializing = true;
        break;
    }

    if !initializing || has_true_condition(pod, "Initialized") {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        for c in list(pod, "/status/containerStatuses").iter().rev() {
            restarts += c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
            last_restart = later(last_restart, last_termination(c));
            let waiting_reason = str_at(c, "/state/waiting/reason");
            let terminated = c.pointer("/state/terminated").filter(|t| t.is_object());
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                reason = terminated_reason(t, "");
            } else if c.get("ready").and_then(Value::as_bool) == Some(true)
                && c.pointer("/state/running").is_some_and(Value::is_object)
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if has_true_condition(pod, "Ready") { "Running" } else { "NotReady" }.to_string();
        }
    }

    let deleting = pod.pointer("/metadata/deletionTimestamp").is_some_and(|d| !d.is_null());
    if deleting && str_at(pod, "/status/reason") == "NodeLost" {
        reason = "Unknown".to_string();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".to_string();
    }

    let restarts_cell = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", duration_between(t, now)),
        _ => restarts.to_string(),
    };

    let or_none = |s: &str| if s.is_empty() { "<none>".to_string() } else { s.to_string() };
    let ip = match list(pod, "/status/podIPs").first() {
        Some(p) => str_at(p, "/ip"),
        None => str_at(pod, "/status/podIP"),
    };
    let gates = list(pod, "/spec/readinessGates");
    let gates_cell = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conditions = list(pod, "/status/conditions");
        let satisfied = gates
            .iter()
            .filter(|g| {
                let wanted = str_at(g, "/conditionType");
                conditions.iter().find(|c| str_at(c, "/type") == wanted).is_some_and(|c| str_at(c, "/status") == "True")
            })
            .count();
        format!("{satisfied}/{}", gates.len())
    };
    vec![
        name(pod),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts_cell),
        age(pod, now),
        json!(or_none(ip)),
        json!(or_none(str_at(pod, "/spec/nodeName"))),
        json!(or_none(str_at(pod, "/status/nominatedNodeName"))),
        json!(gates_cell),
    ]
}
