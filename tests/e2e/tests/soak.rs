//! The soak under faults, short (issue 20, done-when 3): nats-server, 3 replicas on one SQLite
//! file and haproxy; mixed conditional writes, reads and watches while replicas are SIGKILLed
//! and restarted, nats-server paused and killed and client connections dropped every few
//! seconds (`kapi_e2e::soak`). Every history must be linearizable per name, every watch stream
//! the log exactly once in order, and no acknowledged write missing. The long run is
//! `loadtest/kapi-soak` (docs/perf.md, "Soak with faults (issue 20)").
//! `KAPI_SOAK_SECONDS` lengthens this one.

use std::time::Duration;

use kapi_e2e::soak::{run, SoakConfig};

#[test]
fn soak_with_replica_nats_and_connection_faults_keeps_every_history_linearizable() {
    let seconds = std::env::var("KAPI_SOAK_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(75);
    let config = SoakConfig { duration: Duration::from_secs(seconds), fault_interval: Duration::from_secs(5), clients: 5, ..SoakConfig::default() };
    let report = run(&config);
    eprintln!("{report}");
    assert_eq!(report.violations(), 0, "{report}");
    assert!(report.inconclusive.is_empty(), "{report}");
    let faults: usize = report.faults.values().sum();
    assert!(faults >= 5, "too few faults: {report}");
    assert!(report.acked_writes > 200, "too little load to mean anything: {report}");
    assert!(report.unknown_resolved.0 + report.unknown_resolved.1 > 0 || report.connections_cut > 0, "no fault reached a client: {report}");
}
