//! What the extensions tier serves at one moment: a snapshot built from the stored CRDs,
//! swapped whole when a CRD changes. Entries of unchanged CRDs (same resourceVersion) are
//! reused, so a burst of CRD writes parses each schema once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use kapi_apiextensions::printer::TableConvertor;
use kapi_apiextensions::cel::CelValidator;
use kapi_apiextensions::schema::Structural;
use kapi_registry::catalog::{intern, ResourceSpec, Serving, SubresourceSpec};
use kapi_registry::rest::RestStore;
use kapi_server::scope::ResourceScope;
use kapi_server::tier::{ServedGroup, CUSTOM_GROUP_ORDER};
use serde_json::Value;

use crate::crd::{is_true, str_at, strings_at, ESTABLISHED};
use crate::conversion::Webhook;
use crate::custom::{pointer, selectable_fields, CustomScope, CustomStrategy, ScalePaths};

/// Verbs of every custom resource, in kube's discovery order.
const VERBS: &[&str] = &["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"];
/// Verbs of the status and scale subresources.
const SUBRESOURCE_VERBS: &[&str] = &["get", "patch", "update"];

/// One served CRD.
pub struct CrdEntry {
    resource_version: String,
    /// Storage key prefix of its objects.
    pub prefix: String,
    group: String,
    /// (version, served spec, scope) per served version.
    versions: Vec<(String, &'static ResourceSpec, Arc<dyn ResourceScope>)>,
}

/// The served CRDs and the indexes routing and discovery read.
#[derive(Default)]
pub struct Served {
    crds: HashMap<String, Arc<CrdEntry>>,
    scopes: HashMap<(String, String, String), Arc<dyn ResourceScope>>,
    groups: Vec<ServedGroup>,
    resources: HashMap<(String, String), Vec<&'static ResourceSpec>>,
}

impl Served {
    /// The snapshot for `crds` (every stored CRD), reusing `previous` entries that did not
    /// change. CRDs that are not Established are not served; CRDs whose schema cannot be read
    /// are skipped with a log line (validation keeps such CRDs out of storage).
    pub fn build(previous: &Served, crds: &[Arc<Value>], rest: &RestStore) -> Served {
        let mut served = Served::default();
        for crd in crds {
            let name = str_at(crd, "/metadata/name");
            let rv = str_at(crd, "/metadata/resourceVersion");
            if let Some(entry) = previous.crds.get(name).filter(|e| e.resource_version == rv) {
                served.crds.insert(name.to_owned(), entry.clone());
                continue;
            }
            match entry(crd, rest) {
                Ok(Some(entry)) => {
                    served.crds.insert(name.to_owned(), Arc::new(entry));
                }
                Ok(None) => {}
                Err(e) => tracing::error!(crd = name, "not serving the custom resource: {e}"),
            }
        }
        served.index();
        served
    }

    fn index(&mut self) {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for entry in self.crds.values() {
            for (version, spec, scope) in &entry.versions {
                let key = (entry.group.clone(), version.clone(), spec.resource.to_owned());
                self.scopes.insert(key, scope.clone());
                self.resources.entry((entry.group.clone(), version.clone())).or_default().push(spec);
                let versions = groups.entry(entry.group.clone()).or_default();
                if !versions.contains(version) {
                    versions.push(version.clone());
                }
            }
        }
        for specs in self.resources.values_mut() {
            specs.sort_by_key(|s| s.resource);
        }
        self.groups = groups
            .into_iter()
            .map(|(name, mut versions)| {
                versions.sort_by(|a, b| kapi_apimachinery::version_order::compare(a, b));
                ServedGroup { name, versions, order: CUSTOM_GROUP_ORDER }
            })
            .collect();
    }

    /// The storage prefixes of the served CRDs (one watch cache each).
    pub fn prefixes(&self) -> HashSet<String> {
        self.crds.values().map(|e| e.prefix.clone()).collect()
    }

    /// The served groups.
    pub fn groups(&self) -> &[ServedGroup] {
        &self.groups
    }

    /// The resources of one group version.
    pub fn resources_in(&self, group: &str, version: &str) -> Vec<&'static ResourceSpec> {
        self.resources.get(&(group.to_owned(), version.to_owned())).cloned().unwrap_or_default()
    }

    /// The scope of a served resource.
    pub fn scope(&self, group: &str, version: &str, resource: &str) -> Option<Arc<dyn ResourceScope>> {
        self.scopes.get(&(group.to_owned(), version.to_owned(), resource.to_owned())).cloned()
    }

    /// Whether the CRD called `name` is served.
    pub fn serves(&self, name: &str) -> bool {
        self.crds.contains_key(name)
    }

    /// The entry of the CRD called `name`.
    pub fn entry(&self, name: &str) -> Option<&Arc<CrdEntry>> {
        self.crds.get(name)
    }
}

impl CrdEntry {
    /// The scope of the CRD's storage version's strategy, for the controllers' deletes.
    pub fn any_scope(&self) -> Option<&Arc<dyn ResourceScope>> {
        self.versions.first().map(|(_, _, scope)| scope)
    }
}

