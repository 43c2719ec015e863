//! kapi on a real etcd (`--storage-backend=etcd3`): kubectl works as on SQLite, objects sit
//! under `--etcd-prefix` where etcdctl-style readers find them, kube's etcd metrics and health
//! checks answer, an etcd outage or a lost quorum gives 5xx Status errors within the request
//! timeout (never a hang, never a partial write) while `/livez` stays up, and kapi recovers by
//! itself when etcd returns. TLS towards etcd works with client certificates. Bad etcd flags
//! stop start-up with a clear message.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use kapi_e2e::{run_with_timeout, wait_for, Kapi, Request};
use kapi_storage::etcd::testing::EtcdCluster;
use kapi_storage::etcd::{EtcdConfig, EtcdStore};
use kapi_storage::Store;
use serde_json::json;

fn start_on(etcd: &EtcdCluster, extra: &[&str]) -> Kapi {
    let servers = etcd.endpoints().join(",");
    let mut args = vec!["--storage-backend", "etcd3", "--etcd-servers", servers.as_str()];
    args.extend_from_slice(extra);
    Kapi::start_with(&args).expect("start kapi on etcd")
}

fn stdout(out: &std::process::Output) -> String {
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A raw read of etcd, as an operator's etcdctl would do it.
fn etcd_get(etcd: &EtcdCluster, key: &str) -> Option<(Vec<u8>, u64)> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let config = EtcdConfig {
            endpoints: etcd.endpoints(),
            prefix: "/".into(),
            store_root: String::new(),
            compaction_interval: Duration::ZERO,
            ..EtcdConfig::default()
        };
        let store = EtcdStore::open(config).await.expect("open etcd");
        store.get(key).await.expect("get").map(|kv| (kv.value.to_vec(), kv.mod_revision))
    })
}

