//! Create and update bodies: JSON and YAML through the decode path.
//!
//! `kapi_server::decode` is not reachable without the whole server, so these targets drive the
//! functions it calls, in its order: Go's syntax check (`go_json::syntax_error`, whose text is
//! the client's error), serde_json or serde-saphyr (the YAML decoder the server uses), then the
//! typed decoder's checks against the kind's schema (`OpenApi::field_problems`, duplicates
//! read from the raw JSON) and the pruning of unknown fields.

use std::sync::OnceLock;

use kapi_apimachinery::go_json::syntax_error;
use kapi_openapi::OpenApi;
use serde_json::Value;

use crate::gvk_of;

fn openapi() -> &'static OpenApi {
    static OPENAPI: OnceLock<OpenApi> = OnceLock::new();
    // Field checks read the built-in definitions, whatever is served.
    OPENAPI.get_or_init(|| OpenApi::new(Vec::new()))
}

/// A JSON body. Asserts: whatever serde_json accepts, Go's scanner accepts too (else kapi
/// would refuse valid JSON with a Go syntax error); the decoded value re-encodes to JSON that
/// both accept and that decodes to the same value; after pruning, the typed checks find no
/// unknown field left.
pub fn decode_json(data: &[u8]) {
    let go = syntax_error(data);
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    assert_eq!(go, None, "serde_json decoded a body Go's scanner rejects");
    check_object(&value, Some(data));
}

/// A YAML body (`application/yaml`). Asserts: the decoded value's JSON decodes to the same
/// value, as JSON and as YAML (JSON is YAML: a client may send either under this type), and
/// the same typed checks as [`decode_json`].
pub fn decode_yaml(data: &[u8]) {
    let Some(text) = crate::text(data) else { return };
    let Ok(value) = serde_saphyr::from_str::<Value>(text) else { return };
    let json = serde_json::to_string(&value).expect("a decoded YAML value encodes as JSON");
    let as_yaml: Value = serde_saphyr::from_str(&json).expect("JSON re-read as YAML");
    assert_eq!(as_yaml, value, "JSON of a YAML body reads back differently as YAML: {json}");
    check_object(&value, None);
}

/// What both decoders share: the JSON round trip, then the typed checks.
fn check_object(value: &Value, raw_json: Option<&[u8]>) {
    let encoded = serde_json::to_vec(value).expect("a decoded value encodes");
    assert_eq!(syntax_error(&encoded), None, "Go's scanner rejects kapi's own encoding");
    let again: Value = serde_json::from_slice(&encoded).expect("kapi's own encoding decodes");
    assert_eq!(&again, value, "JSON round trip changed the value");
    let Some((group, version, kind)) = gvk_of(value) else { return };
    let problems = openapi().field_problems(group, version, kind, value, raw_json);
    let mut pruned = value.clone();
    openapi().prune_unknown_fields(group, version, kind, &mut pruned);
    let after = openapi().field_problems(group, version, kind, &pruned, None);
    assert!(after.unknown.is_empty(), "pruning left unknown fields {:?} (before: {:?})", after.unknown, problems.unknown);
    if problems.unknown.is_empty() {
        assert_eq!(&pruned, value, "pruning changed an object without unknown fields");
    }
}
