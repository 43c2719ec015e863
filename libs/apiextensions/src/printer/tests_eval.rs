//! Evaluation tests, after client-go's `jsonpath_test.go` (results printed space-separated as
//! kube's `Execute` would, objects as Go JSON) and the selectable-field helper.

use serde_json::{json, Value};

use super::{field_value, gofmt, selectable_field_name, JsonPath};
use crate::gofmt::{go_json, go_quote};

/// Prints all results the way client-go's `PrintResults` does for one action.
fn run(path: &str, obj: &Value) -> String {
    let Ok(parsed) = JsonPath::parse(path) else { panic!("{path}: does not parse") };
    let texts: Vec<String> = parsed
        .find(obj)
        .iter()
        .map(|v| match &**v {
            Value::Array(_) | Value::Object(_) => go_json(v),
            Value::Null => "null".to_owned(),
            other => gofmt::sprint(other),
        })
        .collect();
    texts.join(" ")
}

/// The evaluation error of a path, missing keys allowed or not.
fn eval_err(path: &str, obj: &Value, allow_missing: bool) -> String {
    let Ok(parsed) = JsonPath::parse(path) else { panic!("{path}: does not parse") };
    match parsed.allow_missing_keys(allow_missing).find_results(obj) {
        Ok(results) => panic!("{path}: evaluated to {results:?}"),
        Err(e) => e,
    }
}

fn store() -> Value {
    json!({
        "Book": [
            {"Category": "reference", "Author": "Nigel Rees", "Title": "Sayings of the Centurey", "Price": 8.95},
            {"Category": "fiction", "Author": "Evelyn Waugh", "Title": "Sword of Honour", "Price": 12.99},
            {"Category": "fiction", "Author": "Herman Melville", "Title": "Moby Dick", "Price": 8.99}
        ],
        "Bicycle": [
            {"Color": "red", "Price": 19.95, "IsNew": true},
            {"Color": "green", "Price": 20.01, "IsNew": false}
        ],
        "Labels": {"engieer": 10, "web/html": 15, "k8s-app": 20},
        "Employees": {"jason": "manager", "dan": "clerk"}
    })
}

fn pod() -> Value {
    json!({
        "metadata": {"name": "web", "labels": {"app": "web", "kubernetes.io/hostname": "n1"}},
        "spec": {
            "replicas": 3,
            "containers": [{"name": "fake0"}, {"name": "fake1"}, {"name": "fake2"}, {"name": "fake3"}],
            "a": {"b": {"c": "nested"}, "b.c": "literal"}
        },
        "status": {
            "conditions": [
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "False", "reason": "Crash"},
                {"type": "Scheduled", "status": "True", "observed": null}
            ]
        }
    })
}

#[test]
fn nested_fields_and_missing_fields() {
    let obj = pod();
    assert_eq!(run(".spec.replicas", &obj), "3");
    assert_eq!(run(".metadata.labels.app", &obj), "web");
    assert_eq!(run(r".metadata.labels.kubernetes\.io/hostname", &obj), "n1");
    assert_eq!(run(".spec.missing", &obj), "");
    assert_eq!(run(".spec.replicas.deeper", &obj), "");
    assert_eq!(run(".", &obj), "");
    assert_eq!(eval_err(".spec.missing", &obj, false), "missing is not found");
    assert_eq!(eval_err("hello", &obj, true), "unrecognized identifier hello");
}

#[test]
fn client_go_store_results() {
    let obj = store();
    assert_eq!(run("$.Labels.web/html", &obj), "15");
    assert_eq!(run(".Labels.k8s-app", &obj), "20");
    assert_eq!(run("$.Employees.dan", &obj), "clerk");
    assert_eq!(run(".Bicycle[*].Color", &obj), "red green");
    assert_eq!(run(".Book[*].Author", &obj), "Nigel Rees Evelyn Waugh Herman Melville");
    assert_eq!(run("..Price", &obj), "8.95 12.99 8.99 19.95 20.01");
    assert_eq!(run("...Price", &obj), "8.95 12.99 8.99 19.95 20.01");
    assert_eq!(
        run(".Book[-1:]", &obj),
        r#"{"Author":"Herman Melville","Category":"fiction","Price":8.99,"Title":"Moby Dick"}"#
    );
    assert_eq!(run(".Bicycle[?(@.IsNew==true)].Color", &obj), "red");
    assert_eq!(run(".Book[?(@.Price<10.0)].Title", &obj), "Sayings of the Centurey Moby Dick");
    // Go compares float64 prices with the int literal 10 as incompatible types.
    assert_eq!(eval_err(".Book[?(@.Price<10)]", &obj, true), "incompatible types for comparison");
    assert_eq!(run(".Book[?(@.Category!='fiction')].Author", &obj), "Nigel Rees");
    assert_eq!(run(".Book[?(@.Price>=12.99)].Price", &obj), "12.99");
    assert_eq!(run(".Book[?(@.Price<=8.99)].Price", &obj), "8.95 8.99");
    assert_eq!(run(".Book[?(@.Price>9.0)].Price", &obj), "12.99");
    assert_eq!(eval_err(".Labels[0]", &obj, false), "map[string]interface {} is not array or slice");
    assert_eq!(eval_err(".Book[?(@.Price<>10)]", &obj, false), "unrecognized filter operator <>");
}

