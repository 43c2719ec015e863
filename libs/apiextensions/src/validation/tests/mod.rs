//! Tests of CRD validation with kube's exact messages and paths.

mod fixtures;
mod invalid_schema;
mod invalid_spec;
mod update;
mod valid;
