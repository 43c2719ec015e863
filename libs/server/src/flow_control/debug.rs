//! kube's API Priority and Fairness debug endpoints (`apf_controller_debug.go`), served under
//! `/debug/api_priority_and_fairness/` whenever flow control is on (kube installs them with its
//! config controller, whatever the profiling flags) and authorized as non-resource URLs:
//!
//! - `dump_priority_levels`: a row per level, by name;
//! - `dump_queues`: a row per queue of every level that queues;
//! - `dump_requests`: a row per request waiting in or running through a limited level
//!   (`?includeRequestDetails=1` adds who asked for what).
//!
//! The text is kube's byte for byte: columns joined by `,` and aligned as Go's `tabwriter`
//! (minimum width 8, padding 1, blanks) aligns them, so scripts written against kube read it.
//!
//! Where kapi's state differs from kube's, the columns carry kapi's value of the nearest
//! meaning, never an invented one:
//!
//! - `IsQuiescing` is always false: kapi's snapshot holds no level that is going away (queues
//!   replaced by a configuration change drain outside it and are not listed);
//! - an exempt level keeps no per-request state (its path takes no lock); its row reads the
//!   process-wide `apiserver_flowcontrol_*` series for its executing and dispatched counts, and
//!   its running requests are not listed in `dump_requests`;
//! - `NextDispatchR` is the queue's virtual start time in kapi's fair queuing (seat-seconds);
//!   `TotalWorkSum` is the work the queue set charges its waiting requests (their seats times
//!   kube's 3 ms estimate), without the final phase of writes, which kapi's set does not weigh;
//! - `InitialSeats` and `FinalSeats`: a write that holds its seats after its answer holds as
//!   many as it ran with, so its final seats equal its initial ones (0 for everything else);
//!   `MaxSeatsSum` equals `InitialSeatsSum` for the same reason.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use http::{Response, StatusCode};

use super::level::{LevelDump, RequestDump};
use super::{FlowControl, LevelEntry, Snapshot};
use crate::query::Query;
use crate::response::{self, Body};

/// Where kube installs the dumps.
pub const PREFIX: &str = "/debug/api_priority_and_fairness/";

/// Answers a request for `path` under [`PREFIX`]: the dump it names, 404 for any other path
/// and whenever flow control is off (kube installs nothing then).
pub fn respond(fc: Option<&FlowControl>, path: &str, query: &Query) -> Response<Body> {
    let dump = fc.and_then(|fc| {
        let snapshot = fc.snapshot();
        match path.strip_prefix(PREFIX)? {
            "dump_priority_levels" => Some(priority_levels(&snapshot)),
            "dump_queues" => Some(queues(&snapshot)),
            // kube: any non-empty value asks for the details.
            "dump_requests" => Some(requests(&snapshot, query.get("includeRequestDetails").is_some_and(|v| !v.is_empty()))),
            _ => None,
        }
    });
    match dump {
        Some(text) => response::text(StatusCode::OK, text, "text/plain; charset=utf-8"),
        None => response::text(StatusCode::NOT_FOUND, "404 page not found\n", "text/plain; charset=utf-8"),
    }
}

/// The snapshot's levels by name (kube sorts its priority-level dump by name; kapi sorts every
/// dump so that two reads compare).
fn levels_by_name(snapshot: &Snapshot) -> Vec<(&String, &LevelEntry)> {
    let mut levels: Vec<_> = snapshot.levels.iter().collect();
    levels.sort_by(|a, b| a.0.cmp(b.0));
    levels
}

fn row(columns: &[&str]) -> Vec<String> {
    columns.iter().map(|c| (*c).to_owned()).collect()
}

const LEVEL_HEADERS: [&str; 10] = [
    "PriorityLevelName", "ActiveQueues", "IsIdle", "IsQuiescing", "WaitingRequests", "ExecutingRequests", "DispatchedRequests", "RejectedRequests", "TimedoutRequests",
    "CancelledRequests",
];

