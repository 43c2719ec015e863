//! A real kube-rs operator (`tests/operators/kube-rs-controller`: the `kube` crate's runtime
//! `Controller` with its reflector, the `finalizer` helper, status through the subresource)
//! reconciles 500 custom resources on kapi through creates, spec updates, label updates,
//! deletes and a SIGKILL + restart of kapi on the same port in the middle: the controller
//! process keeps running, reconnects on its own, and converges (see `operator_workload`).

mod operator_workload;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use kapi_e2e::Kapi;
use operator_workload::Operator;

/// The controller binary: `KUBE_RS_CONTROLLER_BIN`, or `kube-rs-controller` beside kapi in the
/// target dir (built by `cargo build -p kube-rs-controller`, or by `--workspace --bins`).
fn controller_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("KUBE_RS_CONTROLLER_BIN") {
        return PathBuf::from(bin);
    }
    let kapi = kapi_e2e::kapi_binary().expect("kapi binary");
    let bin = kapi.with_file_name("kube-rs-controller");
    assert!(
        bin.is_file(),
        "cannot find {} (build it with `cargo build -p kube-rs-controller` or set KUBE_RS_CONTROLLER_BIN)",
        bin.display()
    );
    bin
}

#[test]
fn kube_rs_controller_reconciles_500_counters_across_a_kapi_restart() {
    let started = Instant::now();
    let port = kapi_e2e::free_port().expect("port").to_string();
    let mut kapi = Kapi::start_with(&["--secure-port", &port]).expect("start kapi");
    operator_workload::install(&kapi);

    let log = kapi.data_dir().join("kube-rs-controller.log");
    let mut cmd = Command::new(controller_binary());
    cmd.arg(kapi.kubeconfig());
    let mut operator = Operator::spawn("kube-rs-controller", &mut cmd, &log);
    assert!(
        operator.wait_for_log("stats ", Duration::from_secs(30)),
        "the controller never started:\n{}",
        operator.log()
    );
    println!("kube-rs controller ready after {:?}", started.elapsed());

    let timings = operator_workload::run(&mut kapi, &mut operator, "ops.kapi.dev/cleanup");
    println!("kube-rs: whole test {:?} (workload {:?})", started.elapsed(), timings.total);
}
