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
    /// Offered only the events whose object has (or had) the value.
    by_value: HashMap<WatchIndex, Vec<Entry>>,
    /// Where each indexed watcher is filed, for removal by id.
    filed: HashMap<u64, WatchIndex>,
    /// The indexed fields in use (a handful at most); kept after their last watcher goes.
    pointers: Vec<&'static str>,
}

impl Watchers {
    pub(crate) fn len(&self) -> usize {
        self.all.len() + self.filed.len()
    }

    pub(crate) fn push(&mut self, entry: Entry, index: Option<WatchIndex>) {
        match index {
            None => self.all.push(entry),
            Some(index) => {
                if !self.pointers.contains(&index.pointer) {
                    self.pointers.push(index.pointer);
                }
                self.filed.insert(entry.id, index.clone());
                self.by_value.entry(index).or_default().push(entry);
            }
        }
    }

    pub(crate) fn find(&self, id: u64) -> Option<&Entry> {
        match self.filed.get(&id) {
            Some(index) => self.by_value.get(index)?.iter().find(|w| w.id == id),
            None => self.all.iter().find(|w| w.id == id),
        }
    }

    pub(crate) fn remove(&mut self, id: u64) {
        match self.filed.remove(&id) {
            Some(index) => {
                if let Some(entries) = self.by_value.get_mut(&index) {
                    entries.retain(|w| w.id != id);
                    if entries.is_empty() {
                        self.by_value.remove(&index);
                    }
                }
            }
            None => self.all.retain(|w| w.id != id),
        }
    }

    /// Every watcher, leaving none.
    pub(crate) fn take(&mut self) -> Vec<Entry> {
        self.filed.clear();
        let mut all = std::mem::take(&mut self.all);
        all.extend(std::mem::take(&mut self.by_value).into_values().flatten());
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
        if self.filed.is_empty() {
            return;
        }
        let mut dropped = Vec::new();
        for &pointer in &self.pointers {
            let new = value_of(&event.object, pointer);
            let old = event.prev_object.as_deref().map(|o| value_of(o, pointer));
            for value in std::iter::once(new).chain(old.filter(|old| *old != new)) {
                let index = WatchIndex { pointer, value: value.to_owned() };
                let Some(entries) = self.by_value.get_mut(&index) else { continue };
                entries.retain(|w| {
                    let kept = keep(w);
                    if !kept {
                        dropped.push(w.id);
                    }
                    kept
                });
                if entries.is_empty() {
                    self.by_value.remove(&index);
                }
            }
        }
        for id in dropped {
            self.filed.remove(&id);
        }
    }
}
