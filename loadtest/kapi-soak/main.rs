//! kapi-soak: the soak under faults (issue 20), long form. It runs `kapi_e2e::soak` (nats-server,
//! 3 kapi replicas on one SQLite file, haproxy; conditional writes, reads and watches while
//! replicas are SIGKILLed and restarted, nats-server paused and killed, client connections
//! dropped) for as long as asked, then prints the report: operations by kind, faults by kind,
//! histories checked, linearizability violations, watch violations, acknowledged writes lost.
//! It exits 1 when anything must not have happened did.
//!
//! Built by the kapi-e2e package (it is the harness's soak with a command line, so it shares
//! every process helper with the tests and adds no dependency):
//!
//!     cargo build --release -p kapi && cargo build --release -p kapi-e2e --bin kapi-soak
//!     target/release/kapi-soak --seconds 600 --fault-interval 4
//!
//! The kapi binary is `KAPI_BIN`, or `kapi` next to this executable. Loopback only; every
//! process it starts is stopped by PID when it ends.

use std::time::Duration;

use kapi_e2e::soak::{run, SoakConfig};

const USAGE: &str = "kapi-soak [--seconds N] [--fault-interval SECONDS] [--clients N] [--keys N] [--watchers-per-replica N] [--seed N]";

fn main() {
    let mut config = SoakConfig { duration: Duration::from_secs(600), ..SoakConfig::default() };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            println!("{USAGE}");
            return;
        }
        let Some(value) = args.next() else {
            eprintln!("{flag} needs a value\n{USAGE}");
            std::process::exit(2);
        };
        let number = |v: &str| -> u64 {
            v.parse().unwrap_or_else(|_| {
                eprintln!("{flag}: not a number: {v}\n{USAGE}");
                std::process::exit(2)
            })
        };
        let n = number(&value);
        let count = usize::try_from(n).unwrap_or(usize::MAX);
        match flag.as_str() {
            "--seconds" => config.duration = Duration::from_secs(n),
            "--fault-interval" => config.fault_interval = Duration::from_secs(n.max(1)),
            "--clients" => config.clients = count.max(1),
            "--keys" => config.keys = count.max(1),
            "--watchers-per-replica" => config.watchers_per_replica = count,
            "--seed" => config.seed = n,
            _ => {
                eprintln!("unknown flag {flag}\n{USAGE}");
                std::process::exit(2);
            }
        }
    }
    if std::env::var_os("KAPI_BIN").is_none() {
        if let Some(kapi) = std::env::current_exe().ok().and_then(|exe| exe.parent().map(|dir| dir.join("kapi"))).filter(|p| p.is_file()) {
            std::env::set_var("KAPI_BIN", kapi);
        }
    }
    eprintln!("kapi-soak: {config:?}");
    let report = run(&config);
    println!("{report}");
    if report.violations() > 0 {
        std::process::exit(1);
    }
}
