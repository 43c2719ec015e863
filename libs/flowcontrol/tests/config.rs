//! The bootstrap configuration read back, classified against and allocated as kube does.

use kapi_flowcontrol::{allocate, bootstrap, classify, flow_hash, Config, RequestDigest};

fn kube_default() -> Config {
    let schemas: Vec<_> = bootstrap::mandatory_schemas().into_iter().chain(bootstrap::suggested_schemas()).collect();
    let levels: Vec<_> = bootstrap::mandatory_levels().into_iter().chain(bootstrap::suggested_levels()).collect();
    Config::from_objects(&schemas, &levels)
}

fn classify_as(config: &Config, digest: RequestDigest<'_>) -> (String, String, (String, String)) {
    let c = classify(config, &digest).expect("catch-all matches everything");
    (c.schema.name.clone(), c.level.name.clone(), c.flow(&digest))
}

fn groups(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn every_bootstrap_object_reads_and_schemas_are_in_matching_order() {
    let config = kube_default();
    assert_eq!(config.levels.len(), 8);
    let order: Vec<&str> = config.schemas.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        order,
        [
            "exempt",
            "probes",
            "system-leader-election",
            "system-node-high",
            "system-nodes",
            "kube-controller-manager",
            "kube-scheduler",
            "kube-system-service-accounts",
            "service-accounts",
            "global-default",
            "catch-all"
        ]
    );
}

