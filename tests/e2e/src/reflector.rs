//! Watchers that behave as client-go's reflector (resume from the last resourceVersion after a
//! cut, relist on 410), and their comparison with the store's change log: each stretch between
//! (re)lists must hold exactly the log's events in order, and each relist the state the log
//! replays to at its revision. Shared by the fault tests (etcd members failing, the soak).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::changes::{rv_of, Seen};
use crate::{Connections, Endpoint, Request, HARNESS_AGENT};

/// The items of a list answer as name -> resourceVersion, and the list's resourceVersion.
pub fn listed(body: &Value) -> (u64, BTreeMap<String, u64>) {
    let items = body["items"].as_array().map(Vec::as_slice).unwrap_or_default();
    let rv = body["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("list without rv: {body}"));
    (rv, items.iter().map(|o| (o["metadata"]["name"].as_str().unwrap_or_default().to_owned(), rv_of(o))).collect())
}

/// The state the log replays to at `at`, from the state `initial` at the log's start.
pub fn state_at(initial: &BTreeMap<String, u64>, log: &[Seen], at: u64) -> BTreeMap<String, u64> {
    let mut state = initial.clone();
    for e in log.iter().take_while(|e| e.rv <= at) {
        if e.kind == "DELETED" {
            state.remove(&e.name);
        } else {
            state.insert(e.name.clone(), e.rv);
        }
    }
    state
}

/// What a watcher saw from `start` (the first resourceVersion, or a relist's) until `end` (the
/// last resourceVersion it reached, by event or bookmark).
#[derive(Debug)]
pub struct Segment {
    pub start: u64,
    pub end: u64,
    pub relist: Option<BTreeMap<String, u64>>,
    pub events: Vec<Seen>,
}

#[derive(Debug)]
pub struct WatchRun {
    pub label: String,
    pub segments: Vec<Segment>,
    pub connections: usize,
    pub relists: usize,
    /// Answers a client would not expect: ERROR events other than 410, non-JSON lines.
    pub errors: Vec<String>,
    pub done: bool,
}

/// One watcher's collection, end marker and bounds.
#[derive(Debug, Clone)]
pub struct Reflector {
    /// The collection's path (`/api/v1/namespaces/<ns>/configmaps`).
    pub collection: String,
    /// The watcher stops after an event for the object of this name.
    pub sentinel: String,
    /// No connection is started after this.
    pub deadline: Instant,
    /// `timeoutSeconds` of each watch request.
    pub timeout_seconds: u32,
}

impl Reflector {
    /// Watches from `from` until the sentinel, the deadline or `abort`. With `connections`, its
    /// curl is registered there, so that a fault injector can cut its stream.
    pub fn watch(&self, endpoint: &Endpoint, label: String, from: u64, abort: &AtomicBool, connections: Option<&Connections>) -> WatchRun {
        let mut run = WatchRun {
            label,
            segments: vec![Segment { start: from, end: from, relist: None, events: Vec::new() }],
            connections: 0,
            relists: 0,
            errors: Vec::new(),
            done: false,
        };
        let mut last = from;
        while Instant::now() < self.deadline && !run.done && !abort.load(Ordering::SeqCst) {
            let url = format!(
                "{}{}?watch=1&resourceVersion={last}&allowWatchBookmarks=true&timeoutSeconds={}",
                endpoint.url, self.collection, self.timeout_seconds
            );
            let mut cmd = Command::new("curl");
            cmd.args(["-sSN", "--http1.1", "--max-time", &(self.timeout_seconds * 4).to_string(), "-A", HARNESS_AGENT, "--cacert"])
                .arg(endpoint.pki.join("ca.crt"))
                .arg("--cert")
                .arg(endpoint.pki.join("admin.crt"))
                .arg("--key")
                .arg(endpoint.pki.join("admin.key"))
                .arg(&url);
            let mut child = match connections {
                Some(c) => c.spawn(&mut cmd).expect("spawn curl"),
                None => cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn curl"),
            };
            // Not read: curl writes little there, and it ends with the process.
            drop(child.stderr.take());
            run.connections += 1;
            let (mut lines, mut expired) = (0, false);
            let segment = run.segments.last_mut().expect("a segment");
            for line in BufReader::new(child.stdout.take().expect("stdout")).lines() {
                let Ok(line) = line else { break };
                lines += 1;
                let Ok(event) = serde_json::from_str::<Value>(&line) else {
                    // A stream cut in the middle of a line (the fault injector) is not an error
                    // of the server's; anything else that is not JSON is.
                    if connections.is_none() {
                        run.errors.push(format!("not JSON: {line}"));
                    }
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
                run.done = name == self.sentinel;
                segment.events.push(Seen { kind, name, rv });
                if run.done {
                    break;
                }
            }
            if let Some(c) = connections {
                c.forget(&child);
            }
            let _ = child.kill();
            let _ = child.wait();
            if expired {
                // Relist (a consistent list, as client-go's reflector after a 410) and watch on.
                loop {
                    let r = endpoint.try_request(&Request::get(&self.collection)).expect("list");
                    if r.status == 200 {
                        let (rv, items) = listed(&r.body);
                        run.relists += 1;
                        run.segments.push(Segment { start: rv, end: rv, relist: Some(items), events: Vec::new() });
                        last = rv;
                        break;
                    }
                    if Instant::now() > self.deadline || abort.load(Ordering::SeqCst) {
                        run.errors.push(format!("no relist: {} {}", r.status, r.raw));
                        return run;
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            } else if lines == 0 {
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        if !run.done {
            run.errors.push(format!("no {} before the deadline (last resourceVersion {last})", self.sentinel));
        }
        run
    }
}

/// A watcher compared with the log.
#[derive(Debug, Default)]
pub struct Verdict {
    pub seen: usize,
    pub missed: usize,
    pub duplicated: usize,
    pub unexpected: usize,
    pub out_of_order: usize,
    pub bad_relists: usize,
    pub details: Vec<String>,
}

impl Verdict {
    /// Events missed or not in the log, and relists that differ from it.
    pub fn missing(&self) -> usize {
        self.missed + self.unexpected + self.bad_relists
    }

    /// Events repeated or out of revision order.
    pub fn repeated(&self) -> usize {
        self.duplicated + self.out_of_order
    }
}

/// Each segment must hold exactly the log's events in (start, end], in order; a relist must
/// equal the state the log replays to at its revision. `log` starts where `initial` was read;
/// `sentinel` is the sentinel's revision (the end of the last segment of a finished run).
pub fn judge(run: &WatchRun, log: &[Seen], initial: &BTreeMap<String, u64>, sentinel: u64) -> Verdict {
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
