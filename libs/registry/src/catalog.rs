//! Every resource kapi serves: the single source for routing, discovery and storage keys.
//!
//! The data mirrors kube-apiserver's discovery documents (see `tests/discovery_reference.rs`,
//! which compares it with the reference JSON): core `v1` plus the GA versions of the built-in
//! named groups. Alpha and beta versions, `resource.k8s.io` and `storagemigration.k8s.io` are
//! not served.
//!
//! Known gaps, kept on purpose for now:
//! - core `events` and `events.k8s.io` `events` are one store in kube-apiserver; here each keeps
//!   its own storage group, so an Event written through one API is not visible through the other.
//! - `componentstatuses` is marked [`Serving::Stored`]: kube-apiserver computes it from health
//!   probes; nothing here does that yet, so it lists whatever storage holds (nothing).
//! - `pods/resize` is absent because the reference `api__v1.json` does not list it.

pub mod intern;
mod table;

/// A subresource as discovery lists it (`pods/status`, `deployments/scale`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SubresourceSpec {
    /// Path segment after the object name.
    pub name: &'static str,
    /// Kind of the request and response body.
    pub kind: &'static str,
    /// Group of `kind` when it is not the parent's group (`deployments/scale` answers an
    /// `autoscaling/v1` Scale); `None` means the parent's group.
    pub group: Option<&'static str>,
    /// Version of `kind` when it is not the parent's version; `None` means the parent's.
    pub version: Option<&'static str>,
    /// Verbs discovery advertises for the subresource.
    pub verbs: &'static [&'static str],
}

/// How a resource's requests are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Serving {
    /// Objects kept in storage by the generic REST store.
    Stored,
    /// Create-only virtual resources whose answer is computed (tokenreviews, *accessreviews,
    /// selfsubjectreviews, bindings): not stored.
    Virtual,
}

/// One served resource in one group version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResourceSpec {
    /// API group; empty for the core group.
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Plural resource name used in URLs.
    pub resource: &'static str,
    /// Kind of the objects.
    pub kind: &'static str,
    /// Singular name (kubectl resolves it).
    pub singular: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Verbs discovery advertises; routing rejects the others with 405.
    pub verbs: &'static [&'static str],
    /// kubectl short names (`po`, `deploy`).
    pub short_names: &'static [&'static str],
    /// Categories (`all`, `api-extensions`) kubectl expands.
    pub categories: &'static [&'static str],
    /// Subresources in discovery order.
    pub subresources: &'static [SubresourceSpec],
    /// Whether the generic store keeps the objects.
    pub serving: Serving,
    /// metadata.generation is set to 1 on create and bumped on spec changes (kube's strategies
    /// do this for deployments, replicasets, statefulsets, daemonsets, jobs, cronjobs, pods,
    /// ingresses, networkpolicies, pdbs, hpas, CRDs, ... — check each strategy's PrepareForCreate).
    pub tracks_generation: bool,
    /// Field selector labels this kind supports besides metadata.name / metadata.namespace.
    pub field_selectors: &'static [&'static str],
    /// Group whose storage holds the objects (usually `group`; document any exception).
    ///
    /// Empty for the core group ([`ResourceSpec::key_prefix`] writes it as `core`). Both
    /// `autoscaling` versions of horizontalpodautoscalers share `autoscaling`, so v1 and v2
    /// read the same objects; conversion between them is done elsewhere.
    pub storage_group: &'static str,
}

impl ResourceSpec {
    /// Whether discovery lists `<resource>/<name>`.
    pub fn has_subresource(&self, name: &str) -> bool {
        self.subresource(name).is_some()
    }

    /// The subresource called `name`, for its kind and verbs.
    pub fn subresource(&self, name: &str) -> Option<&'static SubresourceSpec> {
        self.subresources.iter().find(|s| s.name == name)
    }

    /// The `apiVersion` written into objects: `v1` for core, `<group>/<version>` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Storage key prefix for this resource: "/registry/<storage_group or 'core'>/<resource>/".
    pub fn key_prefix(&self) -> String {
        let group = if self.storage_group.is_empty() { "core" } else { self.storage_group };
        format!("/registry/{group}/{}/", self.resource)
    }

    /// Whether the resource itself (not a subresource) answers `verb`.
    pub fn supports(&self, verb: &str) -> bool {
        self.verbs.contains(&verb)
    }
}

