//! The in-process controllers as a deployment runs them (issue 16): `--controllers` picks them
//! by kube-controller-manager's names, and across replicas one at a time acts, holding the
//! `kube-system/kube-controller-manager` Lease; when the leader is killed another takes over
//! after the lease duration, and one stopping gracefully hands over at once.

use std::process::Command;
use std::time::Duration;

use kapi_e2e::{kapi_binary, run_with_timeout, wait_for, Kapi, NatsServer, Request};
use serde_json::{json, Value};

const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager";
const FAST_ELECTION: [&str; 6] =
    ["--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "500ms"];

fn create_namespace(kapi: &Kapi, name: &str) {
    let r =
        kapi.request(&Request::new("POST", "/api/v1/namespaces").json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})));
    assert_eq!(r.status, 201, "{}", r.raw);
}

fn exists(kapi: &Kapi, path: &str) -> bool {
    kapi.request(&Request::get(path)).status == 200
}

/// Waits for the namespace's `default` ServiceAccount, which only a leading replica makes.
fn default_account_appears(kapi: &Kapi, ns: &str, within: Duration) -> bool {
    wait_for(within, || exists(kapi, &format!("/api/v1/namespaces/{ns}/serviceaccounts/default")).then_some(())).is_some()
}

fn holder(kapi: &Kapi) -> Value {
    kapi.get_json(LEASE)["spec"].clone()
}

#[test]
fn one_replica_leads_and_another_takes_over() {
    let nats = NatsServer::start().expect("start nats-server");
    let url = nats.url();
    let mut args = vec!["--nats-url", url.as_str()];
    args.extend(FAST_ELECTION);
    let mut r0 = Kapi::start_with(&args).expect("start replica 0");
    let mut r1 = r0.start_replica(&args).expect("start replica 1");

    let first = wait_for(Duration::from_secs(10), || {
        let spec = holder(&r1);
        spec["holderIdentity"].as_str().is_some_and(|h| !h.is_empty()).then_some(spec)
    })
    .expect("a replica holds the Lease");
    assert_eq!(first["leaseDurationSeconds"], 3);
    create_namespace(&r0, "a");
    assert!(default_account_appears(&r1, "a", Duration::from_secs(10)));
    let got = r0.kubectl(&["get", "lease", "-n", "kube-system", "kube-controller-manager", "-o", "jsonpath={.spec.holderIdentity}"]);
    assert_eq!(String::from_utf8_lossy(&got.stdout), first["holderIdentity"].as_str().unwrap());

    // Replica 0 killed: replica 1 leads (it did already, or takes over after the lease duration).
    r0.kill9();
    create_namespace(&r1, "b");
    assert!(default_account_appears(&r1, "b", Duration::from_secs(15)), "replica 1 runs the controllers alone");
    let leader = wait_for(Duration::from_secs(10), || {
        let spec = holder(&r1);
        (spec["holderIdentity"] != first["holderIdentity"] || spec["renewTime"] != first["renewTime"]).then_some(spec)
    })
    .expect("the Lease is held and renewed");

    // Replica 0 back; replica 1 stops gracefully and hands over at once.
    r0.restart().expect("restart replica 0");
    assert_eq!(holder(&r0)["holderIdentity"], leader["holderIdentity"], "a restarted replica does not take a held Lease");
    r1.terminate().expect("stop replica 1");
    let taken = wait_for(Duration::from_secs(10), || {
        let spec = holder(&r0);
        spec["holderIdentity"].as_str().is_some_and(|h| !h.is_empty() && Some(h) != leader["holderIdentity"].as_str()).then_some(spec)
    })
    .expect("replica 0 takes over");
    assert!(taken["leaseTransitions"].as_i64().unwrap() >= 1, "{taken}");
    create_namespace(&r0, "c");
    assert!(default_account_appears(&r0, "c", Duration::from_secs(10)));
    drop(nats);
}

#[test]
fn controllers_flag_picks_them() {
    // Without the serviceaccount controller: the root CA is published, no default account.
    let some = Kapi::start_with(&["--controllers", "*,-serviceaccount"]).expect("start kapi");
    create_namespace(&some, "x");
    wait_for(Duration::from_secs(10), || exists(&some, "/api/v1/namespaces/x/configmaps/kube-root-ca.crt").then_some(()))
        .expect("kube-root-ca.crt published");
    assert!(!default_account_appears(&some, "x", Duration::from_secs(2)));
    drop(some);

    // None at all (a real controller manager runs them): no Lease either.
    let none = Kapi::start_with(&["--controllers="]).expect("start kapi");
    create_namespace(&none, "y");
    std::thread::sleep(Duration::from_secs(2));
    assert!(!exists(&none, "/api/v1/namespaces/y/configmaps/kube-root-ca.crt"));
    assert!(!exists(&none, "/api/v1/namespaces/y/serviceaccounts/default"));
    assert!(!exists(&none, LEASE));
    drop(none);

    // Unknown names and inconsistent timings stop the process with kube's words.
    let bin = kapi_binary().expect("kapi binary");
    for (flags, said) in [
        (vec!["--controllers", "*,bogus"], "\"bogus\" is not in the list of known controllers"),
        (vec!["--leader-elect-lease-duration", "5s", "--leader-elect-renew-deadline", "10s"], "leaseDuration must be greater than renewDeadline"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(&bin);
        cmd.args(["--data-dir", dir.path().to_str().unwrap(), "--secure-port", "0"]).args(&flags);
        let out = run_with_timeout(&mut cmd, Duration::from_secs(20)).expect("run kapi");
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains(said), "{}", String::from_utf8_lossy(&out.stderr));
    }
}
