//! What both operator tests share (`operator_kopf.rs`, `operator_kube_rs.rs`): the `Counter` CRD,
//! the operator process, and the workload with its convergence check.
//!
//! The workload drives 500 `Counter` objects in two namespaces with raw HTTP from several
//! threads: creates, two waves of spec updates, label-only updates, deletes, and a SIGKILL +
//! restart of kapi on the same port in the middle, while the operator keeps running. Then every
//! surviving object must show, within a bound, the operator's status for its latest spec and
//! generation (written through the status subresource), the operator's finalizer, and a
//! generation that counts exactly its spec changes; every deleted object must be gone (the
//! operator removed its finalizer).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kapi_e2e::{wait_for, Endpoint, HttpResponse, Kapi, Request};
use serde_json::{json, Value};

pub const GROUP_VERSION: &str = "/apis/ops.kapi.dev/v1";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const CRD_NAME: &str = "counters.ops.kapi.dev";
pub const NAMESPACES: [&str; 2] = ["ops-a", "ops-b"];
/// How many objects the workload creates.
pub const OBJECTS: usize = 500;
/// Client threads sending the workload's requests.
const THREADS: usize = 6;
/// How long the operator may take to converge after the last write.
pub const CONVERGE_TIMEOUT: Duration = Duration::from_secs(60);

/// The CRD both operators reconcile: namespaced, a status subresource, printer columns. The
/// status preserves unknown fields because kopf keeps its progress in `status.kopf` (as kopf's
/// documentation asks of CRDs it serves).
pub fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": "ops.kapi.dev",
            "scope": "Namespaced",
            "names": {"plural": "counters", "singular": "counter", "kind": "Counter", "listKind": "CounterList", "shortNames": ["ctr"]},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Value", "type": "integer", "jsonPath": ".spec.value"},
                    {"name": "Observed", "type": "integer", "jsonPath": ".status.observedValue"},
                    {"name": "Generation", "type": "integer", "jsonPath": ".status.observedGeneration", "priority": 1},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["value"],
                            "properties": {
                                "value": {"type": "integer"},
                                "message": {"type": "string"}
                            }
                        },
                        "status": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": true,
                            "properties": {
                                "observedValue": {"type": "integer"},
                                "observedMessage": {"type": "string", "nullable": true},
                                "observedGeneration": {"type": "integer"}
                            }
                        }
                    }
                }}
            }]
        }
    })
}

/// Creates the namespaces and the CRD, and waits until the CRD is Established and served.
pub fn install(kapi: &Kapi) {
    for ns in NAMESPACES {
        let r = kapi.request(
            &Request::new("POST", "/api/v1/namespaces")
                .json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})),
        );
        assert_eq!(r.status, 201, "namespace {ns}: {}", r.raw);
    }
    let r = kapi.request(&Request::new("POST", CRDS).json(&crd()));
    assert_eq!(r.status, 201, "CRD: {}", r.raw);
    let established = wait_for(Duration::from_secs(20), || {
        let crd = kapi.get_json(&format!("{CRDS}/{CRD_NAME}"));
        let ok = crd["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Established" && c["status"] == "True");
        (ok && kapi.request(&Request::get(&format!("{GROUP_VERSION}/counters"))).status == 200).then_some(())
    });
    assert!(
        established.is_some(),
        "{CRD_NAME} not Established and served: {}",
        kapi.get_json(&format!("{CRDS}/{CRD_NAME}"))
    );
}

/// An operator process with its output in a log file; killed (by its own handle) on drop, and
/// its log printed when the test panics.
pub struct Operator {
    name: String,
    child: Child,
    log_path: PathBuf,
}

