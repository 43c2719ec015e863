//! Printer columns, selectable fields and the JSONPath behind them, as kube's
//! apiextensions-apiserver serves custom resources.
//!
//! CRDs name values of their objects with client-go's JSONPath (`util/jsonpath`):
//! `additionalPrinterColumns[].jsonPath` fills Table cells, `selectableFields[].jsonPath`
//! feeds field selectors. kube wraps each path as the template `{<path>}` and evaluates it
//! with missing keys allowed; [`JsonPath`] does the same, with kube's parser quirks and error
//! texts, so a CRD that works against kube prints and filters the same here.
//!
//! - [`JsonPath`]: parse and evaluate (`.a.b`, `[0]`, `[1:3]`, `[*]`, `['k']`, `[a,b]`, `..`,
//!   filters `[?(@.type=="Ready")]` with `== != < > <= >=` and existence).
//! - [`TableConvertor`]: the `columnDefinitions` and row `cells` of a `meta.k8s.io/v1` Table.
//! - [`field_value`] / [`selectable_field_name`]: one selectable field's name and value.
//!
//! Everything is pure: no IO, and the clock is a parameter where ages are computed.

mod eval;
mod gofmt;
mod parser;
mod table;

#[cfg(test)]
mod tests_eval;
#[cfg(test)]
mod tests_parse;
#[cfg(test)]
mod tests_table;

use std::borrow::Cow;

use serde_json::Value;

pub use table::TableConvertor;

use eval::Evaluator;
use parser::Segment;

/// A parsed client-go JSONPath template.
///
/// Results borrow from the evaluated object; literal values a path can produce (a quoted
/// string as a whole action, say) are owned, hence `Cow`.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    source: String,
    segments: Vec<Segment>,
    allow_missing_keys: bool,
}

impl JsonPath {
    /// Parses a CRD path as kube's printers and field selectors do: `{` + path + `}`, missing
    /// keys allowed. Errors are kube's parser messages (`unclosed action`, `invalid array
    /// index x`, `unrecognized character in action: U+002A '*'`, ...).
    pub fn parse(path: &str) -> Result<JsonPath, String> {
        let mut parsed = JsonPath::parse_template(&format!("{{{path}}}"))?;
        parsed.source = path.to_owned();
        parsed.allow_missing_keys = true;
        Ok(parsed)
    }

    /// Parses a raw template (`{.a} and {.b}`), as `jsonpath.Parse` does; missing keys are
    /// errors until [`JsonPath::allow_missing_keys`] says otherwise.
    pub fn parse_template(template: &str) -> Result<JsonPath, String> {
        let segments = parser::parse_template(template)?;
        Ok(JsonPath { source: template.to_owned(), segments, allow_missing_keys: false })
    }

    /// Whether a missing map key yields no result (`true`) or the error `<key> is not found`,
    /// as client-go's `AllowMissingKeys`.
    #[must_use]
    pub fn allow_missing_keys(mut self, allow: bool) -> JsonPath {
        self.allow_missing_keys = allow;
        self
    }

    /// The path or template as given to the parser.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// kube's `FindResults`: one list of results per template part (a single one for a CRD
    /// path), in order; an error is kube's evaluation message (`array index out of bounds:
    /// index 5, length 2`, `can only compare one element at a time`, ...).
    pub fn find_results<'a>(&self, obj: &'a Value) -> Result<Vec<Vec<Cow<'a, Value>>>, String> {
        let evaluator = Evaluator { allow_missing_keys: self.allow_missing_keys };
        let mut all = Vec::with_capacity(self.segments.len());
        for segment in &self.segments {
            match segment {
                Segment::Text(text) => all.push(vec![Cow::Owned(Value::String(text.clone()))]),
                Segment::Action(nodes) => {
                    let results = evaluator.eval_list(vec![Cow::Borrowed(obj)], nodes).map_err(|f| f.message)?;
                    all.push(results);
                }
            }
        }
        Ok(all)
    }

    /// All results of all template parts, in order; an evaluation error counts as no result,
    /// as in a printer cell.
    pub fn find<'a>(&self, obj: &'a Value) -> Vec<Cow<'a, Value>> {
        self.find_results(obj).map(|all| all.into_iter().flatten().collect()).unwrap_or_default()
    }
}

/// The field-selector name of a CRD selectable field: its path without the leading `.`
/// (`.spec.color` is selected as `spec.color`), as kube's custom resource strategy names it.
pub fn selectable_field_name(json_path: &str) -> &str {
    json_path.strip_prefix('.').unwrap_or(json_path)
}

/// The value a field selector compares for a CRD selectable field, as kube's custom resource
/// strategy (`GetAttrs`) computes it: `fmt.Sprint` of the single result (`42`, `true`,
/// `blue`), or the empty string when the path finds nothing or null, so `spec.color=` selects
/// objects without a color. More than one result, or an evaluation error, fails the object's
/// attributes (and with them the list or watch) with kube's message.
pub fn field_value(path: &JsonPath, obj: &Value) -> Result<String, String> {
    let results = path.find_results(obj).map_err(|e| format!("unexpected error finding value with jsonPath: {e}"))?;
    let Some(first) = results.first().filter(|r| !r.is_empty()) else {
        return Ok(String::new());
    };
    if results.len() > 1 || first.len() > 1 {
        return Err("unexpectedly received more than one JSON path result".to_owned());
    }
    Ok(match first.first() {
        Some(value) if !value.is_null() => gofmt::sprint(value),
        _ => String::new(),
    })
}
