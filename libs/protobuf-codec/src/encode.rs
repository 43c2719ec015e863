//! JSON -> wire. Only fields present in the JSON object are written, so JSON -> protobuf ->
//! JSON gives back the same object.

use base64::Engine;
use serde_json::{Map, Value};

use crate::schema::{Label, MsgId, Scalar, Schema, Special};
use crate::special::{parse_duration, parse_time};
use crate::wire::{put_key, put_len, put_varint, FIXED64, VARINT};
use crate::{ProtobufError, MAX_DEPTH};

pub(crate) struct Encoder<'s> {
    pub schema: &'s Schema,
}

impl Encoder<'_> {
    pub(crate) fn message(&self, id: MsgId, value: &Value, path: &str, out: &mut Vec<u8>, depth: usize) -> Result<(), ProtobufError> {
        if depth > MAX_DEPTH {
            return Err(ProtobufError::value(path, "nested too deeply"));
        }
        let msg = &self.schema.messages[id];
        if let Some(special) = msg.special {
            return self.special(special, value, path, out, depth);
        }
        let obj = value.as_object().ok_or_else(|| ProtobufError::value(path, "expected an object"))?;
        self.fields(id, obj, path, out, depth)
    }

    fn fields(&self, id: MsgId, obj: &Map<String, Value>, path: &str, out: &mut Vec<u8>, depth: usize) -> Result<(), ProtobufError> {
        let msg = &self.schema.messages[id];
        for field in &msg.fields {
            let here = || join(path, &field.json);
            if field.label == Label::Inline {
                if let Scalar::Message(sub) = field.ty {
                    let mut inner = Vec::new();
                    self.fields(sub, obj, path, &mut inner, depth + 1)?;
                    if !inner.is_empty() {
                        put_len(out, field.tag, &inner);
                    }
                }
                continue;
            }
            let Some(value) = obj.get(field.json.as_ref()).filter(|v| !v.is_null()) else { continue };
            match field.label {
                Label::Repeated => {
                    let items = value.as_array().ok_or_else(|| ProtobufError::value(&here(), "expected an array"))?;
                    for (i, item) in items.iter().enumerate() {
                        self.scalar(field.tag, field.ty, item, &format!("{}[{i}]", here()), out, depth)?;
                    }
                }
                Label::Map => {
                    let map = value.as_object().ok_or_else(|| ProtobufError::value(&here(), "expected an object"))?;
                    for (k, v) in map {
                        let mut entry = Vec::new();
                        put_len(&mut entry, 1, k.as_bytes());
                        if !v.is_null() {
                            self.scalar(2, field.ty, v, &format!("{}[{k}]", here()), &mut entry, depth)?;
                        }
                        put_len(out, field.tag, &entry);
                    }
                }
                Label::Optional | Label::Inline => self.scalar(field.tag, field.ty, value, &here(), out, depth)?,
            }
        }
        Ok(())
    }

    fn scalar(&self, tag: u32, ty: Scalar, value: &Value, path: &str, out: &mut Vec<u8>, depth: usize) -> Result<(), ProtobufError> {
        match ty {
            Scalar::String => {
                let s = value.as_str().ok_or_else(|| ProtobufError::value(path, "expected a string"))?;
                put_len(out, tag, s.as_bytes());
            }
            Scalar::Bytes => {
                let s = value.as_str().ok_or_else(|| ProtobufError::value(path, "expected base64 text"))?;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .map_err(|e| ProtobufError::value(path, format!("invalid base64: {e}")))?;
                put_len(out, tag, &bytes);
            }
            Scalar::Int32 | Scalar::Int64 => {
                let n = int(value, path)?;
                if ty == Scalar::Int32 && i32::try_from(n).is_err() {
                    return Err(ProtobufError::value(path, format!("{n} does not fit in int32")));
                }
                put_key(out, tag, VARINT);
                put_varint(out, n as u64);
            }
            Scalar::Bool => {
                let b = value.as_bool().ok_or_else(|| ProtobufError::value(path, "expected a boolean"))?;
                put_key(out, tag, VARINT);
                put_varint(out, u64::from(b));
            }
            Scalar::Double => {
                let f = value.as_f64().ok_or_else(|| ProtobufError::value(path, "expected a number"))?;
                put_key(out, tag, FIXED64);
                out.extend_from_slice(&f.to_bits().to_le_bytes());
            }
            Scalar::Message(id) => {
                let mut inner = Vec::new();
                self.message(id, value, path, &mut inner, depth + 1)?;
                put_len(out, tag, &inner);
            }
        }
        Ok(())
    }

    fn special(&self, special: Special, value: &Value, path: &str, out: &mut Vec<u8>, depth: usize) -> Result<(), ProtobufError> {
        let schema_props = || {
            self.schema
                .message("apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaProps")
                .ok_or_else(|| ProtobufError::value(path, "no JSONSchemaProps message"))
        };
        match special {
            Special::Quantity => {
                let s = match value {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    _ => return Err(ProtobufError::value(path, "expected a quantity")),
                };
                put_len(out, 1, s.as_bytes());
            }
            Special::Time | Special::MicroTime => {
                let s = value.as_str().ok_or_else(|| ProtobufError::value(path, "expected a time string"))?;
                let (secs, nanos) = parse_time(s, path)?;
                put_key(out, 1, VARINT);
                put_varint(out, secs as u64);
                if nanos != 0 {
                    put_key(out, 2, VARINT);
                    put_varint(out, nanos as i64 as u64);
                }
            }
            Special::Duration => {
                let s = value.as_str().ok_or_else(|| ProtobufError::value(path, "expected a duration string"))?;
                put_key(out, 1, VARINT);
                put_varint(out, parse_duration(s, path)? as u64);
            }
            Special::FieldsV1 | Special::RawExtension | Special::Json => {
                let raw = serde_json::to_vec(value).map_err(|e| ProtobufError::value(path, e.to_string()))?;
                put_len(out, 1, &raw);
            }
            Special::IntOrString => match value {
                Value::String(s) => {
                    put_key(out, 1, VARINT);
                    put_varint(out, 1);
                    put_len(out, 3, s.as_bytes());
                }
                _ => {
                    let n = int(value, path)?;
                    let n = i32::try_from(n).map_err(|_| ProtobufError::value(path, format!("{n} does not fit in int32")))?;
                    put_key(out, 1, VARINT);
                    put_varint(out, 0);
                    put_key(out, 2, VARINT);
                    put_varint(out, n as i64 as u64);
                }
            },
            Special::Verbs => {
                let items = value.as_array().ok_or_else(|| ProtobufError::value(path, "expected an array"))?;
                for v in items {
                    let s = v.as_str().ok_or_else(|| ProtobufError::value(path, "expected strings"))?;
                    put_len(out, 1, s.as_bytes());
                }
            }
            Special::SchemaOrArray => match value {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        self.scalar(2, Scalar::Message(schema_props()?), item, &format!("{path}[{i}]"), out, depth)?;
                    }
                }
                _ => self.scalar(1, Scalar::Message(schema_props()?), value, path, out, depth)?,
            },
            Special::SchemaOrStringArray => match value {
                Value::Array(items) => {
                    for item in items {
                        let s = item.as_str().ok_or_else(|| ProtobufError::value(path, "expected strings"))?;
                        put_len(out, 2, s.as_bytes());
                    }
                }
                _ => self.scalar(1, Scalar::Message(schema_props()?), value, path, out, depth)?,
            },
            Special::SchemaOrBool => match value {
                Value::Bool(b) => {
                    put_key(out, 1, VARINT);
                    put_varint(out, u64::from(*b));
                }
                _ => {
                    put_key(out, 1, VARINT);
                    put_varint(out, 1);
                    self.scalar(2, Scalar::Message(schema_props()?), value, path, out, depth)?;
                }
            },
        }
        Ok(())
    }
}

fn int(value: &Value, path: &str) -> Result<i64, ProtobufError> {
    value
        .as_i64()
        .or_else(|| value.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18).map(|f| f as i64))
        .ok_or_else(|| ProtobufError::value(path, format!("expected an integer, got {value}")))
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_owned()
    } else {
        format!("{path}.{field}")
    }
}