fn priority_levels(snapshot: &Snapshot) -> String {
    let mut rows = vec![row(&LEVEL_HEADERS)];
    for (name, entry) in levels_by_name(snapshot) {
        let columns = match &entry.queues {
            Some(level) => {
                let dump = level.dump();
                let active = dump.queues.iter().filter(|q| !q.waiting.is_empty()).count();
                let t = dump.totals;
                [
                    active.to_string(), dump.idle.to_string(), false.to_string(), dump.waiting.to_string(), dump.executing.to_string(), t.dispatched.to_string(),
                    t.rejected.to_string(), t.timed_out.to_string(), t.cancelled.to_string(),
                ]
            }
            None => {
                let (executing, dispatched) = crate::metrics::flowcontrol_level_totals(name);
                ["0".into(), (executing == 0).to_string(), false.to_string(), "0".into(), executing.to_string(), dispatched.to_string(), "0".into(), "0".into(), "0".into()]
            }
        };
        rows.push(std::iter::once(name.clone()).chain(columns).collect());
    }
    tabulate(&rows)
}

const QUEUE_HEADERS: [&str; 9] =
    ["PriorityLevelName", "Index", "PendingRequests", "ExecutingRequests", "SeatsInUse", "NextDispatchR", "InitialSeatsSum", "MaxSeatsSum", "TotalWorkSum"];

fn queues(snapshot: &Snapshot) -> String {
    let mut rows = vec![row(&QUEUE_HEADERS)];
    for (name, entry) in levels_by_name(snapshot) {
        let Some(level) = &entry.queues else { continue };
        for (index, q) in level.dump().queues.iter().enumerate() {
            let seats: u32 = q.waiting.iter().map(|(_, seats)| seats).sum();
            rows.push(vec![
                name.clone(),
                index.to_string(),
                q.waiting.len().to_string(),
                q.executing.to_string(),
                q.seats_in_use.to_string(),
                seat_seconds(q.next_dispatch_r),
                seats.to_string(),
                seats.to_string(),
                seat_seconds(q.waiting_work),
            ]);
        }
    }
    tabulate(&rows)
}

const REQUEST_HEADERS: [&str; 10] =
    ["PriorityLevelName", "FlowSchemaName", "QueueIndex", "RequestIndexInQueue", "FlowDistingsher", "ArriveTime", "InitialSeats", "FinalSeats", "AdditionalLatency", "StartTime"];
const DETAIL_HEADERS: [&str; 8] = ["UserName", "Verb", "APIPath", "Namespace", "Name", "APIVersion", "Resource", "SubResource"];

fn requests(snapshot: &Snapshot, details: bool) -> String {
    let mut header = row(&REQUEST_HEADERS);
    if details {
        header.extend(row(&DETAIL_HEADERS));
    }
    let mut rows = vec![header];
    for (name, entry) in levels_by_name(snapshot) {
        let Some(level) = &entry.queues else { continue };
        let LevelDump { requests, .. } = level.dump();
        for r in &requests {
            rows.push(request_row(snapshot, name, r, details));
        }
    }
    tabulate(&rows)
}

fn request_row(snapshot: &Snapshot, level: &str, r: &RequestDump, details: bool) -> Vec<String> {
    let d = &r.description;
    let index = |i: Option<usize>| i.map_or("-1".to_owned(), |i| i.to_string());
    let mut row = vec![
        level.to_owned(),
        d.flow_schema.clone(),
        index(r.queue),
        index(r.position),
        distinguisher(snapshot, r),
        go_time(Some(d.arrived)),
        d.initial_seats.to_string(),
        d.final_seats.to_string(),
        go_duration(d.additional_latency),
        go_time(r.started),
    ];
    if details {
        // kube's `schema.GroupVersion.String()`: the version alone for the core group.
        let group_version = if d.api_group.is_empty() { d.api_version.clone() } else { format!("{}/{}", d.api_group, d.api_version) };
        row.extend([d.user.clone(), d.verb.clone(), d.path.clone(), d.namespace.clone(), d.name.clone(), group_version, d.resource.clone(), d.subresource.clone()]);
    }
    row
}

