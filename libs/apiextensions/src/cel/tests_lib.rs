//! Run-time checks: each library family, transition rules, messages, reasons, field paths,
//! map-list correlation and the cost budget, with kube's messages.

use serde_json::{json, Value};

use super::CelValidator;
use crate::schema::Structural;

fn validator(props: Value, rules: Value) -> CelValidator {
    let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props, "x-kubernetes-validations": rules}}});
    CelValidator::new(&Structural::new(&s).expect("schema"))
}

fn msgs(v: &CelValidator, spec: Value) -> Vec<String> {
    v.validate(&json!({"spec": spec})).into_iter().map(|c| c.message).collect()
}

fn ok(props: Value, rule: &str, spec: Value) -> bool {
    let v = validator(props, json!([{"rule": rule}]));
    let m = msgs(&v, spec);
    assert!(m.len() <= 1 && m.iter().all(|x| x.contains("failed rule")), "{rule}: {m:?}");
    m.is_empty()
}

#[test]
fn default_message_omits_object_value() {
    let v = validator(json!({"a": {"type": "integer"}}), json!([{"rule": "self.a > 1"}]));
    assert_eq!(msgs(&v, json!({"a": 1})), vec!["spec: Invalid value: failed rule: self.a > 1"]);
    assert!(msgs(&v, json!({"a": 2})).is_empty());
}

#[test]
fn scalar_value_is_printed() {
    let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string", "x-kubernetes-validations": [{"rule": "self == 'x'"}]}}}}});
    let v = CelValidator::new(&Structural::new(&s).expect("schema"));
    let m: Vec<String> = v.validate(&json!({"spec": {"x": "y"}})).into_iter().map(|c| c.message).collect();
    assert_eq!(m, vec![r#"spec.x: Invalid value: "y": failed rule: self == 'x'"#]);
}

#[test]
fn message_expression_reason_and_field_path() {
    let v = validator(
        json!({"a": {"type": "integer"}}),
        json!([
            {"rule": "self.a > 1", "message": "a must be big"},
            {"rule": "self.a > 1", "messageExpression": "'a is ' + string(self.a)"},
            {"rule": "self.a > 1", "reason": "FieldValueForbidden", "fieldPath": ".a", "message": "no"},
            {"rule": "self.a > 1", "reason": "FieldValueRequired"},
            {"rule": "self.a > 1", "reason": "FieldValueDuplicate"}
        ]),
    );
    let c = v.validate(&json!({"spec": {"a": 1}}));
    let m: Vec<&str> = c.iter().map(|c| c.message.as_str()).collect();
    assert_eq!(
        m,
        vec![
            "spec: Invalid value: a must be big",
            "spec: Invalid value: a is 1",
            "spec.a: Forbidden: no",
            "spec: Required value: failed rule: self.a > 1",
            "spec: Duplicate value",
        ]
    );
    assert_eq!(c[2].field, "spec.a");
    assert_eq!(c[2].reason, "FieldValueForbidden");
}

#[test]
fn transition_rule_runs_only_on_update() {
    let v = validator(
        json!({"a": {"type": "string"}}),
        json!([{"rule": "self.a == oldSelf.a", "message": "a is immutable"}]),
    );
    assert!(msgs(&v, json!({"a": "x"})).is_empty());
    let m: Vec<String> = v
        .validate_update(&json!({"spec": {"a": "y"}}), &json!({"spec": {"a": "x"}}))
        .into_iter()
        .map(|c| c.message)
        .collect();
    assert_eq!(m, vec!["spec: Invalid value: a is immutable"]);
}

#[test]
fn optional_old_self_sees_none_on_create() {
    let v = validator(
        json!({"a": {"type": "string"}}),
        json!([{"rule": "oldSelf.hasValue() || self.a == 'init'", "optionalOldSelf": true}]),
    );
    assert_eq!(
        msgs(&v, json!({"a": "x"})),
        vec!["spec: Invalid value: failed rule: oldSelf.hasValue() || self.a == 'init'"]
    );
    assert!(msgs(&v, json!({"a": "init"})).is_empty());
    assert!(v.validate_update(&json!({"spec": {"a": "x"}}), &json!({"spec": {"a": "y"}})).is_empty());
}

#[test]
fn ratcheting_drops_errors_on_unchanged_values() {
    let v = validator(json!({"a": {"type": "integer"}}), json!([{"rule": "self.a > 1"}]));
    assert!(v.validate_update(&json!({"spec": {"a": 1}}), &json!({"spec": {"a": 1}})).is_empty());
    assert_eq!(v.validate_update(&json!({"spec": {"a": 0}}), &json!({"spec": {"a": 1}})).len(), 1);
}

#[test]
fn map_list_items_correlate_by_key() {
    let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"items": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.v >= oldSelf.v", "message": "v may not decrease"}]}}}}}});
    let v = CelValidator::new(&Structural::new(&s).expect("schema"));
    let old = json!({"spec": {"items": [{"name": "a", "v": 2}, {"name": "b", "v": 2}]}});
    let new = json!({"spec": {"items": [{"name": "b", "v": 1}, {"name": "c", "v": 0}, {"name": "a", "v": 3}]}});
    let m: Vec<String> = v.validate_update(&new, &old).into_iter().map(|c| c.message).collect();
    assert_eq!(m, vec!["spec.items[0]: Invalid value: v may not decrease"]);
}

#[test]
fn runtime_budget_exhaustion() {
    let props = json!({"l": {"type": "array", "items": {"type": "string"}}});
    let v = validator(props, json!([{"rule": "self.l.all(x, self.l.all(y, x.contains(y)))"}]));
    let l: Vec<String> = (0..1100).map(|i| format!("s{i}")).collect();
    let m = msgs(&v, json!({"l": l}));
    assert_eq!(m, vec!["spec: Invalid value: \"object\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.l.all(x, self.l.all(y, x.contains(y)))"]);
    let many = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"m": {"type": "object",
        "additionalProperties": {"type": "array", "items": {"type": "string"}, "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x != y || true))"}]}}}}}});
    let v = CelValidator::new(&Structural::new(&many).expect("schema"));
    let l: Vec<String> = (0..400).map(|i| format!("s{i}")).collect();
    let obj: serde_json::Map<String, Value> = (0..40).map(|i| (format!("k{i:02}"), json!(l))).collect();
    let m: Vec<String> = v.validate(&json!({"spec": {"m": obj}})).into_iter().map(|c| c.message).collect();
    assert!(
        m.last().is_some_and(|x| x
            .ends_with("validation failed due to running out of cost budget, no further validation rules will be run")),
        "{m:?}"
    );
}

