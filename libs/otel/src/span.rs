//! Spans inside a request, and the W3C trace context in and out of the process.

use std::borrow::Cow;
use std::future::Future;
use std::time::SystemTime;

use opentelemetry::context::FutureExt as _;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;

use crate::provider::TRACER;

/// Whether a tracer is installed (`--tracing-config-file` was given).
pub fn enabled() -> bool {
    TRACER.get().is_some()
}

/// A span of the running request. It ends when dropped; the work it covers runs inside it
/// with [`Span::run`] (or [`traced`]), so that the spans that work starts are its children.
pub struct Span {
    cx: Context,
}

/// The current context, when a tracer is installed and the context holds a span being
/// recorded (a sampled request); kube's `tracing.Start` makes a child only then.
fn recording_parent() -> Option<Context> {
    TRACER.get()?;
    Context::map_current(|cx| cx.span().is_recording().then(|| cx.clone()))
}

impl Span {
    /// A child of the current span, or `None` outside a traced request (then `attributes` is
    /// not even called).
    pub fn child(name: &'static str, kind: SpanKind, attributes: impl FnOnce() -> Vec<KeyValue>) -> Option<Span> {
        let parent = recording_parent()?;
        let tracer = TRACER.get()?;
        let span = tracer.span_builder(name).with_kind(kind).with_attributes(attributes()).start_with_context(tracer, &parent);
        Some(Span { cx: parent.with_span(span) })
    }

    /// The request's server span, child of `parent` (the client's context from [`extract`], or
    /// an empty one) and sampled by the installed sampler; `None` when no tracer is installed.
    /// `start` is when the request arrived.
    pub fn server(name: String, parent: &Context, start: SystemTime, attributes: Vec<KeyValue>) -> Option<Span> {
        let tracer = TRACER.get()?;
        let span = tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .with_start_time(start)
            .with_attributes(attributes)
            .start_with_context(tracer, parent);
        Some(Span { cx: parent.with_span(span) })
    }

    /// Whether the span is recorded (its request was sampled).
    pub fn is_recording(&self) -> bool {
        self.cx.span().is_recording()
    }

    /// Runs `work` with this span current: the spans it starts are children of this one, its
    /// outgoing calls carry this span's trace context.
    pub async fn run<F: Future>(&self, work: F) -> F::Output {
        work.with_context(self.cx.clone()).await
    }

    /// Records a point in time, as kube's `span.AddEvent`.
    pub fn add_event(&self, name: &'static str) {
        self.cx.span().add_event(name, Vec::new());
    }

    /// Adds or replaces an attribute.
    pub fn set_attribute(&self, attribute: KeyValue) {
        self.cx.span().set_attribute(attribute);
    }

    /// Marks the span failed with `description`.
    pub fn set_error(&self, description: impl Into<Cow<'static, str>>) {
        self.cx.span().set_status(Status::error(description));
    }

    /// Puts this span's trace context into `headers` (`traceparent`, `tracestate`).
    pub fn inject_into(&self, headers: &mut http::HeaderMap) {
        inject_context(&self.cx, headers);
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        self.cx.span().end();
    }
}

/// Runs `work` inside a child span `name` of the current span, or simply runs it outside a
/// traced request.
pub async fn traced<F: Future>(name: &'static str, attributes: impl FnOnce() -> Vec<KeyValue>, work: F) -> F::Output {
    let span = Span::child(name, SpanKind::Internal, attributes);
    within(span.as_ref(), work).await
}

/// Runs `work` inside `span` when there is one: for a span started apart (its attributes
/// read from what `work` borrows, or set once `work` is done).
pub async fn within<F: Future>(span: Option<&Span>, work: F) -> F::Output {
    match span {
        Some(span) => span.run(work).await,
        None => work.await,
    }
}

struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

struct HeadersMut<'a>(&'a mut http::HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (http::HeaderName::from_bytes(key.as_bytes()), http::HeaderValue::from_str(&value)) {
            self.0.insert(name, value);
        }
    }
}

/// The client's trace context from `traceparent` and `tracestate` (an empty context when they
/// are absent or malformed, as the W3C propagator reads them).
pub fn extract(headers: &http::HeaderMap) -> Context {
    TraceContextPropagator::new().extract(&Headers(headers))
}

fn inject_context(cx: &Context, headers: &mut http::HeaderMap) {
    if cx.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(cx, &mut HeadersMut(headers));
    }
}

/// Puts the current span's trace context into `headers`, inside a traced request; nothing
/// otherwise.
pub fn inject(headers: &mut http::HeaderMap) {
    if let Some(cx) = recording_parent() {
        inject_context(&cx, headers);
    }
}
