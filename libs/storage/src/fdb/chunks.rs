//! Values split across `data` keys of at most [`CHUNK_BYTES`] each, under FoundationDB's
//! 100 000-byte value limit.
//!
//! All chunks of a value are written by one transaction (versionstamped keys of the writing
//! transaction) and read by one range read, so a value is never seen half written; the first
//! chunk starts with the total length so that a damaged value is an error, not a short read.

use std::time::Instant;

use bytes::Bytes;
use foundationdb::future::FdbValues;
use foundationdb::options::{MutationType, StreamingMode};
use foundationdb::{FdbBindingError, RangeOption, Transaction};
use futures_util::future::try_join_all;
use futures_util::TryStreamExt;

use super::layout::Layout;
use super::revision::Stamp;
use super::{corrupt, store_error};
use crate::StorageError;

/// Bytes per chunk value: below the 100 000-byte limit with room to spare.
pub(super) const CHUNK_BYTES: usize = 90_000;
const LEN_BYTES: usize = 4;

/// Values fetched per round of concurrent reads.
const FETCH_WAVE: usize = 16;

/// A transaction stops fetching values past this many bytes (the caller continues in another
/// transaction), far below what FoundationDB reads in its 5-second window.
pub(super) const TXN_VALUE_BUDGET: usize = 8 << 20;

/// Writes `value` as the value of the current transaction (at its own versionstamp).
pub(super) fn write(
    trx: &Transaction,
    layout: &Layout,
    value: &[u8],
) -> Result<(), FdbBindingError> {
    let total = u32::try_from(value.len()).map_err(|_| {
        store_error(StorageError::Backend(format!(
            "foundationdb: a value of {} bytes is too large",
            value.len()
        )))
    })?;
    let first_len = value.len().min(CHUNK_BYTES - LEN_BYTES);
    let mut first = Vec::with_capacity(LEN_BYTES + first_len);
    first.extend_from_slice(&total.to_be_bytes());
    first.extend_from_slice(&value[..first_len]);
    trx.atomic_op(
        &layout.data_placeholder(0),
        &first,
        MutationType::SetVersionstampedKey,
    );
    for (i, chunk) in value[first_len..].chunks(CHUNK_BYTES).enumerate() {
        let index = u16::try_from(i + 1).map_err(|_| {
            store_error(StorageError::Backend(format!(
                "foundationdb: a value of {} bytes needs too many chunks",
                value.len()
            )))
        })?;
        trx.atomic_op(
            &layout.data_placeholder(index),
            chunk,
            MutationType::SetVersionstampedKey,
        );
    }
    Ok(())
}

/// Reads the value written at `stamp`.
pub(super) async fn read(
    trx: &Transaction,
    layout: &Layout,
    stamp: Stamp,
) -> Result<Bytes, FdbBindingError> {
    let (begin, end) = layout.data_range(stamp);
    let mut range = RangeOption::from((begin, end));
    range.mode = StreamingMode::WantAll;
    let batches: Vec<FdbValues> = trx.get_ranges(range, false).try_collect().await?;
    let mut out: Vec<u8> = Vec::new();
    let mut total = None;
    let mut next = 0u16;
    for kv in batches.iter().flat_map(|batch| batch.iter()) {
        let index = layout
            .data_chunk(stamp, kv.key())
            .ok_or_else(|| corrupt(format!("stray key in the value at {:02x?}", stamp.0)))?;
        if index != next {
            return Err(corrupt(format!(
                "value at {:02x?}: chunk {index} where {next} was expected",
                stamp.0
            )));
        }
        let mut part = kv.value();
        if index == 0 {
            let len = part
                .get(..LEN_BYTES)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(u32::from_be_bytes)
                .ok_or_else(|| corrupt(format!("value at {:02x?}: short header", stamp.0)))?;
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            total = Some(len);
            out.reserve_exact(len);
            part = &part[LEN_BYTES..];
        }
        out.extend_from_slice(part);
        next = next.wrapping_add(1);
    }
    match total {
        Some(len) if len == out.len() => Ok(Bytes::from(out)),
        Some(len) => Err(corrupt(format!(
            "value at {:02x?}: {} bytes where {len} were written",
            stamp.0,
            out.len()
        ))),
        None => Err(corrupt(format!("value at {:02x?} is missing", stamp.0))),
    }
}

/// Reads the values at `stamps`, in order, concurrently in waves. Stops early (returning a
/// prefix, never empty unless `stamps` is) once [`TXN_VALUE_BUDGET`] bytes are read or
/// `deadline` passed, so that one transaction stays well inside FoundationDB's 5 s.
pub(super) async fn read_many(
    trx: &Transaction,
    layout: &Layout,
    stamps: &[Stamp],
    deadline: Instant,
) -> Result<Vec<Bytes>, FdbBindingError> {
    let mut values = Vec::with_capacity(stamps.len());
    let mut bytes = 0usize;
    for wave in stamps.chunks(FETCH_WAVE) {
        if !values.is_empty() && (bytes >= TXN_VALUE_BUDGET || Instant::now() >= deadline) {
            break;
        }
        let read: Vec<Bytes> =
            try_join_all(wave.iter().map(|stamp| read(trx, layout, *stamp))).await?;
        bytes += read.iter().map(Bytes::len).sum::<usize>();
        values.extend(read);
    }
    Ok(values)
}