#[test]
fn indexes_slices_and_steps() {
    let obj = pod();
    let names = |p: &str| run(&format!(".spec.containers{p}.name"), &obj);
    assert_eq!(names("[0]"), "fake0");
    assert_eq!(names("[-1]"), "fake3");
    assert_eq!(names("[-4]"), "fake0");
    assert_eq!(names("[0:0]"), "");
    assert_eq!(names("[5:5]"), "");
    assert_eq!(names("[-5:-5]"), "");
    assert_eq!(names("[0:-1]"), "fake0 fake1 fake2");
    assert_eq!(names("[-2:]"), "fake2 fake3");
    assert_eq!(names("[1:3]"), "fake1 fake2");
    assert_eq!(names("[1:4:2]"), "fake1 fake3");
    assert_eq!(names("[::3]"), "fake0 fake3");
    assert_eq!(names("[]"), "fake0");
    assert_eq!(names("[*]"), "fake0 fake1 fake2 fake3");
    let err = |p: &str| eval_err(&format!(".spec.containers{p}.name"), &obj, false);
    assert_eq!(err("[4]"), "array index out of bounds: index 4, length 4");
    assert_eq!(err("[-5]"), "array index out of bounds: index -1, length 4");
    assert_eq!(err("[0:5]"), "array index out of bounds: index 4, length 4");
    assert_eq!(err("[-1:0]"), "starting index 3 is greater than ending index 0");
    assert_eq!(err("[3:1]"), "starting index 3 is greater than ending index 1");
    assert_eq!(err("[0:4:0]"), "step must be > 0");
    assert_eq!(err("[0:4:-1]"), "step must be > 0");
    assert_eq!(eval_err(".spec.replicas[0]", &obj, true), "int64 is not array or slice");
    assert_eq!(eval_err(".metadata.name[0]", &obj, true), "string is not array or slice");
}

#[test]
fn bracket_keys_and_unions() {
    let obj = pod();
    assert_eq!(run(".spec['replicas']", &obj), "3");
    // kube reads `['b.c']` as `.b.c`; only an escaped dot reaches the literal key.
    assert_eq!(run(".spec.a['b.c']", &obj), "nested");
    assert_eq!(run(r".spec.a['b\.c']", &obj), "literal");
    assert_eq!(run(".spec.containers[0,2].name", &obj), "fake0 fake2");
    assert_eq!(run(".metadata['name', 'labels.app']", &obj), "web web");
    assert_eq!(run("[0]['id']", &json!([{"id": "i1"}])), "i1");
}

