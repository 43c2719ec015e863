//! AlwaysAdmit and AlwaysDeny (kube's deprecated `plugin/pkg/admission/admit` and `deny`):
//! test plugins kube still accepts; AlwaysDeny refuses every write.

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;

/// Admits everything.
#[derive(Default)]
pub struct AlwaysAdmit;

#[async_trait]
impl AdmissionPlugin for AlwaysAdmit {
    fn name(&self) -> &'static str {
        "AlwaysAdmit"
    }

    fn handles(&self, _operation: Operation) -> bool {
        true
    }
}

/// Refuses everything.
#[derive(Default)]
pub struct AlwaysDeny;

#[async_trait]
impl AdmissionPlugin for AlwaysDeny {
    fn name(&self) -> &'static str {
        "AlwaysDeny"
    }

    fn handles(&self, _operation: Operation) -> bool {
        true
    }

    async fn admit(&self, attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        Err(attrs.forbidden("admission control is denying all modifications"))
    }

    async fn validate(&self, attrs: &Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        Err(attrs.forbidden("admission control is denying all modifications"))
    }
}
