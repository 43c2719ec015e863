//! CertificateSubjectRestriction: the kube-apiserver-client signer never issues a
//! `system:masters` certificate, which no RBAC could take back.

use async_trait::async_trait;
use base64::Engine;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::prelude::FromDer;

use super::{is_csr, signer_name};

/// kube's `certificatesv1.KubeAPIServerClientSignerName`.
const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";

/// The plugin.
#[derive(Default)]
pub struct CertificateSubjectRestriction;

impl CertificateSubjectRestriction {
    /// The plugin.
    pub fn new() -> Self {
        CertificateSubjectRestriction
    }
}

/// The subject's organizations (the groups the certificate would carry) of `spec.request`,
/// base64 of a PEM `CERTIFICATE REQUEST`; errors read as kube's `ParseCSR` ones where it has
/// its own text.
fn organizations(request: &str) -> Result<Vec<String>, String> {
    let pem = base64::engine::general_purpose::STANDARD.decode(request).map_err(|e| e.to_string())?;
    let block = x509_parser::pem::parse_x509_pem(&pem).ok().map(|(_, block)| block);
    let Some(block) = block.filter(|b| b.label == "CERTIFICATE REQUEST") else {
        return Err("PEM block type must be CERTIFICATE REQUEST".into());
    };
    let (_, csr) = X509CertificationRequest::from_der(&block.contents).map_err(|e| e.to_string())?;
    let subject = &csr.certification_request_info.subject;
    Ok(subject.iter_organization().filter_map(|o| o.as_str().ok()).map(str::to_owned).collect())
}

#[async_trait]
impl AdmissionPlugin for CertificateSubjectRestriction {
    fn name(&self) -> &'static str {
        "CertificateSubjectRestriction"
    }

    fn handles(&self, operation: Operation) -> bool {
        operation == Operation::Create
    }

    async fn validate(&self, attrs: &Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !is_csr(attrs, "") || signer_name(attrs.object.as_ref()) != KUBE_APISERVER_CLIENT {
            return Ok(());
        }
        let request = attrs.object.as_ref().and_then(|c| c.pointer("/spec/request")).and_then(|r| r.as_str()).unwrap_or_default();
        let groups = organizations(request).map_err(|e| attrs.forbidden(&format!("failed to parse CSR: {e}")))?;
        if groups.iter().any(|g| g == "system:masters") {
            return Err(attrs.forbidden(&format!("use of {KUBE_APISERVER_CLIENT} signer with system:masters group is not allowed")));
        }
        Ok(())
    }
}
