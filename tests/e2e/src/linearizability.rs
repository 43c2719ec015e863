//! A linearizability checker for the history of one key, in the style of porcupine and etcd's
//! robustness tests: Wing & Gong's search over linearization orders with Lowe's memoisation
//! (a set of (operations linearized, model states) already explored), over a register model
//! whose state is (exists, value, resourceVersion).
//!
//! Each operation has an invoke time, a return time (none when its outcome is unknown: no
//! answer, a cut connection, a 5xx; such an operation may take effect at any point after its
//! invocation, or never), its input (create, update or patch conditional on a resourceVersion,
//! delete conditional on one, read) and what the client observed. A key's history is
//! linearizable when some total order of its operations respects real time (an operation that
//! returned before another was invoked comes first) and replays on the register to exactly the
//! observed results. Histories of different keys are independent (linearizability is local), so
//! a LIST is checked as one read of each key at the same moment.

use std::collections::{HashMap, HashSet};

/// What a client asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Create (POST): succeeds only if the key does not exist.
    Create { value: String },
    /// Update (PUT with `metadata.resourceVersion`): succeeds only at that resourceVersion.
    Update { rv: u64, value: String },
    /// JSON patch whose first operation tests `/metadata/resourceVersion`.
    Patch { rv: u64, value: String },
    /// Delete with `preconditions.resourceVersion`.
    Delete { rv: u64 },
    /// GET, or this key's part of a consistent LIST.
    Read,
}

/// What the client observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// A create, update or patch succeeded and wrote this resourceVersion.
    Written { rv: u64 },
    /// A delete succeeded.
    Deleted,
    /// A read found the object with this value and resourceVersion.
    Found { value: String, rv: u64 },
    /// 404: the key did not exist (read, update, patch, delete).
    NotFound,
    /// 409 AlreadyExists on create.
    Exists,
    /// The precondition failed (409 Conflict, or 422 from a patch's failed test): the object
    /// existed at another resourceVersion.
    Conflict,
    /// No answer: the operation may have taken effect (once) or not.
    Unknown,
}

/// One operation on one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// Who issued it (for messages only).
    pub client: usize,
    /// Invocation time (any monotonic unit, e.g. microseconds since the start).
    pub call: u64,
    /// Return time; `None` when the outcome is unknown (the operation stays pending forever).
    pub ret: Option<u64>,
    pub input: Input,
    pub output: Output,
}

/// The register's state. Values are interned; `rv` is `None` after a write whose outcome was
/// unknown (the next observation binds it); `floor` is the highest resourceVersion this key is
/// known to have had, which every later write must exceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct State {
    exists: bool,
    value: u32,
    rv: Option<u64>,
    floor: u64,
}

const ABSENT: State = State { exists: false, value: u32::MAX, rv: Some(0), floor: 0 };