/// The request's flow distinguisher, by its schema's method in the configuration in force.
fn distinguisher(snapshot: &Snapshot, r: &RequestDump) -> String {
    let schema = snapshot.config.schemas.iter().find(|s| s.name == r.description.flow_schema);
    match schema.and_then(|s| s.distinguisher_method.as_ref()).map(|m| m.type_.as_str()) {
        Some("ByUser") => r.description.user.clone(),
        Some("ByNamespace") => r.description.namespace.clone(),
        _ => String::new(),
    }
}

/// Go's `text/tabwriter` as kube configures it (minimum cell width 8, padding 1, blanks, no
/// flags) over rows whose columns kube joins with `",\t"`: every cell but a row's last is its
/// text and a comma, padded to the widest such cell of its column among the adjacent rows that
/// have the column, plus one, and never narrower than 8.
fn tabulate(rows: &[Vec<String>]) -> String {
    const MIN_WIDTH: usize = 8;
    const PADDING: usize = 1;
    let cell_width = |row: &Vec<String>, j: usize| row[j].chars().count() + 1;
    // widths[i][j]: the width of row i's cell j (only for cells that end in a tab).
    let mut widths: Vec<Vec<usize>> = rows.iter().map(|r| vec![0; r.len().saturating_sub(1)]).collect();
    let columns = rows.iter().map(|r| r.len().saturating_sub(1)).max().unwrap_or(0);
    for j in 0..columns {
        let mut start = 0;
        while start < rows.len() {
            if rows[start].len().saturating_sub(1) <= j {
                start += 1;
                continue;
            }
            // A block: the adjacent rows that have cell j ending in a tab.
            let mut end = start;
            while end < rows.len() && rows[end].len().saturating_sub(1) > j {
                end += 1;
            }
            let width = (start..end).map(|i| cell_width(&rows[i], j) + PADDING).max().unwrap_or(0).max(MIN_WIDTH);
            for w in &mut widths[start..end] {
                w[j] = width;
            }
            start = end;
        }
    }
    let mut out = String::new();
    for (row, widths) in rows.iter().zip(&widths) {
        for (j, cell) in row.iter().enumerate() {
            out.push_str(cell);
            if let Some(width) = widths.get(j) {
                out.push(',');
                out.extend(std::iter::repeat_n(' ', width - cell.chars().count() - 1));
            }
        }
        out.push('\n');
    }
    out
}

/// kube's `SeatSeconds.String()`: the integer part, a point, eight digits, `ss`.
fn seat_seconds(value: f64) -> String {
    let units = (value * 1e8).round() as i64;
    let sign = if units < 0 { "-" } else { "" };
    let units = units.unsigned_abs();
    format!("{sign}{}.{:08}ss", units / 100_000_000, units % 100_000_000)
}

/// Go's `time.Time.UTC().Format(time.RFC3339Nano)`; None is Go's zero time (a request that has
/// not started yet).
fn go_time(at: Option<SystemTime>) -> String {
    let Some(at) = at else { return "0001-01-01T00:00:00Z".to_owned() };
    let t = time::OffsetDateTime::from(at);
    let mut out = format!("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", t.year(), u8::from(t.month()), t.day(), t.hour(), t.minute(), t.second());
    let nanos = t.nanosecond();
    if nanos != 0 {
        let digits = format!("{nanos:09}");
        let _ = write!(out, ".{}", digits.trim_end_matches('0'));
    }
    out.push('Z');
    out
}

