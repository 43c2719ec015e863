//! Service cluster IPs and node ports as kube-apiserver allocates them: IPAddress objects for
//! every address, kube's refusals for a taken or out-of-range address or port, release on
//! delete and on type change, the flags' ranges (dual-stack, a small node port range filled to
//! the end), and (issue 16, "Done when" 4) 1,000 Services created concurrently through two
//! replicas, all unique, consistent again after both are killed and restarted.

use std::collections::{BTreeMap, HashSet};
use std::process::Command;
use std::time::Duration;

use kapi_e2e::{kapi_binary, run_with_timeout, wait_for, Endpoint, Kapi, NatsServer, Request};
use serde_json::{json, Value};

fn service(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec})
}

fn cluster_ip(name: &str, ip: Option<&str>) -> Value {
    let mut spec = json!({"selector": {"app": name}, "ports": [{"port": 80}]});
    if let Some(ip) = ip {
        spec["clusterIP"] = json!(ip);
    }
    service(name, spec)
}

fn node_port(name: &str, port: Option<u16>) -> Value {
    let mut p = json!({"port": 80, "protocol": "TCP"});
    if let Some(port) = port {
        p["nodePort"] = json!(port);
    }
    service(name, json!({"type": "NodePort", "selector": {"app": name}, "ports": [p]}))
}

const SERVICES: &str = "/api/v1/namespaces/default/services";

fn create(kapi: &Kapi, svc: &Value) -> kapi_e2e::HttpResponse {
    kapi.request(&Request::new("POST", SERVICES).json(svc))
}

fn ip_addresses(kapi: &Kapi) -> BTreeMap<String, Value> {
    let list = kapi.get_json("/apis/networking.k8s.io/v1/ipaddresses");
    list["items"].as_array().unwrap().iter().map(|a| (a["metadata"]["name"].as_str().unwrap().to_owned(), a.clone())).collect()
}

