//! The cost of observability (issue 17): ConfigMap creates and GETs (the audit section's
//! workload) against kapi configured six ways, all in one run:
//!
//! - without the request metrics filter (`--disable-request-metrics`, a hidden benchmark aid:
//!   the baseline for the cost of metrics, which kube cannot turn off);
//! - metrics only (kapi's default);
//! - tracing with sampling 0 and with sampling 1,000,000 per million, exporting to an OTLP
//!   gRPC receiver this section runs (it counts the spans it is sent and keeps nothing);
//! - audit at Metadata to a file, in blocking mode (kube's default) and batch mode.
//!
//! The configurations run in rounds, forwards then backwards (A B C ... C B A ...), each on a
//! fresh kapi, and the report gives each one's median: this machine's run-to-run noise is
//! larger than the costs measured.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::audit::{workload, Plan, POLICY};
use crate::stats::{median, ms, Samples};
use crate::Kapi;

/// One way of starting kapi.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Config {
    NoRequestMetrics,
    Metrics,
    TracingOff,
    TracingAll,
    AuditBlocking,
    AuditBatch,
}

const CONFIGS: [Config; 6] = [
    Config::NoRequestMetrics,
    Config::Metrics,
    Config::TracingOff,
    Config::TracingAll,
    Config::AuditBlocking,
    Config::AuditBatch,
];

impl Config {
    fn label(self) -> &'static str {
        match self {
            Config::NoRequestMetrics => "no request metrics (baseline)",
            Config::Metrics => "metrics only (default)",
            Config::TracingOff => "tracing, sampling 0",
            Config::TracingAll => "tracing, sampling 100%",
            Config::AuditBlocking => "audit Metadata, blocking",
            Config::AuditBatch => "audit Metadata, batch",
        }
    }

    /// What this configuration is compared with, and its target (percent), if it has one.
    fn reference(self) -> Option<(Config, Option<f64>)> {
        match self {
            Config::NoRequestMetrics => None,
            Config::Metrics => Some((Config::NoRequestMetrics, Some(3.0))),
            Config::AuditBlocking | Config::AuditBatch => Some((Config::Metrics, Some(10.0))),
            Config::TracingOff | Config::TracingAll => Some((Config::Metrics, None)),
        }
    }
}

/// One run of the workload against one configuration.
struct Measured {
    creates: Samples,
    gets: Samples,
    /// kapi's CPU seconds during the creates and during the GETs.
    cpu: (f64, f64),
    /// Spans the receiver was sent, or audit events written.
    side: usize,
}

async fn measure(
    kapi_bin: &Path,
    plan: &Plan,
    config: Config,
    receiver: &Receiver,
) -> Result<Measured, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let (policy, log, tracing) = (path("policy.yaml"), path("audit.log"), path("tracing.yaml"));
    let write = |file: &str, text: &str| std::fs::write(file, text).map_err(|e| e.to_string());
    let mut args: Vec<&str> = Vec::new();
    match config {
        Config::NoRequestMetrics => args.push("--disable-request-metrics"),
        Config::Metrics => {}
        Config::TracingOff | Config::TracingAll => {
            let rate = if config == Config::TracingAll {
                1_000_000
            } else {
                0
            };
            write(
                &tracing,
                &format!(
                    "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpoint: 127.0.0.1:{}\nsamplingRatePerMillion: {rate}\n",
                    receiver.port
                ),
            )?;
            args.extend(["--tracing-config-file", &tracing]);
        }
        Config::AuditBlocking | Config::AuditBatch => {
            write(&policy, POLICY)?;
            let mode = if config == Config::AuditBlocking {
                "blocking"
            } else {
                "batch"
            };
            args.extend([
                "--audit-policy-file",
                &policy,
                "--audit-log-path",
                &log,
                "--audit-log-mode",
                mode,
            ]);
        }
    }
    let kapi = Kapi::start_with(kapi_bin, &args)?;
    kapi.wait_ready().await?;
    let spans_before = receiver.spans();
    let mut cpu = Vec::new();
    let (creates, gets) = workload(&kapi, plan, |_| cpu.push(kapi.cpu_seconds())).await?;
    let cpu = (cpu[1] - cpu[0], cpu[2] - cpu[1]);
    drop(kapi); // SIGTERM: kapi sends the spans it still holds as it stops.
    let side = match config {
        Config::AuditBlocking | Config::AuditBatch => {
            let lines = std::fs::read_to_string(&log)
                .map(|t| t.lines().count())
                .unwrap_or(0);
            if lines < 2 * plan.objects {
                return Err(format!(
                    "the audit log has {lines} events for {} requests",
                    2 * plan.objects
                ));
            }
            lines
        }
        _ => {
            receiver.settle().await;
            (receiver.spans() - spans_before) as usize
        }
    };
    if config == Config::TracingOff && side > 0 {
        return Err(format!("sampling 0 exported {side} spans"));
    }
    if config == Config::TracingAll && side < 2 * plan.objects {
        return Err(format!(
            "sampling 100%: the receiver got {side} spans for {} requests",
            2 * plan.objects
        ));
    }
    Ok(Measured {
        creates,
        gets,
        cpu,
        side,
    })
}

