//! The resource registry: what kapi serves and how each resource behaves.
//!
//! - [`catalog`]: every served resource with its discovery data (kind, verbs, scope, short
//!   names, categories, subresources), the single source for routing and discovery.
//! - [`fields`]: the field-selector attributes each kind supports.
//! - [`defaults`], [`validation`]: what kube-apiserver defaults and rejects, per kind.
//! - [`omitempty`]: fields kube's Go structs omit when empty (or write as null), applied on write.
//! - [`table`]: server-side printing (`as=Table`) columns per kind.
//! - [`semantics`]: kube's per-kind registry answers (status reset, create on update,
//!   unconditional update, generation, DELETE's answer) in one table.
//! - [`strategy`] and [`rest`]: one generic REST store that applies a per-resource strategy
//!   around storage calls in kube-apiserver's order.
#![warn(missing_docs)]

pub mod catalog;
pub mod conversion;
pub mod defaults;
pub mod fields;
pub mod omitempty;
pub mod rest;
pub mod semantics;
pub mod service_alloc;
pub mod strategy;
pub mod table;
pub mod validation;