#[test]
fn addresses_and_ports_are_claimed_refused_and_released() {
    let kapi = Kapi::start().expect("start kapi");
    // The kubernetes Service holds the range's first address, recorded as an IPAddress, and
    // the default ServiceCIDR names the range.
    let k8s = kapi.get_json(&format!("{SERVICES}/kubernetes"));
    assert_eq!(k8s["spec"]["clusterIP"], "10.96.0.1");
    let addrs = ip_addresses(&kapi);
    assert_eq!(addrs["10.96.0.1"]["spec"]["parentRef"], json!({"resource": "services", "namespace": "default", "name": "kubernetes"}));
    assert_eq!(addrs["10.96.0.1"]["metadata"]["labels"]["ipaddress.kubernetes.io/managed-by"], "ipallocator.k8s.io");
    let cidr = kapi.get_json("/apis/networking.k8s.io/v1/servicecidrs/kubernetes");
    assert_eq!(cidr["spec"]["cidrs"], json!(["10.96.0.0/12"]));

    let a = create(&kapi, &cluster_ip("a", None));
    assert_eq!(a.status, 201, "{}", a.raw);
    let ip = a.body["spec"]["clusterIP"].as_str().unwrap().to_owned();
    assert_eq!(a.body["spec"]["clusterIPs"], json!([ip]));
    assert_eq!(a.body["spec"]["ipFamilies"], json!(["IPv4"]));
    assert_eq!(a.body["spec"]["ipFamilyPolicy"], "SingleStack");
    assert_eq!(ip_addresses(&kapi)[&ip]["spec"]["parentRef"]["name"], "a");

    // An address someone holds: kube's 422, nothing stored.
    let b = create(&kapi, &cluster_ip("b", Some(&ip)));
    assert_eq!(b.status, 422, "{}", b.raw);
    assert_eq!(
        b.message(),
        format!("Service \"b\" is invalid: spec.clusterIPs: Invalid value: []string{{\"{ip}\"}}: failed to allocate IP {ip}: provided IP is already allocated")
    );
    assert_eq!(kapi.request(&Request::get(&format!("{SERVICES}/b"))).status, 404);
    let outside = create(&kapi, &cluster_ip("b", Some("10.200.0.5")));
    assert_eq!(outside.status, 422, "{}", outside.raw);
    assert!(
        outside.message().ends_with(
            "failed to allocate IP 10.200.0.5: the provided network does not match the current range"
        ),
        "{}",
        outside.message()
    );

    // A dry run is given an address but claims nothing.
    let dry = kapi.request(&Request::new("POST", &format!("{SERVICES}?dryRun=All")).json(&cluster_ip("dry", None)));
    assert_eq!(dry.status, 201, "{}", dry.raw);
    let dry_ip = dry.body["spec"]["clusterIP"].as_str().unwrap().to_owned();
    assert!(!ip_addresses(&kapi).contains_key(&dry_ip));

    // Node ports: taken, refused when held or outside the range.
    let np = create(&kapi, &node_port("np", Some(30080)));
    assert_eq!(np.status, 201, "{}", np.raw);
    let np2 = create(&kapi, &node_port("np2", Some(30080)));
    assert_eq!(np2.status, 422, "{}", np2.raw);
    assert_eq!(np2.message(), "Service \"np2\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated");
    let low = create(&kapi, &node_port("np2", Some(29999)));
    assert_eq!(low.status, 422, "{}", low.raw);
    assert!(low.message().ends_with("provided port is not in the valid range. The range of valid ports is 30000-32767"), "{}", low.message());
    let auto = create(&kapi, &node_port("auto", None));
    assert_eq!(auto.status, 201, "{}", auto.raw);
    let auto_port = auto.body["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    assert!((30000..=32767).contains(&auto_port) && auto_port != 30080);

    // A Service moving to ClusterIP gives its node port back.
    let mut moved = kapi.get_json(&format!("{SERVICES}/np"));
    moved["spec"]["type"] = json!("ClusterIP");
    moved["spec"]["ports"][0].as_object_mut().unwrap().remove("nodePort");
    moved["spec"].as_object_mut().unwrap().remove("externalTrafficPolicy");
    let r = kapi.request(&Request::new("PUT", &format!("{SERVICES}/np")).json(&moved));
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(create(&kapi, &node_port("np2", Some(30080))).status, 201);

    // Deleting gives the address back: another Service may ask for it.
    assert_eq!(kapi.request(&Request::new("DELETE", &format!("{SERVICES}/a"))).status, 200);
    assert!(!ip_addresses(&kapi).contains_key(&ip));
    let c = create(&kapi, &cluster_ip("c", Some(&ip)));
    assert_eq!(c.status, 201, "{}", c.raw);

    // kubectl apply twice, the manifest without clusterIP or nodePort: both kept.
    let manifest = kapi.write_file(
        "svc.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: applied\nspec:\n  type: NodePort\n  selector:\n    app: applied\n  ports:\n  - name: http\n    port: 80\n",
    );
    let first = kapi.kubectl(&["apply", "-f", manifest.to_str().unwrap()]);
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let before = kapi.get_json(&format!("{SERVICES}/applied"));
    let again = kapi.kubectl(&["apply", "-f", manifest.to_str().unwrap()]);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let after = kapi.get_json(&format!("{SERVICES}/applied"));
    assert_eq!(before["spec"]["clusterIP"], after["spec"]["clusterIP"]);
    assert_eq!(before["spec"]["ports"][0]["nodePort"], after["spec"]["ports"][0]["nodePort"]);

    // The kubernetes Service deleted comes back, at its address (kube's bootstrap controller).
    assert_eq!(kapi.request(&Request::new("DELETE", &format!("{SERVICES}/kubernetes"))).status, 200);
    let back = wait_for(Duration::from_secs(20), || {
        let r = kapi.request(&Request::get(&format!("{SERVICES}/kubernetes")));
        (r.status == 200).then_some(r.body)
    })
    .expect("the kubernetes Service is recreated");
    assert_eq!(back["spec"]["clusterIP"], "10.96.0.1");
}

#[test]
fn flags_set_the_ranges() {
    let kapi = Kapi::start_with(&["--service-cluster-ip-range", "10.0.0.0/24,fd00:10::/120", "--service-node-port-range", "31000-31009"])
        .expect("start kapi");
    assert_eq!(kapi.get_json(&format!("{SERVICES}/kubernetes"))["spec"]["clusterIP"], "10.0.0.1");
    let dual = create(&kapi, &service("dual", json!({"ipFamilyPolicy": "PreferDualStack", "selector": {"a": "b"}, "ports": [{"port": 80}]})));
    assert_eq!(dual.status, 201, "{}", dual.raw);
    assert_eq!(dual.body["spec"]["ipFamilies"], json!(["IPv4", "IPv6"]));
    let ips = dual.body["spec"]["clusterIPs"].as_array().unwrap();
    assert!(ips[0].as_str().unwrap().starts_with("10.0.0.") && ips[1].as_str().unwrap().starts_with("fd00:10::"), "{ips:?}");
    let addrs = ip_addresses(&kapi);
    assert_eq!(addrs[ips[1].as_str().unwrap()]["metadata"]["labels"]["ipaddress.kubernetes.io/ip-family"], "IPv6");
    // Ten ports, ten Services; the eleventh finds the range full.
    let mut ports = HashSet::new();
    for i in 0..10 {
        let r = create(&kapi, &node_port(&format!("np{i}"), None));
        assert_eq!(r.status, 201, "{}", r.raw);
        ports.insert(r.body["spec"]["ports"][0]["nodePort"].as_u64().unwrap());
    }
    assert_eq!(ports, (31000..=31009).collect());
    let full = create(&kapi, &node_port("full", None));
    assert_eq!(full.status, 500, "{}", full.raw);
    assert_eq!(full.message(), "Internal error occurred: failed to allocate a nodePort: range is full");

    // Ranges kube refuses stop the process with a message.
    let bin = kapi_binary().expect("kapi binary");
    let dir = tempfile::tempdir().unwrap();
    let out = run_with_timeout(
        Command::new(bin).args(["--data-dir", dir.path().to_str().unwrap(), "--secure-port", "0", "--service-cluster-ip-range", "10.0.0.0/8"]),
        Duration::from_secs(20),
    )
    .expect("run kapi");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("mask must be >= 12"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Every Service's addresses and ports, checked unique and matched by IPAddress objects.
fn check_consistent(kapi: &Kapi, expected_services: usize) -> (HashSet<String>, HashSet<u64>) {
    let list = kapi.get_json(SERVICES);
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), expected_services);
    let (mut ips, mut ports) = (HashSet::new(), HashSet::new());
    for svc in items {
        let ip = svc["spec"]["clusterIP"].as_str().unwrap().to_owned();
        assert!(ips.insert(ip.clone()), "cluster IP {ip} given twice");
        if let Some(port) = svc["spec"]["ports"][0]["nodePort"].as_u64() {
            assert!(ports.insert(port), "node port {port} given twice");
        }
    }
    let addrs = ip_addresses(kapi);
    assert_eq!(addrs.keys().cloned().collect::<HashSet<_>>(), ips, "IPAddresses and Services disagree");
    for svc in items {
        let ip = svc["spec"]["clusterIP"].as_str().unwrap();
        assert_eq!(addrs[ip]["spec"]["parentRef"]["name"], svc["metadata"]["name"]);
    }
    (ips, ports)
}

/// Creates `n` Services named `<prefix>-<i>` through the endpoints in turn, 8 at a time; every
/// other one a NodePort.
fn create_concurrently(endpoints: &[Endpoint], prefix: &str, n: usize) {
    std::thread::scope(|s| {
        for worker in 0..8 {
            s.spawn(move || {
                for i in (worker..n).step_by(8) {
                    let name = format!("{prefix}-{i}");
                    let svc = if i % 2 == 0 { node_port(&name, None) } else { cluster_ip(&name, None) };
                    let endpoint = &endpoints[i % endpoints.len()];
                    let r = endpoint.try_request(&Request::new("POST", SERVICES).json(&svc)).expect("request");
                    assert_eq!(r.status, 201, "{name}: {}", r.raw);
                }
            });
        }
    });
}

#[test]
fn a_thousand_services_through_two_replicas_stay_unique_across_restarts() {
    let nats = NatsServer::start().expect("start nats-server");
    let url = nats.url();
    let args = ["--nats-url", url.as_str()];
    let mut first = Kapi::start_with(&args).expect("start the first replica");
    let mut second = first.start_replica(&args).expect("start the second replica");
    let endpoints = [first.endpoint(), second.endpoint()];
    create_concurrently(&endpoints, "svc", 1000);
    // Both replicas see the same, consistent allocations.
    let (ips, ports) = check_consistent(&first, 1001);
    wait_for(Duration::from_secs(10), || (second.get_json(SERVICES)["items"].as_array().unwrap().len() == 1001).then_some(()))
        .expect("the second replica sees every Service");
    check_consistent(&second, 1001);
    assert_eq!(ports.len(), 500);

    // Killed and restarted, both agree with the store; new Services never collide.
    first.restart().expect("restart the first replica");
    second.restart().expect("restart the second replica");
    let endpoints = [first.endpoint(), second.endpoint()];
    let (after_ips, after_ports) = check_consistent(&second, 1001);
    assert_eq!((after_ips, after_ports), (ips, ports));
    create_concurrently(&endpoints, "more", 200);
    check_consistent(&first, 1201);
    drop(nats);
}