impl Operator {
    /// Spawns `cmd` with stdout and stderr appended to `log_path`.
    pub fn spawn(name: &str, cmd: &mut Command, log_path: &Path) -> Operator {
        let log = File::create(log_path).unwrap_or_else(|e| panic!("creating {}: {e}", log_path.display()));
        let err = log.try_clone().unwrap_or_else(|e| panic!("cloning {}: {e}", log_path.display()));
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {name} ({cmd:?}): {e}"));
        Operator { name: name.to_owned(), child, log_path: log_path.to_owned() }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Waits (bounded) for a log line containing `needle`; panics with the log if it exits first.
    pub fn wait_for_log(&mut self, needle: &str, timeout: Duration) -> bool {
        wait_for(timeout, || {
            self.assert_running();
            self.log().contains(needle).then_some(())
        })
        .is_some()
    }

    /// Panics (with the log) when the operator has exited.
    pub fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("{} exited ({status}); log:\n{}", self.name, self.log_tail(200));
        }
    }

    /// How many log lines mention an error or a warning, and a few distinct ones (numbers
    /// blanked so that repeats of one kind count once), for the report.
    pub fn error_summary(&self) -> String {
        let log = self.log();
        let bad: Vec<&str> = log
            .lines()
            .filter(|l| {
                let l = l.to_ascii_lowercase();
                l.contains("error") || l.contains("warning") || l.contains("traceback")
            })
            .filter(|l| !l.starts_with("stats "))
            .collect();
        let mut kinds: Vec<String> = Vec::new();
        for line in &bad {
            let kind: String = line.chars().map(|c| if c.is_ascii_digit() { '#' } else { c }).take(160).collect();
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        let samples: Vec<String> = kinds.iter().take(8).map(|k| format!("  {k}")).collect();
        format!("{} error/warning lines, {} kinds:\n{}", bad.len(), kinds.len(), samples.join("\n"))
    }

    /// The last `stats ...` line the operator printed.
    pub fn last_stats(&self) -> String {
        self.log().lines().rev().find(|l| l.starts_with("stats ")).unwrap_or("no stats yet").to_owned()
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "===== {} log ({}), last 300 lines =====\n{}\n===== end of {} log =====",
                self.name,
                self.log_path.display(),
                self.log_tail(300),
                self.name
            );
        }
    }
}

/// What the workload last wrote to one object (None once deleted).
#[derive(Debug, Clone, PartialEq)]
struct Desired {
    value: i64,
    message: String,
    /// 1 + the number of spec changes: what `metadata.generation` must be.
    generation: i64,
    labelled: bool,
}

fn name(i: usize) -> String {
    format!("c-{i:03}")
}

fn namespace(i: usize) -> &'static str {
    NAMESPACES[i % NAMESPACES.len()]
}

fn item_path(i: usize) -> String {
    format!("{GROUP_VERSION}/namespaces/{}/counters/{}", namespace(i), name(i))
}

