//! The message tables, parsed once from the generated `schema.txt`.

use std::collections::HashMap;

/// Index of a message in [`Schema::messages`].
pub(crate) type MsgId = usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scalar {
    String,
    Bytes,
    Int32,
    Int64,
    Bool,
    Double,
    Message(MsgId),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Label {
    Optional,
    Repeated,
    /// `map<string, value>`: entries are messages {1: key, 2: value}.
    Map,
    /// A Go embedded struct: its fields live in the parent JSON object.
    Inline,
}

#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub tag: u32,
    pub json: Box<str>,
    pub label: Label,
    pub ty: Scalar,
}

/// Messages whose JSON form is not an object of their fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Special {
    Quantity,
    Time,
    MicroTime,
    Duration,
    FieldsV1,
    RawExtension,
    IntOrString,
    Json,
    SchemaOrArray,
    SchemaOrBool,
    SchemaOrStringArray,
    Verbs,
}

impl Special {
    fn of(name: &str) -> Option<Special> {
        Some(match name {
            "apimachinery.pkg.api.resource.Quantity" => Special::Quantity,
            "apimachinery.pkg.apis.meta.v1.Time" => Special::Time,
            "apimachinery.pkg.apis.meta.v1.MicroTime" => Special::MicroTime,
            "apimachinery.pkg.apis.meta.v1.Duration" => Special::Duration,
            "apimachinery.pkg.apis.meta.v1.FieldsV1" => Special::FieldsV1,
            "apimachinery.pkg.apis.meta.v1.Verbs" => Special::Verbs,
            "apimachinery.pkg.runtime.RawExtension" => Special::RawExtension,
            "apimachinery.pkg.util.intstr.IntOrString" => Special::IntOrString,
            "apiextensions_apiserver.pkg.apis.apiextensions.v1.Json" => Special::Json,
            "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrArray" => Special::SchemaOrArray,
            "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrBool" => Special::SchemaOrBool,
            "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrStringArray" => Special::SchemaOrStringArray,
            // The user-info extras (authentication, authorization, certificates): Go `[]string`
            // types whose protobuf form wraps the list, exactly like Verbs.
            n if n.ends_with(".ExtraValue") => Special::Verbs,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Message {
    pub name: Box<str>,
    /// In tag order.
    pub fields: Vec<Field>,
    pub special: Option<Special>,
}

impl Message {
    pub(crate) fn field(&self, tag: u32) -> Option<&Field> {
        self.fields.binary_search_by_key(&tag, |f| f.tag).ok().map(|i| &self.fields[i])
    }
}

/// Kinds served in every group version with the meta/v1 message (Status, options, WatchEvent).
const META_KINDS: &[&str] = &[
    "Status",
    "WatchEvent",
    "DeleteOptions",
    "CreateOptions",
    "UpdateOptions",
    "PatchOptions",
    "ListOptions",
    "GetOptions",
    "PartialObjectMetadata",
    "PartialObjectMetadataList",
    "APIResourceList",
    "APIGroup",
    "APIGroupList",
    "APIVersions",
    "List",
];
const META_MODULE: &str = "apimachinery.pkg.apis.meta.v1";

#[derive(Debug, Default)]
pub(crate) struct Schema {
    pub messages: Vec<Message>,
    by_name: HashMap<Box<str>, MsgId>,
    kinds: HashMap<(Box<str>, Box<str>), MsgId>,
    /// apiVersion -> k8s-pb module, for kinds that are not resources (Scale, Eviction).
    modules: HashMap<Box<str>, Box<str>>,
}

impl Schema {
    pub(crate) fn parse(text: &str) -> Result<Schema, String> {
        // Two passes: message ids first, so fields can point at messages defined later.
        let mut schema = Schema::default();
        for line in text.lines() {
            if let Some(name) = line.strip_prefix("M ") {
                let id = schema.messages.len();
                schema.messages.push(Message { name: name.into(), fields: Vec::new(), special: Special::of(name) });
                schema.by_name.insert(name.into(), id);
            }
        }
        let mut current: Option<MsgId> = None;
        for (n, line) in text.lines().enumerate() {
            let bad = |what: &str| format!("schema.txt line {}: {what}: {line}", n + 1);
            let parts: Vec<&str> = line.split(' ').collect();
            match parts.first().copied() {
                Some("#") | None => {}
                Some("M") => current = schema.by_name.get(parts.get(1).copied().unwrap_or("")).copied(),
                Some("R") => {
                    let [_, api_version, kind, msg] = parts[..] else { return Err(bad("R needs 3 values")) };
                    let id = *schema.by_name.get(msg).ok_or_else(|| bad("unknown message"))?;
                    schema.kinds.insert((api_version.into(), kind.into()), id);
                    if let Some((module, _)) = msg.rsplit_once('.') {
                        schema.modules.insert(api_version.into(), module.into());
                    }
                }
                Some("F") => {
                    let msg = current.ok_or_else(|| bad("field outside a message"))?;
                    let tag: u32 = parts.get(1).and_then(|t| t.parse().ok()).ok_or_else(|| bad("bad tag"))?;
                    let json = *parts.get(2).ok_or_else(|| bad("no name"))?;
                    let label = match parts.get(3).copied() {
                        Some("o") => Label::Optional,
                        Some("r") => Label::Repeated,
                        Some("m") => Label::Map,
                        Some("i") => Label::Inline,
                        _ => return Err(bad("bad label")),
                    };
                    // Maps carry their key type before the value type; keys are strings in
                    // every Kubernetes message.
                    let rest = if label == Label::Map { &parts[5..] } else { &parts[4..] };
                    let ty_name = if label == Label::Map { parts.get(4).copied() } else { rest.first().copied() };
                    let ty = match ty_name {
                        Some("string") => Scalar::String,
                        Some("bytes") => Scalar::Bytes,
                        Some("int32") => Scalar::Int32,
                        Some("int64") => Scalar::Int64,
                        Some("bool") => Scalar::Bool,
                        Some("double") => Scalar::Double,
                        Some("message") => {
                            let target = rest.last().copied().ok_or_else(|| bad("message without a type"))?;
                            Scalar::Message(*schema.by_name.get(target).ok_or_else(|| bad("unknown message type"))?)
                        }
                        _ => return Err(bad("bad type")),
                    };
                    if label == Label::Map && parts.get(5).copied() != Some("string") {
                        return Err(bad("map keys must be strings"));
                    }
                    schema.messages[msg].fields.push(Field { tag, json: json.into(), label, ty });
                }
                Some(_) => return Err(bad("unknown line")),
            }
        }
        for m in &mut schema.messages {
            m.fields.sort_by_key(|f| f.tag);
        }
        Ok(schema)
    }

    pub(crate) fn message(&self, name: &str) -> Option<MsgId> {
        self.by_name.get(name).copied()
    }

    /// The message of `kind` in `api_version`, as kube's protobuf serializer would pick it.
    pub(crate) fn kind(&self, api_version: &str, kind: &str) -> Option<MsgId> {
        if let Some(id) = self.kinds.get(&(api_version.into(), kind.into())) {
            return Some(*id);
        }
        if META_KINDS.contains(&kind) {
            return self.message(&format!("{META_MODULE}.{kind}"));
        }
        let module = self.modules.get(api_version)?;
        self.message(&format!("{module}.{kind}"))
    }
}
