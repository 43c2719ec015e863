//! Discovery served by kapi compared with the documents a real kube-apiserver serves
//! (tests/reference/discovery, a copy of ../shared/reference/discovery; its README says what to compare and what to ignore).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use kapi_e2e::{Kapi, OutputExt};
use serde_json::{json, Value};

/// Named groups kapi serves (the core group is checked separately).
const GROUPS: &[&str] = &[
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

/// Known differences between the reference files and a current server that are not kapi bugs:
/// `pods/resize` exists since 1.33 but the stored core list predates it (README "known gaps").
const TOLERATED_EXTRA: &[&str] = &["v1 pods/resize"];

fn reference_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../reference/discovery")
}

fn reference(file: &str) -> Value {
    let path = reference_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

fn is_stable(version: &str) -> bool {
    version.strip_prefix('v').is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// The comparable part of one `APIResource`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Res {
    kind: String,
    namespaced: bool,
    verbs: BTreeSet<String>,
    short_names: Vec<String>,
    categories: Vec<String>,
    singular: String,
    /// group/version of the response kind when it differs from the list's (e.g. autoscaling/v1 Scale).
    gv: Option<(String, String)>,
    /// `storageVersionHash` (stored resources of APIResourceLists only).
    storage_hash: Option<String>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect()
}

/// Resources of an `APIResourceList`, keyed by name.
fn from_resource_list(list: &Value) -> BTreeMap<String, Res> {
    list["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let name = r["name"].as_str()?.to_owned();
            let gv = match (r["group"].as_str(), r["version"].as_str()) {
                (Some(g), Some(v)) => Some((g.to_owned(), v.to_owned())),
                _ => None,
            };
            Some((
                name,
                Res {
                    kind: r["kind"].as_str().unwrap_or("").to_owned(),
                    namespaced: r["namespaced"].as_bool().unwrap_or(false),
                    verbs: strings(&r["verbs"]).into_iter().collect(),
                    short_names: strings(&r["shortNames"]),
                    categories: strings(&r["categories"]),
                    singular: r["singularName"].as_str().unwrap_or("").to_owned(),
                    gv,
                    storage_hash: r["storageVersionHash"].as_str().map(str::to_owned),
                },
            ))
        })
        .collect()
}

/// The same shape from one version of an aggregated `APIGroupDiscovery` (the README's source of
/// truth where the stored lists have gaps).
fn from_aggregated(version: &Value, group: &str, ver: &str) -> BTreeMap<String, Res> {
    let mut out = BTreeMap::new();
    let gv_of = |kind: &Value| -> Option<(String, String)> {
        let g = kind["group"].as_str().unwrap_or("");
        let v = kind["version"].as_str().unwrap_or("");
        if (g.is_empty() && v.is_empty()) || (g == group && v == ver) {
            None
        } else {
            Some((g.to_owned(), v.to_owned()))
        }
    };
    for r in version["resources"].as_array().into_iter().flatten() {
        let Some(name) = r["resource"].as_str() else { continue };
        let namespaced = r["scope"] == json!("Namespaced");
        out.insert(
            name.to_owned(),
            Res {
                kind: r["responseKind"]["kind"].as_str().unwrap_or("").to_owned(),
                namespaced,
                verbs: strings(&r["verbs"]).into_iter().collect(),
                short_names: strings(&r["shortNames"]),
                categories: strings(&r["categories"]),
                singular: r["singularResource"].as_str().unwrap_or("").to_owned(),
                gv: None,
                storage_hash: None,
            },
        );
        for s in r["subresources"].as_array().into_iter().flatten() {
            let Some(sub) = s["subresource"].as_str() else { continue };
            out.insert(
                format!("{name}/{sub}"),
                Res {
                    kind: s["responseKind"]["kind"].as_str().unwrap_or("").to_owned(),
                    namespaced,
                    verbs: strings(&s["verbs"]).into_iter().collect(),
                    short_names: Vec::new(),
                    categories: Vec::new(),
                    singular: String::new(),
                    gv: gv_of(&s["responseKind"]),
                    storage_hash: None,
                },
            );
        }
    }
    out
}