/// The served spec of one version.
fn spec_of(crd: &Value, version: &Value, selectable: &[String]) -> &'static ResourceSpec {
    let group = str_at(crd, "/spec/group");
    let kind = str_at(crd, "/status/acceptedNames/kind");
    let mut subresources = Vec::new();
    if version.pointer("/subresources/status").is_some_and(|s| !s.is_null()) {
        subresources.push(SubresourceSpec { name: "status", kind: intern::string(kind), group: None, version: None, verbs: intern::strings(SUBRESOURCE_VERBS) });
    }
    if version.pointer("/subresources/scale").is_some_and(|s| !s.is_null()) {
        subresources.push(SubresourceSpec {
            name: "scale",
            kind: "Scale",
            group: Some("autoscaling"),
            version: Some("v1"),
            verbs: intern::strings(SUBRESOURCE_VERBS),
        });
    }
    intern::spec(ResourceSpec {
        group: intern::string(group),
        version: intern::string(str_at(version, "/name")),
        resource: intern::string(str_at(crd, "/status/acceptedNames/plural")),
        kind: intern::string(kind),
        singular: intern::string(str_at(crd, "/status/acceptedNames/singular")),
        namespaced: str_at(crd, "/spec/scope") == "Namespaced",
        verbs: intern::strings(VERBS),
        short_names: intern::strings(&strings_at(crd, "/status/acceptedNames/shortNames")),
        categories: intern::strings(&strings_at(crd, "/status/acceptedNames/categories")),
        subresources: intern::subresources(subresources),
        serving: Serving::Stored,
        tracks_generation: true,
        field_selectors: intern::strings(selectable),
        storage_group: intern::string(group),
    })
}

fn schema_of(version: &Value) -> Result<Option<Arc<Structural>>, String> {
    match version.pointer("/schema/openAPIV3Schema") {
        Some(s) if !s.is_null() => Ok(Some(Arc::new(Structural::new(s)?))),
        _ => Ok(None),
    }
}

/// The entry of one CRD, or None when it is not Established.
fn entry(crd: &Value, rest: &RestStore) -> Result<Option<CrdEntry>, String> {
    if !is_true(crd, ESTABLISHED) {
        return Ok(None);
    }
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array).cloned().unwrap_or_default();
    let storage = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .ok_or("no storage version")?;
    let storage_fields = selectable_fields(storage.get("selectableFields"));
    let storage_names: Vec<String> = storage_fields.iter().map(|(n, _)| n.clone()).collect();
    let storage_spec = spec_of(crd, storage, &storage_names);
    let schema = schema_of(storage)?;
    let cel = schema.as_deref().map(CelValidator::new).filter(|c| !c.is_empty()).map(Arc::new);
    let strategy = Arc::new(CustomStrategy { spec: storage_spec, schema, selectable: storage_fields, cel });
    let terminating = crd.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
    let webhook = match str_at(crd, "/spec/conversion/strategy") {
        "Webhook" => Some(Arc::new(Webhook::new(crd, rest.clone())?)),
        _ => None,
    };
    let mut served = Vec::new();
    for version in versions.iter().filter(|v| v.get("served").and_then(Value::as_bool) == Some(true)) {
        let fields = selectable_fields(version.get("selectableFields"));
        let names: Vec<String> = fields.iter().map(|(n, _)| n.clone()).collect();
        let spec = spec_of(crd, version, &names);
        let (columns, bad_column) = TableConvertor::with_fallback(version.get("additionalPrinterColumns").unwrap_or(&Value::Null));
        if let Some(e) = bad_column {
            tracing::warn!(crd = str_at(crd, "/metadata/name"), "printer columns: {e}");
        }
        let scale = version.pointer("/subresources/scale").filter(|s| !s.is_null()).map(|s| ScalePaths {
            spec_replicas: pointer(str_at(s, "/specReplicasPath")),
            status_replicas: pointer(str_at(s, "/statusReplicasPath")),
            label_selector: s.get("labelSelectorPath").and_then(Value::as_str).map(pointer),
        });
        let warnings = if version.get("deprecated").and_then(Value::as_bool) == Some(true) {
            vec![match version.get("deprecationWarning").and_then(Value::as_str) {
                Some(w) => w.to_owned(),
                None => format!("{} {} is deprecated", spec.api_version(), spec.kind),
            }]
        } else {
            Vec::new()
        };
        let scope: Arc<dyn ResourceScope> = Arc::new(CustomScope {
            served: spec,
            schema: if spec.version == storage_spec.version { strategy.schema.clone() } else { schema_of(version)? },
            strategy: strategy.clone(),
            columns: Arc::new(columns),
            scale,
            terminating,
            warnings,
            webhook: webhook.clone(),
        });
        served.push((spec.version.to_owned(), spec, scope));
    }
    Ok(Some(CrdEntry {
        resource_version: str_at(crd, "/metadata/resourceVersion").to_owned(),
        prefix: storage_spec.key_prefix(),
        group: storage_spec.group.to_owned(),
        versions: served,
    }))
}
