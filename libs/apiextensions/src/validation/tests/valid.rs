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
