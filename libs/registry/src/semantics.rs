//! kube-apiserver's per-kind registry semantics, in one table.
//!
//! kube decides these per kind, in each kind's `pkg/registry/<group>/<kind>/strategy.go` (status
//! reset, `AllowCreateOnUpdate`, `AllowUnconditionalUpdate`, generation) and
//! `storage/storage.go` (`ReturnDeletedObject`); the generic store
//! (`k8s.io/apiserver/pkg/registry/generic/registry/store.go`) applies them. Here the generic
//! store ([`crate::rest`]) and the [`crate::strategy::Strategy`] defaults read them from
//! [`ROWS`], so one place says what differs and tests can walk every served kind.
//!
//! Source of the rows: kubernetes/kubernetes `pkg/registry/*/*/strategy.go` and
//! `storage/storage.go` (the commits are listed in `docs/registry-semantics.md`), the
//! kube-aggregator's and apiextensions-apiserver's registries, and, for what DELETE declares,
//! kube's published OpenAPI (as the official Python client v37 is generated from it).

use serde_json::Value;

/// What a create does with the `status` the client sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusOnCreate {
    /// The kind has no status: nothing to do.
    NoStatus,
    /// Reset: the client may not set status on create (most kinds with a status). The value
    /// kube writes instead comes from [`crate::defaults::prepare_for_create`].
    Reset,
    /// Kept as sent: a kubelet registers its Node with capacity and conditions; ServiceCIDR's
    /// PrepareForCreate is a no-op.
    Kept,
}

/// When `metadata.generation` is set and bumped. Every kind's generic update first pins the new
/// object's generation to the stored one (`rest.BeforeUpdate`): clients never set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// Not touched on create (kube keeps what the client sent), pinned on update.
    Pinned,
    /// 1 on create, never bumped (PriorityClass).
    CreateOnly,
    /// 1 on create, +1 when `spec` changes.
    Spec,
    /// 1 on create, +1 when `spec` or `metadata.annotations` change (Deployment: rollbacks
    /// were once requested through an annotation).
    SpecOrAnnotations,
    /// 1 on create, +1 when this top-level field changes (webhook configurations: `webhooks`).
    Field(&'static str),
    /// 1 on create, +1 when anything outside `metadata` and `status` changes (custom resources
    /// with a status subresource).
    Content,
    /// 1 on create, +1 when anything outside `metadata` changes (custom resources without a
    /// status subresource: their status is ordinary content).
    ContentWithStatus,
    /// 1 on create, +1 when anything outside `metadata` or the labels change (EndpointSlice).
    ContentOrLabels,
}

impl Generation {
    /// Whether a create sets `metadata.generation` to 1.
    pub fn set_on_create(self) -> bool {
        self != Generation::Pinned
    }

    /// Whether an update from `old` to `new` bumps `metadata.generation`.
    pub fn bumps(self, new: &Value, old: &Value) -> bool {
        let meta = |v: &Value, f: &str| v.get("metadata").and_then(|m| m.get(f)).cloned();
        match self {
            Generation::Pinned | Generation::CreateOnly => false,
            Generation::Spec => new.get("spec") != old.get("spec"),
            Generation::SpecOrAnnotations => {
                new.get("spec") != old.get("spec") || meta(new, "annotations") != meta(old, "annotations")
            }
            Generation::Field(f) => new.get(f) != old.get(f),
            Generation::Content => content_changed(new, old, &["metadata", "status"]),
            Generation::ContentWithStatus => content_changed(new, old, &["metadata"]),
            Generation::ContentOrLabels => {
                content_changed(new, old, &["metadata"]) || meta(new, "labels") != meta(old, "labels")
            }
        }
    }
}

/// Whether any top-level field but `ignored` differs, compared in place without copies.
fn content_changed(new: &Value, old: &Value, ignored: &[&str]) -> bool {
    let (Some(new), Some(old)) = (new.as_object(), old.as_object()) else { return new != old };
    let counted = |(k, _): &(&String, &Value)| !ignored.contains(&k.as_str());
    new.iter().filter(counted).count() != old.iter().filter(counted).count()
        || new.iter().filter(counted).any(|(k, v)| old.get(k) != Some(v))
}

