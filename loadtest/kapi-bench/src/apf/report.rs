//! The noisy-neighbour report: one table, both modes side by side.

use super::{ModeResult, Plan, LEADER, REQUEST_TIMEOUT};
use crate::stats::{ms, Samples};

fn p50_p99(s: &Samples) -> String {
    if s.count() == 0 {
        return "—".into();
    }
    format!("{} / {}", ms(s.percentile(0.5)), ms(s.percentile(0.99)))
}

fn ratio(flood: &Samples, base: &Samples) -> String {
    let b = base.percentile(0.99).as_secs_f64();
    if flood.count() == 0 || b == 0.0 {
        return "—".into();
    }
    format!("{:.1}x", flood.percentile(0.99).as_secs_f64() / b)
}

pub(super) fn report(plan: &Plan, off: &ModeResult, on: &ModeResult) -> String {
    let mut out = format!(
        "## API Priority and Fairness: noisy neighbour\n\n\
         {} ConfigMaps of {} KB in one namespace (a full LIST answers {:.1} MiB). Each mode runs on a fresh kapi with \
         its defaults but `--enable-priority-and-fairness`: first the neighbours alone for {} s (baseline), then for {} s \
         user A floods with {} concurrent clients doing full LISTs in a loop (a 429 waits its Retry-After second) while \
         user B GETs one ConfigMap every {} ms with a create or an update every fifth request, \
         `{LEADER}` renews a Lease (GET + PUT) every {} ms and a `system:masters` client GETs every {} ms. \
         B's and the others' latencies count successful requests; errors are non-2xx answers, transport errors and \
         requests unanswered after {} s.\n\n",
        plan.objects,
        plan.object_bytes / 1000,
        on.list_bytes.max(off.list_bytes) as f64 / (1024.0 * 1024.0),
        plan.baseline.as_secs(),
        plan.flood.as_secs(),
        plan.flooders,
        plan.neighbour_every.as_millis(),
        plan.lease_every.as_millis(),
        plan.masters_every.as_millis(),
        REQUEST_TIMEOUT.as_secs(),
    );
    out.push_str("| measurement | APF off (max-in-flight) | APF on |\n|---|---|---|\n");
    let mut row = |label: &str, f: &dyn Fn(&ModeResult) -> String| {
        out.push_str(&format!("| {label} | {} | {} |\n", f(off), f(on)));
    };
    row("user B GET p50 / p99, no flood (baseline)", &|m| p50_p99(&m.baseline.gets));
    row("user B GET p50 / p99, during the flood", &|m| p50_p99(&m.flood.gets));
    row("user B GET p99, flood / baseline", &|m| ratio(&m.flood.gets, &m.baseline.gets));
    row("user B write p50 / p99, no flood (baseline)", &|m| p50_p99(&m.baseline.writes));
    row("user B write p50 / p99, during the flood", &|m| p50_p99(&m.flood.writes));
    row("user B write p99, flood / baseline", &|m| ratio(&m.flood.writes, &m.baseline.writes));
    row("user B requests during the flood (GETs + writes)", &|m| format!("{} + {}", m.flood.gets.count(), m.flood.writes.count()));
    row("user B errors, baseline / flood", &|m| format!("{} / {}", m.baseline.errors, m.flood.errors));
    row("user B's requests during the flood by wait for APF seats", &|m| waits(&m.b_waits));
    row("Lease renewals during the flood (ok / failed)", &|m| match &m.flood.renewal_error {
        Some(e) => format!("{} / {} (first: {})", m.flood.renewals.count(), m.flood.renewal_errors, e.replace('|', "/")),
        None => format!("{} / {}", m.flood.renewals.count(), m.flood.renewal_errors),
    });
    row("Lease renewal p50 / max, no flood", &|m| format!("{} / {}", ms(m.baseline.renewals.percentile(0.5)), ms(m.baseline.renewals.percentile(1.0))));
    row("Lease renewal p50 / max, during the flood", &|m| format!("{} / {}", ms(m.flood.renewals.percentile(0.5)), ms(m.flood.renewals.percentile(1.0))));
    row("user A (flood): LISTs completed", &|m| format!("{} ({:.1}/s, {:.0} MiB)", m.lists, m.lists as f64 / m.flood_secs, m.flood_bytes as f64 / (1024.0 * 1024.0)));
    row("user A (flood): 429s / other errors", &|m| format!("{} / {}", m.rejected, m.other));
    row("system:masters GET p50 / p99, no flood", &|m| p50_p99(&m.baseline.masters));
    row("system:masters GET p50 / p99, during the flood (errors)", &|m| format!("{} ({})", p50_p99(&m.flood.masters), m.flood.masters_errors));
    row("kapi RSS before the flood / peak during it", &|m| format!("{:.0} MiB / {:.0} MiB", m.rss_before, m.rss_peak));
    row("kapi RSS growth during the flood", &|m| format!("{:.0} MiB", m.rss_peak - m.rss_before));
    row("kapi CPU during the flood (cores)", &|m| format!("{:.2}", m.kapi_cpu));
    row("kapi-bench's clients' CPU during the flood (cores)", &|m| format!("{:.2}", m.bench_cpu));
    for m in [off, on] {
        if let Some(e) = &m.flood.first_error {
            out.push_str(&format!("\nFirst error of user B during the flood, APF {}: `{e}`\n", if m.apf { "on" } else { "off" }));
        }
    }
    if !on.levels.is_empty() {
        out.push_str("\nFlowSchemas and priority levels with APF on (from the `X-Kubernetes-PF-*-UID` headers): ");
        let levels: Vec<String> = on.levels.iter().map(|(who, schema, level)| format!("{who} → `{schema}` / `{level}`")).collect();
        out.push_str(&levels.join("; "));
        out.push_str(".\n");
    }
    out.push('\n');
    out
}

/// The share of B's requests in each APF wait bucket: "≤ 5 ms 97%, ≤ 20 ms 2%, ...".
fn waits(buckets: &[(f64, u64)]) -> String {
    let total = buckets.last().map_or(0, |b| b.1);
    if total == 0 {
        return "—".into();
    }
    let mut parts = Vec::new();
    let mut below = 0;
    for &(le, cumulative) in buckets {
        let n = cumulative - below;
        below = cumulative;
        if n == 0 {
            continue;
        }
        let bound = if le.is_infinite() { "more".to_owned() } else { format!("≤ {} ms", le * 1000.0) };
        parts.push(format!("{bound}: {n} ({:.0}%)", n as f64 * 100.0 / total as f64));
    }
    parts.join(", ")
}
