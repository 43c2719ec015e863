//! The public API as the server uses it: documents for a small catalog and field checks.

use std::time::Instant;

use kapi_openapi::{strict_message, warnings, OpenApi, ServedResource};
use serde_json::{json, Value};

fn served(
    group: &str,
    version: &str,
    kind: &str,
    resource: &str,
    namespaced: bool,
    subresources: &[&str],
) -> ServedResource {
    ServedResource {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        resource: resource.into(),
        namespaced,
        verbs: [
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
        .map(String::from)
        .to_vec(),
        subresources: subresources.iter().map(|s| s.to_string()).collect(),
        delete_returns_object: false,
    }
}

fn catalog() -> Vec<ServedResource> {
    let mut token_reviews = served(
        "authentication.k8s.io",
        "v1",
        "TokenReview",
        "tokenreviews",
        false,
        &[],
    );
    token_reviews.verbs = vec!["create".into()];
    vec![
        served(
            "",
            "v1",
            "Pod",
            "pods",
            true,
            &[
                "status",
                "log",
                "exec",
                "eviction",
                "binding",
                "ephemeralcontainers",
                "proxy",
            ],
        ),
        served("", "v1", "ConfigMap", "configmaps", true, &[]),
        served(
            "",
            "v1",
            "Namespace",
            "namespaces",
            false,
            &["status", "finalize"],
        ),
        served(
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            true,
            &["token"],
        ),
        served(
            "apps",
            "v1",
            "Deployment",
            "deployments",
            true,
            &["status", "scale"],
        ),
        token_reviews,
        served("stable.example.com", "v1", "CronTab", "crontabs", true, &[]),
    ]
}

fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).expect("document is JSON")
}

