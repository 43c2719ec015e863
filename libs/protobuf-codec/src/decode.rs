//! Wire -> JSON.

use base64::Engine;
use serde_json::{Map, Value};

use crate::schema::{Label, MsgId, Scalar, Schema, Special};
use crate::special::{format_duration, format_time};
use crate::wire::{Reader, FIXED64, LEN, VARINT};
use crate::{Codec, ProtobufError, MAX_DEPTH};

pub(crate) struct Decoder<'s> {
    pub schema: &'s Schema,
    pub codec: &'s Codec,
}

impl Decoder<'_> {
    /// A message as its JSON value (an object, or the special form).
    pub(crate) fn message(&self, id: MsgId, bytes: &[u8], depth: usize) -> Result<Value, ProtobufError> {
        if depth > MAX_DEPTH {
            return Err(ProtobufError::Malformed("messages nested too deeply".into()));
        }
        let msg = &self.schema.messages[id];
        if let Some(special) = msg.special {
            return self.special(special, bytes, depth);
        }
        let mut out = Map::new();
        self.fields_into(id, bytes, &mut out, depth)?;
        // Go always writes ObjectMeta.generation (a plain int64); zero means unset, and kube's
        // JSON omits it. Other zero numbers and false are kept: for pointer fields they are
        // explicit values (replicas: 0, automountServiceAccountToken: false).
        if msg.name.as_ref() == "apimachinery.pkg.apis.meta.v1.ObjectMeta" && out.get("generation") == Some(&Value::from(0)) {
            out.remove("generation");
        }
        Ok(Value::Object(out))
    }

    fn fields_into(&self, id: MsgId, bytes: &[u8], out: &mut Map<String, Value>, depth: usize) -> Result<(), ProtobufError> {
        let msg = &self.schema.messages[id];
        let mut r = Reader::new(bytes);
        let mut repeated = Vec::new();
        while !r.at_end() {
            let (tag, wire_type) = r.key()?;
            let Some(field) = msg.field(tag) else {
                r.skip(wire_type)?;
                continue;
            };
            match field.label {
                Label::Inline => {
                    let Scalar::Message(sub) = field.ty else { return Err(wrong(&msg.name, field.json.as_ref())) };
                    expect(wire_type, LEN, &field.json)?;
                    let data = r.bytes()?;
                    self.fields_into(sub, data, out, depth + 1)?;
                }
                Label::Map => {
                    expect(wire_type, LEN, &field.json)?;
                    let entry = r.bytes()?;
                    let (key, value) = self.map_entry(field.ty, entry, &field.json, depth)?;
                    let map = out.entry(field.json.to_string()).or_insert_with(|| Value::Object(Map::new()));
                    if let (Some(map), Some(value)) = (map.as_object_mut(), value) {
                        map.insert(key, value);
                    }
                }
                Label::Repeated => {
                    repeated.push(field.json.to_string());
                    let list = out.entry(field.json.to_string()).or_insert_with(|| Value::Array(Vec::new()));
                    let Some(list) = list.as_array_mut() else { continue };
                    if wire_type == LEN && !matches!(field.ty, Scalar::String | Scalar::Bytes | Scalar::Message(_)) {
                        // Packed scalars.
                        let data = r.bytes()?;
                        let mut inner = Reader::new(data);
                        while !inner.at_end() {
                            let wt = if field.ty == Scalar::Double { FIXED64 } else { VARINT };
                            if let Some(v) = self.scalar(field.ty, wt, &mut inner, &field.json, depth)? {
                                list.push(v);
                            }
                        }
                    } else if let Some(v) = self.scalar_keep_empty(field.ty, wire_type, &mut r, &field.json, depth)? {
                        list.push(v);
                    }
                }
                Label::Optional => {
                    if let Some(v) = self.scalar(field.ty, wire_type, &mut r, &field.json, depth)? {
                        out.insert(field.json.to_string(), v);
                    }
                }
            }
        }
        // A repeated field whose occurrences held nothing (an empty packed run) is a nil slice
        // to Go, which kube's JSON omits and kapi's encoder writes as nothing: no `[]`.
        for name in repeated {
            if out.get(&name).is_some_and(|v| v.as_array().is_some_and(Vec::is_empty)) {
                out.remove(&name);
            }
        }
        Ok(())
    }

    fn map_entry(&self, ty: Scalar, entry: &[u8], field: &str, depth: usize) -> Result<(String, Option<Value>), ProtobufError> {
        let mut r = Reader::new(entry);
        let mut key = String::new();
        let mut value = None;
        while !r.at_end() {
            let (tag, wt) = r.key()?;
            match tag {
                1 => {
                    expect(wt, LEN, field)?;
                    key = utf8(r.bytes()?, field)?;
                }
                2 => value = self.scalar_keep_empty(ty, wt, &mut r, field, depth)?,
                _ => r.skip(wt)?,
            }
        }
        // A map value that was written empty is still an entry (`"key": ""`).
        let value = value.or_else(|| Some(empty_of(self.schema, ty)));
        Ok((key, value))
    }

    /// One singular value; `None` when Go wrote a zero value that kube's JSON omits (empty
    /// strings, unset times).
    fn scalar(&self, ty: Scalar, wt: u8, r: &mut Reader<'_>, field: &str, depth: usize) -> Result<Option<Value>, ProtobufError> {
        let v = self.scalar_keep_empty(ty, wt, r, field, depth)?;
        Ok(match v {
            Some(Value::String(s)) if s.is_empty() && ty == Scalar::String => None,
            other => other,
        })
    }

    fn scalar_keep_empty(&self, ty: Scalar, wt: u8, r: &mut Reader<'_>, field: &str, depth: usize) -> Result<Option<Value>, ProtobufError> {
        Ok(Some(match ty {
            Scalar::String => {
                expect(wt, LEN, field)?;
                Value::String(utf8(r.bytes()?, field)?)
            }
            Scalar::Bytes => {
                expect(wt, LEN, field)?;
                Value::String(base64::engine::general_purpose::STANDARD.encode(r.bytes()?))
            }
            Scalar::Int32 => {
                expect(wt, VARINT, field)?;
                Value::from(r.varint()? as i64 as i32)
            }
            Scalar::Int64 => {
                expect(wt, VARINT, field)?;
                Value::from(r.varint()? as i64)
            }
            Scalar::Bool => {
                expect(wt, VARINT, field)?;
                Value::Bool(r.varint()? != 0)
            }
            Scalar::Double => {
                expect(wt, FIXED64, field)?;
                let f = f64::from_bits(r.fixed64()?);
                // JSON has no NaN or infinity (Go's encoder refuses them, so kube could never
                // serve such an object back): refused here rather than stored as `null`.
                if !f.is_finite() {
                    let go = if f.is_nan() { "NaN" } else if f > 0.0 { "+Inf" } else { "-Inf" };
                    return Err(ProtobufError::value(field, format!("json: unsupported value: {go}")));
                }
                // Go's JSON writes integral float64 values without a fraction (`1`, not `1.0`).
                if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 {
                    Value::from(f as i64)
                } else {
                    serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
                }
            }
            Scalar::Message(id) => {
                expect(wt, LEN, field)?;
                let data = r.bytes()?;
                let v = self.message(id, data, depth + 1)?;
                if v.is_null() {
                    return Ok(None);
                }
                v
            }
        }))
    }

    fn special(&self, special: Special, bytes: &[u8], depth: usize) -> Result<Value, ProtobufError> {
        let mut r = Reader::new(bytes);
        let mut ints = [0i64; 3];
        let mut strings: [Option<String>; 3] = [None, None, None];
        let mut raw: Option<&[u8]> = None;
        let mut schemas: Vec<Value> = Vec::new();
        let mut single_schema: Option<Value> = None;
        let schema_props = self.schema.message("apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaProps");
        while !r.at_end() {
            let (tag, wt) = r.key()?;
            let idx = tag as usize;
            match (special, wt) {
                (Special::Quantity, LEN) if tag == 1 => strings[1] = Some(utf8(r.bytes()?, "quantity")?),
                (Special::Time | Special::MicroTime, VARINT) if tag <= 2 => ints[idx] = r.varint()? as i64,
                (Special::Duration, VARINT) if tag == 1 => ints[1] = r.varint()? as i64,
                (Special::FieldsV1 | Special::RawExtension | Special::Json, LEN) if tag == 1 => raw = Some(r.bytes()?),
                (Special::IntOrString, VARINT) if tag <= 2 => ints[idx] = r.varint()? as i64,
                (Special::IntOrString, LEN) if tag == 3 => strings[2] = Some(utf8(r.bytes()?, "intOrString")?),
                (Special::Verbs, LEN) if tag == 1 => schemas.push(Value::String(utf8(r.bytes()?, "verbs")?)),
                (Special::SchemaOrArray | Special::SchemaOrBool | Special::SchemaOrStringArray, _) => {
                    let Some(props) = schema_props else { return Err(ProtobufError::Malformed("no JSONSchemaProps".into())) };
                    match (special, tag, wt) {
                        (Special::SchemaOrArray, 1, LEN) | (Special::SchemaOrStringArray, 1, LEN) | (Special::SchemaOrBool, 2, LEN) => {
                            single_schema = Some(self.message(props, r.bytes()?, depth + 1)?);
                        }
                        (Special::SchemaOrArray, 2, LEN) => schemas.push(self.message(props, r.bytes()?, depth + 1)?),
                        (Special::SchemaOrStringArray, 2, LEN) => schemas.push(Value::String(utf8(r.bytes()?, "property")?)),
                        (Special::SchemaOrBool, 1, VARINT) => ints[1] = r.varint()? as i64,
                        _ => r.skip(wt)?,
                    }
                }
                _ => r.skip(wt)?,
            }
        }
        Ok(match special {
            // Go marshals a zero metav1.Time as an empty message; its JSON is null.
            Special::Time | Special::MicroTime if bytes.is_empty() => Value::Null,
            Special::Quantity => strings[1].take().map_or(Value::Null, Value::String),
            Special::Time => format_time(ints[1], ints[2] as i32, false).map_or(Value::Null, Value::String),
            Special::MicroTime => format_time(ints[1], ints[2] as i32, true).map_or(Value::Null, Value::String),
            Special::Duration => Value::String(format_duration(ints[1])),
            Special::IntOrString => match (ints[1], strings[2].take()) {
                (1, Some(s)) => Value::String(s),
                (1, None) => Value::String(String::new()),
                _ => Value::from(ints[2] as i32),
            },
            Special::FieldsV1 | Special::RawExtension | Special::Json => match raw {
                None => Value::Null,
                Some(raw) => self.embedded(raw, depth)?,
            },
            Special::Verbs => Value::Array(schemas),
            Special::SchemaOrArray | Special::SchemaOrStringArray => match single_schema {
                Some(s) => s,
                None => Value::Array(schemas),
            },
            Special::SchemaOrBool => match single_schema {
                Some(s) => s,
                None => Value::Bool(ints[1] != 0),
            },
        })
    }

    /// Raw bytes of RawExtension / FieldsV1 / JSON: embedded JSON, or an enveloped protobuf
    /// object (what Go clients put into RawExtension when they encode in protobuf).
    fn embedded(&self, raw: &[u8], depth: usize) -> Result<Value, ProtobufError> {
        if raw.is_empty() {
            return Ok(Value::Null);
        }
        if raw.starts_with(crate::MAGIC) {
            return self.codec.decode_depth(raw, depth + 1);
        }
        serde_json::from_slice(raw).map_err(|e| ProtobufError::value("raw", format!("embedded JSON: {e}")))
    }
}

