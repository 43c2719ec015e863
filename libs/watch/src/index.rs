//! The watchers of one cache, indexed: kube's watch cache indexes watchers by a trigger field
//! (pods by `spec.nodeName`), so that an event is matched against the kubelet of its node and
//! not against every kubelet. Here a watcher whose selector pins one string field to a value
//! (`spec.nodeName=<node>`, `metadata.name=<name>`) is filed under that value; an event is
//! offered to the unindexed watchers and to those filed under its object's old or new value of
//! each indexed field. Every watcher still applies its whole filter: the index only skips the
//! ones that cannot match.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::event::CachedEvent;
use crate::watcher::Entry;

/// A watcher's place in the index: the string field its selector pins, as a JSON pointer
/// (`/spec/nodeName`), and the value it requires. An absent or non-string field reads as "",
/// as field selectors read it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WatchIndex {
    /// JSON pointer of the field.
    pub pointer: &'static str,
    /// The value the watcher's selector requires.
    pub value: String,
}

/// Reads the indexed field of `obj` as field selectors read it.
fn value_of<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

#[derive(Default)]
pub(crate) struct Watchers {
    /// Tested against every event.
    all: Vec<Entry>,
    /// By indexed field (a handful at most), then by value: offered only the events whose
    /// object has (or had) the value.
    by_field: HashMap<&'static str, HashMap<String, Vec<Entry>>>,
    /// Where each indexed watcher is filed, for removal by id.
    filed: HashMap<u64, WatchIndex>,
}

impl Watchers {
    pub(crate) fn len(&self) -> usize {
        self.all.len() + self.filed.len()
    }

    pub(crate) fn push(&mut self, entry: Entry, index: Option<WatchIndex>) {
        match index {
            None => self.all.push(entry),
            Some(index) => {
                let id = entry.id;
                self.by_field.entry(index.pointer).or_default().entry(index.value.clone()).or_default().push(entry);
                self.filed.insert(id, index);
            }
        }
    }

    fn filed_under(&self, index: &WatchIndex) -> Option<&Vec<Entry>> {
        self.by_field.get(index.pointer)?.get(&index.value)
    }

    pub(crate) fn find(&self, id: u64) -> Option<&Entry> {
        match self.filed.get(&id) {
            Some(index) => self.filed_under(index)?.iter().find(|w| w.id == id),
            None => self.all.iter().find(|w| w.id == id),
        }
    }

    pub(crate) fn remove(&mut self, id: u64) {
        let Some(index) = self.filed.remove(&id) else {
            self.all.retain(|w| w.id != id);
            return;
        };
        if let Some(values) = self.by_field.get_mut(index.pointer) {
            if let Some(entries) = values.get_mut(&index.value) {
                entries.retain(|w| w.id != id);
                if entries.is_empty() {
                    values.remove(&index.value);
                }
            }
        }
    }

    /// Every watcher, leaving none.
    pub(crate) fn take(&mut self) -> Vec<Entry> {
        self.filed.clear();
        let mut all = std::mem::take(&mut self.all);
        all.extend(std::mem::take(&mut self.by_field).into_values().flat_map(HashMap::into_values).flatten());
        all
    }

    /// Offers `event` to every watcher it may concern; a watcher whose queue is full or whose
    /// receiver is gone is dropped.
    pub(crate) fn dispatch(&mut self, event: &Arc<CachedEvent>) {
        let keep = |w: &Entry| match w.item_for(event) {
            Some(item) => w.offer(item),
            None => true,
        };
        self.all.retain(keep);
        let mut dropped = Vec::new();
        for (pointer, values) in &mut self.by_field {
            let new = value_of(&event.object, pointer);
            let old = event.prev_object.as_deref().map(|o| value_of(o, pointer));
            for value in std::iter::once(new).chain(old.filter(|old| *old != new)) {
                let Some(entries) = values.get_mut(value) else { continue };
                entries.retain(|w| {
                    let kept = keep(w);
                    if !kept {
                        dropped.push(w.id);
                    }
                    kept
                });
                if entries.is_empty() {
                    values.remove(value);
                }
            }
        }
        for id in dropped {
            self.filed.remove(&id);
        }
    }
}