/// Go's `time.Duration.String()`: `0s`; below a second in the largest unit under it (`ns`,
/// `µs`, `ms`) with its fraction; else hours, minutes and seconds (`1h2m3.5s`).
fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    // `value / unit`, its fraction without trailing zeros.
    let fraction = |value: u128, unit: u128| {
        let digits = unit.ilog10() as usize;
        let frac = format!("{:0digits$}", value % unit);
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() {
            (value / unit).to_string()
        } else {
            format!("{}.{frac}", value / unit)
        }
    };
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", fraction(nanos, 1_000));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", fraction(nanos, 1_000_000));
    }
    let seconds = fraction(nanos % 60_000_000_000, 1_000_000_000);
    let minutes = nanos / 60_000_000_000 % 60;
    let hours = nanos / 3_600_000_000_000;
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}s")
    } else {
        format!("{seconds}s")
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use kapi_flowcontrol::bootstrap;

    use super::super::level::{Admission, RequestDescription};
    use super::super::Snapshot;
    use super::{go_duration, go_time, priority_levels, queues, requests, seat_seconds, tabulate};

    /// The rows of a dump whose first column is `level`, as trimmed columns.
    fn rows_of(text: &str, level: &str) -> Vec<Vec<String>> {
        text.lines().map(|l| l.split(',').map(|c| c.trim().to_owned()).collect::<Vec<_>>()).filter(|r| r[0] == level).collect()
    }

    #[tokio::test]
    async fn a_queued_request_shows_in_every_dump() {
        let schemas = [bootstrap::mandatory_schemas(), bootstrap::suggested_schemas()].concat();
        let levels = [bootstrap::mandatory_levels(), bootstrap::suggested_levels()].concat();
        let snapshot = Snapshot::build(&schemas, &levels, 600, &Snapshot::default());
        let entry = snapshot.level("global-default").unwrap();
        let level = entry.queues.clone().unwrap();
        // Every seat taken, then alice's GET waits.
        let mut seats = Vec::new();
        for id in 0..u64::from(entry.limits.nominal) {
            match level.arrive(id, id, 1) {
                Admission::Admitted(t) => seats.push(t.wait(Duration::ZERO).await.expect("a free seat")),
                Admission::Rejected => panic!("rejected with free seats"),
            }
        }
        let description = RequestDescription {
            flow_schema: "global-default".into(),
            user: "alice".into(),
            verb: "get".into(),
            path: "/api/v1/namespaces/ns/pods/p".into(),
            namespace: "ns".into(),
            name: "p".into(),
            api_group: String::new(),
            api_version: "v1".into(),
            resource: "pods".into(),
            subresource: String::new(),
            arrived: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            initial_seats: 1,
            final_seats: 0,
            additional_latency: Duration::ZERO,
        };
        let Admission::Admitted(ticket) = level.arrive_described(1000, 42, 1, description) else { panic!("rejected") };
        assert!(ticket.queued());

        let text = priority_levels(&snapshot);
        // Each header is the widest cell of its column here: one blank after each comma.
        assert!(text.starts_with("PriorityLevelName, ActiveQueues, IsIdle, IsQuiescing, WaitingRequests, ExecutingRequests, DispatchedRequests, RejectedRequests, TimedoutRequests, CancelledRequests\n"), "{text}");
        let nominal = entry.limits.nominal.to_string();
        assert_eq!(rows_of(&text, "global-default"), vec![vec!["global-default", "1", "false", "false", "1", &nominal, &nominal, "0", "0", "0"]], "{text}");
        assert_eq!(rows_of(&text, "exempt").len(), 1, "{text}");

        let text = queues(&snapshot);
        let pending: Vec<_> = rows_of(&text, "global-default").into_iter().filter(|r| r[2] == "1").collect();
        assert_eq!(pending.len(), 1, "one queue holds alice's request: {text}");
        let queue = pending[0][1].clone();
        assert_eq!(&pending[0][6..], ["1", "1", "0.00300000ss"], "{text}");
        assert!(rows_of(&text, "exempt").is_empty(), "exempt levels have no queues");

        let text = requests(&snapshot, true);
        let header: Vec<_> = text.lines().next().unwrap().split(',').map(str::trim).collect();
        assert_eq!(header, [super::REQUEST_HEADERS.as_slice(), super::DETAIL_HEADERS.as_slice()].concat(), "{text}");
        // global-default distinguishes flows by user.
        let want = [
            "global-default", "global-default", &queue, "0", "alice", "2023-11-14T22:13:20Z", "1", "0", "0s", "0001-01-01T00:00:00Z", "alice", "get",
            "/api/v1/namespaces/ns/pods/p", "ns", "p", "v1", "pods", "",
        ];
        assert_eq!(rows_of(&text, "global-default"), vec![want.to_vec()], "{text}");
        assert_eq!(requests(&snapshot, false).lines().nth(1).map(|l| l.split(',').count()), Some(10));

        // Dispatched: it runs from its queue, with a start time.
        drop(seats.pop());
        let seat = ticket.wait(Duration::from_secs(1)).await.expect("dispatched");
        let rows = rows_of(&requests(&snapshot, false), "global-default");
        assert_eq!((rows[0][2].as_str(), rows[0][3].as_str()), (queue.as_str(), "-1"), "{rows:?}");
        assert_ne!(rows[0][9], "0001-01-01T00:00:00Z");
        drop(seat);
        assert!(rows_of(&requests(&snapshot, false), "global-default").is_empty(), "finished requests leave the dump");
    }

    fn rows(lines: &[&[&str]]) -> Vec<Vec<String>> {
        lines.iter().map(|l| l.iter().map(|c| (*c).to_owned()).collect()).collect()
    }

    #[test]
    fn columns_align_as_gos_tabwriter_aligns_them() {
        // Widest cell plus its comma and one blank; at least 8; a row's last cell is not padded.
        let text = tabulate(&rows(&[&["PriorityLevelName", "ActiveQueues", "IsIdle"], &["exempt", "0", "true"], &["global-default", "12", "false"]]));
        let want = "PriorityLevelName, ActiveQueues, IsIdle\n\
                    exempt,            0,            true\n\
                    global-default,    12,           false\n";
        assert_eq!(text, want);
        // Narrow columns still take 8.
        assert_eq!(tabulate(&rows(&[&["a", "b"], &["cc", "d"]])), "a,      b\ncc,     d\n");
        // A header alone; rows of different lengths align only where they share a column.
        assert_eq!(tabulate(&rows(&[&["Name", "X"]])), "Name,   X\n");
        let text = tabulate(&rows(&[&["a", "b", "c"], &["a"], &["long-name-here", "b"]]));
        assert_eq!(text, "a,      b,      c\na\nlong-name-here, b\n");
    }

    #[test]
    fn values_print_as_kube_prints_them() {
        assert_eq!(seat_seconds(0.0), "0.00000000ss");
        assert_eq!(seat_seconds(0.003), "0.00300000ss");
        assert_eq!(seat_seconds(12.5), "12.50000000ss");
        assert_eq!(go_duration(Duration::ZERO), "0s");
        assert_eq!(go_duration(Duration::from_millis(5)), "5ms");
        assert_eq!(go_duration(Duration::from_micros(12_500)), "12.5ms");
        assert_eq!(go_duration(Duration::from_nanos(1_500)), "1.5µs");
        assert_eq!(go_duration(Duration::from_nanos(999)), "999ns");
        assert_eq!(go_duration(Duration::from_millis(1_500)), "1.5s");
        assert_eq!(go_duration(Duration::from_secs(120)), "2m0s");
        assert_eq!(go_duration(Duration::from_secs(3_723)), "1h2m3s");
        assert_eq!(go_time(None), "0001-01-01T00:00:00Z");
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(go_time(Some(at)), "2023-11-14T22:13:20Z");
        assert_eq!(go_time(Some(at + Duration::from_nanos(120_000_000))), "2023-11-14T22:13:20.12Z");
        assert_eq!(go_time(Some(at + Duration::from_nanos(1))), "2023-11-14T22:13:20.000000001Z");
    }
}