#[test]
fn macros_and_strings() {
    let p = json!({"l": {"type": "array", "items": {"type": "string"}}, "s": {"type": "string"}});
    let spec = json!({"l": ["a", "bb"], "s": " Hello, World "});
    for rule in [
        "self.l.all(x, size(x) > 0) && self.l.exists(x, x == 'bb') && self.l.exists_one(x, x == 'a')",
        "self.l.map(x, x + '!') == ['a!', 'bb!'] && self.l.filter(x, size(x) > 1) == ['bb'] && has(self.s)",
        "self.s.trim().lowerAscii() == 'hello, world' && self.s.upperAscii().contains('HELLO')",
        "self.s.split(',').size() == 2 && ['a', 'b'].join('-') == 'a-b' && self.s.replace('l', 'L').indexOf('L') == 3",
        "self.s.trim().substring(0, 5) == 'Hello' && 'x-%s'.format(['y']) == 'x-y'",
        "self.s.matches('^ H') && self.s.find('[A-Z][a-z]+') == 'Hello' && self.s.findAll('o').size() == 2",
    ] {
        assert!(ok(p.clone(), rule, spec.clone()), "{rule}");
    }
}

#[test]
fn lists_library() {
    let p = json!({"l": {"type": "array", "items": {"type": "integer"}}});
    let spec = json!({"l": [1, 2, 3, 2]});
    assert!(ok(p.clone(), "self.l.sum() == 8 && self.l.min() == 1 && self.l.max() == 3", spec.clone()));
    assert!(ok(p.clone(), "self.l.indexOf(2) == 1 && self.l.lastIndexOf(2) == 3 && [1, 2].isSorted()", spec.clone()));
    assert!(!ok(p, "self.l.isSorted()", spec));
}

#[test]
fn url_library() {
    let p = json!({"u": {"type": "string"}});
    let spec = json!({"u": "https://user@example.com:8443/a%20b?x=1&x=2&y=z"});
    assert!(ok(
        p.clone(),
        "isURL(self.u) && url(self.u).getScheme() == 'https' && url(self.u).getHost() == 'example.com:8443'",
        spec.clone()
    ));
    assert!(ok(
        p.clone(),
        "url(self.u).getHostname() == 'example.com' && url(self.u).getPort() == '8443'",
        spec.clone()
    ));
    assert!(ok(
        p.clone(),
        "url(self.u).getEscapedPath() == '/a%20b' && url(self.u).getQuery()['x'] == ['1', '2']",
        spec
    ));
    assert!(ok(p, "!isURL('not a url') && url('https://[::1]:80').getHostname() == '::1'", json!({"u": ""})));
}

