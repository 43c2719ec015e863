//! Content negotiation: which representation a client asked for, and how to read its body.
//!
//! kube-apiserver picks the first acceptable media range in the client's order of preference;
//! `as=Table` / `as=PartialObjectMetadata` ranges turn a resource response into a server-side
//! transformation. Protobuf is negotiated here too once it is served (a later slice): until then
//! a protobuf-only Accept gets 406 and a protobuf body gets 415, as for any unknown format.

use kapi_apimachinery::media::{parse_accept, parse_content_type, MediaRange};
use kapi_apimachinery::ApiError;
use serde_json::Value;

/// Media types a response can be encoded in.
pub const SUPPORTED_RESPONSE_TYPES: &[&str] = &["application/json", "application/yaml"];
/// Media types a request body can be decoded from.
pub const SUPPORTED_BODY_TYPES: &[&str] = &["application/json", "application/yaml"];

/// The representation chosen for a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Plain JSON object.
    Json,
    /// YAML object.
    Yaml,
    /// `meta.k8s.io/v1` Table.
    Table,
    /// `meta.k8s.io/v1` PartialObjectMetadata(List).
    PartialMetadata,
    /// `apidiscovery.k8s.io/v2` APIGroupDiscoveryList.
    DiscoveryV2,
}

impl Output {
    /// The Content-Type header for this representation.
    pub fn content_type(self) -> &'static str {
        match self {
            Output::Json => "application/json",
            Output::Yaml => "application/yaml",
            Output::Table => "application/json;as=Table;v=v1;g=meta.k8s.io",
            Output::PartialMetadata => "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
            Output::DiscoveryV2 => "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        }
    }
}

/// What a request handler can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Negotiable {
    /// Resource responses: JSON, YAML, Table, PartialObjectMetadata.
    Resource,
    /// Watch streams: like resources, but YAML has no stream framing (kube answers 406).
    Watch,
    /// Discovery documents: JSON, YAML, aggregated discovery v2.
    Discovery,
    /// Anything else JSON-shaped (version, Status, OpenAPI).
    Plain,
}

fn param<'a>(r: &'a MediaRange, key: &str) -> Option<&'a str> {
    r.params.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v.as_str())
}

fn pick(r: &MediaRange, what: Negotiable) -> Option<Output> {
    let essence = (r.type_.as_str(), r.subtype.as_str());
    let as_ = param(r, "as");
    match (essence, as_) {
        (("application", "json"), Some("Table")) if matches!(what, Negotiable::Resource | Negotiable::Watch) => {
            matches!(param(r, "g"), Some("meta.k8s.io")).then_some(Output::Table)
        }
        (("application", "json"), Some("PartialObjectMetadata" | "PartialObjectMetadataList"))
            if matches!(what, Negotiable::Resource | Negotiable::Watch) =>
        {
            matches!(param(r, "g"), Some("meta.k8s.io")).then_some(Output::PartialMetadata)
        }
        (("application", "json"), Some("APIGroupDiscoveryList")) if what == Negotiable::Discovery => {
            (param(r, "g") == Some("apidiscovery.k8s.io") && param(r, "v") == Some("v2")).then_some(Output::DiscoveryV2)
        }
        (_, Some(_)) => None,
        (("application", "json"), None) => Some(Output::Json),
        (("application", "yaml"), None) if matches!(what, Negotiable::Resource | Negotiable::Discovery) => Some(Output::Yaml),
        (("application" | "*", "*"), None) => Some(Output::Json),
        _ => None,
    }
}

/// Chooses the response representation from an Accept header (absent: JSON).
pub fn negotiate(accept: Option<&str>, what: Negotiable) -> Result<Output, ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else { return Ok(Output::Json) };
    let ranges = parse_accept(accept);
    ranges
        .iter()
        .filter(|r| r.q > 0.0)
        .find_map(|r| pick(r, what))
        .ok_or_else(|| match what {
            Negotiable::Watch => ApiError::not_acceptable(&["application/json", "application/json;stream=watch"]),
            _ => ApiError::not_acceptable(SUPPORTED_RESPONSE_TYPES),
        })
}

/// Decodes a request body (JSON or YAML) into a JSON object.
pub fn decode_body(content_type: Option<&str>, body: &[u8]) -> Result<Value, ApiError> {
    let essence = match content_type.and_then(parse_content_type) {
        Some(r) => format!("{}/{}", r.type_, r.subtype),
        None => "application/json".to_owned(),
    };
    let value: Value = match essence.as_str() {
        "application/json" => serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            let text = std::str::from_utf8(body)
                .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))?;
            serde_saphyr::from_str::<Value>(text)
                .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))?
        }
        other => {
            let _ = other;
            return Err(ApiError::unsupported_media_type(SUPPORTED_BODY_TYPES));
        }
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; json parse error: the body must be a JSON or YAML object",
        ));
    }
    Ok(value)
}

/// The essence (`type/subtype`) of a Content-Type header, lowercased.
pub fn content_essence(content_type: Option<&str>) -> Option<String> {
    content_type.and_then(parse_content_type).map(|r| format!("{}/{}", r.type_, r.subtype).to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_has_no_yaml() {
        assert_eq!(negotiate(Some("application/yaml"), Negotiable::Watch).unwrap_err().code, 406);
        assert_eq!(negotiate(Some("application/yaml, application/json"), Negotiable::Watch).unwrap(), Output::Json);
        assert_eq!(negotiate(Some("application/yaml"), Negotiable::Resource).unwrap(), Output::Yaml);
    }

    #[test]
    fn kubectl_table_accept_picks_table() {
        let a = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate(Some(a), Negotiable::Resource).unwrap(), Output::Table);
        assert_eq!(negotiate(Some(a), Negotiable::Discovery).unwrap(), Output::Json);
    }

    #[test]
    fn aggregated_discovery_and_fallbacks() {
        let a = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(negotiate(Some(a), Negotiable::Discovery).unwrap(), Output::DiscoveryV2);
        assert_eq!(negotiate(Some("*/*"), Negotiable::Resource).unwrap(), Output::Json);
        assert_eq!(negotiate(None, Negotiable::Resource).unwrap(), Output::Json);
        assert_eq!(negotiate(Some("application/vnd.kubernetes.protobuf, */*"), Negotiable::Resource).unwrap(), Output::Json);
        assert_eq!(negotiate(Some("text/html"), Negotiable::Resource).unwrap_err().code, 406);
    }

    #[test]
    fn bodies() {
        assert!(decode_body(Some("application/yaml"), b"kind: Pod\nmetadata:\n  name: a\n").unwrap()["metadata"]["name"] == "a");
        assert_eq!(decode_body(None, b"{bad").unwrap_err().code, 400);
        assert_eq!(decode_body(Some("application/json"), b"[1]").unwrap_err().code, 400);
        assert_eq!(decode_body(Some("application/vnd.kubernetes.protobuf"), b"k8s\0").unwrap_err().code, 415);
    }
}
