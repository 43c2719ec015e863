//! CRDs that must validate with zero causes.

use serde_json::{json, Value};

use super::fixtures::{create_messages, widget};

fn prometheus_operator(name: &str) -> Value {
    let path = format!("{}/src/validation/testdata/monitoring.coreos.com_{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

#[test]
fn minimal_widget_is_valid() {
    assert_eq!(create_messages(widget()), Vec::<String>::new());
}

#[test]
fn prometheus_operator_crds_are_valid() {
    for name in [
        "alertmanagerconfigs",
        "alertmanagers",
        "podmonitors",
        "probes",
        "prometheusagents",
        "prometheuses",
        "prometheusrules",
        "scrapeconfigs",
        "servicemonitors",
        "thanosrulers",
    ] {
        let got = create_messages(prometheus_operator(name));
        assert!(got.is_empty(), "{name}: {got:#?}");
    }
}

#[test]
fn defaults_fill_names_conversion_and_stored_versions() {
    let mut crd = widget();
    crate::validation::apply_defaults(&mut crd);
    assert_eq!(crd["spec"]["names"]["singular"], json!("widget"));
    assert_eq!(crd["spec"]["names"]["listKind"], json!("WidgetList"));
    assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));
}

/// A cert-manager-like Certificate: status subresource, printer columns, int-or-string,
/// list-type map with defaulted keys, embedded-free nested objects, CEL rules, enums.
fn certificate() -> Value {
    let mut crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "certificates.cert.example.io"},
        "spec": {
            "group": "cert.example.io",
            "scope": "Namespaced",
            "names": {"plural": "certificates", "singular": "certificate", "kind": "Certificate",
                      "listKind": "CertificateList", "shortNames": ["cert", "certs"], "categories": ["all", "certs"]},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Secret", "type": "string", "jsonPath": ".spec.secretName"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ],
                "selectableFields": [{"jsonPath": ".spec.secretName"}],
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "A Certificate requests a signed X.509 certificate.",
                    "required": ["spec"],
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": {},
                        "status": {}
                    }
                }}
            }]
        }
    });
    let props = &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
    props["spec"] = cert_spec_schema();
    props["status"] = cert_status_schema();
    crd
}

fn cert_spec_schema() -> Value {
    json!({
        "type": "object",
        "required": ["secretName", "issuerRef"],
        "x-kubernetes-validations": [
            {"rule": "!has(self.duration) || self.duration != ''", "message": "duration must not be empty"}
        ],
        "properties": {
            "secretName": {"type": "string", "minLength": 1},
            "commonName": {"type": "string", "maxLength": 64},
            "dnsNames": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "duration": {"type": "string", "pattern": "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"},
            "renewBefore": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "isCA": {"type": "boolean", "default": false},
            "privateKey": {"type": "object", "properties": {
                "algorithm": {"type": "string", "enum": ["RSA", "ECDSA", "Ed25519"], "default": "RSA"},
                "size": {"type": "integer", "format": "int32", "minimum": 256, "maximum": 8192}
            }},
            "issuerRef": {"type": "object", "required": ["name"], "x-kubernetes-map-type": "atomic", "properties": {
                "name": {"type": "string"}, "kind": {"type": "string"}, "group": {"type": "string"}
            }},
            "usages": {"type": "array", "items": {"type": "string", "enum": ["digital signature", "server auth", "client auth"]}},
            "secretTemplate": {"type": "object", "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}}
            }}
        }
    })
}

fn cert_status_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "conditions": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
                "items": {"type": "object", "required": ["type", "status"], "properties": {
                    "type": {"type": "string"},
                    "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                    "lastTransitionTime": {"type": "string", "format": "date-time"},
                    "message": {"type": "string"}
                }}
            },
            "notAfter": {"type": "string", "format": "date-time"},
            "revision": {"type": "integer"}
        }
    })
}

#[test]
fn certificate_is_valid() {
    assert_eq!(create_messages(certificate()), Vec::<String>::new());
}

/// Two served versions with different schemas, per-version columns and scale, and a webhook
/// conversion through a service.
fn app_two_versions() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "apps.platform.example.com"},
        "spec": {
            "group": "platform.example.com",
            "scope": "Namespaced",
            "names": {"plural": "apps", "kind": "App"},
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1", "v1beta1"],
                    "clientConfig": {"service": {"namespace": "platform", "name": "app-webhook", "path": "/convert"}}
                }
            },
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": true,
                    "storage": false,
                    "deprecated": true,
                    "deprecationWarning": "platform.example.com/v1alpha1 App is deprecated; use v1",
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"image": {"type": "string"}, "replicas": {"type": "integer"}}},
                        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }}},
                    "subresources": {"status": {}}
                },
                {
                    "name": "v1",
                    "served": true,
                    "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "required": ["template"], "properties": {
                            "replicas": {"type": "integer", "minimum": 0, "default": 1},
                            "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
                            "selector": {"type": "string"}
                        }},
                        "status": {"type": "object", "properties": {
                            "replicas": {"type": "integer"}, "selector": {"type": "string"}
                        }}
                    }}},
                    "subresources": {"status": {}, "scale": {
                        "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"
                    }},
                    "additionalPrinterColumns": [{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}]
                }
            ]
        }
    })
}

#[test]
fn app_with_two_versions_and_webhook_conversion_is_valid() {
    assert_eq!(create_messages(app_two_versions()), Vec::<String>::new());
}

#[test]
fn app_with_webhook_url_is_valid() {
    let mut crd = app_two_versions();
    crd["spec"]["conversion"]["webhook"]["clientConfig"] = json!({"url": "https://convert.example.com:8443/app"});
    assert_eq!(create_messages(crd), Vec::<String>::new());
}

/// The Go int-or-string idioms kube accepts: anyOf alone, and anyOf first in allOf.
#[test]
fn int_or_string_idioms_are_valid() {
    let crd = super::fixtures::widget_with_schema(json!({"type": "object", "properties": {
        "a": {"x-kubernetes-int-or-string": true},
        "b": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "c": {"x-kubernetes-int-or-string": true, "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"pattern": "^[0-9]+%?$"}]}
    }}));
    assert_eq!(create_messages(crd), Vec::<String>::new());
}
