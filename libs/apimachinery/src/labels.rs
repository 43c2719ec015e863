//! Label selectors, parsed and printed as `k8s.io/apimachinery/pkg/labels` does.
//!
//! The lexer and parser follow kube's closely, because clients see the parser's error text
//! (`unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt`) and the
//! canonical string form (requirements sorted by key, values sorted) appears in
//! `status.selector` of scale subresources.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::{Map, Value};

use crate::status::ApiError;
use crate::validation::{is_qualified_name, is_valid_label_value};

/// How a requirement compares a label's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    /// `key=value`.
    Equals,
    /// `key==value` (same meaning as `=`, kept for printing).
    DoubleEquals,
    /// `key!=value`: also matches objects without the label.
    NotEquals,
    /// `key in (a,b)`.
    In,
    /// `key notin (a,b)`: also matches objects without the label.
    NotIn,
    /// `key`.
    Exists,
    /// `!key`.
    DoesNotExist,
    /// `key>5` (integer comparison).
    GreaterThan,
    /// `key<5` (integer comparison).
    LessThan,
}

/// One term of a selector; all terms must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    op: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// Builds a requirement with kube's `NewRequirement` checks (key, value count, values).
    pub fn new(key: &str, op: Operator, values: Vec<String>) -> Result<Requirement, String> {
        let mut errs: Vec<String> = Vec::new();
        let key_errs = is_qualified_name(key);
        if !key_errs.is_empty() {
            errs.push(format!("key: Invalid value: {key:?}: {}", key_errs.join("; ")));
        }
        // kube renders a non-string bad value as JSON.
        let shown = serde_json::to_string(&values).unwrap_or_default();
        match op {
            Operator::In | Operator::NotIn if values.is_empty() => {
                errs.push(format!(
                    "values: Invalid value: {shown}: for 'in', 'notin' operators, values set can't be empty"
                ));
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals if values.len() != 1 => {
                errs.push(format!(
                    "values: Invalid value: {shown}: exact-match compatibility requires one single value"
                ));
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                errs.push(format!(
                    "values: Invalid value: {shown}: values set must be empty for exists and does not exist"
                ));
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(format!(
                        "values: Invalid value: {shown}: for 'Gt', 'Lt' operators, exactly one value is required"
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if v.parse::<i64>().is_err() {
                        errs.push(format!(
                            "values[{i}]: Invalid value: {v:?}: for 'Gt', 'Lt' operators, the value must be an integer"
                        ));
                    }
                }
            }
            _ => {}
        }
        for (i, v) in values.iter().enumerate() {
            let v_errs = is_valid_label_value(v);
            if !v_errs.is_empty() {
                errs.push(format!("values[{i}][{key}]: Invalid value: {v:?}: {}", v_errs.join("; ")));
            }
        }
        match errs.len() {
            0 => {
                let values = if matches!(op, Operator::In | Operator::NotIn) {
                    values.into_iter().collect::<BTreeSet<_>>().into_iter().collect()
                } else {
                    values
                };
                Ok(Requirement { key: key.to_string(), op, values })
            }
            1 => Err(errs.remove(0)),
            _ => Err(format!("[{}]", errs.join(", "))),
        }
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.op
    }

    /// The values (sorted and deduplicated for `in`/`notin`).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    fn has_value(&self, v: &str) -> bool {
        self.values.iter().any(|x| x == v)
    }

    /// Whether a label set satisfies this requirement.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let value = labels.and_then(|l| l.get(&self.key)).map(|v| v.as_str().unwrap_or(""));
        match self.op {
            Operator::In | Operator::Equals | Operator::DoubleEquals => value.is_some_and(|v| self.has_value(v)),
            Operator::NotIn | Operator::NotEquals => value.is_none_or(|v| !self.has_value(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(have) = value.and_then(|v| v.parse::<i64>().ok()) else {
                    return false;
                };
                let [want] = self.values.as_slice() else {
                    return false;
                };
                let Ok(want) = want.parse::<i64>() else {
                    return false;
                };
                if self.op == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.op == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.op {
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
        };
        f.write_str(op)?;
        let paren = matches!(self.op, Operator::In | Operator::NotIn);
        if paren {
            f.write_str("(")?;
        }
        let mut sorted: Vec<&str> = self.values.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        f.write_str(&sorted.join(","))?;
        if paren {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A parsed label selector: a conjunction of requirements sorted by key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    /// A null `metav1.LabelSelector` selects nothing (kube's `labels.Nothing()`).
    nothing: bool,
}

impl LabelSelector {
    /// Parses the `?labelSelector=` grammar; errors are 400 BadRequest with kube's text.
    pub fn parse(s: &str) -> Result<LabelSelector, ApiError> {
        let mut requirements = Parser::new(s).parse().map_err(ApiError::bad_request)?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements, nothing: false })
    }

    /// The selector that matches every object.
    pub fn everything() -> LabelSelector {
        LabelSelector::default()
    }

    /// The selector that matches no object (a null selector in a spec).
    pub fn nothing() -> LabelSelector {
        LabelSelector { requirements: Vec::new(), nothing: true }
    }

    /// True for the match-everything selector: callers skip filtering.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty() && !self.nothing
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether an object's `metadata.labels` satisfies every requirement.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Converts a `metav1.LabelSelector` (matchLabels, matchExpressions) as kube's
    /// `LabelSelectorAsSelector` does: null selects nothing, `{}` selects everything.
    pub fn from_json(sel: &Value) -> Result<LabelSelector, String> {
        let obj = match sel {
            Value::Null => return Ok(LabelSelector::nothing()),
            Value::Object(o) => o,
            other => return Err(format!("label selector must be an object, got {other}")),
        };
        let mut requirements = Vec::new();
        match obj.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(labels)) => {
                for (k, v) in labels {
                    let v = v.as_str().ok_or_else(|| format!("matchLabels[{k}] must be a string"))?;
                    requirements.push(Requirement::new(k, Operator::Equals, vec![v.to_string()])?);
                }
            }
            Some(_) => return Err("matchLabels must be an object".to_string()),
        }
        match obj.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(exprs)) => {
                for e in exprs {
                    let key = e.get("key").and_then(Value::as_str).unwrap_or("");
                    let op_name = e.get("operator").and_then(Value::as_str).unwrap_or("");
                    let op = match op_name {
                        "In" => Operator::In,
                        "NotIn" => Operator::NotIn,
                        "Exists" => Operator::Exists,
                        "DoesNotExist" => Operator::DoesNotExist,
                        other => return Err(format!("{other:?} is not a valid label selector operator")),
                    };
                    let values = match e.get("values") {
                        None | Some(Value::Null) => Vec::new(),
                        Some(Value::Array(vs)) => vs
                            .iter()
                            .map(|v| v.as_str().map(str::to_owned).ok_or_else(|| "values must be strings".to_string()))
                            .collect::<Result<Vec<_>, _>>()?,
                        Some(_) => return Err("values must be an array".to_string()),
                    };
                    requirements.push(Requirement::new(key, op, values)?);
                }
            }
            Some(_) => return Err("matchExpressions must be an array".to_string()),
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements, nothing: false })
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Error,
    Eos,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn special_token(s: &[u8]) -> Option<Tok> {
    Some(match s {
        b")" => Tok::ClosedPar,
        b"," => Tok::Comma,
        b"!" => Tok::DoesNotExist,
        b"==" => Tok::DoubleEquals,
        b"=" => Tok::Equals,
        b">" => Tok::GreaterThan,
        b"<" => Tok::LessThan,
        b"!=" => Tok::NotEquals,
        b"(" => Tok::OpenPar,
        _ => return None,
    })
}