/// One request, retried while kapi is unreachable or overloaded (status 0, 429, 5xx) for at
/// most 30 s. `retried` tells whether an earlier attempt may have reached the server.
fn send(endpoint: &Endpoint, req: &Request) -> (HttpResponse, bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut retried = false;
    loop {
        let answer = endpoint.try_request(req).unwrap_or_else(|e| panic!("{} {}: {e}", req.method, req.path));
        let transient = answer.status == 0 || answer.status == 429 || answer.status >= 500;
        if !transient || Instant::now() >= deadline {
            return (answer, retried);
        }
        retried = true;
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs `op` on every index of `items` from [`THREADS`] threads.
fn parallel(items: &[usize], op: impl Fn(usize) + Sync) {
    let chunk = items.len().div_ceil(THREADS).max(1);
    std::thread::scope(|s| {
        for part in items.chunks(chunk) {
            let op = &op;
            s.spawn(move || part.iter().for_each(|&i| op(i)));
        }
    });
}

/// Timings of one run, printed at the end.
#[derive(Debug, Default)]
pub struct Timings {
    pub creates: Duration,
    pub restart: Duration,
    pub writes_after_restart: Duration,
    pub converge: Duration,
    pub total: Duration,
}

/// Drives the workload against `kapi` while `operator` runs, restarting kapi (same port) in the
/// middle, then asserts convergence. `finalizer` is the operator's finalizer.
pub fn run(kapi: &mut Kapi, operator: &mut Operator, finalizer: &str) -> Timings {
    let started = Instant::now();
    let mut timings = Timings::default();
    let endpoint = kapi.endpoint();
    let mut desired: BTreeMap<usize, Option<Desired>> = BTreeMap::new();
    let all: Vec<usize> = (0..OBJECTS).collect();

    // Creates.
    let t = Instant::now();
    parallel(&all, |i| {
        let body = json!({"apiVersion": "ops.kapi.dev/v1", "kind": "Counter", "metadata": {"name": name(i)}, "spec": {"value": i, "message": "created"}});
        let (r, retried) = send(
            &endpoint,
            &Request::new("POST", &format!("{GROUP_VERSION}/namespaces/{}/counters", namespace(i))).json(&body),
        );
        assert!(r.status == 201 || (retried && r.status == 409), "create {}: {} {}", name(i), r.status, r.raw);
    });
    timings.creates = t.elapsed();
    for &i in &all {
        desired.insert(i, Some(Desired { value: i as i64, message: "created".into(), generation: 1, labelled: false }));
    }
    println!("created {OBJECTS} counters in {:?}; operator: {}", timings.creates, operator.last_stats());

    // First wave of spec updates (every 5th object); half-way through it, kapi is SIGKILLed and
    // comes back on the same port while the operator works through the backlog and the writers
    // retry what the dead server did not answer.
    let rv_before = kapi.get_json(&format!("{GROUP_VERSION}/counters?limit=1"))["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let wave1: Vec<usize> = all.iter().copied().filter(|i| i % 5 == 0).collect();
    let done = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let writer = s.spawn(|| send_spec_updates(&endpoint, &wave1, 1000, "update-1", &done));
        let half = wait_for(Duration::from_secs(60), || {
            (writer.is_finished() || done.load(Ordering::Relaxed) >= wave1.len() / 2).then_some(())
        });
        assert!(half.is_some(), "half of the first update wave within 60 s");
        println!(
            "{} of {} updates sent; operator before the restart: {}",
            done.load(Ordering::Relaxed),
            wave1.len(),
            operator.last_stats()
        );
        let t = Instant::now();
        kapi.restart().expect("restart kapi on the same port");
        timings.restart = t.elapsed();
        if let Err(panic) = writer.join() {
            std::panic::resume_unwind(panic);
        }
    });
    record_spec_updates(&mut desired, &wave1, 1000, "update-1");
    assert_eq!(kapi.endpoint().url, endpoint.url, "kapi restarted on the same port");
    println!("kapi restarted (SIGKILL, same port) in {:?}; the update wave went on around it", timings.restart);
    operator.assert_running();
    // A watch resuming from before the restart, where the operator's watches are: kapi may
    // resume it or declare the resourceVersion expired, but as kube does, with 200 and one
    // ERROR event (code 410) once the watch is accepted. An HTTP 410 answer instead leaves
    // kube-rs retrying that same resourceVersion forever and makes kopf exit. Checked here,
    // asserted with convergence at the end.
    let resumed = kapi.request(&Request::get(&format!(
        "{GROUP_VERSION}/counters?watch=1&resourceVersion={rv_before}&timeoutSeconds=1"
    )));
    let events: Vec<Value> = resumed.raw.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let expired = events.len() == 1 && events[0]["type"] == "ERROR" && events[0]["object"]["code"] == 410;
    let resumes = !events.is_empty()
        && events.iter().all(|e| e["type"] == "ADDED" || e["type"] == "MODIFIED" || e["type"] == "DELETED");
    let watch_problem = (resumed.status != 200 || !(expired || resumes)).then(|| {
        format!(
            "a watch from resourceVersion {rv_before} (before the restart) got HTTP {} {}; kube answers 200 with the events since or one ERROR event (410 Expired)",
            resumed.status, resumed.raw
        )
    });
    println!(
        "a watch from resourceVersion {rv_before} (before the update wave and the restart): HTTP {}, {} events{}",
        resumed.status,
        events.len(),
        if expired {
            ": 410 Expired, clients relist"
        } else if resumes {
            ": clients resume"
        } else {
            ": not what kube answers"
        }
    );

    // After the restart: a second wave on half of wave 1, a first wave on other objects,
    // label-only changes (no new generation), and deletes (some of them updated objects).
    let t = Instant::now();
    let wave2: Vec<usize> = all.iter().copied().filter(|i| i % 10 == 0 || i % 5 == 1).collect();
    send_spec_updates(&endpoint, &wave2, 2000, "update-2", &AtomicUsize::new(0));
    record_spec_updates(&mut desired, &wave2, 2000, "update-2");
    let labelled: Vec<usize> = all.iter().copied().filter(|i| i % 10 == 7).collect();
    parallel(&labelled, |i| {
        let patch = json!({"metadata": {"labels": {"touched": "yes"}}}).to_string();
        let (r, _) = send(&endpoint, &Request::new("PATCH", &item_path(i)).raw("application/merge-patch+json", patch));
        assert_eq!(r.status, 200, "label {}: {}", name(i), r.raw);
    });
    for i in &labelled {
        if let Some(Some(d)) = desired.get_mut(i) {
            d.labelled = true;
        }
    }
    let deleted: Vec<usize> = all.iter().copied().filter(|i| i % 10 == 3 || i % 20 == 0).collect();
    parallel(&deleted, |i| {
        let (r, retried) = send(&endpoint, &Request::new("DELETE", &item_path(i)));
        assert!(
            r.status == 200 || r.status == 202 || (retried && r.status == 404),
            "delete {}: {} {}",
            name(i),
            r.status,
            r.raw
        );
    });
    for i in &deleted {
        desired.insert(*i, None);
    }
    timings.writes_after_restart = t.elapsed();
    println!(
        "after the restart: {} spec updates, {} label updates, {} deletes in {:?}; operator: {}",
        wave2.len(),
        labelled.len(),
        deleted.len(),
        timings.writes_after_restart,
        operator.last_stats()
    );

    // Convergence.
    let t = Instant::now();
    let mut last = Vec::new();
    let converged = wait_for(CONVERGE_TIMEOUT, || {
        operator.assert_running();
        last = mismatches(kapi, &desired, finalizer);
        last.is_empty().then_some(())
    });
    timings.converge = t.elapsed();
    timings.total = started.elapsed();
    assert!(
        converged.is_some(),
        "not converged within {CONVERGE_TIMEOUT:?}: {} objects differ, for example:\n{}\noperator: {}{}",
        last.len(),
        last.iter().take(15).cloned().collect::<Vec<_>>().join("\n"),
        operator.last_stats(),
        watch_problem.as_deref().map(|p| format!("\nalso: {p}")).unwrap_or_default()
    );
    assert!(watch_problem.is_none(), "{}", watch_problem.unwrap_or_default());
    let remaining = desired.values().flatten().count();
    std::thread::sleep(Duration::from_millis(1100));
    println!(
        "converged {:?} after the last write: {remaining} counters reconciled, {} deleted and gone; operator: {}",
        timings.converge,
        deleted.len(),
        operator.last_stats()
    );
    println!("timings: {timings:?}");
    println!("{} log: {}", operator.name, operator.error_summary());
    timings
}

/// Merge-patches the spec of `items` to `value + offset` / `message`, from several threads,
/// counting the answered requests in `done`.
fn send_spec_updates(endpoint: &Endpoint, items: &[usize], offset: i64, message: &str, done: &AtomicUsize) {
    parallel(items, |i| {
        let patch = json!({"spec": {"value": i as i64 + offset, "message": message}}).to_string();
        let (r, retried) =
            send(endpoint, &Request::new("PATCH", &item_path(i)).raw("application/merge-patch+json", patch));
        assert_eq!(r.status, 200, "update {} (retried: {retried}): {}", name(i), r.raw);
        assert_eq!(r.body["spec"]["value"], json!(i as i64 + offset), "update {}: {}", name(i), r.raw);
        done.fetch_add(1, Ordering::Relaxed);
    });
}

/// Records what [`send_spec_updates`] wrote: a new spec and one more generation each.
fn record_spec_updates(desired: &mut BTreeMap<usize, Option<Desired>>, items: &[usize], offset: i64, message: &str) {
    for i in items {
        if let Some(Some(d)) = desired.get_mut(i) {
            d.value = *i as i64 + offset;
            d.message = message.to_owned();
            d.generation += 1;
        }
    }
}

/// Every way the stored objects differ from the converged state (empty when converged).
fn mismatches(kapi: &Kapi, desired: &BTreeMap<usize, Option<Desired>>, finalizer: &str) -> Vec<String> {
    let list = kapi.request(&Request::get(&format!("{GROUP_VERSION}/counters")));
    if list.status != 200 {
        return vec![format!("list: {} {}", list.status, list.raw)];
    }
    let mut found: BTreeMap<(String, String), Value> = BTreeMap::new();
    for item in list.body["items"].as_array().into_iter().flatten() {
        let key = (
            item["metadata"]["namespace"].as_str().unwrap_or("").to_owned(),
            item["metadata"]["name"].as_str().unwrap_or("").to_owned(),
        );
        found.insert(key, item.clone());
    }
    let mut out = Vec::new();
    for (&i, want) in desired {
        let key = (namespace(i).to_owned(), name(i));
        let got = found.remove(&key);
        match (want, got) {
            (None, None) => {}
            (None, Some(obj)) => out.push(format!(
                "{}/{}: deleted but still there (deletionTimestamp {}, finalizers {})",
                key.0, key.1, obj["metadata"]["deletionTimestamp"], obj["metadata"]["finalizers"]
            )),
            (Some(_), None) => out.push(format!("{}/{}: missing", key.0, key.1)),
            (Some(d), Some(obj)) => {
                let meta = &obj["metadata"];
                let status = &obj["status"];
                let mut wrong = Vec::new();
                if obj["spec"]["value"] != json!(d.value) || obj["spec"]["message"] != json!(d.message) {
                    wrong.push(format!("spec {} (wrote value {} message {})", obj["spec"], d.value, d.message));
                }
                if meta["generation"] != json!(d.generation) {
                    wrong.push(format!("generation {} (want {})", meta["generation"], d.generation));
                }
                if status["observedValue"] != json!(d.value)
                    || status["observedMessage"] != json!(d.message)
                    || status["observedGeneration"] != meta["generation"]
                {
                    wrong.push(format!(
                        "status observed value {} message {} generation {} (spec value {} generation {})",
                        status["observedValue"],
                        status["observedMessage"],
                        status["observedGeneration"],
                        d.value,
                        meta["generation"]
                    ));
                }
                if !meta["finalizers"].as_array().into_iter().flatten().any(|f| f == finalizer) {
                    wrong.push(format!("finalizers {} lack {finalizer}", meta["finalizers"]));
                }
                if !meta["deletionTimestamp"].is_null() {
                    wrong.push(format!("deletionTimestamp {}", meta["deletionTimestamp"]));
                }
                if d.labelled != (meta["labels"]["touched"] == "yes") {
                    wrong.push(format!("labels {}", meta["labels"]));
                }
                if !wrong.is_empty() {
                    out.push(format!("{}/{}: {}", key.0, key.1, wrong.join("; ")));
                }
            }
        }
    }
    for (key, _) in found {
        out.push(format!("{}/{}: unexpected object", key.0, key.1));
    }
    out
}
