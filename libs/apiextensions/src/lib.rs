//! The extensions tier, as kube's apiextensions-apiserver: CustomResourceDefinitions and the
//! custom resources they define.
//!
//! - [`schema`]: structural schemas of custom resources: validation of objects against them
//!   (with kube's messages), pruning of unknown fields, defaulting, ratcheting on update.
//! - [`validation`]: validation of CustomResourceDefinition objects themselves (names,
//!   versions, structural-schema rules, printer columns), with kube's messages.
//! - [`printer`]: kube's JSONPath subset, evaluated for `additionalPrinterColumns` (Table
//!   cells), `selectableFields` and the scale subresource's paths.
#![warn(missing_docs)]

pub mod cel;
/// Go's printers (`%v`, `%q`, `json.Marshal`) for decoded JSON values, shared by all modules.
mod gofmt;
pub mod printer;
pub mod schema;
pub mod validation;
