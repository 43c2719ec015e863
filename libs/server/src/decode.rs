//! Decoding a create or update body as kube-apiserver's handlers do, with their messages.
//!
//! kube reads a body's type first (`apiVersion` and `kind`, defaulted from the URL), then
//! decodes it into that type and converts it to the one the URL serves
//! (`endpoints/handlers/create.go`, `rest.go`'s `transformDecodeError`). What fails where
//! decides the text clients see:
//! - the type cannot be read at all (not JSON, not an object, a bad `apiVersion`):
//!   `the object provided is unrecognized (must be of type Namespace): <why> (<the body's
//!   first 30 bytes>)`;
//! - the type is read but is not one the URL's kind can be made from: `Secret in version
//!   "v1" cannot be handled as a ConfigMap: <why>`, where the reason is the scheme's (no such
//!   kind registered, or no conversion between the two types);
//! - the same kind in another version of the group: `the API version in the data
//!   (autoscaling/v2) does not match the expected API version (autoscaling/v1)`.

use kapi_apimachinery::go_json::syntax_error;
use kapi_apimachinery::patch::json_kind;
use kapi_apimachinery::ApiError;
use kapi_openapi::{decode_error_message, first_type_error, OpenApi};
use kapi_registry::catalog::{self, ResourceSpec};
use serde_json::Value;

use crate::negotiation::{content_essence, decode_body, PROTOBUF};

/// The scheme kube-apiserver registers its built-in kinds in, as its errors name it.
const SCHEME: &str = "pkg/api/legacyscheme/scheme.go:30";

/// The Go type kube decodes `apiVersion` and `kind` into first (`json.SimpleMetaFactory`).
const FIND_KIND: &str = r#"struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" }"#;

/// Why a body is not an object of the kind the URL serves.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The body's type could not be read.
    #[error("the object provided is unrecognized (must be of type {expected}): {reason} ({summary})")]
    Unrecognized {
        /// The served kind.
        expected: &'static str,
        /// Why (the JSON or YAML error).
        reason: String,
        /// The body's start ([`summarize`]).
        summary: String,
    },
    /// The body's type is not one the served kind can be made from.
    #[error("{kind} in version {version:?} cannot be handled as a {expected}: {reason}")]
    Unhandled {
        /// The body's kind.
        kind: String,
        /// The body's version (without its group).
        version: String,
        /// The served kind.
        expected: &'static str,
        /// The scheme's reason.
        reason: String,
    },
    /// The served kind, in another version of its group.
    #[error("the API version in the data ({data}) does not match the expected API version ({expected})")]
    OtherVersion {
        /// The body's group/version.
        data: String,
        /// The served group/version.
        expected: String,
    },
}

impl From<DecodeError> for ApiError {
    fn from(e: DecodeError) -> Self {
        ApiError::bad_request(e.to_string())
    }
}

/// A group, version and kind as read from a body.
struct Gvk {
    group: String,
    version: String,
    kind: String,
}

impl Gvk {
    fn group_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// The type a body is decoded into: a served kind, or a subresource's (`Scale`, `Binding`).
#[derive(Debug, Clone, Copy)]
pub struct BodyType {
    /// Its group ("" for core).
    pub group: &'static str,
    /// Its version.
    pub version: &'static str,
    /// Its kind.
    pub kind: &'static str,
}

impl BodyType {
    fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.to_owned() } else { format!("{}/{}", self.group, self.version) }
    }
}

/// Decodes a create or update body meant for `spec` (the served kind). Built-in kinds are
/// checked against kube's scheme (the catalog); custom resources leave the type check to
/// their scope.
pub fn decode_object(content_type: Option<&str>, body: &[u8], spec: &'static ResourceSpec) -> Result<Value, ApiError> {
    let target = BodyType { group: spec.group, version: spec.version, kind: spec.kind };
    decode_as(content_type, body, target, catalog::find_kind(spec.group, spec.version, spec.kind).is_some())
}

