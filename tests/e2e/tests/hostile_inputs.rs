//! Hostile inputs (issue 20): each is answered with a clear Status (or, below HTTP, the answer
//! kube-apiserver's Go server gives), kapi's memory stays bounded (read from /proc/<pid>/status),
//! nothing is stored, and kapi still answers a normal GET afterwards.
//!
//! Three tests, each on its own kapi:
//! - `hostile_requests`: oversize headers, slowloris bodies, YAML alias bombs, 100k-deep nesting
//!   (JSON, YAML, patches), invalid UTF-8 and NUL bytes in names, namespaces, label values and
//!   paths;
//! - `ten_thousand_watches`: one user opens 10,000 watches (100 HTTP/2 connections of 100
//!   streams), all get their event, and closing them gives the memory back;
//! - `unbounded_list`: N ConfigMaps (10,000 here; 100,000 with `KAPI_HOSTILE_FULL=1`) listed
//!   without a limit, alone and four at once.
//!
//! Every row prints its answer and kapi's RSS before, at the peak and after (VmHWM, reset
//! through /proc/<pid>/clear_refs before each row), so `--no-capture` gives the table of
//! docs/security.md ("Hostile inputs").

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use kapi_e2e::load::tls_client_config;
use kapi_e2e::{Kapi, Request};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

const NS: &str = "hostile";
const MIB: u64 = 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Memory of the kapi process.

/// A field of /proc/<pid>/status in bytes (`VmRSS`, `VmHWM`).
fn proc_status(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_else(|e| panic!("kapi ({pid}) is gone: {e}"));
    let line = text.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    let kib: u64 = line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("bad line {line:?}"));
    kib * 1024
}

fn rss(pid: u32) -> u64 {
    proc_status(pid, "VmRSS")
}

/// Resets the peak RSS (VmHWM) to the current RSS; false when the kernel does not allow it.
fn reset_peak(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| !s.contains("State:\tZ"))
}

/// RSS before, at the peak and after one row.
#[derive(Debug, Clone, Copy)]
struct Mem {
    before: u64,
    peak: u64,
    after: u64,
}

impl std::fmt::Display for Mem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = |b: u64| b as f64 / MIB as f64;
        write!(f, "{:.0} / {:.0} / {:.0} MiB", m(self.before), m(self.peak), m(self.after))
    }
}

/// Runs `f`, measuring kapi's RSS around it; the peak is VmHWM when it can be reset, else
/// the highest of samples taken every 10 ms.
fn measured<T>(pid: u32, f: impl FnOnce() -> T) -> (T, Mem) {
    let hwm = reset_peak(pid);
    let before = rss(pid);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            while !stop.load(Ordering::SeqCst) {
                if !alive(pid) {
                    break;
                }
                peak = peak.max(rss(pid));
                std::thread::sleep(Duration::from_millis(10));
            }
            peak
        })
    };
    let out = f();
    stop.store(true, Ordering::SeqCst);
    let sampled = sampler.join().expect("sampler");
    assert!(alive(pid), "kapi died");
    let after = rss(pid);
    let peak = if hwm { proc_status(pid, "VmHWM") } else { sampled }.max(sampled).max(after);
    (out, Mem { before, peak, after })
}

// ---------------------------------------------------------------------------------------------
// Raw connections.

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}

fn admin_tls(kapi: &Kapi, alpn: &[u8]) -> Arc<rustls::ClientConfig> {
    let pki = kapi.pki_dir();
    let mut config = tls_client_config(&pki.join("ca.crt"), &pki.join("admin.crt"), &pki.join("admin.key"));
    if !alpn.is_empty() {
        config.alpn_protocols = vec![alpn.to_vec()];
    }
    Arc::new(config)
}

async fn tls_connect(port: u16, tls: Arc<rustls::ClientConfig>) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
    let _ = tcp.set_nodelay(true);
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("server name");
    TlsConnector::from(tls).connect(name, tcp).await.expect("TLS handshake")
}

/// One HTTP/1.1 answer: code, headers (lowercased) and body (de-chunked).
#[derive(Debug, Clone, Default)]
struct Answer {
    code: u16,
    headers: String,
    body: String,
}

impl Answer {
    fn short(&self) -> String {
        let s = format!("{} {}", self.code, self.body.trim());
        s.chars().take(300).collect()
    }
}

/// Parses what came back on a raw HTTP/1.1 connection (code 0: nothing, the connection closed).
fn parse_answer(raw: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else { return Answer::default() };
    let code = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let headers = head.to_ascii_lowercase();
    let body = if headers.contains("transfer-encoding: chunked") {
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let Ok(n) = usize::from_str_radix(size.trim(), 16) else { break };
            if n == 0 || after.len() < n {
                out.push_str(&after[..n.min(after.len())]);
                break;
            }
            out.push_str(&after[..n]);
            rest = after[n..].trim_start_matches("\r\n");
        }
        out
    } else {
        body.to_owned()
    };
    Answer { code, headers, body }
}

/// Whether `raw` holds a whole HTTP/1.1 answer.
fn complete(raw: &[u8]) -> bool {
    let a = parse_answer(raw);
    if a.code == 0 {
        return false;
    }
    if a.headers.contains("transfer-encoding: chunked") {
        return String::from_utf8_lossy(raw).ends_with("0\r\n\r\n");
    }
    let length = a.headers.lines().find_map(|l| l.strip_prefix("content-length:").and_then(|v| v.trim().parse::<usize>().ok()));
    length.is_none_or(|n| a.body.len() >= n)
}

/// `n` raw HTTP/1.1 POSTs to the collection at once, each on its own connection, declaring
/// `content_length` and writing `body(i)` `chunk` bytes every `pause`; their answers in order.
async fn concurrent_posts(port: u16, tls: &Arc<rustls::ClientConfig>, n: usize, content_length: usize, chunk: usize, pause: Duration, body: impl Fn(usize) -> Vec<u8>) -> Vec<Answer> {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let head = h1_head("POST", &collection(), "", Some(content_length));
            tokio::spawn(raw_h1(port, tls.clone(), head, body(i), chunk, pause, Duration::from_secs(60)))
        })
        .collect();
    let mut out = Vec::with_capacity(n);
    for task in tasks {
        out.push(task.await.expect("POST task"));
    }
    out
}

