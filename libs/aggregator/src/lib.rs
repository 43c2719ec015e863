//! The aggregator tier (kube-aggregator): the head of the server chain. It follows
//! apiregistration.k8s.io/v1 APIService objects; group versions an APIService hands to a
//! Service (an extension API server such as metrics-server) are proxied there with the
//! caller's identity under the proxy client certificate, and merged into discovery at the
//! place their priorities give them; the rest go down the chain (core, then extensions).
//!
//! Its controllers register a local APIService for every group version the chain serves and
//! keep every APIService's `Available` condition, with kube's reasons and the
//! `aggregator_unavailable_apiservice` series.

#![forbid(unsafe_code)]

pub mod apiservice;
mod available;
mod backends;
mod checks;
mod controllers;
pub mod discovery;
mod proxy;
mod tier;
mod transport;

pub use backends::Backends;
pub use tier::{AggregatorOptions, AggregatorTier, AggregatorTierBuilder};
pub use transport::ProxyIdentity;
