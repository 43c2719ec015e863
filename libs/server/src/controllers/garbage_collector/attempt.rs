//! The collector's two kinds of work, as kube's `attemptToDeleteItem`,
//! `processDeletingDependentsItem` and `attemptToOrphanWorker` do them.
//!
//! The graph decides cheaply whether anything can be due; only then are the object and its
//! owners read live (the graph follows the caches and may lag; kube's GC reads live before
//! acting too), and the decision ([`verdict`]) is made on what the store holds.

use super::graph::{being_deleted, has_finalizer, owner_refs, str_at, Plan, Work, FOREGROUND, ORPHAN};
use super::ops::{remove_finalizer, remove_owner_refs, unblock_owner_refs, Failure, OwnerState};
use super::Collector;

/// What became of a piece of work.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Done {
    /// Finished; later events bring it back if needed.
    Forget,
    /// Look again after a pause: an owner exists but this replica has not seen it yet (kube
    /// requeues a virtual node until it is observed), so its deletion might not reach us.
    Requeue,
}

/// kube's decision for an object with ownerReferences, from how its owners stand.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Some owner exists and nothing is dangling: keep it.
    Keep,
    /// Some owner exists: drop the references to absent owners and to owners waiting for
    /// their dependents (those would otherwise wait for this object forever).
    RemoveRefs(Vec<String>),
    /// Its owners wait for their dependents and it has dependents itself: delete it in the
    /// foreground too, first unblocking its references when one of its dependents waits too
    /// (kube's cycle guard).
    DeleteForeground { unblock: bool },
    /// No owner exists: delete it with the policy its own finalizers ask for.
    Delete(&'static str),
}

/// kube's switch in `attemptToDeleteItem`. `refs` pairs each owner uid with its state.
pub(super) fn verdict(refs: &[(String, OwnerState)], has_dependents: bool, dependent_waits: bool, finalizers: (bool, bool)) -> Verdict {
    let of = |state: OwnerState| refs.iter().filter(move |(_, s)| *s == state).map(|(u, _)| u.clone());
    let solid = of(OwnerState::Solid).count();
    let waiting: Vec<String> = of(OwnerState::Waiting).collect();
    if solid > 0 {
        let drop: Vec<String> = of(OwnerState::Dangling).chain(waiting).collect();
        return if drop.is_empty() { Verdict::Keep } else { Verdict::RemoveRefs(drop) };
    }
    if !waiting.is_empty() && has_dependents {
        return Verdict::DeleteForeground { unblock: dependent_waits };
    }
    match finalizers {
        (true, _) => Verdict::Delete("Orphan"),
        (_, true) => Verdict::Delete("Foreground"),
        _ => Verdict::Delete("Background"),
    }
}

impl Collector {
    /// kube's `attemptToDeleteItem` for the object with `uid`.
    pub(super) async fn attempt_to_delete(&self, uid: &str) -> Result<Done, Failure> {
        let plan = self.graph().plan(uid);
        match plan {
            Plan::Nothing => Ok(Done::Forget),
            Plan::DeletingDependents => self.process_deleting_dependents(uid).await,
            Plan::Live => self.attempt_live(uid).await,
        }
    }

    async fn attempt_live(&self, uid: &str) -> Result<Done, Failure> {
        let Some(id) = self.graph().node(uid).map(|n| n.identity.clone()) else { return Ok(Done::Forget) };
        // Gone, or the name holds another object: the Deleted event brings the dependents.
        let Some(latest) = self.ops.get(&id).await? else { return Ok(Done::Forget) };
        if being_deleted(&latest) {
            if has_finalizer(&latest, FOREGROUND) {
                return self.process_deleting_dependents(uid).await;
            }
            // "being deleted" is a one-way trip: its Deleted event brings the dependents.
            return Ok(Done::Forget);
        }
        let refs = owner_refs(&latest);
        if refs.is_empty() {
            return Ok(Done::Forget);
        }
        let mut states = Vec::with_capacity(refs.len());
        let mut unseen_owner = false;
        for r in &refs {
            let state = self.ops.owner_state(&id, r).await?;
            if state != OwnerState::Dangling && self.graph().observed_owner(&id, r).is_none() {
                unseen_owner = true;
            }
            states.push((r.uid.clone(), state));
        }
        let (has_dependents, dependent_waits) = {
            let graph = self.graph();
            let deps = graph.dependents(uid);
            (!deps.is_empty(), deps.iter().any(|d| d.deleting_dependents))
        };
        let finalizers = (has_finalizer(&latest, ORPHAN), has_finalizer(&latest, FOREGROUND));
        let rv = str_at(&latest, "/metadata/resourceVersion").to_owned();
        match verdict(&states, has_dependents, dependent_waits, finalizers) {
            Verdict::Keep => return Ok(if unseen_owner { Done::Requeue } else { Done::Forget }),
            Verdict::RemoveRefs(uids) => {
                tracing::debug!(object = %id.name, "garbage collector: removing dangling ownerReferences {uids:?}");
                self.ops.update_meta(&id, |obj| remove_owner_refs(obj, &uids)).await?;
            }
            Verdict::DeleteForeground { unblock } => {
                if unblock {
                    self.ops.update_meta(&id, unblock_owner_refs).await?;
                }
                tracing::debug!(object = %id.name, "garbage collector: deleting in the foreground, its owners wait for it");
                self.ops.delete(&id, &rv, &refs, "Foreground").await?;
            }
            Verdict::Delete(policy) => {
                tracing::debug!(object = %id.name, policy, "garbage collector: deleting, no owner is left");
                self.ops.delete(&id, &rv, &refs, policy).await?;
            }
        }
        Ok(if unseen_owner { Done::Requeue } else { Done::Forget })
    }