/// Sends `head` then `body` in chunks of `chunk` bytes every `pause`, reading at the same time;
/// returns the answer as soon as it is whole (the server may answer before the body is sent),
/// or what came when the connection closed, or after `bound`.
async fn raw_h1(port: u16, tls: Arc<rustls::ClientConfig>, head: Vec<u8>, body: Vec<u8>, chunk: usize, pause: Duration, bound: Duration) -> Answer {
    let conn = tls_connect(port, tls).await;
    let (mut rd, mut wr) = tokio::io::split(conn);
    let writer = tokio::spawn(async move {
        if wr.write_all(&head).await.is_err() {
            return;
        }
        let _ = wr.flush().await;
        for piece in body.chunks(chunk.max(1)) {
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            if wr.write_all(piece).await.is_err() || wr.flush().await.is_err() {
                return;
            }
        }
        // Keep the write half open: closing it would end the request early.
        tokio::time::sleep(Duration::from_secs(3600)).await;
    });
    let mut raw = Vec::new();
    let read = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    raw.extend_from_slice(&buf[..n]);
                    if complete(&raw) {
                        break;
                    }
                }
            }
        }
    };
    let _ = tokio::time::timeout(bound, read).await;
    writer.abort();
    parse_answer(&raw)
}

fn h1_head(method: &str, path: &str, extra: &str, length: Option<usize>) -> Vec<u8> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: kapi-e2e\r\nAccept: application/json\r\n{extra}");
    if let Some(n) = length {
        head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {n}\r\n"));
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// One HTTP/2 GET with an extra header of `header_bytes` bytes; the code, or what ended the
/// stream or the connection.
async fn h2_get_with_header(port: u16, tls: Arc<rustls::ClientConfig>, path: &str, header_bytes: usize) -> Result<u16, String> {
    let conn = tls_connect(port, tls).await;
    let (client, connection) = h2::client::Builder::new().handshake::<_, Bytes>(conn).await.map_err(|e| format!("handshake: {e}"))?;
    let driver = tokio::spawn(async move { connection.await.map_err(|e| e.to_string()) });
    let mut client = client.ready().await.map_err(|e| format!("ready: {e}"))?;
    let req = http::Request::get(format!("https://localhost:{port}{path}"))
        .header("x-big", "a".repeat(header_bytes))
        .body(())
        .expect("request");
    let (answer, _) = client.send_request(req, true).map_err(|e| format!("send: {e}"))?;
    let out = match tokio::time::timeout(Duration::from_secs(30), answer).await {
        Ok(Ok(resp)) => Ok(resp.status().as_u16()),
        Ok(Err(e)) => Err(format!("stream ended: {e}")),
        Err(_) => Err("no answer in 30 s".to_owned()),
    };
    drop(client);
    driver.abort();
    out
}

// ---------------------------------------------------------------------------------------------
// Stored state.

/// Every stored ConfigMap, Secret and Namespace with its resourceVersion.
fn snapshot(kapi: &Kapi) -> Vec<String> {
    let mut out = Vec::new();
    for path in ["/api/v1/configmaps", "/api/v1/secrets", "/api/v1/namespaces"] {
        let list = kapi.get_json(path);
        for item in list["items"].as_array().into_iter().flatten() {
            let m = &item["metadata"];
            out.push(format!("{path} {}/{} rv={}", m["namespace"].as_str().unwrap_or(""), m["name"].as_str().unwrap_or(""), m["resourceVersion"]));
        }
    }
    out.sort();
    out
}

fn create_namespace(kapi: &Kapi, name: &str) {
    let r = kapi.request(&Request::new("POST", "/api/v1/namespaces").json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})));
    assert_eq!(r.status, 201, "create namespace {name}: {}", r.raw);
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}})
}

fn collection() -> String {
    format!("/api/v1/namespaces/{NS}/configmaps")
}

// ---------------------------------------------------------------------------------------------
// The table.

/// What a row expects.
#[derive(Clone, Copy)]
enum Want {
    /// This code and a Failure Status with this reason whose message holds this text ("":
    /// not checked).
    Status(u16, &'static str, &'static str),
    /// This code, any body (answers below the API: hyper's, as Go's, carry no Status).
    Code(u16),
    /// One of these codes (Status bodies when >= 400 and not 431).
    AnyOf(&'static [u16]),
}

struct Row {
    name: &'static str,
    sent: String,
    answer: String,
    kube: &'static str,
    mem: Mem,
}

struct Table {
    pid: u32,
    rows: Vec<Row>,
    failures: Vec<String>,
}

impl Table {
    fn new(pid: u32) -> Self {
        Table { pid, rows: Vec::new(), failures: Vec::new() }
    }

    fn fail(&mut self, row: &str, what: String) {
        eprintln!("FAIL {row}: {what}");
        self.failures.push(format!("{row}: {what}"));
    }

    /// Checks one answer against `want`.
    fn check(&mut self, row: &str, code: u16, body: &str, want: Want) -> String {
        let status: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let short: String = body.trim().chars().take(240).collect();
        let is_status = status["kind"] == "Status" && status["status"] == "Failure" && status["code"] == json!(code);
        match want {
            Want::Status(c, reason, message) => {
                if code != c {
                    self.fail(row, format!("expected {c} {reason}, got {code}: {short}"));
                } else if !is_status || status["reason"] != reason {
                    self.fail(row, format!("expected a Failure Status with reason {reason}: {short}"));
                } else if !status["message"].as_str().unwrap_or("").contains(message) {
                    self.fail(row, format!("message lacks {message:?}: {short}"));
                }
            }
            Want::Code(c) => {
                if code != c {
                    self.fail(row, format!("expected HTTP {c}, got {code}: {short}"));
                }
            }
            Want::AnyOf(codes) => {
                if !codes.contains(&code) {
                    self.fail(row, format!("expected one of {codes:?}, got {code}: {short}"));
                } else if code >= 400 && code != 431 && !is_status {
                    self.fail(row, format!("{code} without a Failure Status: {short}"));
                }
            }
        }
        if is_status {
            format!("{code} {} \"{}\"", status["reason"].as_str().unwrap_or(""), status["message"].as_str().unwrap_or("").chars().take(160).collect::<String>())
        } else {
            format!("{code} {short}")
        }
    }

