//! Compares the catalog with the discovery documents a real kube-apiserver serves
//! (`tests/reference/discovery`, a copy of the team's reference data; see its README.md).
//!
//! `aggregated_v2.json` is the source of truth for named groups (two per-version resource lists
//! there are known to lack entries); `api__v1.json` is the only reference for the core group.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use kapi_registry::catalog::{self, ResourceSpec};
use serde_json::Value;

/// The named groups the brief asks kapi to serve (GA versions only).
const SERVED_GROUPS: &[&str] = &[
    "apps",
    "batch",
    "autoscaling",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "certificates.k8s.io",
    "admissionregistration.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
];

fn reference_dir() -> Option<PathBuf> {
    // A copy of ../shared/reference/discovery kept in the repository so a fresh clone tests it.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/reference/discovery");
    assert!(dir.is_dir(), "reference discovery documents missing at {}", dir.display());
    Some(dir)
}

fn load(dir: &std::path::Path, file: &str) -> Value {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

fn is_ga(version: &str) -> bool {
    !version.contains("alpha") && !version.contains("beta")
}

fn str_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

fn str_field(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or_default().to_owned()
}

fn owned(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

fn set(v: &[String]) -> BTreeSet<String> {
    v.iter().cloned().collect()
}

/// The comparable surface of one discovery entry, resource or subresource.
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    kind: String,
    /// Group and version of the kind when they differ from the resource's own ("" otherwise).
    group: String,
    version: String,
    namespaced: bool,
    singular: String,
    verbs: BTreeSet<String>,
    short_names: Vec<String>,
    categories: Vec<String>,
}

/// The catalog's entries for one group version, keyed `resource` and `resource/sub`, plus
/// the resource order.
fn catalog_entries(group: &str, version: &str) -> (Vec<String>, BTreeMap<String, Entry>) {
    let mut order = Vec::new();
    let mut out = BTreeMap::new();
    for r in catalog::resources_in(group, version) {
        order.push(r.resource.to_owned());
        out.insert(r.resource.to_owned(), resource_entry(r));
        for s in r.subresources {
            out.insert(
                format!("{}/{}", r.resource, s.name),
                Entry {
                    kind: s.kind.to_owned(),
                    group: s.group.unwrap_or_default().to_owned(),
                    version: s.version.unwrap_or_default().to_owned(),
                    namespaced: r.namespaced,
                    singular: String::new(),
                    verbs: set(&owned(s.verbs)),
                    short_names: Vec::new(),
                    categories: Vec::new(),
                },
            );
        }
    }
    (order, out)
}

fn resource_entry(r: &ResourceSpec) -> Entry {
    Entry {
        kind: r.kind.to_owned(),
        group: String::new(),
        version: String::new(),
        namespaced: r.namespaced,
        singular: r.singular.to_owned(),
        verbs: set(&owned(r.verbs)),
        short_names: owned(r.short_names),
        categories: owned(r.categories),
    }
}

/// Entries of an `APIResourceList` (`/api/v1`, `/apis/<g>/<v>`).
fn list_entries(doc: &Value) -> (Vec<String>, BTreeMap<String, Entry>) {
    let mut order = Vec::new();
    let mut out = BTreeMap::new();
    for r in doc["resources"].as_array().expect("resources array") {
        let name = str_field(r, "name");
        if !name.contains('/') {
            order.push(name.clone());
        }
        out.insert(
            name,
            Entry {
                kind: str_field(r, "kind"),
                group: str_field(r, "group"),
                version: str_field(r, "version"),
                namespaced: r["namespaced"].as_bool().expect("namespaced"),
                singular: str_field(r, "singularName"),
                verbs: set(&str_list(r.get("verbs"))),
                short_names: str_list(r.get("shortNames")),
                categories: str_list(r.get("categories")),
            },
        );
    }
    (order, out)
}

/// Entries of one version of an `APIGroupDiscovery` (aggregated discovery v2).
fn aggregated_entries(version: &Value) -> (Vec<String>, BTreeMap<String, Entry>) {
    let mut order = Vec::new();
    let mut out = BTreeMap::new();
    for r in version["resources"].as_array().expect("resources array") {
        let name = str_field(r, "resource");
        let namespaced = match r["scope"].as_str() {
            Some("Namespaced") => true,
            Some("Cluster") => false,
            other => panic!("{name}: unexpected scope {other:?}"),
        };
        order.push(name.clone());
        let rk = &r["responseKind"];
        // A resource's own responseKind names its group version with "" in this document.
        assert_eq!((str_field(rk, "group"), str_field(rk, "version")), (String::new(), String::new()), "{name}");
        out.insert(
            name.clone(),
            Entry {
                kind: str_field(rk, "kind"),
                group: String::new(),
                version: String::new(),
                namespaced,
                singular: str_field(r, "singularResource"),
                verbs: set(&str_list(r.get("verbs"))),
                short_names: str_list(r.get("shortNames")),
                categories: str_list(r.get("categories")),
            },
        );
        for s in r.get("subresources").and_then(Value::as_array).into_iter().flatten() {
            let rk = &s["responseKind"];
            out.insert(
                format!("{name}/{}", str_field(s, "subresource")),
                Entry {
                    kind: str_field(rk, "kind"),
                    group: str_field(rk, "group"),
                    version: str_field(rk, "version"),
                    namespaced,
                    singular: String::new(),
                    verbs: set(&str_list(s.get("verbs"))),
                    short_names: Vec::new(),
                    categories: Vec::new(),
                },
            );
        }
    }
    (order, out)
}

fn assert_same(gv: &str, (want_order, want): (Vec<String>, BTreeMap<String, Entry>), (have_order, have): (Vec<String>, BTreeMap<String, Entry>)) {
    let missing: Vec<_> = want.keys().filter(|k| !have.contains_key(*k)).collect();
    let extra: Vec<_> = have.keys().filter(|k| !want.contains_key(*k)).collect();
    assert!(missing.is_empty() && extra.is_empty(), "{gv}: missing {missing:?}, not in reference {extra:?}");
    for (name, w) in &want {
        assert_eq!(Some(w), have.get(name), "{gv} {name}: reference (left) vs catalog (right)");
    }
    assert_eq!(want_order, have_order, "{gv}: resource order");
}

#[test]
fn core_v1_matches_reference() {
    let Some(dir) = reference_dir() else { return };
    let api = load(&dir, "api.json");
    assert_eq!(str_list(api.get("versions")), ["v1"]);
    let doc = load(&dir, "api__v1.json");
    assert_eq!(doc["groupVersion"], "v1");
    assert_same("v1", list_entries(&doc), catalog_entries("", "v1"));
}

#[test]
fn groups_match_apis_document() {
    let Some(dir) = reference_dir() else { return };
    let apis = load(&dir, "apis.json");
    let mut expected = Vec::new();
    for g in apis["groups"].as_array().expect("groups") {
        let name = str_field(g, "name");
        if !SERVED_GROUPS.contains(&name.as_str()) {
            continue;
        }
        let versions: Vec<String> =
            g["versions"].as_array().expect("versions").iter().map(|v| str_field(v, "version")).filter(|v| is_ga(v)).collect();
        assert_eq!(str_field(&g["preferredVersion"], "version"), versions[0], "{name}: preferred version");
        expected.push((name, versions));
    }
    assert_eq!(expected.len(), SERVED_GROUPS.len(), "every served group is in apis.json");
    let have: Vec<(String, Vec<String>)> = catalog::groups().iter().map(|g| (g.name.to_owned(), owned(g.versions))).collect();
    assert_eq!(expected, have, "groups(): names, order and versions");
}

#[test]
fn group_documents_match() {
    let Some(dir) = reference_dir() else { return };
    for g in catalog::groups() {
        let doc = load(&dir, &format!("apis__{}.json", g.name));
        assert_eq!(doc["name"], g.name);
        let versions: Vec<String> =
            doc["versions"].as_array().expect("versions").iter().map(|v| str_field(v, "version")).filter(|v| is_ga(v)).collect();
        assert_eq!(versions, owned(g.versions), "{}", g.name);
        assert_eq!(str_field(&doc["preferredVersion"], "version"), g.versions[0], "{}", g.name);
    }
}

#[test]
fn named_groups_match_aggregated_discovery() {
    let Some(dir) = reference_dir() else { return };
    let agg = load(&dir, "aggregated_v2.json");
    let items = agg["items"].as_array().expect("items");
    let mut checked = 0;
    for g in catalog::groups() {
        let item = items.iter().find(|i| i["metadata"]["name"] == g.name).unwrap_or_else(|| panic!("{} not aggregated", g.name));
        for v in g.versions {
            let version = item["versions"]
                .as_array()
                .and_then(|vs| vs.iter().find(|x| x["version"] == *v))
                .unwrap_or_else(|| panic!("{}/{v} not aggregated", g.name));
            let gv = format!("{}/{v}", g.name);
            assert_same(&gv, aggregated_entries(version), catalog_entries(g.name, v));
            checked += 1;
        }
    }
    assert_eq!(checked, SERVED_GROUPS.len() + 1, "autoscaling serves two versions");
}

/// The per-version lists agree with the catalog wherever they have an entry (two of them are
/// known to lack one: certificates.k8s.io clustertrustbundles and storage.k8s.io csinodes/status).
#[test]
fn per_version_lists_agree_where_present() {
    let Some(dir) = reference_dir() else { return };
    for g in catalog::groups() {
        for v in g.versions {
            let doc = load(&dir, &format!("apis__{}__{v}.json", g.name));
            let gv = format!("{}/{v}", g.name);
            assert_eq!(doc["groupVersion"], gv.as_str());
            let (_, want) = list_entries(&doc);
            let (_, have) = catalog_entries(g.name, v);
            for (name, w) in &want {
                assert_eq!(Some(w), have.get(name), "{gv} {name}: reference (left) vs catalog (right)");
            }
            let absent: Vec<_> = have.keys().filter(|k| !want.contains_key(*k)).map(String::as_str).collect();
            let known: &[&str] = match gv.as_str() {
                "certificates.k8s.io/v1" => &["clustertrustbundles"],
                "storage.k8s.io/v1" => &["csinodes/status"],
                _ => &[],
            };
            assert_eq!(absent, known, "{gv}: catalog entries the per-version list lacks");
        }
    }
}
