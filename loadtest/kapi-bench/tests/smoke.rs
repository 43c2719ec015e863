//! The benchmark tool works end to end against the debug kapi (`--quick`): every step runs and
//! every number in the report is there. Correctness of the tool, not speed.

use std::path::PathBuf;
use std::process::Command;

fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    exe.parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join(name))
        .expect("target dir")
}

#[test]
fn quick_run_reports_every_measurement() {
    let out = Command::new(env!("CARGO_BIN_EXE_kapi-bench"))
        .args(["--quick", "--kapi-bin"])
        .arg(
            std::env::var_os("KAPI_BIN")
                .map(PathBuf::from)
                .unwrap_or_else(|| bin("kapi")),
        )
        .output()
        .expect("run kapi-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kapi-bench failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for needle in [
        "baseline: SQLite store creates",
        "baseline: minimal hyper HTTPS handler",
        "kapi: POST ConfigMap | 200 |",
        "kapi: GET ConfigMap | 200 |",
        "full list (consistent read, watch cache) | 3 |",
        "200 items",
        "| 1 | 50 |",
        "| 5 | 250 |",
        "after the watch runs",
    ] {
        assert!(
            stdout.contains(needle),
            "report lacks {needle:?}:\n{stdout}"
        );
    }
}
