//! Authentication in the core slice: client certificates signed by the client CA; anything else
//! is 401 with kube's Status, never a TLS failure or a 500.

use kapi_e2e::{Kapi, Request};

#[test]
fn only_certificates_from_the_client_ca_authenticate() {
    let kapi = Kapi::start().expect("start kapi");
    let other = Kapi::start().expect("start a second kapi with its own CA");
    let ok = kapi.request(&Request::get("/api/v1/namespaces"));
    assert_eq!(ok.status, 200, "{}", ok.raw);

    for (what, req) in [
        ("no certificate", Request::get("/api/v1/namespaces").without_client_cert()),
        (
            "a certificate from another CA",
            Request::get("/api/v1/namespaces").with_client_cert(other.pki_dir().join("admin.crt"), other.pki_dir().join("admin.key")),
        ),
    ] {
        let r = kapi.request(&req);
        assert_eq!(r.status, 401, "{what}: {}", r.raw);
        assert_eq!(r.body["kind"], "Status", "{what}");
        assert_eq!(r.reason(), "Unauthorized", "{what}");
        assert_eq!(r.message(), "Unauthorized", "{what}: nothing about the reason leaks");
        // Health stays open to everyone, as kube's public-info-viewer policy has it.
        let health = kapi.request(&Request::new("GET", "/healthz").without_client_cert());
        assert_eq!(health.status, 200, "{}", health.raw);
    }
    let foreign_health = kapi.request(
        &Request::get("/readyz").with_client_cert(other.pki_dir().join("admin.crt"), other.pki_dir().join("admin.key")),
    );
    assert_eq!(foreign_health.status, 200, "{}", foreign_health.raw);
}