    /// Checks that kapi lives, answers a GET, stored nothing, and that its memory stayed under
    /// `peak_bound` above the row's starting RSS and came back under `after_bound` above it.
    #[allow(clippy::too_many_arguments)]
    fn record(&mut self, kapi: &Kapi, before: &[String], name: &'static str, sent: String, answer: String, kube: &'static str, mem: Mem, peak_bound: u64, after_bound: u64) {
        if !alive(self.pid) {
            self.fail(name, "kapi died".to_owned());
            panic!("kapi died on {name}; failures so far:\n{}", self.failures.join("\n"));
        }
        let get = kapi.request(&Request::get(&format!("/api/v1/namespaces/{NS}/configmaps/keep")));
        if get.status != 200 {
            self.fail(name, format!("a normal GET afterwards got {}: {}", get.status, get.raw));
        }
        let after = snapshot(kapi);
        if after != before {
            self.fail(name, format!("stored state changed:\nbefore {before:?}\nafter  {after:?}"));
        }
        if mem.peak > mem.before + peak_bound {
            self.fail(name, format!("peak RSS {} MiB above the row's start, bound {} MiB ({mem})", (mem.peak - mem.before) / MIB, peak_bound / MIB));
        }
        // The allocator gives freed pages back to the system after a while: wait for it (up
        // to 5 s) before judging what a row left behind.
        let mut mem = mem;
        let settle = Instant::now();
        while mem.after > mem.before + after_bound && settle.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(250));
            mem.after = rss(self.pid);
        }
        if mem.after > mem.before + after_bound {
            self.fail(name, format!("RSS after {} MiB above the row's start, bound {} MiB ({mem})", (mem.after - mem.before) / MIB, after_bound / MIB));
        }
        eprintln!("ROW | {name} | {sent} | {answer} | {kube} | {mem}");
        self.rows.push(Row { name, sent, answer, kube, mem });
    }
}

/// A curl request as one row (the usual case).
#[allow(clippy::too_many_arguments)]
fn curl_row(kapi: &Kapi, t: &mut Table, before: &[String], name: &'static str, sent: &str, req: Request, want: Want, kube: &'static str, peak_bound: u64) {
    let (r, mem) = measured(t.pid, || kapi.request(&req));
    let answer = t.check(name, r.status, &r.raw, want);
    // What a row's request allocated may stay with the allocator a while after it is freed:
    // the RSS afterwards is held to the same bound as the peak.
    t.record(kapi, before, name, sent.to_owned(), answer, kube, mem, peak_bound, peak_bound);
}

