//! `--max-requests-inflight`: a burst of concurrent slow lists far beyond the budget gets kube's
//! 429 (plain text, `Retry-After: 1`), never a 5xx, while watches (long-running, not counted)
//! keep delivering events and system:masters is never limited. A request whose body trickles
//! in ends at its deadline with 504 and gives its in-flight slot back.

use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kapi_e2e::raw::RawConnection;
use kapi_e2e::{run_with_timeout, Credential, Kapi, Request};
use serde_json::{json, Value};

/// The budget under test.
const BUDGET: &str = "10";
/// Concurrent lists in the burst.
const BURST: usize = 200;
/// kube's 429 body.
const TOO_MANY: &str = "Too many requests, please try again later.\n";

/// A client certificate for `user`, bound to the cluster role `role` but not a member of
/// system:masters, so the in-flight budgets apply to it.
fn limited_user(kapi: &Kapi, user: &str, role: &str) -> (PathBuf, PathBuf) {
    let out = kapi.kubectl(&["create", "clusterrolebinding", user, &format!("--clusterrole={role}"), &format!("--user={user}")]);
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
    // max-in-flight's budget (APF, on by default, has its own tests in flowcontrol.rs).
    let kapi = Kapi::start_with(&["--max-requests-inflight", BUDGET, "--enable-priority-and-fairness=false"]).expect("start kapi");
    let loader = limited_user(&kapi, "loader", "view");
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

/// Sends, as `cert`, the head of a POST announcing a 1,000-byte body and then only its first
/// bytes, says so on `sent`, and returns the server's answer (head and body, as text) and how
/// long after the send it came.
fn trickle(kapi: &Kapi, cert: &(PathBuf, PathBuf), path: &str, sent: &mpsc::Sender<()>) -> (String, Duration) {
    let mut conn = RawConnection::open(kapi.port(), &kapi.pki_dir().join("ca.crt"), &cert.0, &cert.1);
    let head = format!("POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"apiVersion\": ");
    conn.send(head.as_bytes());
    let at = Instant::now();
    sent.send(()).expect("report");
    let answer = conn.read_answer();
    (answer, at.elapsed())
}

#[test]
fn a_body_trickling_past_the_deadline_gets_504_and_frees_its_in_flight_slot() {
    let kapi = Kapi::start_with(&["--max-mutating-requests-inflight", "1", "--enable-priority-and-fairness=false"]).expect("start kapi");
    let writer = limited_user(&kapi, "writer", "edit");
    let ns = "/api/v1/namespaces/default/configmaps";
    let probe = || {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe"}});
        kapi.request(&Request::new("POST", &format!("{ns}?dryRun=All")).json(&cm).with_client_cert(writer.0.clone(), writer.1.clone()))
    };
    let ((answer, took), refused) = std::thread::scope(|s| {
        let (sent, sent_rx) = mpsc::channel();
        let (kapi, writer) = (&kapi, &writer);
        let slow = s.spawn(move || trickle(kapi, writer, &format!("{ns}?timeout=3s"), &sent));
        sent_rx.recv().expect("the slow request is under way");
        // While its body is still due, the slow request holds the one mutating slot.
        std::thread::sleep(Duration::from_millis(500));
        let refused = probe();
        (slow.join().expect("trickle thread"), refused)
    });
    assert_eq!(refused.status, 429, "the trickling request must hold the mutating slot: {}", refused.raw);
    assert!(answer.starts_with("HTTP/1.1 504"), "{answer}");
    assert!(answer.contains(r#""reason":"Timeout""#), "{answer}");
    assert!(answer.contains("Timeout: request did not complete within the allotted timeout"), "{answer}");
    assert!(took >= Duration::from_millis(2900), "answered before the 3 s deadline: {took:?}");
    assert!(took < Duration::from_secs(30), "the deadline did not end the upload: {took:?}");
    // The slot is free again, and nothing was written.
    let after = probe();
    assert_eq!(after.status, 201, "{}", after.raw);
    let list = kapi.get_json(ns);
    // Every namespace has kube-root-ca.crt (kube's root-ca-cert-publisher); nothing else.
    let written: Vec<&Value> = list["items"].as_array().into_iter().flatten().filter(|i| i["metadata"]["name"] != "kube-root-ca.crt").collect();
    assert!(written.is_empty(), "{list}");
}
