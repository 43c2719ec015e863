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
        // Replicas: 2 replicas, 4 watchers, 50 writes; every watcher gets every event.
        "## Replicas (NATS fan-out vs log polling)",
        "| log polling (100 ms) | 50 | all replicas | cross-replica | 100 |",
        "| log polling (100 ms) | 50 | all replicas | same-replica | 100 |",
        "| 1 kapi, standalone |",
        // APF off vs on: every row has both modes' numbers.
        "## API Priority and Fairness: noisy neighbour",
        "| user A (flood): LISTs completed |",
        "| Lease renewal p50 / max, during the flood |",
        "| kapi RSS growth during the flood |",
        "| user B's requests during the flood by wait for APF seats |",
        "user B (neighbour): GET → `apf-bench-neighbour` / `global-default`",
        "leader election: GET lease → `system-leader-election` / `leader-election`",
        "system:masters: GET → `exempt` / `exempt`",
        // APF's cost with no contention: user B alone, both modes, no request failed.
        "### Uncontended rates, APF off vs on",
        "| errors, GETs / creates (all rounds) | 0 / 0 | 0 / 0 | 0 / 0 |",
        // Rapid reset: both attackers ran and kapi answered the GETs throughout.
        "## HTTP/2 rapid reset",
        "| unauthenticated attacker |",
        "| authenticated attacker |",
        // Observability: every configuration measured creates and GETs, and the costs have
        // their baselines (sampling 0 exporting a span, or 100% none, fails the run).
        "## Observability: metrics, tracing, audit",
        "| creates | no request metrics (baseline) |",
        "| creates | metrics only (default) |",
        "| creates | tracing, sampling 0 |",
        "| creates | tracing, sampling 100% |",
        "| creates | audit Metadata, blocking |",
        "| creates | audit Metadata, batch |",
        "| GETs | no request metrics (baseline) |",
        "| GETs | metrics only (default) |",
        "| GETs | tracing, sampling 0 |",
        "| GETs | tracing, sampling 100% |",
        "| GETs | audit Metadata, blocking |",
        "| GETs | audit Metadata, batch |",
        "vs baseline | ≤ 3%:",
        "vs metrics only | ≤ 10%:",
        // The aggregator's hop: both paths measured, every watch event seen on both.
        "## The aggregator's hop",
        "| straight to kapi-core |",
        "| through kapi-aggregator |",
        "The hop adds",
        // Encryption at rest: Secrets with identity, aescbc and the KMS v2 test plugin.
        "## Encryption at rest",
        "| creates, aescbc |",
        "| creates, KMS v2 |",
        "| GETs, KMS v2 |",
        // kapi on etcd: the etcd baseline, both backends, both ways replicas learn of commits.
        "## kapi on etcd",
        "-writer etcd client (baseline) | 100 |",
        "| create through kapi on etcd | 100 |",
        "| GET through kapi on SQLite | 100 |",
        "| consistent LIST through kapi on etcd | 3 |",
        "| etcd watch only | 100 |",
        // Scale: 50 field-selected watches each got exactly their node's pods; the restarted
        // kapi serves all 500 ConfigMaps (the section fails otherwise).
        "## Scale: many watchers, a large store",
        "| 0 / 0 / 0 |",
        "every event delivered once (met)",
        "| 500 |",
    ] {
        assert!(
            stdout.contains(needle),
            "report lacks {needle:?}:\n{stdout}"
        );
    }
    // B's waits for APF seats were read from kapi's metrics (APF on): at least one bucket.
    let waits = stdout.lines().find(|l| l.starts_with("| user B's requests during the flood by wait for APF seats |")).unwrap_or_default();
    assert!(waits.contains("ms: "), "no APF wait buckets for B: {waits}");
    // Uncontended rates: each mode's median and every round's rate (2 rounds) are above zero,
    // and each comparison has its percentage and verdict.
    let row = |start: &str| stdout.lines().find(|l| l.starts_with(start)).unwrap_or_default().to_owned();
    for what in ["GETs", "creates"] {
        let rates = row(&format!("| {what} per second, median (each round) |"));
        let cells: Vec<&str> = rates.split('|').map(str::trim).collect();
        for cell in [cells.get(2), cells.get(3)] {
            let numbers: Vec<f64> = cell.unwrap_or(&"").split([' ', '(', ')', ',']).filter_map(|v| v.parse().ok()).collect();
            assert!(numbers.len() == 3 && numbers.iter().all(|&n| n > 0.0), "no uncontended {what} rates: {rates}");
        }
    }
    for what in ["GET rate: APF on's cost", "create rate: APF on's cost", "GET p50: APF on's change", "create p50: APF on's change"] {
        let cost = row(&format!("| {what}, "));
        assert!(cost.contains("% | ≤ 3%: m"), "no {what}: {cost}");
    }
    let waits = row("| user B's requests by wait for APF seats (all rounds) |");
    assert!(waits.contains("ms: "), "no APF wait buckets for B alone: {waits}");
    // Rates rows: | mode | target | writes to | achieved | behind | POST | delivered | /s | per watcher | drain | missed | duplicated | sustained |
    let mut complete = 0;
    for row in stdout.lines().filter(|l| l.contains(" of 200 |")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells.get(7), Some(&"200 of 200"), "events missed: {row}");
        assert_eq!(cells.get(11), Some(&"0"), "events missed: {row}");
        assert_eq!(cells.get(12), Some(&"0"), "events duplicated: {row}");
        complete += 1;
    }
    if nats_server_on_path() {
        for needle in [
            "| NATS fan-out | 50 | all replicas | cross-replica | 100 |",
            "| 2 replicas (connections spread evenly) |",
        ] {
            assert!(
                stdout.contains(needle),
                "report lacks {needle:?}:\n{stdout}"
            );
        }
        assert_eq!(complete, 2, "a rates row is missing:\n{stdout}");
    } else {
        assert_eq!(complete, 1, "a rates row is missing:\n{stdout}");
    }
    for bad in ["watchers ended early", "matched no write"] {
        assert!(!stdout.contains(bad), "report says {bad:?}:\n{stdout}");
    }
}

fn nats_server_on_path() -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| dir.join("nats-server").is_file())
    })
}
