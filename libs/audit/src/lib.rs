//! Auditing (kube's `k8s.io/apiserver/pkg/audit`): which requests are recorded and how much of
//! them ([`Policy`]), the record itself ([`Event`], audit.k8s.io/v1), and where records go
//! ([`LogBackend`]: a file or stdout, JSON lines, kube's rotation).
//!
//! The server's audit filter asks the policy for a request's level, fills an event as the
//! request runs (authorization and admission add annotations, handlers the request and response
//! objects) and hands each stage's copy to the backend.

pub mod event;
pub mod log;
pub mod policy;

pub use event::{Event, ObjectRef};
pub use log::{LogBackend, LogOptions, Mode};
pub use policy::{Level, Policy, PolicyError, RequestAttributes, Stage};
