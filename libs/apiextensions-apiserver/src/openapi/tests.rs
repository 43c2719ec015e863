//! Builder tests: names, extensions, the v2 downgrade, paths and verbs.

use serde_json::{json, Value};

use super::*;

fn crd(scope: &str, schema: Option<Value>, subresources: Value) -> Value {
    let mut version = json!({ "name": "v1", "served": true, "storage": true, "subresources": subresources });
    if let Some(schema) = schema {
        version["schema"] = json!({ "openAPIV3Schema": schema });
    }
    json!({
        "metadata": { "name": "widgets.example.com", "resourceVersion": "7" },
        "spec": {
            "group": "example.com",
            "scope": scope,
            "names": { "kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget" },
            "versions": [version, { "name": "v2", "served": false, "storage": false }],
        },
    })
}

fn widget_schema() -> Value {
    json!({
        "type": "object",
        "description": "A widget.",
        "properties": {
            "spec": {
                "type": "object",
                "description": "What the widget should be.",
                "required": ["color", "note"],
                "properties": {
                    "color": { "type": "string", "description": "Paint colour.", "default": "red" },
                    "note": { "type": "string", "nullable": true },
                    "port": { "x-kubernetes-int-or-string": true },
                    "sizes": { "type": "array", "items": { "type": "integer" } },
                    "extra": { "type": "object", "x-kubernetes-preserve-unknown-fields": true,
                               "properties": { "a": { "type": "string" } } },
                    "template": { "type": "object", "x-kubernetes-embedded-resource": true,
                                  "x-kubernetes-preserve-unknown-fields": true },
                    "choice": { "type": "string", "anyOf": [{ "enum": ["a"] }, { "enum": ["b"] }] },
                },
            },
            "status": { "type": "object", "properties": { "replicas": { "type": "integer" } } },
        },
    })
}

fn full() -> Value {
    crd(
        "Namespaced",
        Some(widget_schema()),
        json!({ "status": {}, "scale": { "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas" } }),
    )
}

#[test]
fn definition_names_reverse_the_group() {
    assert_eq!(definition_name("example.com", "v1", "Widget"), "com.example.v1.Widget");
    assert_eq!(
        definition_name("stable.example.com", "v1beta1", "CronTabList"),
        "com.example.stable.v1beta1.CronTabList"
    );
    let parts = crd_part_trees(&full());
    assert_eq!(parts.len(), 1, "only served versions");
    let keys: Vec<&String> = parts[0].v2_definitions.keys().collect();
    assert_eq!(keys, ["com.example.v1.Widget", "com.example.v1.WidgetList"]);
    assert_eq!(parts[0].v3_schemas.keys().collect::<Vec<_>>(), keys);
    assert_eq!(CustomPart::new(parts[0].clone()).gv_key(), "apis/example.com/v1");
}

