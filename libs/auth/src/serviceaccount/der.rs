//! Just enough PEM and DER to read and write the key formats kube accepts: SubjectPublicKeyInfo,
//! PKCS#1 and PKCS#8 RSA keys, SEC1 and PKCS#8 EC keys. Hand-written because the needs are
//! tiny and exact: key ids hash the canonical PKIX encoding, so it is rebuilt from the key's
//! components rather than trusted from the input.

use base64::Engine as _;

/// DER tags used here.
pub(crate) const INTEGER: u8 = 0x02;
pub(crate) const BIT_STRING: u8 = 0x03;
pub(crate) const OCTET_STRING: u8 = 0x04;
pub(crate) const NULL: u8 = 0x05;
pub(crate) const OID: u8 = 0x06;
pub(crate) const SEQUENCE: u8 = 0x30;
/// `[0]` and `[1]` explicit context tags (SEC1 `parameters` and `publicKey`).
pub(crate) const CONTEXT_0: u8 = 0xa0;
pub(crate) const CONTEXT_1: u8 = 0xa1;

/// 1.2.840.113549.1.1.1 rsaEncryption
pub(crate) const OID_RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
/// 1.2.840.10045.2.1 id-ecPublicKey
pub(crate) const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
/// 1.2.840.10045.3.1.7 prime256v1 (P-256)
pub(crate) const OID_P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
/// 1.3.132.0.34 secp384r1 (P-384)
pub(crate) const OID_P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];

/// One PEM block: its label and decoded contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PemBlock {
    pub label: String,
    pub der: Vec<u8>,
}

/// Every well-formed PEM block in `text`, in order, like repeated Go `pem.Decode` calls: text
/// around blocks is ignored, and so are blocks whose base64 is broken or whose END line does
/// not match. RFC 1421 headers (`Proc-Type: ...`) inside a block are skipped.
pub(crate) fn pem_blocks(text: &str) -> Vec<PemBlock> {
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(label) = line.trim_end().strip_prefix("-----BEGIN ").and_then(|l| l.strip_suffix("-----")) else {
            continue;
        };
        let end = format!("-----END {label}-----");
        let mut body = String::new();
        let mut closed = false;
        for inner in lines.by_ref() {
            let inner = inner.trim();
            if inner == end {
                closed = true;
                break;
            }
            if inner.contains(':') {
                continue;
            }
            body.push_str(inner);
        }
        if !closed {
            break;
        }
        if let Ok(der) = base64::engine::general_purpose::STANDARD.decode(body.as_bytes()) {
            blocks.push(PemBlock { label: label.to_owned(), der });
        }
    }
    blocks
}

/// Encodes `der` as a PEM block with 64-character lines.
pub(crate) fn pem_encode(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// A DER value: its tag and contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tlv<'a> {
    pub tag: u8,
    pub value: &'a [u8],
}

/// Reads DER values one after another.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(input: &'a [u8]) -> Self {
        Reader { rest: input }
    }

    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next value, or `None` at the end or on malformed input (indefinite or
    /// non-minimal lengths, multi-byte tags, truncation).
    pub fn next(&mut self) -> Option<Tlv<'a>> {
        let (&tag, rest) = self.rest.split_first()?;
        if tag & 0x1f == 0x1f {
            return None;
        }
        let (&first, mut rest) = rest.split_first()?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let count = usize::from(first & 0x7f);
            if count == 0 || count > 4 {
                return None;
            }
            let (len_bytes, after) = rest.split_at_checked(count)?;
            rest = after;
            if len_bytes[0] == 0 {
                return None;
            }
            let len = len_bytes.iter().fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
            if len < 0x80 {
                return None;
            }
            len
        };
        let (value, after) = rest.split_at_checked(len)?;
        self.rest = after;
        Some(Tlv { tag, value })
    }

    /// The next value, which must have `tag`.
    pub fn expect(&mut self, tag: u8) -> Option<&'a [u8]> {
        self.next().filter(|t| t.tag == tag).map(|t| t.value)
    }

    /// The next value if it has `tag`; otherwise nothing is consumed.
    pub fn optional(&mut self, tag: u8) -> Option<&'a [u8]> {
        let mut probe = *self;
        let tlv = probe.next().filter(|t| t.tag == tag)?;
        *self = probe;
        Some(tlv.value)
    }
}

