//! The Table of custom resources, as apiextensions-apiserver's
//! `registry/customresource/tableconvertor` builds it: a `Name` column, then the CRD's
//! `additionalPrinterColumns` (or `Age` when it has none), each cell the first result of the
//! column's JSONPath converted to the column's type.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::{gofmt, JsonPath};
use crate::gofmt::{go_json, go_quote};

/// ObjectMeta's `name` description, which kube gives the `Name` column.
const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// ObjectMeta's `creationTimestamp` description, which kube gives the default `Age` column.
const CREATION_TIMESTAMP_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// Go's zero `time.Time` (0001-01-01T00:00:00Z), which kube prints as `<unknown>`.
const GO_ZERO_TIME_UNIX: i64 = -62_135_596_800;

#[derive(Debug, Clone, PartialEq)]
struct Column {
    name: String,
    kind: String,
    format: String,
    description: String,
    priority: i64,
}

impl Column {
    fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.kind,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// Builds the Table of one served version of a CRD (kube builds one per version, from the
/// version's printer columns).
#[derive(Debug, Clone, PartialEq)]
pub struct TableConvertor {
    /// `Name` first, then one per path.
    headers: Vec<Column>,
    paths: Vec<JsonPath>,
}

fn text(col: &Value, key: &str) -> String {
    col.get(key).and_then(Value::as_str).unwrap_or_default().to_owned()
}

impl TableConvertor {
    /// The convertor of a version's `additionalPrinterColumns` (a JSON array, or null when the
    /// version has none: kube then serves its default `Age` column). A jsonPath that does not
    /// parse fails with kube's `unrecognized column definition "<path>"`.
    pub fn new(columns: &Value) -> Result<TableConvertor, String> {
        match TableConvertor::with_fallback(columns) {
            (convertor, None) => Ok(convertor),
            (_, Some(err)) => Err(err),
        }
    }

    /// As kube serves a CRD whose columns do not parse: the columns before the bad one are
    /// kept (kube logs the error and serves that convertor), and the error is returned too.
    pub fn with_fallback(columns: &Value) -> (TableConvertor, Option<String>) {
        let defaults;
        let columns: &[Value] = match columns {
            Value::Array(items) if !items.is_empty() => items,
            Value::Array(_) | Value::Null => {
                defaults = [age_column()];
                &defaults
            }
            _ => return (TableConvertor::empty(), Some("additionalPrinterColumns must be a list".to_owned())),
        };
        let mut convertor = TableConvertor::empty();
        for col in columns {
            let json_path = text(col, "jsonPath");
            let Ok(path) = JsonPath::parse(&json_path) else {
                return (convertor, Some(format!("unrecognized column definition {}", go_quote(&json_path))));
            };
            let mut description = text(col, "description");
            if description.is_empty() {
                description = format!("Custom resource definition column (in JSONPath format): {json_path}");
            }
            convertor.headers.push(Column {
                name: text(col, "name"),
                kind: text(col, "type"),
                format: text(col, "format"),
                description,
                priority: col.get("priority").and_then(Value::as_i64).unwrap_or(0),
            });
            convertor.paths.push(path);
        }
        (convertor, None)
    }

    /// The Table of the `scale` subresource, as kube serves it: `Desired` (`.spec.replicas`)
    /// when the CRD has a specReplicasPath, `Available` (`.status.replicas`) when it has a
    /// statusReplicasPath, then `Age`. The paths are those of the Scale object, not the CRD's.
    pub fn scale(spec_replicas_path: bool, status_replicas_path: bool) -> TableConvertor {
        let mut columns = Vec::new();
        if spec_replicas_path {
            columns.push(json!({"name": "Desired", "type": "integer", "description": "Number of desired replicas", "jsonPath": ".spec.replicas"}));
        }
        if status_replicas_path {
            columns.push(json!({"name": "Available", "type": "integer", "description": "Number of actual replicas", "jsonPath": ".status.replicas"}));
        }
        columns.push(age_column());
        TableConvertor::with_fallback(&Value::Array(columns)).0
    }

    fn empty() -> TableConvertor {
        let name = Column {
            name: "Name".to_owned(),
            kind: "string".to_owned(),
            format: "name".to_owned(),
            description: NAME_DESCRIPTION.to_owned(),
            priority: 0,
        };
        TableConvertor { headers: vec![name], paths: Vec::new() }
    }

