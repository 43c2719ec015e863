//! The graph's bookkeeping and the work it makes due, without a store.

use std::sync::Arc;

use kapi_registry::catalog::{self, ResourceSpec};
use kapi_watch::EventType::{Added, Deleted, Modified};
use serde_json::{json, Value};

use super::{Graph, Plan, Work};

fn spec(group: &str, resource: &str) -> &'static ResourceSpec {
    catalog::find(group, "v1", resource).expect("served")
}

fn owner(api_version: &str, kind: &str, name: &str, uid: &str, block: bool) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "blockOwnerDeletion": block, "controller": true})
}

fn obj(name: &str, uid: &str, owners: Vec<Value>) -> Value {
    json!({"metadata": {"name": name, "namespace": "ns", "uid": uid, "ownerReferences": owners}})
}

fn deleting(mut o: Value, finalizer: &str) -> Value {
    o["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
    o["metadata"]["finalizers"] = json!([finalizer]);
    o
}

fn d(uid: &str) -> Work {
    Work::Delete(uid.into())
}

/// A Deployment `dep`, its ReplicaSet `rs` and the ReplicaSet's pod `p1`, all observed.
fn family() -> (Graph, Value, Value, Value) {
    let mut g = Graph::default();
    let dep = obj("web", "dep", vec![]);
    let rs = obj("web-1", "rs", vec![owner("apps/v1", "Deployment", "web", "dep", true)]);
    let pod = obj("web-1-a", "p1", vec![owner("apps/v1", "ReplicaSet", "web-1", "rs", true)]);
    g.observe(spec("apps", "deployments"), Added, &dep);
    g.observe(spec("apps", "replicasets"), Added, &rs);
    g.observe(spec("", "pods"), Added, &pod);
    (g, dep, rs, pod)
}

#[test]
fn dependents_seen_before_their_owner_are_looked_at_then_settle() {
    let mut g = Graph::default();
    let pod = obj("p", "p1", vec![owner("apps/v1", "ReplicaSet", "rs", "rs1", true)]);
    assert_eq!(g.observe(spec("", "pods"), Added, &pod), vec![d("p1")]);
    assert_eq!(g.plan("p1"), Plan::Live);
    let rs = obj("rs", "rs1", vec![]);
    assert_eq!(g.observe(spec("apps", "replicasets"), Added, &rs), vec![d("p1")]);
    assert_eq!(g.plan("p1"), Plan::Nothing);
    // an unchanged update makes no work
    assert!(g.observe(spec("", "pods"), Modified, &pod).is_empty());
}

#[test]
fn a_reference_that_does_not_match_the_observed_owner_is_looked_up_live() {
    let (mut g, ..) = family();
    // same uid as the ReplicaSet, but another name: not that owner
    let pod = obj("p2", "p2", vec![owner("apps/v1", "ReplicaSet", "other", "rs", true)]);
    assert_eq!(g.observe(spec("", "pods"), Added, &pod), vec![d("p2")]);
    assert_eq!(g.plan("p2"), Plan::Live);
    assert_eq!(g.plan("p1"), Plan::Nothing);
}

#[test]
fn deleting_an_owner_queues_its_dependents_which_keep_naming_it() {
    let (mut g, _, rs, _) = family();
    assert_eq!(g.observe(spec("apps", "replicasets"), Deleted, &rs), vec![d("p1")]);
    assert_eq!(g.plan("p1"), Plan::Live);
    assert_eq!(g.dependents("rs").len(), 1);
}

#[test]
fn foreground_deletion_queues_dependents_and_finishes_when_no_blocker_is_left() {
    let (mut g, dep, rs, _) = family();
    let work = g.observe(spec("apps", "deployments"), Modified, &deleting(dep.clone(), "foregroundDeletion"));
    assert_eq!(work, vec![d("dep"), d("rs")]);
    assert_eq!(g.plan("dep"), Plan::DeletingDependents);
    // the ReplicaSet's owner waits: it is looked at live
    assert_eq!(g.plan("rs"), Plan::Live);
    assert_eq!(g.blocking_dependents("dep").len(), 1);
    // the ReplicaSet goes into foreground deletion itself, then away: the Deployment is looked at
    let work = g.observe(spec("apps", "replicasets"), Modified, &deleting(rs.clone(), "foregroundDeletion"));
    assert_eq!(work, vec![d("p1"), d("rs")]);
    assert_eq!(g.observe(spec("apps", "replicasets"), Deleted, &rs), vec![d("dep"), d("p1")]);
    assert!(g.blocking_dependents("dep").is_empty());
}

#[test]
fn a_dependent_that_stops_blocking_wakes_its_waiting_owner() {
    let (mut g, dep, _, _) = family();
    g.observe(spec("apps", "deployments"), Modified, &deleting(dep, "foregroundDeletion"));
    let rs = obj("web-1", "rs", vec![owner("apps/v1", "Deployment", "web", "dep", false)]);
    assert_eq!(g.observe(spec("apps", "replicasets"), Modified, &rs), vec![d("dep")]);
    assert!(g.blocking_dependents("dep").is_empty());
    assert_eq!(g.dependents("dep").len(), 1);
}

#[test]
fn orphaning_starts_once() {
    let (mut g, dep, _, _) = family();
    let marked = deleting(dep, "orphan");
    assert_eq!(g.observe(spec("apps", "deployments"), Modified, &marked), vec![Work::Orphan("dep".into())]);
    assert!(g.observe(spec("apps", "deployments"), Modified, &marked).is_empty());
    assert_eq!(g.plan("dep"), Plan::Nothing);
}

#[test]
fn relist_drops_nodes_missed_while_the_watch_was_cut_off() {
    let (mut g, _, rs, _) = family();
    let _ = rs;
    let work = g.relist(spec("apps", "replicasets"), &[]);
    assert_eq!(work, vec![d("p1")]);
    assert!(g.node("rs").is_none());
    // a relist holding the same objects changes nothing
    let pods = [Arc::new(obj("web-1-a", "p1", vec![owner("apps/v1", "ReplicaSet", "web-1", "rs", true)]))];
    assert!(g.relist(spec("", "pods"), &pods).is_empty());
    assert!(g.node("p1").is_some());
    assert_eq!(g.forget_resource(&spec("", "pods").key_prefix()), vec![]);
    assert!(g.node("p1").is_none());
}

#[test]
fn work_keys_round_trip() {
    for w in [d("a-b"), Work::Orphan("c".into())] {
        assert_eq!(Work::parse(&w.key()), Some(w));
    }
    assert_eq!(Work::parse("other"), None);
}
