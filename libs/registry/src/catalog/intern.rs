//! Resource specs made at run time (custom resources) with the `'static` lifetime of the
//! built-in table, so that routing, discovery, strategies and the generic store take one type
//! for every kind.
//!
//! Values are interned: each distinct string, list and spec is leaked once and shared by every
//! later request for an equal value. Memory is therefore bounded by the distinct definitions a
//! process has ever served (a few hundred bytes per custom resource version), not by how often
//! they are rebuilt: a CRD updated a thousand times with the same names costs nothing more, and
//! one deleted and recreated under the same names reuses its entry. Only a stream of ever-new
//! names grows it.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::{Mutex, OnceLock};

use super::{ResourceSpec, SubresourceSpec};

/// One interning table: values leaked once, found again by equality.
struct Table<T: ?Sized + 'static> {
    values: OnceLock<Mutex<HashSet<&'static T>>>,
}

impl<T: ?Sized + Eq + Hash + 'static> Table<T> {
    const fn new() -> Self {
        Table { values: OnceLock::new() }
    }

    fn get_or_leak(&self, value: &T, leak: impl FnOnce() -> &'static T) -> &'static T {
        let mut set = self.values.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = set.get(value) {
            return found;
        }
        let leaked = leak();
        set.insert(leaked);
        leaked
    }
}

static STRINGS: Table<str> = Table::new();
static STRING_LISTS: Table<[&'static str]> = Table::new();
static SUBRESOURCE_LISTS: Table<[SubresourceSpec]> = Table::new();
static SPECS: Table<ResourceSpec> = Table::new();

/// The shared `'static` copy of `s`.
pub fn string(s: &str) -> &'static str {
    STRINGS.get_or_leak(s, || Box::leak(s.to_owned().into_boxed_str()))
}

/// The shared `'static` copy of a list of strings (verbs, short names, categories).
pub fn strings<S: AsRef<str>>(items: &[S]) -> &'static [&'static str] {
    let interned: Vec<&'static str> = items.iter().map(|s| string(s.as_ref())).collect();
    STRING_LISTS.get_or_leak(&interned, || Box::leak(interned.clone().into_boxed_slice()))
}

/// The shared `'static` copy of a list of subresources.
pub fn subresources(items: Vec<SubresourceSpec>) -> &'static [SubresourceSpec] {
    SUBRESOURCE_LISTS.get_or_leak(&items, || Box::leak(items.clone().into_boxed_slice()))
}

/// The shared `'static` copy of `spec` (whose strings and lists are interned already).
pub fn spec(spec: ResourceSpec) -> &'static ResourceSpec {
    SPECS.get_or_leak(&spec, || Box::leak(Box::new(spec)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Serving;

    fn widget(kind: &str) -> ResourceSpec {
        ResourceSpec {
            group: string("example.com"),
            version: string("v1"),
            resource: string("widgets"),
            kind: string(kind),
            singular: string("widget"),
            namespaced: true,
            verbs: strings(&["get", "list"]),
            short_names: strings::<&str>(&[]),
            categories: strings(&["all"]),
            subresources: subresources(vec![SubresourceSpec { name: "status", kind: string(kind), group: None, version: None, verbs: &["get"] }]),
            serving: Serving::Stored,
            tracks_generation: true,
            field_selectors: strings::<&str>(&[]),
            storage_group: string("example.com"),
        }
    }

    #[test]
    fn equal_values_are_leaked_once() {
        let a = spec(widget("Widget"));
        let b = spec(widget("Widget"));
        assert!(std::ptr::eq(a, b), "an equal spec is the same allocation");
        assert!(std::ptr::eq(string("Widget"), a.kind));
        let c = spec(widget("Gadget"));
        assert!(!std::ptr::eq(a, c));
        assert_eq!(c.subresources[0].kind, "Gadget");
        assert!(std::ptr::eq(strings(&["get", "list"]), a.verbs));
    }
}
