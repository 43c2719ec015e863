//! The protobuf messages of KMS v2, encoded by hand (a handful of fields; no code generator):
//! - the gRPC API `v2.KeyManagementService` (kube's `k8s.io/kms/apis/v2/api.proto`):
//!   `StatusResponse`, `EncryptRequest`/`EncryptResponse`, `DecryptRequest`/`DecryptResponse`;
//! - the stored `EncryptedObject` (kube's `envelope/kmsv2/v2/api.proto`): encryptedData (1),
//!   keyID (2), encryptedDEKSource (3), annotations (4, `map<string, bytes>`),
//!   encryptedDEKSourceType (5, an enum: 0 AES_GCM_KEY, 1 HKDF_SHA256_XNONCE_AES_GCM_SEED).
//!
//! Encoding follows proto3 as Go's `proto.Marshal` writes it: fields in number order, empty
//! scalars omitted, map entries sorted by key (Go's deterministic order is not guaranteed, but
//! readers accept any order). Decoding skips unknown fields and accepts repeated fields (last
//! one wins; map entries accumulate), as protobuf decoders must.

use std::collections::BTreeMap;

/// Why bytes are not a valid message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("proto: {0}")]
pub struct DecodeError(pub String);

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, field: u32, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    put_varint(out, u64::from(field) << 3 | u64::from(LEN));
    put_varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

fn put_map(out: &mut Vec<u8>, field: u32, map: &BTreeMap<String, Vec<u8>>) {
    for (k, v) in map {
        // Map entries are always written, even with an empty key or value.
        let mut entry = Vec::with_capacity(k.len() + v.len() + 4);
        put_bytes(&mut entry, 1, k.as_bytes());
        put_bytes(&mut entry, 2, v);
        put_varint(out, u64::from(field) << 3 | u64::from(LEN));
        put_varint(out, entry.len() as u64);
        out.extend_from_slice(&entry);
    }
}

/// A cursor over one message.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.buf.get(self.pos).ok_or_else(|| DecodeError("unexpected EOF".into()))?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError("variable length integer overflow".into()))
    }

    fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = usize::try_from(self.varint()?).map_err(|_| DecodeError("length out of range".into()))?;
        let end = self.pos.checked_add(len).filter(|e| *e <= self.buf.len()).ok_or_else(|| DecodeError("unexpected EOF".into()))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// The next field's number and wire type; None at the end.
    fn field(&mut self) -> Result<Option<(u32, u8)>, DecodeError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).ok().filter(|n| *n > 0).ok_or_else(|| DecodeError("invalid field number".into()))?;
        Ok(Some((number, (key & 7) as u8)))
    }

    fn skip(&mut self, wire: u8) -> Result<(), DecodeError> {
        let n = match wire {
            VARINT => return self.varint().map(|_| ()),
            LEN => return self.bytes().map(|_| ()),
            FIXED64 => 8,
            FIXED32 => 4,
            other => return Err(DecodeError(format!("unsupported wire type {other}"))),
        };
        if self.pos + n > self.buf.len() {
            return Err(DecodeError("unexpected EOF".into()));
        }
        self.pos += n;
        Ok(())
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| DecodeError("invalid UTF-8 in string field".into()))
    }

    fn expect(&self, wire: u8, want: u8, number: u32) -> Result<(), DecodeError> {
        if wire == want {
            Ok(())
        } else {
            Err(DecodeError(format!("field {number} has wire type {wire}, expected {want}")))
        }
    }
}

fn map_entry(data: &[u8]) -> Result<(String, Vec<u8>), DecodeError> {
    let mut r = Reader::new(data);
    let (mut key, mut value) = (String::new(), Vec::new());
    while let Some((n, wire)) = r.field()? {
        match n {
            1 => {
                r.expect(wire, LEN, n)?;
                key = r.string()?;
            }
            2 => {
                r.expect(wire, LEN, n)?;
                value = r.bytes()?.to_vec();
            }
            _ => r.skip(wire)?,
        }
    }
    Ok((key, value))
}

/// `EncryptedDEKSourceType` of the KDF mode (kube's default since 1.29).
pub const HKDF_SHA256_XNONCE_AES_GCM_SEED: u64 = 1;
/// `EncryptedDEKSourceType` of one DEK per seed (kube before 1.29; read-only here).
pub const AES_GCM_KEY: u64 = 0;

