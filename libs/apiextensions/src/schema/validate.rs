//! Value validation of a custom resource against its schema, as kube-openapi's
//! `validate.SchemaValidator` does it for apiextensions (with ratcheting on update).
//!
//! kube runs, per node and in this order: type, allOf/anyOf/oneOf/not, string, format, number,
//! slice, enum, object validators; each applies to some JSON kinds only. The order and the
//! match counts matter: they decide which errors of a failed `anyOf`/`oneOf` are reported.

use serde_json::{Map, Value};

use super::formats;
use super::validate_number::{is_json_integer, number_validate};
use super::node::{AdditionalProperties, Schema};
use super::openapi::{OaErr, OaResult};
use super::ratchet::Corr;
use crate::gofmt::{go_num, GoNum};

/// kube-openapi's names for the kind of a decoded JSON value (and the Go format of numbers).
fn schema_info(v: &Value) -> (&'static str, &'static str) {
    match v {
        Value::Bool(_) => ("boolean", ""),
        Value::String(_) => ("string", ""),
        Value::Number(n) => match go_num(n) {
            GoNum::Int(_) => ("integer", "int64"),
            GoNum::Float(_) => ("number", "float64"),
        },
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
        Value::Null => ("null", ""),
    }
}

fn type_validate(
    types: &[&str],
    nullable: bool,
    format: Option<&str>,
    path: &str,
    data: &Value,
) -> OaResult {
    let ok = OaResult {
        errors: Vec::new(),
        match_count: 1,
    };
    if data.is_null() {
        if !types.is_empty() && !types.contains(&"null") && !nullable {
            return OaResult::error(OaErr::invalid_type(path, &types.join(","), "null"));
        }
        return ok;
    }
    let (sch_type, go_format) = schema_info(data);
    let is_float_int = matches!(data, Value::Number(n) if matches!(go_num(n), GoNum::Float(f) if is_json_integer(f)))
        && types.contains(&"integer");
    let is_int_float = sch_type == "integer" && types.contains(&"number");
    let string_or_slice = matches!(data, Value::String(_) | Value::Array(_));
    if let Some(f) = format {
        if !(string_or_slice || types.contains(&sch_type) || go_format == f || is_float_int || is_int_float)
        {
            return OaResult::error(OaErr::invalid_type(path, f, go_format));
        }
        if !(types.contains(&"number") || types.contains(&"integer")) && string_or_slice {
            return ok;
        }
    }
    if !(types.contains(&sch_type) || is_float_int || is_int_float) {
        return OaResult::error(OaErr::invalid_type(path, &types.join(","), sch_type));
    }
    ok
}

/// Go's `reflect` conversion of `data` to the type of `enum_value`, then `DeepEqual`.
fn enum_matches(data: &Value, enum_value: &Value) -> bool {
    if data == enum_value {
        return true;
    }
    match (data, enum_value) {
        (Value::Number(d), Value::Number(e)) => match (go_num(d), go_num(e)) {
            (GoNum::Int(d), GoNum::Float(e)) => d as f64 == e,
            (GoNum::Float(d), GoNum::Int(e)) => d as i64 == e,
            (d, e) => d == e,
        },
        // Go converts an integer to the string of that code point.
        (Value::Number(d), Value::String(e)) => match go_num(d) {
            GoNum::Int(i) => {
                let c = u32::try_from(i)
                    .ok()
                    .and_then(char::from_u32)
                    .unwrap_or('\u{FFFD}');
                e.chars().eq(std::iter::once(c))
            }
            GoNum::Float(_) => false,
        },
        _ => false,
    }
}

fn common_validate(s: &Schema, path: &str, data: &Value) -> OaResult {
    match &s.enum_ {
        Some(values) if !values.is_empty() => {
            if !data.is_null() && values.iter().any(|e| !e.is_null() && enum_matches(data, e)) {
                OaResult::default()
            } else {
                OaResult::error(OaErr::enum_fail(path, data, values))
            }
        }
        _ => OaResult::default(),
    }
}

