//! ServiceCIDRs (`networking.k8s.io/v1`) as kube v1.33+ uses them (issue 16): a cluster whose
//! `--service-cluster-ip-range` is full is extended by creating a ServiceCIDR; a requested
//! cluster IP is accepted in any ServiceCIDR and refused outside all of them with kube's
//! message; the servicecidrs controller gives every ServiceCIDR its finalizer and Ready
//! condition, and keeps one being deleted (Ready False, `Terminating`) while Services hold
//! addresses only it covers; ServiceCIDR validation and update rules; `kubectl get servicecidrs`.

use std::time::Duration;

use kapi_e2e::{wait_for, HttpResponse, Kapi, Request};
use serde_json::{json, Value};

const SERVICES: &str = "/api/v1/namespaces/default/services";
const CIDRS: &str = "/apis/networking.k8s.io/v1/servicecidrs";
const FINALIZER: &str = "networking.k8s.io/service-cidr-finalizer";

fn service(name: &str, ip: Option<&str>) -> Value {
    let mut spec = json!({"selector": {"app": name}, "ports": [{"port": 80}]});
    if let Some(ip) = ip {
        spec["clusterIP"] = json!(ip);
    }
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec})
}

fn create_service(kapi: &Kapi, name: &str, ip: Option<&str>) -> HttpResponse {
    kapi.request(&Request::new("POST", SERVICES).json(&service(name, ip)))
}

fn service_cidr(name: &str, cidrs: &[&str]) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": name}, "spec": {"cidrs": cidrs}})
}

fn ready(obj: &Value) -> Option<Value> {
    obj["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready").cloned()
}

