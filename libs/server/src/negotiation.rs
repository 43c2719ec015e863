//! Content negotiation: which representation a client asked for, and how to read its body.
//!
//! kube-apiserver picks the first acceptable media range in the client's order of preference;
//! `as=Table` / `as=PartialObjectMetadata` ranges turn a resource response into a server-side
//! transformation in any of the encodings (JSON, YAML, and protobuf for built-in kinds).

use kapi_apimachinery::media::{parse_accept, parse_content_type, MediaRange};
use kapi_apimachinery::ApiError;
use kapi_protobuf_codec::{Codec, ProtobufError};
use serde_json::Value;

/// Media types a response can be encoded in.
pub const SUPPORTED_RESPONSE_TYPES: &[&str] = &["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"];
/// Media types a request body can be decoded from.
pub const SUPPORTED_BODY_TYPES: &[&str] = &["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"];
/// The protobuf media type of built-in kinds.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// What the response object is: the object itself or a server-side transformation of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// The object (or list) as stored.
    Object,
    /// `meta.k8s.io/v1` Table.
    Table,
    /// `meta.k8s.io/v1` PartialObjectMetadata(List).
    PartialMetadata,
    /// `apidiscovery.k8s.io/v2` APIGroupDiscoveryList.
    DiscoveryV2,
}

/// How the response object is serialized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `application/json`.
    Json,
    /// `application/yaml`.
    Yaml,
    /// `application/vnd.kubernetes.protobuf` (built-in kinds only).
    Protobuf,
}

/// The representation chosen for a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Output {
    /// Object or transformation.
    pub shape: Shape,
    /// Serialization.
    pub encoding: Encoding,
}

impl Output {
    /// Plain JSON.
    pub const JSON: Output = Output { shape: Shape::Object, encoding: Encoding::Json };
    /// Plain YAML.
    pub const YAML: Output = Output { shape: Shape::Object, encoding: Encoding::Yaml };
    /// Plain protobuf.
    pub const PROTOBUF: Output = Output { shape: Shape::Object, encoding: Encoding::Protobuf };
    /// JSON Table.
    pub const TABLE: Output = Output { shape: Shape::Table, encoding: Encoding::Json };
    /// JSON PartialObjectMetadata.
    pub const PARTIAL_METADATA: Output = Output { shape: Shape::PartialMetadata, encoding: Encoding::Json };
    /// Aggregated discovery.
    pub const DISCOVERY_V2: Output = Output { shape: Shape::DiscoveryV2, encoding: Encoding::Json };

    /// The same encoding without a transformation: for Status, Scale and other answers that are
    /// not the resource itself. Aggregated discovery falls back to JSON.
    pub fn plain(self) -> Output {
        Output { shape: Shape::Object, encoding: self.encoding }
    }

    /// The Content-Type header for this representation (`list`: the PartialObjectMetadataList
    /// variant of partial metadata).
    pub fn content_type(self, list: bool) -> String {
        let base = match self.encoding {
            Encoding::Json => "application/json",
            Encoding::Yaml => "application/yaml",
            Encoding::Protobuf => PROTOBUF,
        };
        match (self.shape, list) {
            (Shape::Object, _) => base.to_owned(),
            (Shape::Table, _) => format!("{base};as=Table;v=v1;g=meta.k8s.io"),
            (Shape::PartialMetadata, false) => format!("{base};as=PartialObjectMetadata;v=v1;g=meta.k8s.io"),
            (Shape::PartialMetadata, true) => format!("{base};as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"),
            (Shape::DiscoveryV2, _) => format!("{base};g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
        }
    }
}

/// What a request handler can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Negotiable {
    /// Resource responses: JSON, YAML, protobuf, Table, PartialObjectMetadata.
    Resource,
    /// Watch streams: like resources, but YAML has no stream framing (kube answers 406).
    Watch,
    /// Discovery documents: JSON, YAML, aggregated discovery v2.
    Discovery,
    /// Anything else JSON-shaped (version, OpenAPI).
    Plain,
}

fn param<'a>(r: &'a MediaRange, key: &str) -> Option<&'a str> {
    r.params.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v.as_str())
}