#[test]
fn kind_and_list_carry_gvk_type_meta_and_metadata() {
    let part = &crd_part_trees(&full())[0];
    let kind = &part.v3_schemas["com.example.v1.Widget"];
    assert_eq!(
        kind["x-kubernetes-group-version-kind"],
        json!([{ "group": "example.com", "kind": "Widget", "version": "v1" }])
    );
    assert_eq!(kind["description"], "A widget.");
    assert_eq!(kind["properties"]["spec"]["properties"]["color"]["description"], "Paint colour.");
    assert_eq!(kind["properties"]["apiVersion"]["type"], "string");
    assert!(kind["properties"]["kind"]["description"].as_str().is_some_and(|d| d.contains("REST resource")));
    assert_eq!(
        kind["properties"]["metadata"]["allOf"],
        json!([{ "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" }])
    );
    let v2 = &part.v2_definitions["com.example.v1.Widget"];
    assert_eq!(v2["properties"]["metadata"]["$ref"], "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
    let list = &part.v2_definitions["com.example.v1.WidgetList"];
    assert_eq!(
        list["x-kubernetes-group-version-kind"],
        json!([{ "group": "example.com", "kind": "WidgetList", "version": "v1" }])
    );
    assert_eq!(list["properties"]["items"]["items"]["$ref"], "#/definitions/com.example.v1.Widget");
    assert_eq!(list["properties"]["metadata"]["$ref"], "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta");
    assert_eq!(list["required"], json!(["items"]));
    let v3_list = &part.v3_schemas["com.example.v1.WidgetList"];
    assert_eq!(v3_list["properties"]["items"]["items"]["$ref"], "#/components/schemas/com.example.v1.Widget");
}

#[test]
fn v3_keeps_what_v2_downgrades() {
    let part = &crd_part_trees(&full())[0];
    let v3 = &part.v3_schemas["com.example.v1.Widget"]["properties"]["spec"];
    let v2 = &part.v2_definitions["com.example.v1.Widget"]["properties"]["spec"];
    // int-or-string is unfolded into anyOf in v3, and anyOf is dropped in v2.
    assert_eq!(v3["properties"]["port"]["anyOf"], json!([{ "type": "integer" }, { "type": "string" }]));
    assert_eq!(v2["properties"]["port"], json!({ "x-kubernetes-int-or-string": true }));
    // nullable: untyped in v2 and no longer required.
    assert_eq!(v3["properties"]["note"], json!({ "type": "string", "nullable": true }));
    assert_eq!(v2["properties"]["note"], json!({}));
    assert_eq!(v3["required"], json!(["color", "note"]));
    assert_eq!(v2["required"], json!(["color"]));
    // preserve-unknown-fields objects lose their type and properties in v2.
    assert_eq!(v2["properties"]["extra"], json!({ "x-kubernetes-preserve-unknown-fields": true }));
    assert_eq!(v3["properties"]["extra"]["properties"]["a"]["type"], "string");
    // junctors go in v2, defaults too; v3 keeps both.
    assert!(v2["properties"]["choice"].get("anyOf").is_none());
    assert!(v3["properties"]["choice"].get("anyOf").is_some());
    assert!(v2["properties"]["color"].get("default").is_none());
    assert_eq!(v3["properties"]["color"]["default"], "red");
    assert_eq!(v2["properties"]["sizes"]["items"]["type"], "integer");
    // Embedded resources get type meta in v3 only when not preserved in v2.
    assert!(v3["properties"]["template"]["properties"]["metadata"].is_object());
    let required = v3["properties"]["template"]["required"].as_array().cloned().unwrap_or_default();
    assert!(required.contains(&json!("kind")) && required.contains(&json!("apiVersion")));
    assert!(v2["properties"]["template"].get("properties").is_none());
}

#[test]
fn schemaless_and_root_preserving_crds_get_the_permissive_definition() {
    let part = &crd_part_trees(&crd("Namespaced", None, Value::Null))[0];
    let gvk = json!([{ "group": "example.com", "kind": "Widget", "version": "v1" }]);
    for def in [&part.v2_definitions["com.example.v1.Widget"], &part.v3_schemas["com.example.v1.Widget"]] {
        assert_eq!(def, &json!({ "type": "object", "x-kubernetes-group-version-kind": gvk }));
    }
    let preserving = json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true });
    let part = &crd_part_trees(&crd("Namespaced", Some(preserving), Value::Null))[0];
    assert_eq!(
        part.v2_definitions["com.example.v1.Widget"],
        json!({ "type": "object", "x-kubernetes-group-version-kind": gvk })
    );
    assert!(part.v3_schemas["com.example.v1.Widget"]["properties"]["metadata"].is_object());
}

fn operation_ids(paths: &std::collections::BTreeMap<String, Value>) -> Vec<String> {
    let mut ids: Vec<String> = paths
        .values()
        .flat_map(|item| item.as_object().into_iter().flatten())
        .filter_map(|(_, op)| op.get("operationId").and_then(Value::as_str).map(str::to_owned))
        .collect();
    ids.sort();
    ids
}

