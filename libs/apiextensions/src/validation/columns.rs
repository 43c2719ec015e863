//! `additionalPrinterColumns`, `subresources` (status, scale) and `selectableFields`: the
//! parts of a CRD that point into custom resources by path.

use kapi_apimachinery::Cause;
use serde_json::Value;

use super::fieldpath::valid_field_path;
use super::{duplicate, get_some, get_str, invalid_str, required, too_many, Opts, Path};

const COLUMN_TYPES: &[&str] = &["boolean", "date", "integer", "number", "string"];
const COLUMN_FORMATS: &[&str] = &["byte", "date", "date-time", "double", "float", "int32", "int64", "password"];
/// kube's `MaxSelectableFields`: each one costs an index per custom resource.
const MAX_SELECTABLE_FIELDS: usize = 8;

/// kube's `ValidateCustomResourceColumnDefinition`. The path is checked only as a "simple"
/// path; kube parses the full JSONPath template when it renders tables, not here.
pub(crate) fn validate_column(col: &Value, path: &Path) -> Vec<Cause> {
    let mut causes = Vec::new();
    if get_str(col, "name").is_empty() {
        causes.push(required(&path.child("name"), ""));
    }
    let types = format!("must be one of {}", COLUMN_TYPES.join(","));
    let ty = get_str(col, "type");
    if ty.is_empty() {
        causes.push(required(&path.child("type"), &types));
    } else if !COLUMN_TYPES.contains(&ty) {
        causes.push(invalid_str(&path.child("type"), ty, &types));
    }
    let format = get_str(col, "format");
    if !format.is_empty() && !COLUMN_FORMATS.contains(&format) {
        causes.push(invalid_str(
            &path.child("format"),
            format,
            &format!("must be one of {}", COLUMN_FORMATS.join(",")),
        ));
    }
    // The internal type calls the field JSONPath, and kube's path says so.
    let json_path = get_str(col, "jsonPath");
    if json_path.is_empty() {
        causes.push(required(&path.child("JSONPath"), ""));
    } else {
        causes.extend(validate_simple_json_path(json_path, &path.child("JSONPath")));
    }
    causes
}

/// kube's `validateSimpleJSONPath`: non-empty and starting with a dot.
pub(crate) fn validate_simple_json_path(s: &str, path: &Path) -> Vec<Cause> {
    if s.is_empty() {
        vec![invalid_str(path, s, "must not be empty")]
    } else if !s.starts_with('.') {
        vec![invalid_str(path, s, "must be a simple json path starting with .")]
    } else {
        Vec::new()
    }
}

/// kube's `ValidateCustomResourceDefinitionSubresources`: the scale paths must be simple
/// paths under `.spec` (spec replicas), `.status` (status replicas), either (label selector).
pub(crate) fn validate_subresources(sub: Option<&Value>, path: &Path) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(scale) = sub.and_then(|s| get_some(s, "scale")) else {
        return causes;
    };
    let checks: [(&str, &[&str], &str, bool); 3] = [
        ("specReplicasPath", &[".spec."], "should be a json path under .spec", true),
        ("statusReplicasPath", &[".status."], "should be a json path under .status", true),
        ("labelSelectorPath", &[".spec.", ".status."], "should be a json path under either .spec or .status", false),
    ];
    for (key, prefixes, msg, mandatory) in checks {
        let p = path.child(&format!("scale.{key}"));
        let value = get_str(scale, key);
        if value.is_empty() {
            if mandatory {
                causes.push(required(&p, ""));
            }
            continue;
        }
        let errs = validate_simple_json_path(value, &p);
        if !errs.is_empty() {
            causes.extend(errs);
        } else if !prefixes.iter().any(|pre| value.starts_with(pre)) {
            causes.push(invalid_str(&p, value, msg));
        }
    }
    causes
}

/// kube's `ValidateCustomResourceSelectableFields`: each path names a string, boolean or
/// integer field outside metadata, once; at most eight distinct fields.
pub(crate) fn validate_selectable_fields(
    fields: &[Value],
    schema: Option<&Value>,
    path: &Path,
    opts: &Opts,
    version: &str,
) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut unique: Vec<String> = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let p = path.index(i).child("jsonPath");
        let json_path = get_str(f, "jsonPath");
        if json_path.is_empty() {
            causes.push(required(&p, ""));
            continue;
        }
        let (found_path, found) = match valid_field_path(json_path, schema, false) {
            Ok(x) => x,
            Err(e) => {
                causes.push(invalid_str(&p, json_path, &format!("is an invalid path: {e}")));
                continue;
            }
        };
        if found_path.root == "metadata" {
            causes.push(invalid_str(&p, json_path, "must not point to fields in metadata"));
        }
        let ty = found.map(|s| get_str(s, "type")).unwrap_or("");
        if !matches!(ty, "string" | "boolean" | "integer") {
            causes.push(invalid_str(
                &p,
                json_path,
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        if unique.contains(&found_path.rendered) {
            causes.push(duplicate(&p, json_path));
        } else {
            unique.push(found_path.rendered);
        }
    }
    let allowed = opts.allow_too_many_selectable_fields.iter().any(|v| v == version);
    if unique.len() > MAX_SELECTABLE_FIELDS && !allowed {
        causes.push(too_many(path, unique.len(), MAX_SELECTABLE_FIELDS));
    }
    causes
}
