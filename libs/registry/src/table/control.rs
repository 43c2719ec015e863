//! Printers for autoscaling, certificates, quota, flow control and controller bookkeeping
//! kinds: horizontal pod autoscalers, certificate signing requests, cluster trust bundles,
//! controller revisions, resource quotas, flow schemas, priority levels and component statuses
//! (kube's `printers.go`).

use std::cmp::Ordering;
use std::time::Duration;

use kapi_apimachinery::time::human_duration;
use serde_json::{json, Value};
use time::OffsetDateTime;

use super::{age, array_at, col, name, str_at, ColumnDef, AGE, NAME};

/// kube describes these columns with the autoscaling/v2beta1 fields' documentation.
pub(super) const HORIZONTAL_POD_AUTOSCALER: &[ColumnDef] = &[
    NAME,
    col("Reference", "string", "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count."),
    col("Targets", "string", "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond."),
    col("MinPods", "string", "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available."),
    col("MaxPods", "string", "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas."),
    col("Replicas", "string", "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler."),
    AGE,
];

/// kube describes these columns with the certificates/v1beta1 fields' documentation (the
/// Requestor column with the request's, although it prints the requesting user).
pub(super) const CERTIFICATE_SIGNING_REQUEST: &[ColumnDef] = &[
    NAME,
    AGE,
    col("SignerName", "string", "Requested signer for the request. It is a qualified name in the form: `scope-hostname.io/name`. If empty, it will be defaulted:\n 1. If it's a kubelet client certificate, it is assigned\n    \"kubernetes.io/kube-apiserver-client-kubelet\".\n 2. If it's a kubelet serving certificate, it is assigned\n    \"kubernetes.io/kubelet-serving\".\n 3. Otherwise, it is assigned \"kubernetes.io/legacy-unknown\".\nDistribution of trust for signers happens out of band. You can select on this field using `spec.signerName`."),
    col("Requestor", "string", "Base64-encoded PKCS#10 CSR data"),
    col("RequestedDuration", "string", "expirationSeconds is the requested duration of validity of the issued certificate. The certificate signer may issue a certificate with a different validity duration so a client must check the delta between the notBefore and and notAfter fields in the issued certificate to determine the actual duration.\n\nThe v1.22+ in-tree implementations of the well-known Kubernetes signers will honor this field as long as the requested duration is not greater than the maximum duration they will honor per the --cluster-signing-duration CLI flag to the Kubernetes controller manager.\n\nCertificate signers may not honor this field for various reasons:\n\n  1. Old signer that is unaware of the field (such as the in-tree\n     implementations prior to v1.22)\n  2. Signer whose configured maximum is shorter than the requested duration\n  3. Signer whose configured minimum is longer than the requested duration\n\nThe minimum valid value for expirationSeconds is 600, i.e. 10 minutes."),
    col("Condition", "string", "Conditions applied to the request, such as approval or denial."),
];

/// kube prints no age for trust bundles.
pub(super) const CLUSTER_TRUST_BUNDLE: &[ColumnDef] =
    &[NAME, col("SignerName", "string", "signerName indicates the associated signer, if any.\n\nIn order to create or update a ClusterTrustBundle that sets signerName, you must have the following cluster-scoped permission: group=certificates.k8s.io resource=signers resourceName=<the signer name> verb=attest.\n\nIf signerName is not empty, then the ClusterTrustBundle object must be named with the signer name as a prefix (translating slashes to colons). For example, for the signer name `example.com/foo`, valid ClusterTrustBundle object names include `example.com:foo:abc` and `example.com:foo:v1`.\n\nIf signerName is empty, then the ClusterTrustBundle object's name must not have such a prefix.\n\nList/watch requests for ClusterTrustBundles can filter on this field using a `spec.signerName=NAME` field selector.")];

pub(super) const CONTROLLER_REVISION: &[ColumnDef] = &[
    NAME,
    col("Controller", "string", "Controller of the object"),
    col("Revision", "string", "revision indicates the revision of the state represented by Data."),
    AGE,
];

pub(super) const RESOURCE_QUOTA: &[ColumnDef] = &[
    NAME,
    col("Request", "string", "Request represents a minimum amount of cpu/memory that a container may consume."),
    col("Limit", "string", "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."),
    AGE,
];

pub(super) const FLOW_SCHEMA: &[ColumnDef] = &[
    NAME,
    col("PriorityLevel", "string", "`name` is the name of the priority level configuration being referenced Required."),
    col("MatchingPrecedence", "string", "`matchingPrecedence` is used to choose among the FlowSchemas that match a given request. The chosen FlowSchema is among those with the numerically lowest (which we take to be logically highest) MatchingPrecedence.  Each MatchingPrecedence value must be ranged in [1,10000]. Note that if the precedence is not specified, it will be set to 1000 as default."),
    col("DistinguisherMethod", "string", "`distinguisherMethod` defines how to compute the flow distinguisher for requests that match this schema. `nil` specifies that the distinguisher is disabled and thus will always be the empty string."),
    AGE,
    col("MissingPL", "string", "references a broken or non-existent PriorityLevelConfiguration"),
];