fn vm_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Follows `$ref`s of a v3 document's components.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    let reference = schema
        .get("$ref")
        .or_else(|| {
            schema
                .get("allOf")
                .and_then(|a| a.get(0))
                .and_then(|a| a.get("$ref"))
        })
        .and_then(Value::as_str);
    match reference.and_then(|r| r.strip_prefix("#/components/schemas/")) {
        Some(name) => &doc["components"]["schemas"][name],
        None => schema,
    }
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                // JSONSchemaProps has a property named `$ref`; only string values are references.
                if let (true, Some(reference)) = (k == "$ref", v.as_str()) {
                    out.push(reference.to_string());
                } else {
                    collect_refs(v, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

#[test]
fn documents_serve_kubectl() {
    let rss_before = vm_rss_kib();
    let started = Instant::now();
    let api = OpenApi::new(catalog());
    api.warm();
    let elapsed = started.elapsed();
    let rss_after = vm_rss_kib();
    let v2 = api.v2();
    let index = parse(&api.v3_index());
    let apps = api
        .v3_group_version("apis/apps/v1")
        .expect("apps/v1 document");
    let core = api.v3_group_version("/api/v1").expect("core document");
    eprintln!(
        "openapi build: {elapsed:?}, rss {rss_before:?} -> {rss_after:?} KiB, v2 {} bytes, v3 api/v1 {} bytes, v3 apps/v1 {} bytes",
        v2.len(),
        core.len(),
        apps.len()
    );

    // v2: definitions with GVK, paths with kube operation ids and fieldValidation.
    let v2 = parse(&v2);
    assert_eq!(v2["swagger"], "2.0");
    for (name, group, kind) in [
        ("io.k8s.api.apps.v1.Deployment", "apps", "Deployment"),
        ("io.k8s.api.core.v1.Pod", "", "Pod"),
        ("io.k8s.api.core.v1.ConfigMap", "", "ConfigMap"),
    ] {
        assert_eq!(
            v2["definitions"][name]["x-kubernetes-group-version-kind"],
            json!([{"group": group, "kind": kind, "version": "v1"}]),
            "{name}"
        );
    }
    assert_eq!(
        v2["definitions"]["com.example.stable.v1.CronTab"]["x-kubernetes-preserve-unknown-fields"],
        true
    );
    let deployments = &v2["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments"];
    assert_eq!(
        deployments["post"]["operationId"],
        "createAppsV1NamespacedDeployment"
    );
    assert_eq!(
        deployments["get"]["operationId"],
        "listAppsV1NamespacedDeployment"
    );
    assert_eq!(deployments["get"]["x-kubernetes-action"], "list");
    assert_eq!(
        deployments["post"]["x-kubernetes-group-version-kind"],
        json!({"group": "apps", "kind": "Deployment", "version": "v1"})
    );
    let post_params: Vec<&str> = deployments["post"]["parameters"]
        .as_array()
        .expect("params")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    for name in ["body", "dryRun", "fieldManager", "fieldValidation"] {
        assert!(
            post_params.contains(&name),
            "{name} missing from {post_params:?}"
        );
    }
    assert_eq!(
        v2["paths"]["/apis/authentication.k8s.io/v1/tokenreviews"]["post"]["operationId"],
        "createAuthenticationV1TokenReview"
    );
    assert!(v2["paths"]["/apis/authentication.k8s.io/v1/tokenreviews/{name}"].is_null());
    assert_eq!(
        v2["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/log"]["get"]["operationId"],
        "readCoreV1NamespacedPodLog"
    );
    assert_eq!(
        v2["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/exec"]["post"]["operationId"],
        "connectCoreV1PostNamespacedPodExec"
    );
    assert_eq!(
        v2["paths"]["/api/v1/namespaces/{namespace}/pods"]["get"]["operationId"],
        "listCoreV1NamespacedPod"
    );
    assert_eq!(
        v2["paths"]["/api/v1/pods"]["get"]["operationId"],
        "listCoreV1PodForAllNamespaces"
    );
    assert_eq!(
        v2["paths"]["/api/v1/namespaces/{name}"]["get"]["operationId"],
        "readCoreV1Namespace"
    );
    let mut v2_refs = Vec::new();
    collect_refs(&v2, &mut v2_refs);
    for r in &v2_refs {
        let name = r
            .strip_prefix("#/definitions/")
            .unwrap_or_else(|| panic!("v2 ref prefix: {r}"));
        assert!(v2["definitions"].get(name).is_some(), "dangling v2 ref {r}");
    }

    // v3 index: every served group version with a hash that matches the document.
    let paths = index["paths"].as_object().expect("index paths");
    for gv in [
        "api/v1",
        "apis/apps/v1",
        "apis/authentication.k8s.io/v1",
        "apis/stable.example.com/v1",
    ] {
        assert!(paths.contains_key(gv), "{gv} missing from v3 index");
    }
    let url = paths["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .expect("url");
    let hash = api.v3_hash("apis/apps/v1").expect("hash");
    assert_eq!(url, format!("/openapi/v3/apis/apps/v1?hash={hash}"));
    assert!(api.v3_group_version("apis/batch/v1").is_none());

    // v3 apps/v1: what kubectl's field-validation probe and `kubectl explain` read.
    let apps = parse(&apps);
    assert_eq!(apps["openapi"], "3.0.0");
    let patch = &apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "apps", "kind": "Deployment", "version": "v1"})
    );
    assert!(patch["parameters"]
        .as_array()
        .expect("params")
        .iter()
        .any(|p| p["name"] == "fieldValidation" && p["in"] == "query"));
    assert!(patch["requestBody"]["content"]["application/apply-patch+yaml"].is_object());
    let deployment = &apps["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deployment["x-kubernetes-group-version-kind"][0]["kind"],
        "Deployment"
    );
    let spec = resolve(&apps, &deployment["properties"]["spec"]);
    let replicas = &spec["properties"]["replicas"];
    assert!(replicas["description"]
        .as_str()
        .expect("replicas description")
        .contains("Number of desired pods"));
    assert_eq!(replicas["format"], "int32");
    assert!(
        apps["components"]["schemas"]
            .get("io.k8s.api.core.v1.Pod")
            .is_none(),
        "apps/v1 should only carry referenced schemas"
    );
    let mut v3_refs = Vec::new();
    collect_refs(&apps, &mut v3_refs);
    assert!(!v3_refs.is_empty());
    for r in &v3_refs {
        let name = r
            .strip_prefix("#/components/schemas/")
            .expect("v3 ref prefix");
        assert!(
            apps["components"]["schemas"].get(name).is_some(),
            "dangling v3 ref {r}"
        );
    }
}