#[test]
fn quantity_library() {
    let p = json!({"q": {"x-kubernetes-int-or-string": true}});
    let spec = json!({"q": "1.5Gi"});
    assert!(ok(p.clone(), "isQuantity(self.q) && quantity(self.q).isGreaterThan(quantity('1Gi'))", spec.clone()));
    assert!(ok(
        p.clone(),
        "quantity(self.q).asInteger() == 1610612736 && quantity('500m').compareTo(quantity('0.5')) == 0",
        spec.clone()
    ));
    assert!(ok(
        p.clone(),
        "quantity('1k').add(quantity('24')).isLessThan(quantity('1025')) && quantity('2').sub(1).asInteger() == 1",
        spec
    ));
    assert!(ok(p, "!isQuantity('1.2.3') && !quantity('1.5').isInteger()", json!({"q": 1})));
}

/// Found by the quantity fuzz target: what kube's decoder accepts (any number of digits, any
/// int32 exponent) is a quantity to CEL too, rounded up to nano units and capped at 2^63-1.
#[test]
fn quantities_of_any_size_parse_rounded_and_capped_as_kube_does() {
    let p = json!({"q": {"x-kubernetes-int-or-string": true}});
    let rules = [
        "isQuantity('000e1400') && quantity('000e1400').sign() == 0",
        "quantity('1e1400').compareTo(quantity('9223372036854775807')) == 0",
        "quantity('-1e1400').compareTo(quantity('-9223372036854775807')) == 0",
        "quantity('123456789012345678901234567890123456789012').asInteger() == 9223372036854775807",
        "quantity('1e-1400').compareTo(quantity('1n')) == 0 && quantity('0.0000000001').compareTo(quantity('1n')) == 0",
        "quantity('1.0000000000000000000000000000000000000000001').compareTo(quantity('1000000001n')) == 0",
        "quantity('8Ei').asInteger() == 9223372036854775807 && quantity('7Ei').asInteger() == 8070450532247928832",
        "quantity('0.5Ki').asInteger() == 512 && quantity('1.5m').compareTo(quantity('1500u')) == 0",
    ];
    for rule in rules {
        assert!(ok(p.clone(), rule, json!({"q": 1})), "{rule}");
    }
    assert!(ok(p, "!isQuantity('1e99999999999') && !isQuantity('1e')", json!({"q": 1})));
}

#[test]
fn ip_and_cidr_libraries() {
    let p = json!({"a": {"type": "string"}});
    let spec = json!({"a": "10.0.0.5"});
    assert!(ok(
        p.clone(),
        "isIP(self.a) && ip(self.a).family() == 4 && !ip(self.a).isLoopback() && ip('::1').family() == 6",
        spec.clone()
    ));
    assert!(ok(
        p.clone(),
        "cidr('10.0.0.0/8').containsIP(self.a) && cidr('10.0.0.0/8').containsIP(ip(self.a))",
        spec.clone()
    ));
    assert!(ok(
        p.clone(),
        "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16') && cidr('10.1.2.3/8').prefixLength() == 8",
        spec.clone()
    ));
    assert!(ok(p, "!isIP('::ffff:1.2.3.4') && !isCIDR('10.0.0.0/33') && isCIDR('fd00::/64')", spec));
}

#[test]
fn format_and_sets_libraries() {
    let p = json!({"n": {"type": "string"}});
    assert!(ok(p.clone(), "!format.dns1123Label().validate(self.n).hasValue()", json!({"n": "my-name"})));
    assert!(!ok(p.clone(), "!format.dns1123Label().validate(self.n).hasValue()", json!({"n": "My_Name"})));
    assert!(ok(
        p.clone(),
        "format.named('uuid').hasValue() && sets.contains([1, 2, 3], [2]) && sets.intersects([1], [1, 5])",
        json!({"n": ""})
    ));
    let v = validator(
        p,
        json!([{"rule": "false", "messageExpression": "format.dns1123Label().validate(self.n).value()[0]"}]),
    );
    let m = msgs(&v, json!({"n": "A"}));
    assert!(m[0].starts_with("spec: Invalid value: a lowercase RFC 1123 label must consist of"), "{m:?}");
}

#[test]
fn evaluation_error_is_reported() {
    let v = validator(
        json!({"m": {"type": "object", "additionalProperties": {"type": "string"}}}),
        json!([{"rule": "self.m['k'] == 'v'"}]),
    );
    assert_eq!(
        msgs(&v, json!({"m": {}})),
        vec!["spec: Invalid value: \"object\": no such key: k evaluating rule: self.m['k'] == 'v'"]
    );
}

#[test]
fn compiled_validator_is_shareable() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CelValidator>();
}