fn pick(r: &MediaRange, what: Negotiable, protobuf: bool) -> Option<Output> {
    let resource_like = matches!(what, Negotiable::Resource | Negotiable::Watch);
    let encoding = match (r.type_.as_str(), r.subtype.as_str()) {
        ("application", "json") => Encoding::Json,
        ("application", "yaml") if matches!(what, Negotiable::Resource | Negotiable::Discovery) => Encoding::Yaml,
        ("application", "vnd.kubernetes.protobuf") if resource_like && protobuf => Encoding::Protobuf,
        ("application" | "*", "*") => Encoding::Json,
        _ => return None,
    };
    let shape = match param(r, "as") {
        None => Shape::Object,
        // meta/v1 Table has no protobuf message (its cells are free-form), as in kube.
        Some("Table") if resource_like && encoding == Encoding::Json => {
            if param(r, "g") != Some("meta.k8s.io") {
                return None;
            }
            Shape::Table
        }
        Some("PartialObjectMetadata" | "PartialObjectMetadataList") if resource_like && encoding != Encoding::Yaml => {
            if param(r, "g") != Some("meta.k8s.io") {
                return None;
            }
            Shape::PartialMetadata
        }
        Some("APIGroupDiscoveryList") if what == Negotiable::Discovery && encoding == Encoding::Json => {
            if param(r, "g") != Some("apidiscovery.k8s.io") || param(r, "v") != Some("v2") {
                return None;
            }
            Shape::DiscoveryV2
        }
        Some(_) => return None,
    };
    Some(Output { shape, encoding })
}

/// Chooses the response representation from an Accept header (absent: JSON). `protobuf` says
/// whether the kind has a protobuf encoding (built-in kinds do; custom resources do not).
pub fn negotiate(accept: Option<&str>, what: Negotiable, protobuf: bool) -> Result<Output, ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else { return Ok(Output::JSON) };
    let ranges = parse_accept(accept);
    ranges
        .iter()
        .filter(|r| r.q > 0.0)
        .find_map(|r| pick(r, what, protobuf))
        .ok_or_else(|| match what {
            Negotiable::Watch => ApiError::not_acceptable(&[
                "application/json",
                "application/json;stream=watch",
                "application/vnd.kubernetes.protobuf",
                "application/vnd.kubernetes.protobuf;stream=watch",
            ]),
            _ => ApiError::not_acceptable(SUPPORTED_RESPONSE_TYPES),
        })
}

/// Decodes a request body (JSON, YAML or protobuf) into a JSON object.
pub fn decode_body(content_type: Option<&str>, body: &[u8]) -> Result<Value, ApiError> {
    let essence = match content_type.and_then(parse_content_type) {
        Some(r) => format!("{}/{}", r.type_, r.subtype),
        None => "application/json".to_owned(),
    };
    let value: Value = match essence.as_str() {
        PROTOBUF => Codec::global().decode(body).map_err(|e| match e {
            ProtobufError::UnknownKind { .. } => ApiError::unsupported_media_type(&["application/json", "application/yaml"]),
            other => ApiError::bad_request(format!("the body of the request could not be decoded as protobuf: {other}")),
        })?,
        "application/json" => serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            let text = std::str::from_utf8(body)
                .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))?;
            bounded_yaml::from_str(text, bounded_yaml::limit(body.len()))
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

/// YAML bodies read into JSON values no larger than a bound: aliases let a small document
/// stand for a huge one (the "billion laughs": nine aliases of nine aliases of ...; or a long
/// string aliased a few thousand times), and each alias becomes a copy in the value. kube's YAML
/// library counts aliases against the nodes they expand to (`document contains excessive
/// aliasing`); kapi counts what the value would hold and stops there, before it is built.
mod bounded_yaml {
    use std::cell::Cell;
    use std::fmt;

    use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
    use serde_json::{Map, Number, Value};

    /// What a document may expand to, in bytes of scalars and keys plus one per node: four
    /// times its own size (a document without aliases holds less than its size), and at
    /// least 64 KiB.
    pub(super) fn limit(body_len: usize) -> usize {
        body_len.saturating_mul(4).max(64 * 1024)
    }

    thread_local! {
        /// What the document being decoded on this thread may still add.
        static LEFT: Cell<usize> = const { Cell::new(usize::MAX) };
    }