/// Decodes the body of a subresource write whose type kube's scheme knows (a scale PUT, a
/// pod binding) with the messages of kube's create and update handlers, type errors included
/// (`Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal ...`).
pub fn decode_subresource(openapi: &OpenApi, content_type: Option<&str>, body: &[u8], target: BodyType) -> Result<Value, ApiError> {
    let obj = decode_as(content_type, body, target, true)?;
    let problems = openapi.field_problems(target.group, target.version, target.kind, &obj, None);
    match first_type_error(&problems) {
        Some(detail) => Err(ApiError::bad_request(decode_error_message(target.kind, target.version, detail))),
        None => Ok(obj),
    }
}

/// Decodes a DELETE body (DeleteOptions) as kube's delete handler does: its decoder's texts as
/// they are (`couldn't get version/kind; json parse error: ...`, `json: cannot unmarshal ...`),
/// without the create handler's wrapping. `None` for an empty body.
pub fn decode_delete_options(openapi: &OpenApi, content_type: Option<&str>, body: &[u8]) -> Result<Option<Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    if !matches!(content_essence(content_type).as_deref(), None | Some("application/json")) {
        return decode_body(content_type, body).map(Some);
    }
    let parse_error = |e: String| ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"));
    if let Some(e) = syntax_error(body) {
        return Err(parse_error(e));
    }
    let obj = match serde_json::from_slice(body).map_err(|e| parse_error(e.to_string()))? {
        // Go decodes `null` into the empty options.
        Value::Null => Value::Object(serde_json::Map::new()),
        obj => obj,
    };
    let target = BodyType { group: "", version: "v1", kind: "DeleteOptions" };
    read_type(&obj, &target).map_err(ApiError::bad_request)?;
    match first_type_error(&openapi.field_problems("", "v1", "DeleteOptions", &obj, None)) {
        Some(detail) => Err(ApiError::bad_request(detail)),
        None => Ok(Some(obj)),
    }
}

/// Decodes `body` into `target`, checking the type read against kube's scheme when `in_scheme`.
fn decode_as(content_type: Option<&str>, body: &[u8], spec: BodyType, in_scheme: bool) -> Result<Value, ApiError> {
    let unrecognized = |reason: String| DecodeError::Unrecognized { expected: spec.kind, reason, summary: summarize(body) };
    let mut obj = match content_essence(content_type).as_deref() {
        None | Some("application/json") => {
            if let Some(e) = syntax_error(body) {
                return Err(unrecognized(format!("couldn't get version/kind; json parse error: {e}")).into());
            }
            // Bytes that are not UTF-8 can only be inside strings now (Go's scanner refuses
            // them elsewhere), where Go's decoder reads each as U+FFFD; serde_json refuses them.
            // So a name or label value with such bytes is invalid (422), as in kube, not a 400.
            serde_json::from_str(&String::from_utf8_lossy(body))
                .map_err(|e| unrecognized(format!("couldn't get version/kind; json parse error: {e}")))?
        }
        Some(PROTOBUF) => return decode_body(content_type, body),
        _ => match decode_body(content_type, body) {
            Ok(v) => v,
            // YAML that does not convert: kube returns the converter's error as is.
            Err(e) if e.code == 400 => return Err(unrecognized(e.message).into()),
            Err(e) => return Err(e),
        },
    };
    // Go decodes `null` into an empty object of the URL's kind.
    if obj.is_null() {
        obj = Value::Object(serde_json::Map::new());
    }
    let gvk = read_type(&obj, &spec).map_err(unrecognized)?;
    if in_scheme {
        check_type(&gvk, &spec)?;
    }
    if let Some(map) = obj.as_object_mut() {
        map.insert("apiVersion".into(), Value::String(gvk.group_version()));
        map.insert("kind".into(), Value::String(gvk.kind));
    }
    Ok(obj)
}

/// Why kube's decoder cannot read the type of a JSON value that is not an object
/// (`couldn't get version/kind; json parse error: ...`): a patched object is decoded this way
/// too.
pub fn not_an_object_reason(value: &Value) -> String {
    format!("couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go value of type {FIND_KIND}", json_kind(value))
}