/// The medians of one configuration for one kind of request.
struct Row {
    rate: f64,
    /// Each round's rate, in run order.
    rates: Vec<f64>,
    p50: f64,
    p99: f64,
    /// kapi's CPU microseconds per request.
    cpu_us: f64,
}

fn row(runs: &[Measured], creates: bool) -> Row {
    fn samples(m: &Measured, creates: bool) -> &Samples {
        if creates {
            &m.creates
        } else {
            &m.gets
        }
    }
    let pick = |m| samples(m, creates);
    let rates: Vec<f64> = runs.iter().map(|m| pick(m).per_second()).collect();
    Row {
        rate: median(rates.clone()),
        rates,
        p50: median(
            runs.iter()
                .map(|m| pick(m).percentile(0.5).as_secs_f64())
                .collect(),
        ),
        p99: median(
            runs.iter()
                .map(|m| pick(m).percentile(0.99).as_secs_f64())
                .collect(),
        ),
        cpu_us: median(
            runs.iter()
                .map(|m| {
                    let cpu = if creates { m.cpu.0 } else { m.cpu.1 };
                    1e6 * cpu / pick(m).count().max(1) as f64
                })
                .collect(),
        ),
    }
}

/// The section.
pub async fn run(kapi_bin: &Path, quick: bool) -> Result<String, String> {
    let plan = Plan::new(quick);
    let rounds = if quick { 1 } else { 7 };
    let receiver = Receiver::start().await?;
    let mut runs: Vec<Vec<Measured>> = CONFIGS.iter().map(|_| Vec::new()).collect();
    let mut order = Vec::new();
    for round in 0..rounds {
        let mut configs: Vec<usize> = (0..CONFIGS.len()).collect();
        if round % 2 == 1 {
            configs.reverse();
        }
        for i in configs {
            let m = measure(kapi_bin, &plan, CONFIGS[i], &receiver)
                .await
                .map_err(|e| format!("{}: {e}", CONFIGS[i].label()))?;
            runs[i].push(m);
            order.push(i);
        }
    }
    let spans = runs[3].iter().map(|m| m.side).max().unwrap_or(0);
    let events = runs[4].iter().map(|m| m.side).max().unwrap_or(0);

    let mut report = String::from("## Observability: metrics, tracing, audit\n\n");
    report.push_str(&format!(
        "{} ConfigMap creates then {} GETs over {} connections, on a fresh kapi per configuration; {rounds} round(s), the configurations in order, then in reverse order in alternate rounds; medians of the rounds. \
         A cost is the median over the rounds of the rate's drop against the named configuration in the same round (CPU: the change of the median CPU per request). CPU is kapi's own (user + system) per request. \
         Tracing exports over OTLP gRPC to a receiver in the benchmark process that counts spans and keeps nothing (sampling 100%: up to {spans} spans per run for {} requests). \
         Audit writes one Metadata event per request to a file (up to {events} events per run).\n\n",
        plan.objects, plan.objects, plan.concurrency, 2 * plan.objects
    ));
    report.push_str("| requests | configuration | per second | cost | target | kapi CPU per request | p50 | p99 | each round's rate |\n|---|---|---|---|---|---|---|---|---|\n");
    let mut verdicts = Vec::new();
    for (creates, what) in [(true, "creates"), (false, "GETs")] {
        let rows: Vec<Row> = runs.iter().map(|r| row(r, creates)).collect();
        for (i, config) in CONFIGS.iter().enumerate() {
            let r = &rows[i];
            let (cost, target) = match config.reference() {
                None => (String::new(), String::new()),
                Some((base, target)) => {
                    let b = &rows[CONFIGS.iter().position(|c| c == &base).unwrap_or(0)];
                    // Round by round (a configuration and its reference ran seconds apart at
                    // most), then the median: a slow spell of the machine hits both.
                    let cost = median(
                        r.rates
                            .iter()
                            .zip(&b.rates)
                            .map(|(r, b)| 100.0 * (1.0 - r / b.max(1e-9)))
                            .collect(),
                    );
                    let cpu = 100.0 * (r.cpu_us / b.cpu_us.max(1e-9) - 1.0);
                    let target = match target {
                        Some(t) => {
                            let met = cost <= t;
                            verdicts.push(format!(
                                "{what}, {}: {cost:.1}% (at most {t}%: {})",
                                config.label(),
                                if met { "met" } else { "missed" }
                            ));
                            format!("≤ {t}%: {}", if met { "met" } else { "missed" })
                        }
                        None => String::new(),
                    };
                    (
                        format!("{cost:.1}% (CPU {cpu:+.0}%) vs {}", short(base)),
                        target,
                    )
                }
            };
            let rates: Vec<String> = r.rates.iter().map(|v| format!("{v:.0}")).collect();
            report.push_str(&format!(
                "| {what} | {} | {:.0} | {cost} | {target} | {:.0} µs | {} | {} | {} |\n",
                config.label(),
                r.rate,
                r.cpu_us,
                ms(Duration::from_secs_f64(r.p50)),
                ms(Duration::from_secs_f64(r.p99)),
                rates.join(", ")
            ));
        }
    }
    report.push_str(&format!("\nTargets: {}.\n\n", verdicts.join("; ")));
    Ok(report)
}