#[test]
fn field_problems_match_kube() {
    let api = OpenApi::new(catalog());
    let raw = br#"{
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2, "replicas": 3, "foo": true,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [
                    {"name": "web", "image": "nginx", "imagePullPolize": "Always",
                     "ports": [{"containerPort": 80}],
                     "livenessProbe": {"httpGet": {"port": "http", "path": "/"}}}
                ]}
            }
        }
    }"#;
    let obj: Value = serde_json::from_slice(raw).expect("json");
    let p = api.field_problems("apps", "v1", "Deployment", &obj, Some(raw));
    assert_eq!(
        p.unknown,
        vec![
            "spec.foo",
            "spec.template.spec.containers[0].imagePullPolize"
        ]
    );
    assert_eq!(p.duplicate, vec!["spec.replicas"]);
    assert!(p.type_errors.is_empty(), "{:?}", p.type_errors);
    assert_eq!(
        strict_message(&p).as_deref(),
        Some(
            // kube's decoder reports fields as it meets them: the second `replicas` first.
            r#"strict decoding error: duplicate field "spec.replicas", unknown field "spec.foo", unknown field "spec.template.spec.containers[0].imagePullPolize""#
        )
    );
    assert_eq!(warnings(&p).len(), 3);

    // Duplicates of an unknown field are reported only as unknown.
    let raw = br#"{"spec": {"bogus": 1, "bogus": 2}}"#;
    let obj: Value = serde_json::from_slice(raw).expect("json");
    let p = api.field_problems("apps", "v1", "Deployment", &obj, Some(raw));
    assert_eq!(p.unknown, vec!["spec.bogus"]);
    assert!(p.duplicate.is_empty());

    // Kinds without a typed schema accept anything.
    let p = api.field_problems(
        "stable.example.com",
        "v1",
        "CronTab",
        &json!({"spec": {"x": 1}}),
        None,
    );
    assert!(p.is_empty());

    // Pod-level checks go through the same schemas.
    let p = api.field_problems("", "v1", "Pod", &json!({"spec": {"containers": [{"name": "a", "image": "b", "ports": [{"containerPort": "80"}]}]}}), None);
    assert_eq!(
        p.type_errors,
        vec![(
            "spec.containers[0].ports[0].containerPort".to_string(),
            "json: cannot unmarshal string into Go struct field ContainerPort.spec.containers.ports.containerPort of type int32".to_string()
        )]
    );
}

/// kubectl decides whether the server validates fields by finding *a* PATCH operation tagged
/// with the object's GVK (in map order, so any of them) and looking for `fieldValidation` among
/// its parameters; one PATCH without it makes kubectl fall back to client-side validation.
#[test]
fn every_patch_of_a_kind_offers_field_validation() {
    let api = OpenApi::new(catalog());
    let index = parse(&api.v3_index());
    let mut checked = 0;
    for gv in index["paths"].as_object().expect("index paths").keys() {
        let doc = parse(&api.v3_group_version(gv).expect("listed document"));
        for (path, item) in doc["paths"].as_object().expect("paths") {
            let Some(op) = item.get("patch") else { continue };
            let params: Vec<&str> = op["parameters"]
                .as_array()
                .into_iter()
                .chain(item["parameters"].as_array())
                .flatten()
                .filter_map(|p| p["name"].as_str())
                .collect();
            let kind = op["x-kubernetes-group-version-kind"]["kind"].as_str().unwrap_or("");
            if kind.ends_with("Options") {
                continue; // connect operations (proxy) carry their options kind
            }
            assert!(params.contains(&"fieldValidation"), "{gv}: PATCH {path} ({kind}) lacks fieldValidation: {params:?}");
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} PATCH operations checked");
}
