//! Admission webhooks (kube's `k8s.io/apiserver/pkg/admission/plugin/webhook`): the
//! MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins.
//!
//! Both read their configurations from the watch cache on each request (parsed again only
//! when a configuration changed), match a request against each webhook's selectors, rules and
//! match conditions, send an AdmissionReview (v1, or v1beta1 to webhooks that accept only it)
//! over the shared pooled client, and handle the answer as kube does: refusals with the
//! webhook's status, failed calls under the failurePolicy, JSONPatch mutations, warnings and
//! audit annotations.

mod call;
mod conditions;
pub mod hooks;
pub mod matching;
mod mutating;
mod plugin;
pub mod review;
mod validating;

pub use mutating::MutatingWebhooks;
pub use validating::ValidatingWebhooks;