fn string_validate(s: &Schema, path: &str, data: &str) -> OaResult {
    let runes = data.chars().count() as i64;
    if let Some(max) = s.max_length.filter(|m| runes > *m) {
        return OaResult::error(OaErr::too_long(path, max, data));
    }
    if let Some(min) = s.min_length.filter(|m| runes < *m) {
        return OaResult::error(OaErr::too_short(path, min, data));
    }
    match (&s.pattern, &s.pattern_compiled) {
        (Some(p), Some(Ok(re))) if !re.is_match(data) => {
            OaResult::error(OaErr::failed_pattern(path, p, data))
        }
        (Some(p), Some(Err(e))) => OaResult::error(OaErr::failed_pattern(
            path,
            &format!("{p}, but pattern is invalid: {e}"),
            data,
        )),
        _ => OaResult::default(),
    }
}

fn unique(items: &[Value]) -> bool {
    items
        .iter()
        .enumerate()
        .all(|(i, v)| !items[..i].contains(v))
}

/// Validation of one node; `ratchet` is the correlation with the old object on update.
pub(crate) struct Validator;

impl Validator {
    /// A node validated by a (possibly ratcheting) validator: errors are dropped when the
    /// correlated node is unchanged.
    pub(crate) fn validate_node(
        &self,
        s: &Schema,
        path: &str,
        data: &Value,
        ratchet: Option<&Corr<'_>>,
    ) -> OaResult {
        let res = self.schema_validate(s, path, data, ratchet);
        match ratchet {
            Some(c) if !res.is_valid() && c.deep_equal() => OaResult {
                errors: Vec::new(),
                match_count: res.match_count,
            },
            _ => res,
        }
    }

    fn field_child(
        &self,
        parent_path: &str,
        field: &str,
        s: &Schema,
        path: &str,
        data: &Value,
        ratchet: Option<&Corr<'_>>,
    ) -> OaResult {
        let type_meta = parent_path.is_empty() && (field == "kind" || field == "apiVersion");
        match ratchet.filter(|_| !type_meta).and_then(|c| c.key(field)) {
            Some(child) => self.validate_node(s, path, data, Some(&child)),
            None => self.schema_validate(s, path, data, None),
        }
    }

    fn schema_validate(
        &self,
        s: &Schema,
        path: &str,
        data: &Value,
        ratchet: Option<&Corr<'_>>,
    ) -> OaResult {
        let types = s.openapi_types();
        let format = formats::effective_format(&types, &s.format);
        let mut result = OaResult::default();
        if data.is_null() {
            result.merge(type_validate(&types, s.nullable, format, path, data));
            result.merge(common_validate(s, path, data));
            return result;
        }
        let run = |r: OaResult, result: &mut OaResult| {
            result.merge(r);
            result.inc();
        };
        if !types.is_empty() || format.is_some() {
            run(
                type_validate(&types, s.nullable, format, path, data),
                &mut result,
            );
        }
        run(self.schema_props(s, path, data), &mut result);
        if let Value::String(str_data) = data {
            run(string_validate(s, path, str_data), &mut result);
            if let Some(f) = format.filter(|f| formats::is_string_format(f)) {
                let mut r = OaResult::default();
                if !formats::validates(f, str_data) {
                    r.add(OaErr::invalid_type(path, f, str_data));
                }
                run(r, &mut result);
            }
        }
        if let Value::Number(n) = data {
            run(
                number_validate(s, &types, format, path, go_num(n)),
                &mut result,
            );
        }
        if let Value::Array(items) = data {
            run(self.slice_validate(s, path, items, ratchet), &mut result);
        }
        run(common_validate(s, path, data), &mut result);
        if let Value::Object(obj) = data {
            run(self.object_validate(s, path, obj, ratchet), &mut result);
        }
        result.inc();
        result
    }