pub(super) const PRIORITY_LEVEL_CONFIGURATION: &[ColumnDef] = &[
    NAME,
    col("Type", "string", "`type` indicates whether this priority level is subject to limitation on request execution.  A value of `\"Exempt\"` means that requests of this priority level are not subject to a limit (and thus are never queued) and do not detract from the capacity made available to other priority levels.  A value of `\"Limited\"` means that (a) requests of this priority level _are_ subject to limits and (b) some of the server's limited capacity is made available exclusively to this priority level. Required."),
    col("NominalConcurrencyShares", "string", "`nominalConcurrencyShares` (NCS) contributes to the computation of the NominalConcurrencyLimit (NominalCL) of this level. This is the number of execution seats available at this priority level. This is used both for requests dispatched from this priority level as well as requests dispatched from other priority levels borrowing seats from this level. The server's concurrency limit (ServerCL) is divided among the Limited priority levels in proportion to their NCS values:\n\nNominalCL(i)  = ceil( ServerCL * NCS(i) / sum_ncs ) sum_ncs = sum[priority level k] NCS(k)\n\nBigger numbers mean a larger nominal concurrency limit, at the expense of every other priority level.\n\nIf not specified, this field defaults to a value of 30.\n\nSetting this field to zero supports the construction of a \"jail\" for this priority level that is used to hold some request(s)"),
    col("Queues", "string", "`queues` is the number of queues for this priority level. The queues exist independently at each apiserver. The value must be positive.  Setting it to 1 effectively precludes shufflesharding and thus makes the distinguisher method of associated flow schemas irrelevant.  This field has a default value of 64."),
    col("HandSize", "string", "`handSize` is a small positive number that configures the shuffle sharding of requests into queues.  When enqueuing a request at this priority level the request's flow identifier (a string pair) is hashed and the hash value is used to shuffle the list of queues and deal a hand of the size specified here.  The request is put into one of the shortest queues in that hand. `handSize` must be no larger than `queues`, and should be significantly smaller (so that a few heavy flows do not saturate most of the queues).  See the user-facing documentation for more extensive guidance on setting this field.  This field has a default value of 8."),
    col("QueueLengthLimit", "string", "`queueLengthLimit` is the maximum number of requests allowed to be waiting in a given queue of this priority level at a time; excess requests are rejected.  This value must be positive.  If not specified, it will be defaulted to 50."),
    AGE,
];

/// kube prints no age for component statuses.
pub(super) const COMPONENT_STATUS: &[ColumnDef] = &[
    NAME,
    col("Status", "string", "Status of the component conditions"),
    col("Message", "string", "Message of the component conditions"),
    col("Error", "string", "Error of the component conditions"),
];

/// A quantity as Go's `(*Quantity).String()` prints it: `<nil>` when absent.
fn quantity(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "<nil>".to_string(),
    }
}

/// How many metrics the Targets column lists before "+ N more...".
const METRICS_SHOWN: usize = 2;

/// `formatHPAMetrics`: `current/target` per metric (statuses matched by index), the first two.
fn hpa_targets(hpa: &Value) -> String {
    let specs = array_at(hpa, "/spec/metrics");
    if specs.is_empty() {
        return "<none>".to_string();
    }
    let statuses = array_at(hpa, "/status/currentMetrics");
    let mut list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let status = statuses.get(i);
            let source = |key: &str| status.and_then(|s| s.get(key)).filter(|s| s.is_object());
            // Go prints a present status's missing quantity as `<nil>`, a missing status as unknown.
            let current = |key: &str, field: &str| {
                source(key).map_or_else(|| "<unknown>".to_string(), |s| quantity(s.pointer(&format!("/current/{field}"))))
            };
            let current_if_set = |key: &str, field: &str| {
                source(key)
                    .and_then(|s| s.pointer(&format!("/current/{field}")))
                    .filter(|v| !v.is_null())
                    .map_or_else(|| "<unknown>".to_string(), |v| quantity(Some(v)))
            };
            let key = match str_at(spec, "/type") {
                "External" => "external",
                "Object" => "object",
                "Pods" => "pods",
                "Resource" => "resource",
                "ContainerResource" => "containerResource",
                _ => return "<unknown type>".to_string(),
            };
            let target = spec.get(key).and_then(|m| m.get("target")).unwrap_or(&Value::Null);
            let average = target.get("averageValue").filter(|v| !v.is_null());
            let resource = spec.get(key).map_or("", |m| str_at(m, "/name"));
            match (key, average) {
                ("pods", _) => format!("{}/{}", current(key, "averageValue"), quantity(average)),
                ("external" | "object", Some(avg)) => {
                    format!("{}/{} (avg)", current_if_set(key, "averageValue"), quantity(Some(avg)))
                }
                ("external" | "object", None) => format!("{}/{}", current(key, "value"), quantity(target.get("value"))),
                (_, Some(avg)) => format!("{resource}: {}/{}", current(key, "averageValue"), quantity(Some(avg))),
                (_, None) => {
                    let percent = |v: Option<&Value>| v.and_then(Value::as_i64).map(|p| format!("{p}%"));
                    let now = percent(source(key).and_then(|s| s.pointer("/current/averageUtilization")))
                        .unwrap_or_else(|| "<unknown>".to_string());
                    let want = percent(target.get("averageUtilization")).unwrap_or_else(|| "<auto>".to_string());
                    format!("{resource}: {now}/{want}")
                }
            }
        })
        .collect();
    let count = list.len();
    if count > METRICS_SHOWN {
        list.truncate(METRICS_SHOWN);
        return format!("{} + {} more...", list.join(", "), count - METRICS_SHOWN);
    }
    list.join(", ")
}

