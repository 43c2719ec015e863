//! Table convertor tests, after apiextensions-apiserver's `tableconvertor_test.go`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::TableConvertor;

/// 2024-03-01T12:00:00Z.
fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_709_294_400)
}

fn convertor(columns: Value) -> TableConvertor {
    match TableConvertor::new(&columns) {
        Ok(c) => c,
        Err(e) => panic!("{columns}: {e}"),
    }
}

fn column(name: &str, kind: &str, path: &str) -> Value {
    json!({"name": name, "type": kind, "jsonPath": path})
}

fn names(c: &TableConvertor) -> Vec<String> {
    c.column_definitions().iter().map(|d| d["name"].as_str().unwrap_or_default().to_owned()).collect()
}

#[test]
fn name_column_first_then_printer_columns() {
    let c = convertor(json!([
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas", "priority": 1, "description": "How many."},
        {"name": "Phase", "type": "string", "format": "byte", "jsonPath": ".status.phase"}
    ]));
    let defs = c.column_definitions();
    assert_eq!(defs.len(), 3);
    assert_eq!(defs[0]["name"], "Name");
    assert_eq!(defs[0]["type"], "string");
    assert_eq!(defs[0]["format"], "name");
    assert_eq!(defs[0]["priority"], 0);
    assert!(defs[0]["description"].as_str().unwrap_or_default().starts_with("Name must be unique within a namespace."));
    assert_eq!(
        defs[1],
        json!({"name": "Replicas", "type": "integer", "format": "", "description": "How many.", "priority": 1})
    );
    assert_eq!(
        defs[2],
        json!({"name": "Phase", "type": "string", "format": "byte",
               "description": "Custom resource definition column (in JSONPath format): .status.phase", "priority": 0})
    );
}

#[test]
fn default_columns_without_printer_columns() {
    for columns in [Value::Null, json!([])] {
        let c = convertor(columns);
        assert_eq!(names(&c), ["Name", "Age"]);
        let age = &c.column_definitions()[1];
        assert_eq!(age["type"], "date");
        assert_eq!(age["format"], "");
        assert!(age["description"].as_str().unwrap_or_default().starts_with("CreationTimestamp is a timestamp"));
        let obj = json!({"metadata": {"name": "a", "creationTimestamp": "2024-03-01T09:00:00Z"}});
        assert_eq!(c.cells_at(&obj, now()), vec![json!("a"), json!("3h")]);
    }
}

