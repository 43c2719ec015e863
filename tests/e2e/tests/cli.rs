//! The kapi command line: kube-apiserver's flag names, exit code 64 for bad flags (never a
//! panic), and the no-flag default (127.0.0.1:6443, ./kapi-data, an admin kubeconfig).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kapi_e2e::{kapi_binary, run_with_timeout};

#[test]
fn bad_flags_exit_64_with_a_message() {
    let bin = kapi_binary().expect("kapi binary");
    for (args, expect) in [
        (vec!["--no-such-flag"], "unexpected argument"),
        (vec!["--secure-port", "not-a-port"], "invalid value"),
        (vec!["--request-timeout", "5 parsecs"], "invalid"),
        (vec!["--bind-address", "300.1.1.1"], "invalid value"),
        (vec!["--tls-cert-file", "/tmp/only-the-cert.pem"], "must be given together"),
        (vec!["--tls-min-version", "VersionTLS14"], "unknown tls version \"VersionTLS14\", allowed values are: VersionTLS10, VersionTLS11, VersionTLS12, VersionTLS13"),
        (vec!["--tls-cipher-suites", "TLS_FOO"], "Cipher suite TLS_FOO not supported or doesn't exist"),
        (vec!["--audit-log-mode", "sometimes"], "invalid audit log mode"),
        (vec!["--audit-webhook-mode", "sometimes"], "invalid audit webhook mode"),
        (vec!["--logging-format", "yaml"], "--logging-format: unsupported format \"yaml\""),
    ] {
        let out = run_with_timeout(Command::new(&bin).args(&args), Duration::from_secs(30)).expect("run kapi");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "kapi {args:?}: {err}");
        assert!(err.contains(expect), "kapi {args:?} says: {err}");
        assert!(!err.contains("panicked"), "kapi {args:?} panicked: {err}");
    }
}

#[test]
fn no_flags_serve_on_6443_with_data_in_the_working_directory() {
    let bin = kapi_binary().expect("kapi binary");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(&bin)
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start kapi");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut ready = None;
    while ready.is_none() && Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            ready = line.strip_prefix("Serving securely on ").map(str::to_owned);
        }
    }
    // The listener answers before storage opens (health checks from the first moment): the
    // database appears a moment later, and a SIGTERM before that would end kapi first.
    let db = dir.path().join("kapi-data").join("kapi.db");
    while ready.is_some() && !db.is_file() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let status = child.wait().expect("kapi exits");
    assert_eq!(ready.as_deref(), Some("127.0.0.1:6443"));
    assert!(status.success(), "SIGTERM ends kapi cleanly: {status:?}");
    for file in ["kapi.db", "kubeconfig", "pki/ca.crt", "pki/apiserver.crt", "pki/admin.crt", "pki/admin.key"] {
        assert!(dir.path().join("kapi-data").join(file).is_file(), "kapi-data/{file} missing");
    }
    let kubeconfig = std::fs::read_to_string(dir.path().join("kapi-data/kubeconfig")).expect("kubeconfig");
    assert!(kubeconfig.contains("server: https://127.0.0.1:6443"), "{kubeconfig}");
}

/// `-v=3` logs one line per answered request (kube's httplog), and `--logging-format=json`
/// writes kube's JSON log lines.
#[test]
fn json_logs_and_the_request_log() {
    let kapi = kapi_e2e::Kapi::start_with(&["-v", "3", "--logging-format", "json"]).expect("start kapi");
    let r = kapi.request(&kapi_e2e::Request::get("/api/v1/namespaces?limit=1"));
    assert_eq!(r.status, 200);
    let line = kapi_e2e::wait_for(Duration::from_secs(5), || {
        kapi.log()
            .lines()
            .filter(|l| l.starts_with('{'))
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|l| l["msg"] == "HTTP" && l["URI"] == "/api/v1/namespaces?limit=1")
    })
    .expect("the request's log line");
    assert_eq!(line["verb"], "LIST");
    assert_eq!(line["resp"], 200);
    assert_eq!(line["v"], 0);
    assert!(line["ts"].as_f64().is_some_and(|t| t > 1.7e9), "{line}");
    assert!(line["audit-ID"].as_str().is_some_and(|id| !id.is_empty()), "{line}");
    assert!(line["srcIP"].as_str().is_some_and(|ip| ip.starts_with("127.0.0.1:")), "{line}");
    // Every structured line is JSON (the plain lines are kapi's stdout banner).
    for l in kapi.log().lines().filter(|l| l.starts_with('{')) {
        let parsed: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
        assert!(parsed.get("msg").is_some(), "{l}");
    }
}