/// One kind's registry semantics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Semantics {
    /// API group (empty for core).
    pub group: &'static str,
    /// Plural resource name; every served version of the resource shares the row.
    pub resource: &'static str,
    /// What a create does with the client's status.
    pub status_on_create: StatusOnCreate,
    /// JSON pointers an update of the main resource takes from the stored object (`/status`
    /// for most kinds with a status; CSRs also keep `/spec`, Namespaces `/spec/finalizers`).
    pub kept_on_update: &'static [&'static str],
    /// `AllowCreateOnUpdate`: a PUT of a missing object creates it (201) instead of 404.
    pub allow_create_on_update: bool,
    /// `AllowUnconditionalUpdate`: a PUT without `metadata.resourceVersion` (or with "0")
    /// updates the latest object; otherwise kube answers 422 "must be specified for an update".
    pub allow_unconditional_update: bool,
    /// When `metadata.generation` is set and bumped.
    pub generation: Generation,
    /// `ReturnDeletedObject`: a DELETE that removes the object answers the object, not a
    /// `Status`. (A delete that only marks the object answers the object for every kind.)
    pub delete_returns_object: bool,
    /// What kube's OpenAPI declares as the DELETE answer: the object when true, `Status`
    /// otherwise. Only Namespaces differ from [`Semantics::delete_returns_object`]: their REST
    /// wrapper does not expose the store's `ReturnDeletedObject`.
    pub openapi_delete_returns_object: bool,
}

/// `/status`, what most kinds keep from the stored object on a main-resource update.
const STATUS: &[&str] = &["/status"];

/// A row with kube's most common answers: no status, no create on update, unconditional
/// updates allowed, generation pinned, DELETE answers a Status.
const fn row(group: &'static str, resource: &'static str) -> Semantics {
    Semantics {
        group,
        resource,
        status_on_create: StatusOnCreate::NoStatus,
        kept_on_update: &[],
        allow_create_on_update: false,
        allow_unconditional_update: true,
        generation: Generation::Pinned,
        delete_returns_object: false,
        openapi_delete_returns_object: false,
    }
}

impl Semantics {
    /// Status reset on create and kept from the stored object on update.
    const fn status(self) -> Self {
        Semantics { status_on_create: StatusOnCreate::Reset, kept_on_update: STATUS, ..self }
    }
    const fn keeps(self, kept_on_update: &'static [&'static str]) -> Self {
        Semantics { kept_on_update, ..self }
    }
    const fn status_kept_on_create(self) -> Self {
        Semantics { status_on_create: StatusOnCreate::Kept, ..self }
    }
    const fn create_on_update(self) -> Self {
        Semantics { allow_create_on_update: true, ..self }
    }
    /// `AllowUnconditionalUpdate` false: every PUT must name the resourceVersion it replaces.
    const fn conditional(self) -> Self {
        Semantics { allow_unconditional_update: false, ..self }
    }
    const fn generation(self, generation: Generation) -> Self {
        Semantics { generation, ..self }
    }
    const fn returns_deleted(self) -> Self {
        Semantics { delete_returns_object: true, openapi_delete_returns_object: true, ..self }
    }
}

use Generation::{ContentOrLabels, CreateOnly, Field, Spec, SpecOrAnnotations};