/// The stored form of a value sealed by a KMS v2 provider (after `k8s:enc:kms:v2:<name>:`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EncryptedObject {
    /// info (32) + nonce (12) + AES-GCM ciphertext and tag.
    pub encrypted_data: Vec<u8>,
    /// The plugin's key ID when the DEK source was encrypted.
    pub key_id: String,
    /// The DEK source (a seed in the KDF mode) as the plugin encrypted it.
    pub encrypted_dek_source: Vec<u8>,
    /// The plugin's annotations of that Encrypt call.
    pub annotations: BTreeMap<String, Vec<u8>>,
    /// 0: AES_GCM_KEY, 1: HKDF_SHA256_XNONCE_AES_GCM_SEED.
    pub encrypted_dek_source_type: u64,
}

impl EncryptedObject {
    /// The wire bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encrypted_data.len() + self.encrypted_dek_source.len() + self.key_id.len() + 16);
        put_bytes(&mut out, 1, &self.encrypted_data);
        put_bytes(&mut out, 2, self.key_id.as_bytes());
        put_bytes(&mut out, 3, &self.encrypted_dek_source);
        put_map(&mut out, 4, &self.annotations);
        if self.encrypted_dek_source_type != 0 {
            put_varint(&mut out, 5 << 3 | u64::from(VARINT));
            put_varint(&mut out, self.encrypted_dek_source_type);
        }
        out
    }

    /// Parses the wire bytes (no validation: see `validate`).
    pub fn decode(data: &[u8]) -> Result<Self, DecodeError> {
        let mut o = EncryptedObject::default();
        let mut r = Reader::new(data);
        while let Some((n, wire)) = r.field()? {
            match n {
                1 | 3 => {
                    r.expect(wire, LEN, n)?;
                    let b = r.bytes()?.to_vec();
                    if n == 1 {
                        o.encrypted_data = b;
                    } else {
                        o.encrypted_dek_source = b;
                    }
                }
                2 => {
                    r.expect(wire, LEN, n)?;
                    o.key_id = r.string()?;
                }
                4 => {
                    r.expect(wire, LEN, n)?;
                    let (k, v) = map_entry(r.bytes()?)?;
                    o.annotations.insert(k, v);
                }
                5 => {
                    r.expect(wire, VARINT, n)?;
                    o.encrypted_dek_source_type = r.varint()?;
                }
                _ => r.skip(wire)?,
            }
        }
        Ok(o)
    }
}

/// `StatusResponse`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusResponse {
    /// The plugin's API version (`v2`, or `v2beta1` from older plugins).
    pub version: String,
    /// `ok` when healthy.
    pub healthz: String,
    /// The current write key.
    pub key_id: String,
}

impl StatusResponse {
    /// Parses the wire bytes.
    pub fn decode(data: &[u8]) -> Result<Self, DecodeError> {
        let mut s = StatusResponse::default();
        let mut r = Reader::new(data);
        while let Some((n, wire)) = r.field()? {
            match n {
                1..=3 => {
                    r.expect(wire, LEN, n)?;
                    let v = r.string()?;
                    match n {
                        1 => s.version = v,
                        2 => s.healthz = v,
                        _ => s.key_id = v,
                    }
                }
                _ => r.skip(wire)?,
            }
        }
        Ok(s)
    }

    /// The wire bytes (the test plugins and unit tests answer with them).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_bytes(&mut out, 1, self.version.as_bytes());
        put_bytes(&mut out, 2, self.healthz.as_bytes());
        put_bytes(&mut out, 3, self.key_id.as_bytes());
        out
    }
}

/// `EncryptRequest`: plaintext (1), uid (2).
pub fn encrypt_request(plaintext: &[u8], uid: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(plaintext.len() + uid.len() + 8);
    put_bytes(&mut out, 1, plaintext);
    put_bytes(&mut out, 2, uid.as_bytes());
    out
}

/// `EncryptResponse`: ciphertext (1), key_id (2), annotations (3).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EncryptResponse {
    /// The DEK source as the plugin encrypted it.
    pub ciphertext: Vec<u8>,
    /// The KMS key that encrypted it.
    pub key_id: String,
    /// Stored with the data, in plaintext.
    pub annotations: BTreeMap<String, Vec<u8>>,
}

