//! `fieldValidation=Ignore|Warn|Strict`: what happens to unknown and duplicate fields.
//!
//! kube-apiserver's typed decoder finds them while decoding a body; kapi keeps objects as JSON,
//! so the same facts come from the kind's OpenAPI schema ([`kapi_openapi::OpenApi::field_problems`]).
//! Type errors fail the request in every mode, as a failed Go decode does.

use kapi_apimachinery::{ApiError, Cause};
use kapi_openapi::{decode_error_message, first_type_error, strict_message, warnings, OpenApi};
use kapi_registry::catalog::ResourceSpec;
use serde_json::Value;

use crate::query::Query;

/// The client's choice; kube's default (no parameter) is `Warn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop them and tell the client in `Warning` headers.
    Warn,
    /// Reject the request with 400.
    Strict,
}

impl FieldValidation {
    /// Reads `fieldValidation` from the query, rejecting values kube rejects.
    pub fn from_query(query: &Query) -> Result<Self, ApiError> {
        match query.get("fieldValidation") {
            None | Some("" | "Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(v) => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: {v:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// Where the checked object came from: kube words the errors of decoded bodies and of patched
/// objects differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source<'a> {
    /// A request body (create, update); the raw bytes when it was JSON, for duplicate detection.
    Body(Option<&'a [u8]>),
    /// The result of applying a patch; the raw patch when it was a JSON object (merge or
    /// strategic merge), whose duplicate fields kube reports too.
    Patched(Option<&'a [u8]>),
}

/// Checks `obj` of the kind `spec` serves and drops its unknown fields, as kube's typed
/// decoding does. Returns the warnings to send (Warn), or the 400 the request must fail with
/// (Strict, or any type error).
pub fn check(
    openapi: &OpenApi,
    mode: FieldValidation,
    spec: &ResourceSpec,
    obj: &mut Value,
    source: Source<'_>,
) -> Result<Vec<String>, ApiError> {
    let raw = match source {
        Source::Body(raw) | Source::Patched(raw) if mode != FieldValidation::Ignore => raw,
        _ => None,
    };
    let problems = openapi.field_problems(spec.group, spec.version, spec.kind, obj, raw);
    if let Some(detail) = first_type_error(&problems) {
        return Err(match source {
            Source::Body(_) => ApiError::bad_request(decode_error_message(spec.kind, spec.version, detail)),
            // kube decodes the patched JSON and reports a failure as an invalid `patch` whose
            // value is that JSON (apiserver's patch handler, NewInvalid with an empty kind).
            Source::Patched(_) => ApiError::invalid(
                "",
                "",
                "",
                vec![Cause::invalid("patch", &Value::String(obj.to_string()), detail)],
            ),
        });
    }
    if !problems.unknown.is_empty() && mode != FieldValidation::Strict {
        openapi.prune_unknown_fields(spec.group, spec.version, spec.kind, obj);
    }
    match mode {
        FieldValidation::Ignore => Ok(Vec::new()),
        FieldValidation::Warn => Ok(warnings(&problems)),
        FieldValidation::Strict => match (strict_message(&problems), source) {
            (None, _) => Ok(Vec::new()),
            (Some(msg), Source::Body(_)) => Err(ApiError::bad_request(decode_error_message(spec.kind, spec.version, &msg))),
            (Some(msg), Source::Patched(_)) => Err(ApiError::bad_request(msg)),
        },
    }
}

/// Formats one `Warning` header value (RFC 7234 warn-code 299, agent `-`).
pub fn warning_header(text: &str) -> String {
    let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
    format!("299 - \"{escaped}\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kapi_registry::catalog;
    use serde_json::json;

    fn openapi() -> OpenApi {
        OpenApi::new(Vec::new())
    }

    fn cm() -> &'static ResourceSpec {
        catalog::find("", "v1", "configmaps").expect("configmaps served")
    }

    #[test]
    fn modes_from_query() {
        assert_eq!(FieldValidation::from_query(&Query::parse(None)).unwrap(), FieldValidation::Warn);
        assert_eq!(FieldValidation::from_query(&Query::parse(Some("fieldValidation=Strict"))).unwrap(), FieldValidation::Strict);
        let err = FieldValidation::from_query(&Query::parse(Some("fieldValidation=strict"))).unwrap_err();
        assert_eq!(err.code, 400);
    }

    #[test]
    fn unknown_field_per_mode() {
        let api = openapi();
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "bogus": 1});
        let raw = serde_json::to_vec(&obj).unwrap();
        let strict = check(&api, FieldValidation::Strict, cm(), &mut obj.clone(), Source::Body(Some(&raw))).unwrap_err();
        assert_eq!(strict.code, 400);
        assert_eq!(
            strict.message,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"bogus\""
        );
        let mut warned = obj.clone();
        let warn = check(&api, FieldValidation::Warn, cm(), &mut warned, Source::Body(Some(&raw))).unwrap();
        assert_eq!(warn, vec!["unknown field \"bogus\"".to_owned()]);
        let mut ignored = obj.clone();
        assert!(check(&api, FieldValidation::Ignore, cm(), &mut ignored, Source::Body(Some(&raw))).unwrap().is_empty());
        let pruned = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        assert_eq!((warned, ignored), (pruned.clone(), pruned), "unknown fields are dropped as kube's decoder does");
        let patched = check(&api, FieldValidation::Strict, cm(), &mut obj.clone(), Source::Patched(None)).unwrap_err();
        assert_eq!(patched.message, "strict decoding error: unknown field \"bogus\"");
    }

    #[test]
    fn type_errors_fail_in_every_mode() {
        let api = openapi();
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": "x"});
        for mode in [FieldValidation::Ignore, FieldValidation::Warn, FieldValidation::Strict] {
            let err = check(&api, mode, cm(), &mut obj.clone(), Source::Body(None)).unwrap_err();
            assert_eq!(err.code, 400, "{mode:?}");
            assert!(err.message.starts_with("ConfigMap in version \"v1\" cannot be handled as a ConfigMap: "), "{}", err.message);
        }
    }

    #[test]
    fn patched_type_errors_are_invalid_patches() {
        let mut obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": "x"});
        let err = check(&openapi(), FieldValidation::Ignore, cm(), &mut obj, Source::Patched(None)).unwrap_err();
        assert_eq!(err.code, 422);
        assert!(err.message.starts_with(" \"\" is invalid: patch: Invalid value: \"{"), "{}", err.message);
        assert!(err.message.contains("json: cannot unmarshal string into Go"), "{}", err.message);
    }

    #[test]
    fn warning_header_quotes() {
        assert_eq!(warning_header("unknown field \"spec.x\""), "299 - \"unknown field \\\"spec.x\\\"\"");
    }
}
