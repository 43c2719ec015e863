//! Printers for configuration and policy kinds: service accounts, disruption budgets, network
//! policies, ingress classes, webhook configurations, admission policies and their bindings,
//! API services, runtime classes and CSI nodes (kube's `printers.go`, and kube-aggregator's
//! `apiservice` table convertor for APIService).

use serde_json::{json, Value};
use time::OffsetDateTime;

use super::{age, col, len_of, name, selector_string, str_at, ColumnDef, AGE, NAME};

pub(super) const SERVICE_ACCOUNT: &[ColumnDef] = &[
    NAME,
    col("Secrets", "string", "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret"),
    AGE,
];

pub(super) const POD_DISRUPTION_BUDGET: &[ColumnDef] = &[
    NAME,
    col(
        "Min Available",
        "string",
        "The minimum number of pods that must be available.",
    ),
    col(
        "Max Unavailable",
        "string",
        "The maximum number of pods that may be unavailable.",
    ),
    col(
        "Allowed Disruptions",
        "integer",
        "Calculated number of pods that may be disrupted at this time.",
    ),
    AGE,
];

/// kube describes the column with the extensions/v1beta1 field's documentation.
pub(super) const NETWORK_POLICY: &[ColumnDef] = &[
    NAME,
    col("Pod-Selector", "string", "Selects the pods to which this NetworkPolicy object applies. The array of ingress rules is applied to any pods selected by this field. Multiple network policies can select the same set of pods. In this case, the ingress rules for each are combined additively. This field is NOT optional and follows standard label selector semantics. An empty podSelector matches all pods in this namespace."),
    AGE,
];

pub(super) const INGRESS_CLASS: &[ColumnDef] = &[
    NAME,
    col(
        "Controller",
        "string",
        "Controller that is responsible for handling this class",
    ),
    col(
        "Parameters",
        "string",
        "A reference to a resource with additional parameters",
    ),
    AGE,
];

pub(super) const WEBHOOK_CONFIGURATION: &[ColumnDef] = &[
    NAME,
    col(
        "Webhooks",
        "integer",
        "Webhooks indicates the number of webhooks registered in this configuration",
    ),
    AGE,
];

pub(super) const VALIDATING_ADMISSION_POLICY: &[ColumnDef] = &[
    NAME,
    col(
        "Validations",
        "integer",
        "Validations indicates the number of validation rules defined in this configuration",
    ),
    col(
        "ParamKind",
        "string",
        "ParamKind specifies the kind of resources used to parameterize this policy",
    ),
    AGE,
];

pub(super) const MUTATING_ADMISSION_POLICY: &[ColumnDef] = &[
    NAME,
    col(
        "Mutations",
        "integer",
        "Mutation indicates the number of mutations rules defined in this configuration",
    ),
    col(
        "ParamKind",
        "string",
        "ParamKind specifies the kind of resources used to parameterize this policy",
    ),
    AGE,
];

pub(super) const ADMISSION_POLICY_BINDING: &[ColumnDef] = &[
    NAME,
    col(
        "PolicyName",
        "string",
        "PolicyName indicates the policy definition which the policy binding binded to",
    ),
    col(
        "ParamRef",
        "string",
        "ParamRef indicates the param resource which sets the configration param",
    ),
    AGE,
];

pub(super) const API_SERVICE: &[ColumnDef] = &[
    NAME,
    col(
        "Service",
        "string",
        "The reference to the service that hosts this API endpoint.",
    ),
    col("Available", "string", "Whether this service is available."),
    AGE,
];

/// kube documents Handler with a key ObjectMeta does not have: the description is empty.
pub(super) const RUNTIME_CLASS: &[ColumnDef] = &[NAME, col("Handler", "string", ""), AGE];

pub(super) const CSI_NODE: &[ColumnDef] = &[
    NAME,
    col(
        "Drivers",
        "integer",
        "Drivers indicates the number of CSI drivers registered on the node",
    ),
    AGE,
];

/// `printServiceAccount`: the number of listed secrets.
pub(super) fn service_account(sa: &Value, now: OffsetDateTime) -> Vec<Value> {
    vec![name(sa), json!(len_of(sa, "secrets")), age(sa, now)]
}

/// `intstr.IntOrString.String()`.
fn int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.as_i64().unwrap_or(0).to_string(),
    }
}

/// `printPodDisruptionBudget`: `N/A` for the bound that is not set.
pub(super) fn pod_disruption_budget(pdb: &Value, now: OffsetDateTime) -> Vec<Value> {
    let bound = |key: &str| match pdb
        .pointer(&format!("/spec/{key}"))
        .filter(|v| !v.is_null())
    {
        Some(v) => int_or_string(v),
        None => "N/A".to_string(),
    };
    let allowed = pdb
        .pointer("/status/disruptionsAllowed")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    vec![
        name(pdb),
        json!(bound("minAvailable")),
        json!(bound("maxUnavailable")),
        json!(allowed),
        age(pdb, now),
    ]
}

