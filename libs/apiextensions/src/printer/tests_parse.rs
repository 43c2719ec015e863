//! Parser tests: the node trees and error texts of client-go's `parser_test.go` and the
//! quirks CRD paths run into.

use super::parser::{parse_template, Node, Param, Segment};
use super::JsonPath;

fn nodes(path: &str) -> Vec<Node> {
    match JsonPath::parse(path) {
        Ok(parsed) => match parsed.segments.as_slice() {
            [Segment::Action(nodes)] => nodes.clone(),
            other => panic!("{path}: unexpected segments {other:?}"),
        },
        Err(e) => panic!("{path}: {e}"),
    }
}

fn field(name: &str) -> Node {
    Node::Field(name.to_owned())
}

fn known(value: i64) -> Param {
    Param { value, known: true, derived: false }
}

fn unknown() -> Param {
    Param::default()
}

fn parse_err(template: &str) -> String {
    match parse_template(template) {
        Ok(segments) => panic!("{template}: parsed as {segments:?}"),
        Err(e) => e,
    }
}

#[test]
fn dotted_fields() {
    assert_eq!(nodes(".spec.replicas"), vec![field("spec"), field("replicas")]);
    assert_eq!(nodes("$.metadata.labels.app"), vec![field("metadata"), field("labels"), field("app")]);
    assert_eq!(nodes(".metadata.labels.k8s-app"), vec![field("metadata"), field("labels"), field("k8s-app")]);
    assert_eq!(nodes(".Labels.web/html"), vec![field("Labels"), field("web/html")]);
}

#[test]
fn escaped_dot_stays_in_the_key() {
    assert_eq!(
        nodes(r".metadata.labels.kubernetes\.io/hostname"),
        vec![field("metadata"), field("labels"), field("kubernetes.io/hostname")]
    );
}

#[test]
fn a_bare_dot_is_an_empty_field() {
    assert_eq!(nodes("."), vec![field("")]);
    assert_eq!(nodes(".spec."), vec![field("spec"), field("")]);
}

#[test]
fn indexes_and_slices() {
    let index = |i: i64| Node::Array([known(i), Param { value: i + 1, known: true, derived: true }, unknown()]);
    assert_eq!(nodes(".items[0]"), vec![field("items"), index(0)]);
    assert_eq!(nodes(".items[-1]"), vec![field("items"), index(-1)]);
    // `[]` is `[0]`, as in kube.
    let first = Node::Array([unknown(), Param { value: 1, known: true, derived: true }, unknown()]);
    assert_eq!(nodes(".items[]"), vec![field("items"), first]);
    assert_eq!(nodes(".items[1:3]"), vec![field("items"), Node::Array([known(1), known(3), unknown()])]);
    assert_eq!(nodes(".items[1:]"), vec![field("items"), Node::Array([known(1), unknown(), unknown()])]);
    assert_eq!(nodes(".items[:2]"), vec![field("items"), Node::Array([unknown(), known(2), unknown()])]);
    assert_eq!(nodes(".items[0:6:2]"), vec![field("items"), Node::Array([known(0), known(6), known(2)])]);
    assert_eq!(nodes(".items[0:6:]"), vec![field("items"), Node::Array([known(0), known(6), unknown()])]);
}

#[test]
fn wildcards() {
    let all = Node::Array([unknown(), unknown(), unknown()]);
    assert_eq!(nodes(".items[*].name"), vec![field("items"), all.clone(), field("name")]);
    assert_eq!(nodes(".items[:]"), vec![field("items"), all]);
    assert_eq!(nodes(".spec.*"), vec![field("spec"), Node::Wildcard]);
}

#[test]
fn bracket_keys_are_dotted_paths() {
    assert_eq!(nodes(".spec['replicas']"), vec![field("spec"), field("replicas")]);
    // kube re-parses the key as `.b.c`: a dot inside brackets still separates fields.
    assert_eq!(nodes(".spec.a['b.c']"), vec![field("spec"), field("a"), field("b"), field("c")]);
    assert_eq!(nodes(r".spec.a['b\.c']"), vec![field("spec"), field("a"), field("b.c")]);
    assert_eq!(
        nodes("[0]['id']"),
        vec![Node::Array([known(0), Param { value: 1, known: true, derived: true }, unknown()]), field("id")]
    );
}

#[test]
fn unions() {
    assert_eq!(
        nodes(".items[*]['metadata.name', 'status.capacity']"),
        vec![
            field("items"),
            Node::Array([unknown(), unknown(), unknown()]),
            Node::Union(vec![vec![field("metadata"), field("name")], vec![field("status"), field("capacity")]]),
        ]
    );
}

