//! The writers of the etcd fault test: one object at a time through haproxy, every write
//! conditional on the revision the writer last saw, each outcome recorded with its timing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kapi_e2e::changes::rv_of;
use kapi_e2e::{Endpoint, HttpResponse, Request};
use serde_json::{json, Value};

use super::{collection, configmap, ms};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Op {
    Create,
    Put,
    Patch,
    Delete,
    Get,
}

#[derive(Debug)]
pub(crate) struct Attempt {
    pub(crate) op: Op,
    pub(crate) name: String,
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) status: u16,
    /// The written revision; for a delete, its precondition.
    pub(crate) rv: Option<u64>,
    /// The answer's start, for the report's samples of failures.
    pub(crate) raw: String,
}

impl Attempt {
    pub(crate) fn acked(&self) -> bool {
        self.op != Op::Get && (200..300).contains(&self.status)
    }
}

/// No answer (connection refused or cut, timed out) or a 5xx: the write may have committed.
pub(crate) fn unknown(status: u16) -> bool {
    status == 0 || status >= 500
}

pub(crate) struct Writer<'a> {
    pub(crate) lb: &'a Endpoint,
    pub(crate) t0: Instant,
    /// No write is tried after this (a store that never comes back fails the test).
    pub(crate) deadline: Instant,
    pub(crate) attempts: Vec<Attempt>,
    /// Precondition failures no earlier unknown outcome explains.
    pub(crate) surprises: Vec<String>,
}

impl Writer<'_> {
    fn send(&mut self, op: Op, name: &str, req: &Request) -> HttpResponse {
        assert!(Instant::now() < self.deadline, "{name}: still trying to {op:?} {:?} after the run", self.t0.elapsed());
        let start = ms(self.t0);
        let r = self.lb.try_request(req).unwrap_or_else(|e| HttpResponse { status: 0, body: Value::Null, raw: e.to_string() });
        let rv = (200..300).contains(&r.status).then(|| r.body["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok())).flatten();
        let raw = if (200..300).contains(&r.status) { String::new() } else { r.raw.chars().take(160).collect() };
        self.attempts.push(Attempt { op, name: name.to_owned(), start, end: ms(self.t0), status: r.status, rv, raw });
        if unknown(r.status) || r.status == 429 {
            std::thread::sleep(Duration::from_millis(100));
        }
        r
    }

    /// The object's current resourceVersion (None: it does not exist), asked until answered.
    fn resolve(&mut self, name: &str) -> Option<u64> {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let r = self.send(Op::Get, name, &Request::get(&format!("{}/{name}", collection())));
            match r.status {
                200 => return Some(rv_of(&r.body)),
                404 => return None,
                _ if Instant::now() > deadline => panic!("{name}: no answer to GET within 90 s: {} {}", r.status, r.raw),
                _ => {}
            }
        }
    }

    /// Creates `name`, updates it `updates` times (PUT and JSON patch in turn), deletes it if
    /// `delete`; each step retried until it is known to have happened.
    fn object_life(&mut self, name: &str, updates: usize, delete: bool) {
        let item = format!("{}/{name}", collection());
        let mut uncertain = false;
        let mut rv = loop {
            let r = self.send(Op::Create, name, &Request::new("POST", &collection()).json(&configmap(name, "0")));
            match r.status {
                201 => break rv_of(&r.body),
                409 if uncertain => {
                    if let Some(rv) = self.resolve(name) {
                        break rv;
                    }
                }
                s if unknown(s) || s == 429 => {
                    uncertain |= s != 429;
                    if let Some(rv) = self.resolve(name) {
                        break rv;
                    }
                }
                _ => return self.surprises.push(format!("{name}: create {} {}", r.status, r.raw)),
            }
        };
        for k in 1..=updates {
            loop {
                let (op, req) = if k % 2 == 1 {
                    let mut obj = configmap(name, &k.to_string());
                    obj["metadata"]["resourceVersion"] = json!(rv.to_string());
                    (Op::Put, Request::new("PUT", &item).json(&obj))
                } else {
                    let patch = json!([
                        {"op": "test", "path": "/metadata/resourceVersion", "value": rv.to_string()},
                        {"op": "replace", "path": "/data/v", "value": k.to_string()},
                    ]);
                    (Op::Patch, Request::new("PATCH", &item).raw("application/json-patch+json", patch.to_string()))
                };
                let r = self.send(op, name, &req);
                match r.status {
                    200 => {
                        rv = rv_of(&r.body);
                        break;
                    }
                    409 | 422 | 429 => {
                        if r.status != 429 && !uncertain {
                            self.surprises.push(format!("{name}: {op:?} at {rv}: {} {}", r.status, r.raw));
                        }
                        match self.resolve(name) {
                            Some(now) => rv = now,
                            None => return self.surprises.push(format!("{name}: gone before update {k}")),
                        }
                    }
                    s if unknown(s) => {
                        uncertain = true;
                        match self.resolve(name) {
                            Some(now) => rv = now,
                            None => return self.surprises.push(format!("{name}: gone before update {k}")),
                        }
                    }
                    _ => return self.surprises.push(format!("{name}: {op:?} {} {}", r.status, r.raw)),
                }
            }
        }
        if !delete {
            return;
        }
        loop {
            let options = json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"resourceVersion": rv.to_string()}});
            let r = self.send(Op::Delete, name, &Request::new("DELETE", &item).json(&options));
            // kube answers a ConfigMap's delete with a Status: remember the precondition.
            if let Some(last) = self.attempts.last_mut() {
                last.rv = Some(rv);
            }
            match r.status {
                200 | 202 => return,
                404 if uncertain => return,
                s if s == 409 || s == 429 || unknown(s) => {
                    if s == 409 && !uncertain {
                        self.surprises.push(format!("{name}: delete at {rv}: {} {}", r.status, r.raw));
                    }
                    uncertain |= unknown(s);
                    match self.resolve(name) {
                        Some(now) => rv = now,
                        None if uncertain => return,
                        None => return self.surprises.push(format!("{name}: gone before its delete")),
                    }
                }
                _ => return self.surprises.push(format!("{name}: delete {} {}", r.status, r.raw)),
            }
        }
    }
}

pub(crate) fn write_until<'a>(lb: &'a Endpoint, w: usize, t0: Instant, stop: &AtomicBool) -> Writer<'a> {
    let mut writer = Writer { lb, t0, deadline: t0 + Duration::from_secs(170), attempts: Vec::new(), surprises: Vec::new() };
    let mut i = 0;
    while !stop.load(Ordering::SeqCst) {
        // Three of four objects are deleted; the rest stay for the final state.
        writer.object_life(&format!("w{w}-{i}"), 1 + i % 3, i % 4 != 3);
        i += 1;
    }
    writer
}
