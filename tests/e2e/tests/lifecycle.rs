//! The lifecycle as clients see it: health endpoints while starting, ready and shutting down;
//! SIGTERM fails /readyz at once, serving goes on for --shutdown-delay-duration with
//! `Connection: close` on HTTP/1.1 answers, GOAWAY on HTTP/2 and watches still delivering,
//! then new requests are refused (or answered 429 with --shutdown-send-retry-after) while
//! requests in flight finish, watches end cleanly and kapi exits 0.

use std::process::Command;
use std::time::{Duration, Instant};

use kapi_e2e::{run_with_timeout, Kapi, Request, Streaming};
use serde_json::json;

fn curl_headers(kapi: &Kapi, path: &str, client_cert: bool) -> (u16, String, String) {
    let r = kapi.get_with_headers(path, client_cert, None);
    (r.status, r.headers, r.body)
}

#[test]
fn sigterm_fails_readyz_keeps_serving_through_the_delay_then_exits_cleanly() {
    let mut kapi = Kapi::start_with(&["--shutdown-delay-duration", "3s"]).expect("start kapi");
    let ns = "/api/v1/namespaces/default/configmaps";
    let (ready, _, _) = curl_headers(&kapi, "/readyz", false);
    assert_eq!(ready, 200);

    std::thread::scope(|s| {
        let watch = s.spawn(|| curl_headers(&kapi, &format!("{ns}?watch=true&timeoutSeconds=60"), true));
        std::thread::sleep(Duration::from_millis(500));
        let signalled = Instant::now();
        kapi.signal("TERM").expect("SIGTERM");
        std::thread::sleep(Duration::from_millis(300));

        // During the delay: not ready, but still serving, and telling HTTP/1.1 clients to go.
        let (code, _, body) = curl_headers(&kapi, "/readyz?verbose", false);
        assert_eq!(code, 500, "/readyz after SIGTERM: {body}");
        assert!(body.contains("[-]shutdown failed: reason withheld"), "{body}");
        let (code, _, body) = curl_headers(&kapi, "/livez", false);
        assert_eq!(code, 200, "/livez stays green: {body}");
        let (code, headers, _) = curl_headers(&kapi, ns, true);
        assert_eq!(code, 200);
        assert!(headers.contains("connection: close"), "no Connection: close during the delay: {headers}");
        let created = kapi.request(&Request::new("POST", ns).json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}})));
        assert_eq!(created.status, 201, "writes are still served during the delay: {}", created.raw);
        assert!(signalled.elapsed() < Duration::from_secs(3), "the checks above must fit in the delay");

        // The watch saw the late write, then ended cleanly when draining began.
        let (code, _, events) = watch.join().expect("watch thread");
        assert_eq!(code, 200);
        assert!(events.contains(r#""name":"late""#), "the watch missed the event written during the delay: {events}");
        assert!(signalled.elapsed() >= Duration::from_secs(3), "the watch ended before the delay was over");
    });
    let code = kapi.terminate().expect("reap kapi");
    assert_eq!(code, Some(0), "kapi exits 0 after the drain");
}

