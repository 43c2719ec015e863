//! The official Python client (pip `kubernetes==37.*`) lists, watches, resumes and recovers
//! from 410 Gone against kapi. A missing client is a failure, never a skip.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use kapi_e2e::{run_with_timeout, Kapi, OutputExt};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python").join("watch_test.py")
}

fn require_python_client() {
    let out = run_with_timeout(Command::new("python3").args(["-c", "import kubernetes; print(kubernetes.__version__)"]), Duration::from_secs(60))
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "the Python kubernetes client is not installed (pip install 'kubernetes==37.*'): {}",
        out.stderr_str()
    );
    assert!(out.stdout_str().starts_with("37."), "expected kubernetes 37.x, found {}", out.stdout_str());
}

fn run_phase(kapi: &Kapi, phase: &str, timeout: Duration) {
    let out = run_with_timeout(
        Command::new("python3").arg(script()).arg(phase).env("KUBECONFIG", kapi.kubeconfig()),
        timeout,
    )
    .unwrap_or_else(|e| panic!("watch_test.py {phase}: {e}"));
    assert!(
        out.status.success(),
        "watch_test.py {phase} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        out.stdout_str(),
        out.stderr_str()
    );
}

#[test]
fn python_client_lists_watches_and_resumes() {
    require_python_client();
    let kapi = Kapi::start().expect("start kapi");
    run_phase(&kapi, "basic", Duration::from_secs(120));
}

#[test]
fn python_client_recovers_from_410_by_relisting() {
    require_python_client();
    let kapi = Kapi::start_with(&["--storage-compaction-window", "1s", "--watch-cache-size", "8"]).expect("start kapi");
    run_phase(&kapi, "gone", Duration::from_secs(150));
}
