//! SIGTERM: /readyz fails at once, serving goes on for --shutdown-delay-duration with
//! `Connection: close` on HTTP/1.1 answers and watches still delivering, then the watches end
//! cleanly and kapi exits 0.

use std::time::{Duration, Instant};

use kapi_e2e::{Kapi, Request};
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
