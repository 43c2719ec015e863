//! managedFields and server-side apply, after kube's structured-merge-diff and the apiserver's
//! field manager: field sets in `FieldsV1` form, typed walks over an object and its schema
//! (field sets, comparison, apply merge, removal), and the ownership bookkeeping on top.
//!
//! The schema comes through [`TypeSchema`], implemented over the OpenAPI definitions in
//! `kapi-openapi` and over CRD structural schemas in `kapi-apiextensions`, so this crate stays
//! free of any particular schema source; [`ApplySchema`] hands either to the handlers.
#![warn(missing_docs)]

pub mod erased;
pub mod fieldpath;
pub mod manager;
pub mod schema;
pub mod typed;

pub use erased::ApplySchema;
pub use fieldpath::{FieldSet, Path, PathElement};
pub use manager::{apply, decode, encode, track_update, Entry, Operation, Writer};
pub use schema::{Deduced, ListType, Shape, TypeSchema};
