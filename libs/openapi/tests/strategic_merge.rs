//! The strategic-merge-patch table: every case in `smp_cases.json` (original, patch, and the
//! object or error kube-apiserver produces) against the built-in kinds' real schemas.

use kapi_apimachinery::strategic_merge::strategic_merge;
use serde_json::Value;

fn cases() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/smp_cases.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {path}: {e}"))
}

/// Splits `io.k8s.api.apps.v1.Deployment` into the group, version and kind kube serves it as.
fn gvk(definition: &str) -> (String, String, String) {
    let parts: Vec<&str> = definition.split('.').collect();
    let kind = parts[parts.len() - 1].to_string();
    let version = parts[parts.len() - 2].to_string();
    let group = match parts[parts.len() - 3] {
        "core" => String::new(),
        g => g.to_string(),
    };
    (group, version, kind)
}

#[test]
fn every_case_matches_kube_apiserver() {
    let cases = cases();
    assert!(cases.len() >= 60, "the table has {} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap_or("?");
        let (group, version, kind) = gvk(case["definition"].as_str().expect("definition"));
        let schema = kapi_openapi::patch_schema(&group, &version, &kind)
            .unwrap_or_else(|| panic!("{name}: no schema for {group}/{version} {kind}"));
        let got = strategic_merge(&case["original"], &case["patch"], &schema);
        match (case.get("expected"), case.get("error").and_then(Value::as_str), got) {
            (Some(expected), _, Ok(got)) if &got == expected => {}
            (Some(expected), _, Ok(got)) => failures.push(format!("{name}:\n  expected {expected}\n  got      {got}")),
            (Some(_), _, Err(e)) => failures.push(format!("{name}: unexpected error {}", e.message)),
            (None, Some(want), Err(e)) if e.message.contains(want) && matches!(e.code, 400 | 422) => {}
            (None, Some(want), Err(e)) => {
                failures.push(format!("{name}: error {} {:?}, want one containing {want:?}", e.code, e.message))
            }
            (None, _, Ok(got)) => failures.push(format!("{name}: expected an error, got {got}")),
        (None, None, Err(e)) => failures.push(format!("{name}: neither expected nor error given; got error {}", e.message)),
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
