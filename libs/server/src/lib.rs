//! The generic API server of kapi: the filter chain, routing, handlers, discovery, health,
//! metrics and TLS serving, over the registry's generic REST store.
//!
//! Start at [`config::run`] (options to a serving process) and [`handler`] (the request path).
#![warn(missing_docs)]

pub mod admission;
pub mod audit_webhook;
pub mod auth_webhooks;
pub mod bootstrap;
pub mod bulk;
pub mod config;
pub mod controllers;
pub mod decode;
pub mod encryption_reload;
pub mod endpoints;
pub mod field_manager;
pub mod field_validation;
pub mod filters;
pub mod flow_control;
pub mod handler;
pub mod handlers;
pub mod health;
pub mod kubelet;
pub mod lifecycle;
pub mod metrics;
pub mod negotiation;
pub mod node_sync;
pub mod oidc;
pub mod patch_decode;
pub mod pki;
pub mod post_start;
pub mod query;
pub mod rbac_bootstrap;
pub mod rbac_sync;
pub mod scale;
pub mod scope;
pub mod request_info;
pub mod response;
pub mod serve;
pub mod service_accounts;
pub mod state;
pub mod storage;
pub mod tier;
pub mod tls;
pub mod tls_files;
pub mod tls_policy;
pub mod tls_sni;
pub mod traced_store;
pub mod transform;
pub mod watch_stream;

pub use kapi_registry::service_alloc::ServiceNetwork;
pub use config::{run, AuthorizationMode, EndpointReconcilerType, Options, StartError};
