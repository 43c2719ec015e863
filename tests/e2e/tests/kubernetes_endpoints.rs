//! The `kubernetes` Service's endpoints list every ready replica, kept by per-replica leases:
//! replicas sharing one data dir start together and both appear; a SIGTERMed replica removes
//! itself before it stops listening; a SIGKILLed one drops out when its lease expires.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kapi_e2e::{wait_for, Kapi, Request};
use serde_json::Value;

const ENDPOINTS: &str = "/api/v1/namespaces/default/endpoints/kubernetes";
const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dkubernetes";
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?labelSelector=apiserver.kubernetes.io%2Fidentity%3Dkube-apiserver";
/// Short leases so that expiry is observable in a test (kube's fixed 15 s otherwise).
const FLAGS: [&str; 2] = ["--endpoint-lease-duration", "3s"];

/// `ip:port` of every address in the Endpoints, read through `kapi`; empty while the object
/// does not exist yet (the reconciler writes it just after the replica turns ready).
fn endpoint_addresses(kapi: &Kapi) -> BTreeSet<String> {
    let answer = kapi.request(&Request::get(ENDPOINTS));
    let mut out = BTreeSet::new();
    if answer.status == 404 {
        return out;
    }
    assert_eq!(answer.status, 200, "GET {ENDPOINTS}: {}", answer.raw);
    let ep = answer.body;
    for subset in ep["subsets"].as_array().into_iter().flatten() {
        for port in subset["ports"].as_array().into_iter().flatten() {
            for addr in subset["addresses"].as_array().into_iter().flatten() {
                out.insert(format!("{}:{}", addr["ip"].as_str().unwrap_or_default(), port["port"]));
            }
        }
    }
    out
}

/// The same from the EndpointSlices.
fn slice_addresses(kapi: &Kapi) -> BTreeSet<String> {
    let list = kapi.get_json(SLICES);
    let mut out = BTreeSet::new();
    for slice in list["items"].as_array().into_iter().flatten() {
        for port in slice["ports"].as_array().into_iter().flatten() {
            for ep in slice["endpoints"].as_array().into_iter().flatten() {
                assert_eq!(ep["conditions"]["ready"], true, "{slice}");
                for ip in ep["addresses"].as_array().into_iter().flatten() {
                    out.insert(format!("{}:{}", ip.as_str().unwrap_or_default(), port["port"]));
                }
            }
        }
    }
    out
}

fn addr(kapi: &Kapi) -> String {
    format!("127.0.0.1:{}", kapi.port())
}

fn set(kapis: &[&Kapi]) -> BTreeSet<String> {
    kapis.iter().map(|k| addr(k)).collect()
}

/// Waits until the endpoints and slices read through `via` list exactly `want`.
fn wait_listed(via: &Kapi, want: &BTreeSet<String>, timeout: Duration) {
    let seen = wait_for(timeout, || (endpoint_addresses(via) == *want && slice_addresses(via) == *want).then_some(()));
    assert!(seen.is_some(), "endpoints {:?} / slices {:?}, want {want:?}", endpoint_addresses(via), slice_addresses(via));
}

fn lease_names(kapi: &Kapi) -> Vec<String> {
    let list = kapi.get_json(LEASES);
    list["items"].as_array().into_iter().flatten().filter_map(|l| l["metadata"]["name"].as_str().map(str::to_owned)).collect()
}

#[test]
fn a_ready_replica_lists_itself_with_its_lease() {
    let kapi = Kapi::start_with(&FLAGS).expect("start kapi");
    wait_listed(&kapi, &set(&[&kapi]), Duration::from_secs(10));
    let slices = kapi.get_json(SLICES);
    assert_eq!(slices["items"][0]["metadata"]["name"], "kubernetes");
    assert_eq!(slices["items"][0]["addressType"], "IPv4");
    assert_eq!(slices["items"][0]["ports"][0], serde_json::json!({"name": "https", "port": kapi.port(), "protocol": "TCP"}));
    let ep = kapi.get_json(ENDPOINTS);
    assert_eq!(ep["metadata"]["labels"]["endpointslice.kubernetes.io/skip-mirror"], "true");

    let leases = kapi.get_json(LEASES);
    let lease = &leases["items"][0];
    assert_eq!(leases["items"].as_array().map(Vec::len), Some(1), "{leases}");
    let name = lease["metadata"]["name"].as_str().unwrap_or_default();
    assert!(name.starts_with("apiserver-"), "{name}");
    assert!(lease["spec"]["holderIdentity"].as_str().is_some_and(|h| h.starts_with(&format!("{name}_"))), "{lease}");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 3);
    assert_eq!(lease["metadata"]["annotations"]["kubernetes.io/peer-advertise-address"], Value::String(addr(&kapi)));
    // Renewed while the replica lives.
    let renewed = lease["spec"]["renewTime"].clone();
    let later = wait_for(Duration::from_secs(5), || {
        let now = kapi.get_json(LEASES)["items"][0]["spec"]["renewTime"].clone();
        (now != renewed).then_some(now)
    });
    assert!(later.is_some(), "the lease was not renewed");
}

#[test]
fn replicas_on_one_data_dir_share_the_endpoints_and_leave_them_on_sigterm_or_lease_expiry() {
    let mut replicas = Kapi::start_replicas(2, &["--endpoint-lease-duration", "3s", "--shutdown-delay-duration", "1s"]).expect("two replicas");
    let mut b = replicas.pop().expect("b");
    let a = replicas.pop().expect("a");
    assert_ne!(a.port(), b.port());
    // One CA for both (the admin certificate and CA were created once, whoever won the race).
    assert_eq!(b.get_json("/version")["major"], "1");
    wait_listed(&a, &set(&[&a, &b]), Duration::from_secs(15));
    wait_listed(&b, &set(&[&a, &b]), Duration::from_secs(5));
    let slices = a.get_json(SLICES);
    let names: BTreeSet<&str> = slices["items"].as_array().into_iter().flatten().filter_map(|s| s["metadata"]["name"].as_str()).collect();
    let high = a.port().max(b.port());
    assert_eq!(names, BTreeSet::from(["kubernetes", format!("kubernetes-{high}").as_str()]), "one slice per port");
    assert_eq!(lease_names(&a).len(), 2);

    // SIGTERM: the pre-shutdown hook removes b before its listener closes, so right after it
    // exits the endpoints no longer name it (no waiting for a lease to expire).
    assert_eq!(b.terminate().expect("stop b"), Some(0));
    assert_eq!(endpoint_addresses(&a), set(&[&a]), "b is still listed after a clean shutdown");
    assert_eq!(slice_addresses(&a), set(&[&a]));
    assert_eq!(lease_names(&a).len(), 1, "b's lease is deleted");

    // SIGKILL: c cannot clean up; it drops out once its lease expires.
    let mut c = a.start_replica(&["--endpoint-lease-duration", "3s"]).expect("start c");
    wait_listed(&a, &set(&[&a, &c]), Duration::from_secs(15));
    c.kill9();
    let killed = Instant::now();
    wait_listed(&a, &set(&[&a]), Duration::from_secs(15));
    let gone_after = killed.elapsed();
    assert!(gone_after >= Duration::from_millis(1500), "c vanished after {gone_after:?}, before its lease could expire");
    let lease_gone = wait_for(Duration::from_secs(10), || (lease_names(&a).len() == 1).then_some(()));
    assert!(lease_gone.is_some(), "the expired lease is collected: {:?}", lease_names(&a));
}