    /// [`serde_saphyr::from_str`] into a JSON value of at most `limit` (see [`limit`]).
    pub(super) fn from_str(text: &str, limit: usize) -> Result<Value, serde_saphyr::Error> {
        LEFT.with(|left| left.set(limit));
        let value = serde_saphyr::from_str::<Bounded>(text);
        LEFT.with(|left| left.set(usize::MAX));
        value.map(|b| b.0)
    }

    fn charge<E: de::Error>(bytes: usize) -> Result<(), E> {
        LEFT.with(|left| match left.get().checked_sub(bytes) {
            Some(rest) => {
                left.set(rest);
                Ok(())
            }
            None => Err(E::custom("the document expands (through its aliases) to more than four times its size")),
        })
    }

    /// A JSON value built as serde_json's own visitor builds it, charged as it grows.
    struct Bounded(Value);

    impl<'de> Deserialize<'de> for Bounded {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_any(BoundedVisitor).map(Bounded)
        }
    }

    struct BoundedVisitor;

    impl<'de> Visitor<'de> for BoundedVisitor {
        type Value = Value;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any valid JSON value")
        }

        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
            charge(1)?;
            Ok(Value::Bool(v))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
            charge(1)?;
            Ok(Value::Number(v.into()))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
            charge(1)?;
            Ok(Value::Number(v.into()))
        }

        fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
            charge(1)?;
            Number::deserialize(de::value::I128Deserializer::new(v)).map(Value::Number)
        }

        fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
            charge(1)?;
            Number::deserialize(de::value::U128Deserializer::new(v)).map(Value::Number)
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
            charge(1)?;
            Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
            charge(v.len() + 1)?;
            Ok(Value::String(v.to_owned()))
        }

        fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
            charge(v.len() + 1)?;
            Ok(Value::String(v))
        }

        fn visit_none<E: de::Error>(self) -> Result<Value, E> {
            charge(1)?;
            Ok(Value::Null)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
            charge(1)?;
            Ok(Value::Null)
        }

        fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
            Bounded::deserialize(deserializer).map(|b| b.0)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            charge(1)?;
            let mut items = Vec::new();
            while let Some(Bounded(item)) = seq.next_element()? {
                items.push(item);
            }
            Ok(Value::Array(items))
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            charge(1)?;
            let mut members = Map::new();
            while let Some(key) = map.next_key::<String>()? {
                charge(key.len() + 1)?;
                let Bounded(value) = map.next_value()?;
                members.insert(key, value);
            }
            Ok(Value::Object(members))
        }
    }
}

