//! The noisy-neighbour report and the uncontended rates: a table each, both modes side by side.

use std::time::Duration;

use super::rates::{Rates, Window, CONNECTIONS, PAYLOAD};
use super::{ModeResult, Plan, LEADER, REQUEST_TIMEOUT};
use crate::stats::{median, ms, Samples};

/// Issue 22's bound on what APF may cost when nothing contends, in percent.
const COST_TARGET: f64 = 3.0;

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
    out.push_str(&rates(plan, &off.rates, &on.rates));
    out
}

/// The medians of one kind of request's rounds: (rate, p50, p99, kapi CPU per request), in
/// requests per second and seconds.
fn medians(rounds: &[Window]) -> (f64, f64, f64, f64) {
    let of = |f: &dyn Fn(&Window) -> f64| median(rounds.iter().map(f).collect());
    (
        of(&|w| w.samples.per_second()),
        of(&|w| w.samples.percentile(0.5).as_secs_f64()),
        of(&|w| w.samples.percentile(0.99).as_secs_f64()),
        of(&|w| w.cpu / w.samples.count().max(1) as f64),
    )
}

fn verdict(percent: f64) -> String {
    format!("≤ {COST_TARGET}%: {}", if percent <= COST_TARGET { "met" } else { "missed" })
}

/// The uncontended rates: what APF on costs user B when nothing contends.
fn rates(plan: &Plan, off: &Rates, on: &Rates) -> String {
    let mut out = format!(
        "### Uncontended rates, APF off vs on\n\n\
         On the same fresh kapi, before the neighbours' baseline: user B alone (the same credentials and level as above, \
         not exempt) over {CONNECTIONS} kept-alive HTTP/1.1 connections, each sending its next request as soon as the last \
         is answered, for {} s per measurement: GETs of one ConfigMap, then creates of new ones (payload {PAYLOAD} bytes; \
         an admin deletes them after each measurement). {} rounds of GETs then creates after an untimed {} s warm-up of \
         each; medians of the rounds, each round's rate in brackets. APF on's cost is (off − on) / off of the median rate, \
         its p50 change (on − off) / off of the median p50; kapi's CPU is its own (user + system) per request.\n\n",
        plan.rates_window.as_secs_f64(),
        plan.rates_rounds,
        plan.rates_warmup.as_secs_f64(),
    );
    out.push_str("| measurement | APF off | APF on | target |\n|---|---|---|---|\n");
    let mut verdicts = Vec::new();
    for (what, off_rounds, on_rounds) in [("GET", &off.gets, &on.gets), ("create", &off.creates, &on.creates)] {
        let (o, n) = (medians(off_rounds), medians(on_rounds));
        let rate = |rounds: &[Window], m: f64| {
            let each: Vec<String> = rounds.iter().map(|w| format!("{:.0}", w.samples.per_second())).collect();
            format!("{m:.0} ({})", each.join(", "))
        };
        let cost = 100.0 * (o.0 - n.0) / o.0.max(1e-9);
        let p50 = 100.0 * (n.1 - o.1) / o.1.max(1e-9);
        let secs = |s: f64| ms(Duration::from_secs_f64(s));
        out.push_str(&format!("| {what}s per second, median (each round) | {} | {} | |\n", rate(off_rounds, o.0), rate(on_rounds, n.0)));
        out.push_str(&format!("| {what} p50 / p99, medians of the rounds | {} / {} | {} / {} | |\n", secs(o.1), secs(o.2), secs(n.1), secs(n.2)));
        out.push_str(&format!("| kapi CPU per {what}, median | {:.0} µs | {:.0} µs | |\n", o.3 * 1e6, n.3 * 1e6));
        out.push_str(&format!("| {what} rate: APF on's cost, (off − on) / off | — | {cost:.1}% | {} |\n", verdict(cost)));
        out.push_str(&format!("| {what} p50: APF on's change, (on − off) / off | — | {p50:+.1}% | {} |\n", verdict(p50)));
        verdicts.push(format!("{cost:.1}% of the {what} rate ({}), p50 {p50:+.1}% ({})", verdict(cost), verdict(p50)));
    }
    let errors = |r: &Rates| {
        let sum = |w: &[Window]| w.iter().map(|w| w.errors).sum::<usize>();
        format!("{} / {}", sum(&r.gets), sum(&r.creates))
    };
    out.push_str(&format!("| errors, GETs / creates (all rounds) | {} | {} | 0 / 0 |\n", errors(off), errors(on)));
    out.push_str(&format!("| user B's requests by wait for APF seats (all rounds) | — | {} | |\n", waits(&on.waits)));
    for (mode, r) in [("off", off), ("on", on)] {
        let first = r.gets.iter().chain(&r.creates).find_map(|w| w.first_error.as_deref());
        if let Some(e) = first {
            out.push_str(&format!("\nFirst error of user B alone, APF {mode}: `{e}`\n"));
        }
    }
    out.push_str(&format!("\nAPF on costs {}.\n\n", verdicts.join("; ")));
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