#[test]
fn requests_land_where_kube_puts_them() {
    let config = kube_default();
    let masters = groups(&["system:masters", "system:authenticated"]);
    let admin = RequestDigest { user: "admin", groups: &masters, is_resource: true, verb: "list", resource: "pods", namespace: "default", ..Default::default() };
    assert_eq!(classify_as(&config, admin).1, "exempt");

    let people = groups(&["system:authenticated"]);
    let alice = RequestDigest { user: "alice", groups: &people, is_resource: true, verb: "get", resource: "configmaps", namespace: "team", ..Default::default() };
    assert_eq!(classify_as(&config, alice), ("global-default".into(), "global-default".into(), ("global-default".into(), "alice".into())));

    // Probes of anyone are exempt; a subpath of a listed path matches too.
    for path in ["/readyz", "/healthz/etcd"] {
        let probe = RequestDigest { user: "alice", groups: &people, verb: "get", path, ..Default::default() };
        assert_eq!(classify_as(&config, probe).0, "probes", "{path}");
    }
    let version = RequestDigest { user: "alice", groups: &people, verb: "get", path: "/version", ..Default::default() };
    assert_eq!(classify_as(&config, version).0, "global-default");

    // Leases of the controller manager go to leader election; its other requests by namespace.
    let kcm = groups(&["system:authenticated"]);
    let lease = RequestDigest {
        user: "system:kube-controller-manager",
        groups: &kcm,
        is_resource: true,
        verb: "update",
        api_group: "coordination.k8s.io",
        resource: "leases",
        namespace: "kube-system",
        ..Default::default()
    };
    assert_eq!(classify_as(&config, lease).1, "leader-election");
    let list = RequestDigest { user: "system:kube-controller-manager", groups: &kcm, is_resource: true, verb: "list", resource: "pods", namespace: "apps", ..Default::default() };
    assert_eq!(classify_as(&config, list), ("kube-controller-manager".into(), "workload-high".into(), ("kube-controller-manager".into(), "apps".into())));

    // Service accounts: kube-system's are workload-high, others workload-low.
    let sa = groups(&["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]);
    let system_sa = RequestDigest { user: "system:serviceaccount:kube-system:coredns", groups: &sa, is_resource: true, verb: "watch", resource: "endpoints", ..Default::default() };
    assert_eq!(classify_as(&config, system_sa).1, "workload-high");
    let other_sa = groups(&["system:serviceaccounts", "system:authenticated"]);
    let app_sa = RequestDigest { user: "system:serviceaccount:shop:cart", groups: &other_sa, is_resource: true, verb: "watch", resource: "endpoints", namespace: "shop", ..Default::default() };
    assert_eq!(classify_as(&config, app_sa).1, "workload-low");

    // Kubelets: their node and lease writes are node-high, the rest system.
    let nodes = groups(&["system:nodes", "system:authenticated"]);
    let status = RequestDigest { user: "system:node:n1", groups: &nodes, is_resource: true, verb: "patch", resource: "nodes", subresource: "status", ..Default::default() };
    assert_eq!(classify_as(&config, status).1, "node-high");
    let pods = RequestDigest { user: "system:node:n1", groups: &nodes, is_resource: true, verb: "list", resource: "pods", ..Default::default() };
    assert_eq!(classify_as(&config, pods).1, "system");

    // Anonymous requests are caught by catch-all... after global-default, which covers
    // system:unauthenticated too.
    let anonymous = groups(&["system:unauthenticated"]);
    let anon = RequestDigest { user: "system:anonymous", groups: &anonymous, verb: "get", path: "/version", ..Default::default() };
    assert_eq!(classify_as(&config, anon).0, "global-default");
}

#[test]
fn schemas_of_missing_levels_are_skipped_and_ties_go_by_name() {
    let mut schemas = bootstrap::mandatory_schemas();
    let mut dangling = bootstrap::mandatory_schemas()[1].clone();
    dangling["metadata"]["name"] = "aaa".into();
    dangling["spec"]["matchingPrecedence"] = 5.into();
    dangling["spec"]["priorityLevelConfiguration"]["name"] = "nowhere".into();
    schemas.push(dangling);
    let config = Config::from_objects(&schemas, &bootstrap::mandatory_levels());
    let names: Vec<&str> = config.schemas.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["exempt", "catch-all"]);
}

#[test]
fn the_default_server_limit_is_shared_as_kube_shares_it() {
    // kube's defaults: 400 + 200 in flight; shares 5 + 0 + 30 + 40 + 10 + 40 + 100 + 20 = 245.
    let config = kube_default();
    let limits = allocate(600, &config.levels);
    let of = |name: &str| limits[config.levels.iter().position(|l| l.name == name).expect("level")];
    let workload_low = of("workload-low");
    assert_eq!(workload_low.nominal, 245); // ceil(600 * 100 / 245)
    assert_eq!(workload_low.min, 245 - 221); // lends round(90% of 245)
    assert_eq!(workload_low.max, 245 + 600); // no borrowing limit: the server's
    assert_eq!(workload_low.max_seats, 10); // min(ceil(36.75), 245 / 6 = 40), capped at 10
    assert_eq!(of("catch-all").nominal, 13); // ceil(12.24)
    assert_eq!(of("catch-all").max_seats, 10); // rejects, never queues
    assert_eq!(of("leader-election").nominal, 25); // ceil(24.49)
    assert_eq!(of("leader-election").min, 25);
    assert_eq!(of("leader-election").max_seats, 4); // min(ceil(3.75) = 4, 25 / 4 = 6)
    assert_eq!(of("exempt").nominal, 0);
    // A small server: one seat at least.
    let small = allocate(10, &config.levels);
    assert!(small.iter().zip(&config.levels).filter(|(_, l)| l.queuing.is_some()).all(|(s, _)| s.max_seats >= 1));
}

#[test]
fn flow_hashes_are_stable_and_tell_the_parts_apart() {
    // FNV-1a 64 of the bytes "a\0": a change of function (which would re-deal every flow on
    // a mixed-version cluster) shows here.
    assert_eq!(flow_hash("a", ""), 0x089b_e207_b544_f1e4);
    assert_eq!(flow_hash("global-default", "alice"), flow_hash("global-default", "alice"));
    assert_ne!(flow_hash("ab", "c"), flow_hash("a", "bc"));
    assert_ne!(flow_hash("global-default", "alice"), flow_hash("global-default", "bob"));
}

#[test]
fn lists_cost_a_seat_per_hundred_objects_up_to_the_levels_maximum() {
    use kapi_flowcontrol::list_seats;
    assert_eq!(list_seats(0, None, true, false, 10), 1);
    assert_eq!(list_seats(250, None, true, false, 10), 3);
    assert_eq!(list_seats(5_000, None, true, false, 10), 10, "capped by the level");
    assert_eq!(list_seats(5_000, None, true, false, 4), 4);
    // From storage: twice the page, or the resource plus the page with a selector.
    assert_eq!(list_seats(5_000, Some(100), false, false, 10), 2);
    assert_eq!(list_seats(5_000, Some(100), false, true, 10), 10);
    assert_eq!(list_seats(150, Some(500), false, false, 10), 3, "a limit beyond the count is the count");
}

#[test]
fn zero_queuing_numbers_read_as_kubes_defaults() {
    let mut levels = bootstrap::mandatory_levels();
    let mut zeros = levels.iter().find(|l| l["metadata"]["name"] == "catch-all").cloned().expect("catch-all");
    zeros["metadata"]["name"] = "zeros".into();
    zeros["spec"]["limited"]["limitResponse"] = serde_json::json!({"type": "Queue", "queuing": {"queues": 0, "handSize": 0, "queueLengthLimit": 0}});
    levels.push(zeros);
    let config = Config::from_objects(&bootstrap::mandatory_schemas(), &levels);
    let level = config.levels.iter().find(|l| l.name == "zeros").expect("the level reads");
    let q = level.queuing.expect("a queuing level");
    assert_eq!((q.queues, q.hand_size, q.queue_length_limit), (64, 8, 50));
}