#[test]
fn namespaced_paths_with_status_and_scale() {
    let part = &crd_part_trees(&full())[0];
    let paths: Vec<&String> = part.v2_paths.keys().collect();
    let ns = "/apis/example.com/v1/namespaces/{namespace}/widgets";
    assert_eq!(
        paths,
        [
            &ns.to_owned(),
            &format!("{ns}/{{name}}"),
            &format!("{ns}/{{name}}/scale"),
            &format!("{ns}/{{name}}/status"),
            &"/apis/example.com/v1/widgets".to_owned(),
        ]
    );
    assert_eq!(part.v3_paths.keys().collect::<Vec<_>>(), paths);
    assert_eq!(
        operation_ids(&part.v2_paths),
        [
            "createExampleComV1NamespacedWidget",
            "deleteExampleComV1CollectionNamespacedWidget",
            "deleteExampleComV1NamespacedWidget",
            "listExampleComV1NamespacedWidget",
            "listExampleComV1WidgetForAllNamespaces",
            "patchExampleComV1NamespacedWidget",
            "patchExampleComV1NamespacedWidgetScale",
            "patchExampleComV1NamespacedWidgetStatus",
            "readExampleComV1NamespacedWidget",
            "readExampleComV1NamespacedWidgetScale",
            "readExampleComV1NamespacedWidgetStatus",
            "replaceExampleComV1NamespacedWidget",
            "replaceExampleComV1NamespacedWidgetScale",
            "replaceExampleComV1NamespacedWidgetStatus",
        ]
    );
    let item = &part.v2_paths[&format!("{ns}/{{name}}")];
    let actions: Vec<(&str, &str)> = ["get", "put", "patch", "delete"]
        .iter()
        .map(|m| (*m, item[*m]["x-kubernetes-action"].as_str().unwrap_or_default()))
        .collect();
    assert_eq!(actions, [("get", "get"), ("put", "put"), ("patch", "patch"), ("delete", "delete")]);
    assert_eq!(
        item["get"]["x-kubernetes-group-version-kind"],
        json!({ "group": "example.com", "kind": "Widget", "version": "v1" })
    );
    assert_eq!(item["get"]["tags"], json!(["exampleCom_v1"]));
    let common: Vec<&str> =
        item["parameters"].as_array().into_iter().flatten().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(common, ["name", "namespace", "pretty"]);
    assert_eq!(item["get"]["responses"]["200"]["schema"]["$ref"], "#/definitions/com.example.v1.Widget");
    assert_eq!(item["get"]["responses"]["401"]["description"], "Unauthorized");
    let patch_params: Vec<&str> =
        item["patch"]["parameters"].as_array().into_iter().flatten().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(patch_params, ["body", "dryRun", "fieldManager", "fieldValidation", "force"]);
    assert_eq!(item["delete"]["parameters"][0]["required"], false);
    assert_eq!(
        item["delete"]["responses"]["202"]["schema"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Status"
    );
    let scale = &part.v2_paths[&format!("{ns}/{{name}}/scale")];
    assert_eq!(scale["put"]["responses"]["201"]["schema"]["$ref"], "#/definitions/io.k8s.api.autoscaling.v1.Scale");
    assert_eq!(scale["get"]["x-kubernetes-group-version-kind"]["kind"], "Widget");
    let v3_scale = &part.v3_paths[&format!("{ns}/{{name}}/scale")];
    assert_eq!(
        v3_scale["put"]["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/io.k8s.api.autoscaling.v1.Scale"
    );
    assert_eq!(
        v3_scale["patch"]["requestBody"]["content"]["application/apply-patch+yaml"]["schema"]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
    );
    // A path with one operation carries all its parameters itself.
    let all = &part.v3_paths["/apis/example.com/v1/widgets"];
    assert!(all["get"].get("parameters").is_none());
    assert_eq!(all["parameters"].as_array().map(Vec::len), Some(11));
    assert_eq!(all["get"]["x-kubernetes-action"], "list");
}

#[test]
fn cluster_scoped_paths() {
    let part = &crd_part_trees(&crd("Cluster", Some(widget_schema()), Value::Null))[0];
    let paths: Vec<&str> = part.v2_paths.keys().map(String::as_str).collect();
    assert_eq!(paths, ["/apis/example.com/v1/widgets", "/apis/example.com/v1/widgets/{name}"]);
    assert_eq!(
        operation_ids(&part.v2_paths),
        [
            "createExampleComV1Widget",
            "deleteExampleComV1CollectionWidget",
            "deleteExampleComV1Widget",
            "listExampleComV1Widget",
            "patchExampleComV1Widget",
            "readExampleComV1Widget",
            "replaceExampleComV1Widget",
        ]
    );
    let collection = &part.v2_paths["/apis/example.com/v1/widgets"];
    assert_eq!(collection["post"]["description"], "create a Widget");
    assert_eq!(collection["delete"]["description"], "delete collection of Widget");
    assert_eq!(collection["post"]["consumes"], json!(["application/json", "application/yaml"]));
    let common: Vec<&str> =
        collection["parameters"].as_array().into_iter().flatten().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(common, ["pretty"]);
}

#[test]
fn operation_ids_follow_kube() {
    assert_eq!(routes::valid_id("cert-manager.io", true), "CertManagerIo");
    assert_eq!(routes::valid_id("stable.example.com", false), "stableExampleCom");
    assert_eq!(routes::valid_id("v1beta1", true), "V1beta1");
}

#[test]
fn publisher_computes_once_per_resource_version() {
    let openapi = Arc::new(OpenApi::new(Vec::new()));
    let publisher = Publisher::new(openapi.clone());
    let widget = full();
    publisher.publish([&widget]);
    let doc = openapi.v3_group_version("apis/example.com/v1").expect("published");
    let parsed: Value = serde_json::from_slice(&doc).expect("json");
    assert!(parsed["components"]["schemas"]["com.example.v1.Widget"].is_object());
    assert!(parsed["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
    assert!(parsed["components"]["schemas"]["io.k8s.api.autoscaling.v1.Scale"].is_object());
    let hash = openapi.v3_hash("apis/example.com/v1").expect("hash");
    publisher.publish([&widget]);
    assert_eq!(openapi.v3_hash("apis/example.com/v1"), Some(hash));
    let index: Value = serde_json::from_slice(&openapi.v3_index()).expect("json");
    assert!(index["paths"]["apis/example.com/v1"]["serverRelativeURL"].is_string());
    let v2: Value = serde_json::from_slice(&openapi.v2()).expect("json");
    assert!(v2["definitions"]["com.example.v1.WidgetList"].is_object());
    assert!(v2["paths"]["/apis/example.com/v1/widgets"].is_object());
    publisher.publish([]);
    assert!(openapi.v3_group_version("apis/example.com/v1").is_none());
    let v2: Value = serde_json::from_slice(&openapi.v2()).expect("json");
    assert!(v2["definitions"].get("com.example.v1.Widget").is_none());
}

/// Rebuild costs with many CRDs (`KAPI_OPENAPI_CRDS`, default 2000, ten kinds per group
/// version) over the full built-in catalog: `cargo test -p kapi-apiextensions-apiserver
/// --release -- --ignored --nocapture rebuild_cost`.
#[test]
#[ignore = "measurement; run by hand"]
fn rebuild_cost_with_many_crds() {
    let n: usize = std::env::var("KAPI_OPENAPI_CRDS").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    let openapi = Arc::new(OpenApi::new(kapi_server::handlers::openapi::served_resources()));
    openapi.warm();
    let make = |i: usize, rv: &str| {
        let mut c = full();
        c["metadata"]["name"] = json!(format!("widget{i}s.g{}.example.com", i / 10));
        c["metadata"]["resourceVersion"] = json!(rv);
        c["spec"]["group"] = json!(format!("g{}.example.com", i / 10));
        c["spec"]["names"] = json!({ "kind": format!("Widget{i}"), "plural": format!("widget{i}s") });
        c
    };
    let crds: Vec<Value> = (0..n).map(|i| make(i, "1")).collect();
    let publisher = Publisher::new(openapi.clone());
    let timed = |what: &str, f: &mut dyn FnMut() -> usize| {
        let started = std::time::Instant::now();
        let size = f();
        eprintln!("{n} CRDs: {what}: {:?} ({size} bytes)", started.elapsed());
    };
    timed("publish all (parts)", &mut || {
        publisher.publish(crds.iter());
        0
    });
    timed("v3 index (every group-version document)", &mut || openapi.v3_index().len());
    timed("v2", &mut || openapi.v2().len());
    timed("v2 protobuf", &mut || openapi.v2_protobuf().len());
    let mut changed = crds.clone();
    changed[5] = make(5, "2");
    changed[5]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = json!("A changed widget.");
    timed("publish after one CRD changed", &mut || {
        publisher.publish(changed.iter());
        0
    });
    timed("v3 index after the change (one document rebuilt)", &mut || openapi.v3_index().len());
    timed("one group-version document (cached)", &mut || {
        openapi.v3_group_version("apis/g0.example.com/v1").map_or(0, |d| d.len())
    });
    timed("v2 after the change", &mut || openapi.v2().len());
    timed("v2 again (cached)", &mut || openapi.v2().len());
}
