//! Discovery documents built from what the tiers of the chain serve now: `/api`, `/api/v1`,
//! `/apis`, `/apis/<g>`, `/apis/<g>/<v>` and aggregated discovery v2 (what kubectl 1.26+ asks
//! for first). Custom resource groups appear and go with their CRDs.

use kapi_registry::catalog::{ResourceSpec, Serving};
use serde_json::{json, Map, Value};

use crate::tier::Chain;

fn gv_string(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

/// `GET /api`: APIVersions.
pub fn api_versions(external_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": external_address}],
    })
}

fn api_group(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> =
        versions.iter().map(|v| json!({"groupVersion": gv_string(name, v), "version": v})).collect();
    json!({
        "name": name,
        "versions": vs,
        "preferredVersion": {"groupVersion": gv_string(name, &versions[0]), "version": versions[0]},
    })
}

/// `GET /apis`: APIGroupList in kube's order.
pub fn api_group_list(chain: &Chain) -> Value {
    let groups: Vec<Value> = chain.groups().iter().filter(|g| !g.name.is_empty()).map(|g| api_group(&g.name, &g.versions)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/<group>`: APIGroup, or `None` for a group not served.
pub fn api_group_doc(chain: &Chain, group: &str) -> Option<Value> {
    let g = chain.group(group).filter(|g| !g.name.is_empty())?;
    let mut doc = api_group(&g.name, &g.versions);
    let m = doc.as_object_mut()?;
    let mut out = Map::new();
    out.insert("kind".into(), "APIGroup".into());
    out.insert("apiVersion".into(), "v1".into());
    out.append(m);
    Some(Value::Object(out))
}

fn strs(v: &[&str]) -> Value {
    Value::Array(v.iter().map(|s| Value::String((*s).to_owned())).collect())
}

/// kube's `storageVersionHash`: the first 8 bytes of SHA-256 over the storage version's
/// `<group>/<version>/<kind>`, base64. Tools (the storage version migrator) compare it to
/// notice that a resource's storage version changed.
pub fn storage_version_hash(storage: &ResourceSpec) -> String {
    use base64::Engine;
    let digest = ring::digest::digest(&ring::digest::SHA256, format!("{}/{}/{}", storage.group, storage.version, storage.kind).as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8])
}

fn resource_entry(chain: &Chain, r: &ResourceSpec) -> Value {
    let mut e = Map::new();
    e.insert("name".into(), r.resource.into());
    e.insert("singularName".into(), r.singular.into());
    e.insert("namespaced".into(), r.namespaced.into());
    e.insert("kind".into(), r.kind.into());
    e.insert("verbs".into(), strs(r.verbs));
    if !r.short_names.is_empty() {
        e.insert("shortNames".into(), strs(r.short_names));
    }
    if !r.categories.is_empty() {
        e.insert("categories".into(), strs(r.categories));
    }
    if r.serving == Serving::Stored {
        if let Some(scope) = chain.scope(r.group, r.version, r.resource) {
            e.insert("storageVersionHash".into(), storage_version_hash(scope.strategy().spec()).into());
        }
    }
    Value::Object(e)
}

/// `GET /api/v1` or `/apis/<g>/<v>`: APIResourceList, or `None` for a version not served.
pub fn api_resource_list(chain: &Chain, group: &str, version: &str) -> Option<Value> {
    if !chain.group(group).is_some_and(|g| g.versions.iter().any(|v| v == version)) {
        return None;
    }
    let mut resources = Vec::new();
    for r in chain.resources_in(group, version) {
        resources.push(resource_entry(chain, r));
        for s in r.subresources {
            let mut e = Map::new();
            e.insert("name".into(), format!("{}/{}", r.resource, s.name).into());
            e.insert("singularName".into(), "".into());
            e.insert("namespaced".into(), r.namespaced.into());
            if let Some(g) = s.group {
                e.insert("group".into(), g.into());
            }
            if let Some(v) = s.version {
                e.insert("version".into(), v.into());
            }
            e.insert("kind".into(), s.kind.into());
            e.insert("verbs".into(), strs(s.verbs));
            resources.push(Value::Object(e));
        }
    }
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv_string(group, version), "resources": resources}))
}

fn discovery_resource(r: &ResourceSpec) -> Value {
    let mut e = Map::new();
    e.insert("resource".into(), r.resource.into());
    e.insert("responseKind".into(), json!({"group": r.group, "version": r.version, "kind": r.kind}));
    e.insert("scope".into(), (if r.namespaced { "Namespaced" } else { "Cluster" }).into());
    e.insert("singularResource".into(), r.singular.into());
    e.insert("verbs".into(), strs(r.verbs));
    if !r.short_names.is_empty() {
        e.insert("shortNames".into(), strs(r.short_names));
    }
    if !r.categories.is_empty() {
        e.insert("categories".into(), strs(r.categories));
    }
    if !r.subresources.is_empty() {
        let subs: Vec<Value> = r
            .subresources
            .iter()
            .map(|s| {
                json!({
                    "subresource": s.name,
                    "responseKind": {"group": s.group.unwrap_or(r.group), "version": s.version.unwrap_or(r.version), "kind": s.kind},
                    "verbs": strs(s.verbs),
                })
            })
            .collect();
        e.insert("subresources".into(), Value::Array(subs));
    }
    Value::Object(e)
}

fn discovery_group(chain: &Chain, name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| {
            // A group version another server owns is described as that server last described
            // it; `Stale` when it could not be asked (kube's aggregated discovery manager).
            if let Some((resources, current)) = chain.remote_resources(name, v) {
                return json!({"version": v, "resources": *resources, "freshness": if current { "Current" } else { "Stale" }});
            }
            let resources: Vec<Value> = chain.resources_in(name, v).into_iter().map(discovery_resource).collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    let mut meta = Map::new();
    if !name.is_empty() {
        meta.insert("name".into(), name.into());
    }
    json!({"metadata": meta, "versions": vs})
}

/// Aggregated discovery (`apidiscovery.k8s.io/v2` APIGroupDiscoveryList): the core group at
/// `/api`, every named group at `/apis`.
pub fn aggregated(chain: &Chain, core: bool) -> Value {
    let items: Vec<Value> =
        chain.groups().iter().filter(|g| g.name.is_empty() == core).map(|g| discovery_group(chain, &g.name, &g.versions)).collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}