/// Every served built-in resource, keyed by group and resource.
pub static ROWS: &[Semantics] = &[
    row("", "componentstatuses"),
    row("", "configmaps"),
    row("", "endpoints").create_on_update(),
    row("", "events").create_on_update(),
    row("", "limitranges").create_on_update(),
    row("", "namespaces").status().keeps(&["/status", "/spec/finalizers"]).returns_deleted().openapi_status(),
    row("", "nodes").status().status_kept_on_create(),
    row("", "persistentvolumeclaims").status().returns_deleted(),
    row("", "persistentvolumes").status().returns_deleted(),
    row("", "pods").status().generation(Spec).returns_deleted(),
    row("", "podtemplates").returns_deleted(),
    row("", "replicationcontrollers").status().generation(Spec),
    row("", "resourcequotas").status().returns_deleted(),
    row("", "secrets"),
    row("", "serviceaccounts").returns_deleted(),
    row("", "services").status().create_on_update().returns_deleted(),
    row("apiregistration.k8s.io", "apiservices").status().conditional(),
    row("apps", "controllerrevisions"),
    row("apps", "daemonsets").status().generation(Spec),
    row("apps", "deployments").status().generation(SpecOrAnnotations),
    row("apps", "replicasets").status().generation(Spec),
    row("apps", "statefulsets").status().generation(Spec),
    row("events.k8s.io", "events").create_on_update(),
    row("autoscaling", "horizontalpodautoscalers").status().generation(Spec),
    row("batch", "cronjobs").status().generation(Spec),
    row("batch", "jobs").status().generation(Spec),
    row("certificates.k8s.io", "certificatesigningrequests").status().keeps(&["/status", "/spec"]),
    row("certificates.k8s.io", "clustertrustbundles").conditional(),
    row("certificates.k8s.io", "podcertificaterequests").status().conditional(),
    row("networking.k8s.io", "ingressclasses").generation(Spec),
    row("networking.k8s.io", "ingresses").status().generation(Spec),
    row("networking.k8s.io", "ipaddresses"),
    row("networking.k8s.io", "networkpolicies").generation(Spec),
    // PrepareForCreate and PrepareForUpdate are no-ops: status is only a reset field of apply.
    row("networking.k8s.io", "servicecidrs").status_kept_on_create(),
    row("policy", "poddisruptionbudgets").status().generation(Spec).conditional(),
    row("rbac.authorization.k8s.io", "clusterrolebindings").create_on_update(),
    row("rbac.authorization.k8s.io", "clusterroles").create_on_update(),
    row("rbac.authorization.k8s.io", "rolebindings").create_on_update(),
    row("rbac.authorization.k8s.io", "roles").create_on_update(),
    row("storage.k8s.io", "csidrivers").generation(Spec).conditional().returns_deleted(),
    row("storage.k8s.io", "csinodes").status().conditional().returns_deleted(),
    row("storage.k8s.io", "csistoragecapacities").conditional(),
    row("storage.k8s.io", "storageclasses").returns_deleted(),
    row("storage.k8s.io", "volumeattachments").status().conditional().returns_deleted(),
    row("storage.k8s.io", "volumeattributesclasses").returns_deleted(),
    row("admissionregistration.k8s.io", "mutatingadmissionpolicies").generation(Spec).conditional(),
    row("admissionregistration.k8s.io", "mutatingadmissionpolicybindings").generation(Spec).conditional(),
    row("admissionregistration.k8s.io", "mutatingwebhookconfigurations").generation(Field("webhooks")).conditional(),
    row("admissionregistration.k8s.io", "validatingadmissionpolicies").status().generation(Spec).conditional(),
    row("admissionregistration.k8s.io", "validatingadmissionpolicybindings").generation(Spec).conditional(),
    row("admissionregistration.k8s.io", "validatingwebhookconfigurations").generation(Field("webhooks")).conditional(),
    row("apiextensions.k8s.io", "customresourcedefinitions").status().generation(Spec),
    row("scheduling.k8s.io", "priorityclasses").generation(CreateOnly),
    row("coordination.k8s.io", "leases").create_on_update().conditional(),
    row("node.k8s.io", "runtimeclasses").create_on_update().conditional(),
    row("discovery.k8s.io", "endpointslices").generation(ContentOrLabels),
    row("flowcontrol.apiserver.k8s.io", "flowschemas").status().generation(Spec),
    row("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations").status().generation(Spec),
];

impl Semantics {
    /// Namespaces: the store answers the object, the published OpenAPI says `Status`.
    const fn openapi_status(self) -> Self {
        Semantics { openapi_delete_returns_object: false, ..self }
    }
}

