//! kube's three CertificateSigningRequest plugins (`plugin/pkg/admission/certificates/...`):
//! who may approve and who may sign requests of a signer is decided by RBAC on the synthetic
//! `signers` resource, and nobody may ask the kube-apiserver-client signer for a
//! `system:masters` certificate.

mod approval;
mod signing;
mod subject_restriction;

pub use approval::CertificateApproval;
pub use signing::CertificateSigning;
pub use subject_restriction::CertificateSubjectRestriction;

use kapi_admission::Attributes;
use kapi_auth::{Authorizer, UserInfo};

/// Whether `attrs` writes certificatesigningrequests (or `subresource` of them).
fn is_csr(attrs: &Attributes, subresource: &str) -> bool {
    attrs.resource.group == "certificates.k8s.io" && attrs.resource.name == "certificatesigningrequests" && attrs.subresource == subresource
}

/// kube's `IsAuthorizedForSignerName`: `verb` on the signer by name, or failing that on its
/// domain's wildcard (`example.com/*`), so that one rule can grant every signer of a domain.
fn authorized_for_signer(authorizer: &dyn Authorizer, user: &UserInfo, verb: &str, signer: &str) -> bool {
    let domain = signer.split('/').next().unwrap_or_default();
    [signer.to_owned(), format!("{domain}/*")].into_iter().any(|name| {
        let attrs = kapi_auth::Attributes {
            user: user.clone(),
            verb: verb.into(),
            api_group: "certificates.k8s.io".into(),
            api_version: "*".into(),
            resource: "signers".into(),
            name,
            resource_request: true,
            ..kapi_auth::Attributes::default()
        };
        authorizer.authorize(&attrs).is_allowed()
    })
}

/// The signer a CSR names ("" when it names none, which validation refuses anyway).
fn signer_name(csr: Option<&serde_json::Value>) -> &str {
    csr.and_then(|c| c.pointer("/spec/signerName")).and_then(serde_json::Value::as_str).unwrap_or_default()
}
