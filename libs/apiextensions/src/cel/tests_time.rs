//! Durations and timestamps: formatted strings as `self`, the functions, operators and getters,
//! compile errors and run-time failures with kube's (cel-go's) messages.

use serde_json::{json, Value};

use super::{validate_crd_schema, CelValidator};
use crate::schema::Structural;

fn props() -> Value {
    json!({
        "request": {"type": "string", "format": "duration"},
        "backendRequest": {"type": "string", "format": "duration"},
        "notBefore": {"type": "string", "format": "date-time"},
        "notAfter": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "s": {"type": "string"}
    })
}

fn schema(rules: Value) -> Value {
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props(), "x-kubernetes-validations": rules}}})
}

fn run(rule: &str, spec: Value) -> Vec<String> {
    let v = CelValidator::new(&Structural::new(&schema(json!([{"rule": rule}]))).expect("schema"));
    v.validate(&json!({"spec": spec})).into_iter().map(|c| c.message).collect()
}

fn holds(rule: &str, spec: Value) -> bool {
    let m = run(rule, spec);
    assert!(m.iter().all(|x| x.contains("failed rule")), "{rule}: {m:?}");
    m.is_empty()
}

fn compile_errors(rule: &str) -> Vec<String> {
    validate_crd_schema(&schema(json!([{"rule": rule}])), "s", false).into_iter().map(|c| c.message).collect()
}

const GATEWAY_RULE: &str = "!(has(self.request) && has(self.backendRequest) && duration(self.request) != duration('0s') && duration(self.backendRequest) > duration(self.request))";

#[test]
fn gateway_timeouts_rule() {
    assert_eq!(compile_errors(GATEWAY_RULE), Vec::<String>::new());
    assert!(holds(GATEWAY_RULE, json!({"request": "10s", "backendRequest": "5s"})));
    assert!(holds(GATEWAY_RULE, json!({"request": "0s", "backendRequest": "1h"})));
    assert!(holds(GATEWAY_RULE, json!({"backendRequest": "1h"})));
    assert!(!holds(GATEWAY_RULE, json!({"request": "1m", "backendRequest": "1m0.001s"})));
}

#[test]
fn formatted_strings_are_durations_and_timestamps() {
    let spec = json!({"request": "3 days", "notBefore": "2024-01-01T10:00:00+02:00", "notAfter": "2024-01-01T08:00:01Z", "day": "2024-02-29"});
    assert!(holds("self.request == duration('72h') && self.notAfter > self.notBefore", spec.clone()));
    assert!(holds("timestamp(self.notAfter) > timestamp(self.notBefore)", spec.clone()));
    assert!(holds("self.notAfter - self.notBefore == duration('1s')", spec.clone()));
    assert!(holds("self.day == timestamp('2024-02-29T00:00:00Z')", spec.clone()));
    assert!(holds("self.notBefore.getHours() == 10 && self.notBefore.getHours('UTC') == 8", spec.clone()));
    assert!(!holds("self.notBefore > self.notAfter", spec));
    // a local date-time is UTC; the empty string is the Unix epoch
    assert!(holds("int(self.notBefore) == 1704103200 && int(self.notAfter) == 0", json!({"notBefore": "2024-01-01T10:00:00", "notAfter": ""})));
}

#[test]
fn arithmetic_and_conversions() {
    for rule in [
        "timestamp('2024-01-01T00:00:00Z') + duration('24h') == timestamp('2024-01-02T00:00:00Z')",
        "duration('1h') + timestamp('2024-01-01T00:00:00Z') == timestamp('2024-01-01T01:00:00Z')",
        "timestamp('2024-01-02T00:00:00Z') - timestamp('2024-01-01T00:00:00Z') == duration('24h')",
        "timestamp('2024-01-02T00:00:00Z') - duration('1h') < timestamp('2024-01-02T00:00:00Z')",
        "duration('1h') - duration('30m') == duration('30m') && duration('1h') + duration('1m') > duration('1h')",
        "duration('-1.5s') < duration('0') && duration('1h') >= duration('60m') && duration('1s') <= duration('1000ms')",
        "string(duration('1h')) == '3600s' && string(duration('1.5s')) == '1.5s'",
        "string(timestamp('2024-01-01T00:00:00Z')) == '2024-01-01T00:00:00Z'",
        "int(timestamp('2024-01-01T00:00:00Z')) == 1704067200 && int(duration('1s')) == 1000000000",
        "timestamp(1704067200) == timestamp('2024-01-01T00:00:00Z') && duration(duration('1s')) == duration('1s')",
        "type(duration('1s')) == type(self.request) && type(timestamp('2024-01-01T00:00:00Z')) != type(self.request)",
    ] {
        assert!(holds(rule, json!({"request": "1s"})), "{rule}");
    }
}

