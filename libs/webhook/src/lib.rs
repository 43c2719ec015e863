//! kube's webhook client (`k8s.io/apiserver/pkg/util/webhook`), shared by admission webhooks
//! and CRD conversion webhooks.
//!
//! A webhook is configured by a `clientConfig` ([`ClientConfig`]): a `url`, or a `service`
//! reached through its EndpointSlices ([`EndpointSliceResolver`]; kapi has no service network)
//! and verified as `<service>.<namespace>.svc`, trusting the `caBundle` only. One [`Client`]
//! serves every webhook of a process and keeps their connections open between calls.
//!
//! Failures ([`CallError`]) carry the texts kube-apiserver produces for the same failure: Go's
//! net/http, crypto/tls and client-go wording, mapped from what hyper and rustls report, so that
//! what a user sees matches what kube's documentation and tooling expect.

mod client;
mod config;
mod error;
mod kubeconfig;
mod pool;
mod resolver;
mod tls;

pub use client::{observe_calls_with, CallObserver, Client};
pub use config::ClientConfig;
pub use error::CallError;
pub use resolver::{EndpointSliceResolver, ServiceResolver};
pub use tls::backend_client_config;

/// A failed system call as Go's syscall package words it (`connection refused`): kube's
/// messages quote Go's dial errors.
pub fn go_errno_text(e: &std::io::Error) -> String {
    error::go_errno_text(e)
}
