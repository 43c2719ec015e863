//! The process's tracer provider: kube's `tracing.NewProvider` (OTLP over gRPC without TLS, a
//! batch span processor, `ParentBased(TraceIDRatioBased)` sampling, the resource
//! `service.name=apiserver` with the server's instance ID).

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;

/// kube's instrumentation scope for the spans its libraries start.
const SCOPE: &str = "k8s.io/component-base/tracing";

/// Spans waiting for export at most; past this, new spans are dropped (the OTel default).
const MAX_QUEUE: usize = 2048;
/// How long one export may take before it is abandoned.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutting down waits for the last spans to leave.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// The installed tracer; unset (and every span call a no-op) without `--tracing-config-file`.
pub(crate) static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// What a TracingConfiguration asks for, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The collector, as the configuration names it (`host:port`, `dns:///host:port`).
    pub endpoint: String,
    /// Root spans sampled per million requests (0..=1000000).
    pub sampling_rate_per_million: u32,
    /// `service.instance.id` of the spans (kube's APIServerID).
    pub instance_id: String,
}

/// Why the tracer could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The endpoint names no gRPC target kapi can reach.
    #[error("invalid tracing endpoint {endpoint:?}: {reason}")]
    Endpoint {
        /// The configured endpoint.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The OTLP exporter refused its configuration.
    #[error("OTLP exporter: {0}")]
    Exporter(String),
    /// A tracer was installed already in this process.
    #[error("tracing is already set up in this process")]
    AlreadyInstalled,
}

/// The installed provider, for [`shutdown`].
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Sends the spans still queued (waiting a few seconds at most) and stops the exporter; a
/// no-op when nothing is installed. It blocks: call it at exit, off the async workers, while
/// the runtime that [`install`] ran in still runs (the gRPC channel's task lives there).
pub fn shutdown() {
    if let Some(provider) = PROVIDER.get() {
        let _ = provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT);
    }
}

/// The gRPC URI of a TracingConfiguration endpoint (`http://host:port`): kube dials
/// `host:port` and `dns:` targets with gRPC's name syntax, without TLS. The error says what
/// is wrong with any other.
pub fn grpc_uri(endpoint: &str) -> Result<String, Error> {
    let bad = |reason: &str| Error::Endpoint { endpoint: endpoint.to_owned(), reason: reason.to_owned() };
    let authority = match endpoint.split_once("://") {
        None => endpoint,
        // dns://[resolver]/host:port: the resolver is the system's here.
        Some(("dns", rest)) => rest.split_once('/').map_or(rest, |(_, target)| target),
        Some(("unix" | "unix-abstract", _)) => return Err(bad("unix socket endpoints are not supported by kapi; use host:port")),
        Some((scheme, _)) => return Err(bad(&format!("unsupported scheme: {scheme}. Options are none or dns"))),
    };
    let uri = format!("http://{authority}");
    match uri.parse::<http::Uri>() {
        Ok(parsed) if parsed.port_u16().is_some() && parsed.host().is_some_and(|h| !h.is_empty()) && parsed.path() == "/" => Ok(uri),
        Ok(_) => Err(bad("want host:port")),
        Err(e) => Err(bad(&e.to_string())),
    }
}

/// Builds the exporter and the tracer and installs them for the whole process. Call it from
/// inside the Tokio runtime: the gRPC channel's connection task lives there.
pub fn install(settings: &Settings) -> Result<(), Error> {
    if TRACER.get().is_some() {
        return Err(Error::AlreadyInstalled);
    }
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(grpc_uri(&settings.endpoint)?)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|e| Error::Exporter(e.to_string()))?;
    let batch = BatchConfigBuilder::default().with_max_queue_size(MAX_QUEUE).build();
    let processor = BatchSpanProcessor::builder(exporter).with_batch_config(batch).build();
    let ratio = f64::from(settings.sampling_rate_per_million.min(1_000_000)) / 1_000_000.0;
    let resource = Resource::builder_empty()
        .with_attributes([KeyValue::new("service.name", "apiserver"), KeyValue::new("service.instance.id", settings.instance_id.clone())])
        .build();
    let inner = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio))))
        .with_resource(resource)
        .build();
    TRACER.set(inner.tracer(SCOPE)).map_err(|_| Error::AlreadyInstalled)?;
    let _ = PROVIDER.set(inner);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_grpc_targets() {
        assert_eq!(grpc_uri("localhost:4317").unwrap(), "http://localhost:4317");
        assert_eq!(grpc_uri("127.0.0.1:1234").unwrap(), "http://127.0.0.1:1234");
        assert_eq!(grpc_uri("dns:///collector.example:4317").unwrap(), "http://collector.example:4317");
        assert_eq!(grpc_uri("dns://8.8.8.8/collector:4317").unwrap(), "http://collector:4317");
        assert!(grpc_uri("localhost").is_err());
        assert!(grpc_uri("http://localhost:4317").is_err());
        assert!(grpc_uri("unix:///run/otel.sock").is_err());
        assert!(grpc_uri("host:port").is_err());
        assert!(grpc_uri("a b:1").is_err());
    }
}
