//! Keys under the store's directory prefix (the table is in the module docs of [`super`]).
//!
//! Object keys are encoded like FoundationDB tuple strings (`0x02`, the bytes with `0x00`
//! escaped as `0x00 0xFF`, then `0x00`), which keeps their byte order, ends each key
//! unambiguously before a versionstamp suffix, and lets a raw string prefix map to a key range.

use super::revision::Stamp;

const META: u8 = b'm';
const HEAD: u8 = b'h';
const HIST: u8 = b'v';
const LOG: u8 = b'l';
const DATA: u8 = b'd';
const IDEM: u8 = b'i';

/// Names under the meta tag.
pub(super) const META_FORMAT: &[u8] = b"format";
pub(super) const META_BASE: &[u8] = b"base";
pub(super) const META_LAST: &[u8] = b"last";
pub(super) const META_COMPACTED: &[u8] = b"compacted";
pub(super) const META_COMPACT_DONE: &[u8] = b"compact-done";

/// Which per-key index a list reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Index {
    /// `head`: one record per live key, the current state.
    Head,
    /// `hist`: one record per version, for snapshots at past revisions.
    Hist,
}

/// Where a scan resumes, independent of the index that serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Cursor {
    /// At the start of the prefix.
    Start,
    /// At this key (not yet read).
    At(String),
    /// Strictly after this key.
    After(String),
}

/// The key builder of one store: everything lives under `root`, the directory's prefix.
#[derive(Debug, Clone)]
pub(super) struct Layout {
    root: Vec<u8>,
}

impl Layout {
    pub(super) fn new(root: Vec<u8>) -> Self {
        Self { root }
    }

    fn tagged(&self, tag: u8, extra: usize) -> Vec<u8> {
        let mut key = Vec::with_capacity(self.root.len() + 1 + extra);
        key.extend_from_slice(&self.root);
        key.push(tag);
        key
    }

    /// The end (exclusive) of everything under `tag`.
    fn tag_end(&self, tag: u8) -> Vec<u8> {
        let mut key = self.root.clone();
        key.push(tag + 1);
        key
    }

    pub(super) fn meta(&self, name: &[u8]) -> Vec<u8> {
        let mut key = self.tagged(META, name.len());
        key.extend_from_slice(name);
        key
    }

    pub(super) fn head(&self, key: &str) -> Vec<u8> {
        let mut out = self.tagged(HEAD, key.len() + 2);
        encode_str(key, &mut out);
        out
    }

    /// Prefix of every version of `key` in `hist`.
    pub(super) fn hist_group(&self, key: &str) -> Vec<u8> {
        let mut out = self.tagged(HIST, key.len() + 12);
        encode_str(key, &mut out);
        out
    }

    pub(super) fn hist(&self, key: &str, stamp: Stamp) -> Vec<u8> {
        let mut out = self.hist_group(key);
        out.extend_from_slice(&stamp.0);
        out
    }

    /// `hist` key of this transaction's own version, as a `SetVersionstampedKey` parameter.
    pub(super) fn hist_placeholder(&self, key: &str) -> Vec<u8> {
        with_placeholder(self.hist_group(key), &[])
    }

    pub(super) fn log(&self, stamp: Stamp) -> Vec<u8> {
        let mut out = self.tagged(LOG, 10);
        out.extend_from_slice(&stamp.0);
        out
    }

    pub(super) fn log_placeholder(&self) -> Vec<u8> {
        with_placeholder(self.tagged(LOG, 14), &[])
    }

    /// The first possible log key after the entry at `stamp`.
    pub(super) fn log_after(&self, stamp: Stamp) -> Vec<u8> {
        let mut out = self.log(stamp);
        out.push(0x00);
        out
    }

    pub(super) fn log_end(&self) -> Vec<u8> {
        self.tag_end(LOG)
    }

    /// The stamp of a log key, if it is one.
    pub(super) fn log_stamp(&self, key: &[u8]) -> Option<Stamp> {
        let rest = key
            .strip_prefix(self.root.as_slice())?
            .strip_prefix(&[LOG])?;
        Stamp::from_slice(rest)
    }

    pub(super) fn data(&self, stamp: Stamp, chunk: u16) -> Vec<u8> {
        let mut out = self.tagged(DATA, 12);
        out.extend_from_slice(&stamp.0);
        out.extend_from_slice(&chunk.to_be_bytes());
        out
    }

