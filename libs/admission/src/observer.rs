//! What admission reports to the server's metrics (kube's `apiserver_admission_controller_*`
//! and `apiserver_admission_webhook_*` series): the chain times each plugin, the webhook
//! plugins each call. The server implements it over its registry; the admission crates stay
//! free of metrics code.

use std::time::Duration;

use crate::attributes::Operation;

/// Why a webhook call refused a request (kube's `error_type` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookRejection {
    /// The webhook answered with a refusal (`no_error`).
    Denied,
    /// The webhook could not be called, or answered nonsense, under failurePolicy Fail
    /// (`calling_webhook_error`).
    CallFailed,
    /// kapi could not handle the answer (`apiserver_internal_error`).
    Internal,
}

impl WebhookRejection {
    /// kube's label value.
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookRejection::Denied => "no_error",
            WebhookRejection::CallFailed => "calling_webhook_error",
            WebhookRejection::Internal => "apiserver_internal_error",
        }
    }
}

/// The receiver of admission's observations.
pub trait AdmissionObserver: Send + Sync {
    /// One plugin's phase (`step`: `admit` or `validate`) for one request.
    fn plugin(&self, name: &str, step: &'static str, operation: Operation, rejected: bool, elapsed: Duration);

    /// One webhook call (`kind`: `admit` for mutating, `validating`), with why and with which
    /// code it refused, if it did.
    fn webhook(&self, name: &str, kind: &'static str, operation: Operation, rejection: Option<(WebhookRejection, u16)>, elapsed: Duration);
}