/// Custom resources with a status subresource (apiextensions-apiserver's
/// `customresource/strategy.go` and `etcd.go`): status reset on create and kept on update,
/// generation bumped by anything outside metadata and status, unconditional updates allowed,
/// no create on update, DELETE answers a Status.
pub static CUSTOM_RESOURCE_WITH_STATUS: Semantics =
    row("", "").status().generation(Generation::Content);

/// Custom resources without a status subresource: status is content like any other field.
pub static CUSTOM_RESOURCE: Semantics = row("", "").generation(Generation::ContentWithStatus);

/// Resources the table does not list (virtual resources; kinds added to the catalog before
/// their row): kube's most common answers.
pub static UNLISTED: Semantics = row("", "");

/// The row of `group`/`resource`, or [`UNLISTED`].
pub fn lookup(group: &str, resource: &str) -> &'static Semantics {
    ROWS.iter().find(|s| s.group == group && s.resource == resource).unwrap_or(&UNLISTED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{self, Serving};
    use serde_json::json;

    #[test]
    fn every_stored_resource_has_one_row() {
        for spec in catalog::resources().iter().filter(|s| s.serving == Serving::Stored) {
            let n = ROWS.iter().filter(|r| r.group == spec.group && r.resource == spec.resource).count();
            assert_eq!(n, 1, "{}/{}", spec.group, spec.resource);
        }
        for row in ROWS {
            assert!(
                catalog::resources().iter().any(|s| s.group == row.group && s.resource == row.resource),
                "row {}/{} is not served",
                row.group,
                row.resource
            );
        }
    }

    #[test]
    fn status_rows_match_status_subresources() {
        for row in ROWS.iter().filter(|r| r.kept_on_update.contains(&"/status")) {
            let served = catalog::resources().iter().filter(|s| s.group == row.group && s.resource == row.resource);
            for spec in served {
                assert!(spec.has_subresource("status"), "{}/{} keeps a status it does not serve", row.group, row.resource);
            }
        }
    }

    #[test]
    fn kube_lists() {
        let returns: Vec<_> = ROWS.iter().filter(|r| r.delete_returns_object).map(|r| r.resource).collect();
        assert_eq!(
            returns,
            [
                "namespaces",
                "persistentvolumeclaims",
                "persistentvolumes",
                "pods",
                "podtemplates",
                "resourcequotas",
                "serviceaccounts",
                "services",
                "csidrivers",
                "csinodes",
                "storageclasses",
                "volumeattachments",
                "volumeattributesclasses"
            ]
        );
        assert!(lookup("coordination.k8s.io", "leases").allow_create_on_update);
        assert!(!lookup("coordination.k8s.io", "leases").allow_unconditional_update);
        assert_eq!(lookup("", "nodes").status_on_create, StatusOnCreate::Kept);
        assert_eq!(lookup("nope", "things"), &UNLISTED);
    }

    #[test]
    fn generation_rules() {
        let old = json!({"metadata": {"labels": {"a": "1"}, "annotations": {"x": "1"}}, "spec": {"r": 1}, "status": {"s": 1}});
        let mut annotated = old.clone();
        annotated["metadata"]["annotations"]["x"] = json!("2");
        let mut relabelled = old.clone();
        relabelled["metadata"]["labels"]["a"] = json!("2");
        let mut status = old.clone();
        status["status"]["s"] = json!(2);
        let mut spec = old.clone();
        spec["spec"]["r"] = json!(2);
        assert!(Spec.bumps(&spec, &old) && !Spec.bumps(&annotated, &old));
        assert!(SpecOrAnnotations.bumps(&annotated, &old) && !SpecOrAnnotations.bumps(&relabelled, &old));
        assert!(ContentOrLabels.bumps(&relabelled, &old) && ContentOrLabels.bumps(&status, &old));
        assert!(!Generation::Content.bumps(&status, &old) && Generation::ContentWithStatus.bumps(&status, &old));
        assert!(!CreateOnly.bumps(&spec, &old) && CreateOnly.set_on_create());
        assert!(!Generation::Pinned.set_on_create());
        assert!(Field("webhooks").bumps(&json!({"webhooks": []}), &json!({})));
    }
}
