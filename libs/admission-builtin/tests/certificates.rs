//! CertificateApproval, CertificateSigning and CertificateSubjectRestriction through
//! `kapi_admission::Chain` over a CertificateSigningRequest stored in SQLite.

mod support;

use std::sync::{Arc, Mutex};

use base64::Engine;
use kapi_admission::Operation;
use kapi_admission_builtin::{CertificateApproval, CertificateSigning, CertificateSubjectRestriction};
use kapi_apimachinery::StatusReason;
use kapi_auth::{Attributes, Authorizer, Decision, UserInfo};
use serde_json::{json, Value};
use support::{attrs, create_attrs, Cluster};

/// Allows exactly the (verb, signer name) pairs it was given, and records every question.
#[derive(Default)]
struct Grants {
    allowed: Vec<(&'static str, &'static str)>,
    asked: Mutex<Vec<Attributes>>,
}

impl Authorizer for Grants {
    fn authorize(&self, attrs: &Attributes) -> Decision {
        self.asked.lock().unwrap().push(attrs.clone());
        if self.allowed.iter().any(|(verb, name)| attrs.verb == *verb && attrs.name == *name) {
            Decision::Allow(String::new())
        } else {
            Decision::NoOpinion(String::new())
        }
    }
}

/// base64 of a PEM CSR whose subject has `organizations`.
fn request(organizations: &[&str]) -> String {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, "alice");
    for o in organizations {
        params.distinguished_name.push(rcgen::DnType::OrganizationName, *o);
    }
    let key = rcgen::KeyPair::generate().unwrap();
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    base64::engine::general_purpose::STANDARD.encode(pem)
}

fn csr(signer: &str, organizations: &[&str]) -> Value {
    json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": "c"},
        "spec": {"signerName": signer, "request": request(organizations), "usages": ["client auth"]}})
}

const GVR: (&str, &str, &str) = ("certificates.k8s.io", "v1", "certificatesigningrequests");

fn subresource_write(sub: &str, user: &str, new: Value, old: Value) -> kapi_admission::Attributes {
    let mut a = attrs(Operation::Update, GVR, "CertificateSigningRequest", "", "c", Some(new), Some(old));
    a.subresource = sub.into();
    a.user = UserInfo::new(user, ["system:authenticated"]);
    a
}

fn with_status(csr: &Value, status: Value) -> Value {
    let mut out = csr.clone();
    out["status"] = status;
    out
}

#[tokio::test]
async fn approving_needs_approve_on_the_signer_or_its_domain() {
    let grants = Arc::new(Grants { allowed: vec![("approve", "example.com/*")], ..Grants::default() });
    let authz: Arc<dyn Authorizer> = grants.clone();
    let c = Cluster::new(move |_| Box::new(CertificateApproval::new(authz))).await;
    let old = csr("example.com/signer", &[]);
    let approved = with_status(&old, json!({"conditions": [{"type": "Approved", "status": "True", "reason": "r"}]}));

    // The domain wildcard grants it, after the exact name was asked first, as kube asks.
    c.admit(&mut subresource_write("approval", "bob", approved.clone(), old.clone())).await.0.unwrap();
    let asked: Vec<(String, String, String, String)> =
        grants.asked.lock().unwrap().iter().map(|a| (a.verb.clone(), a.api_group.clone(), a.resource.clone(), a.name.clone())).collect();
    let expected = |name: &str| ("approve".to_owned(), "certificates.k8s.io".to_owned(), "signers".to_owned(), name.to_owned());
    assert_eq!(asked, vec![expected("example.com/signer"), expected("example.com/*")]);

    // Another signer is refused with kube's 403; the old object's signer is the one checked.
    let other = csr("other.io/signer", &[]);
    let mut renamed = approved.clone();
    renamed["spec"]["signerName"] = json!("example.com/signer");
    let err = c.admit(&mut subresource_write("approval", "bob", renamed, other)).await.0.unwrap_err();
    assert_eq!((err.code, err.reason), (403, StatusReason::Forbidden));
    assert_eq!(
        err.message,
        "certificatesigningrequests.certificates.k8s.io \"c\" is forbidden: user not permitted to approve requests with signerName \"other.io/signer\""
    );

    // Only the approval subresource is checked.
    c.admit(&mut subresource_write("", "bob", csr("other.io/signer", &[]), csr("other.io/signer", &[]))).await.0.unwrap();
}

#[tokio::test]
async fn signing_needs_sign_when_the_certificate_or_conditions_change() {
    let grants = Arc::new(Grants { allowed: vec![("sign", "example.com/signer")], ..Grants::default() });
    let authz: Arc<dyn Authorizer> = grants.clone();
    let c = Cluster::new(move |_| Box::new(CertificateSigning::new(authz))).await;
    let old = with_status(&csr("example.com/signer", &[]), json!({"conditions": [{"type": "Approved", "status": "True"}]}));
    let issued = with_status(&old, json!({"conditions": [{"type": "Approved", "status": "True"}], "certificate": "Y2VydA=="}));
    c.admit(&mut subresource_write("status", "signer", issued.clone(), old.clone())).await.0.unwrap();

    let other_old = with_status(&csr("other.io/x", &[]), old["status"].clone());
    let other_new = with_status(&other_old, issued["status"].clone());
    let err = c.admit(&mut subresource_write("status", "signer", other_new, other_old.clone())).await.0.unwrap_err();
    assert_eq!(err.code, 403);
    assert_eq!(
        err.message,
        "certificatesigningrequests.certificates.k8s.io \"c\" is forbidden: user not permitted to sign requests with signerName \"other.io/x\""
    );

    // A status write that changes neither is not signing, so nobody is asked.
    grants.asked.lock().unwrap().clear();
    c.admit(&mut subresource_write("status", "signer", other_old.clone(), other_old)).await.0.unwrap();
    assert!(grants.asked.lock().unwrap().is_empty());
}

#[tokio::test]
async fn the_apiserver_client_signer_never_issues_system_masters() {
    let c = Cluster::new(|_| Box::new(CertificateSubjectRestriction::new())).await;
    let masters = csr("kubernetes.io/kube-apiserver-client", &["dev", "system:masters"]);
    let err = c.admit(&mut create_attrs("certificatesigningrequests", masters)).await.0.unwrap_err();
    assert_eq!((err.code, err.reason), (403, StatusReason::Forbidden));
    assert_eq!(
        err.message,
        "certificatesigningrequests.certificates.k8s.io \"c\" is forbidden: use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"
    );

    // Other groups, and other signers even with system:masters, are left to approvers.
    c.admit(&mut create_attrs("certificatesigningrequests", csr("kubernetes.io/kube-apiserver-client", &["dev"]))).await.0.unwrap();
    c.admit(&mut create_attrs("certificatesigningrequests", csr("example.com/signer", &["system:masters"]))).await.0.unwrap();

    // A request that is not a PEM CSR is refused with kube's parse error.
    let mut bad = csr("kubernetes.io/kube-apiserver-client", &[]);
    bad["spec"]["request"] =
        json!(base64::engine::general_purpose::STANDARD.encode("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"));
    let err = c.admit(&mut create_attrs("certificatesigningrequests", bad)).await.0.unwrap_err();
    assert_eq!(
        err.message,
        "certificatesigningrequests.certificates.k8s.io \"c\" is forbidden: failed to parse CSR: PEM block type must be CERTIFICATE REQUEST"
    );
}