#[test]
fn filters() {
    let text = |s: &str| Node::Text(s.to_owned());
    assert_eq!(
        nodes(r#".status.conditions[?(@.type=="Ready")].status"#),
        vec![
            field("status"),
            field("conditions"),
            Node::Filter { left: vec![field("type")], right: vec![text("Ready")], op: Some("==".to_owned()) },
            field("status"),
        ]
    );
    assert_eq!(
        nodes("[?(@.price < 10)]"),
        vec![Node::Filter { left: vec![field("price")], right: vec![Node::Int(10)], op: Some("<".to_owned()) }]
    );
    assert_eq!(nodes("[?(@.z)]"), vec![Node::Filter { left: vec![field("z")], right: vec![], op: None }]);
    assert_eq!(
        nodes("[?(@.new==true)]"),
        vec![Node::Filter { left: vec![field("new")], right: vec![Node::Bool(true)], op: Some("==".to_owned()) }]
    );
    assert_eq!(
        nodes("[?(@.a>=-1.5)]"),
        vec![Node::Filter { left: vec![field("a")], right: vec![Node::Float(-1.5)], op: Some(">=".to_owned()) }]
    );
    // client-go's "test filter suffix": braces and parentheses inside the quoted operand.
    assert_eq!(
        nodes(r#"[?(@.status.nodeInfo.osImage == "{[()]}")]"#),
        vec![Node::Filter {
            left: vec![field("status"), field("nodeInfo"), field("osImage")],
            right: vec![text("{[()]}")],
            op: Some("==".to_owned()),
        }]
    );
    // The operator is the first run of `!<>=`, checked only when evaluated.
    assert_eq!(
        nodes("[?(@.Price<>10)]"),
        vec![Node::Filter { left: vec![field("Price")], right: vec![Node::Int(10)], op: Some("<>".to_owned()) }]
    );
}

#[test]
fn recursive_descent() {
    assert_eq!(nodes("..name"), vec![Node::Recursive, field("name")]);
    assert_eq!(nodes("...Price"), vec![Node::Recursive, field("Price")]);
    assert_eq!(nodes("..Book[2]").len(), 3);
}

#[test]
fn literals_and_identifiers() {
    assert_eq!(nodes(r#""{""#), vec![Node::Text("{".to_owned())]);
    assert_eq!(nodes(r#""a\tb""#), vec![Node::Text("a\tb".to_owned())]);
    assert_eq!(nodes("'it''s'").len(), 2);
    assert_eq!(nodes("+12"), vec![Node::Int(12)]);
    assert_eq!(nodes("-1.5"), vec![Node::Float(-1.5)]);
    assert_eq!(nodes("range .items"), vec![Node::Identifier("range".to_owned()), field("items")]);
}

#[test]
fn quoted_literal_escapes() {
    let text = |p: &str| match nodes(p).as_slice() {
        [Node::Text(t)] => t.clone(),
        other => panic!("{p}: {other:?}"),
    };
    assert_eq!(text(r#""\x41\101\u00e9\U0001F600""#), "AA\u{e9}\u{1f600}");
    assert_eq!(text(r"'it\'s'"), "it's");
    assert_eq!(text(r#"'say "hi"'"#), "say \"hi\"");
    let err = |p: &str| JsonPath::parse(p).err().unwrap_or_default();
    assert_eq!(err(r#""\'""#), r#"unquote string "\'" error invalid syntax"#);
    assert_eq!(err(r#""\400""#), r#"unquote string "\400" error invalid syntax"#);
}

#[test]
fn templates_with_text() {
    assert_eq!(
        parse_template("hello {.name}!"),
        Ok(vec![
            Segment::Text("hello ".to_owned()),
            Segment::Action(vec![field("name")]),
            Segment::Text("!".to_owned()),
        ])
    );
    assert_eq!(parse_template("plain"), Ok(vec![Segment::Text("plain".to_owned())]));
    assert_eq!(parse_template(""), Ok(vec![]));
}

#[test]
fn client_go_parse_errors() {
    assert_eq!(parse_err("{.hello"), "unclosed action");
    assert_eq!(parse_err("{*}"), "unrecognized character in action: U+002A '*'");
    assert_eq!(parse_err("{+12.3.0}"), "cannot parse number +12.3.0");
    assert_eq!(parse_err("{[1}"), "unterminated array");
    assert_eq!(parse_err("{[?(.price]}"), "unterminated filter");
    assert_eq!(parse_err("{........}"), "invalid multiple recursive descent");
}

#[test]
fn crd_path_errors() {
    let err = |p: &str| JsonPath::parse(p).err().unwrap_or_default();
    assert_eq!(err(".spec.items[x]"), "invalid array index x");
    assert_eq!(err(".spec.items[-]"), "array index - is not a number");
    assert_eq!(err(".spec.items[99999999999999999999]"), "array index 99999999999999999999 is not a number");
    assert_eq!(err(r#".spec["a"]"#), r#"invalid array index "a""#);
    assert_eq!(err(".spec.items[0"), "unterminated array");
    assert_eq!(err(".a\n"), "unclosed action");
    assert_eq!(err(".a\tb"), "unrecognized character in action: U+0009");
    assert_eq!(err(".a[?(@.x==1)"), "unclosed array expect ]");
    assert_eq!(err(r#"[?(@.x=="a)]"#), "unterminated filter");
    assert_eq!(err(r#""abc"#), "unterminated quoted string");
    assert_eq!(err(r#""a\q""#), r#"unquote string "a\q" error invalid syntax"#);
    assert_eq!(err("-"), "cannot parse number -");
    // A filter operand is parsed as its own action: `==` alone leaves `=` as the right side.
    assert_eq!(err("[?(@.a==)]"), "unrecognized character in action: U+003D '='");
    assert_eq!(err("{"), "unrecognized character in action: U+007B '{'");
}

#[test]
fn parse_keeps_the_source_and_allows_missing_keys() {
    let Ok(path) = JsonPath::parse(".spec.replicas") else { panic!("parse") };
    assert_eq!(path.source(), ".spec.replicas");
    assert!(path.allow_missing_keys);
    let Ok(template) = JsonPath::parse_template("{.a}") else { panic!("parse") };
    assert!(!template.allow_missing_keys);
}