/// Splits the selector into tokens the way kube's lexer does (a NUL byte ends the input).
fn lex(s: &str) -> Vec<(Tok, String)> {
    let b = s.as_bytes();
    let at = |i: usize| b.get(i).copied().unwrap_or(0);
    let mut pos = 0usize;
    let mut out = Vec::new();
    loop {
        while is_whitespace(at(pos)) {
            pos += 1;
        }
        let c = at(pos);
        if c == 0 {
            out.push((Tok::Eos, String::new()));
            return out;
        }
        if is_special(c) {
            let start = pos;
            let mut last: Option<(Tok, usize)> = None;
            while is_special(at(pos)) {
                pos += 1;
                match special_token(&b[start..pos]) {
                    Some(t) => last = Some((t, pos)),
                    None if last.is_some() => {
                        pos -= 1;
                        break;
                    }
                    None => {}
                }
            }
            match last {
                Some((t, end)) => {
                    pos = end;
                    out.push((t, String::from_utf8_lossy(&b[start..end]).into_owned()));
                }
                None => out.push((
                    Tok::Error,
                    format!("error expected: keyword found '{}'", String::from_utf8_lossy(&b[start..pos])),
                )),
            }
        } else {
            let start = pos;
            while !is_whitespace(at(pos)) && !is_special(at(pos)) && at(pos) != 0 {
                pos += 1;
            }
            let lit = String::from_utf8_lossy(&b[start..pos]).into_owned();
            let tok = match lit.as_str() {
                "in" => Tok::In,
                "notin" => Tok::NotIn,
                _ => Tok::Identifier,
            };
            out.push((tok, lit));
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Tok, String)>,
    pos: usize,
}

const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

impl Parser {
    fn new(s: &str) -> Parser {
        Parser { items: lex(s), pos: 0 }
    }

    fn lookahead(&self, ctx: Ctx) -> (Tok, String) {
        let (mut tok, lit) = self.items.get(self.pos).cloned().unwrap_or((Tok::Eos, String::new()));
        if ctx == Ctx::Values && matches!(tok, Tok::In | Tok::NotIn) {
            tok = Tok::Identifier;
        }
        (tok, lit)
    }

    fn consume(&mut self, ctx: Ctx) -> (Tok, String) {
        let r = self.lookahead(ctx);
        if self.pos < self.items.len() {
            self.pos += 1;
        }
        r
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Ctx::Values);
            match tok {
                Tok::Identifier | Tok::DoesNotExist => {
                    let r = self.parse_requirement().map_err(|e| format!("unable to parse requirement: {e}"))?;
                    reqs.push(r);
                    let (t, l) = self.consume(Ctx::Values);
                    match t {
                        Tok::Eos => return Ok(reqs),
                        Tok::Comma => {
                            let (t2, l2) = self.lookahead(Ctx::Values);
                            if t2 != Tok::Identifier && t2 != Tok::DoesNotExist {
                                return Err(format!("found '{l2}', expected: identifier after ','"));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Tok::Eos => return Ok(reqs),
                _ => return Err(format!("found '{lit}', expected: !, identifier, or 'end of string'")),
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, op) = self.parse_key_and_infer_operator()?;
        if let Some(op) = op {
            return Requirement::new(&key, op, Vec::new());
        }
        let op = self.parse_operator()?;
        let values = match op {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(&key, op, values)
    }

    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(Ctx::Values);
        if tok == Tok::DoesNotExist {
            op = Some(Operator::DoesNotExist);
            (tok, lit) = self.consume(Ctx::Values);
        }
        if tok != Tok::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let errs = is_qualified_name(&lit);
        if !errs.is_empty() {
            // kube validates the key here with a nil field path, which prints as `<nil>`.
            return Err(format!("<nil>: Invalid value: {lit:?}: {}", errs.join("; ")));
        }
        let (t, _) = self.lookahead(Ctx::Values);
        if matches!(t, Tok::Eos | Tok::Comma) && op.is_none() {
            op = Some(Operator::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (tok, lit) = self.consume(Ctx::KeyAndOperator);
        Ok(match tok {
            Tok::In => Operator::In,
            Tok::Equals => Operator::Equals,
            Tok::DoubleEquals => Operator::DoubleEquals,
            Tok::GreaterThan => Operator::GreaterThan,
            Tok::LessThan => Operator::LessThan,
            Tok::NotIn => Operator::NotIn,
            Tok::NotEquals => Operator::NotEquals,
            _ => return Err(format!("found '{lit}', expected: {BINARY_OPERATORS}")),
        })
    }

    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Ctx::Values);
        if tok != Tok::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Ctx::Values);
        match tok {
            Tok::Identifier | Tok::Comma => {
                let set = self.parse_identifiers_list()?;
                let (t, _) = self.consume(Ctx::Values);
                if t != Tok::ClosedPar {
                    // kube reports the literal seen before the list here, not the one consumed.
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set.into_iter().collect())
            }
            Tok::ClosedPar => {
                self.consume(Ctx::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<BTreeSet<String>, String> {
        let mut set = BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(Ctx::Values);
            match tok {
                Tok::Identifier => {
                    set.insert(lit);
                    let (t2, l2) = self.lookahead(Ctx::Values);
                    match t2 {
                        Tok::Comma => continue,
                        Tok::ClosedPar => return Ok(set),
                        _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    let (t2, _) = self.lookahead(Ctx::Values);
                    if t2 == Tok::ClosedPar {
                        set.insert(String::new());
                        return Ok(set);
                    }
                    if t2 == Tok::Comma {
                        self.consume(Ctx::Values);
                        set.insert(String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(Ctx::Values);
        if matches!(tok, Tok::Eos | Tok::Comma) {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Ctx::Values);
        if tok == Tok::Identifier {
            return Ok(vec![lit]);
        }
        Err(format!("found '{lit}', expected: identifier"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn sel(s: &str) -> LabelSelector {
        match LabelSelector::parse(s) {
            Ok(x) => x,
            Err(e) => panic!("{s:?} should parse: {}", e.message),
        }
    }

    fn err(s: &str) -> String {
        match LabelSelector::parse(s) {
            Ok(x) => panic!("{s:?} should not parse, got {x}"),
            Err(e) => {
                assert_eq!(e.code, 400);
                e.message
            }
        }
    }

    #[test]
    fn documented_examples() {
        let s = sel("environment in (production, qa)");
        assert_eq!(s.to_string(), "environment in (production,qa)");
        assert!(s.matches(Some(&labels(json!({"environment": "qa"})))));
        assert!(!s.matches(Some(&labels(json!({"environment": "dev"})))));
        assert!(!s.matches(None));

        let s = sel("tier notin (frontend,backend)");
        assert_eq!(s.to_string(), "tier notin (backend,frontend)");
        assert!(s.matches(None));
        assert!(!s.matches(Some(&labels(json!({"tier": "frontend"})))));

        let s = sel("partition");
        assert!(s.matches(Some(&labels(json!({"partition": ""})))));
        assert!(!s.matches(Some(&labels(json!({"other": "x"})))));

        let s = sel("!partition");
        assert_eq!(s.to_string(), "!partition");
        assert!(s.matches(None));
        assert!(!s.matches(Some(&labels(json!({"partition": "a"})))));
    }

    #[test]
    fn equality_and_canonical_order() {
        let s = sel(" tier = web ,app==x, env!=prod");
        assert_eq!(s.to_string(), "app==x,env!=prod,tier=web");
        assert!(s.matches(Some(&labels(json!({"tier": "web", "app": "x"})))));
        assert!(!s.matches(Some(&labels(json!({"tier": "web", "app": "x", "env": "prod"})))));
        let s = sel("a=");
        assert!(s.matches(Some(&labels(json!({"a": ""})))));
        assert!(!s.matches(None));
    }

    #[test]
    fn gt_lt() {
        let s = sel("replicas>3,weight<10");
        assert_eq!(s.to_string(), "replicas>3,weight<10");
        assert!(s.matches(Some(&labels(json!({"replicas": "4", "weight": "9"})))));
        assert!(!s.matches(Some(&labels(json!({"replicas": "3", "weight": "9"})))));
        assert!(!s.matches(Some(&labels(json!({"replicas": "x", "weight": "9"})))));
        assert!(err("a>b").contains("for 'Gt', 'Lt' operators, the value must be an integer"));
    }

    #[test]
    fn empty_selector_is_everything() {
        assert!(sel("").is_empty());
        assert!(LabelSelector::everything().matches(None));
        assert!(!sel("a").is_empty());
    }

    #[test]
    fn kube_error_messages() {
        assert_eq!(err("a b"), "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt");
        assert_eq!(err("x in ("), "unable to parse requirement: found '', expected: ',', ')' or identifier");
        assert_eq!(err("x in (a"), "unable to parse requirement: found '', expected: ',' or ')'");
        assert_eq!(err("x in a"), "unable to parse requirement: found 'a' expected: '('");
        assert_eq!(err("a,"), "found '', expected: identifier after ','");
        assert_eq!(err("=a"), "found '=', expected: !, identifier, or 'end of string'");
        assert_eq!(err("a=b c"), "found 'c', expected: ',' or 'end of string'");
        assert_eq!(sel("a==").to_string(), "a==");
        assert_eq!(err("a=("), "unable to parse requirement: found '(', expected: identifier");
        assert!(err("Bad Key=x").starts_with("unable to parse requirement: found 'Key'"));
        assert!(err("bad_/key=x")
            .starts_with("unable to parse requirement: <nil>: Invalid value: \"bad_/key\": prefix part"));
        assert!(err("a=b@")
            .starts_with("unable to parse requirement: values[0][a]: Invalid value: \"b@\": a valid label must be"));
    }

    #[test]
    fn odd_value_lists() {
        let s = sel("x in (,a)");
        assert_eq!(s.to_string(), "x in (,a)");
        assert!(s.matches(Some(&labels(json!({"x": ""})))));
        assert_eq!(sel("x in ()").to_string(), "x in ()");
        assert_eq!(sel("x in (in,notin)").to_string(), "x in (in,notin)");
    }

    #[test]
    fn from_json_selector() {
        let s = LabelSelector::from_json(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}, {"key": "canary", "operator": "DoesNotExist"}]
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.to_string(), "app=web,!canary,tier in (a,b)");
        assert!(s.matches(Some(&labels(json!({"app": "web", "tier": "a"})))));
        assert!(!s.matches(Some(&labels(json!({"app": "web", "tier": "a", "canary": "1"})))));
        assert!(LabelSelector::from_json(&json!({})).is_ok_and(|s| s.is_empty()));
        let nothing = LabelSelector::from_json(&Value::Null).unwrap_or_else(|e| panic!("{e}"));
        assert!(!nothing.is_empty());
        assert!(!nothing.matches(None));
        assert_eq!(
            LabelSelector::from_json(&json!({"matchExpressions": [{"key": "a", "operator": "Gt"}]})).err().as_deref(),
            Some("\"Gt\" is not a valid label selector operator")
        );
        assert!(LabelSelector::from_json(&json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}))
            .is_err_and(|e| e.contains("values set can't be empty")));
    }
}
