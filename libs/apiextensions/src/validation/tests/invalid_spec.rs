//! Invalid CRDs outside the schema: names, versions, printer columns, subresources,
//! conversion, stored versions, approval.

use serde_json::json;

use super::fixtures::{assert_create, widget, widget_with_version_field};

#[test]
fn name_must_be_plural_dot_group() {
    let mut crd = widget();
    crd["metadata"]["name"] = json!("gadgets.example.com");
    assert_create(
        crd,
        &[r#"metadata.name: Invalid value: "gadgets.example.com": must be spec.names.plural+"."+spec.group"#],
    );
}

#[test]
fn group_needs_a_dot() {
    let mut crd = widget();
    crd["spec"]["group"] = json!("example");
    crd["metadata"]["name"] = json!("widgets.example");
    assert_create(crd, &[r#"spec.group: Invalid value: "example": should be a domain with at least one dot"#]);
}

#[test]
fn group_must_be_a_subdomain() {
    let mut crd = widget();
    crd["spec"]["group"] = json!("Example.com");
    crd["metadata"]["name"] = json!("widgets.Example.com");
    assert_create(
        crd,
        &[
            r#"metadata.name: Invalid value: "widgets.Example.com": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#,
            r#"spec.group: Invalid value: "Example.com": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#,
        ],
    );
}

#[test]
fn scope_is_enumerated() {
    let mut crd = widget();
    crd["spec"]["scope"] = json!("Global");
    assert_create(crd, &[r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#]);
    let mut crd = widget();
    crd["spec"].as_object_mut().unwrap().remove("scope");
    assert_create(crd, &["spec.scope: Required value"]);
}

/// Names are DNS-1035 labels (kind and listKind in any case) and kind differs from listKind.
#[test]
fn names_follow_dns_1035() {
    let mut crd = widget();
    crd["spec"]["names"] = json!({
        "plural": "widgets", "singular": "Widget", "kind": "Widget", "listKind": "Widget",
        "shortNames": ["w", "1w"], "categories": ["all", "My_Cat"]
    });
    // kube's RegexError really has two spaces before "or"
    let label = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
    assert_create(
        crd,
        &[
            &format!(r#"spec.names.singular: Invalid value: "Widget": {label}"#),
            &format!(r#"spec.names.shortNames[1]: Invalid value: "1w": {label}"#),
            r#"spec.names.listKind: Invalid value: "Widget": kind and listKind may not be the same"#,
            &format!(r#"spec.names.categories[1]: Invalid value: "My_Cat": {label}"#),
        ],
    );
}

/// Kube needs exactly one storage version; stored versions cannot be defaulted then.
#[test]
fn no_storage_version() {
    let mut c = widget();
    c["spec"]["versions"][0]["storage"] = json!(false);
    assert_create(
        c.clone(),
        &[
            &format!(
                "spec.versions: Invalid value: {}: must have exactly one version marked as storage version",
                c["spec"]["versions"]
            ),
            r#"status.storedVersions: Invalid value: null: must have at least one stored version"#,
        ],
    );
}

/// Two versions marked as storage, and the second is missing from storedVersions.
#[test]
fn two_storage_versions() {
    let mut c = widget();
    let v = c["spec"]["versions"][0].clone();
    let mut v2 = v.clone();
    v2["name"] = json!("v2");
    c["spec"]["versions"] = json!([v, v2]);
    assert_create(
        c.clone(),
        &[
            &format!(
                "spec.versions: Invalid value: {}: must have exactly one version marked as storage version",
                c["spec"]["versions"]
            ),
            r#"status.storedVersions: Invalid value: ["v1"]: must have the storage version v2"#,
        ],
    );
}

/// Version names must be unique.
#[test]
fn duplicate_version_names() {
    let mut c = widget();
    let v = c["spec"]["versions"][0].clone();
    let mut v2 = v.clone();
    v2["storage"] = json!(false);
    c["spec"]["versions"] = json!([v, v2]);
    assert_create(
        c.clone(),
        &[&format!("spec.versions: Invalid value: {}: must contain unique version names", c["spec"]["versions"])],
    );
}

/// Kube reports the first version twice: as versions[0].name and as the spec.version the conversion copies it to.
#[test]
fn version_name_must_be_dns_1035() {
    let mut c = widget();
    c["spec"]["versions"][0]["name"] = json!("V1");
    assert_create(
        c,
        &[
            r#"spec.versions[0].name: Invalid value: "V1": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#,
            r#"spec.version: Invalid value: "V1": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"#,
        ],
    );
}

/// Printer columns: closed type and format lists, a JSONPath starting with a dot, a name.
#[test]
fn printer_column_type_format_and_path() {
    assert_create(
        widget_with_version_field(
            "additionalPrinterColumns",
            json!([{"name": "Age", "type": "time", "format": "uuid", "jsonPath": "spec.replicas"}, {"type": "integer", "jsonPath": ".spec.replicas"}]),
        ),
        &[
            r#"spec.additionalPrinterColumns[0].type: Invalid value: "time": must be one of boolean,date,integer,number,string"#,
            r#"spec.additionalPrinterColumns[0].format: Invalid value: "uuid": must be one of byte,date,date-time,double,float,int32,int64,password"#,
            r#"spec.additionalPrinterColumns[0].JSONPath: Invalid value: "spec.replicas": must be a simple json path starting with ."#,
            r#"spec.additionalPrinterColumns[1].name: Required value"#,
        ],
    );
}

/// Scale paths must be simple paths under .spec / .status.
#[test]
fn scale_paths_under_spec_and_status() {
    assert_create(
        widget_with_version_field(
            "subresources",
            json!({"status": {}, "scale": {"specReplicasPath": ".status.replicas", "statusReplicasPath": "status.replicas", "labelSelectorPath": ".metadata.labels"}}),
        ),
        &[
            r#"spec.subresources.scale.specReplicasPath: Invalid value: ".status.replicas": should be a json path under .spec"#,
            r#"spec.subresources.scale.statusReplicasPath: Invalid value: "status.replicas": must be a simple json path starting with ."#,
            r#"spec.subresources.scale.labelSelectorPath: Invalid value: ".metadata.labels": should be a json path under either .spec or .status"#,
        ],
    );
}

/// The webhook strategy needs a client config and review versions (internal field names in the paths).
#[test]
fn webhook_strategy_needs_client_config_and_review_versions() {
    let mut c = widget();
    c["spec"]["conversion"] = json!({"strategy": "Webhook"});
    assert_create(
        c,
        &[
            r#"spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook"#,
            r#"spec.conversion.conversionReviewVersions: Required value"#,
        ],
    );
}

/// Https only, no user info, fragment or query; review versions must name one this server speaks.
#[test]
fn webhook_url_rules() {
    let mut c = widget();
    c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "http://user@example.com/convert?x=1#frag"}, "conversionReviewVersions": ["v2", "v2"]}});
    assert_create(
        c,
        &[
            r#"spec.conversion.webhookClientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]"#,
            r#"spec.conversion.webhookClientConfig.url: Invalid value: "user": user information is not permitted in the URL"#,
            r#"spec.conversion.webhookClientConfig.url: Invalid value: "frag": fragments are not permitted in the URL"#,
            r#"spec.conversion.webhookClientConfig.url: Invalid value: "x=1": query parameters are not permitted in the URL"#,
            r#"spec.conversion.conversionReviewVersions[1]: Invalid value: "v2": duplicate version"#,
            r#"spec.conversion.conversionReviewVersions: Invalid value: ["v2","v2"]: must include at least one of v1, v1beta1"#,
        ],
    );
}

/// Strategy None forbids webhook settings.
#[test]
fn none_strategy_forbids_webhook() {
    let mut c = widget();
    c["spec"]["conversion"] = json!({"strategy": "None", "webhook": {"clientConfig": {"url": "https://example.com"}, "conversionReviewVersions": ["v1"]}});
    assert_create(
        c,
        &[
            r#"spec.conversion.webhookClientConfig: Forbidden: should not be set when strategy is not set to Webhook"#,
            r#"spec.conversion.conversionReviewVersions: Forbidden: should not be set when strategy is not set to Webhook"#,
        ],
    );
}

/// A service reference needs a namespace and a path of DNS-subdomain segments (the port defaults to 443).
#[test]
fn webhook_service_rules() {
    let mut c = widget();
    c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"name": "conv", "path": "/Convert//x"}}, "conversionReviewVersions": ["v1"]}});
    assert_create(
        c,
        &[
            r#"spec.conversion.webhookClientConfig.service.namespace: Required value"#,
            r#"spec.conversion.webhookClientConfig.service.path: Invalid value: "/Convert//x": segment[0]: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"#,
            r#"spec.conversion.webhookClientConfig.service.path: Invalid value: "/Convert//x": segment[1] may not be empty"#,
        ],
    );
}

