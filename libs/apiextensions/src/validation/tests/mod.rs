//! Tests of CRD validation with kube's exact messages and paths.

mod fixtures;
mod valid;