#[test]
fn getters() {
    let t = "timestamp('2024-03-05T10:20:30.456Z')";
    for rule in [
        format!("{t}.getFullYear() == 2024 && {t}.getMonth() == 2 && {t}.getDate() == 5 && {t}.getDayOfMonth() == 4"),
        format!("{t}.getDayOfWeek() == 2 && {t}.getDayOfYear() == 64"),
        format!("{t}.getHours() == 10 && {t}.getMinutes() == 20 && {t}.getSeconds() == 30 && {t}.getMilliseconds() == 456"),
        format!("{t}.getHours('America/New_York') == 5 && {t}.getHours('+02:00') == 12 && {t}.getMinutes('-01:30') == 50"),
        format!("timestamp('2024-01-01T01:00:00Z').getFullYear('-02:00') == 2023 && {t}.getDayOfWeek('Asia/Tokyo') == 2"),
        "duration('1h30m').getHours() == 1 && duration('1h30m').getMinutes() == 90".to_string(),
        "duration('1h30m').getSeconds() == 5400 && duration('1.5s').getMilliseconds() == 1500".to_string(),
    ] {
        assert!(holds(&rule, json!({})), "{rule}");
    }
}

#[test]
fn transition_rule_on_timestamps() {
    let s = schema(json!([{"rule": "self.notAfter >= oldSelf.notAfter", "message": "notAfter may only move later"}]));
    let v = CelValidator::new(&Structural::new(&s).expect("schema"));
    let old = json!({"spec": {"notAfter": "2024-06-01T00:00:00Z"}});
    let later = json!({"spec": {"notAfter": "2024-06-01T00:00:00.5Z"}});
    assert!(v.validate_update(&later, &old).is_empty());
    let m: Vec<String> = v.validate_update(&old, &later).into_iter().map(|c| c.message).collect();
    assert_eq!(m, vec!["spec: Invalid value: notAfter may only move later"]);
}

#[test]
fn compile_errors_have_cel_go_messages() {
    let cases = [
        ("self.request > 1", "ERROR: <input>:1:14: found no matching overload for '_>_' applied to '(google.protobuf.Duration, int)'"),
        ("self.request - self.notBefore > self.request", "ERROR: <input>:1:14: found no matching overload for '_-_' applied to '(google.protobuf.Duration, google.protobuf.Timestamp)'"),
        ("self.notBefore + self.notAfter > self.notAfter", "ERROR: <input>:1:16: found no matching overload for '_+_' applied to '(google.protobuf.Timestamp, google.protobuf.Timestamp)'"),
        ("self.request.getFullYear() == 1", "ERROR: <input>:1:25: found no matching overload for 'getFullYear' applied to 'google.protobuf.Duration.()'"),
        ("duration(1) > self.request", "ERROR: <input>:1:9: found no matching overload for 'duration' applied to '(int)'"),
        ("self.s > self.request", "ERROR: <input>:1:8: found no matching overload for '_>_' applied to '(string, google.protobuf.Duration)'"),
        ("self.request < duration('1d')", "ERROR: <input>:1:25: invalid duration argument"),
        ("self.notAfter < timestamp('2024-13-01T00:00:00Z')", "ERROR: <input>:1:27: invalid timestamp argument"),
    ];
    for (rule, want) in cases {
        let m = compile_errors(rule);
        assert_eq!(m.len(), 1, "{rule}: {m:?}");
        assert!(m[0].contains(&format!("compilation failed: {want}\n")), "{rule}: {}", m[0]);
    }
}

#[test]
fn run_time_failures() {
    let m = run("duration(self.s) > duration('1s')", json!({"s": "soon"}));
    assert_eq!(m, vec!["spec: Invalid value: \"object\": type conversion error from 'string' to 'google.protobuf.Duration' evaluating rule: duration(self.s) > duration('1s')"]);
    let m = run("timestamp(self.s) > timestamp('2024-01-01T00:00:00Z')", json!({"s": "today"}));
    assert_eq!(m, vec!["spec: Invalid value: \"object\": type conversion error from 'string' to 'google.protobuf.Timestamp' evaluating rule: timestamp(self.s) > timestamp('2024-01-01T00:00:00Z')"]);
    let m = run("self.request > duration('1s')", json!({"request": "forever"}));
    assert_eq!(m, vec!["spec: Invalid value: \"object\": Invalid duration forever: unable to parse forever as duration evaluating rule: self.request > duration('1s')"]);
    assert!(run("timestamp('2024-01-01T00:00:00Z').getHours('Mars/Base') == 1", json!({}))[0].contains("evaluating rule"));
}