/// A served named group and its served versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupSpec {
    /// Group name.
    pub name: &'static str,
    /// Served versions, preferred first (the order `/apis` lists them in).
    pub versions: &'static [&'static str],
}

/// Every served resource: core first, then named groups in [`groups`] order.
pub fn resources() -> &'static [ResourceSpec] {
    table::RESOURCES
}

/// Named groups in the order of the reference /apis document (served ones only).
pub fn groups() -> &'static [GroupSpec] {
    table::GROUPS
}

/// The resource served at `/apis/<group>/<version>/<resource>` (core: empty group).
pub fn find(group: &str, version: &str, resource: &str) -> Option<&'static ResourceSpec> {
    resources().iter().find(|r| r.group == group && r.version == version && r.resource == resource)
}

/// The resource whose objects have `kind` in `group`/`version`.
pub fn find_kind(group: &str, version: &str, kind: &str) -> Option<&'static ResourceSpec> {
    resources().iter().find(|r| r.group == group && r.version == version && r.kind == kind)
}

/// The resources of one group version, in discovery order.
pub fn resources_in(group: &str, version: &str) -> impl Iterator<Item = &'static ResourceSpec> {
    let group = group.to_owned();
    let version = version.to_owned();
    resources().iter().filter(move |r| r.group == group && r.version == version)
}

/// Resolves a short name or singular (for kubectl-like lookups in tests/tools).
///
/// Plural names, singular names and short names all match, case-insensitively; an optional
/// `.<group>` suffix (`deployments.apps`, `hpa.autoscaling`) narrows the group. When several
/// versions serve the resource, the group's preferred version wins; core wins over named
/// groups (so `events` is core events, as kubectl resolves it).
pub fn resolve(name: &str) -> Option<&'static ResourceSpec> {
    let lower = name.to_ascii_lowercase();
    let (name, group) = match lower.split_once('.') {
        Some((n, g)) => (n, Some(g)),
        None => (lower.as_str(), None),
    };
    let matches = |r: &&'static ResourceSpec| {
        group.is_none_or(|g| r.group == g)
            && (r.resource == name || r.singular == name || r.short_names.contains(&name))
            && is_preferred(r)
    };
    resources().iter().find(matches)
}