/// `depth` nested `[`...`]`.
fn nested_arrays(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// `depth` nested `{"a":`...`}` around `{}`.
fn nested_objects(depth: usize) -> String {
    format!("{}{{}}{}", r#"{"a":"#.repeat(depth), "}".repeat(depth))
}

const DEEP: usize = 100_000;

#[test]
fn hostile_requests() {
    let kapi = Kapi::start_with(&["--request-timeout", "4s"]).expect("start kapi");
    let pid = kapi.pid().expect("pid");
    create_namespace(&kapi, NS);
    let keep = kapi.request(&Request::new("POST", &collection()).json(&configmap("keep")));
    assert_eq!(keep.status, 201, "{}", keep.raw);
    let before = snapshot(&kapi);
    let mut t = Table::new(pid);
    let rt = runtime();
    let port = kapi.port();
    let h1 = admin_tls(&kapi, b"");
    let h2 = admin_tls(&kapi, b"h2");
    let keep_path = format!("{}/keep", collection());
    eprintln!("baseline RSS {} MiB", rss(pid) / MIB);

    // --- Oversize headers ----------------------------------------------------------------
    for (name, bytes, want, kube) in [
        ("HTTP/1.1 header of 300 KiB", 300 * 1024, Want::Code(200), "200 (Go's limit: 1 MiB + 4 KiB of head)"),
        ("HTTP/1.1 header of 1 MiB", 1024 * 1024, Want::Code(431), "200 (under Go's 1 MiB + 4 KiB)"),
        ("HTTP/1.1 header of 3 MiB", 3 * 1024 * 1024, Want::Code(431), "431 text/plain `431 Request Header Fields Too Large`, connection closed"),
    ] {
        let head = h1_head("GET", &keep_path, &format!("X-Big: {}\r\n", "a".repeat(bytes)), None);
        let (a, mem) = measured(pid, || rt.block_on(raw_h1(port, h1.clone(), head, Vec::new(), 1, Duration::ZERO, Duration::from_secs(30))));
        let answer = t.check(name, a.code, &a.body, want);
        t.record(&kapi, &before, name, format!("GET with `X-Big: a...` of {} KiB", bytes / 1024), answer, kube, mem, 24 * MIB, 16 * MIB);
    }
    {
        let name = "HTTP/1.1 with 150 headers";
        let extra: String = (0..150).map(|i| format!("X-H{i}: v\r\n")).collect();
        let head = h1_head("GET", &keep_path, &extra, None);
        let (a, mem) = measured(pid, || rt.block_on(raw_h1(port, h1.clone(), head, Vec::new(), 1, Duration::ZERO, Duration::from_secs(30))));
        let answer = t.check(name, a.code, &a.body, Want::AnyOf(&[200, 431]));
        t.record(&kapi, &before, name, "GET with 150 small headers".to_owned(), answer, "200 (Go counts bytes, not headers)", mem, 16 * MIB, 16 * MIB);
    }
    for (name, bytes, want, kube) in [
        ("HTTP/2 header of 64 KiB", 64 * 1024, Want::Code(200), "200 (Go's header list limit: 1 MiB + 320 bytes)"),
        ("HTTP/2 header of 2 MiB", 2 * 1024 * 1024, Want::AnyOf(&[0, 431]), "431 or the connection closed"),
    ] {
        let (got, mem) = measured(pid, || rt.block_on(h2_get_with_header(port, h2.clone(), &keep_path, bytes)));
        let answer = match &got {
            Ok(code) => t.check(name, *code, "", want),
            Err(e) => {
                let _ = t.check(name, 0, "", want);
                format!("no answer: {e}")
            }
        };
        t.record(&kapi, &before, name, format!("HTTP/2 GET with `x-big: a...` of {} KiB", bytes / 1024), answer, kube, mem, 24 * MIB, 16 * MIB);
    }

    // --- Slowloris bodies ----------------------------------------------------------------
    {
        let name = "slowloris: 250 trickled bodies";
        let conns = 250;
        let (answers, mem) = measured(pid, || {
            rt.block_on(concurrent_posts(port, &h1, conns, 1_000_000, 1, Duration::from_millis(500), |i| {
                format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"slow-{i}"}},"data":{{"a":"{}"#, "x".repeat(100)).into_bytes()
            }))
        });
        let timeouts = answers.iter().filter(|a| a.code == 504).count();
        let throttled = answers.iter().filter(|a| a.code == 429).count();
        for a in &answers {
            if a.code == 504 {
                let _ = t.check(name, a.code, &a.body, Want::Status(504, "Timeout", "request did not complete within the allotted timeout"));
            } else if a.code != 429 {
                t.fail(name, format!("expected 504 or 429, got {}", a.short()));
            }
        }
        let answer = format!("{timeouts} x 504 Timeout \"request did not complete within the allotted timeout\" after 4 s, {throttled} x 429 (past --max-mutating-requests-inflight)");
        t.record(&kapi, &before, name, format!("{conns} connections: POST, Content-Length 1,000,000, 1 byte every 500 ms (--request-timeout 4s)"), answer, "504 Timeout Status after --request-timeout (60 s), 429 past the in-flight limit", mem, 64 * MIB, 32 * MIB);
    }
    // Twice: what the first round held must be given back, not leaked.
    let mut first_peak = 0;
    for (round, name) in ["slowloris: 20 bodies stalled at 2.9 MiB", "slowloris: the same again"].into_iter().enumerate() {
        let conns = 20;
        let (answers, mem) = measured(pid, || {
            // Everything at once, then nothing: the answer must come at the deadline.
            rt.block_on(concurrent_posts(port, &h1, conns, 3 * 1024 * 1024 - 1024, 1 << 20, Duration::ZERO, |i| {
                let mut body = format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"stall-{i}"}},"data":{{"a":""#).into_bytes();
                body.resize(2_900_000 + body.len(), b'x');
                body
            }))
        });
        for a in &answers {
            let _ = t.check(name, a.code, &a.body, Want::Status(504, "Timeout", "request did not complete within the allotted timeout"));
        }
        let answer = format!("{} x 504 Timeout after 4 s", answers.iter().filter(|a| a.code == 504).count());
        // 20 bodies of 2.9 MB held until the deadline, each in a buffer of its Content-Length
        // (3 MiB), behind hyper's read buffer of up to 1 MiB: 80 MiB. The allocator may keep the freed pages
        // for a while, so what proves them freed is the second round: it reuses them (a leak
        // would add another ~60 MiB to its peak).
        if round == 0 {
            first_peak = mem.peak;
        } else if mem.peak > first_peak + 32 * MIB {
            t.fail(name, format!("the second round peaked at {} MiB, the first at {} MiB", mem.peak / MIB, first_peak / MIB));
        }
        t.record(&kapi, &before, name, format!("{conns} connections: POST of 3 MiB - 1 KiB, 2.9 MB sent at once, then nothing"), answer, "504 Timeout Status after --request-timeout", mem, 128 * MIB, 128 * MIB);
    }

    // --- YAML alias bombs ----------------------------------------------------------------
    {
        let mut bomb = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: laughs\nlol:\n  a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
        for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"].iter().zip(["b", "c", "d", "e", "f", "g", "h", "i"]) {
            bomb.push_str(&format!("  {name}: &{name} [{}]\n", vec![format!("*{prev}"); 9].join(",")));
        }
        curl_row(&kapi, &mut t, &before, "YAML billion laughs", "9 levels of 9 aliases (9^9 = 387,420,489 strings) in a ConfigMap", Request::new("POST", &collection()).raw("application/yaml", bomb), Want::Status(400, "BadRequest", ""), "400 BadRequest `yaml: document contains excessive aliasing`", 64 * MIB);
    }
    {
        // Few aliases of one big scalar: every alias a copy of 1 MiB (2 GiB in all).
        let mut bomb = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: scalars\ndata:\n  a: &a \"{}\"\n  b: [", "x".repeat(1 << 20));
        bomb.push_str(&vec!["*a"; 2048].join(","));
        bomb.push_str("]\n");
        curl_row(&kapi, &mut t, &before, "YAML alias bomb of a big scalar", "a 1 MiB string aliased 2,048 times (2 GiB expanded)", Request::new("POST", &collection()).raw("application/yaml", bomb), Want::Status(400, "BadRequest", ""), "400 (the expansion is refused) or 422", 96 * MIB);
    }

    // --- 100k-deep nesting ---------------------------------------------------------------
    let deep_json = |inner: String| format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"deep"}},"data":{inner}}}"#);
    curl_row(&kapi, &mut t, &before, "JSON body 100k-deep arrays", "ConfigMap whose data is `[` x 100,000 `]` x 100,000", Request::new("POST", &collection()).raw("application/json", deep_json(nested_arrays(DEEP))), Want::Status(400, "BadRequest", "exceeded max depth"), "400 BadRequest `... json parse error: ... exceeded max depth`", 32 * MIB);
    curl_row(&kapi, &mut t, &before, "JSON body 100k-deep objects", "ConfigMap whose data is `{\"a\":` x 100,000", Request::new("POST", &collection()).raw("application/json", deep_json(nested_objects(DEEP))), Want::Status(400, "BadRequest", "exceeded max depth"), "400 BadRequest `... exceeded max depth`", 32 * MIB);
    curl_row(&kapi, &mut t, &before, "JSON body 9,000-deep arrays", "ConfigMap whose data is `[` x 9,000 (under Go's limit)", Request::new("POST", &collection()).raw("application/json", deep_json(nested_arrays(9_000))), Want::AnyOf(&[400]), "400 BadRequest `json: cannot unmarshal array into Go struct field ConfigMap.data`", 32 * MIB);
    curl_row(&kapi, &mut t, &before, "YAML body 100k-deep flow sequences", "`data: ` then `[` x 100,000 `]` x 100,000", Request::new("POST", &collection()).raw("application/yaml", format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata: {}\n", nested_arrays(DEEP))), Want::Status(400, "BadRequest", ""), "400 BadRequest `yaml: exceeded max depth of 10000`", 32 * MIB);
    curl_row(&kapi, &mut t, &before, "YAML body 100k-deep block sequences", "`data: ` then `- ` x 100,000 on one line", Request::new("POST", &collection()).raw("application/yaml", format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:\n  {}x\n", "- ".repeat(DEEP))), Want::Status(400, "BadRequest", ""), "400 BadRequest `yaml: exceeded max depth of 10000`", 32 * MIB);
    curl_row(&kapi, &mut t, &before, "JSON patch 100k deep", "json-patch `add /data/x` whose value is 100,000-deep arrays", Request::new("PATCH", &keep_path).raw("application/json-patch+json", format!(r#"[{{"op":"add","path":"/data/x","value":{}}}]"#, nested_arrays(DEEP))), Want::AnyOf(&[400]), "400 BadRequest (`exceeded max depth`)", 32 * MIB);
    curl_row(&kapi, &mut t, &before, "merge patch 100k deep", "merge-patch `{\"data\":{\"x\":` 100,000-deep objects", Request::new("PATCH", &keep_path).raw("application/merge-patch+json", format!(r#"{{"data":{{"x":{}}}}}"#, nested_objects(DEEP))), Want::AnyOf(&[400]), "400 BadRequest (`exceeded max depth`)", 32 * MIB);
    curl_row(&kapi, &mut t, &before, "strategic merge patch 100k deep", "strategic-merge-patch `{\"data\":{\"x\":` 100,000-deep objects", Request::new("PATCH", &keep_path).raw("application/strategic-merge-patch+json", format!(r#"{{"data":{{"x":{}}}}}"#, nested_objects(DEEP))), Want::AnyOf(&[400]), "400 BadRequest (`exceeded max depth`)", 32 * MIB);
    {
        // Each triple nests /data/x 121 levels deeper: a 120-deep value added beside it, x
        // moved to its bottom, the value moved back to x. 830 triples: ~100,000 levels.
        let value = nested_objects(119);
        let down = "/a".repeat(120);
        let mut ops = vec![json!({"op": "add", "path": "/data/x", "value": {}})];
        for _ in 0..830 {
            ops.push(json!({"op": "add", "path": "/data/t", "value": serde_json::from_str::<Value>(&value).expect("value")}));
            ops.push(json!({"op": "move", "from": "/data/x", "path": format!("/data/t{down}")}));
            ops.push(json!({"op": "move", "from": "/data/t", "path": "/data/x"}));
        }
        let patch = serde_json::to_string(&ops).expect("patch");
        curl_row(&kapi, &mut t, &before, "JSON patch building 100k-deep nesting", &format!("2,491 json-patch ops ({} KiB) nesting /data/x ~100,000 deep with moves", patch.len() / 1024), Request::new("PATCH", &keep_path).raw("application/json-patch+json", patch), Want::AnyOf(&[400, 422]), "422 Invalid (the patched object exceeds Go's max depth when decoded)", 96 * MIB);
    }
    {
        // Each copy doubles /data: 40 copies would make 2^40 copies of it.
        let mut ops = vec![json!({"op": "add", "path": "/data/x", "value": "y".repeat(1024)})];
        for i in 0..40 {
            ops.push(json!({"op": "copy", "from": "/data", "path": format!("/data/c{i}")}));
        }
        let patch = serde_json::to_string(&ops).expect("patch");
        curl_row(&kapi, &mut t, &before, "JSON patch copy amplification", "41 json-patch ops, each `copy /data` into /data (2^40 KiB if applied)", Request::new("PATCH", &keep_path).raw("application/json-patch+json", patch), Want::AnyOf(&[400, 413, 422]), "422 (json-patch's copy size limit, 3 MiB: `Unable to complete the copy ...`)", 64 * MIB);
    }

    // --- Invalid UTF-8 -------------------------------------------------------------------
    let raw_body = |name: &[u8], label: &[u8]| {
        let mut b = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":""#.to_vec();
        b.extend_from_slice(name);
        b.extend_from_slice(br#"","labels":{"l":""#);
        b.extend_from_slice(label);
        b.extend_from_slice(br#""}}}"#);
        b
    };
    curl_row(&kapi, &mut t, &before, "invalid UTF-8 in a name (JSON body)", "POST with metadata.name `a\\xffb` as raw bytes", Request::new("POST", &collection()).raw("application/json", raw_body(b"a\xffb", b"v")), Want::AnyOf(&[400, 422]), "422 Invalid (Go decodes \\xff as U+FFFD, which no name allows)", 16 * MIB);
    curl_row(&kapi, &mut t, &before, "invalid UTF-8 in a label value (JSON body)", "POST with label value `v\\xc3\\x28` as raw bytes", Request::new("POST", &collection()).raw("application/json", raw_body(b"utf8", b"v\xc3\x28")), Want::AnyOf(&[400, 422]), "422 Invalid label value", 16 * MIB);
    curl_row(&kapi, &mut t, &before, "invalid UTF-8 in a name (YAML body)", "POST application/yaml with name `a\\xffb`", Request::new("POST", &collection()).raw("application/yaml", b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\xffb\n".to_vec()), Want::Status(400, "BadRequest", ""), "400 BadRequest `yaml: invalid leading UTF-8 octet`", 16 * MIB);
    curl_row(&kapi, &mut t, &before, "invalid UTF-8 in a URL name", "GET .../configmaps/a%FFb", Request::get(&format!("{}/a%FFb", collection())), Want::Status(404, "NotFound", "not found"), "404 NotFound `configmaps \"a\\xffb\" not found`", 16 * MIB);
    curl_row(&kapi, &mut t, &before, "invalid UTF-8 in a URL namespace", "POST /api/v1/namespaces/a%FF/configmaps", Request::new("POST", "/api/v1/namespaces/a%FF/configmaps").json(&configmap("x")), Want::AnyOf(&[400, 404, 422]), "404 NotFound `namespaces \"a\\xff\" not found`", 16 * MIB);
    curl_row(&kapi, &mut t, &before, "invalid UTF-8 in labelSelector", "LIST ?labelSelector=l%3D%FF", Request::get(&format!("{}?labelSelector=l%3D%FF", collection())), Want::Status(400, "BadRequest", ""), "400 BadRequest `unable to parse requirement: ... invalid label value`", 16 * MIB);

    // --- NUL bytes in paths --------------------------------------------------------------
    curl_row(&kapi, &mut t, &before, "NUL in a name (GET)", "GET .../configmaps/keep%00", Request::get(&format!("{}/keep%00", collection())), Want::Status(404, "NotFound", "not found"), "404 NotFound `configmaps \"keep\\x00\" not found`", 16 * MIB);
    curl_row(&kapi, &mut t, &before, "NUL in a name (PUT)", "PUT .../configmaps/a%00b with that name in the body", Request::new("PUT", &format!("{}/a%00b", collection())).json(&configmap("a\u{0}b")), Want::AnyOf(&[400, 404, 422]), "404 NotFound (ConfigMaps are not created by PUT) or 422 Invalid", 16 * MIB);
    curl_row(&kapi, &mut t, &before, "NUL in a name (DELETE)", "DELETE .../configmaps/keep%00", Request::new("DELETE", &format!("{}/keep%00", collection())), Want::Status(404, "NotFound", "not found"), "404 NotFound", 16 * MIB);
    curl_row(&kapi, &mut t, &before, "NUL in a body name", "POST with metadata.name `a\\u0000b`", Request::new("POST", &collection()).json(&configmap("a\u{0}b")), Want::Status(422, "Invalid", "metadata.name"), "422 Invalid metadata.name", 16 * MIB);
    curl_row(&kapi, &mut t, &before, "NUL in a namespace", "POST /api/v1/namespaces/hostile%00/configmaps", Request::new("POST", &format!("/api/v1/namespaces/{NS}%00/configmaps")).json(&configmap("x")), Want::AnyOf(&[400, 404, 422]), "404 NotFound `namespaces \"hostile\\x00\" not found`", 16 * MIB);
    curl_row(&kapi, &mut t, &before, "NUL in a resource segment", "GET /api/v1/namespaces/hostile/config%00maps", Request::get(&format!("/api/v1/namespaces/{NS}/config%00maps")), Want::Status(404, "NotFound", ""), "404 NotFound `the server could not find the requested resource`", 16 * MIB);
    curl_row(&kapi, &mut t, &before, "NUL in a group segment", "GET /apis/apps%00/v1/deployments", Request::get("/apis/apps%00/v1/deployments"), Want::AnyOf(&[404]), "404 NotFound", 16 * MIB);
    // kube's selector lexer reads a NUL byte as the end of the input, and so does kapi's.
    curl_row(&kapi, &mut t, &before, "NUL in labelSelector", "LIST ?labelSelector=l%3Da%00b", Request::get(&format!("{}?labelSelector=l%3Da%00b", collection())), Want::Code(200), "200: its lexer ends the selector at the NUL (`l=a`)", 16 * MIB);
    {
        let name = "raw NUL byte in the request line";
        let head = format!("GET {}/ke\0ep HTTP/1.1\r\nHost: localhost\r\n\r\n", collection()).into_bytes();
        let (a, mem) = measured(pid, || rt.block_on(raw_h1(port, h1.clone(), head, Vec::new(), 1, Duration::ZERO, Duration::from_secs(30))));
        let answer = t.check(name, a.code, &a.body, Want::Code(400));
        t.record(&kapi, &before, name, "`GET .../ke\\0ep HTTP/1.1` with a raw NUL byte".to_owned(), answer, "400 Bad Request (Go: invalid control character in URL)", mem, 16 * MIB, 16 * MIB);
    }

    eprintln!("\n| input | what is sent | kapi's answer | kube-apiserver's answer | RSS before / peak / after |\n|---|---|---|---|---|");
    for r in &t.rows {
        eprintln!("| {} | {} | {} | {} | {} |", r.name, r.sent, r.answer.replace('|', "\\|"), r.kube, r.mem);
    }
    assert!(t.failures.is_empty(), "{} hostile-input checks failed:\n{}", t.failures.len(), t.failures.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// 10,000 watches.

/// Opens `conns` HTTP/2 connections of `per_conn` watches each; every watch's answer code and
/// its body, to be read.
async fn open_watches(port: u16, tls: Arc<rustls::ClientConfig>, path: String, conns: usize, per_conn: usize) -> (Vec<h2::client::SendRequest<Bytes>>, Vec<tokio::task::JoinHandle<()>>, Vec<(u16, h2::RecvStream)>) {
    let mut clients = Vec::new();
    let mut drivers = Vec::new();
    let mut pending = Vec::new();
    for _ in 0..conns {
        let conn = tls_connect(port, tls.clone()).await;
        let (client, connection) = h2::client::handshake(conn).await.expect("HTTP/2 handshake");
        drivers.push(tokio::spawn(async move {
            let _ = connection.await;
        }));
        let mut client = client.ready().await.expect("ready");
        for _ in 0..per_conn {
            client = client.ready().await.expect("ready");
            let req = http::Request::get(format!("https://localhost:{port}{path}")).body(()).expect("request");
            let (answer, _) = client.send_request(req, true).expect("send");
            pending.push(answer);
        }
        clients.push(client);
    }
    let mut watches = Vec::new();
    for answer in pending {
        let resp = tokio::time::timeout(Duration::from_secs(60), answer).await.expect("watch answer in 60 s").expect("watch answer");
        let status = resp.status().as_u16();
        watches.push((status, resp.into_body()));
    }
    (clients, drivers, watches)
}

/// Reads each watch until it shows `name`; the watches back, and how many saw it in time.
async fn all_see(watches: Vec<(u16, h2::RecvStream)>, name: &str, bound: Duration) -> (Vec<(u16, h2::RecvStream)>, usize) {
    let seen = Arc::new(AtomicUsize::new(0));
    let deadline = tokio::time::Instant::now() + bound;
    let mut tasks = tokio::task::JoinSet::new();
    for (code, mut body) in watches {
        let (seen, name) = (seen.clone(), name.to_owned());
        tasks.spawn(async move {
            let mut text = Vec::new();
            while let Ok(Some(Ok(chunk))) = tokio::time::timeout_at(deadline, body.data()).await {
                let _ = body.flow_control().release_capacity(chunk.len());
                text.extend_from_slice(&chunk);
                if String::from_utf8_lossy(&text).contains(&format!(r#""name":"{name}""#)) {
                    seen.fetch_add(1, Ordering::SeqCst);
                    break;
                }
            }
            (code, body)
        });
    }
    let mut back = Vec::new();
    while let Some(done) = tasks.join_next().await {
        back.push(done.expect("reader"));
    }
    (back, seen.load(Ordering::SeqCst))
}

#[test]
fn ten_thousand_watches() {
    let kapi = Kapi::start().expect("start kapi");
    let pid = kapi.pid().expect("pid");
    create_namespace(&kapi, NS);
    let keep = kapi.request(&Request::new("POST", &collection()).json(&configmap("keep")));
    assert_eq!(keep.status, 201, "{}", keep.raw);
    let rv = keep.body["metadata"]["resourceVersion"].as_str().expect("rv").to_owned();
    let before = snapshot(&kapi);
    let rt = runtime();
    let tls = admin_tls(&kapi, b"h2");
    let path = format!("{}?watch=true&resourceVersion={rv}&timeoutSeconds=600", collection());
    let (conns, per_conn) = (100, 100);
    let watches_n = conns * per_conn;
    let start_rss = rss(pid);
    let started = Instant::now();
    let ((clients, drivers, watches), open_mem) = measured(pid, || rt.block_on(open_watches(kapi.port(), tls.clone(), path.clone(), conns, per_conn)));
    let opened_in = started.elapsed();
    let ok = watches.iter().filter(|w| w.0 == 200).count();
    let codes: std::collections::BTreeMap<u16, usize> = watches.iter().fold(Default::default(), |mut m, w| {
        *m.entry(w.0).or_default() += 1;
        m
    });
    eprintln!("{watches_n} watches opened in {opened_in:?}: codes {codes:?}; RSS {open_mem} ({:.1} KiB per watch)", (open_mem.after.saturating_sub(open_mem.before)) as f64 / 1024.0 / watches_n as f64);
    assert_eq!(ok, watches_n, "every watch is answered 200 (kube has no per-user watch limit): {codes:?}");

    // One event reaches every watch.
    let probe = kapi.request(&Request::new("POST", &collection()).json(&configmap("probe")));
    assert_eq!(probe.status, 201, "{}", probe.raw);
    let ((watches, seen), event_mem) = measured(pid, || rt.block_on(all_see(watches, "probe", Duration::from_secs(60))));
    eprintln!("{seen} of {watches_n} watches saw the event; RSS {event_mem}");
    assert_eq!(seen, watches_n, "every watch gets the event");
    let per_watch = open_mem.peak.max(event_mem.peak).saturating_sub(start_rss) / watches_n as u64;
    // Measured: 5.6 KiB per watch (docs/security.md); bound 16 KiB, about three times that.
    // (kube's own cost is larger: a cacheWatcher with its event buffer and two goroutines.)
    assert!(per_watch < 16 * 1024, "{per_watch} bytes per watch");

    // Closing them gives the memory back: a second round of 10,000 reuses it.
    let (_, close_mem) = measured(pid, || {
        drop(watches);
        drop(clients);
        for d in &drivers {
            d.abort();
        }
        std::thread::sleep(Duration::from_secs(3));
    });
    eprintln!("closed: RSS {close_mem}");
    let ((clients, drivers, watches), again) = measured(pid, || rt.block_on(open_watches(kapi.port(), tls.clone(), path.clone(), conns, per_conn)));
    eprintln!("second round: RSS {again}");
    assert!(watches.iter().all(|w| w.0 == 200));
    drop(watches);
    drop(clients);
    for d in &drivers {
        d.abort();
    }
    assert!(again.peak <= open_mem.peak.max(event_mem.peak) + 32 * MIB, "a second round of watches reuses the first one's memory: first peak {} MiB, second {again}", open_mem.peak.max(event_mem.peak) / MIB);
    std::thread::sleep(Duration::from_secs(2));
    let r = kapi.request(&Request::get(&format!("{}/keep", collection())));
    assert_eq!(r.status, 200, "{}", r.raw);
    let mut after = snapshot(&kapi);
    after.retain(|l| !l.contains("/probe "));
    assert_eq!(after, before, "the watches stored nothing");
    eprintln!("ROW | 10,000 watches from one user | 100 HTTP/2 connections x 100 `?watch=true` streams | {ok} x 200, every one got the event | opened in {opened_in:?} | {open_mem} (event {event_mem}; closed {close_mem}; second round {again})");
}

// ---------------------------------------------------------------------------------------------
// Unbounded LIST.

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn h1_sender(port: u16, tls: Arc<rustls::ClientConfig>) -> Sender {
    let conn = tls_connect(port, tls).await;
    let (sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(conn)).await.expect("handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    sender
}

/// Creates `n` small ConfigMaps over `conns` kept-alive connections.
async fn create_many(port: u16, tls: Arc<rustls::ClientConfig>, n: usize, conns: usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..conns {
        let (tls, next) = (tls.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut sender = h1_sender(port, tls.clone()).await;
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    return;
                }
                let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("cm-{i:06}"), "labels": {"bulk": "yes"}}, "data": {"k": "v"}});
                loop {
                    if sender.ready().await.is_err() {
                        sender = h1_sender(port, tls.clone()).await;
                        continue;
                    }
                    let req = http::Request::post(collection())
                        .header("host", "localhost")
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from(body.to_string())))
                        .expect("request");
                    match sender.send_request(req).await {
                        Ok(resp) => {
                            let status = resp.status().as_u16();
                            let bytes = resp.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                            if status == 429 {
                                tokio::time::sleep(Duration::from_millis(100)).await;
                                continue;
                            }
                            assert_eq!(status, 201, "create cm-{i:06}: {}", String::from_utf8_lossy(&bytes));
                            break;
                        }
                        Err(_) => sender = h1_sender(port, tls.clone()).await,
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("creator");
    }
}

/// LISTs `path` and reads the answer as it comes, keeping only its size and item count.
async fn list_streamed(port: u16, tls: Arc<rustls::ClientConfig>, path: String) -> (u16, usize, usize) {
    let mut sender = h1_sender(port, tls).await;
    let req = http::Request::get(path).header("host", "localhost").header("accept", "application/json").body(Full::new(Bytes::new())).expect("request");
    let resp = sender.send_request(req).await.expect("list");
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let (mut size, mut items) = (0usize, 0usize);
    let needle = br#""name":"cm-"#;
    let mut tail: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.expect("list body");
        if let Ok(data) = frame.into_data() {
            size += data.len();
            // Count items across chunk borders: keep the last bytes of the previous chunk.
            let mut window = std::mem::take(&mut tail);
            window.extend_from_slice(&data);
            items += window.windows(needle.len()).filter(|w| *w == needle).count();
            let keep = needle.len() - 1;
            tail = window[window.len().saturating_sub(keep)..].to_vec();
        }
    }
    (status, size, items)
}

#[test]
fn unbounded_list() {
    let full = std::env::var_os("KAPI_HOSTILE_FULL").is_some();
    let n = if full { 100_000 } else { 10_000 };
    let kapi = Kapi::start().expect("start kapi");
    let pid = kapi.pid().expect("pid");
    create_namespace(&kapi, NS);
    let rt = runtime();
    let tls = admin_tls(&kapi, b"");
    let empty_rss = rss(pid);
    let started = Instant::now();
    rt.block_on(create_many(kapi.port(), tls.clone(), n, 8));
    let created_in = started.elapsed();
    let loaded_rss = rss(pid);
    eprintln!("{n} ConfigMaps created in {created_in:?} ({:.0}/s); RSS {} -> {} MiB", n as f64 / created_in.as_secs_f64(), empty_rss / MIB, loaded_rss / MIB);
    let path = collection();
    let count_before = rt.block_on(list_streamed(kapi.port(), tls.clone(), format!("{}?limit=1", collection())));
    assert_eq!(count_before.0, 200);

    let started = Instant::now();
    let ((status, size, items), one) = measured(pid, || rt.block_on(list_streamed(kapi.port(), tls.clone(), path.clone())));
    let took = started.elapsed();
    eprintln!("one LIST: {status}, {items} items, {size} bytes in {took:?}; RSS {one}");
    assert_eq!(status, 200);
    assert_eq!(items, n, "the LIST holds every object");
    let (four, four_mem) = measured(pid, || {
        rt.block_on(async {
            let tasks: Vec<_> = (0..4).map(|_| tokio::spawn(list_streamed(kapi.port(), tls.clone(), path.clone()))).collect();
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.expect("list"));
            }
            out
        })
    });
    eprintln!("four LISTs at once: {four:?}; RSS {four_mem}");
    assert!(four.iter().all(|l| l.0 == 200 && l.2 == n));
    // The list is streamed: what it holds beyond the cached objects does not grow with its
    // size (measured: +3 MiB for one LIST of 4 MB, +6 MiB for four; docs/security.md). Bounds:
    // 16 MiB for one, 32 MiB for four, whatever N (a list encoded whole would need its size,
    // 42 MB at 100,000 objects, twice that while its buffer grows).
    let size = size as u64;
    assert!(one.peak <= one.before + 16 * MIB, "one LIST of {size} bytes: {one}");
    assert!(four_mem.peak <= four_mem.before + 32 * MIB, "four LISTs of {size} bytes: {four_mem}");
    let r = kapi.request(&Request::get(&format!("{}?limit=1", collection())));
    assert_eq!(r.status, 200, "{}", r.raw);
    eprintln!("ROW | unbounded LIST of {n} ConfigMaps | GET without limit, alone and 4 at once | 200, {items} items, {size} bytes in {took:?} | store {} -> {} MiB; one LIST {one}; four {four_mem}", empty_rss / MIB, loaded_rss / MIB);
}
