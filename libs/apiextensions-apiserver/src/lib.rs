//! The extensions tier of kapi, as kube's apiextensions-apiserver: it serves
//! CustomResourceDefinitions and, for every Established one, its custom resources, through the
//! generic server's verb handlers (one [`kapi_server::scope::ResourceScope`] per served
//! version), and runs the CRD controllers.
//!
//! - [`tier`]: the tier (what is served, kept current from the CRD watch cache) and its
//!   controllers (names, Established, API approval, instance cleanup on delete).
//! - [`crd`]: reading CRDs and their strategy.
//! - [`conversion`]: the CRD conversion webhook client (ConversionReview over HTTPS).
//! - [`custom`]: the strategy and scope of custom resources (schema validation, pruning,
//!   defaulting, printer columns, scale, selectable fields).
//! - [`names`]: the status the naming, establishing and approval controllers converge to.
//! - [`served`]: the snapshot of served CRDs.
//! - [`openapi`]: the OpenAPI v2/v3 parts of served CRDs, published into the server's documents.
#![warn(missing_docs)]

pub mod conversion;
pub mod crd;
pub mod custom;
pub mod names;
pub mod openapi;
pub mod served;
pub mod tier;

#[cfg(test)]
mod cel_tests;

pub use tier::{ExtensionsTier, ExtensionsTierBuilder};