    /// Chunk `chunk` of this transaction's own value, as a `SetVersionstampedKey` parameter.
    pub(super) fn data_placeholder(&self, chunk: u16) -> Vec<u8> {
        with_placeholder(self.tagged(DATA, 16), &chunk.to_be_bytes())
    }

    /// Every chunk of the value written at `stamp`.
    pub(super) fn data_range(&self, stamp: Stamp) -> (Vec<u8>, Vec<u8>) {
        let begin = self.data(stamp, 0);
        let mut end = begin[..begin.len() - 2].to_vec();
        end.extend_from_slice(&[0xFF, 0xFF, 0xFF]);
        (begin, end)
    }

    /// Index of a chunk key of the value at `stamp`.
    pub(super) fn data_chunk(&self, stamp: Stamp, key: &[u8]) -> Option<u16> {
        let rest = key
            .strip_prefix(self.root.as_slice())?
            .strip_prefix(&[DATA])?
            .strip_prefix(stamp.0.as_slice())?;
        Some(u16::from_be_bytes(<[u8; 2]>::try_from(rest).ok()?))
    }

    /// Idempotency marker of one write (`minute` buckets them for clean-up).
    pub(super) fn idem(&self, minute: u64, id: &[u8; 16]) -> Vec<u8> {
        let mut out = self.tagged(IDEM, 24);
        out.extend_from_slice(&minute.to_be_bytes());
        out.extend_from_slice(id);
        out
    }

    /// Every idempotency marker of a minute before `minute`.
    pub(super) fn idem_before(&self, minute: u64) -> (Vec<u8>, Vec<u8>) {
        let begin = self.tagged(IDEM, 0);
        let mut end = self.tagged(IDEM, 8);
        end.extend_from_slice(&minute.to_be_bytes());
        (begin, end)
    }

    fn tag(index: Index) -> u8 {
        match index {
            Index::Head => HEAD,
            Index::Hist => HIST,
        }
    }

    /// The range of `index` holding the keys that start with `prefix`.
    pub(super) fn prefix_range(&self, index: Index, prefix: &str) -> (Vec<u8>, Vec<u8>) {
        let mut begin = self.tagged(Self::tag(index), prefix.len() + 2);
        encode_str(prefix, &mut begin);
        // Without the terminator the encoding is a byte prefix of every longer key's encoding.
        begin.pop();
        let end = strinc(&begin);
        (begin, end)
    }

    /// The first key of `index` a scan from `cursor` reads.
    pub(super) fn cursor_key(&self, index: Index, prefix: &str, cursor: &Cursor) -> Vec<u8> {
        match (index, cursor) {
            (_, Cursor::Start) => self.prefix_range(index, prefix).0,
            (Index::Head, Cursor::At(key)) => self.head(key),
            (Index::Head, Cursor::After(key)) => {
                let mut out = self.head(key);
                out.push(0x00);
                out
            }
            (Index::Hist, Cursor::At(key)) => self.hist_group(key),
            // Past every version of `key` (a stamp never starts with 0xFF), but not past a
            // longer key `key\0...`, whose encoding continues with 0x00 0xFF.
            (Index::Hist, Cursor::After(key)) => {
                let mut out = self.hist_group(key);
                out.push(0xFF);
                out
            }
        }
    }

    /// The object key of a `head` key.
    pub(super) fn head_key(&self, raw: &[u8]) -> Option<String> {
        let rest = raw
            .strip_prefix(self.root.as_slice())?
            .strip_prefix(&[HEAD])?;
        match decode_str(rest)? {
            (key, []) => Some(key),
            _ => None,
        }
    }

    /// The object key and stamp of a `hist` key.
    pub(super) fn hist_key(&self, raw: &[u8]) -> Option<(String, Stamp)> {
        let rest = raw
            .strip_prefix(self.root.as_slice())?
            .strip_prefix(&[HIST])?;
        let (key, rest) = decode_str(rest)?;
        Some((key, Stamp::from_slice(rest)?))
    }
}

/// Appends the tuple encoding of a string.
fn encode_str(s: &str, out: &mut Vec<u8>) {
    out.push(0x02);
    for &b in s.as_bytes() {
        out.push(b);
        if b == 0x00 {
            out.push(0xFF);
        }
    }
    out.push(0x00);
}

