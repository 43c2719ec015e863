//! The bodies of kapi's fuzz targets: one plain function per parser that sees client bytes.
//!
//! Each function takes the fuzzer's bytes, feeds them to the parser the way a request would,
//! and asserts more than "no panic" where a property exists: decode/encode round trips give
//! the same value, patch results agree with an independent reading of the patch, selectors
//! print to text that parses back to the same selector. A failed assertion panics, which is
//! what libFuzzer reports as a finding.
//!
//! Keeping the bodies here rather than in the cargo-fuzz crate (`fuzz/libfuzzer`, one thin
//! `fuzz_target!` per entry of [`TARGETS`]) lets an ordinary `cargo nextest` test replay the
//! kept corpus (`fuzz/corpus/<target>/`) on the stable toolchain, so every input that once
//! crashed a target stays a regression test without libFuzzer.
//!
//! Two-part inputs (a document and a patch, a live object and an applied configuration) are
//! split at the first NUL byte ([`split_pair`]): JSON text never contains a raw NUL, so the
//! fuzzer can mutate either side without breaking the other.
#![warn(missing_docs)]

pub mod apply;
pub mod body;
pub mod cel;
pub mod media;
pub mod patches;
pub mod protobuf;
pub mod selectors;
pub mod tokens;
pub mod units;

/// A target: its name (the fuzz/libfuzzer binary and the corpus folder) and its body.
pub type Target = (&'static str, fn(&[u8]));

/// Every fuzz target, by name.
pub const TARGETS: &[Target] = &[
    ("decode_json", body::decode_json),
    ("decode_yaml", body::decode_yaml),
    ("protobuf_object", protobuf::protobuf_object),
    ("protobuf_watch", protobuf::protobuf_watch),
    ("label_selector", selectors::label_selector),
    ("field_selector", selectors::field_selector),
    ("resource_version", tokens::resource_version),
    ("continue_token", tokens::continue_token),
    ("go_duration", units::go_duration),
    ("quantity", units::quantity),
    ("json_patch", patches::json_patch),
    ("merge_patch", patches::merge_patch),
    ("strategic_merge_patch", patches::strategic_merge_patch),
    ("server_side_apply", apply::server_side_apply),
    ("fields_v1", apply::fields_v1),
    ("media_type", media::media_type),
    ("cel", cel::cel),
];

/// Splits a two-part input at its first NUL byte; without one, the whole input is the second
/// part (the part under test) and the first is empty.
pub fn split_pair(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (&[], data),
    }
}

/// The input as text, when it is UTF-8: query parameters and headers reach the parsers as
/// `&str`, so other bytes never get that far.
pub fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// A built-in object to patch or apply to when the input's document part is not one: so a
/// mutation of the document never wastes the patch.
pub fn default_document() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80, "protocol": "TCP"}],
                         "env": [{"name": "A", "value": "1"}]},
                        {"name": "sidecar", "image": "busybox", "args": ["sleep", "1d"]}
                    ],
                    "tolerations": [{"key": "k", "operator": "Exists"}]
                }
            }
        }
    })
}

/// `apiVersion` split into group and version (`v1` is the core group).
pub fn group_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// The group, version and kind an object names, when it names them as strings.
pub fn gvk_of(obj: &serde_json::Value) -> Option<(&str, &str, &str)> {
    let (group, version) = group_version(obj.get("apiVersion")?.as_str()?);
    Some((group, version, obj.get("kind")?.as_str()?))
}
