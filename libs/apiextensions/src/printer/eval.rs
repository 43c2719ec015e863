//! Evaluation of parsed JSONPath nodes over a JSON value, as client-go's `jsonpath.go` walks
//! decoded objects: results borrow from the object, literals (`"Ready"`, `3`, `true`) are
//! owned. Errors keep what the failing step returned, because an existence filter
//! (`[?(@.x[5])]`) counts those partial results even when the step failed.

use std::borrow::Cow;

use serde_json::Value;

use super::gofmt;
use super::parser::{Node, Param};

/// The values flowing between steps.
pub(crate) type Values<'a> = Vec<Cow<'a, Value>>;

/// A failed step: kube's message and the values the step handed back with it.
pub(crate) struct Failure<'a> {
    pub(crate) partial: Values<'a>,
    pub(crate) message: String,
}

type Eval<'a> = Result<Values<'a>, Failure<'a>>;

fn fail<'a>(partial: Values<'a>, message: impl Into<String>) -> Failure<'a> {
    Failure { partial, message: message.into() }
}

/// Settings of one evaluation.
pub(crate) struct Evaluator {
    /// A missing key yields no result instead of `<key> is not found` (kube's printers and
    /// selectable fields set it).
    pub(crate) allow_missing_keys: bool,
}

/// Children of a value in kube's order of visit: map values, list items, a string's bytes.
fn children<'a>(v: &Cow<'a, Value>) -> Values<'a> {
    fn bytes(s: &str) -> Values<'static> {
        s.bytes().map(|b| Cow::Owned(Value::from(b))).collect()
    }
    match v {
        Cow::Borrowed(value) => match value {
            Value::Object(map) => map.values().map(Cow::Borrowed).collect(),
            Value::Array(items) => items.iter().map(Cow::Borrowed).collect(),
            Value::String(s) => bytes(s),
            _ => Vec::new(),
        },
        Cow::Owned(value) => match value {
            Value::Object(map) => map.values().cloned().map(Cow::Owned).collect(),
            Value::Array(items) => items.iter().cloned().map(Cow::Owned).collect(),
            Value::String(s) => bytes(s),
            _ => Vec::new(),
        },
    }
}

fn member<'a>(v: &Cow<'a, Value>, key: &str) -> Option<Cow<'a, Value>> {
    match v {
        Cow::Borrowed(value) => value.get(key).map(Cow::Borrowed),
        Cow::Owned(value) => value.get(key).cloned().map(Cow::Owned),
    }
}

fn item<'a>(v: &Cow<'a, Value>, index: usize) -> Option<Cow<'a, Value>> {
    match v {
        Cow::Borrowed(value) => value.get(index).map(Cow::Borrowed),
        Cow::Owned(value) => value.get(index).cloned().map(Cow::Owned),
    }
}

impl Evaluator {
    /// Applies an action's nodes in order, each to all results of the previous one.
    pub(crate) fn eval_list<'a>(&self, input: Values<'a>, nodes: &[Node]) -> Eval<'a> {
        let mut current = input;
        for node in nodes {
            current = self.walk(current, node)?;
        }
        Ok(current)
    }

    fn walk<'a>(&self, input: Values<'a>, node: &Node) -> Eval<'a> {
        let literal = |v: Value, n: usize| Ok(vec![Cow::Owned(v); n]);
        match node {
            Node::Text(text) => Ok(vec![Cow::Owned(Value::String(text.clone()))]),
            Node::Int(i) => literal(Value::from(*i), input.len()),
            Node::Float(f) => literal(Value::from(*f), input.len()),
            Node::Bool(b) => literal(Value::Bool(*b), input.len()),
            Node::Field(name) => self.field(input, name),
            Node::Array(params) => array(input, params),
            Node::Filter { left, right, op } => self.filter(input, left, right, op.as_deref()),
            Node::Wildcard => Ok(input.iter().filter(|v| !v.is_null()).flat_map(children).collect()),
            Node::Recursive => Ok(recursive(input)),
            Node::Union(branches) => {
                let mut out = Vec::new();
                for branch in branches {
                    match self.eval_list(input.clone(), branch) {
                        Ok(values) => out.extend(values),
                        Err(f) => return Err(fail(input, f.message)),
                    }
                }
                Ok(out)
            }
            Node::Identifier(name) => match name.as_str() {
                "end" => Err(fail(Vec::new(), "not in range, nothing to end")),
                // Ranges only make sense in kubectl's multi-action templates, never in a
                // printer column or selectable field.
                "range" => Err(fail(input, "range is not supported")),
                other => Err(fail(input, format!("unrecognized identifier {other}"))),
            },
        }
    }

    fn field<'a>(&self, input: Values<'a>, name: &str) -> Eval<'a> {
        if input.is_empty() {
            return Ok(input);
        }
        let results: Values<'a> = input.iter().filter_map(|v| member(v, name)).collect();
        if results.is_empty() && !self.allow_missing_keys {
            return Err(fail(results, format!("{name} is not found")));
        }
        Ok(results)
    }

    fn filter<'a>(&self, input: Values<'a>, left: &[Node], right: &[Node], op: Option<&str>) -> Eval<'a> {
        let mut results = Vec::new();
        for value in &input {
            if !value.is_array() {
                let message = format!("{} is not array or slice and cannot be filtered", gofmt::sprint(value));
                return Err(fail(input, message));
            }
            for element in children(value) {
                let lefts = self.eval_list(vec![element.clone()], left);
                let Some(op) = op else {
                    let found = match &lefts {
                        Ok(values) => !values.is_empty(),
                        Err(f) => !f.partial.is_empty(),
                    };
                    if found {
                        results.push(element);
                    }
                    continue;
                };
                let Some(l) = single(lefts).map_err(|m| fail(input.clone(), m))? else { continue };
                let rights = self.eval_list(vec![element.clone()], right);
                let Some(r) = single(rights).map_err(|m| fail(input.clone(), m))? else { continue };
                match compare(op, &l, &r) {
                    Ok(true) => results.push(element),
                    Ok(false) => {}
                    Err(message) => return Err(fail(results, message)),
                }
            }
        }
        Ok(results)
    }
}