/// Decodes a tuple-encoded string at the start of `input`; returns it and the rest.
fn decode_str(input: &[u8]) -> Option<(String, &[u8])> {
    let body = input.strip_prefix(&[0x02])?;
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        match (body[i], body.get(i + 1)) {
            (0x00, Some(0xFF)) => {
                out.push(0x00);
                i += 2;
            }
            (0x00, _) => return Some((String::from_utf8(out).ok()?, &body[i + 1..])),
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    None
}

/// Appends a 10-byte versionstamp placeholder after `key`, then `suffix`, then the placeholder's
/// offset as the 4-byte little-endian trailer that `SetVersionstampedKey`/`Value` expect (API
/// version >= 520).
pub(super) fn with_placeholder(mut key: Vec<u8>, suffix: &[u8]) -> Vec<u8> {
    let offset = u32::try_from(key.len()).unwrap_or(u32::MAX);
    key.extend_from_slice(&[0u8; 10]);
    key.extend_from_slice(suffix);
    key.extend_from_slice(&offset.to_le_bytes());
    key
}

/// The smallest key greater than every key starting with `prefix`.
fn strinc(prefix: &[u8]) -> Vec<u8> {
    let mut out = prefix.to_vec();
    while let Some(last) = out.pop() {
        if last < 0xFF {
            out.push(last + 1);
            return out;
        }
    }
    vec![0xFF]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout::new(vec![0x15, 0x2a])
    }

    #[test]
    fn strings_round_trip_and_keep_order() {
        let l = layout();
        for key in ["", "/a", "/a/b", "/a\0b", "/é"] {
            assert_eq!(l.head_key(&l.head(key)).as_deref(), Some(key));
            let stamp = Stamp::new(42, 3);
            assert_eq!(
                l.hist_key(&l.hist(key, stamp)),
                Some((key.to_owned(), stamp))
            );
        }
        let mut keys = ["/a/b", "/a", "/a\0", "/a\0b", "/b", "/a/b/c", "/a0"];
        let mut encoded: Vec<Vec<u8>> = keys.iter().map(|k| l.head(k)).collect();
        keys.sort_unstable();
        encoded.sort();
        let decoded: Vec<String> = encoded.iter().filter_map(|e| l.head_key(e)).collect();
        assert_eq!(decoded, keys);
    }

    #[test]
    fn prefix_ranges_hold_exactly_the_prefix() {
        let l = layout();
        for index in [Index::Head, Index::Hist] {
            let (begin, end) = l.prefix_range(index, "/a/b");
            let raw = |k: &str| match index {
                Index::Head => l.head(k),
                Index::Hist => l.hist(k, Stamp::new(7, 0)),
            };
            for inside in ["/a/b", "/a/b/1", "/a/bc/1", "/a/b\0x"] {
                let k = raw(inside);
                assert!(begin <= k && k < end, "{inside} outside");
            }
            for outside in ["/a/a", "/a/c", "/a", "/b"] {
                let k = raw(outside);
                assert!(k < begin || k >= end, "{outside} inside");
            }
        }
    }

    #[test]
    fn cursors_skip_exactly_one_key() {
        let l = layout();
        let s = Stamp::new(9, 9);
        let after = Cursor::After("/a".into());
        let hist_after = l.cursor_key(Index::Hist, "", &after);
        assert!(l.hist("/a", s) < hist_after);
        assert!(l.hist("/a\0", s) >= hist_after);
        assert!(l.hist("/a/", s) >= hist_after);
        let head_after = l.cursor_key(Index::Head, "", &after);
        assert!(l.head("/a") < head_after && l.head("/a\0") >= head_after);
        let at = Cursor::At("/a".into());
        assert!(l.cursor_key(Index::Hist, "", &at) <= l.hist("/a", Stamp::ZERO));
    }

    #[test]
    fn placeholders_carry_their_offset() {
        let l = layout();
        let key = l.data_placeholder(3);
        let (body, offset) = key.split_at(key.len() - 4);
        let offset = u32::from_le_bytes(offset.try_into().unwrap()) as usize;
        assert_eq!(&body[offset..offset + 10], &[0u8; 10]);
        assert_eq!(&body[offset + 10..], &3u16.to_be_bytes());
        let stamp = Stamp::new(1, 2);
        let (begin, end) = l.data_range(stamp);
        let chunk = l.data(stamp, 65535);
        assert!(begin <= chunk && chunk < end);
        assert_eq!(l.data_chunk(stamp, &chunk), Some(65535));
        assert!(l.data(Stamp::new(1, 3), 0) >= end);
    }
}
