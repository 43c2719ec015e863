//! Connection limits as kube sets them on its listener: an HTTP/1.1 connection waiting for a
//! request's head (idle after an answer, or a client trickling its headers) is closed after the
//! keep-alive idle time, and so is an HTTP/2 connection without a request in progress, while a
//! long answer such as a watch is not cut; HTTP/2 clients are told the stream limit
//! (`--http2-max-streams-per-connection`, 100 by default as kube's).

use std::time::Duration;

use kapi_e2e::raw::{http2_get, RawConnection};
use kapi_e2e::{Kapi, Request};
use serde_json::json;

/// The hidden `--connection-idle-timeout` in place of kube's 90 s, so the test need not wait.
const IDLE: Duration = Duration::from_secs(2);

fn open(kapi: &Kapi) -> RawConnection {
    let pki = kapi.pki_dir();
    RawConnection::open(kapi.port(), &pki.join("ca.crt"), &pki.join("admin.crt"), &pki.join("admin.key"))
}

#[test]
fn idle_and_stalled_connections_close_watches_run_on_and_http2_streams_are_bounded() {
    let kapi = Kapi::start_with(&["--connection-idle-timeout", "2s", "--http2-max-streams-per-connection", "100"]).expect("start kapi");

    // A head that never ends.
    let mut stalled = open(&kapi);
    stalled.send(b"GET /version HTTP/1.1\r\nHost: localhost\r\n");
    let closed = stalled.time_to_close().expect("a connection with an unfinished head stayed open");
    assert!(closed >= IDLE - Duration::from_millis(100), "closed after {closed:?}, before the idle time");

    // A keep-alive connection: answered, then closed once idle.
    let mut idle = open(&kapi);
    idle.send(b"GET /version HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let answer = idle.read_answer();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // A whole answer is sized, as kube sizes small answers, not chunked.
    let head = answer.split("\r\n\r\n").next().unwrap_or_default().to_ascii_lowercase();
    assert!(head.contains("content-length:") && !head.contains("transfer-encoding"), "{head}");
    idle.send(b"GET /version HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let again = idle.read_answer();
    assert!(again.starts_with("HTTP/1.1 200"), "the connection is kept alive between requests: {answer} / {again}");
    let closed = idle.time_to_close().expect("an idle keep-alive connection stayed open");
    assert!(closed >= IDLE - Duration::from_millis(100), "closed after {closed:?}, before the idle time");

    // A watch over HTTP/1.1 outlives the idle time: the timer runs only while waiting for a head.
    let ns = "/api/v1/namespaces/default/configmaps";
    let events = std::thread::scope(|s| {
        let watch = s.spawn(|| kapi.get_with_headers(&format!("{ns}?watch=true&timeoutSeconds=5"), true, None));
        std::thread::sleep(IDLE + Duration::from_secs(1));
        let created = kapi.request(&Request::new("POST", ns).json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}})));
        assert_eq!(created.status, 201, "{}", created.raw);
        watch.join().expect("watch thread")
    });
    assert_eq!(events.status, 200, "{events:?}");
    assert!(events.body.contains(r#""name":"late""#), "the watch was cut before the event came: {}", events.body);

    // HTTP/2: the server's SETTINGS carry the stream limit, and a connection without a
    // request in progress is told GOAWAY after the idle time.
    let pki = kapi.pki_dir();
    let (ca, cert, key) = (pki.join("ca.crt"), pki.join("admin.crt"), pki.join("admin.key"));
    let get = http2_get(kapi.port(), &ca, &cert, &key, "/version");
    assert_eq!((get.status, get.max_streams), (200, 100), "{get:?}");
    let closed = get.closed_after.expect("an idle HTTP/2 connection stayed open");
    assert!(closed >= IDLE - Duration::from_millis(100), "closed after {closed:?}, before the idle time");
    // A watch longer than the idle time keeps its connection: the idle time counts from its end.
    let watch = http2_get(kapi.port(), &ca, &cert, &key, &format!("{ns}?watch=true&timeoutSeconds=4"));
    assert_eq!(watch.status, 200, "{watch:?}");
    assert!(watch.took >= Duration::from_millis(3900), "the watch ended early: {watch:?}");
    let closed = watch.closed_after.expect("the HTTP/2 connection stayed open after the watch");
    assert!(closed >= IDLE - Duration::from_millis(100), "closed {closed:?} after the watch, before the idle time");

    // kube's rapid-reset mitigation: an anonymous client, or one refused 401, gets GOAWAY right
    // after its answer, so it cannot hold an HTTP/2 connection to multiplex on.
    for (token, status) in [(None, 200), (Some("not-a-token"), 401)] {
        let get = kapi_e2e::raw::http2_get_without_cert(kapi.port(), &ca, token, "/version");
        assert_eq!(get.status, status, "{get:?}");
        let closed = get.closed_after.expect("the unauthenticated HTTP/2 connection stayed open");
        assert!(closed < Duration::from_secs(1), "closed {closed:?} after the answer");
    }
}