/// Whether `spec` is in its group's preferred version (core has only `v1`).
fn is_preferred(spec: &ResourceSpec) -> bool {
    if spec.group.is_empty() {
        return true;
    }
    groups().iter().find(|g| g.name == spec.group).and_then(|g| g.versions.first()) == Some(&spec.version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_and_named_keys_and_versions() {
        let pods = find("", "v1", "pods").expect("pods");
        assert_eq!(pods.api_version(), "v1");
        assert_eq!(pods.key_prefix(), "/registry/core/pods/");
        assert!(pods.namespaced && pods.tracks_generation);
        let deploy = find("apps", "v1", "deployments").expect("deployments");
        assert_eq!(deploy.api_version(), "apps/v1");
        assert_eq!(deploy.key_prefix(), "/registry/apps/deployments/");
        let scale = deploy.subresource("scale").expect("scale");
        assert_eq!((scale.group, scale.version, scale.kind), (Some("autoscaling"), Some("v1"), "Scale"));
        assert!(deploy.has_subresource("status"));
        assert!(!deploy.has_subresource("log"));
    }

    #[test]
    fn hpa_versions_share_storage() {
        let v1 = find("autoscaling", "v1", "horizontalpodautoscalers").expect("v1");
        let v2 = find("autoscaling", "v2", "horizontalpodautoscalers").expect("v2");
        assert_eq!(v1.key_prefix(), v2.key_prefix());
        assert_eq!(v1.key_prefix(), "/registry/autoscaling/horizontalpodautoscalers/");
        let g = groups().iter().find(|g| g.name == "autoscaling").expect("autoscaling");
        assert_eq!(g.versions, &["v2", "v1"]);
    }

    #[test]
    fn both_event_apis_share_core_storage() {
        let core = find("", "v1", "events").expect("core events");
        let new = find("events.k8s.io", "v1", "events").expect("events.k8s.io");
        assert_eq!(core.key_prefix(), new.key_prefix());
        assert_eq!(new.key_prefix(), "/registry/core/events/");
    }

    #[test]
    fn virtual_resources_are_create_only() {
        let virtuals: Vec<_> = resources().iter().filter(|r| r.serving == Serving::Virtual).collect();
        assert_eq!(virtuals.len(), 7);
        for r in virtuals {
            assert_eq!(r.verbs, &["create"], "{}", r.resource);
            assert!(!r.supports("get"));
        }
        assert!(find("authorization.k8s.io", "v1", "selfsubjectaccessreviews").is_some_and(|r| r.supports("create")));
    }

    #[test]
    fn find_kind_and_unknowns() {
        assert_eq!(find_kind("batch", "v1", "CronJob").map(|r| r.resource), Some("cronjobs"));
        assert_eq!(find_kind("", "v1", "Namespace").map(|r| r.namespaced), Some(false));
        assert!(find("apps", "v1beta1", "deployments").is_none());
        assert!(find("resource.k8s.io", "v1", "resourceclaims").is_none());
        assert!(find_kind("apps", "v1", "Scale").is_none());
    }

    #[test]
    fn resources_in_lists_one_group_version_sorted() {
        let names: Vec<_> = resources_in("apps", "v1").map(|r| r.resource).collect();
        assert_eq!(names, ["controllerrevisions", "daemonsets", "deployments", "replicasets", "statefulsets"]);
        assert_eq!(resources_in("autoscaling", "v2").count(), 1);
        assert_eq!(resources_in("nope", "v1").count(), 0);
    }

    #[test]
    fn resolve_short_singular_and_grouped_names() {
        assert_eq!(resolve("po").map(|r| r.resource), Some("pods"));
        assert_eq!(resolve("Deployment").map(|r| r.resource), Some("deployments"));
        assert_eq!(resolve("hpa").map(|r| r.version), Some("v2"));
        assert_eq!(resolve("ev").map(|r| r.group), Some(""));
        assert_eq!(resolve("events.events.k8s.io").map(|r| r.group), Some("events.k8s.io"));
        assert_eq!(resolve("crd").map(|r| r.kind), Some("CustomResourceDefinition"));
        assert!(resolve("nosuchthing").is_none());
    }

    #[test]
    fn every_group_has_resources_and_no_duplicates() {
        for g in groups() {
            for v in g.versions {
                assert!(resources_in(g.name, v).count() > 0, "{}/{v}", g.name);
            }
        }
        for (i, a) in resources().iter().enumerate() {
            for b in &resources()[i + 1..] {
                assert!(
                    (a.group, a.version, a.resource) != (b.group, b.version, b.resource),
                    "duplicate {}/{}",
                    a.group,
                    a.resource
                );
            }
            if a.group.is_empty() {
                assert_eq!(a.version, "v1");
            } else {
                assert!(groups().iter().any(|g| g.name == a.group && g.versions.contains(&a.version)));
            }
        }
    }

    #[test]
    fn generation_tracking_follows_kube_strategies() {
        for (g, r) in [("apps", "deployments"), ("batch", "jobs"), ("apiextensions.k8s.io", "customresourcedefinitions")] {
            assert!(find(g, "v1", r).is_some_and(|s| s.tracks_generation), "{r}");
        }
        for (g, r) in [("", "configmaps"), ("", "services"), ("rbac.authorization.k8s.io", "roles")] {
            assert!(find(g, "v1", r).is_some_and(|s| !s.tracks_generation), "{r}");
        }
    }
}