/// The whole of `input` as one value with `tag`, with nothing after it.
pub(crate) fn single(input: &[u8], tag: u8) -> Option<&[u8]> {
    let mut r = Reader::new(input);
    let value = r.expect(tag)?;
    r.is_empty().then_some(value)
}

/// A positive INTEGER's magnitude without leading zero bytes; `None` for negative numbers.
pub(crate) fn unsigned(integer: &[u8]) -> Option<&[u8]> {
    let (&first, _) = integer.split_first()?;
    if first & 0x80 != 0 {
        return None;
    }
    let start = integer.iter().position(|b| *b != 0).unwrap_or(integer.len());
    Some(&integer[start..])
}

/// A BIT STRING's contents, which must have no unused bits.
pub(crate) fn bit_string_bytes(value: &[u8]) -> Option<&[u8]> {
    match value.split_first() {
        Some((0, bytes)) => Some(bytes),
        _ => None,
    }
}

/// Encodes one DER value.
pub(crate) fn tlv(tag: u8, value: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = value.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len() - 1);
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(value);
    out
}

/// Encodes a SEQUENCE of already-encoded values.
pub(crate) fn sequence(parts: &[&[u8]]) -> Vec<u8> {
    tlv(SEQUENCE, &parts.concat())
}

/// Encodes a non-negative INTEGER from its big-endian magnitude, minimally.
pub(crate) fn integer(magnitude: &[u8]) -> Vec<u8> {
    let start = magnitude.iter().position(|b| *b != 0).unwrap_or(magnitude.len());
    let trimmed = &magnitude[start..];
    let mut value = Vec::with_capacity(trimmed.len() + 1);
    if trimmed.first().is_none_or(|b| b & 0x80 != 0) {
        value.push(0);
    }
    value.extend_from_slice(trimmed);
    tlv(INTEGER, &value)
}

/// Encodes a BIT STRING with no unused bits.
pub(crate) fn bit_string(bytes: &[u8]) -> Vec<u8> {
    let mut value = Vec::with_capacity(bytes.len() + 1);
    value.push(0);
    value.extend_from_slice(bytes);
    tlv(BIT_STRING, &value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_lengths() {
        for len in [0usize, 1, 127, 128, 255, 256, 70_000] {
            let value = vec![7u8; len];
            let encoded = tlv(OCTET_STRING, &value);
            assert_eq!(single(&encoded, OCTET_STRING), Some(&value[..]), "length {len}");
        }
        // Non-minimal long form and indefinite length are refused.
        assert_eq!(Reader::new(&[0x04, 0x81, 0x05, 1, 2, 3, 4, 5]).next(), None);
        assert_eq!(Reader::new(&[0x04, 0x80, 0x00, 0x00]).next(), None);
        assert_eq!(Reader::new(&[0x04, 0x05, 1, 2]).next(), None);
        assert_eq!(single(&[0x05, 0x00, 0x05, 0x00], NULL), None);
    }

    #[test]
    fn integers_are_minimal_and_positive() {
        assert_eq!(integer(&[0x01, 0x00, 0x01]), vec![0x02, 0x03, 0x01, 0x00, 0x01]);
        assert_eq!(integer(&[0x00, 0x00, 0x80]), vec![0x02, 0x02, 0x00, 0x80]);
        assert_eq!(integer(&[]), vec![0x02, 0x01, 0x00]);
        assert_eq!(unsigned(&[0x00, 0x80]), Some(&[0x80][..]));
        assert_eq!(unsigned(&[0x80]), None);
    }

    #[test]
    fn pem_blocks_skip_noise() {
        let text = format!(
            "junk\n{}more junk\n-----BEGIN BROKEN-----\n!!!\n-----END BROKEN-----\n{}-----BEGIN OPEN-----\nAAAA\n",
            pem_encode("A", b"hello"),
            pem_encode("B", &[0u8; 100])
        );
        let blocks = pem_blocks(&text);
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0], PemBlock { label: "A".into(), der: b"hello".to_vec() });
        assert_eq!(blocks[1].label, "B");
        assert_eq!(blocks[1].der, vec![0u8; 100]);
    }
}