/// An autoscaling/v1 object in the v2 shape kube's printer reads (its CPU target and current
/// utilization become one Resource metric).
fn hpa_as_v2(hpa: &Value) -> std::borrow::Cow<'_, Value> {
    let Some(target) = hpa.pointer("/spec/targetCPUUtilizationPercentage").filter(|t| !t.is_null()) else {
        return std::borrow::Cow::Borrowed(hpa);
    };
    let mut v2 = hpa.clone();
    v2["spec"]["metrics"] = json!([{"type": "Resource", "resource": {"name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": target}}}]);
    if let Some(current) = hpa.pointer("/status/currentCPUUtilizationPercentage").filter(|c| !c.is_null()) {
        v2["status"]["currentMetrics"] =
            json!([{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": current}}}]);
    }
    std::borrow::Cow::Owned(v2)
}

/// `printHorizontalPodAutoscaler`: `Kind/name` of the target, the metrics, `<unset>` minimum.
pub(super) fn horizontal_pod_autoscaler(hpa: &Value, now: OffsetDateTime) -> Vec<Value> {
    let hpa = hpa_as_v2(hpa);
    let reference = format!("{}/{}", str_at(&hpa, "/spec/scaleTargetRef/kind"), str_at(&hpa, "/spec/scaleTargetRef/name"));
    let min = hpa.pointer("/spec/minReplicas").and_then(Value::as_i64).map_or_else(|| "<unset>".to_string(), |m| m.to_string());
    vec![
        name(&hpa),
        json!(reference),
        json!(hpa_targets(&hpa)),
        json!(min),
        json!(hpa.pointer("/spec/maxReplicas").and_then(Value::as_i64).unwrap_or(0)),
        json!(hpa.pointer("/status/currentReplicas").and_then(Value::as_i64).unwrap_or(0)),
        age(&hpa, now),
    ]
}

/// `extractCSRStatus`: Denied over Approved over Pending, then `,Failed` and `,Issued`.
fn csr_condition(csr: &Value) -> String {
    let conditions = array_at(csr, "/status/conditions");
    let has = |t: &str| conditions.iter().any(|c| str_at(c, "/type") == t);
    let mut status = if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_string();
    if has("Failed") {
        status.push_str(",Failed");
    }
    if !str_at(csr, "/status/certificate").is_empty() {
        status.push_str(",Issued");
    }
    status
}

pub(super) fn certificate_signing_request(csr: &Value, now: OffsetDateTime) -> Vec<Value> {
    let signer = match str_at(csr, "/spec/signerName") {
        "" => "<none>",
        s => s,
    };
    let duration = match csr.pointer("/spec/expirationSeconds").and_then(Value::as_u64) {
        Some(secs) => human_duration(Duration::from_secs(secs)),
        None => "<none>".to_string(),
    };
    vec![
        name(csr),
        age(csr, now),
        json!(signer),
        json!(str_at(csr, "/spec/username")),
        json!(duration),
        json!(csr_condition(csr)),
    ]
}

pub(super) fn cluster_trust_bundle(ctb: &Value) -> Vec<Value> {
    let signer = match str_at(ctb, "/spec/signerName") {
        "" => "<none>",
        s => s,
    };
    vec![name(ctb), json!(signer)]
}

/// `printControllerRevision`: the controlling owner as `kind[.group]/name`, lower-cased.
pub(super) fn controller_revision(cr: &Value, now: OffsetDateTime) -> Vec<Value> {
    let owner = array_at(cr, "/metadata/ownerReferences")
        .iter()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true));
    let controller = match owner {
        None => "<none>".to_string(),
        Some(o) => {
            let group = str_at(o, "/apiVersion").rsplit_once('/').map_or("", |(g, _)| g);
            let kind = str_at(o, "/kind");
            let owner_name = str_at(o, "/name");
            match (kind, group) {
                ("", "") => owner_name.to_string(),
                (kind, "") => format!("{}/{owner_name}", kind.to_lowercase()),
                (kind, group) => format!("{}/{owner_name}", format!("{kind}.{group}").to_lowercase()),
            }
        }
    };
    vec![name(cr), json!(controller), json!(cr.get("revision").and_then(Value::as_i64).unwrap_or(0)), age(cr, now)]
}

