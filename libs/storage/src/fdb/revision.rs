//! Versionstamps and their packing into [`Revision`]s (the arithmetic is in the module docs of
//! [`super`]).

use crate::{Result, Revision, StorageError};

/// Bits of a revision that hold the batch order of the versionstamp. FoundationDB caps a commit
/// batch at 32 768 transactions (`COMMIT_TRANSACTION_BATCH_COUNT_MAX`, documented as never to be
/// raised because commit ids budget two bytes), so the order is below 2^15.
pub(super) const ORDER_BITS: u32 = 15;

/// Commit versions after the store's base that still fit a revision: 2^49, ~17.8 years at
/// FoundationDB's nominal one million versions per second.
pub(super) const VERSION_SPAN: u64 = 1 << (64 - ORDER_BITS);

/// Writes are refused this many versions (~2.8 hours) before the span runs out, so that the
/// exhaustion is a clear error before commit rather than an unrepresentable committed write.
pub(super) const EXHAUSTION_MARGIN: u64 = 10_000_000_000;

/// FoundationDB advances versions at about this rate (`VERSIONS_PER_SECOND`); automatic
/// compaction uses it to turn a retention time into a version distance.
pub(super) const VERSIONS_PER_SECOND: u64 = 1_000_000;

/// A 10-byte commit versionstamp: big-endian commit version (8 bytes), then big-endian batch
/// order (2 bytes). Byte order is commit order, which is why keys can embed it raw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Stamp(pub(super) [u8; 10]);

impl Stamp {
    /// Never a real commit (versions after the base are positive): records use it for "none"
    /// and "same as this record's own stamp".
    pub(super) const ZERO: Stamp = Stamp([0; 10]);

    pub(super) fn new(version: u64, order: u16) -> Self {
        let mut bytes = [0u8; 10];
        bytes[..8].copy_from_slice(&version.to_be_bytes());
        bytes[8..].copy_from_slice(&order.to_be_bytes());
        Stamp(bytes)
    }

    pub(super) fn from_slice(bytes: &[u8]) -> Option<Self> {
        <[u8; 10]>::try_from(bytes).ok().map(Stamp)
    }

    pub(super) fn version(&self) -> u64 {
        let mut v = [0u8; 8];
        v.copy_from_slice(&self.0[..8]);
        u64::from_be_bytes(v)
    }

    pub(super) fn order(&self) -> u16 {
        u16::from_be_bytes([self.0[8], self.0[9]])
    }

    pub(super) fn is_zero(&self) -> bool {
        *self == Stamp::ZERO
    }
}

/// Converts between stamps and revisions for one store, whose base is the commit version of the
/// transaction that initialised it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Revisions {
    base: u64,
}

impl Revisions {
    pub(super) fn new(base: u64) -> Self {
        Self { base }
    }

    pub(super) fn base(&self) -> u64 {
        self.base
    }

    /// The revision of a committed stamp; an error for stamps no write of this store can have.
    pub(super) fn revision(&self, stamp: Stamp) -> Result<Revision> {
        let version = stamp.version();
        let order = u64::from(stamp.order());
        if version < self.base || order >= 1 << ORDER_BITS {
            return Err(StorageError::Backend(format!(
                "foundationdb: versionstamp {:02x?} is not a revision of this store (base {})",
                stamp.0, self.base
            )));
        }
        let delta = version - self.base;
        if delta >= VERSION_SPAN {
            return Err(StorageError::Backend(format!(
                "foundationdb: revision space exhausted (commit version {version}, base {}); \
                 migrate the objects to a fresh store directory",
                self.base
            )));
        }
        Ok(delta << ORDER_BITS | order)
    }

    /// The stamp of a revision. Monotonic for every `u64`, so a revision that no write has
    /// (a future one, or 0) still marks the right place in stamp order.
    pub(super) fn stamp(&self, revision: Revision) -> Stamp {
        let version = self.base.saturating_add(revision >> ORDER_BITS);
        // Masked to 15 bits, so the conversion cannot fail.
        let order = u16::try_from(revision & ((1 << ORDER_BITS) - 1)).unwrap_or(u16::MAX);
        Stamp::new(version, order)
    }

    /// The revision of the first stamp at `version` (for turning versions into horizons); 0
    /// before the base, saturated past the span.
    pub(super) fn at_version(&self, version: u64) -> Revision {
        let delta = version.saturating_sub(self.base).min(VERSION_SPAN - 1);
        delta << ORDER_BITS
    }

    /// Whether a transaction reading at `read_version` may still commit a representable write.
    pub(super) fn writable_at(&self, read_version: u64) -> bool {
        read_version.saturating_sub(self.base) < VERSION_SPAN - EXHAUSTION_MARGIN
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_round_trips_and_keeps_order() {
        let revs = Revisions::new(1_000_000);
        let a = Stamp::new(1_000_001, 0);
        let b = Stamp::new(1_000_001, 7);
        let c = Stamp::new(1_000_002, 0);
        let (ra, rb, rc) = (
            revs.revision(a).unwrap(),
            revs.revision(b).unwrap(),
            revs.revision(c).unwrap(),
        );
        assert!(0 < ra && ra < rb && rb < rc);
        assert_eq!((revs.stamp(ra), revs.stamp(rb), revs.stamp(rc)), (a, b, c));
        assert_eq!(revs.stamp(0), Stamp::new(1_000_000, 0));
        assert!(revs.stamp(rc + 1) > c && revs.stamp(u64::MAX) > c);
        assert!(revs.revision(Stamp::new(999_999, 0)).is_err());
        assert!(revs.revision(Stamp::new(1_000_001, 1 << 15)).is_err());
        assert!(revs
            .revision(Stamp::new(1_000_000 + VERSION_SPAN, 0))
            .is_err());
    }

    #[test]
    fn version_distances_become_revisions() {
        let revs = Revisions::new(500);
        assert_eq!(revs.at_version(100), 0);
        assert_eq!(revs.at_version(501), 1 << ORDER_BITS);
        assert!(revs.writable_at(500 + VERSION_SPAN - EXHAUSTION_MARGIN - 1));
        assert!(!revs.writable_at(500 + VERSION_SPAN - EXHAUSTION_MARGIN));
    }
}