/// Expected resources of `group/version` ("" group = core).
fn expected_resources(group: &str, version: &str) -> BTreeMap<String, Res> {
    if group.is_empty() {
        return from_resource_list(&reference(&format!("api__{version}.json")));
    }
    let agg = reference("aggregated_v2.json");
    let item = agg["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["metadata"]["name"] == json!(group))
        .unwrap_or_else(|| panic!("{group} not in aggregated_v2.json"));
    let v = item["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["version"] == json!(version))
        .unwrap_or_else(|| panic!("{group}/{version} not in aggregated_v2.json"));
    from_aggregated(v, group, version)
}

/// Stable versions and the preferred version of each reference group, in reference order.
fn reference_groups() -> Vec<(String, Vec<String>, String)> {
    reference("apis.json")["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| {
            let versions: Vec<String> =
                g["versions"].as_array().into_iter().flatten().filter_map(|v| v["version"].as_str()).filter(|v| is_stable(v)).map(str::to_owned).collect();
            (g["name"].as_str().unwrap_or("").to_owned(), versions, g["preferredVersion"]["version"].as_str().unwrap_or("").to_owned())
        })
        .filter(|(name, _, _)| GROUPS.contains(&name.as_str()))
        .collect()
}

/// Resources kube stores in an older version than kapi does (kube keeps v1beta1 encodings in
/// etcd for these); the hash says which version objects are stored in, so kapi's differs.
const STORED_IN_ANOTHER_VERSION: &[&str] =
    &["apiextensions.k8s.io/v1 customresourcedefinitions", "discovery.k8s.io/v1 endpointslices", "certificates.k8s.io/v1 podcertificaterequests"];

/// Every `storageVersionHash` of a reference APIResourceList is served with the same value,
/// except where kapi's storage version differs from kube's.
fn compare_hashes(label: &str, reference: &BTreeMap<String, Res>, served: &BTreeMap<String, Res>, problems: &mut Vec<String>) {
    for (name, want) in reference.iter().filter(|(_, r)| r.storage_hash.is_some()) {
        if STORED_IN_ANOTHER_VERSION.contains(&format!("{label} {name}").as_str()) {
            continue;
        }
        let got = served.get(name).and_then(|r| r.storage_hash.clone());
        if got != want.storage_hash {
            problems.push(format!("{label} {name}: storageVersionHash: expected {:?}, got {got:?}", want.storage_hash));
        }
    }
}

fn compare_lists(label: &str, expected: &BTreeMap<String, Res>, served: &BTreeMap<String, Res>, problems: &mut Vec<String>) {
    for (name, want) in expected {
        match served.get(name) {
            None => problems.push(format!("{label}: missing resource {name}")),
            Some(got) => {
                let mut diff = |what: &str, w: String, g: String| {
                    if w != g {
                        problems.push(format!("{label} {name}: {what}: expected {w}, got {g}"));
                    }
                };
                diff("kind", want.kind.clone(), got.kind.clone());
                diff("namespaced", want.namespaced.to_string(), got.namespaced.to_string());
                diff("verbs", format!("{:?}", want.verbs), format!("{:?}", got.verbs));
                diff("shortNames", format!("{:?}", want.short_names), format!("{:?}", got.short_names));
                diff("categories", format!("{:?}", want.categories), format!("{:?}", got.categories));
                diff("singularName", want.singular.clone(), got.singular.clone());
                if want.gv.is_some() {
                    diff("group/version", format!("{:?}", want.gv), format!("{:?}", got.gv));
                }

            }
        }
    }
    for name in served.keys().filter(|n| !expected.contains_key(*n)) {
        let key = format!("{label} {name}");
        if !TOLERATED_EXTRA.contains(&key.as_str()) {
            problems.push(format!("{label}: unexpected resource {name}"));
        }
    }
}

fn raw(kapi: &Kapi, path: &str) -> Value {
    let out = kapi.kubectl(&["get", "--raw", path]).ok(&format!("kubectl get --raw {path}"));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("--raw {path}: {e}: {out}"))
}