fn short(config: Config) -> &'static str {
    match config {
        Config::NoRequestMetrics => "baseline",
        _ => "metrics only",
    }
}

/// An OTLP gRPC trace receiver (HTTP/2 without TLS, as kube's exporter dials): answers every
/// call with an empty ExportTraceServiceResponse and counts the spans in the requests.
struct Receiver {
    port: u16,
    spans: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Receiver {
    async fn start() -> Result<Receiver, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let spans = Arc::new(AtomicU64::new(0));
        let counter = spans.clone();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    let _ = serve(tcp, counter).await;
                });
            }
        });
        Ok(Receiver { port, spans, task })
    }

    fn spans(&self) -> u64 {
        self.spans.load(Ordering::Relaxed)
    }

    /// Waits until no span has arrived for a second (at most 10 s).
    async fn settle(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut last = self.spans();
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = self.spans();
            if now == last {
                return;
            }
            last = now;
        }
    }
}

async fn serve(tcp: tokio::net::TcpStream, spans: Arc<AtomicU64>) -> Result<(), h2::Error> {
    let mut conn = h2::server::handshake(tcp).await?;
    while let Some(call) = conn.accept().await {
        let (req, mut respond) = call?;
        let spans = spans.clone();
        tokio::spawn(async move {
            let mut body = req.into_body();
            let mut message = Vec::new();
            while let Some(chunk) = body.data().await {
                let Ok(chunk) = chunk else { return };
                let _ = body.flow_control().release_capacity(chunk.len());
                message.extend_from_slice(&chunk);
            }
            // gRPC framing: a compressed flag and a 4-byte length before the message.
            spans.fetch_add(
                count_spans(message.get(5..).unwrap_or_default()),
                Ordering::Relaxed,
            );
            let response = http::Response::builder()
                .header("content-type", "application/grpc")
                .body(())
                .unwrap_or_default();
            let Ok(mut stream) = respond.send_response(response, false) else {
                return;
            };
            let _ = stream.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), false);
            let mut trailers = http::HeaderMap::new();
            trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
            let _ = stream.send_trailers(trailers);
        });
    }
    Ok(())
}

/// Spans in an ExportTraceServiceRequest: resource_spans (1) → scope_spans (2) → spans (2).
fn count_spans(request: &[u8]) -> u64 {
    let mut n = 0;
    for resource in fields(request, 1) {
        for scope in fields(resource, 2) {
            n += fields(scope, 2).len() as u64;
        }
    }
    n
}

/// The length-delimited fields numbered `want` of a protobuf message.
fn fields(mut buf: &[u8], want: u64) -> Vec<&[u8]> {
    fn varint(buf: &mut &[u8]) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = buf.split_first()?;
            *buf = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    let mut out = Vec::new();
    while let Some(key) = varint(&mut buf) {
        let skip = match key & 7 {
            0 => {
                if varint(&mut buf).is_none() {
                    break;
                }
                0
            }
            1 => 8,
            5 => 4,
            2 => {
                let Some(len) = varint(&mut buf).map(|l| l as usize) else {
                    break;
                };
                if len > buf.len() {
                    break;
                }
                if key >> 3 == want {
                    out.push(&buf[..len]);
                }
                len
            }
            _ => break,
        };
        if skip > buf.len() {
            break;
        }
        buf = &buf[skip..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_are_counted_through_resource_and_scope() {
        // span: name (1... any field); scope_spans: scope (1), spans (2) x2; resource_spans:
        // resource (1), scope_spans (2), schema_url (3).
        let span = [0x0a, 0x01, b'x'];
        let mut scope = vec![0x0a, 0x00];
        for _ in 0..2 {
            scope.extend([0x12, span.len() as u8]);
            scope.extend(span);
        }
        let mut resource = vec![0x0a, 0x00, 0x12, scope.len() as u8];
        resource.extend(&scope);
        resource.extend([0x1a, 0x00, 0x20, 0x96, 0x01]);
        let mut request = vec![0x0a, resource.len() as u8];
        request.extend(&resource);
        request.extend([0x0a, resource.len() as u8]);
        request.extend(&resource);
        assert_eq!(count_spans(&request), 4);
        assert_eq!(count_spans(&[0x0a, 0x7f]), 0, "truncated");
    }
}