    fn schema_props(&self, s: &Schema, path: &str, data: &Value) -> OaResult {
        let mut main = OaResult::default();
        if !s.any_of.is_empty() {
            let mut best: Option<OaResult> = None;
            let mut first_success: Option<OaResult> = None;
            for sub in &s.any_of {
                let r = self.schema_validate(sub, path, data, None);
                if r.is_valid() {
                    best = None;
                    first_success = Some(r);
                    break;
                }
                if best.as_ref().is_none_or(|b| r.match_count > b.match_count) {
                    best = Some(r);
                }
            }
            if first_success.is_none() {
                main.add(OaErr::Plain(format!(
                    "{} must validate at least one schema (anyOf)",
                    crate::gofmt::go_quote(path)
                )));
            }
            if let Some(b) = best.or(first_success) {
                main.merge(b);
            }
        }
        if !s.one_of.is_empty() {
            let mut best: Option<OaResult> = None;
            let mut first_success: Option<OaResult> = None;
            let mut validated = 0;
            for sub in &s.one_of {
                let r = self.schema_validate(sub, path, data, None);
                if r.is_valid() {
                    validated += 1;
                    best = None;
                    if first_success.is_none() {
                        first_success = Some(r);
                    }
                    continue;
                }
                if validated == 0 && best.as_ref().is_none_or(|b| r.match_count > b.match_count) {
                    best = Some(r);
                }
            }
            if validated != 1 {
                let extra = if validated == 0 {
                    "Found none valid".to_string()
                } else {
                    format!("Found {validated} valid alternatives")
                };
                main.add(OaErr::Plain(format!(
                    "{} must validate one and only one schema (oneOf). {extra}",
                    crate::gofmt::go_quote(path)
                )));
                if let Some(b) = best {
                    main.merge(b);
                }
            } else if let Some(f) = first_success {
                main.merge(f);
            }
        }
        if !s.all_of.is_empty() {
            let mut validated = 0;
            for sub in &s.all_of {
                let r = self.schema_validate(sub, path, data, None);
                if r.is_valid() {
                    validated += 1;
                }
                main.merge(r);
            }
            if validated != s.all_of.len() {
                let extra = if validated == 0 {
                    ". None validated"
                } else {
                    ""
                };
                main.add(OaErr::Plain(format!(
                    "{} must validate all the schemas (allOf){extra}",
                    crate::gofmt::go_quote(path)
                )));
            }
        }
        if let Some(not) = &s.not {
            if self.schema_validate(not, path, data, None).is_valid() {
                main.add(OaErr::Plain(format!(
                    "{} must not validate the schema (not)",
                    crate::gofmt::go_quote(path)
                )));
            }
        }
        main.inc();
        main
    }

    fn slice_validate(
        &self,
        s: &Schema,
        path: &str,
        items: &[Value],
        ratchet: Option<&Corr<'_>>,
    ) -> OaResult {
        let mut result = OaResult::default();
        if let Some(item_schema) = &s.items {
            for (i, item) in items.iter().enumerate() {
                let p = format!("{path}[{i}]");
                let r = match ratchet.and_then(|c| c.index(i)) {
                    Some(child) => self.validate_node(item_schema, &p, item, Some(&child)),
                    None => self.schema_validate(item_schema, &p, item, None),
                };
                result.merge(r);
            }
        }
        let size = items.len() as i64;
        if let Some(min) = s.min_items.filter(|m| size < *m) {
            result.add(OaErr::too_few_items(path, min, size));
        }
        if let Some(max) = s.max_items.filter(|m| size > *m) {
            result.add(OaErr::too_many_items(path, max, size));
        }
        if s.unique_items && !unique(items) {
            result.add(OaErr::duplicate_items(path));
        }
        result.inc();
        result
    }

    fn object_validate(
        &self,
        s: &Schema,
        path: &str,
        obj: &Map<String, Value>,
        ratchet: Option<&Corr<'_>>,
    ) -> OaResult {
        let mut res = OaResult::default();
        let size = obj.len() as i64;
        if let Some(min) = s.min_properties.filter(|m| size < *m) {
            res.add(OaErr::too_few_properties(path, min, size));
        }
        if let Some(max) = s.max_properties.filter(|m| size > *m) {
            res.add(OaErr::too_many_properties(path, max, size));
        }
        let mut keys: Vec<&String> = obj.keys().collect();
        keys.sort();
        match &s.additional_properties {
            Some(AdditionalProperties::Bool(false)) => {
                for k in &keys {
                    if !s.properties.contains_key(*k) {
                        res.add(OaErr::property_not_allowed(path, k));
                    }
                }
            }
            Some(AdditionalProperties::Schema(ap)) => {
                for k in &keys {
                    if !s.properties.contains_key(*k) {
                        if let Some(v) = obj.get(*k) {
                            res.merge(self.field_child(
                                path,
                                k,
                                ap,
                                &format!("{path}.{k}"),
                                v,
                                ratchet,
                            ));
                        }
                    }
                }
            }
            _ => {}
        }
        for (name, prop) in &s.properties {
            if let Some(v) = obj.get(name) {
                let p = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                res.merge(self.field_child(path, name, prop, &p, v, ratchet));
            }
        }
        for k in &s.required {
            if !obj.contains_key(k) {
                res.add(OaErr::required(&format!("{path}.{k}")));
            }
        }
        res
    }
}
