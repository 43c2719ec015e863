//! CertificateApproval: writing `certificatesigningrequests/approval` needs `approve` on the
//! request's signer.

use std::sync::Arc;

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;
use kapi_auth::Authorizer;

use super::{authorized_for_signer, is_csr, signer_name};

/// The plugin.
pub struct CertificateApproval {
    authorizer: Arc<dyn Authorizer>,
}

impl CertificateApproval {
    /// The plugin, asking `authorizer` (the server's) about the requester.
    pub fn new(authorizer: Arc<dyn Authorizer>) -> Self {
        CertificateApproval { authorizer }
    }
}

#[async_trait]
impl AdmissionPlugin for CertificateApproval {
    fn name(&self) -> &'static str {
        "CertificateApproval"
    }

    fn handles(&self, operation: Operation) -> bool {
        operation == Operation::Update
    }

    async fn validate(&self, attrs: &Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !is_csr(attrs, "approval") {
            return Ok(());
        }
        // The stored object's signer, as kube checks it: an approval that also tries to change
        // the signer (which validation refuses) must not pick the signer it is checked against.
        let signer = signer_name(attrs.old_object.as_ref());
        if !authorized_for_signer(self.authorizer.as_ref(), &attrs.user, "approve", signer) {
            return Err(attrs.forbidden(&format!("user not permitted to approve requests with signerName {signer:?}")));
        }
        Ok(())
    }
}