/// `metav1.FormatLabelSelector`: `<none>` for an empty selector.
fn format_label_selector(sel: Option<&Value>) -> String {
    let s = selector_string(sel);
    if s.is_empty() {
        "<none>".to_string()
    } else {
        s
    }
}

pub(super) fn network_policy(np: &Value, now: OffsetDateTime) -> Vec<Value> {
    vec![
        name(np),
        json!(format_label_selector(np.pointer("/spec/podSelector"))),
        age(np, now),
    ]
}

/// `printIngressClass`: parameters as `Kind[.apiGroup]/name`.
pub(super) fn ingress_class(ic: &Value, now: OffsetDateTime) -> Vec<Value> {
    let parameters = match ic.pointer("/spec/parameters").filter(|p| p.is_object()) {
        None => "<none>".to_string(),
        Some(p) => {
            let mut s = str_at(p, "/kind").to_string();
            if let Some(group) = p.get("apiGroup").and_then(Value::as_str) {
                s = format!("{s}.{group}");
            }
            format!("{s}/{}", str_at(p, "/name"))
        }
    };
    vec![
        name(ic),
        json!(str_at(ic, "/spec/controller")),
        json!(parameters),
        age(ic, now),
    ]
}

pub(super) fn webhook_configuration(c: &Value, now: OffsetDateTime) -> Vec<Value> {
    vec![name(c), json!(len_of(c, "webhooks")), age(c, now)]
}

/// `printValidatingAdmissionPolicy` / `printMutatingAdmissionPolicy`: rule count and
/// `apiVersion/kind` of the parameter kind, `<unset>` without one.
pub(super) fn admission_policy(p: &Value, rules: &str, now: OffsetDateTime) -> Vec<Value> {
    let count = p
        .pointer(&format!("/spec/{rules}"))
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let param_kind = match p.pointer("/spec/paramKind").filter(|k| k.is_object()) {
        Some(k) => format!("{}/{}", str_at(k, "/apiVersion"), str_at(k, "/kind")),
        None => "<unset>".to_string(),
    };
    vec![name(p), json!(count), json!(param_kind), age(p, now)]
}

/// `printValidatingAdmissionPolicyBinding`: the parameter as `namespace/name` (`*/name`
/// without a namespace), or the selector's Go `String()`.
pub(super) fn admission_policy_binding(b: &Value, now: OffsetDateTime) -> Vec<Value> {
    let param = match b.pointer("/spec/paramRef").filter(|p| p.is_object()) {
        None => "<unset>".to_string(),
        Some(pr) => {
            let (ns, n) = (str_at(pr, "/namespace"), str_at(pr, "/name"));
            match pr.get("selector").filter(|s| s.is_object()) {
                _ if !n.is_empty() && !ns.is_empty() => format!("{ns}/{n}"),
                _ if !n.is_empty() => format!("*/{n}"),
                Some(sel) => go_label_selector_string(sel),
                None => "<unset>".to_string(),
            }
        }
    };
    vec![
        name(b),
        json!(str_at(b, "/spec/policyName")),
        json!(param),
        age(b, now),
    ]
}

/// The generated protobuf `(*LabelSelector).String()` kube prints for a binding's selector.
fn go_label_selector_string(sel: &Value) -> String {
    let mut labels: Vec<(&String, &str)> = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k, v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    labels.sort();
    let labels: String = labels.iter().map(|(k, v)| format!("{k}: {v},")).collect();
    let exprs: String = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .map(|e| {
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            format!(
                "LabelSelectorRequirement{{Key:{},Operator:{},Values:[{}],}},",
                str_at(e, "/key"),
                str_at(e, "/operator"),
                values.join(" ")
            )
        })
        .collect();
    format!("&LabelSelector{{MatchLabels:map[string]string{{{labels}}},MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}")
}

/// kube-aggregator's APIService row: the backing service (`Local` for none) and the
/// `Available` condition (`Status (Reason)` when not true and a reason is given).
pub(super) fn api_service(svc: &Value, now: OffsetDateTime) -> Vec<Value> {
    let service = match svc.pointer("/spec/service").filter(|s| s.is_object()) {
        Some(s) => format!("{}/{}", str_at(s, "/namespace"), str_at(s, "/name")),
        None => "Local".to_string(),
    };
    let available = svc
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|conds| conds.iter().find(|c| str_at(c, "/type") == "Available"));
    let status = match available {
        None => "Unknown".to_string(),
        Some(c) => {
            let (status, reason) = (str_at(c, "/status"), str_at(c, "/reason"));
            if status != "True" && !reason.is_empty() {
                format!("{status} ({reason})")
            } else {
                status.to_string()
            }
        }
    };
    vec![name(svc), json!(service), json!(status), age(svc, now)]
}

pub(super) fn runtime_class(rc: &Value, now: OffsetDateTime) -> Vec<Value> {
    vec![name(rc), json!(str_at(rc, "/handler")), age(rc, now)]
}

pub(super) fn csi_node(n: &Value, now: OffsetDateTime) -> Vec<Value> {
    let drivers = n
        .pointer("/spec/drivers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    vec![name(n), json!(drivers), age(n, now)]
}