impl EncryptResponse {
    /// Parses the wire bytes.
    pub fn decode(data: &[u8]) -> Result<Self, DecodeError> {
        let mut e = EncryptResponse::default();
        let mut r = Reader::new(data);
        while let Some((n, wire)) = r.field()? {
            match n {
                1 => {
                    r.expect(wire, LEN, n)?;
                    e.ciphertext = r.bytes()?.to_vec();
                }
                2 => {
                    r.expect(wire, LEN, n)?;
                    e.key_id = r.string()?;
                }
                3 => {
                    r.expect(wire, LEN, n)?;
                    let (k, v) = map_entry(r.bytes()?)?;
                    e.annotations.insert(k, v);
                }
                _ => r.skip(wire)?,
            }
        }
        Ok(e)
    }

    /// The wire bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_bytes(&mut out, 1, &self.ciphertext);
        put_bytes(&mut out, 2, self.key_id.as_bytes());
        put_map(&mut out, 3, &self.annotations);
        out
    }
}

/// `DecryptRequest`: ciphertext (1), uid (2), key_id (3), annotations (4).
pub fn decrypt_request(ciphertext: &[u8], uid: &str, key_id: &str, annotations: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::with_capacity(ciphertext.len() + uid.len() + key_id.len() + 16);
    put_bytes(&mut out, 1, ciphertext);
    put_bytes(&mut out, 2, uid.as_bytes());
    put_bytes(&mut out, 3, key_id.as_bytes());
    put_map(&mut out, 4, annotations);
    out
}

/// `DecryptResponse`: plaintext (1).
pub fn decrypt_response(data: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let mut plaintext = Vec::new();
    let mut r = Reader::new(data);
    while let Some((n, wire)) = r.field()? {
        if n == 1 {
            r.expect(wire, LEN, n)?;
            plaintext = r.bytes()?.to_vec();
        } else {
            r.skip(wire)?;
        }
    }
    Ok(plaintext)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encrypted_object_round_trips_with_go_field_numbers() {
        let o = EncryptedObject {
            encrypted_data: vec![1, 2, 3],
            key_id: "key-1".into(),
            encrypted_dek_source: vec![9; 40],
            annotations: BTreeMap::from([("kms.example.com/v".to_owned(), b"x".to_vec())]),
            encrypted_dek_source_type: HKDF_SHA256_XNONCE_AES_GCM_SEED,
        };
        let wire = o.encode();
        // field 1 (bytes) first: key 0x0a, length 3.
        assert_eq!(&wire[..5], &[0x0a, 3, 1, 2, 3]);
        // field 2: key 0x12, "key-1".
        assert_eq!(&wire[5..12], b"\x12\x05key-1");
        // field 5 (varint) last: key 0x28, 1.
        assert_eq!(&wire[wire.len() - 2..], &[0x28, 1]);
        assert_eq!(EncryptedObject::decode(&wire), Ok(o.clone()));
        // proto3: the zero enum is not written.
        let zero = EncryptedObject { encrypted_dek_source_type: AES_GCM_KEY, annotations: BTreeMap::new(), ..o };
        assert_eq!(zero.encode().last(), Some(&9), "ends with the DEK source, no field 5");
        // Unknown fields are skipped; truncated data is refused.
        let mut extra = zero.encode();
        extra.extend_from_slice(&[0x38, 0x96, 0x01, 0x42, 0x01, b'z']);
        assert_eq!(EncryptedObject::decode(&extra), Ok(zero.clone()));
        let full = zero.encode();
        assert!(EncryptedObject::decode(&full[..full.len() - 1]).is_err());
    }

    #[test]
    fn kms_api_messages_use_the_plugin_api_field_numbers() {
        let status = StatusResponse { version: "v2".into(), healthz: "ok".into(), key_id: "k".into() };
        assert_eq!(status.encode(), b"\x0a\x02v2\x12\x02ok\x1a\x01k");
        assert_eq!(StatusResponse::decode(&status.encode()), Ok(status));
        assert_eq!(encrypt_request(b"seed", "u"), b"\x0a\x04seed\x12\x01u");
        let ann = BTreeMap::from([("a.io".to_owned(), vec![7])]);
        assert_eq!(decrypt_request(b"c", "u", "k", &ann), b"\x0a\x01c\x12\x01u\x1a\x01k\x22\x09\x0a\x04a.io\x12\x01\x07");
        let resp = EncryptResponse { ciphertext: b"ct".to_vec(), key_id: "k2".into(), annotations: ann };
        assert_eq!(EncryptResponse::decode(&resp.encode()), Ok(resp));
        assert_eq!(decrypt_response(b"\x0a\x03abc"), Ok(b"abc".to_vec()));
        assert!(decrypt_response(b"\x0a\x05ab").is_err());
        assert!(StatusResponse::decode(b"\x08").is_err(), "a field key with no value");
    }
}
