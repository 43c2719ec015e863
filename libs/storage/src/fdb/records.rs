//! Encodings of the small records: `head`, `hist` and `log` values.
//!
//! A record written in the same transaction as the stamp it refers to cannot know that stamp;
//! [`Stamp::ZERO`] in a "created" field means "the record's own stamp" (a create), and in a
//! "previous" field means "none".

use super::layout::with_placeholder;
use super::revision::Stamp;
use crate::EventKind;

const ADDED: u8 = 0;
const MODIFIED: u8 = 1;
const DELETED: u8 = 2;

/// Bumped if the log record layout changes.
const LOG_FORMAT: u8 = 1;

fn kind_code(kind: EventKind) -> u8 {
    match kind {
        EventKind::Added => ADDED,
        EventKind::Modified => MODIFIED,
        EventKind::Deleted => DELETED,
    }
}

fn kind_of(code: u8) -> Option<EventKind> {
    match code {
        ADDED => Some(EventKind::Added),
        MODIFIED => Some(EventKind::Modified),
        DELETED => Some(EventKind::Deleted),
        _ => None,
    }
}

fn stamp_at(bytes: &[u8], at: usize) -> Option<Stamp> {
    Stamp::from_slice(bytes.get(at..at + 10)?)
}

/// `head` value: `[mod stamp 10][create stamp 10, ZERO = mod]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Head {
    pub(super) modified: Stamp,
    pub(super) created: Stamp,
}

impl Head {
    /// The `SetVersionstampedValue` parameter of a head whose mod stamp is this transaction's.
    /// `created` is `None` for a create.
    pub(super) fn placeholder(created: Option<Stamp>) -> Vec<u8> {
        with_placeholder(Vec::new(), &created.unwrap_or(Stamp::ZERO).0)
    }

    pub(super) fn decode(bytes: &[u8]) -> Option<Head> {
        if bytes.len() != 20 {
            return None;
        }
        let modified = stamp_at(bytes, 0)?;
        let created = stamp_at(bytes, 10)?;
        Some(Head {
            modified,
            created: if created.is_zero() { modified } else { created },
        })
    }
}

/// `hist` value: `[kind 1][create stamp 10, ZERO = own stamp]`; the stamp is in the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Version {
    pub(super) kind: EventKind,
    pub(super) created: Stamp,
}

impl Version {
    pub(super) fn encode(kind: EventKind, created: Option<Stamp>) -> Vec<u8> {
        let mut out = Vec::with_capacity(11);
        out.push(kind_code(kind));
        out.extend_from_slice(&created.unwrap_or(Stamp::ZERO).0);
        out
    }

    pub(super) fn decode(bytes: &[u8], own: Stamp) -> Option<Version> {
        if bytes.len() != 11 {
            return None;
        }
        let created = stamp_at(bytes, 1)?;
        Some(Version {
            kind: kind_of(bytes[0])?,
            created: if created.is_zero() { own } else { created },
        })
    }
}

/// `log` value: `[format 1][kind 1][prev stamp 10][create stamp 10][value length u32 BE][key]`.
/// The value itself lives in `data` at the entry's own stamp, or for `Deleted` at `prev`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LogEntry {
    pub(super) kind: EventKind,
    pub(super) key: String,
    pub(super) prev: Option<Stamp>,
    pub(super) created: Stamp,
    pub(super) value_len: u32,
}

impl LogEntry {
    pub(super) fn encode(
        kind: EventKind,
        key: &str,
        prev: Option<Stamp>,
        created: Option<Stamp>,
        value_len: u32,
    ) -> Vec<u8> {
        let mut out = Vec::with_capacity(26 + key.len());
        out.push(LOG_FORMAT);
        out.push(kind_code(kind));
        out.extend_from_slice(&prev.unwrap_or(Stamp::ZERO).0);
        out.extend_from_slice(&created.unwrap_or(Stamp::ZERO).0);
        out.extend_from_slice(&value_len.to_be_bytes());
        out.extend_from_slice(key.as_bytes());
        out
    }

    pub(super) fn decode(bytes: &[u8], own: Stamp) -> Option<LogEntry> {
        if bytes.len() < 26 || bytes[0] != LOG_FORMAT {
            return None;
        }
        let prev = stamp_at(bytes, 2)?;
        let created = stamp_at(bytes, 12)?;
        let value_len = u32::from_be_bytes(<[u8; 4]>::try_from(bytes.get(22..26)?).ok()?);
        Some(LogEntry {
            kind: kind_of(bytes[1])?,
            key: String::from_utf8(bytes[26..].to_vec()).ok()?,
            prev: (!prev.is_zero()).then_some(prev),
            created: if created.is_zero() { own } else { created },
            value_len,
        })
    }

    /// Where the event's value is stored: its own stamp, or the deleted version's.
    pub(super) fn value_stamp(&self, own: Stamp) -> Stamp {
        match (self.kind, self.prev) {
            (EventKind::Deleted, Some(prev)) => prev,
            _ => own,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let own = Stamp::new(10, 1);
        let old = Stamp::new(5, 0);
        // A head is written with a placeholder; emulate FoundationDB filling it in.
        let fill = |param: Vec<u8>| {
            let (body, offset) = param.split_at(param.len() - 4);
            let offset = u32::from_le_bytes(offset.try_into().unwrap()) as usize;
            let mut body = body.to_vec();
            body[offset..offset + 10].copy_from_slice(&own.0);
            body
        };
        assert_eq!(
            Head::decode(&fill(Head::placeholder(None))),
            Some(Head {
                modified: own,
                created: own
            })
        );
        assert_eq!(
            Head::decode(&fill(Head::placeholder(Some(old)))),
            Some(Head {
                modified: own,
                created: old
            })
        );
        let v = Version::decode(&Version::encode(EventKind::Modified, Some(old)), own);
        assert_eq!(
            v,
            Some(Version {
                kind: EventKind::Modified,
                created: old
            })
        );
        let entry = LogEntry::decode(
            &LogEntry::encode(EventKind::Deleted, "/k", Some(old), Some(old), 3),
            own,
        )
        .unwrap();
        assert_eq!(
            (entry.kind, entry.key.as_str(), entry.prev, entry.value_len),
            (EventKind::Deleted, "/k", Some(old), 3)
        );
        assert_eq!(entry.value_stamp(own), old);
        let added = LogEntry::decode(
            &LogEntry::encode(EventKind::Added, "/k", None, None, 0),
            own,
        )
        .unwrap();
        assert_eq!(
            (added.prev, added.created, added.value_stamp(own)),
            (None, own, own)
        );
    }
}