/// kube's `SimpleMetaFactory.Interpret` with the URL's defaults (`gvkWithDefaults`).
fn read_type(obj: &Value, spec: &BodyType) -> Result<Gvk, String> {
    let parse_error = |detail: String| format!("couldn't get version/kind; json parse error: {detail}");
    let map = match obj {
        Value::Object(map) => map,
        other => return Err(not_an_object_reason(other)),
    };
    // Go decodes members in document order and reports the first that does not fit.
    for (key, value) in map {
        if (key == "apiVersion" || key == "kind") && !matches!(value, Value::String(_) | Value::Null) {
            return Err(parse_error(format!("json: cannot unmarshal {} into Go struct field .{key} of type string", json_kind(value))));
        }
    }
    let text = |key: &str| map.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let api_version = text("apiVersion");
    let (mut group, mut version) = match api_version.split('/').collect::<Vec<_>>().as_slice() {
        [""] => (String::new(), String::new()),
        [version] => (String::new(), (*version).to_owned()),
        [group, version] => ((*group).to_owned(), (*version).to_owned()),
        _ => return Err(format!("unexpected GroupVersion string: {api_version}")),
    };
    let mut kind = text("kind");
    if kind.is_empty() {
        kind = spec.kind.to_owned();
    }
    if version.is_empty() && (group.is_empty() || group == spec.group) {
        group = spec.group.to_owned();
        version = spec.version.to_owned();
    }
    Ok(Gvk { group, version, kind })
}

/// Whether kube's scheme makes the served kind from a body of type `gvk`.
fn check_type(gvk: &Gvk, spec: &BodyType) -> Result<(), DecodeError> {
    if gvk.group == spec.group && gvk.version == spec.version && gvk.kind == spec.kind {
        return Ok(());
    }
    let unhandled = |reason: String| DecodeError::Unhandled { kind: gvk.kind.clone(), version: gvk.version.clone(), expected: spec.kind, reason };
    if catalog::find_kind(&gvk.group, &gvk.version, &gvk.kind).is_none() {
        return Err(unhandled(format!("no kind {:?} is registered for version {:?} in scheme {SCHEME:?}", gvk.kind, gvk.group_version())));
    }
    // Types of one internal type convert into each other; the handler then refuses the version.
    if gvk.kind == spec.kind && internal_package(&gvk.group) == internal_package(spec.group) {
        return Err(DecodeError::OtherVersion { data: gvk.group_version(), expected: spec.api_version() });
    }
    Err(unhandled(format!(
        "converting ({}.{}) to ({}.{}): unknown conversion",
        gvk.version,
        gvk.kind,
        internal_package(spec.group),
        spec.kind
    )))
}

/// The Go package of a group's internal types, as Go prints their type names (`core.Pod`,
/// `apps.Deployment`, `rbac.Role`); events.k8s.io Events are core's.
fn internal_package(group: &str) -> &str {
    match group {
        "" | "events.k8s.io" => "core",
        "internal.apiserver.k8s.io" => "apiserverinternal",
        g => g.split('.').next().unwrap_or(g),
    }
}

