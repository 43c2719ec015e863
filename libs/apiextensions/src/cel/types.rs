//! CEL types of schema nodes (kube's `SchemaDeclType`), with the size bounds the cost estimator
//! needs: `maxLength`, `maxItems` and `maxProperties` where declared, otherwise kube's
//! per-request estimates (a 3 MiB request can hold at most so many elements of a given minimal
//! serialized size).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::schema::{AdditionalProperties, Schema};

/// kube's `celconfig.MaxRequestSizeBytes`.
pub(crate) const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;

/// A CEL type as the checker sees it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ty {
    /// Unknown until run time (int-or-string, preserve-unknown-fields, mixed expressions).
    Dyn,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    /// `google.protobuf.Duration`: strings of `format: duration`, `duration('1h')`.
    Duration,
    /// `google.protobuf.Timestamp`: strings of `format: date` or `date-time`, `timestamp(...)`.
    Timestamp,
    /// A list, with its element type.
    List(Box<Decl>),
    /// A map with string keys (additionalProperties), with its value type.
    Map(Box<Decl>),
    /// An object with declared properties (escaped names).
    Object(BTreeMap<String, Decl>),
    /// `optional(T)`.
    Optional(Box<Ty>),
    /// A type value (`type(x)`, `int`).
    Type,
    /// kube's library types: `Quantity`, `URL`, `net.IP`, `net.CIDR`, `kubernetes.NamedFormat`.
    Opaque(&'static str),
}

/// A type with its bounds: the most elements (string length, list items, map entries) and the
/// smallest JSON form of a value (kube's `MaxElements` and `MinSerializedSize`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decl {
    pub ty: Ty,
    pub max: u64,
    pub min_size: u64,
}

impl Decl {
    pub(crate) fn new(ty: Ty, max: u64) -> Self {
        Decl { ty, max, min_size: 1 }
    }

    pub(crate) fn scalar(ty: Ty) -> Self {
        Decl { ty, max: 0, min_size: 1 }
    }

    pub(crate) fn dyn_() -> Self {
        Decl::new(Ty::Dyn, MAX_REQUEST_SIZE_BYTES)
    }
}

impl Ty {
    /// The name cel-go prints in overload errors.
    pub(crate) fn name(&self) -> String {
        match self {
            Ty::Dyn => "dyn".into(),
            Ty::Null => "null_type".into(),
            Ty::Bool => "bool".into(),
            Ty::Int => "int".into(),
            Ty::Uint => "uint".into(),
            Ty::Double => "double".into(),
            Ty::String => "string".into(),
            Ty::Bytes => "bytes".into(),
            Ty::Duration => "google.protobuf.Duration".into(),
            Ty::Timestamp => "google.protobuf.Timestamp".into(),
            Ty::List(e) => format!("list({})", e.ty.name()),
            Ty::Map(v) => format!("map(string, {})", v.ty.name()),
            Ty::Object(_) => "object".into(),
            Ty::Optional(t) => format!("optional_type({})", t.name()),
            Ty::Type => "type".into(),
            Ty::Opaque(n) => (*n).into(),
        }
    }
}

const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// CEL's `IDENT ::= [_a-zA-Z][_a-zA-Z0-9]* - RESERVED`: a name an expression can use as is
/// (admission policies' variable names must be one).
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_ascii_alphabetic()) && chars.all(|c| c == '_' || c.is_ascii_alphanumeric()) && !RESERVED.contains(&name)
}