/// The essence (`type/subtype`) of a Content-Type header, lowercased.
pub fn content_essence(content_type: Option<&str>) -> Option<String> {
    content_type.and_then(parse_content_type).map(|r| format!("{}/{}", r.type_, r.subtype).to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(a: &str) -> Result<Output, ApiError> {
        negotiate(Some(a), Negotiable::Resource, true)
    }

    #[test]
    fn watch_has_no_yaml() {
        assert_eq!(negotiate(Some("application/yaml"), Negotiable::Watch, true).unwrap_err().code, 406);
        assert_eq!(negotiate(Some("application/yaml, application/json"), Negotiable::Watch, true).unwrap(), Output::JSON);
        assert_eq!(res("application/yaml").unwrap(), Output::YAML);
    }

    #[test]
    fn kubectl_table_accept_picks_table() {
        let a = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(res(a).unwrap(), Output::TABLE);
        assert_eq!(negotiate(Some(a), Negotiable::Discovery, true).unwrap(), Output::JSON);
    }

    #[test]
    fn aggregated_discovery_and_fallbacks() {
        let a = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(negotiate(Some(a), Negotiable::Discovery, false).unwrap(), Output::DISCOVERY_V2);
        assert_eq!(res("*/*").unwrap(), Output::JSON);
        assert_eq!(negotiate(None, Negotiable::Resource, true).unwrap(), Output::JSON);
        assert_eq!(res("text/html").unwrap_err().code, 406);
    }

    #[test]
    fn protobuf_only_for_kinds_that_have_it() {
        let client_go = "application/vnd.kubernetes.protobuf, */*";
        assert_eq!(res(client_go).unwrap(), Output::PROTOBUF);
        assert_eq!(negotiate(Some(client_go), Negotiable::Resource, false).unwrap(), Output::JSON);
        assert_eq!(negotiate(Some(PROTOBUF), Negotiable::Resource, false).unwrap_err().code, 406);
        let metadata = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(res(metadata).unwrap(), Output { shape: Shape::PartialMetadata, encoding: Encoding::Protobuf });
        assert_eq!(
            Output { shape: Shape::PartialMetadata, encoding: Encoding::Protobuf }.content_type(true),
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
        );
        assert_eq!(negotiate(Some("application/vnd.kubernetes.protobuf;stream=watch"), Negotiable::Watch, true).unwrap(), Output::PROTOBUF);
    }

    #[test]
    fn yaml_alias_bombs_are_refused_before_they_expand() {
        let laughs = {
            let mut y = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: laughs\nlol:\n  a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
            for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"].iter().zip(["b", "c", "d", "e", "f", "g", "h", "i"]) {
                y.push_str(&format!("  {name}: &{name} [{}]\n", vec![format!("*{prev}"); 9].join(",")));
            }
            y
        };
        let big_scalar = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s\ndata:\n  a: &a \"{}\"\n  b: [{}]\n", "x".repeat(64 * 1024), vec!["*a"; 64].join(","));
        for bomb in [laughs, big_scalar] {
            let e = decode_body(Some("application/yaml"), bomb.as_bytes()).expect_err("a bomb");
            assert_eq!(e.code, 400);
            assert!(e.message.starts_with("error converting YAML to JSON: "), "{}", e.message);
            assert!(e.message.contains("expands (through its aliases) to more than four times its size"), "{}", e.message);
        }
        // Aliases that stay within the bound are read as before, numbers and nulls included.
        let ok = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: &n ok\n  labels: &l {app: *n, tier: x}\n  annotations: *l\ndata: {a: '1', b: 2, c: 1.5, d: ~, e: true, f: 18446744073709551615}\n";
        let v = decode_body(Some("application/yaml"), ok.as_bytes()).expect("aliases within the bound");
        assert_eq!(v["metadata"]["annotations"], serde_json::json!({"app": "ok", "tier": "x"}));
        let plain: Value = serde_saphyr::from_str(ok).expect("plain");
        assert_eq!(v, plain);
    }

    #[test]
    fn deep_yaml_is_refused_without_overflowing_a_worker_stack() {
        // A 2 MiB thread (tokio's default worker stack; kapi's workers have 8 MiB, since the
        // futures a request is decoded under take their share): a debug build needs 1 to 2 MiB
        // to refuse these.
        let worker = std::thread::Builder::new().stack_size(2 << 20);
        let answers = worker
            .spawn(|| {
                let bodies = [
                    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata: {}{}\n", "[".repeat(100_000), "]".repeat(100_000)),
                    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:\n  {}x\n", "- ".repeat(100_000)),
                    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata: {}{}\n", "{a: ".repeat(100_000), "}".repeat(100_000)),
                ];
                bodies.iter().map(|b| decode_body(Some("application/yaml"), b.as_bytes()).map(|_| ()).map_err(|e| (e.code, e.message))).collect::<Vec<_>>()
            })
            .expect("thread")
            .join()
            .expect("no overflow");
        for answer in answers {
            let (code, message) = answer.expect_err("too deep");
            assert_eq!(code, 400, "{message}");
            assert!(message.starts_with("error converting YAML to JSON: "), "{message}");
        }
    }

    #[test]
    fn bodies() {
        assert!(decode_body(Some("application/yaml"), b"kind: Pod\nmetadata:\n  name: a\n").unwrap()["metadata"]["name"] == "a");
        assert_eq!(decode_body(None, b"{bad").unwrap_err().code, 400);
        assert_eq!(decode_body(Some("application/json"), b"[1]").unwrap_err().code, 400);
        assert_eq!(decode_body(Some(PROTOBUF), b"k8s\0\x0a\xff\xff garbage").unwrap_err().code, 400);
        let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        let bytes = Codec::global().encode(&cm).unwrap();
        assert_eq!(decode_body(Some(PROTOBUF), &bytes).unwrap(), cm);
    }
}
