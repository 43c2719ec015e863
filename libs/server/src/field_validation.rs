//! `fieldValidation=Ignore|Warn|Strict`: what happens to unknown and duplicate fields.
//!
//! kube-apiserver's typed decoder finds them while decoding a body; kapi keeps objects as JSON,
//! so the same facts come from the kind's OpenAPI schema ([`kapi_openapi::OpenApi::field_problems`]).
//! Type errors fail the request in every mode, as a failed Go decode does.

use kapi_apimachinery::go_json::{go_format, marshal_sorted};
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
    /// The result of applying a patch.
    Patched(Patched<'a>),
}

/// How a patched object was made: kube decodes each kind of result its own way, and words the
/// failures accordingly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patched<'a> {
    /// A JSON patch (None) or a merge patch (its bytes, whose duplicate fields kube reports
    /// too): kube decodes the patched JSON, and shows it as its JSON patch library re-marshals
    /// it (keys sorted).
    Json(Option<&'a [u8]>),
    /// A strategic merge patch (its bytes): kube decodes the merged map with its unstructured
    /// converter (`cannot restore map from string`) and shows the patch itself (`map[...]`).
    Strategic(&'a [u8]),
    /// A server-side apply configuration.
    Apply,
}

/// kube's 422 for a patched object that does not decode: an invalid `patch` whose value is
/// what the patch handler holds at that point (NewInvalid with an empty kind).
pub(crate) fn invalid_patch(how: Patched<'_>, obj: &Value, detail: &str) -> ApiError {
    let shown = match how {
        Patched::Json(_) => marshal_sorted(obj),
        Patched::Strategic(raw) => serde_json::from_slice(raw).map_or_else(|_| obj.to_string(), |patch| go_format(&patch)),
        Patched::Apply => obj.to_string(),
    };
    ApiError::invalid("", "", "", vec![Cause::invalid("patch", &Value::String(shown), detail)])
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
        _ if mode == FieldValidation::Ignore => None,
        Source::Body(raw) | Source::Patched(Patched::Json(raw)) => raw,
        Source::Patched(Patched::Strategic(raw)) => Some(raw),
        Source::Patched(Patched::Apply) => None,
    };
    let problems = openapi.field_problems(spec.group, spec.version, spec.kind, obj, raw);
    if let Some(detail) = first_type_error(&problems) {
        return Err(match source {
            Source::Body(_) => ApiError::bad_request(decode_error_message(spec.kind, spec.version, detail)),
            Source::Patched(how @ Patched::Strategic(_)) => {
                invalid_patch(how, obj, problems.unstructured_errors.first().map_or(detail, String::as_str))
            }
            Source::Patched(how) => invalid_patch(how, obj, detail),
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
            (Some(msg), Source::Patched(Patched::Apply)) => Err(ApiError::bad_request(msg)),
            // Unknown and duplicate fields of a patch are an invalid `patch` too.
            (Some(msg), Source::Patched(how)) => Err(invalid_patch(how, obj, &msg)),
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
        let applied = check(&api, FieldValidation::Strict, cm(), &mut obj.clone(), Source::Patched(Patched::Apply)).unwrap_err();
        assert_eq!((applied.code, applied.message.as_str()), (400, "strict decoding error: unknown field \"bogus\""));
        // A JSON or merge patch's unknown fields are an invalid patch (kube's patch handler).
        let patched = check(&api, FieldValidation::Strict, cm(), &mut obj.clone(), Source::Patched(Patched::Json(None))).unwrap_err();
        assert_eq!(patched.code, 422);
        assert_eq!(
            patched.message,
            r#" "" is invalid: patch: Invalid value: "{\"apiVersion\":\"v1\",\"bogus\":1,\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}": strict decoding error: unknown field "bogus""#
        );
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
        let obj = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a", "labels": "x"}});
        let err = check(&openapi(), FieldValidation::Ignore, cm(), &mut obj.clone(), Source::Patched(Patched::Json(None))).unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            r#" "" is invalid: patch: Invalid value: "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"labels\":\"x\",\"name\":\"a\"}}": json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of type map[string]string"#
        );
        // A strategic merge patch's result goes through kube's unstructured converter, and the
        // patch is what the error shows.
        let patch = br#"{"metadata":{"labels":"x"},"data":{"k":1}}"#;
        let err = check(&openapi(), FieldValidation::Ignore, cm(), &mut obj.clone(), Source::Patched(Patched::Strategic(patch))).unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(err.message, r#" "" is invalid: patch: Invalid value: "map[data:map[k:1] metadata:map[labels:x]]": cannot restore map from string"#);
        let replicas = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": 1}});
        let err = check(&openapi(), FieldValidation::Ignore, cm(), &mut replicas.clone(), Source::Patched(Patched::Strategic(b"{}"))).unwrap_err();
        assert!(err.message.ends_with(r#"Invalid value: "map[]": cannot convert int64 to string"#), "{}", err.message);
    }

    #[test]
    fn warning_header_quotes() {
        assert_eq!(warning_header("unknown field \"spec.x\""), "299 - \"unknown field \\\"spec.x\\\"\"");
    }
}