#[test]
fn bad_columns() {
    let columns = json!([column("A", "string", ".a"), column("B", "string", ".b[x]"), column("C", "string", ".c")]);
    assert_eq!(TableConvertor::new(&columns).err(), Some(r#"unrecognized column definition ".b[x]""#.to_owned()));
    // kube keeps serving the columns before the bad one.
    let (c, err) = TableConvertor::with_fallback(&columns);
    assert!(err.is_some());
    assert_eq!(names(&c), ["Name", "A"]);
    assert!(TableConvertor::new(&json!({"not": "a list"})).is_err());
}

#[test]
fn scale_columns() {
    assert_eq!(names(&TableConvertor::scale(true, true)), ["Name", "Desired", "Available", "Age"]);
    assert_eq!(names(&TableConvertor::scale(true, false)), ["Name", "Desired", "Age"]);
    assert_eq!(names(&TableConvertor::scale(false, false)), ["Name", "Age"]);
    let scale = json!({"metadata": {"name": "s"}, "spec": {"replicas": 3}, "status": {"replicas": 2}});
    assert_eq!(TableConvertor::scale(true, true).cells_at(&scale, now())[..3], [json!("s"), json!(3), json!(2)]);
}

#[test]
fn cells_of_each_type() {
    let c = convertor(json!([
        column("I", "integer", ".spec.i"),
        column("IF", "integer", ".spec.f"),
        column("N", "number", ".spec.f"),
        column("NI", "number", ".spec.i"),
        column("B", "boolean", ".spec.b"),
        column("S", "string", ".spec.s"),
        column("D", "date", ".spec.d"),
    ]));
    let obj = json!({"metadata": {"name": "x"},
                     "spec": {"i": 42, "f": 2.75, "b": true, "s": "foo", "d": "2024-02-28T11:30:00Z"}});
    assert_eq!(
        c.cells_at(&obj, now()),
        vec![json!("x"), json!(42), json!(2), json!(2.75), json!(42), json!(true), json!("foo"), json!("2d")]
    );
}

#[test]
fn type_mismatches_are_null() {
    let c = convertor(json!([
        column("I", "integer", ".v"),
        column("N", "number", ".v"),
        column("B", "boolean", ".v"),
        column("D", "date", ".v"),
        column("U", "unknown", ".v"),
    ]));
    for v in [json!(true), json!("foo"), json!({"a": 1})] {
        let cells = c.cells_at(&json!({"metadata": {"name": "x"}, "v": v}), now());
        let expected_bool = if v.is_boolean() { v.clone() } else { Value::Null };
        let expected_date = if v.is_string() { json!("<invalid>") } else { Value::Null };
        assert_eq!(cells, vec![json!("x"), Value::Null, Value::Null, expected_bool, expected_date, Value::Null]);
    }
}

#[test]
fn string_cells_print_any_value() {
    let c = convertor(json!([column("S", "string", ".v")]));
    let cell = |v: Value| c.cells_at(&json!({"metadata": {"name": "x"}, "v": v}), now()).pop().unwrap_or_default();
    assert_eq!(cell(json!(42)), json!("42"));
    assert_eq!(cell(json!(3.5)), json!("3.5"));
    assert_eq!(cell(json!(true)), json!("true"));
    assert_eq!(cell(json!(["bar", "baz"])), json!(r#"["bar","baz"]"#));
    assert_eq!(cell(json!({"b": 1, "a": "<x>"})), json!(r#"{"a":"\u003cx\u003e","b":1}"#));
    assert_eq!(cell(Value::Null), json!("<no value>"));
}

#[test]
fn multiple_results_take_the_first() {
    // tableconvertor_test.go's istio servers: only the first result of `[*]` is printed.
    let obj = json!({"metadata": {"name": "blah"},
                     "spec": {"servers": [{"hosts": ["foo"]}, {"hosts": ["bar", "baz"]}],
                              "foo": [{"bar": [1]}, {"bar": [2, 3]}]}});
    let strings = convertor(json!([
        column("valueOnly", "string", ".spec.servers[0].hosts[0]"),
        column("single1", "string", ".spec.servers[0].hosts"),
        column("single2", "string", ".spec.servers[1].hosts"),
        column("multi", "string", ".spec.servers[*].hosts"),
    ]));
    assert_eq!(
        strings.cells_at(&obj, now()),
        vec![json!("blah"), json!("foo"), json!(r#"["foo"]"#), json!(r#"["bar","baz"]"#), json!(r#"["foo"]"#)]
    );
    let ints = convertor(json!([
        column("valueOnly", "integer", ".spec.foo[0].bar[0]"),
        column("single1", "integer", ".spec.foo[0].bar"),
        column("single2", "integer", ".spec.foo[1].bar"),
        column("multi", "integer", ".spec.foo[*].bar"),
    ]));
    assert_eq!(ints.cells_at(&obj, now()), vec![json!("blah"), json!(1), Value::Null, Value::Null, Value::Null]);
}

#[test]
fn missing_values_and_errors_are_null() {
    let c = convertor(json!([
        column("Missing", "string", ".spec.nothing"),
        column("OutOfBounds", "integer", ".spec.items[5]"),
        column("Ready", "string", r#".status.conditions[?(@.type=="Ready")].status"#),
        column("Absent", "string", r#".status.conditions[?(@.type=="Absent")].status"#),
    ]));
    let obj = json!({"spec": {"items": [1]},
                     "status": {"conditions": [{"type": "Synced", "status": "True"}, {"type": "Ready", "status": "False"}]}});
    // No metadata.name: the Name cell is empty, as GetName() of such an object.
    assert_eq!(c.cells_at(&obj, now()), vec![json!(""), Value::Null, Value::Null, json!("False"), Value::Null]);
}

#[test]
fn date_cells() {
    let c = convertor(json!([column("D", "date", ".d")]));
    let cell = |d: &str| c.cells_at(&json!({"d": d}), now()).pop().unwrap_or_default();
    assert_eq!(cell("2024-03-01T11:30:00Z"), json!("30m"));
    assert_eq!(cell("2024-03-01T11:57:30Z"), json!("2m30s"));
    assert_eq!(cell("2024-03-01T11:59:59Z"), json!("1s"));
    assert_eq!(cell("2024-03-01T13:00:00+01:00"), json!("0s"));
    assert_eq!(cell("2024-03-01T12:00:01Z"), json!("0s"));
    assert_eq!(cell("2024-03-01T12:00:02Z"), json!("<invalid>"));
    assert_eq!(cell("2023-03-01T12:00:00Z"), json!("366d"));
    assert_eq!(cell("2020-03-01T12:00:00Z"), json!("4y1d"));
    assert_eq!(cell(""), json!("<unknown>"));
    assert_eq!(cell("0001-01-01T00:00:00Z"), json!("<unknown>"));
    assert_eq!(cell("yesterday"), json!("<invalid>"));
    // The clock defaults to now: a time far in the past is years old.
    assert_eq!(c.cells(&json!({"d": "2001-01-01T00:00:00Z"}))[1].as_str().map(|s| s.ends_with('y')), Some(true));
}