#[test]
fn kubectl_on_etcd_objects_under_the_prefix_metrics_and_health() {
    let etcd = EtcdCluster::single().expect("etcd");
    let kapi = start_on(&etcd, &["--etcd-prefix", "/clusters/one"]);
    stdout(&kapi.kubectl(&["create", "namespace", "shop"]));
    stdout(&kapi.kubectl(&["-n", "shop", "create", "configmap", "prices", "--from-literal=apple=3"]));
    let got = stdout(&kapi.kubectl(&["-n", "shop", "get", "configmap", "prices", "-o", "json"]));
    let object: serde_json::Value = serde_json::from_str(&got).expect("json");
    assert_eq!(object["data"]["apple"], "3");
    let rv: u64 = object["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()).expect("resourceVersion");

    // The object is in etcd under the prefix, and its resourceVersion is etcd's mod revision.
    let (value, mod_revision) = etcd_get(&etcd, "/clusters/one/core/configmaps/shop/prices").expect("the object is in etcd under --etcd-prefix");
    assert_eq!(mod_revision, rv, "resourceVersion is etcd's revision");
    let stored: serde_json::Value = serde_json::from_slice(&value).expect("stored JSON");
    assert_eq!(stored["data"]["apple"], "3");
    assert!(etcd_get(&etcd, "/registry/core/configmaps/shop/prices").is_none(), "nothing under kube's default prefix");

    // A label-selected watch through kubectl sees an update.
    stdout(&kapi.kubectl(&["-n", "shop", "patch", "configmap", "prices", "--type=merge", "-p", r#"{"data":{"apple":"4"}}"#]));
    let listed = stdout(&kapi.kubectl(&["-n", "shop", "get", "configmaps", "-o", "jsonpath={.items[*].data.apple}"]));
    assert!(listed.contains('4'), "{listed}");

    // kube's health checks and etcd metrics.
    for path in ["/readyz/etcd", "/readyz/etcd-readiness", "/livez/etcd", "/healthz/etcd"] {
        let r = kapi.request(&Request::get(path).accept("*/*"));
        assert_eq!((r.status, r.raw.trim()), (200, "ok"), "{path}");
    }
    let metrics = kapi.request(&Request::get("/metrics").accept("text/plain")).raw;
    for series in [
        r#"etcd_requests_total{group="",operation="create",resource="configmaps"}"#,
        r#"etcd_request_duration_seconds_bucket{group="",operation="get",resource="configmaps",le="0.005"}"#,
    ] {
        assert!(metrics.contains(series), "{series} missing");
    }
}

#[test]
fn an_etcd_outage_fails_fast_keeps_livez_and_recovers_without_restart() {
    let mut etcd = EtcdCluster::single().expect("etcd");
    let kapi = start_on(&etcd, &[]);
    let create = |name: &str| {
        kapi.try_request(
            &Request::new("POST", "/api/v1/namespaces/default/configmaps")
                .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})),
        )
    };
    assert_eq!(create("before").expect("create").status, 201);

    etcd.kill(0);
    let started = Instant::now();
    let failed = create("during").expect("an answer, not a hang");
    let took = started.elapsed();
    assert!(failed.status >= 500, "{}: {}", failed.status, failed.raw);
    assert_eq!(failed.body["kind"], "Status", "{}", failed.raw);
    assert!(took < Duration::from_secs(15), "the failure took {took:?}");
    // Readiness drops at once; liveness tolerates a brief outage.
    let ready = kapi.request(&Request::get("/readyz").accept("*/*"));
    assert_eq!(ready.status, 500, "{}", ready.raw);
    assert!(ready.raw.contains("[-]etcd-readiness failed"), "{}", ready.raw);
    let live = kapi.request(&Request::get("/livez").accept("*/*"));
    assert_eq!(live.status, 200, "{}", live.raw);
    let metrics = kapi.request(&Request::get("/metrics").accept("text/plain")).raw;
    let errors = r#"etcd_request_errors_total{group="",operation="create",resource="configmaps"} "#;
    assert!(metrics.contains(errors), "the failed write is counted: {errors}");

    etcd.restart(0).expect("restart etcd");
    etcd.wait_healthy(0).expect("etcd healthy");
    let recovered = wait_for(Duration::from_secs(30), || create("after").ok().filter(|r| r.status == 201));
    assert!(recovered.is_some(), "kapi did not recover: {}", kapi.log());
    kapi.wait_ready(Duration::from_secs(30)).expect("ready again");
    // Nothing of the failed write landed.
    let during = kapi.request(&Request::get("/api/v1/namespaces/default/configmaps/during"));
    assert_eq!(during.status, 404, "{}", during.raw);
}

#[test]
fn without_quorum_writes_and_reads_fail_within_the_timeout_and_recover_with_it() {
    let mut etcd = EtcdCluster::start(3).expect("3 etcd members");
    let kapi = start_on(&etcd, &[]);
    let create = |name: &str| {
        kapi.try_request(
            &Request::new("POST", "/api/v1/namespaces/default/configmaps")
                .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})),
        )
    };
    assert_eq!(create("with-quorum").expect("create").status, 201);
    // Two of three members gone. If the survivor was the leader, a write it takes before it
    // steps down waits for a quorum that does not come: kapi answers 5xx when the request times
    // out, and the write may still commit once quorum returns (an unknown outcome, as with
    // kube-apiserver). Once it has stepped down it refuses at once with "no leader": those
    // writes must never land.
    etcd.kill(1);
    etcd.kill(2);
    let mut failures = Vec::new();
    for attempt in ["no-quorum-1", "no-quorum-2", "no-quorum-3"] {
        let started = Instant::now();
        let failed = create(attempt).expect("an answer, not a hang");
        assert!(failed.status >= 500 && failed.body["kind"] == "Status", "{}: {}", failed.status, failed.raw);
        assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());
        failures.push((attempt, failed.message().to_owned()));
    }
    let refused: Vec<&str> = failures.iter().filter(|(_, m)| m.contains("no leader")).map(|(a, _)| *a).collect();
    assert!(!refused.is_empty(), "no write was refused for want of a leader: {failures:?}");
    let started = Instant::now();
    let read = kapi.request(&Request::get("/api/v1/namespaces/default/configmaps/with-quorum"));
    assert!(read.status >= 500, "a quorum read without quorum: {}", read.raw);
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());
    let ready = kapi.request(&Request::get("/readyz").accept("*/*"));
    assert_eq!(ready.status, 500, "{}", ready.raw);

    etcd.restart(1).expect("restart member 1");
    etcd.restart(2).expect("restart member 2");
    let recovered = wait_for(Duration::from_secs(60), || create("quorum-again").ok().filter(|r| r.status == 201));
    assert!(recovered.is_some(), "kapi did not recover: {}", kapi.log());
    kapi.wait_ready(Duration::from_secs(30)).expect("ready again");
    for (name, message) in &failures {
        let got = kapi.request(&Request::get(&format!("/api/v1/namespaces/default/configmaps/{name}")));
        if refused.contains(name) {
            assert_eq!(got.status, 404, "a write refused with {message:?} landed: {}", got.raw);
        } else {
            // An unknown outcome: absent, or the whole object.
            assert!(got.status == 404 || (got.status == 200 && got.body["metadata"]["name"] == *name), "{name} after {message:?}: {}", got.raw);
        }
    }
}

/// Runs `openssl` in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl runs");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A CA, etcd's serving certificate (for 127.0.0.1) and a client certificate signed by it.
fn etcd_pki(dir: &Path) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    openssl(dir, &[&["req", "-x509"][..], &ec, &["-keyout", "ca.key", "-out", "ca.crt", "-days", "1", "-subj", "/CN=etcd-ca"]].concat());
    for (name, usage) in [("server", "serverAuth,clientAuth"), ("client", "clientAuth")] {
        std::fs::write(dir.join(format!("{name}.ext")), format!("subjectAltName=IP:127.0.0.1\nextendedKeyUsage={usage}\n")).expect("ext file");
        let (key, csr, crt, ext) = (format!("{name}.key"), format!("{name}.csr"), format!("{name}.crt"), format!("{name}.ext"));
        openssl(dir, &[&["req"][..], &ec, &["-keyout", &key, "-out", &csr, "-subj", &format!("/CN={name}")]].concat());
        openssl(
            dir,
            &["x509", "-req", "-in", &csr, "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", &crt, "-days", "1", "-extfile", &ext],
        );
    }
}

