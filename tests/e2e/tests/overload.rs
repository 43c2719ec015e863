//! `--max-requests-inflight`: a burst of concurrent lists beyond the budget gets 429 with
//! `Retry-After` and kube's TooManyRequests Status, never a 5xx; watches (long-running) and
//! system:masters are not limited.

use std::path::PathBuf;
use std::time::Duration;

use kapi_e2e::{Credential, Kapi, Request};
use serde_json::json;

/// A client certificate for `user` (no groups) signed by this kapi's CA, made with openssl.
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

#[test]
fn lists_beyond_the_budget_get_429_and_watches_keep_working() {
    let kapi = Kapi::start_with(&["--max-requests-inflight", "2"]).expect("start kapi");
    let loader = limited_user(&kapi, "loader");
    let ns = "/api/v1/namespaces/default/configmaps";
    // Make lists slow enough to overlap: a few thousand objects (admin is never limited).
    std::thread::scope(|s| {
        for t in 0..8 {
            let kapi = &kapi;
            s.spawn(move || {
                for i in 0..250 {
                    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{t}-{i}")},
                                    "data": {"payload": "x".repeat(512)}});
                    assert_eq!(kapi.request(&Request::new("POST", ns).json(&cm)).status, 201);
                }
            });
        }
    });

    let results = std::thread::scope(|s| {
        // A watch by the limited user, open across the burst.
        let watch = s.spawn(|| curl(&kapi, &loader, &format!("{ns}?watch=true&timeoutSeconds=8&fieldSelector=metadata.name%3Dduring")));
        std::thread::sleep(Duration::from_millis(300));
        let burst: Vec<_> = (0..48).map(|_| s.spawn(|| curl(&kapi, &loader, ns))).collect();
        // Masters are exempt even now.
        let admin = kapi.request(&Request::new("POST", ns).json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "during"}})));
        assert_eq!(admin.status, 201, "system:masters must not be limited: {}", admin.raw);
        let burst: Vec<(u16, String, String)> = burst.into_iter().map(|h| h.join().expect("curl thread")).collect();
        (watch.join().expect("watch thread"), burst)
    });
    let (watch, burst) = results;

    let ok = burst.iter().filter(|r| r.0 == 200).count();
    let limited: Vec<_> = burst.iter().filter(|r| r.0 == 429).collect();
    let other: Vec<_> = burst.iter().filter(|r| r.0 != 200 && r.0 != 429).map(|r| r.0).collect();
    eprintln!("burst of {}: {ok} answered, {} refused with 429", burst.len(), limited.len());
    assert!(other.is_empty(), "only 200 or 429 are acceptable, got {other:?}");
    assert!(ok >= 2, "some lists must get through");
    assert!(!limited.is_empty(), "48 concurrent lists with a budget of 2 must see 429s");
    for (_, headers, body) in &limited {
        assert!(headers.contains("retry-after: 1"), "429 without Retry-After: {headers}");
        let status: serde_json::Value = serde_json::from_str(body).expect("429 body is a Status");
        assert_eq!(status["reason"], "TooManyRequests");
        assert_eq!(status["message"], "Too many requests, please try again later.");
        assert_eq!(status["details"]["retryAfterSeconds"], 1);
    }
    assert_eq!(watch.0, 200, "the watch is long-running and never limited: {watch:?}");
    assert!(watch.2.contains(r#""name":"during""#), "the watch saw no event during the burst: {}", watch.2);
}