#[test]
fn watches_end_spread_over_the_termination_grace_period() {
    let mut kapi = Kapi::start_with(&["--shutdown-watch-termination-grace-period", "2s"]).expect("start kapi");
    let ns = "/api/v1/namespaces/default/configmaps";
    let signalled = std::sync::OnceLock::new();
    let ended: Vec<Duration> = std::thread::scope(|s| {
        let watches: Vec<_> = (0..10)
            .map(|_| {
                let (kapi, signalled) = (&kapi, &signalled);
                s.spawn(move || {
                    let r = kapi.get_with_headers(&format!("{ns}?watch=true&timeoutSeconds=60"), true, None);
                    assert_eq!(r.status, 200, "{r:?}");
                    let at: &Instant = signalled.get().expect("watches end only after SIGTERM");
                    at.elapsed()
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(800));
        signalled.set(Instant::now()).expect("set once");
        kapi.signal("TERM").expect("SIGTERM");
        watches.into_iter().map(|w| w.join().expect("watch thread")).collect()
    });
    let first = ended.iter().min().copied().unwrap_or_default();
    let last = ended.iter().max().copied().unwrap_or_default();
    assert!(last < Duration::from_secs(5), "watches outlived the grace period: {ended:?}");
    assert!(last - first > Duration::from_millis(300), "10 watches ended at once, not spread over 2s: {ended:?}");
    assert_eq!(kapi.terminate().expect("reap"), Some(0));
}

/// Holds SQLite's write lock on the database for `seconds` (prints "locked", then "released").
const HOLD_WRITE_LOCK: &str = r#"
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
db.execute("COMMIT")
print("released", flush=True)
"#;

/// (status, body) of a GET over HTTP/1.1; `admin` sends the admin certificate (single-check
/// paths are not public once RBAC applies, as on kube).
fn get(kapi: &Kapi, path: &str, admin: bool) -> (u16, String) {
    let r = kapi.get_with_headers(path, admin, None);
    (r.status, r.body)
}

fn lines(list: &[&str]) -> String {
    list.iter().map(|l| format!("{l}\n")).collect()
}

const HOOKS: [&str; 16] = [
    "poststarthook/start-system-namespaces-controller",
    "poststarthook/bootstrap-controller",
    "poststarthook/rbac/bootstrap-roles",
    "poststarthook/start-cluster-authentication-info-controller",
    "poststarthook/scheduling/bootstrap-system-priority-classes",
    "poststarthook/start-kube-apiserver-identity-lease-controller",
    // API Priority and Fairness, on by default as in kube.
    "poststarthook/priority-and-fairness-config-producer",
    "poststarthook/priority-and-fairness-config-consumer",
    "poststarthook/priority-and-fairness-filter",
    // The aggregator's, as kube-aggregator registers them.
    "poststarthook/start-kube-aggregator-informers",
    "poststarthook/apiservice-status-local-available-controller",
    "poststarthook/apiservice-status-remote-available-controller",
    "poststarthook/kube-apiserver-autoregistration",
    // The extensions tier's, as kube's apiextensions-apiserver registers them.
    "poststarthook/start-apiextensions-informers",
    "poststarthook/start-apiextensions-controllers",
    "poststarthook/crd-informer-synced",
];

#[test]
fn health_endpoints_answer_as_kube_while_starting_ready_and_shutting_down() {
    let mut kapi = Kapi::start_with(&["--livez-grace-period", "60s", "--shutdown-delay-duration", "3s"]).expect("start kapi");
    assert_eq!(kapi.terminate().expect("stop"), Some(0));

    // START-UP: another process holds the database's write lock, so opening storage waits and
    // every post-start hook with it, while the listener already answers.
    let db = kapi.data_dir().join("kapi.db");
    let mut lock = Streaming::spawn(Command::new("python3").args(["-c", HOLD_WRITE_LOCK]).arg(&db).arg("6")).expect("python3");
    assert!(lock.wait_for_line(Duration::from_secs(10), |l| l == "locked").is_some(), "no lock: {}", lock.stop());
    kapi.restart_listening().expect("listener up");
    std::thread::scope(|s| {
        // A request made now waits for the server instead of failing.
        let early = s.spawn(|| kapi.request(&Request::get("/api/v1/namespaces/default")));

        let (code, body) = get(&kapi, "/readyz?verbose", false);
        let mut expected = vec!["[+]ping ok", "[+]log ok", "[-]etcd failed: reason withheld", "[-]etcd-readiness failed: reason withheld", "[-]informer-sync failed: reason withheld"];
        let failed_hooks: Vec<String> = HOOKS.iter().map(|h| format!("[-]{h} failed: reason withheld")).collect();
        expected.extend(failed_hooks.iter().map(String::as_str));
        expected.extend(["[+]shutdown ok", "readyz check failed"]);
        assert_eq!((code, body.as_str()), (500, lines(&expected).as_str()));

        // Within --livez-grace-period unfinished hooks pass /livez; storage does not.
        let (code, body) = get(&kapi, "/livez?verbose", false);
        let passing_hooks: Vec<String> = HOOKS.iter().map(|h| format!("[+]{h} ok")).collect();
        let mut expected = vec!["[+]ping ok", "[+]log ok", "[-]etcd failed: reason withheld"];
        expected.extend(passing_hooks.iter().map(String::as_str));
        expected.push("livez check failed");
        assert_eq!((code, body.as_str()), (500, lines(&expected).as_str()));
        assert_eq!(get(&kapi, "/livez?exclude=etcd", false), (200, "ok".into()));
        assert_eq!(get(&kapi, "/healthz", false).0, 500, "no grace period on /healthz");

        // Each check on its own path, with its reason.
        assert_eq!(get(&kapi, "/readyz/shutdown", true), (200, "ok".into()));
        assert_eq!(get(&kapi, "/readyz/poststarthook/bootstrap-controller", true), (500, "internal server error: not finished\n".into()));
        assert_eq!(get(&kapi, "/readyz/etcd", true), (500, "internal server error: etcd client connection not yet established\n".into()));
        assert_eq!(
            get(&kapi, "/readyz/informer-sync", true),
            (500, "internal server error: 2 informers not started yet: [watch-caches rbac-index]\n".into())
        );
        assert_eq!(get(&kapi, "/readyz/no-such-check", true), (404, "404 page not found\n".into()));
        let mut all_failing = String::from("/readyz?exclude=etcd&exclude=etcd-readiness&exclude=informer-sync");
        for h in HOOKS {
            all_failing.push_str(&format!("&exclude={h}"));
        }
        assert_eq!(get(&kapi, &all_failing, false), (200, "ok".into()), "excluding every failing check passes");
        assert_eq!(get(&kapi, "/version", false).0, 200, "/version answers from the start");

        assert!(lock.wait_for_line(Duration::ZERO, |l| l == "released").is_none(), "the samples above must be taken while start-up is held");
        let early = early.join().expect("early request");
        assert_eq!(early.status, 200, "a request made during start-up is served once the server is up: {}", early.raw);
    });
    assert!(lock.wait_for_line(Duration::from_secs(20), |l| l == "released").is_some());
    kapi.wait_ready(Duration::from_secs(30)).expect("ready once the lock is released");

    // READY.
    let (code, body) = get(&kapi, "/readyz?verbose", false);
    let mut expected = vec!["[+]ping ok", "[+]log ok", "[+]etcd ok", "[+]etcd-readiness ok", "[+]informer-sync ok"];
    let ok_hooks: Vec<String> = HOOKS.iter().map(|h| format!("[+]{h} ok")).collect();
    expected.extend(ok_hooks.iter().map(String::as_str));
    expected.extend(["[+]shutdown ok", "readyz check passed"]);
    assert_eq!((code, body.as_str()), (200, lines(&expected).as_str()));
    assert_eq!(get(&kapi, "/readyz", false), (200, "ok".into()));
    assert_eq!(get(&kapi, "/livez", false), (200, "ok".into()));
    assert_eq!(get(&kapi, "/healthz", false), (200, "ok".into()));
    assert_eq!(get(&kapi, "/readyz/poststarthook/rbac/bootstrap-roles", true), (200, "ok".into()));
    assert_eq!(get(&kapi, "/livez/shutdown", true).0, 404, "shutdown is a readiness check only");
    let (code, body) = get(&kapi, "/livez?verbose&exclude=ping&exclude=bogus&exclude=also-bogus", false);
    assert_eq!(code, 200);
    assert!(body.starts_with("[+]ping excluded: ok\n[+]log ok\n"), "{body}");
    assert!(body.ends_with("warn: some health checks cannot be excluded: no matches for \"also-bogus\",\"bogus\"\nlivez check passed\n"), "{body}");

    // SHUTDOWN, within --shutdown-delay-duration.
    let signalled = Instant::now();
    kapi.signal("TERM").expect("SIGTERM");
    std::thread::sleep(Duration::from_millis(300));
    let (code, body) = get(&kapi, "/readyz?verbose", false);
    let mut expected = vec!["[+]ping ok", "[+]log ok", "[+]etcd ok", "[+]etcd-readiness ok", "[+]informer-sync ok"];
    expected.extend(ok_hooks.iter().map(String::as_str));
    expected.extend(["[-]shutdown failed: reason withheld", "readyz check failed"]);
    assert_eq!((code, body.as_str()), (500, lines(&expected).as_str()));
    assert_eq!(get(&kapi, "/readyz/shutdown", true), (500, "internal server error: process is shutting down\n".into()));
    assert_eq!(get(&kapi, "/readyz?exclude=shutdown", false), (200, "ok".into()));
    assert_eq!(get(&kapi, "/livez", false), (200, "ok".into()));
    assert_eq!(get(&kapi, "/healthz", false), (200, "ok".into()));
    assert!(signalled.elapsed() < Duration::from_secs(3), "the shutdown samples must fit in the delay");
    assert_eq!(kapi.terminate().expect("reap"), Some(0));
}

/// Two GETs of `path` in one curl over HTTP/2; returns curl's verbose log.
fn two_http2_gets(kapi: &Kapi, path: &str) -> String {
    let pki = kapi.pki_dir();
    let url = format!("{}{path}", kapi.url());
    let out = run_with_timeout(
        Command::new("curl")
            .args(["-sS", "--http2", "-v", "-o", "/dev/null", "-o", "/dev/null", "--cacert"])
            .arg(pki.join("ca.crt"))
            .arg("--cert")
            .arg(pki.join("admin.crt"))
            .arg("--key")
            .arg(pki.join("admin.key"))
            .args([&url, &url]),
        Duration::from_secs(30),
    )
    .expect("curl");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A curl with the admin certificate over `version` (`--http1.1`, `--http2`).
fn admin_curl(kapi: &Kapi, version: &str) -> Command {
    let pki = kapi.pki_dir();
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", version, "--max-time", "60", "-w", "\n%{http_code}", "--cacert"])
        .arg(pki.join("ca.crt"))
        .arg("--cert")
        .arg(pki.join("admin.crt"))
        .arg("--key")
        .arg(pki.join("admin.key"));
    cmd
}

#[test]
fn http2_gets_goaway_in_the_delay_and_retry_after_answers_429_while_requests_drain() {
    let mut kapi = Kapi::start_with(&["--shutdown-delay-duration", "3s", "--shutdown-send-retry-after=true"]).expect("start kapi");
    let ns = "/api/v1/namespaces/default/configmaps";
    let before = two_http2_gets(&kapi, "/version");
    assert!(before.contains("Re-using existing connection"), "HTTP/2 connections are reused while ready:\n{before}");

    std::thread::scope(|s| {
        // An HTTP/2 watch open across SIGTERM: its connection gets GOAWAY, the stream goes on.
        let watch = s.spawn(|| {
            let url = format!("{}{ns}?watch=true&timeoutSeconds=60", kapi.url());
            let out = run_with_timeout(admin_curl(&kapi, "--http2").arg("-N").arg(url), Duration::from_secs(60)).expect("watch");
            String::from_utf8_lossy(&out.stdout).into_owned()
        });
        std::thread::sleep(Duration::from_millis(500));
        let signalled = Instant::now();
        kapi.signal("TERM").expect("SIGTERM");
        std::thread::sleep(Duration::from_millis(300));

        // During the delay: every HTTP/2 answer comes with GOAWAY, so the second request of one
        // curl needs a new connection.
        let during = two_http2_gets(&kapi, "/version");
        assert!(during.contains("GOAWAY") && !during.contains("Re-using existing connection"), "no GOAWAY during the delay:\n{during}");
        assert!(during.contains("(#1)"), "the second request did not open a new connection:\n{during}");
        let late = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}});
        assert_eq!(kapi.request(&Request::new("POST", ns).json(&late)).status, 201, "writes are served during the delay");

        // A slow upload starts in the delay and is still in flight when it ends.
        let slow = s.spawn(|| {
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "slow"}, "data": {"payload": "x".repeat(5000)}});
            let file = kapi.data_dir().join("slow.json");
            std::fs::write(&file, body.to_string()).expect("write body");
            let out = run_with_timeout(
                admin_curl(&kapi, "--http1.1")
                    .args(["--limit-rate", "1k", "-X", "POST", "-H", "Content-Type: application/json", "--data-binary"])
                    .arg(format!("@{}", file.display()))
                    .arg(format!("{}{ns}", kapi.url())),
                Duration::from_secs(60),
            )
            .expect("slow upload");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            (text.rsplit('\n').next().unwrap_or_default().to_owned(), Instant::now())
        });

        // After the delay: the listener stays open, new requests get kube's 429.
        std::thread::sleep(Duration::from_secs(3).saturating_sub(signalled.elapsed()) + Duration::from_millis(300));
        let refused = kapi_e2e::wait_for(Duration::from_secs(2), || {
            let r = kapi.get_with_headers(ns, true, None);
            (r.status == 429).then_some(r)
        })
        .expect("no 429 after the delay");
        let refused_at = Instant::now();
        assert!(refused.headers.contains("retry-after: 5"), "{}", refused.headers);
        assert!(refused.headers.contains("connection: close"), "{}", refused.headers);
        assert_eq!(refused.body, "The apiserver is shutting down, please try again later.\n");
        let (code, _) = get(&kapi, "/readyz", false);
        assert_eq!(code, 500, "health probes are still answered (not refused)");

        let (slow_code, slow_done) = slow.join().expect("slow thread");
        assert_eq!(slow_code, "201", "the request in flight finishes");
        assert!(slow_done > refused_at, "the slow request was still in flight when new ones were refused");
        let events = watch.join().expect("watch thread");
        assert!(events.contains(r#""name":"late""#), "the HTTP/2 watch missed the event written after GOAWAY: {events}");
    });
    assert_eq!(kapi.terminate().expect("reap"), Some(0));
}