/// The register model: the states `op` may lead to from `s` (none: `op` cannot happen here).
fn step(s: State, input: &Input, value: u32, output: &Output) -> Vec<State> {
    let rv_is = |e: u64| s.rv.is_none_or(|rv| rv == e);
    let written = |rv: Option<u64>| State { exists: true, value, rv, floor: rv.map_or(s.floor, |r| r.max(s.floor)) };
    match (input, output) {
        (Input::Create { .. }, Output::Written { rv }) if !s.exists && *rv > s.floor => vec![written(Some(*rv))],
        (Input::Create { .. }, Output::Exists) if s.exists => vec![s],
        (Input::Create { .. }, Output::Unknown) => {
            let mut out = vec![s];
            if !s.exists {
                out.push(written(None));
            }
            out
        }
        (Input::Update { rv: e, .. } | Input::Patch { rv: e, .. }, Output::Written { rv }) if s.exists && rv_is(*e) && rv > e && *rv > s.floor => {
            vec![written(Some(*rv))]
        }
        (Input::Update { rv: e, .. } | Input::Patch { rv: e, .. }, Output::Unknown) => {
            let mut out = vec![s];
            if s.exists && rv_is(*e) {
                out.push(State { floor: s.floor.max(*e), ..written(None) });
            }
            out
        }
        (Input::Delete { rv: e }, Output::Deleted) if s.exists && rv_is(*e) => vec![State { exists: false, value: u32::MAX, rv: None, floor: s.floor.max(*e) }],
        (Input::Delete { rv: e }, Output::Unknown) => {
            let mut out = vec![s];
            if s.exists && rv_is(*e) {
                out.push(State { exists: false, value: u32::MAX, rv: None, floor: s.floor.max(*e) });
            }
            out
        }
        (Input::Update { rv: e, .. } | Input::Patch { rv: e, .. } | Input::Delete { rv: e }, Output::Conflict) if s.exists && s.rv != Some(*e) => vec![s],
        (_, Output::NotFound) if !s.exists && !matches!(input, Input::Create { .. }) => vec![s],
        (Input::Read, Output::Found { rv, .. }) if s.exists && s.value == value => match s.rv {
            Some(known) if known == *rv => vec![s],
            None if *rv > s.floor => vec![State { rv: Some(*rv), floor: *rv, ..s }],
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// The checker's answer for one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Linearizable,
    /// No order works; the message names the operation the deepest search could not place.
    Violation(String),
    /// The search budget ran out (neither proven nor refuted).
    Inconclusive { steps: usize },
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    call: bool,
    op: usize,
    /// Index of the matching entry (a call's return, a return's call).
    matching: usize,
}

/// Checks one key's history from the absent state; `budget` bounds the search steps.
pub fn check(ops: &[Operation], budget: usize) -> Verdict {
    if ops.is_empty() {
        return Verdict::Linearizable;
    }
    // Intern values: the model compares small integers.
    let mut names: HashMap<&str, u32> = HashMap::new();
    let values: Vec<u32> = ops
        .iter()
        .map(|op| {
            let v = match (&op.input, &op.output) {
                (Input::Create { value } | Input::Update { value, .. } | Input::Patch { value, .. }, _) => Some(value.as_str()),
                (Input::Read, Output::Found { value, .. }) => Some(value.as_str()),
                _ => None,
            };
            v.map_or(u32::MAX, |v| {
                let next = u32::try_from(names.len()).unwrap_or(u32::MAX - 1);
                *names.entry(v).or_insert(next)
            })
        })
        .collect();

    // Call and return entries in time order (a call before a return at the same time: they
    // overlap); an unknown outcome returns after everything.
    let mut timeline: Vec<(u64, bool, usize)> = Vec::with_capacity(ops.len() * 2);
    for (i, op) in ops.iter().enumerate() {
        timeline.push((op.call, true, i));
        timeline.push((op.ret.unwrap_or(u64::MAX), false, i));
    }
    timeline.sort_by_key(|&(t, call, i)| (t, !call, i));
    let n = timeline.len();
    let mut position = vec![[0usize; 2]; ops.len()];
    for (k, &(_, call, i)) in timeline.iter().enumerate() {
        position[i][usize::from(!call)] = k;
    }
    let entries: Vec<Entry> = timeline
        .iter()
        .map(|&(_, call, i)| Entry { call, op: i, matching: position[i][usize::from(call)] })
        .collect();
    // A doubly linked list over entries; index n is the head sentinel.
    let head = n;
    let mut next: Vec<usize> = (1..=n + 1).collect();
    let mut prev: Vec<usize> = (0..=n).map(|k| if k == 0 { head } else { k - 1 }).collect();
    next[head] = 0;
    prev[head] = n.saturating_sub(1);
    next[n - 1] = usize::MAX;
    let end = usize::MAX;
    let lift = |k: usize, next: &mut Vec<usize>, prev: &mut Vec<usize>| {
        let m = entries[k].matching;
        for e in [k, m] {
            let (p, nx) = (prev[e], next[e]);
            next[p] = nx;
            if nx != end {
                prev[nx] = p;
            }
        }
    };
    let unlift = |k: usize, next: &mut Vec<usize>, prev: &mut Vec<usize>| {
        let m = entries[k].matching;
        for e in [m, k] {
            let (p, nx) = (prev[e], next[e]);
            next[p] = e;
            if nx != end {
                prev[nx] = e;
            }
        }
    };

    let words = ops.len().div_ceil(64);
    let mut linearized = vec![0u64; words];
    let mut states: Vec<State> = vec![ABSENT];
    let mut cache: HashSet<(Vec<u64>, Vec<State>)> = HashSet::new();
    let mut calls: Vec<(usize, Vec<State>)> = Vec::new();
    let mut entry = next[head];
    let mut steps = 0usize;
    let mut deepest = (0usize, 0usize);
    while next[head] != end {
        steps += 1;
        if steps > budget {
            return Verdict::Inconclusive { steps };
        }
        let e = entries[entry];
        if e.call {
            let op = &ops[e.op];
            let mut after: Vec<State> = states.iter().flat_map(|s| step(*s, &op.input, values[e.op], &op.output)).collect();
            after.sort_unstable();
            after.dedup();
            let mut placed = false;
            if !after.is_empty() {
                let mut bits = linearized.clone();
                bits[e.op / 64] |= 1 << (e.op % 64);
                if cache.insert((bits.clone(), after.clone())) {
                    calls.push((entry, std::mem::replace(&mut states, after)));
                    linearized = bits;
                    lift(entry, &mut next, &mut prev);
                    entry = next[head];
                    placed = true;
                    if calls.len() > deepest.0 {
                        deepest = (calls.len(), entry);
                    }
                }
            }
            if !placed {
                entry = next[entry];
            }
        } else {
            // A return reached before its call was placed: undo the last placement.
            let Some((placed, before)) = calls.pop() else {
                let stuck = entries.get(deepest.1).map_or(e.op, |d| d.op);
                let op = &ops[stuck];
                return Verdict::Violation(format!(
                    "no linearization: at most {} of {} operations placed; stuck before client {}'s {:?} -> {:?} (call {}, return {:?})",
                    deepest.0,
                    ops.len(),
                    op.client,
                    op.input,
                    op.output,
                    op.call,
                    op.ret
                ));
            };
            states = before;
            let op = entries[placed].op;
            linearized[op / 64] &= !(1 << (op % 64));
            unlift(placed, &mut next, &mut prev);
            entry = next[placed];
        }
    }
    Verdict::Linearizable
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(client: usize, call: u64, ret: Option<u64>, input: Input, output: Output) -> Operation {
        Operation { client, call, ret, input, output }
    }
    fn create(v: &str) -> Input {
        Input::Create { value: v.into() }
    }
    fn update(rv: u64, v: &str) -> Input {
        Input::Update { rv, value: v.into() }
    }
    fn found(v: &str, rv: u64) -> Output {
        Output::Found { value: v.into(), rv }
    }
    fn violated(ops: &[Operation]) -> bool {
        matches!(check(ops, 1_000_000), Verdict::Violation(_))
    }

    #[test]
    fn sequential_and_concurrent_histories_that_are_linearizable() {
        let ops = vec![
            op(0, 0, Some(10), create("a"), Output::Written { rv: 5 }),
            op(1, 11, Some(20), Input::Read, found("a", 5)),
            op(0, 21, Some(30), update(5, "b"), Output::Written { rv: 7 }),
            // Concurrent with the update: may read either.
            op(1, 22, Some(29), Input::Read, found("a", 5)),
            op(2, 23, Some(28), Input::Read, found("b", 7)),
            op(2, 31, Some(40), Input::Patch { rv: 5, value: "c".into() }, Output::Conflict),
            op(0, 41, Some(50), Input::Delete { rv: 7 }, Output::Deleted),
            op(1, 51, Some(60), Input::Read, Output::NotFound),
            op(1, 61, Some(70), update(7, "d"), Output::NotFound),
            op(2, 71, Some(80), create("e"), Output::Written { rv: 12 }),
            op(0, 72, Some(79), create("f"), Output::Exists),
        ];
        assert_eq!(check(&ops, 1_000_000), Verdict::Linearizable);
    }

    #[test]
    fn a_lost_write_is_caught() {
        // An acknowledged update, then a read that returns the value before it.
        let ops = vec![
            op(0, 0, Some(10), create("a"), Output::Written { rv: 5 }),
            op(0, 11, Some(20), update(5, "b"), Output::Written { rv: 7 }),
            op(1, 30, Some(40), Input::Read, found("a", 5)),
        ];
        assert!(violated(&ops));
        // A deleted object that comes back.
        let ops = vec![
            op(0, 0, Some(10), create("a"), Output::Written { rv: 5 }),
            op(0, 11, Some(20), Input::Delete { rv: 5 }, Output::Deleted),
            op(1, 30, Some(40), Input::Read, found("a", 5)),
        ];
        assert!(violated(&ops));
        // A create acknowledged, then the key is absent with no delete.
        let ops = vec![op(0, 0, Some(10), create("a"), Output::Written { rv: 5 }), op(1, 30, Some(40), Input::Read, Output::NotFound)];
        assert!(violated(&ops));
    }

    #[test]
    fn a_stale_read_after_an_acknowledged_write_is_caught() {
        let ops = vec![
            op(0, 0, Some(10), create("a"), Output::Written { rv: 5 }),
            op(1, 12, Some(14), Input::Read, found("a", 5)),
            op(0, 15, Some(20), update(5, "b"), Output::Written { rv: 7 }),
            op(2, 21, Some(25), Input::Read, found("b", 7)),
            // Another client, after both: reads the old value.
            op(1, 26, Some(30), Input::Read, found("a", 5)),
        ];
        assert!(violated(&ops));
        // A conflict against a resourceVersion that was current: the write was not seen.
        let ops = vec![
            op(0, 0, Some(10), create("a"), Output::Written { rv: 5 }),
            op(1, 11, Some(20), update(5, "b"), Output::Conflict),
        ];
        assert!(violated(&ops));
    }

    #[test]
    fn a_duplicated_write_is_caught() {
        // One create applied twice: its value shows up at two resourceVersions.
        let ops = vec![
            op(0, 0, Some(10), create("a"), Output::Written { rv: 5 }),
            op(1, 11, Some(12), Input::Read, found("a", 5)),
            op(1, 13, Some(14), Input::Read, found("a", 9)),
        ];
        assert!(violated(&ops));
        // An update that succeeded, then took effect again over a later write.
        let ops = vec![
            op(0, 0, Some(10), create("a"), Output::Written { rv: 5 }),
            op(0, 11, Some(20), update(5, "b"), Output::Written { rv: 7 }),
            op(1, 21, Some(30), update(7, "c"), Output::Written { rv: 8 }),
            op(2, 31, Some(40), Input::Read, found("b", 9)),
        ];
        assert!(violated(&ops));
        // Two creates of the same key both acknowledged with nothing between.
        let ops = vec![op(0, 0, Some(10), create("a"), Output::Written { rv: 5 }), op(1, 11, Some(20), create("b"), Output::Written { rv: 6 })];
        assert!(violated(&ops));
    }

    #[test]
    fn unknown_outcomes_may_or_may_not_take_effect_once() {
        // A write that timed out may land later than anything else...
        let landed = vec![
            op(0, 0, Some(10), create("a"), Output::Written { rv: 5 }),
            op(1, 11, None, update(5, "b"), Output::Unknown),
            op(2, 20, Some(30), Input::Read, found("a", 5)),
            op(2, 40, Some(50), Input::Read, found("b", 9)),
            op(2, 60, Some(70), Input::Read, found("b", 9)),
        ];
        assert_eq!(check(&landed, 1_000_000), Verdict::Linearizable);
        // ...or never.
        let never = vec![op(0, 0, Some(10), create("a"), Output::Written { rv: 5 }), op(1, 11, None, update(5, "b"), Output::Unknown), op(2, 20, Some(30), Input::Read, found("a", 5))];
        assert_eq!(check(&never, 1_000_000), Verdict::Linearizable);
        // But not before it was sent, and not twice (two resourceVersions for its value).
        let early = vec![op(0, 0, Some(10), create("a"), Output::Written { rv: 5 }), op(2, 11, Some(12), Input::Read, found("b", 9)), op(1, 20, None, update(5, "b"), Output::Unknown)];
        assert!(violated(&early));
        let twice = vec![
            op(0, 0, Some(10), create("a"), Output::Written { rv: 5 }),
            op(1, 11, None, update(5, "b"), Output::Unknown),
            op(2, 20, Some(30), Input::Read, found("b", 9)),
            op(2, 40, Some(50), Input::Read, found("b", 11)),
        ];
        assert!(violated(&twice));
        // An unknown delete explains a vanished object, and an unknown create a found one.
        let ops = vec![
            op(0, 0, Some(10), create("a"), Output::Written { rv: 5 }),
            op(1, 11, None, Input::Delete { rv: 5 }, Output::Unknown),
            op(2, 20, Some(30), Input::Read, Output::NotFound),
            op(3, 31, None, create("c"), Output::Unknown),
            op(2, 40, Some(50), Input::Read, found("c", 12)),
        ];
        assert_eq!(check(&ops, 1_000_000), Verdict::Linearizable);
    }

    #[test]
    fn resource_versions_only_grow() {
        // A write acknowledged with a resourceVersion below one already read.
        let ops = vec![
            op(0, 0, Some(10), create("a"), Output::Written { rv: 5 }),
            op(0, 11, Some(20), update(5, "b"), Output::Written { rv: 4 }),
        ];
        assert!(violated(&ops));
    }

    #[test]
    fn long_histories_with_overlap_are_checked_quickly() {
        // 3 clients, 3,000 operations, each overlapping its neighbours.
        let mut ops = Vec::new();
        let mut rv = 1;
        ops.push(op(0, 0, Some(5), create("v0"), Output::Written { rv }));
        for i in 1..1000u64 {
            let t = i * 10;
            let before = rv;
            rv += 2;
            let value = format!("v{i}");
            ops.push(op(0, t, Some(t + 8), update(before, &value), Output::Written { rv }));
            ops.push(op(1, t + 1, Some(t + 3), Input::Read, found(&format!("v{}", i - 1), before)));
            ops.push(op(2, t + 7, Some(t + 15), Input::Read, found(&value, rv)));
        }
        let started = std::time::Instant::now();
        assert_eq!(check(&ops, 10_000_000), Verdict::Linearizable);
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn the_budget_bounds_the_search() {
        let ops = vec![op(0, 0, Some(10), create("a"), Output::Written { rv: 5 }), op(1, 11, Some(20), Input::Read, found("a", 5))];
        assert!(matches!(check(&ops, 1), Verdict::Inconclusive { .. }));
    }
}