/// kube's `Escape`: property names as CEL sees them (`foo-bar` is `foo__dash__bar`, `namespace`
/// is `__namespace__`). `None` when the name cannot be expressed.
pub(crate) fn escape(name: &str) -> Option<String> {
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    let mut first = true;
    while let Some(c) = chars.next() {
        if first && !(c.is_ascii_alphabetic() || c == '_') && !matches!(c, '.' | '-' | '/') {
            return None;
        }
        first = false;
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

fn string_max(s: &Schema) -> u64 {
    if let Some(m) = s.max_length {
        return m.max(0) as u64 * 4;
    }
    if !s.x_kubernetes_int_or_string {
        if let Some(e) = &s.enum_ {
            return e.iter().filter_map(Value::as_str).map(|x| x.len() as u64).max().unwrap_or(0);
        }
    }
    MAX_REQUEST_SIZE_BYTES - 2
}

fn type_and_object_meta(fields: &mut BTreeMap<String, Decl>) {
    let string = || Decl { ty: Ty::String, max: MAX_REQUEST_SIZE_BYTES - 2, min_size: 2 };
    fields.entry("kind".into()).or_insert_with(string);
    fields.entry("apiVersion".into()).or_insert_with(string);
    let meta_ok = matches!(fields.get("metadata"), Some(Decl { ty: Ty::Object(m), .. })
        if m.contains_key("name") && m.contains_key("generateName"));
    if !meta_ok {
        let mut meta = BTreeMap::new();
        meta.insert("name".to_string(), string());
        meta.insert("generateName".to_string(), string());
        fields.insert("metadata".into(), Decl { ty: Ty::Object(meta), max: 0, min_size: 2 });
    }
}

/// kube's `SchemaDeclType`; `None` where kube declares nothing (an array without items, a
/// typeless node without int-or-string or preserve-unknown-fields).
pub(crate) fn decl_of(s: &Schema, resource_root: bool) -> Option<Decl> {
    if s.x_kubernetes_int_or_string {
        return Some(Decl { ty: Ty::Dyn, max: string_max(s), min_size: 1 });
    }
    match s.type_.as_str() {
        "array" => {
            let items = s.items.as_deref()?;
            let it = decl_of(items, items.x_kubernetes_embedded_resource)?;
            let max = match s.max_items {
                Some(m) => m.max(0) as u64,
                None => (MAX_REQUEST_SIZE_BYTES - 2) / (it.min_size + 1),
            };
            Some(Decl { ty: Ty::List(Box::new(it)), max, min_size: 2 })
        }
        "object" => {
            if let Some(AdditionalProperties::Schema(ap)) = &s.additional_properties {
                let v = decl_of(ap, ap.x_kubernetes_embedded_resource)?;
                let max = match s.max_properties {
                    Some(m) => m.max(0) as u64,
                    None => (MAX_REQUEST_SIZE_BYTES - 2) / (v.min_size + 6),
                };
                return Some(Decl { ty: Ty::Map(Box::new(v)), max, min_size: 2 });
            }
            if s.properties.is_empty() && s.x_kubernetes_preserve_unknown_fields && !resource_root {
                return Some(Decl { ty: Ty::Dyn, max: MAX_REQUEST_SIZE_BYTES - 2, min_size: 2 });
            }
            let mut fields = BTreeMap::new();
            let mut min_size = 2;
            for (name, p) in &s.properties {
                let Some(d) = decl_of(p, p.x_kubernetes_embedded_resource) else { continue };
                if s.required.contains(name) && p.default.is_none() {
                    min_size += name.len() as u64 + d.min_size + 4;
                }
                if let Some(n) = escape(name) {
                    fields.insert(n, d);
                }
            }
            if resource_root {
                type_and_object_meta(&mut fields);
            }
            let max = s.max_properties.map(|m| m.max(0) as u64).unwrap_or(fields.len() as u64);
            Some(Decl { ty: Ty::Object(fields), max, min_size })
        }
        "string" => match s.format.as_str() {
            "byte" => Some(Decl {
                ty: Ty::Bytes,
                max: s.max_length.map_or(MAX_REQUEST_SIZE_BYTES - 2, |m| m.max(0) as u64),
                min_size: 2,
            }),
            // kube's bounds for these ignore maxLength: the longest value of the format, and
            // the shortest one's JSON size (`"0"`, `"2006-01-02"`, `"2006-01-02T15:04:05"`)
            "duration" => Some(Decl { ty: Ty::Duration, max: 32, min_size: 3 }),
            "date" => Some(Decl { ty: Ty::Timestamp, max: 12, min_size: 12 }),
            "date-time" => Some(Decl { ty: Ty::Timestamp, max: 32, min_size: 21 }),
            _ => Some(Decl { ty: Ty::String, max: string_max(s), min_size: 2 }),
        },
        "boolean" => Some(Decl { ty: Ty::Bool, max: 0, min_size: 4 }),
        "number" => Some(Decl { ty: Ty::Double, max: 0, min_size: 1 }),
        "integer" => Some(Decl { ty: Ty::Int, max: 0, min_size: 1 }),
        "" if s.x_kubernetes_preserve_unknown_fields => Some(Decl::dyn_()),
        _ => None,
    }
}

/// The same declaration with sizes taken from an actual value, so that the estimator gives the
/// cost of one evaluation (kapi's stand-in for cel-go's runtime cost tracking).
pub(crate) fn with_actual_sizes(d: &Decl, v: &Value) -> Decl {
    let ty = match (&d.ty, v) {
        (Ty::List(e), Value::Array(a)) => {
            let mut elem = (**e).clone();
            elem.max = 0;
            for x in a {
                let s = with_actual_sizes(e, x);
                elem.max = elem.max.max(s.max);
                if let (Ty::Object(_), Ty::Object(_)) | (Ty::List(_), Ty::List(_)) = (&elem.ty, &s.ty) {
                    elem = Decl { max: elem.max, ..s };
                }
            }
            return Decl { ty: Ty::List(Box::new(elem)), max: a.len() as u64, min_size: d.min_size };
        }
        (Ty::Map(e), Value::Object(m)) => {
            let mut elem = (**e).clone();
            elem.max = m.values().map(|x| with_actual_sizes(e, x).max).max().unwrap_or(0);
            return Decl { ty: Ty::Map(Box::new(elem)), max: m.len() as u64, min_size: d.min_size };
        }
        (Ty::Object(fields), Value::Object(m)) => {
            let mut out = fields.clone();
            for (k, f) in out.iter_mut() {
                if let Some(x) = m.get(k) {
                    *f = with_actual_sizes(f, x);
                }
            }
            Ty::Object(out)
        }
        (t, _) => t.clone(),
    };
    let max = match v {
        Value::String(s) => s.chars().count() as u64,
        Value::Array(a) => a.len() as u64,
        Value::Object(m) => m.len() as u64,
        _ => 0,
    };
    Decl { ty, max, min_size: d.min_size }
}
