//! TLS controls as kube-apiserver's flags: a serving certificate and a client CA replaced on
//! disk take effect for new connections within seconds, without a restart; under
//! `--tls-min-version=VersionTLS13` a client offering only TLS 1.2 is refused.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use kapi_e2e::{wait_for, Kapi, Request};

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A serving certificate for 127.0.0.1 named `cn`, signed by kapi's own CA (so clients keep
/// trusting the server), written to `<name>.crt` / `<name>.key` in `dir`.
fn serving_cert(kapi: &Kapi, dir: &Path, name: &str, cn: &str) {
    let pki = kapi.pki_dir();
    openssl(dir, &["req", "-newkey", "rsa:2048", "-nodes", "-keyout", &format!("{name}.key"), "-out", &format!("{name}.csr"), "-subj", &format!("/CN={cn}")]);
    std::fs::write(dir.join("ext.cnf"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n").expect("ext");
    let (ca, ca_key) = (pki.join("ca.crt"), pki.join("ca.key"));
    openssl(dir, &["x509", "-req", "-in", &format!("{name}.csr"), "-CA", ca.to_str().expect("utf-8"), "-CAkey", ca_key.to_str().expect("utf-8"), "-CAcreateserial", "-out", &format!("{name}.crt"), "-days", "1", "-extfile", "ext.cnf"]);
}

/// The subject of the certificate served on `port`, or the handshake's failure.
fn served_subject(port: u16, version: &str) -> Result<String, String> {
    served_subject_for(port, version, None)
}

/// [`served_subject`] for a client asking for `server_name` (SNI).
fn served_subject_for(port: u16, version: &str, server_name: Option<&str>) -> Result<String, String> {
    let mut args = vec!["s_client".to_owned(), "-connect".to_owned(), format!("127.0.0.1:{port}"), version.to_owned()];
    match server_name {
        Some(name) => args.extend(["-servername".to_owned(), name.to_owned()]),
        None => args.push("-noservername".to_owned()),
    }
    let s_client = Command::new("openssl")
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .expect("openssl s_client");
    let pem = String::from_utf8_lossy(&s_client.stdout).into_owned();
    if !pem.contains("BEGIN CERTIFICATE") {
        return Err(String::from_utf8_lossy(&s_client.stderr).into_owned());
    }
    let mut x509 = Command::new("openssl").args(["x509", "-noout", "-subject"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("openssl x509");
    use std::io::Write;
    x509.stdin.take().expect("stdin").write_all(pem.as_bytes()).expect("write");
    let out = x509.wait_with_output().expect("x509");
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[test]
fn a_serving_certificate_replaced_on_disk_is_served_to_new_connections() {
    let first = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().expect("dir");
    serving_cert(&first, dir.path(), "a", "serving-a");
    let (cert, key) = (dir.path().join("serving.crt"), dir.path().join("serving.key"));
    std::fs::copy(dir.path().join("a.crt"), &cert).expect("copy");
    std::fs::copy(dir.path().join("a.key"), &key).expect("copy");
    let kapi = first.start_replica(&["--tls-cert-file", cert.to_str().expect("utf-8"), "--tls-private-key-file", key.to_str().expect("utf-8")]).expect("start with files");
    let subject = served_subject(kapi.port(), "-tls1_3").expect("handshake");
    assert!(subject.contains("serving-a"), "{subject}");

    serving_cert(&first, dir.path(), "b", "serving-b");
    // Key first, then certificate: in between the pair does not match, and kapi keeps serving A.
    std::fs::copy(dir.path().join("b.key"), &key).expect("copy");
    std::fs::copy(dir.path().join("b.crt"), &cert).expect("copy");
    let swapped = wait_for(Duration::from_secs(10), || served_subject(kapi.port(), "-tls1_3").is_ok_and(|s| s.contains("serving-b")).then_some(()));
    assert!(swapped.is_some(), "the new certificate is served within 10 s: {:?}", served_subject(kapi.port(), "-tls1_3"));
    assert_eq!(kapi.request(&Request::get("/api/v1/namespaces/default")).status, 200, "clients trusting the CA keep working");
}

#[test]
fn a_client_ca_replaced_on_disk_decides_new_connections() {
    let first = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().expect("dir");
    let client_ca = dir.path().join("client-ca.crt");
    std::fs::copy(first.pki_dir().join("ca.crt"), &client_ca).expect("copy");
    let kapi = first.start_replica(&["--client-ca-file", client_ca.to_str().expect("utf-8")]).expect("start with a client CA file");
    assert_eq!(kapi.request(&Request::get("/api/v1/namespaces/default")).status, 200, "the admin certificate is from that CA");

    // Another CA: the admin certificate no longer authenticates (401) on new connections.
    openssl(dir.path(), &["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other.key", "-out", "other.crt", "-days", "1", "-subj", "/CN=other-ca"]);
    std::fs::copy(dir.path().join("other.crt"), &client_ca).expect("copy");
    let refused = wait_for(Duration::from_secs(10), || (kapi.request(&Request::get("/api/v1/namespaces/default")).status == 401).then_some(()));
    assert!(refused.is_some(), "the new client CA applies within 10 s");
}

#[test]
fn tls_min_version_13_refuses_a_tls_12_client() {
    let kapi = Kapi::start_with(&["--tls-min-version", "VersionTLS13"]).expect("start kapi");
    assert!(served_subject(kapi.port(), "-tls1_3").is_ok(), "TLS 1.3 is served");
    let refused = served_subject(kapi.port(), "-tls1_2").expect_err("TLS 1.2 is refused");
    assert!(refused.contains("alert") || refused.contains("version"), "{refused}");

    let default = Kapi::start().expect("start kapi");
    assert!(served_subject(default.port(), "-tls1_2").is_ok(), "TLS 1.2 by default");
}

/// The response headers of a request made with curl (lower-cased names), with the admin
/// certificate unless `anonymous`.
fn headers(kapi: &Kapi, method: &str, path: &str, origin: &str, anonymous: bool) -> (u16, Vec<(String, String)>) {
    let pki = kapi.pki_dir();
    let url = format!("https://127.0.0.1:{}{path}", kapi.port());
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "-D", "-", "-o", "/dev/null", "-X", method, "--cacert"]).arg(pki.join("ca.crt")).args(["-H", &format!("Origin: {origin}")]);
    if !anonymous {
        cmd.arg("--cert").arg(pki.join("admin.crt")).arg("--key").arg(pki.join("admin.key"));
    }
    let out = cmd.arg(url).output().expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|c| c.parse().ok()).unwrap_or(0);
    let headers = lines.filter_map(|l| l.split_once(": ")).map(|(k, v)| (k.to_ascii_lowercase(), v.trim().to_owned())).collect();
    (status, headers)
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

#[test]
fn hsts_and_cors_headers_as_kube_sets_them() {
    let kapi = Kapi::start_with(&[
        "--strict-transport-security-directives",
        "max-age=31536000,includeSubDomains",
        "--cors-allowed-origins",
        r"^https://console\.example\.com$",
    ])
    .expect("start kapi");
    let (status, h) = headers(&kapi, "GET", "/api/v1/namespaces/default", "https://console.example.com", false);
    assert_eq!(status, 200);
    assert_eq!(header(&h, "strict-transport-security"), Some("max-age=31536000; includeSubDomains"));
    assert_eq!(header(&h, "access-control-allow-origin"), Some("https://console.example.com"));
    assert_eq!(header(&h, "access-control-allow-credentials"), Some("true"));
    assert_eq!(header(&h, "access-control-allow-methods"), Some("POST, GET, OPTIONS, PUT, DELETE, PATCH"));

    // A preflight is answered before authentication, with 204.
    let (status, h) = headers(&kapi, "OPTIONS", "/api/v1/namespaces/default", "https://console.example.com", true);
    assert_eq!(status, 204);
    assert_eq!(header(&h, "access-control-allow-origin"), Some("https://console.example.com"));

    // Another origin gets no CORS headers (HSTS still).
    let (status, h) = headers(&kapi, "GET", "/api/v1/namespaces/default", "https://evil.example.org", false);
    assert_eq!(status, 200);
    assert_eq!(header(&h, "access-control-allow-origin"), None);
    assert!(header(&h, "strict-transport-security").is_some());
}

/// `--tls-sni-cert-key`: a client asking for a name gets the certificate for it (explicit
/// patterns, wildcards, or the certificate's own names), anyone else the default.
#[test]
fn sni_names_choose_the_serving_certificate() {
    let first = Kapi::start().expect("start kapi");
    let dir = tempfile::tempdir().expect("dir");
    serving_cert(&first, dir.path(), "plain", "sni-plain");
    serving_cert(&first, dir.path(), "wild", "sni-wild");
    // A certificate whose own names pick it: CN and SAN api.example.net.
    let pki = first.pki_dir();
    openssl(dir.path(), &["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "own.key", "-out", "own.csr", "-subj", "/CN=api.example.net"]);
    std::fs::write(dir.path().join("own.cnf"), "subjectAltName=DNS:api.example.net\n").expect("ext");
    let (ca, ca_key) = (pki.join("ca.crt"), pki.join("ca.key"));
    openssl(dir.path(), &["x509", "-req", "-in", "own.csr", "-CA", ca.to_str().unwrap(), "-CAkey", ca_key.to_str().unwrap(), "-CAcreateserial", "-out", "own.crt", "-days", "1", "-extfile", "own.cnf"]);
    let file = |n: &str| dir.path().join(n).to_str().expect("utf-8").to_owned();
    let plain = format!("{},{}:plain.example.com", file("plain.crt"), file("plain.key"));
    let wild = format!("{},{}:*.example.com", file("wild.crt"), file("wild.key"));
    let own = format!("{},{}", file("own.crt"), file("own.key"));
    let kapi = first.start_replica(&["--tls-sni-cert-key", &plain, "--tls-sni-cert-key", &wild, "--tls-sni-cert-key", &own]).expect("start with SNI certificates");
    let subject = |name: Option<&str>| served_subject_for(kapi.port(), "-tls1_3", name).expect("handshake");
    assert!(subject(Some("plain.example.com")).contains("sni-plain"), "exact name beats the wildcard");
    assert!(subject(Some("other.example.com")).contains("sni-wild"), "the wildcard");
    assert!(subject(Some("api.example.net")).contains("api.example.net"), "the certificate's own name");
    let default = subject(None);
    assert!(!default.contains("sni-") && !default.contains("example"), "no SNI: the default serving certificate, got {default}");
    assert_eq!(kapi.request(&Request::get("/api/v1/namespaces/default")).status, 200);
}