fn fail_on(problems: &[String]) {
    assert!(problems.is_empty(), "{} discovery differences:\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn raw_discovery_matches_reference() {
    let kapi = Kapi::start().expect("start kapi");
    let mut problems = Vec::new();

    let api = raw(&kapi, "/api");
    if api["kind"] != json!("APIVersions") || api["versions"] != json!(["v1"]) {
        problems.push(format!("/api: expected APIVersions [v1], got {api}"));
    }
    let core = raw(&kapi, "/api/v1");
    if core["groupVersion"] != json!("v1") || core["kind"] != json!("APIResourceList") {
        problems.push(format!("/api/v1 header: {}", core["groupVersion"]));
    }
    compare_lists("v1", &expected_resources("", "v1"), &from_resource_list(&core), &mut problems);
    compare_hashes("v1", &expected_resources("", "v1"), &from_resource_list(&core), &mut problems);

    let apis = raw(&kapi, "/apis");
    let served_groups: Vec<Value> = apis["groups"].as_array().cloned().unwrap_or_default();
    let reference = reference_groups();
    let served_order: Vec<&str> =
        served_groups.iter().filter_map(|g| g["name"].as_str()).filter(|n| GROUPS.contains(n)).collect();
    let reference_order: Vec<&str> = reference.iter().map(|(n, _, _)| n.as_str()).collect();
    if served_order != reference_order {
        problems.push(format!("/apis group order: expected {reference_order:?}, got {served_order:?}"));
    }
    for (group, versions, preferred) in &reference {
        let Some(entry) = served_groups.iter().find(|g| g["name"] == json!(group)) else {
            problems.push(format!("/apis: group {group} missing"));
            continue;
        };
        let served_versions: Vec<String> = entry["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["version"].as_str())
            .filter(|v| is_stable(v))
            .map(str::to_owned)
            .collect();
        if &served_versions != versions {
            problems.push(format!("/apis {group}: versions expected {versions:?}, got {served_versions:?}"));
        }
        for v in entry["versions"].as_array().into_iter().flatten() {
            let gv = format!("{group}/{}", v["version"].as_str().unwrap_or(""));
            if v["groupVersion"] != json!(gv) {
                problems.push(format!("/apis {group}: groupVersion {} for {gv}", v["groupVersion"]));
            }
        }
        if entry["preferredVersion"]["version"] != json!(preferred) {
            problems.push(format!("/apis {group}: preferredVersion expected {preferred}, got {}", entry["preferredVersion"]));
        }
        let group_doc = raw(&kapi, &format!("/apis/{group}"));
        if group_doc["kind"] != json!("APIGroup") || group_doc["name"] != json!(group) {
            problems.push(format!("/apis/{group}: expected an APIGroup, got {group_doc}"));
        }
        if group_doc["preferredVersion"] != entry["preferredVersion"] {
            problems.push(format!("/apis/{group}: preferredVersion differs from /apis"));
        }
        for version in versions {
            let list = raw(&kapi, &format!("/apis/{group}/{version}"));
            let label = format!("{group}/{version}");
            if list["groupVersion"] != json!(label) || list["kind"] != json!("APIResourceList") {
                problems.push(format!("/apis/{label}: groupVersion {} kind {}", list["groupVersion"], list["kind"]));
            }
            compare_lists(&label, &expected_resources(group, version), &from_resource_list(&list), &mut problems);
            if reference_dir().join(format!("apis__{group}__{version}.json")).exists() {
                let stored = crate::reference(&format!("apis__{group}__{version}.json"));
                compare_hashes(&label, &from_resource_list(&stored), &from_resource_list(&list), &mut problems);
            }
        }
    }
    fail_on(&problems);
}

/// Splits a tabwriter table into cells using the header's column starts (cells may be empty,
/// and VERBS holds spaces).
fn parse_table(out: &str) -> Vec<BTreeMap<String, String>> {
    let mut lines = out.lines();
    let header = lines.next().unwrap_or("");
    let mut starts = Vec::new();
    let mut prev_space = true;
    for (i, c) in header.char_indices() {
        if c != ' ' && prev_space {
            starts.push(i);
        }
        prev_space = c == ' ';
    }
    let names: Vec<String> = header.split_whitespace().map(str::to_owned).collect();
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let mut row = BTreeMap::new();
            for (idx, name) in names.iter().enumerate() {
                let from = starts[idx].min(line.len());
                let to = starts.get(idx + 1).copied().unwrap_or(line.len()).min(line.len());
                row.insert(name.clone(), line.get(from..to).unwrap_or("").trim().to_owned());
            }
            row
        })
        .collect()
}

