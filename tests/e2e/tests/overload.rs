//! `--max-requests-inflight`: a burst of concurrent slow lists far beyond the budget gets kube's
//! 429 (plain text, `Retry-After: 1`), never a 5xx, while watches (long-running, not counted)
//! keep delivering events and system:masters is never limited.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use kapi_e2e::{run_with_timeout, Credential, Kapi, Request};
use serde_json::json;

/// The budget under test.
const BUDGET: &str = "10";
/// Concurrent lists in the burst.
const BURST: usize = 200;
/// kube's 429 body.
const TOO_MANY: &str = "Too many requests, please try again later.\n";

/// A client certificate for `user`, who may read configmaps (the `view` role) but is not a
/// member of system:masters, so the in-flight budget applies to it.
fn limited_user(kapi: &Kapi, user: &str) -> (PathBuf, PathBuf) {
    let out = kapi.kubectl(&["create", "clusterrolebinding", user, "--clusterrole=view", &format!("--user={user}")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    match kapi.issue_client_cert(user, &[]) {
        Credential::Cert { cert, key } => (cert, key),
        other => panic!("not a certificate: {other:?}"),
    }
}

/// (status, headers, body) of one GET with `cert`.
fn curl(kapi: &Kapi, cert: &(PathBuf, PathBuf), path: &str) -> (u16, String, String) {
    let r = kapi.get_with_headers(path, false, Some(cert));
    (r.status, r.headers, r.body)
}

/// (status, lowercased headers, body size) of one GET with `cert`; the body (up to 20 MB) is
/// read in full and thrown away.
fn curl_discarding(kapi: &Kapi, cert: &(PathBuf, PathBuf), path: &str) -> (u16, String, u64) {
    let out = run_with_timeout(
        Command::new("curl")
            .args(["-sS", "--http1.1", "--max-time", "90", "-o", "/dev/null", "-D", "-", "-w", "\n%{http_code} %{size_download}", "--cacert"])
            .arg(kapi.pki_dir().join("ca.crt"))
            .arg("--cert")
            .arg(&cert.0)
            .arg("--key")
            .arg(&cert.1)
            .arg(format!("{}{path}", kapi.url())),
        Duration::from_secs(120),
    )
    .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    let (headers, last) = text.rsplit_once('\n').unwrap_or(("", ""));
    let mut fields = last.split_whitespace();
    let code = fields.next().and_then(|c| c.parse().ok()).unwrap_or(0);
    let size = fields.next().and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, headers.to_owned(), size)
}

#[test]
fn a_burst_of_slow_lists_gets_429_with_retry_after_and_watches_keep_working() {
    let kapi = Kapi::start_with(&["--max-requests-inflight", BUDGET]).expect("start kapi");
    let loader = limited_user(&kapi, "loader");
    let ns = "/api/v1/namespaces/default/configmaps";
    // Lists are slow the way big lists are: 40 objects of 512 KiB make a 21 MB answer to encode
    // and send, about a second each here (admin writes are never limited).
    std::thread::scope(|s| {
        for t in 0..4 {
            let kapi = &kapi;
            s.spawn(move || {
                for i in 0..10 {
                    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("big-{t}-{i}")},
                                    "data": {"payload": "x".repeat(512 * 1024)}});
                    assert_eq!(kapi.request(&Request::new("POST", ns).json(&cm)).status, 201);
                }
            });
        }
    });

    let (watch, burst) = std::thread::scope(|s| {
        // A watch by the limited user, open across the burst, waiting for one object.
        let watch = s.spawn(|| curl(&kapi, &loader, &format!("{ns}?watch=true&timeoutSeconds=30&fieldSelector=metadata.name%3Dduring")));
        std::thread::sleep(Duration::from_millis(300));
        let burst: Vec<_> = (0..BURST).map(|_| s.spawn(|| curl_discarding(&kapi, &loader, ns))).collect();
        // While the burst runs: masters are exempt, and the watch receives the event.
        std::thread::sleep(Duration::from_millis(300));
        let admin = kapi.request(&Request::new("POST", ns).json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "during"}})));
        assert_eq!(admin.status, 201, "system:masters must not be limited: {}", admin.raw);
        let burst: Vec<(u16, String, u64)> = burst.into_iter().map(|h| h.join().expect("curl thread")).collect();
        (watch.join().expect("watch thread"), burst)
    });

    let ok = burst.iter().filter(|r| r.0 == 200).count();
    let limited: Vec<_> = burst.iter().filter(|r| r.0 == 429).collect();
    let other: Vec<_> = burst.iter().filter(|r| r.0 != 200 && r.0 != 429).map(|r| r.0).collect();
    eprintln!("burst of {}: {ok} answered, {} refused with 429", burst.len(), limited.len());
    assert!(other.is_empty(), "only 200 or 429 are acceptable, got {other:?}");
    assert!(ok >= 10, "lists within the budget get through");
    assert!(limited.len() >= BURST / 4, "{BURST} concurrent slow lists with a budget of {BUDGET} must see many 429s");
    for (_, headers, size) in &limited {
        assert!(headers.contains("retry-after: 1"), "429 without Retry-After: {headers}");
        assert!(headers.contains("content-type: text/plain; charset=utf-8"), "{headers}");
        assert_eq!(*size, TOO_MANY.len() as u64, "kube's plain-text 429 body");
    }
    for (_, _, size) in burst.iter().filter(|r| r.0 == 200) {
        assert!(*size > 20_000_000, "every answered list is complete: {size} bytes");
    }
    assert_eq!(watch.0, 200, "the watch is long-running and never limited: {watch:?}");
    assert!(watch.2.contains(r#""name":"during""#), "the watch saw no event during the burst: {}", watch.2);
}