/// kube's `summarizeData`: the body's first 30 bytes, as text when it starts like a JSON
/// object, else in hex; `<empty>` for none.
fn summarize(body: &[u8]) -> String {
    const MAX: usize = 30;
    let (head, more) = if body.len() > MAX { (&body[..MAX], " ...") } else { (body, "") };
    match body.first() {
        None => "<empty>".to_owned(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(head)),
        Some(_) => format!("{}{more}", head.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(group: &str, version: &str, resource: &str) -> &'static ResourceSpec {
        catalog::find(group, version, resource).expect("served")
    }

    fn message(content_type: Option<&str>, body: &str, served: &'static ResourceSpec) -> String {
        match decode_object(content_type, body.as_bytes(), served) {
            Ok(v) => format!("ok {v}"),
            Err(e) => format!("{} {}", e.code, e.message),
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_read_as_go_reads_them() {
        let cm = spec("", "v1", "configmaps");
        let body = b"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\xffb\",\"labels\":{\"l\":\"v\xc3\x28\"}}}";
        let obj = decode_object(Some("application/json"), body, cm).expect("decoded");
        assert_eq!(obj["metadata"]["name"], "a\u{fffd}b");
        assert_eq!(obj["metadata"]["labels"]["l"], "v\u{fffd}(");
        // Outside strings they are Go's syntax error.
        let e = decode_object(Some("application/json"), b"{\"a\":\xff}", cm).expect_err("not JSON");
        assert!(e.message.contains("invalid character 'ÿ' looking for beginning of value"), "{}", e.message);
    }

    #[test]
    fn unrecognized_bodies() {
        let ns = spec("", "v1", "namespaces");
        assert_eq!(
            message(None, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n", ns),
            "400 the object provided is unrecognized (must be of type Namespace): couldn't get version/kind; json parse error: \
             invalid character 'a' looking for beginning of value (61706956657273696f6e3a2076310a6b696e643a204e616d657370616365 ...)"
        );
        assert_eq!(
            message(Some("application/json"), "", ns),
            "400 the object provided is unrecognized (must be of type Namespace): couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)"
        );
        assert_eq!(
            message(Some("application/json"), r#"{"apiVersion":"#, ns),
            r#"400 the object provided is unrecognized (must be of type Namespace): couldn't get version/kind; json parse error: unexpected end of JSON input ({"apiVersion":)"#
        );
        assert!(message(None, "[1]", ns).ends_with(&format!(
            "json parse error: json: cannot unmarshal array into Go value of type {FIND_KIND} (5b315d)"
        )));
        assert!(message(None, r#"{"kind":7}"#, ns).contains("json: cannot unmarshal number into Go struct field .kind of type string ({\"kind\":7})"));
        assert!(message(None, r#"{"apiVersion":"a/b/c"}"#, ns).contains("(must be of type Namespace): unexpected GroupVersion string: a/b/c ("));
    }

    #[test]
    fn other_kinds_and_versions() {
        let cm = spec("", "v1", "configmaps");
        assert_eq!(
            message(None, r#"{"apiVersion":"v1","kind":"Secret"}"#, cm),
            r#"400 Secret in version "v1" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion"#
        );
        assert_eq!(
            message(None, r#"{"apiVersion":"v1","kind":"configmap"}"#, cm),
            r#"400 configmap in version "v1" cannot be handled as a ConfigMap: no kind "configmap" is registered for version "v1" in scheme "pkg/api/legacyscheme/scheme.go:30""#
        );
        assert_eq!(
            message(None, r#"{"apiVersion":"apps/v1","kind":"ConfigMap"}"#, cm),
            r#"400 ConfigMap in version "v1" cannot be handled as a ConfigMap: no kind "ConfigMap" is registered for version "apps/v1" in scheme "pkg/api/legacyscheme/scheme.go:30""#
        );
        let deploy = spec("apps", "v1", "deployments");
        assert_eq!(
            message(None, r#"{"apiVersion":"v1","kind":"Pod"}"#, deploy),
            r#"400 Pod in version "v1" cannot be handled as a Deployment: converting (v1.Pod) to (apps.Deployment): unknown conversion"#
        );
        let hpa = spec("autoscaling", "v1", "horizontalpodautoscalers");
        assert_eq!(
            message(None, r#"{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler"}"#, hpa),
            "400 the API version in the data (autoscaling/v2) does not match the expected API version (autoscaling/v1)"
        );
        // Missing or partial types take the URL's.
        assert_eq!(message(None, r#"{"metadata":{"name":"a"}}"#, cm), r#"ok {"metadata":{"name":"a"},"apiVersion":"v1","kind":"ConfigMap"}"#);
        assert!(message(None, r#"{"apiVersion":"apps/","kind":"Deployment"}"#, deploy).starts_with(r#"ok {"apiVersion":"apps/v1""#));
    }
}