#[test]
fn filters_on_conditions() {
    let obj = pod();
    assert_eq!(run(r#".status.conditions[?(@.type=="Ready")].status"#, &obj), "False");
    assert_eq!(run(r#".status.conditions[?(@.type == "Ready")].reason"#, &obj), "Crash");
    assert_eq!(run(r#".status.conditions[?(@.type=="Absent")].status"#, &obj), "");
    assert_eq!(run(".status.conditions[?(@.reason)].type", &obj), "Ready");
    // A null member exists.
    assert_eq!(run(".status.conditions[?(@.observed)].type", &obj), "Scheduled");
    assert_eq!(run(r#".status.conditions[?(@.status!="True")].type"#, &obj), "Ready");
    // Filtering a missing list finds nothing; filtering a non-list fails.
    assert_eq!(run(r#".status.missing[?(@.type=="Ready")]"#, &obj), "");
    assert_eq!(
        eval_err(r#".metadata.labels[?(@.x=="y")]"#, &obj, true),
        "map[app:web kubernetes.io/hostname:n1] is not array or slice and cannot be filtered"
    );
    // A missing operand skips the element unless missing keys are errors.
    assert_eq!(run(r#".status.conditions[?(@.reason=="Crash")].type"#, &obj), "Ready");
    assert_eq!(eval_err(r#".status.conditions[?(@.reason=="Crash")]"#, &obj, false), "reason is not found");
}

#[test]
fn filter_comparison_errors() {
    let obj = json!({"items": [{"n": 1, "f": 1.5, "s": "a", "b": true, "m": {}, "l": [1, 2], "z": null}]});
    let err = |f: &str| eval_err(&format!(".items[?({f})]"), &obj, true);
    assert_eq!(err("@.n==\"1\""), "incompatible types for comparison");
    assert_eq!(err("@.n==1.0"), "incompatible types for comparison");
    assert_eq!(err("@.m==1"), "invalid type for comparison");
    assert_eq!(err("@.z==1"), "invalid type for comparison");
    assert_eq!(err("@.b<true"), "invalid type for comparison");
    assert_eq!(err("@.l[*]==1"), "can only compare one element at a time");
    assert_eq!(run(".items[?(@.n==1)].s", &obj), "a");
    assert_eq!(run(".items[?(@.f>1.2)].s", &obj), "a");
    assert_eq!(run(".items[?(@.s<\"b\")].s", &obj), "a");
    assert_eq!(run(".items[?(@.b==true)].s", &obj), "a");
    assert_eq!(run(".items[?(@.n==@.n)].s", &obj), "a");
    // An existence test counts what a failing step handed back (kube's quirk).
    assert_eq!(run(".items[?(@.l[5])].s", &obj), "a");
}

#[test]
fn wildcards_and_recursive_descent() {
    let obj = json!({"a": {"x": 1, "y": [2, 3]}, "b": "", "c": {}});
    assert_eq!(run(".a.*", &obj), "1 [2,3]");
    assert_eq!(run(".a.y[*]", &obj), "2 3");
    assert_eq!(run("..", &json!([1, 2, 3])), "[1,2,3]");
    // Leaves and empty containers are not results of `..` themselves.
    assert_eq!(run("..x", &obj), "1");
    let users = json!({"users": [{"name": "myself", "user": {}}, {"name": "e2e", "user": {"password": "s"}}]});
    assert_eq!(run("..name", &users), "myself e2e");
    assert_eq!(run(r#".users[?(@.name=="e2e")].user.password"#, &users), "s");
}

#[test]
fn literal_and_null_results() {
    let obj = json!({"x": null, "items": [{"x": null}]});
    let Ok(path) = JsonPath::parse(".x") else { panic!("parse") };
    assert_eq!(path.find(&obj).len(), 1);
    assert_eq!(run("[-1]['x']", &json!([{"x": 4}, {"x": null}])), "null");
    // Null is skipped when stepping through it.
    assert_eq!(run(".x.y", &obj), "");
    assert_eq!(run(".x[0]", &obj), "");
    assert_eq!(run(r#""text""#, &obj), "text");
    let Ok(template) = JsonPath::parse_template("a {.items[0].x} b") else { panic!("parse") };
    assert_eq!(template.find_results(&obj).map(|r| r.len()), Ok(3));
}

#[test]
fn selectable_field_values() {
    let obj = json!({"spec": {"color": "blue", "size": 3, "ok": true, "ratio": 0.5, "none": null,
                              "list": [1, 2], "map": {"b": 1, "a": "x"}}});
    let value = |p: &str| JsonPath::parse(p).and_then(|path| field_value(&path, &obj));
    assert_eq!(value(".spec.color"), Ok("blue".to_owned()));
    assert_eq!(value(".spec.size"), Ok("3".to_owned()));
    assert_eq!(value(".spec.ok"), Ok("true".to_owned()));
    assert_eq!(value(".spec.ratio"), Ok("0.5".to_owned()));
    assert_eq!(value(".spec.none"), Ok(String::new()));
    assert_eq!(value(".spec.missing"), Ok(String::new()));
    assert_eq!(value(".spec.list"), Ok("[1 2]".to_owned()));
    assert_eq!(value(".spec.map"), Ok("map[a:x b:1]".to_owned()));
    assert_eq!(value(".spec.list[*]"), Err("unexpectedly received more than one JSON path result".to_owned()));
    assert_eq!(
        value(".spec.color[0]"),
        Err("unexpected error finding value with jsonPath: string is not array or slice".to_owned())
    );
    assert_eq!(selectable_field_name(".spec.color"), "spec.color");
    assert_eq!(selectable_field_name("spec.color"), "spec.color");
}

#[test]
fn go_number_forms() {
    let sprint = |v: Value| gofmt::sprint(&v);
    assert_eq!(sprint(json!(1e6)), "1e+06");
    assert_eq!(sprint(json!(123456.0)), "123456");
    assert_eq!(sprint(json!(1.5e-5)), "1.5e-05");
    assert_eq!(sprint(json!(0.0001)), "0.0001");
    assert_eq!(sprint(json!(-2.5)), "-2.5");
    assert_eq!(sprint(json!(u64::MAX)), "1.8446744073709552e+19");
    let marshal = |v: Value| go_json(&v);
    assert_eq!(marshal(json!([1e21, 1e20, 1e-7, 0.5])), "[1e+21,100000000000000000000,1e-7,0.5]");
    assert_eq!(
        marshal(json!({"b": "<a&b>", "a": "\u{2028}\n\u{1}"})),
        r#"{"a":"\u2028\n\u0001","b":"\u003ca\u0026b\u003e"}"#
    );
    assert_eq!(go_quote("a\"b\u{1}é"), r#""a\"b\x01é""#);
}