fn has_finalizer(obj: &Value) -> bool {
    obj["metadata"]["finalizers"].as_array().is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

/// Waits until the controller has given the ServiceCIDR its finalizer and Ready condition.
fn wait_ready(kapi: &Kapi, name: &str) -> Value {
    wait_for(Duration::from_secs(15), || {
        let obj = kapi.get_json(&format!("{CIDRS}/{name}"));
        (has_finalizer(&obj) && ready(&obj).is_some_and(|c| c["status"] == "True")).then_some(obj)
    })
    .unwrap_or_else(|| panic!("ServiceCIDR {name} never got its finalizer and Ready: {}", kapi.get_json(&format!("{CIDRS}/{name}"))))
}

fn ip_of(r: &HttpResponse) -> String {
    r.body["spec"]["clusterIP"].as_str().unwrap_or_else(|| panic!("no clusterIP: {}", r.raw)).to_owned()
}

fn in_block(ip: &str, prefix: &str) -> bool {
    ip.starts_with(prefix)
}

#[test]
fn a_full_range_is_extended_by_a_service_cidr() {
    let kapi = Kapi::start_with(&["--service-cluster-ip-range", "10.0.0.0/29"]).expect("start kapi");

    // The default ServiceCIDR: the flags' range, protected and Ready.
    let default = wait_ready(&kapi, "kubernetes");
    assert_eq!(default["spec"]["cidrs"], json!(["10.0.0.0/29"]));
    assert_eq!(kapi.get_json(&format!("{SERVICES}/kubernetes"))["spec"]["clusterIP"], "10.0.0.1");

    // 10.0.0.0/29 holds six addresses; the kubernetes Service has the first.
    for i in 0..5 {
        let r = create_service(&kapi, &format!("fill-{i}"), None);
        assert_eq!(r.status, 201, "{}", r.raw);
        let ip = ip_of(&r);
        assert!(in_block(&ip, "10.0.0."), "{ip}");
    }
    let full = create_service(&kapi, "overflow", None);
    assert_eq!(full.status, 500, "{}", full.raw);
    assert_eq!(full.message(), "Internal error occurred: failed to allocate a serviceIP: range is full");

    // Outside every ServiceCIDR: kube's MetaAllocator has no allocator for it.
    let outside = create_service(&kapi, "outside", Some("10.1.0.20"));
    assert_eq!(outside.status, 422, "{}", outside.raw);
    assert_eq!(
        outside.message(),
        "Service \"outside\" is invalid: spec.clusterIPs: Invalid value: []string{\"10.1.0.20\"}: failed to allocate IP 10.1.0.20: the provided network does not match the current range"
    );

    // A new ServiceCIDR extends the cluster.
    let r = kapi.request(&Request::new("POST", CIDRS).json(&service_cidr("extra", &["10.1.0.0/28"])));
    assert_eq!(r.status, 201, "{}", r.raw);
    let extra = wait_ready(&kapi, "extra");
    let cond = ready(&extra).unwrap();
    assert_eq!(cond["message"], "Kubernetes Service CIDR is ready");
    let next = create_service(&kapi, "overflow", None);
    assert_eq!(next.status, 201, "{}", next.raw);
    let next_ip = ip_of(&next);
    assert!(in_block(&next_ip, "10.1.0."), "{next_ip}");
    let ipaddr = kapi.get_json(&format!("/apis/networking.k8s.io/v1/ipaddresses/{next_ip}"));
    assert_eq!(ipaddr["spec"]["parentRef"], json!({"resource": "services", "namespace": "default", "name": "overflow"}));
    // A requested address inside it is accepted now; one outside every ServiceCIDR still is not.
    let wanted = if next_ip == "10.1.0.14" { "10.1.0.13" } else { "10.1.0.14" };
    let inside = create_service(&kapi, "inside", Some(wanted));
    assert_eq!(inside.status, 201, "{}", inside.raw);
    assert_eq!(ip_of(&inside), wanted);
    let far = create_service(&kapi, "far", Some("10.2.0.5"));
    assert_eq!(far.status, 422, "{}", far.raw);
    assert!(far.message().ends_with("failed to allocate IP 10.2.0.5: the provided network does not match the current range"), "{}", far.message());
    // The network and broadcast addresses of a ServiceCIDR are not in it.
    let broadcast = create_service(&kapi, "broadcast", Some("10.1.0.15"));
    assert_eq!(broadcast.status, 422, "{}", broadcast.raw);

    // kubectl lists both.
    let out = kapi.kubectl(&["get", "servicecidrs"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0][..2], ["NAME", "CIDRS"], "{text}");
    assert!(rows.iter().any(|r| r[..2] == ["extra", "10.1.0.0/28"]), "{text}");
    assert!(rows.iter().any(|r| r[..2] == ["kubernetes", "10.0.0.0/29"]), "{text}");

    // Deleting it while Services hold its addresses: Terminating, finalizer kept, nothing
    // more allocated from it.
    let del = kapi.request(&Request::new("DELETE", &format!("{CIDRS}/extra")));
    assert_eq!(del.status, 200, "{}", del.raw);
    let terminating = wait_for(Duration::from_secs(15), || {
        let obj = kapi.get_json(&format!("{CIDRS}/extra"));
        ready(&obj).is_some_and(|c| c["status"] == "False").then_some(obj)
    })
    .expect("the ServiceCIDR becomes Terminating");
    let cond = ready(&terminating).unwrap();
    assert_eq!(cond["reason"], "Terminating");
    assert_eq!(cond["message"], "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR");
    assert!(has_finalizer(&terminating) && terminating["metadata"]["deletionTimestamp"].is_string());
    let refused = create_service(&kapi, "late", None);
    assert_eq!(refused.status, 500, "{}", refused.raw);
    assert!(refused.message().ends_with("range is full"), "{}", refused.message());
    let free = (1..=12).map(|i| format!("10.1.0.{i}")).find(|ip| *ip != next_ip).unwrap();
    let late_inside = create_service(&kapi, "late", Some(&free));
    assert_eq!(late_inside.status, 422, "{}", late_inside.raw);
    assert!(late_inside.message().ends_with("the provided network does not match the current range"), "{}", late_inside.message());
    // Past kube's grace period it is still held.
    std::thread::sleep(Duration::from_secs(11));
    let still = kapi.get_json(&format!("{CIDRS}/extra"));
    assert!(has_finalizer(&still), "{still}");

    // Once its Services are gone, the finalizer goes and so does the ServiceCIDR.
    for name in ["overflow", "inside"] {
        let r = kapi.request(&Request::new("DELETE", &format!("{SERVICES}/{name}")));
        assert_eq!(r.status, 200, "{}", r.raw);
    }
    let gone = wait_for(Duration::from_secs(20), || (kapi.request(&Request::get(&format!("{CIDRS}/extra"))).status == 404).then_some(()));
    assert!(gone.is_some(), "the ServiceCIDR is still there: {}", kapi.get_json(&format!("{CIDRS}/extra")));
    // The default range is still full.
    let r = create_service(&kapi, "after", None);
    assert_eq!(r.status, 500, "{}", r.raw);
}

#[test]
fn a_service_cidr_covered_by_another_goes_at_once_and_validation_is_kubes() {
    let kapi = Kapi::start_with(&["--service-cluster-ip-range", "10.0.0.0/29"]).expect("start kapi");
    for (name, cidr) in [("parent", "10.5.0.0/16"), ("child", "10.5.1.0/24")] {
        let r = kapi.request(&Request::new("POST", CIDRS).json(&service_cidr(name, &[cidr])));
        assert_eq!(r.status, 201, "{}", r.raw);
        wait_ready(&kapi, name);
    }
    let held = create_service(&kapi, "held", Some("10.5.1.7"));
    assert_eq!(held.status, 201, "{}", held.raw);
    // The child's addresses stay covered by the parent: it goes once kube's grace period
    // (10s after its deletion) is over, Service or not.
    let del = kapi.request(&Request::new("DELETE", &format!("{CIDRS}/child")));
    assert_eq!(del.status, 200, "{}", del.raw);
    let gone = wait_for(Duration::from_secs(25), || (kapi.request(&Request::get(&format!("{CIDRS}/child"))).status == 404).then_some(()));
    assert!(gone.is_some(), "{}", kapi.get_json(&format!("{CIDRS}/child")));
    assert_eq!(kapi.get_json(&format!("{SERVICES}/held"))["spec"]["clusterIP"], "10.5.1.7");

    // Validation, with kube's messages.
    let invalid = |body: Value| {
        let r = kapi.request(&Request::new("POST", CIDRS).json(&body));
        assert_eq!(r.status, 422, "{}", r.raw);
        r.message().to_owned()
    };
    assert_eq!(
        invalid(json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "bad"}, "spec": {}})),
        "ServiceCIDR.networking.k8s.io \"bad\" is invalid: spec.cidrs: Required value: at least one CIDR required"
    );
    assert_eq!(
        invalid(service_cidr("bad", &["10.6.0.0/24", "10.7.0.0/24"])),
        "ServiceCIDR.networking.k8s.io \"bad\" is invalid: spec.cidrs: Invalid value: networking.ServiceCIDRSpec{CIDRs:[]string{\"10.6.0.0/24\", \"10.7.0.0/24\"}}: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"
    );
    assert!(invalid(service_cidr("bad", &["10.6.0.0/24", "fd00::/64", "10.7.0.0/24"])).ends_with("may only hold up to 2 values"));
    assert!(invalid(service_cidr("bad", &["10.6.0.1/24"]))
        .ends_with("spec.cidrs[0]: Invalid value: \"10.6.0.1/24\": must not have bits set beyond the prefix length"));

    // Updates: immutable, except single-stack to dual-stack.
    let item = format!("{CIDRS}/parent");
    let mut obj = kapi.get_json(&item);
    obj["spec"]["cidrs"] = json!(["10.9.0.0/16"]);
    let r = kapi.request(&Request::new("PUT", &item).json(&obj));
    assert_eq!(r.status, 422, "{}", r.raw);
    assert_eq!(r.message(), "ServiceCIDR.networking.k8s.io \"parent\" is invalid: spec.cidrs[0]: Invalid value: \"10.9.0.0/16\": field is immutable");
    obj["spec"]["cidrs"] = json!(["10.5.0.0/16", "fd00:10:5::/112"]);
    let r = kapi.request(&Request::new("PUT", &item).json(&obj));
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.body["spec"]["cidrs"], json!(["10.5.0.0/16", "fd00:10:5::/112"]));
    let mut obj = r.body.clone();
    obj["spec"]["cidrs"] = json!(["10.5.0.0/16"]);
    let r = kapi.request(&Request::new("PUT", &item).json(&obj));
    assert_eq!(r.status, 422, "{}", r.raw);
    assert_eq!(
        r.message(),
        "ServiceCIDR.networking.k8s.io \"parent\" is invalid: spec.cidrs: Invalid value: []string{\"10.5.0.0/16\"}: field is immutable"
    );
}
