//! Kubernetes API machinery for kapi: the types and pure functions that every other crate shares.
//!
//! Nothing here does IO. Objects travel as `serde_json::Value` (a JSON object); the helpers in
//! [`meta`] read and write their `metadata` the way kube-apiserver's `ObjectMeta` accessors do.
#![warn(missing_docs)]

pub mod continue_token;
pub mod fields;
pub mod go_json;
pub mod gvk;
pub mod labels;
pub mod media;
pub mod patch;
pub mod resource_version;
pub mod status;
pub mod strategic_merge;
pub mod time;
pub mod validation;
pub mod version_order;
pub mod watch;

pub use gvk::{GroupResource, GroupVersion, GroupVersionKind, GroupVersionResource};
pub use status::{ApiError, Cause, StatusReason};

/// Result alias used across the API layers: failures are already API errors.
pub type Result<T, E = ApiError> = std::result::Result<T, E>;
