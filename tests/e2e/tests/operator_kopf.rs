//! A real kopf operator (pip `kopf==1.45.*`, `tests/e2e/python/kopf_operator.py`, kopf's
//! defaults: its finalizer, its `last-handled-configuration` annotation, JSON patches with a
//! `test` on the resourceVersion, status through the subresource, Events) reconciles 500 custom
//! resources on kapi through creates, spec updates, label updates, deletes and a SIGKILL +
//! restart of kapi on the same port in the middle: kopf keeps running, reconnects on its own,
//! and converges (see `operator_workload`).
//!
//! kopf is installed with pip when missing; the test is skipped (with a message) only when that
//! install fails, as it does without network access.

mod operator_workload;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use kapi_e2e::{run_with_timeout, Kapi, OutputExt};
use operator_workload::Operator;

const KOPF: &str = "kopf==1.45.*";

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python").join("kopf_operator.py")
}

fn kopf_version() -> Option<String> {
    let out = run_with_timeout(
        Command::new("python3").args(["-c", "import kopf; print(kopf.__version__)"]),
        Duration::from_secs(60),
    )
    .ok()?;
    out.status.success().then(|| out.stdout_str().trim().to_owned())
}

/// kopf 1.45, installed with pip (as scripts/test.sh does) when missing; None when pip cannot
/// install it (no network).
fn ensure_kopf() -> Option<String> {
    if let Some(v) = kopf_version().filter(|v| v.starts_with("1.45.")) {
        return Some(v);
    }
    for extra in [&[][..], &["--break-system-packages"][..]] {
        let mut cmd = Command::new("python3");
        cmd.args(["-m", "pip", "install", "--quiet"]).args(extra).arg(KOPF);
        match run_with_timeout(&mut cmd, Duration::from_secs(180)) {
            Ok(out) if out.status.success() => break,
            Ok(out) => eprintln!("pip install {KOPF} failed: {}", out.stderr_str()),
            Err(e) => eprintln!("pip install {KOPF}: {e}"),
        }
    }
    kopf_version().filter(|v| v.starts_with("1.45."))
}

#[test]
fn kopf_operator_reconciles_500_counters_across_a_kapi_restart() {
    let Some(version) = ensure_kopf() else {
        eprintln!("SKIPPED: kopf ({KOPF}) is not installed and pip cannot install it (no network?)");
        return;
    };
    let started = Instant::now();
    let port = kapi_e2e::free_port().expect("port").to_string();
    let mut kapi = Kapi::start_with(&["--secure-port", &port]).expect("start kapi");
    operator_workload::install(&kapi);

    let log = kapi.data_dir().join("kopf.log");
    let mut cmd = Command::new("python3");
    cmd.args(["-m", "kopf", "run", "--standalone", "--all-namespaces"])
        .arg(script())
        .env("KUBECONFIG", kapi.kubeconfig())
        .env("PYTHONUNBUFFERED", "1");
    let mut operator = Operator::spawn("kopf", &mut cmd, &log);
    assert!(operator.wait_for_log("stats ", Duration::from_secs(60)), "kopf never started:\n{}", operator.log());
    println!("kopf {version} running after {:?}", started.elapsed());

    let timings = operator_workload::run(&mut kapi, &mut operator, "kopf.zalando.org/KopfFinalizerMarker");
    println!("kopf: whole test {:?} (workload {:?})", started.elapsed(), timings.total);
}