    /// The Table's `columnDefinitions` (`name`, `type`, `format`, `description`, `priority`
    /// each, as `metav1.TableColumnDefinition` always serializes them).
    pub fn column_definitions(&self) -> Vec<Value> {
        self.headers.iter().map(Column::definition).collect()
    }

    /// The cells of one object's row, with ages computed against the current time.
    pub fn cells(&self, obj: &Value) -> Vec<Value> {
        self.cells_at(obj, SystemTime::now())
    }

    /// The cells of one object's row: `metadata.name`, then per column the first result of
    /// its path as the column's type (`integer` truncates numbers, `number` widens integers,
    /// `string` prints any value as jsonpath does, `date` is an age like `3d4h`), `null`
    /// when the path finds nothing, fails, or the value does not fit the type.
    pub fn cells_at(&self, obj: &Value, now: SystemTime) -> Vec<Value> {
        let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let mut cells = Vec::with_capacity(self.headers.len());
        cells.push(Value::String(name.to_owned()));
        for (header, path) in self.headers.iter().skip(1).zip(&self.paths) {
            let first = match path.find_results(obj) {
                Ok(results) => results.into_iter().next().and_then(|r| r.into_iter().next()),
                Err(_) => None,
            };
            cells.push(first.map_or(Value::Null, |value| cell(&header.kind, &value, now)));
        }
        cells
    }
}

fn age_column() -> Value {
    json!({"name": "Age", "type": "date", "description": CREATION_TIMESTAMP_DESCRIPTION, "jsonPath": ".metadata.creationTimestamp"})
}

/// One cell from a column's first result.
fn cell(kind: &str, value: &Value, now: SystemTime) -> Value {
    match (kind, value) {
        // Printed as jsonpath prints a result: objects and lists as Go JSON, null as
        // `<no value>`, scalars bare.
        ("string", Value::String(s)) => Value::String(s.clone()),
        ("string", Value::Null) => Value::String("<no value>".to_owned()),
        ("string", Value::Array(_) | Value::Object(_)) => Value::String(go_json(value)),
        ("string", _) => Value::String(gofmt::sprint(value)),
        ("integer", Value::Number(n)) => match n.as_i64() {
            Some(i) => Value::from(i),
            // Go's int64(float64) conversion; Rust's `as` saturates where Go's is undefined.
            #[allow(clippy::cast_possible_truncation)]
            None => Value::from(n.as_f64().unwrap_or(0.0) as i64),
        },
        ("number", Value::Number(n)) => number_cell(n.as_i64().map_or_else(|| n.as_f64().unwrap_or(0.0), |i| i as f64)),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("date", Value::String(s)) => Value::String(age(s, now)),
        _ => Value::Null,
    }
}

/// A `number` cell; integral values are written as integers because Go's encoder writes
/// `float64(42)` as `42`, which is what clients of kube's Table see.
fn number_cell(f: f64) -> Value {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if f.fract() == 0.0 && f.abs() < EXACT {
        #[allow(clippy::cast_possible_truncation)]
        return Value::from(f as i64);
    }
    serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
}

/// kube's date cell: `<unknown>` for an empty or zero time, `<invalid>` when the text is not
/// RFC 3339 or the time is more than a second ahead, else `duration.HumanDuration` of its age.
fn age(timestamp: &str, now: SystemTime) -> String {
    if timestamp.is_empty() || timestamp == "null" {
        return "<unknown>".to_owned();
    }
    let Some(t) = kapi_apimachinery::time::parse_rfc3339(timestamp) else {
        return "<invalid>".to_owned();
    };
    if t.unix_timestamp() == GO_ZERO_TIME_UNIX && t.nanosecond() == 0 {
        return "<unknown>".to_owned();
    }
    let now_nanos = match now.duration_since(UNIX_EPOCH) {
        Ok(d) => i128::try_from(d.as_nanos()).unwrap_or(i128::MAX),
        Err(e) => -i128::try_from(e.duration().as_nanos()).unwrap_or(i128::MAX),
    };
    let seconds = (now_nanos - t.unix_timestamp_nanos()) / 1_000_000_000;
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    kapi_apimachinery::time::human_duration(Duration::from_secs(u64::try_from(seconds).unwrap_or(0)))
}
