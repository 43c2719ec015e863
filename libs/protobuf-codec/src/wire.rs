//! Protobuf wire primitives: varints, keys, length-delimited fields.

use crate::ProtobufError;

/// Wire types used by Kubernetes messages.
pub(crate) const VARINT: u8 = 0;
pub(crate) const FIXED64: u8 = 1;
pub(crate) const LEN: u8 = 2;
pub(crate) const FIXED32: u8 = 5;

/// A cursor over one message's bytes.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub(crate) fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let byte = *self.buf.get(self.pos).ok_or(ProtobufError::Truncated)?;
            self.pos += 1;
            if shift == 63 && byte > 1 {
                return Err(ProtobufError::Malformed("varint overflows 64 bits".into()));
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ProtobufError::Malformed("varint longer than 10 bytes".into()))
    }

    /// The next field's number and wire type.
    pub(crate) fn key(&mut self) -> Result<(u32, u8), ProtobufError> {
        let key = self.varint()?;
        let tag = u32::try_from(key >> 3).map_err(|_| ProtobufError::Malformed("field number out of range".into()))?;
        if tag == 0 {
            return Err(ProtobufError::Malformed("field number 0".into()));
        }
        Ok((tag, (key & 7) as u8))
    }

    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], ProtobufError> {
        let len = usize::try_from(self.varint()?).map_err(|_| ProtobufError::Truncated)?;
        let end = self.pos.checked_add(len).ok_or(ProtobufError::Truncated)?;
        let slice = self.buf.get(self.pos..end).ok_or(ProtobufError::Truncated)?;
        self.pos = end;
        Ok(slice)
    }

    pub(crate) fn fixed64(&mut self) -> Result<u64, ProtobufError> {
        let slice = self.buf.get(self.pos..self.pos + 8).ok_or(ProtobufError::Truncated)?;
        self.pos += 8;
        let mut b = [0u8; 8];
        b.copy_from_slice(slice);
        Ok(u64::from_le_bytes(b))
    }

    /// Skips a field of an unknown number, as protobuf decoders must.
    pub(crate) fn skip(&mut self, wire_type: u8) -> Result<(), ProtobufError> {
        match wire_type {
            VARINT => self.varint().map(|_| ()),
            FIXED64 => self.fixed64().map(|_| ()),
            LEN => self.bytes().map(|_| ()),
            FIXED32 => {
                self.buf.get(self.pos..self.pos + 4).ok_or(ProtobufError::Truncated)?;
                self.pos += 4;
                Ok(())
            }
            other => Err(ProtobufError::Malformed(format!("unsupported wire type {other}"))),
        }
    }
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(crate) fn put_key(out: &mut Vec<u8>, tag: u32, wire_type: u8) {
    put_varint(out, (u64::from(tag) << 3) | u64::from(wire_type));
}

pub(crate) fn put_len(out: &mut Vec<u8>, tag: u32, data: &[u8]) {
    put_key(out, tag, LEN);
    put_varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_garbage() {
        for v in [0u64, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX, (-1i64) as u64] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(Reader::new(&out).varint().unwrap(), v);
        }
        assert!(matches!(Reader::new(&[0x80, 0x80]).varint(), Err(ProtobufError::Truncated)));
        assert!(Reader::new(&[0xff; 11]).varint().is_err());
        let mut r = Reader::new(&[0x0a, 0x05, b'a']);
        assert_eq!(r.key().unwrap(), (1, LEN));
        assert!(matches!(r.bytes(), Err(ProtobufError::Truncated)));
    }
}
