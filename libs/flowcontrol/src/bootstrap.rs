//! kube's bootstrap configuration (`k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap`): the
//! mandatory objects (`exempt` and `catch-all`, always restored) and the suggested ones that a
//! fresh cluster starts with, as the `flowcontrol.apiserver.k8s.io/v1` objects the server
//! writes. Each carries `apf.kubernetes.io/autoupdate-spec: "true"`, so the server keeps its
//! spec while the annotation stays.

use serde_json::{json, Value};

/// The annotation that lets the server keep an object's spec up to date.
pub const AUTO_UPDATE: &str = "apf.kubernetes.io/autoupdate-spec";

const API_VERSION: &str = "flowcontrol.apiserver.k8s.io/v1";

fn meta(name: &str) -> Value {
    json!({"name": name, "annotations": {AUTO_UPDATE: "true"}})
}

fn level(name: &str, spec: Value) -> Value {
    json!({"apiVersion": API_VERSION, "kind": "PriorityLevelConfiguration", "metadata": meta(name), "spec": spec})
}

fn limited(shares: u32, lendable: u32, queuing: Option<(u32, u32, u32)>) -> Value {
    let response = match queuing {
        Some((queues, hand_size, queue_length_limit)) => {
            json!({"type": "Queue", "queuing": {"queues": queues, "handSize": hand_size, "queueLengthLimit": queue_length_limit}})
        }
        None => json!({"type": "Reject"}),
    };
    json!({"type": "Limited", "limited": {"nominalConcurrencyShares": shares, "lendablePercent": lendable, "limitResponse": response}})
}

fn schema(name: &str, level: &str, precedence: u32, distinguisher: Option<&str>, subjects: Vec<Value>, resource_rules: Vec<Value>, non_resource_rules: Vec<Value>) -> Value {
    let mut rule = json!({"subjects": subjects});
    if !resource_rules.is_empty() {
        rule["resourceRules"] = Value::Array(resource_rules);
    }
    if !non_resource_rules.is_empty() {
        rule["nonResourceRules"] = Value::Array(non_resource_rules);
    }
    let mut spec = json!({"priorityLevelConfiguration": {"name": level}, "matchingPrecedence": precedence});
    if let Some(method) = distinguisher {
        spec["distinguisherMethod"] = json!({"type": method});
    }
    spec["rules"] = json!([rule]);
    json!({"apiVersion": API_VERSION, "kind": "FlowSchema", "metadata": meta(name), "spec": spec})
}

fn groups(names: &[&str]) -> Vec<Value> {
    names.iter().map(|n| json!({"kind": "Group", "group": {"name": n}})).collect()
}

fn users(names: &[&str]) -> Vec<Value> {
    names.iter().map(|n| json!({"kind": "User", "user": {"name": n}})).collect()
}

fn kube_system_service_accounts() -> Value {
    json!({"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": "*"}})
}

fn resource_rule(verbs: &[&str], groups: &[&str], resources: &[&str], cluster_scope: bool) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources, "clusterScope": cluster_scope, "namespaces": ["*"]})
}

fn everything() -> (Vec<Value>, Vec<Value>) {
    (vec![resource_rule(&["*"], &["*"], &["*"], true)], vec![json!({"verbs": ["*"], "nonResourceURLs": ["*"]})])
}

/// The mandatory priority levels: `catch-all` and `exempt`.
pub fn mandatory_levels() -> Vec<Value> {
    vec![
        level("catch-all", limited(5, 0, None)),
        level("exempt", json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}})),
    ]
}

/// The mandatory FlowSchemas: `exempt` (system:masters) and `catch-all`.
pub fn mandatory_schemas() -> Vec<Value> {
    let (all, all_urls) = everything();
    vec![
        schema("exempt", "exempt", 1, None, groups(&["system:masters"]), all.clone(), all_urls.clone()),
        schema("catch-all", "catch-all", 10000, Some("ByUser"), groups(&["system:unauthenticated", "system:authenticated"]), all, all_urls),
    ]
}

/// The suggested priority levels.
pub fn suggested_levels() -> Vec<Value> {
    vec![
        level("system", limited(30, 33, Some((64, 6, 50)))),
        level("node-high", limited(40, 25, Some((64, 6, 50)))),
        level("leader-election", limited(10, 0, Some((16, 4, 50)))),
        level("workload-high", limited(40, 50, Some((128, 6, 50)))),
        level("workload-low", limited(100, 90, Some((128, 6, 50)))),
        level("global-default", limited(20, 50, Some((128, 6, 50)))),
    ]
}

/// The suggested FlowSchemas.
pub fn suggested_schemas() -> Vec<Value> {
    let (all, all_urls) = everything();
    let leases = |verbs: &[&str]| resource_rule(verbs, &["coordination.k8s.io"], &["leases"], false);
    let mut leader_election = users(&["system:kube-controller-manager", "system:kube-scheduler"]);
    leader_election.push(kube_system_service_accounts());
    vec![
        schema("system-nodes", "system", 500, Some("ByUser"), groups(&["system:nodes"]), all.clone(), all_urls.clone()),
        schema(
            "system-node-high",
            "node-high",
            400,
            Some("ByUser"),
            groups(&["system:nodes"]),
            vec![resource_rule(&["*"], &[""], &["nodes", "nodes/status"], true), leases(&["*"])],
            Vec::new(),
        ),
        schema(
            "probes",
            "exempt",
            2,
            None,
            groups(&["system:unauthenticated", "system:authenticated"]),
            Vec::new(),
            vec![json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]})],
        ),
        schema("system-leader-election", "leader-election", 100, Some("ByUser"), leader_election, vec![leases(&["get", "create", "update"])], Vec::new()),
        schema("kube-controller-manager", "workload-high", 800, Some("ByNamespace"), users(&["system:kube-controller-manager"]), all.clone(), all_urls.clone()),
        schema("kube-scheduler", "workload-high", 800, Some("ByNamespace"), users(&["system:kube-scheduler"]), all.clone(), all_urls.clone()),
        schema("kube-system-service-accounts", "workload-high", 900, Some("ByNamespace"), vec![kube_system_service_accounts()], all.clone(), all_urls.clone()),
        schema("service-accounts", "workload-low", 9000, Some("ByUser"), groups(&["system:serviceaccounts"]), all.clone(), all_urls.clone()),
        schema("global-default", "global-default", 9900, Some("ByUser"), groups(&["system:unauthenticated", "system:authenticated"]), all, all_urls),
    ]
}
