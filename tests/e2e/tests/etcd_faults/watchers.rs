//! The watchers of the etcd fault test: client-go's reflector (resume from the last
//! resourceVersion, relist on 410), and their comparison with etcd's history.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kapi_e2e::changes::{rv_of, Seen};
use kapi_e2e::{Endpoint, Request, HARNESS_AGENT};
use serde_json::Value;

use super::{collection, listed, state_at, SENTINEL, WATCH_DEADLINE};

/// What a watcher saw from `start` (the first resourceVersion, or a relist's) until `end` (the
/// last resourceVersion it reached, by event or bookmark).
#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) relist: Option<BTreeMap<String, u64>>,
    pub(crate) events: Vec<Seen>,
}

#[derive(Debug)]
pub(crate) struct WatchRun {
    pub(crate) label: String,
    pub(crate) segments: Vec<Segment>,
    pub(crate) connections: usize,
    pub(crate) relists: usize,
    /// Answers a client would not expect: ERROR events other than 410, non-JSON lines.
    pub(crate) errors: Vec<String>,
    pub(crate) done: bool,
}

pub(crate) fn watch(endpoint: &Endpoint, label: String, from: u64, deadline: Instant, abort: &AtomicBool) -> WatchRun {
    let mut run = WatchRun {
        label,
        segments: vec![Segment { start: from, end: from, relist: None, events: Vec::new() }],
        connections: 0,
        relists: 0,
        errors: Vec::new(),
        done: false,
    };
    let mut last = from;
    while Instant::now() < deadline && !run.done && !abort.load(Ordering::SeqCst) {
        let url = format!("{}{}?watch=1&resourceVersion={last}&allowWatchBookmarks=true&timeoutSeconds=15", endpoint.url, collection());
        let mut child = Command::new("curl")
            .args(["-sSN", "--http1.1", "--max-time", "60", "-A", HARNESS_AGENT, "--cacert"])
            .arg(endpoint.pki.join("ca.crt"))
            .arg("--cert")
            .arg(endpoint.pki.join("admin.crt"))
            .arg("--key")
            .arg(endpoint.pki.join("admin.key"))
            .arg(&url)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn curl");
        run.connections += 1;
        let (mut lines, mut expired) = (0, false);
        let segment = run.segments.last_mut().expect("a segment");
        for line in BufReader::new(child.stdout.take().expect("stdout")).lines() {
            let Ok(line) = line else { break };
            lines += 1;
            let Ok(event) = serde_json::from_str::<Value>(&line) else {
                run.errors.push(format!("not JSON: {line}"));
                break;
            };
            let kind = match event["type"].as_str() {
                Some("ADDED") => "ADDED",
                Some("MODIFIED") => "MODIFIED",
                Some("DELETED") => "DELETED",
                Some("BOOKMARK") => {
                    last = last.max(rv_of(&event["object"]));
                    segment.end = last;
                    continue;
                }
                // An ERROR event, or a Status answer instead of a stream.
                _ => {
                    let status = if event["kind"] == "Status" { &event } else { &event["object"] };
                    if status["code"] == 410 {
                        expired = true;
                    } else {
                        run.errors.push(line.clone());
                    }
                    break;
                }
            };
            let rv = rv_of(&event["object"]);
            let name = event["object"]["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            last = rv;
            segment.end = rv;
            run.done = name == SENTINEL;
            segment.events.push(Seen { kind, name, rv });
            if run.done {
                break;
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        if expired {
            // Relist (a consistent list, as client-go's reflector after a 410) and watch on.
            loop {
                let r = endpoint.try_request(&Request::get(&collection())).expect("list");
                if r.status == 200 {
                    let (rv, items) = listed(&r.body);
                    run.relists += 1;
                    run.segments.push(Segment { start: rv, end: rv, relist: Some(items), events: Vec::new() });
                    last = rv;
                    break;
                }
                assert!(Instant::now() < deadline && !abort.load(Ordering::SeqCst), "{}: no relist: {} {}", run.label, r.status, r.raw);
                std::thread::sleep(Duration::from_millis(200));
            }
        } else if lines == 0 {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    if !run.done {
        run.errors.push(format!("no {SENTINEL} within {WATCH_DEADLINE:?} (last resourceVersion {last})"));
    }
    run
}

/// A watcher compared with the log: each segment must hold exactly the log's events in
/// (start, end], in order; a relist must equal the state the log replays to at its revision.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    pub(crate) seen: usize,
    pub(crate) missed: usize,
    pub(crate) duplicated: usize,
    pub(crate) unexpected: usize,
    pub(crate) out_of_order: usize,
    pub(crate) bad_relists: usize,
    pub(crate) details: Vec<String>,
}

pub(crate) fn judge(run: &WatchRun, log: &[Seen], initial: &BTreeMap<String, u64>, sentinel: u64) -> Verdict {
    let mut v = Verdict::default();
    let count = run.segments.len();
    for (k, segment) in run.segments.iter().enumerate() {
        let end = if k + 1 == count && run.done { sentinel } else { segment.end };
        if let Some(items) = &segment.relist {
            let expected = state_at(initial, log, segment.start);
            if &expected != items {
                v.bad_relists += 1;
                v.details.push(format!(
                    "{}: relist at {} differs from the log's state ({} vs {} objects)",
                    run.label,
                    segment.start,
                    items.len(),
                    expected.len()
                ));
            }
        }
        let key = |e: &Seen| (e.rv, e.kind, e.name.clone());
        let expected: BTreeSet<_> = log.iter().filter(|e| e.rv > segment.start && e.rv <= end).map(key).collect();
        let seen: BTreeSet<_> = segment.events.iter().map(key).collect();
        v.seen += segment.events.len();
        v.duplicated += segment.events.len() - seen.len();
        v.out_of_order += segment.events.windows(2).filter(|w| w[0].rv >= w[1].rv).count();
        let missed: Vec<_> = expected.difference(&seen).collect();
        let unexpected: Vec<_> = seen.difference(&expected).collect();
        v.missed += missed.len();
        v.unexpected += unexpected.len();
        if !missed.is_empty() || !unexpected.is_empty() {
            v.details.push(format!(
                "{} segment {k} ({}, {end}]: missed {:?}, unexpected {:?}",
                run.label,
                segment.start,
                &missed[..missed.len().min(5)],
                &unexpected[..unexpected.len().min(5)]
            ));
        }
    }
    v
}