/// `printResourceQuota`: `resource: used/hard` for every hard limit in name order, `limits.*`
/// resources in the Limit column and the others in Request.
pub(super) fn resource_quota(rq: &Value, now: OffsetDateTime) -> Vec<Value> {
    let (mut requests, mut limits) = (Vec::new(), Vec::new());
    if let Some(hard) = rq.pointer("/status/hard").and_then(Value::as_object) {
        let mut resources: Vec<&String> = hard.keys().collect();
        resources.sort();
        for resource in resources {
            let used = rq.pointer("/status/used").and_then(|u| u.get(resource.as_str()));
            let entry =
                format!("{resource}: {}/{}", used.map_or_else(|| "0".to_string(), |u| quantity(Some(u))), quantity(hard.get(resource.as_str())));
            let pieces: Vec<&str> = resource.split('.').collect();
            if pieces.len() > 1 && pieces[0] == "limits" {
                limits.push(entry);
            } else {
                requests.push(entry);
            }
        }
    }
    vec![name(rq), json!(requests.join(", ")), json!(limits.join(", ")), age(rq, now)]
}

/// `printFlowSchema`: the Dangling condition's status as MissingPL, `?` without one.
pub(super) fn flow_schema(fs: &Value, now: OffsetDateTime) -> Vec<Value> {
    let method = fs.pointer("/spec/distinguisherMethod/type").and_then(Value::as_str).unwrap_or("<none>");
    let dangling = array_at(fs, "/status/conditions")
        .iter()
        .find(|c| str_at(c, "/type") == "Dangling")
        .map_or("?", |c| str_at(c, "/status"));
    vec![
        name(fs),
        json!(str_at(fs, "/spec/priorityLevelConfiguration/name")),
        json!(matching_precedence(fs)),
        json!(method),
        age(fs, now),
        json!(dangling),
    ]
}

fn matching_precedence(fs: &Value) -> i64 {
    fs.pointer("/spec/matchingPrecedence").and_then(Value::as_i64).unwrap_or(0)
}

/// `printFlowSchemaList`'s order (`FlowSchemaSequence`): lower matching precedence first (the
/// order in which kube matches requests), then by name.
pub(super) fn flow_schema_order(a: &Value, b: &Value) -> Ordering {
    matching_precedence(a).cmp(&matching_precedence(b)).then_with(|| str_at(a, "/metadata/name").cmp(str_at(b, "/metadata/name")))
}

/// `printPriorityLevelConfiguration`: numbers for a limited level (queuing ones only when it
/// queues), `<none>` otherwise.
pub(super) fn priority_level_configuration(pl: &Value, now: OffsetDateTime) -> Vec<Value> {
    let none = || json!("<none>");
    let limited = pl.pointer("/spec/limited").filter(|l| l.is_object());
    let number = |v: Option<&Value>| json!(v.and_then(Value::as_i64).unwrap_or(0));
    let shares = limited.map_or_else(none, |l| number(l.get("nominalConcurrencyShares")));
    let queuing = limited.and_then(|l| l.pointer("/limitResponse/queuing")).filter(|q| q.is_object());
    let queue = |key: &str| queuing.map_or_else(none, |q| number(q.get(key)));
    vec![
        name(pl),
        json!(str_at(pl, "/spec/type")),
        shares,
        queue("queues"),
        queue("handSize"),
        queue("queueLengthLimit"),
        age(pl, now),
    ]
}

/// `printComponentStatus`: the Healthy condition as Healthy/Unhealthy with its message and error.
pub(super) fn component_status(cs: &Value) -> Vec<Value> {
    let healthy = array_at(cs, "/conditions").iter().find(|c| str_at(c, "/type") == "Healthy");
    let (status, message, error) = match healthy {
        None => ("Unknown", "", ""),
        Some(c) => (
            if str_at(c, "/status") == "True" { "Healthy" } else { "Unhealthy" },
            str_at(c, "/message"),
            str_at(c, "/error"),
        ),
    };
    vec![name(cs), json!(status), json!(message), json!(error)]
}