/// One etcd member serving clients over TLS and requiring client certificates.
struct TlsEtcd {
    child: std::process::Child,
    port: u16,
}

impl TlsEtcd {
    fn start(dir: &Path) -> TlsEtcd {
        let port = kapi_e2e::free_port().expect("port");
        let peer = kapi_e2e::free_port().expect("port");
        let url = format!("https://127.0.0.1:{port}");
        let child = Command::new(kapi_storage::etcd::testing::etcd_binary())
            .current_dir(dir)
            .args(["--data-dir", "etcd-data", "--listen-client-urls", &url, "--advertise-client-urls", &url])
            .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}"), "--initial-advertise-peer-urls", &format!("http://127.0.0.1:{peer}")])
            .args(["--initial-cluster", &format!("default=http://127.0.0.1:{peer}")])
            .args(["--cert-file", "server.crt", "--key-file", "server.key", "--client-cert-auth", "--trusted-ca-file", "ca.crt"])
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join("etcd.log")).expect("log"))
            .spawn()
            .expect("start etcd");
        let etcd = TlsEtcd { child, port };
        let healthy = wait_for(Duration::from_secs(30), || {
            let out = Command::new("curl")
                .current_dir(dir)
                .args(["-s", "--cacert", "ca.crt", "--cert", "client.crt", "--key", "client.key", &format!("{url}/health")])
                .output()
                .ok()?;
            String::from_utf8_lossy(&out.stdout).contains("\"health\":\"true\"").then_some(())
        });
        assert!(healthy.is_some(), "etcd over TLS not healthy: {}", std::fs::read_to_string(dir.join("etcd.log")).unwrap_or_default());
        etcd
    }
}

impl Drop for TlsEtcd {
    fn drop(&mut self) {
        _ = self.child.kill();
        _ = self.child.wait();
    }
}

#[test]
fn kapi_reaches_etcd_over_tls_with_a_client_certificate() {
    let dir = tempfile::tempdir().expect("tempdir");
    etcd_pki(dir.path());
    let etcd = TlsEtcd::start(dir.path());
    let file = |name: &str| dir.path().join(name).to_str().expect("path").to_owned();
    let server = format!("https://127.0.0.1:{}", etcd.port);
    let (ca, cert, key) = (file("ca.crt"), file("client.crt"), file("client.key"));
    let kapi = Kapi::start_with(&[
        "--storage-backend",
        "etcd3",
        "--etcd-servers",
        &server,
        "--etcd-cafile",
        &ca,
        "--etcd-certfile",
        &cert,
        "--etcd-keyfile",
        &key,
    ])
    .expect("kapi starts on etcd over TLS");
    stdout(&kapi.kubectl(&["create", "configmap", "over-tls", "--from-literal=a=b"]));
    assert!(stdout(&kapi.kubectl(&["get", "configmap", "over-tls", "-o", "name"])).contains("configmap/over-tls"));

    // Without a client certificate etcd refuses the connection: start-up stops, naming etcd.
    let (code, stderr) = refused(&["--storage-backend", "etcd3", "--etcd-servers", &server, "--etcd-cafile", &ca]);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("etcd"), "{stderr}");
    // A plain-HTTP URL with TLS files is a configuration error.
    let (code, stderr) = refused(&["--storage-backend", "etcd3", "--etcd-servers", &format!("http://127.0.0.1:{}", etcd.port), "--etcd-cafile", &ca]);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("HTTPS"), "{stderr}");
}

/// Runs kapi with `args` on a fresh data dir; it must exit (not serve) within 30 s.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut cmd = Command::new(kapi_e2e::kapi_binary().expect("kapi binary"));
    cmd.args(["--secure-port", "0", "--data-dir", data.to_str().expect("path")]).args(args);
    let out = run_with_timeout(&mut cmd, Duration::from_secs(30)).expect("kapi exits");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn bad_etcd_flags_stop_start_up() {
    let (code, stderr) = refused(&["--storage-backend", "etcd3"]);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("--storage-backend=etcd3 needs --etcd-servers"), "{stderr}");
    let (code, stderr) = refused(&["--storage-backend", "etcd2"]);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("unknown storage backend \"etcd2\" (sqlite, etcd3 or fdb)"), "{stderr}");
    let (code, stderr) = refused(&["--storage-backend", "etcd3", "--etcd-servers", "http://127.0.0.1:1", "--etcd-prefix", "registry"]);
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("must start with /"), "{stderr}");
}
