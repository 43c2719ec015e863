//! CertificateSigning: a `certificatesigningrequests/status` write that changes the issued
//! certificate or the conditions needs `sign` on the request's signer.

use std::sync::Arc;

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;
use kapi_auth::Authorizer;
use serde_json::Value;

use super::{authorized_for_signer, is_csr, signer_name};

/// The plugin.
pub struct CertificateSigning {
    authorizer: Arc<dyn Authorizer>,
}

impl CertificateSigning {
    /// The plugin, asking `authorizer` (the server's) about the requester.
    pub fn new(authorizer: Arc<dyn Authorizer>) -> Self {
        CertificateSigning { authorizer }
    }
}

/// A status field, absent and null alike.
fn status_field<'a>(csr: Option<&'a Value>, field: &str) -> Option<&'a Value> {
    csr.and_then(|c| c.get("status")).and_then(|s| s.get(field)).filter(|v| !v.is_null())
}

/// kube's semantic equality treats a missing list and an empty one alike.
fn conditions(csr: Option<&Value>) -> Option<&Value> {
    status_field(csr, "conditions").filter(|c| c.as_array().is_none_or(|a| !a.is_empty()))
}

#[async_trait]
impl AdmissionPlugin for CertificateSigning {
    fn name(&self) -> &'static str {
        "CertificateSigning"
    }

    fn handles(&self, operation: Operation) -> bool {
        operation == Operation::Update
    }

    async fn validate(&self, attrs: &Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !is_csr(attrs, "status") {
            return Ok(());
        }
        let (old, new) = (attrs.old_object.as_ref(), attrs.object.as_ref());
        // Only issuing (or revoking) a certificate and changing conditions is signing; other
        // status writes need nothing more than the subresource's RBAC.
        if status_field(old, "certificate") == status_field(new, "certificate") && conditions(old) == conditions(new) {
            return Ok(());
        }
        let signer = signer_name(old);
        if !authorized_for_signer(self.authorizer.as_ref(), &attrs.user, "sign", signer) {
            return Err(attrs.forbidden(&format!("user not permitted to sign requests with signerName {signer:?}")));
        }
        Ok(())
    }
}