/// Url and service are mutually exclusive.
#[test]
fn webhook_url_and_service_exclusive() {
    let mut c = widget();
    c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://x.example.com", "service": {"name": "a", "namespace": "b"}}, "conversionReviewVersions": ["v1"]}});
    assert_create(
        c,
        &[r#"spec.conversion.webhookClientConfig: Required value: exactly one of url or service is required"#],
    );
}

/// A deprecation warning only on deprecated versions.
#[test]
fn deprecation_warning_needs_deprecated() {
    assert_create(
        widget_with_version_field("deprecationWarning", json!("old")),
        &[r#"spec.versions[0].deprecationWarning: Invalid value: "old": can only be set for deprecated versions"#],
    );
}

/// A deprecation warning must be printable.
#[test]
fn deprecation_warning_printable() {
    let mut c = widget();
    c["spec"]["versions"][0]["deprecated"] = json!(true);
    c["spec"]["versions"][0]["deprecationWarning"] = json!("a\tb");
    assert_create(
        c,
        &[
            r#"spec.versions[0].deprecationWarning: Invalid value: "a\tb": must only contain printable UTF-8 characters; non-printable character found at index 1"#,
        ],
    );
}

/// *.k8s.io groups need the API approval annotation.
#[test]
fn protected_group_needs_approval() {
    let mut c = widget();
    c["spec"]["group"] = json!("apps.k8s.io");
    c["metadata"]["name"] = json!("widgets.apps.k8s.io");
    assert_create(
        c,
        &[
            r#"metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation "api-approved.kubernetes.io", see https://github.com/kubernetes/enhancements/pull/1111"#,
        ],
    );
}

/// The approval annotation is a URL or starts with "unapproved".
#[test]
fn protected_group_approval_must_be_url_or_unapproved() {
    let mut c = widget();
    c["spec"]["group"] = json!("apps.k8s.io");
    c["metadata"]["name"] = json!("widgets.apps.k8s.io");
    c["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": "yes"});
    assert_create(
        c,
        &[
            r#"metadata.annotations[api-approved.kubernetes.io]: Invalid value: "yes": protected groups must have approval annotation "api-approved.kubernetes.io" with either a URL or a reason starting with "unapproved", see https://github.com/kubernetes/enhancements/pull/1111"#,
        ],
    );
}

/// V1 CRDs cannot turn pruning off.
#[test]
fn preserve_unknown_fields_true_is_rejected() {
    let mut c = widget();
    c["spec"]["preserveUnknownFields"] = json!(true);
    assert_create(
        c,
        &[
            r#"spec.preserveUnknownFields: Invalid value: true: must be false in order to use defaults in the schema"#,
            r#"spec.preserveUnknownFields: Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"#,
        ],
    );
}

/// Selectable fields: resolvable, scalar, unique, no array notation.
#[test]
fn selectable_field_rules() {
    assert_create(
        widget_with_version_field(
            "selectableFields",
            json!([{"jsonPath": ".metadata.name"}, {"jsonPath": ".spec"}, {"jsonPath": ".spec.replicas"}, {"jsonPath": ".spec.replicas"}, {"jsonPath": ".spec['x']"}, {"jsonPath": ".spec.nope"}, {"jsonPath": ""}]),
        ),
        &[
            r#"spec.selectableFields[0].jsonPath: Invalid value: ".metadata.name": is an invalid path: does not refer to a valid field"#,
            r#"spec.selectableFields[1].jsonPath: Invalid value: ".spec": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."#,
            r#"spec.selectableFields[3].jsonPath: Duplicate value: ".spec.replicas""#,
            r#"spec.selectableFields[4].jsonPath: Invalid value: ".spec['x']": is an invalid path: array notation is not allowed"#,
            r#"spec.selectableFields[5].jsonPath: Invalid value: ".spec.nope": is an invalid path: does not refer to a valid field"#,
            r#"spec.selectableFields[6].jsonPath: Required value"#,
        ],
    );
}

/// Every version needs a schema.
#[test]
fn schema_required() {
    let mut c = widget();
    c["spec"]["versions"][0].as_object_mut().unwrap().remove("schema");
    assert_create(c, &[r#"spec.versions[0].schema.openAPIV3Schema: Required value"#]);
}

/// When versions differ, schemas are not hoisted and paths stay per-version.
#[test]
fn differing_schemas_keep_per_version_paths() {
    let mut c = widget();
    let v = c["spec"]["versions"][0].clone();
    let mut v2 = v.clone();
    v2["name"] = json!("v2");
    v2["storage"] = json!(false);
    v2["schema"]["openAPIV3Schema"]["properties"]["spec"] = json!({"properties": {"a": {"type": "string"}}});
    c["spec"]["versions"] = json!([v, v2]);
    assert_create(
        c,
        &[
            r#"spec.versions[1].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"#,
        ],
    );
}

/// A stored version cannot leave spec.versions.
#[test]
fn stored_version_missing_from_spec() {
    let mut c = widget();
    c["status"] = json!({"storedVersions": ["v1", "v0"]});
    assert_create(
        c,
        &[
            r#"status.storedVersions[1]: Invalid value: "v0": missing from spec.versions; v0 was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in v0 and removes v0 from status.storedVersions"#,
        ],
    );
}