fn check_api_resources(kapi: &Kapi, version: Option<&str>) {
    let args = ["api-resources", "-o", "wide"];
    let out = match version {
        Some(v) => kapi.kubectl_as(v, &args),
        None => kapi.kubectl(&args),
    };
    let label = format!("kubectl{} api-resources -o wide", version.map(|v| format!(".{v}")).unwrap_or_default());
    let text = out.ok(&label);
    let header: Vec<&str> = text.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(header, ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", "VERBS", "CATEGORIES"], "{label}:\n{text}");
    let rows = parse_table(&text);
    let mut served: BTreeMap<(String, String), BTreeMap<String, String>> = BTreeMap::new();
    for row in rows {
        let key = (row["APIVERSION"].clone(), row["NAME"].clone());
        served.insert(key, row);
    }

    let mut expected: Vec<(String, String, Res)> = Vec::new();
    for (name, res) in expected_resources("", "v1") {
        expected.push(("v1".into(), name, res));
    }
    for (group, _, preferred) in reference_groups() {
        for (name, res) in expected_resources(&group, &preferred) {
            expected.push((format!("{group}/{preferred}"), name, res));
        }
    }
    let mut problems = Vec::new();
    let mut expected_keys = BTreeSet::new();
    for (gv, name, want) in expected.iter().filter(|(_, n, _)| !n.contains('/')) {
        expected_keys.insert((gv.clone(), name.clone()));
        let Some(row) = served.get(&(gv.clone(), name.clone())) else {
            problems.push(format!("{label}: missing {gv} {name}"));
            continue;
        };
        let verbs: BTreeSet<String> =
            row["VERBS"].trim_start_matches('[').trim_end_matches(']').split(|c: char| c == ',' || c.is_whitespace()).filter(|v| !v.is_empty()).map(str::to_owned).collect();
        let checks = [
            ("SHORTNAMES", want.short_names.join(","), row["SHORTNAMES"].clone()),
            ("NAMESPACED", want.namespaced.to_string(), row["NAMESPACED"].clone()),
            ("KIND", want.kind.clone(), row["KIND"].clone()),
            ("VERBS", format!("{:?}", want.verbs), format!("{verbs:?}")),
            ("CATEGORIES", want.categories.join(","), row["CATEGORIES"].clone()),
        ];
        for (col, w, g) in checks {
            if w != g {
                problems.push(format!("{label} {gv} {name}: {col} expected {w:?}, got {g:?}"));
            }
        }
    }
    for (gv, name) in served.keys() {
        if !expected_keys.contains(&(gv.clone(), name.clone())) {
            problems.push(format!("{label}: unexpected row {gv} {name}"));
        }
    }
    fail_on(&problems);
}

#[test]
fn kubectl_api_resources_matches_reference() {
    let kapi = Kapi::start().expect("start kapi");
    check_api_resources(&kapi, None);
    if kapi_e2e::versioned_kubectl_or_skip("1.27").is_some() {
        check_api_resources(&kapi, Some("1.27"));
    }
}

/// The conversion from the aggregated document must agree with the stored lists where the
/// README says they agree; otherwise the comparisons above would test the converter.
#[test]
fn aggregated_reference_agrees_with_stored_lists() {
    let mut problems = Vec::new();
    for group in ["apps", "batch", "rbac.authorization.k8s.io", "policy", "autoscaling"] {
        for (_, versions, _) in reference_groups().into_iter().filter(|(g, _, _)| g == group) {
            for v in versions {
                let file = from_resource_list(&reference(&format!("apis__{group}__{v}.json")));
                compare_lists(&format!("{group}/{v}"), &file, &expected_resources(group, &v), &mut problems);
            }
        }
    }
    fail_on(&problems);
}

#[test]
fn table_parser_keeps_empty_cells() {
    let t = "NAME   SHORTNAMES   KIND\npods   po           Pod\nleases                Lease\n";
    let rows = parse_table(t);
    assert_eq!(rows[0]["SHORTNAMES"], "po");
    assert_eq!(rows[1]["SHORTNAMES"], "");
    assert_eq!(rows[1]["KIND"], "Lease");
}
