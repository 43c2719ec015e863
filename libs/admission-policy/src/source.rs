//! What both policy plugins read: the watch caches of the RestStore (policies, bindings,
//! namespaces, params), the resources no API policy applies to, and compiled policies kept by
//! uid and revision.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kapi_admission::Attributes;
use kapi_registry::catalog;
use kapi_registry::rest::RestStore;
use serde_json::Value;

use crate::params::CacheReader;

pub(crate) const GROUP: &str = "admissionregistration.k8s.io";

/// Resources no API-defined policy applies to: the policies' own configuration (a policy
/// could otherwise lock itself in) and kube-apiserver's reviews that are never stored.
const EXEMPT: &[(&str, &str)] = &[
    (GROUP, "validatingadmissionpolicies"),
    (GROUP, "validatingadmissionpolicybindings"),
    (GROUP, "mutatingadmissionpolicies"),
    (GROUP, "mutatingadmissionpolicybindings"),
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authentication.k8s.io", "tokenreviews"),
    ("authorization.k8s.io", "localsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
];

/// Whether no API-defined policy applies to the request.
pub(crate) fn exempt(attrs: &Attributes) -> bool {
    EXEMPT.iter().any(|(g, r)| attrs.resource.group == *g && attrs.resource.name == *r)
}

/// The watch caches of one [`RestStore`].
pub(crate) struct Caches<'a>(pub &'a RestStore);

impl Caches<'_> {
    /// Every object of an admissionregistration resource, with its revision, in name order.
    pub(crate) fn list_all(&self, resource: &str) -> Vec<(u64, Arc<Value>)> {
        let Some(spec) = catalog::find(GROUP, "v1", resource) else { return Vec::new() };
        let prefix = spec.key_prefix();
        let Some(cache) = self.0.caches().cache(&prefix) else { return Vec::new() };
        cache.list(&prefix).0.into_iter().map(|o| (o.revision, o.object)).collect()
    }

    /// The Namespace of that name as cached (shared, not copied).
    pub(crate) fn namespace_shared(&self, name: &str) -> Option<Arc<Value>> {
        let prefix = catalog::find("", "v1", "namespaces")?.key_prefix();
        self.0.caches().cache(&prefix)?.get(&format!("{prefix}{name}")).map(|o| o.object)
    }

    /// Whether any object of an admissionregistration resource exists.
    pub(crate) fn any(&self, resource: &str) -> bool {
        let Some(spec) = catalog::find(GROUP, "v1", resource) else { return false };
        let prefix = spec.key_prefix();
        self.0.caches().cache(&prefix).is_some_and(|c| !c.list(&prefix).0.is_empty())
    }

    /// The Namespace of that name.
    pub(crate) fn namespace(&self, name: &str) -> Option<Value> {
        let prefix = catalog::find("", "v1", "namespaces")?.key_prefix();
        self.get(&prefix, &format!("{prefix}{name}"))
    }
}

impl CacheReader for Caches<'_> {
    fn has_cache(&self, prefix: &str) -> bool {
        self.0.caches().cache(prefix).is_some()
    }

    fn get(&self, prefix: &str, key: &str) -> Option<Value> {
        self.0.caches().cache(prefix)?.get(key).map(|o| (*o.object).clone())
    }

    fn list(&self, prefix: &str, key_prefix: &str) -> Vec<Value> {
        let Some(cache) = self.0.caches().cache(prefix) else { return Vec::new() };
        cache.list(key_prefix).0.into_iter().map(|o| (*o.object).clone()).collect()
    }
}

pub(crate) fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

pub(crate) fn present<'a>(v: &'a Value, pointer: &str) -> Option<&'a Value> {
    v.pointer(pointer).filter(|x| !x.is_null())
}

/// kube's `schema.GroupVersionKind` `%v` of a paramKind: `group/version, Kind=kind`.
pub(crate) fn gvk_string(param_kind: &Value) -> String {
    let api_version = text(param_kind, "/apiVersion");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    format!("{group}/{version}, Kind={}", text(param_kind, "/kind"))
}

/// What identifies one state of a listed cache: how many objects, and the newest revision
/// among them (any create, update or delete changes one or the other).
pub(crate) type Fingerprint = (usize, u64);

/// The fingerprint of a listing from [`Caches::list_all`].
pub(crate) fn fingerprint(items: &[(u64, Arc<Value>)]) -> Fingerprint {
    (items.len(), items.iter().map(|(r, _)| *r).max().unwrap_or(0))
}

/// Compiled policies by uid, each kept with the revision it was compiled at.
pub(crate) struct Compiled<T> {
    by_uid: Mutex<HashMap<String, (u64, Arc<T>)>>,
}

impl<T> Default for Compiled<T> {
    fn default() -> Self {
        Compiled { by_uid: Mutex::new(HashMap::new()) }
    }
}

impl<T> Compiled<T> {
    /// The compiled form of `policy` at `revision`, compiled now if this version is new.
    pub(crate) fn get(&self, policy: &Value, revision: u64, compile: impl FnOnce(&Value) -> T) -> Arc<T> {
        let uid = text(policy, "/metadata/uid").to_owned();
        let mut cache = self.by_uid.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((rev, c)) = cache.get(&uid) {
            if *rev == revision {
                return c.clone();
            }
        }
        let compiled = Arc::new(compile(policy));
        cache.insert(uid, (revision, compiled.clone()));
        compiled
    }

    /// Drops compiled policies that are gone.
    pub(crate) fn forget_missing(&self, policies: &[(u64, Arc<Value>)]) {
        let mut cache = self.by_uid.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() > policies.len() {
            cache.retain(|uid, _| policies.iter().any(|(_, p)| text(p, "/metadata/uid") == uid));
        }
    }
}