/// The one operand of a comparison: `None` when there is none (the element is skipped).
fn single(values: Result<Values<'_>, Failure<'_>>) -> Result<Option<Value>, String> {
    let mut values = values.map_err(|f| f.message)?;
    match values.len() {
        0 => Ok(None),
        1 => Ok(values.pop().map(Cow::into_owned)),
        _ => Err("can only compare one element at a time".to_owned()),
    }
}

/// `[start:end:step]` with jsonpath's bounds rules: negative indexes count from the end, an
/// empty selection is fine, anything else out of range is an error.
fn array<'a>(input: Values<'a>, params: &[Param; 3]) -> Eval<'a> {
    let mut result = Vec::new();
    for value in &input {
        if value.is_null() {
            continue;
        }
        let Some(len) = value.as_array().map(|a| i64::try_from(a.len()).unwrap_or(i64::MAX)) else {
            let message = format!("{} is not array or slice", gofmt::type_name(value));
            return Err(fail(input, message));
        };
        let [first, last, step] = *params;
        let mut start = if first.known { first.value } else { 0 };
        if start < 0 {
            start += len;
        }
        let mut end = if last.known { last.value } else { len };
        if end < 0 || (end == 0 && last.derived) {
            end += len;
        }
        if end == start {
            // kube returns here, dropping any further inputs.
            return Ok(result);
        }
        if start >= len || start < 0 {
            return Err(fail(input, format!("array index out of bounds: index {start}, length {len}")));
        }
        if end > len || end < 0 {
            return Err(fail(input, format!("array index out of bounds: index {}, length {len}", end - 1)));
        }
        if start > end {
            return Err(fail(input, format!("starting index {start} is greater than ending index {end}")));
        }
        let stride = if step.known {
            if step.value <= 0 {
                return Err(fail(input, "step must be > 0"));
            }
            step.value
        } else {
            1
        };
        let mut i = start;
        while i < end {
            if let Some(v) = usize::try_from(i).ok().and_then(|i| item(value, i)) {
                result.push(v);
            }
            i = i.saturating_add(stride);
        }
    }
    Ok(result)
}

/// `..`: every value that has children (non-empty maps, lists and strings), each before its
/// descendants; leaves are not results themselves.
fn recursive(input: Values<'_>) -> Values<'_> {
    let mut result = Vec::new();
    for value in input {
        if value.is_null() {
            continue;
        }
        let kids = children(&value);
        if !kids.is_empty() {
            result.push(value);
            result.extend(recursive(kids));
        }
    }
    result
}

/// A value as Go's template comparison sees it.
#[derive(PartialEq, PartialOrd)]
enum Basic<'v> {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'v str),
}

const BAD_TYPE: &str = "invalid type for comparison";
const INCOMPATIBLE: &str = "incompatible types for comparison";

fn basic(v: &Value) -> Result<Basic<'_>, String> {
    match v {
        Value::Bool(b) => Ok(Basic::Bool(*b)),
        Value::Number(n) => Ok(n.as_i64().map_or_else(|| Basic::Float(n.as_f64().unwrap_or(0.0)), Basic::Int)),
        Value::String(s) => Ok(Basic::Str(s)),
        _ => Err(BAD_TYPE.to_owned()),
    }
}

fn equal(a: &Value, b: &Value) -> Result<bool, String> {
    let (a, b) = (basic(a)?, basic(b)?);
    if std::mem::discriminant(&a) != std::mem::discriminant(&b) {
        return Err(INCOMPATIBLE.to_owned());
    }
    Ok(a == b)
}

fn less(a: &Value, b: &Value) -> Result<bool, String> {
    let (a, b) = (basic(a)?, basic(b)?);
    if std::mem::discriminant(&a) != std::mem::discriminant(&b) {
        return Err(INCOMPATIBLE.to_owned());
    }
    if matches!(a, Basic::Bool(_)) {
        return Err(BAD_TYPE.to_owned());
    }
    Ok(a < b)
}

/// Go's template operators: `<=` is `<` or `==`, `>` is not `<=`, `>=` is not `<`.
fn compare(op: &str, l: &Value, r: &Value) -> Result<bool, String> {
    match op {
        "==" => equal(l, r),
        "!=" => equal(l, r).map(|e| !e),
        "<" => less(l, r),
        "<=" => Ok(less(l, r)? || equal(l, r)?),
        ">" => Ok(!(less(l, r)? || equal(l, r)?)),
        ">=" => less(l, r).map(|lt| !lt),
        other => Err(format!("unrecognized filter operator {other}")),
    }
}