fn empty_of(schema: &Schema, ty: Scalar) -> Value {
    match ty {
        Scalar::String | Scalar::Bytes => Value::String(String::new()),
        Scalar::Int32 | Scalar::Int64 | Scalar::Double => Value::from(0),
        Scalar::Bool => Value::Bool(false),
        Scalar::Message(id) => match schema.messages[id].special {
            Some(Special::Quantity) => Value::String("0".into()),
            // Go's zero metav1.Time (a PodDisruptionBudget's disruptedPods entry written
            // without its value) is JSON null, as an empty Time message decodes.
            Some(Special::Time | Special::MicroTime) => Value::Null,
            // A wrapped list (user extras' ExtraValue) is a list even when absent, as when empty.
            Some(Special::Verbs) => Value::Array(Vec::new()),
            _ => Value::Object(Map::new()),
        },
    }
}

fn expect(got: u8, want: u8, field: &str) -> Result<(), ProtobufError> {
    if got == want {
        Ok(())
    } else {
        Err(ProtobufError::Malformed(format!("field {field:?}: wire type {got}, expected {want}")))
    }
}

fn wrong(message: &str, field: &str) -> ProtobufError {
    ProtobufError::Malformed(format!("{message}.{field}: inline field is not a message"))
}

fn utf8(bytes: &[u8], field: &str) -> Result<String, ProtobufError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| ProtobufError::Malformed(format!("field {field:?} is not valid UTF-8")))
}
