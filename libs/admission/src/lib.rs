//! Admission (kube's `k8s.io/apiserver/pkg/admission`): what runs between decoding a write and
//! storing it. A plugin mutates, validates, or both, for the operations it handles; the chain
//! runs every enabled plugin's mutation in kube's plugin order, then every validation, and
//! collects the warnings and audit annotations they leave. Which plugins run is kube's
//! `--enable-admission-plugins` / `--disable-admission-plugins` over kube's default set, and
//! their configuration comes from `--admission-control-config-file`.
//!
//! The server builds the attributes of each write (create, update, patch, apply, delete,
//! deletecollection, and subresources) and calls the chain; plugins that need the store or
//! the network (webhooks, policies) get them through their own constructors.

pub mod attributes;
pub mod chain;
pub mod config;
pub mod equivalents;
pub mod observer;
pub mod plugins;

pub use attributes::{Attributes, Operation, Outcome, Reinvocation};
pub use chain::{AdmissionPlugin, Chain};
pub use config::{AdmissionConfig, ConfigError};
pub use equivalents::EquivalentResources;
pub use observer::{AdmissionObserver, WebhookRejection};
pub use plugins::{enabled_plugins, PluginNames};