    /// kube's `processDeletingDependentsItem`: an owner deleted in the foreground loses its
    /// `foregroundDeletion` finalizer once no dependent blocks it; until then its blocking
    /// dependents are looked at (each is deleted once it has no other live owner).
    async fn process_deleting_dependents(&self, uid: &str) -> Result<Done, Failure> {
        let (id, blocking) = {
            let graph = self.graph();
            let Some(node) = graph.node(uid) else { return Ok(Done::Forget) };
            let blocking: Vec<String> =
                graph.blocking_dependents(uid).into_iter().filter(|d| !d.deleting_dependents).map(|d| d.identity.uid.clone()).collect();
            let any = !graph.blocking_dependents(uid).is_empty();
            (node.identity.clone(), any.then_some(blocking))
        };
        match blocking {
            None => {
                tracing::debug!(object = %id.name, "garbage collector: no dependent blocks it; removing foregroundDeletion");
                self.ops.update_meta(&id, |obj| remove_finalizer(obj, FOREGROUND)).await?;
            }
            Some(deps) => {
                for dep in deps {
                    self.queue.add(Work::Delete(dep).key());
                }
            }
        }
        Ok(Done::Forget)
    }

    /// kube's `attemptToOrphanWorker`: the owner leaves every dependent's ownerReferences,
    /// then its `orphan` finalizer goes (and the store deletes it if nothing else holds it).
    pub(super) async fn attempt_to_orphan(&self, uid: &str) -> Result<Done, Failure> {
        let (id, dependents) = {
            let graph = self.graph();
            let Some(node) = graph.node(uid).filter(|n| n.orphaning) else { return Ok(Done::Forget) };
            (node.identity.clone(), graph.dependents(uid).into_iter().map(|d| d.identity.clone()).collect::<Vec<_>>())
        };
        let owner = [uid.to_owned()];
        let mut failed = None;
        for dep in &dependents {
            if let Err(e) = self.ops.update_meta(dep, |obj| remove_owner_refs(obj, &owner)).await {
                failed = Some(e);
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        tracing::debug!(object = %id.name, orphaned = dependents.len(), "garbage collector: dependents orphaned; removing the orphan finalizer");
        self.ops.update_meta(&id, |obj| remove_finalizer(obj, ORPHAN)).await?;
        Ok(Done::Forget)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(states: &[(&str, OwnerState)]) -> Vec<(String, OwnerState)> {
        states.iter().map(|(u, s)| (u.to_string(), *s)).collect()
    }

    #[test]
    fn solid_owner_keeps_the_object_and_sheds_dangling_and_waiting_references() {
        use OwnerState::*;
        assert_eq!(verdict(&refs(&[("a", Solid)]), false, false, (false, false)), Verdict::Keep);
        assert_eq!(
            verdict(&refs(&[("a", Solid), ("b", Dangling), ("c", Waiting)]), true, false, (false, false)),
            Verdict::RemoveRefs(vec!["b".into(), "c".into()])
        );
    }

    #[test]
    fn waiting_owner_deletes_in_foreground_only_objects_with_dependents() {
        use OwnerState::*;
        assert_eq!(verdict(&refs(&[("a", Waiting)]), true, false, (false, false)), Verdict::DeleteForeground { unblock: false });
        assert_eq!(verdict(&refs(&[("a", Waiting), ("b", Dangling)]), true, true, (false, false)), Verdict::DeleteForeground { unblock: true });
        assert_eq!(verdict(&refs(&[("a", Waiting)]), false, false, (false, false)), Verdict::Delete("Background"));
    }

    #[test]
    fn ownerless_object_honours_its_own_finalizers() {
        use OwnerState::*;
        assert_eq!(verdict(&refs(&[("a", Dangling)]), true, false, (false, false)), Verdict::Delete("Background"));
        assert_eq!(verdict(&refs(&[("a", Dangling)]), true, false, (true, false)), Verdict::Delete("Orphan"));
        assert_eq!(verdict(&refs(&[("a", Dangling)]), true, false, (false, true)), Verdict::Delete("Foreground"));
    }
}
