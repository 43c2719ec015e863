//! OpenTelemetry tracing as kube-apiserver does it (`k8s.io/component-base/tracing` and the
//! `--tracing-config-file` option).
//!
//! - [`install`] builds the process's tracer: spans go to an OTLP gRPC collector through a
//!   batch span processor (its own thread and a bounded queue: a slow or absent collector
//!   drops spans, it never blocks a request), sampled `ParentBased(TraceIDRatioBased(rate))`,
//!   so a client's sampled `traceparent` is always traced and other requests at the rate.
//! - The request filter starts a server span from the client's W3C trace context
//!   ([`extract`], [`Span::server`]) and runs the rest of the request inside it.
//! - Everything deeper asks for a child with [`Span::child`] or [`traced`], as kube's
//!   `tracing.Start`: a span is made only when the current context already holds a sampled
//!   one. Without `--tracing-config-file` nothing is installed and every call returns at the
//!   first check, so tracing costs nothing.
//! - Outgoing calls (webhooks) carry the current span in `traceparent` ([`inject`]).
//!
//! The current span travels with the request's future (`opentelemetry::context::FutureExt`):
//! each poll makes it current on the polling thread, so no signature in between changes. Work
//! handed to another task starts from an empty context and is not part of the trace.

mod provider;
mod span;

pub use opentelemetry::trace::SpanKind;
pub use opentelemetry::KeyValue;
pub use provider::{grpc_uri, install, shutdown, Error, Settings};
pub use span::{enabled, extract, inject, traced, within, Span};
