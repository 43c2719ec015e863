//! Reading the change log from etcd's history, for positions before the in-memory window.
//!
//! etcd keeps every revision since its last compaction and replays it to a watch that starts
//! in the past. A historical read is such a watch, from `after + 1`, read until it has
//! delivered the event at the window's start (which etcd still has: it is newer than the
//! compaction, or the caller would have been told `Compacted`) or as many events as asked for.
//!
//! etcd replays history to such a watch from its background sync loop, every 100 ms: one read
//! costs about that much, whatever its size. So a read asks for a large chunk and the store
//! keeps it ([`Chunk`]), serving the following pages of a sequential reader from memory.

use std::time::Duration;

use etcd_client::{WatchClient, WatchOptions};

use super::errors;
use super::keys::KeySpace;
use super::log::convert;
use crate::{Event, Revision, StorageError};

/// Events in `(after, until]`, at most `limit`; `reached` says the read got to `until`.
pub(crate) struct HistoryPage {
    pub(crate) events: Vec<Event>,
    pub(crate) reached: bool,
}

/// Most events and value bytes one historical read fetches.
pub(crate) const CHUNK_EVENTS: usize = 1000;
const CHUNK_BYTES: usize = 32 << 20;

/// The last historical read: every event in `(after, through]`.
#[derive(Debug)]
pub(crate) struct Chunk {
    after: Revision,
    events: Vec<Event>,
    through: Revision,
}

impl Chunk {
    pub(crate) fn new(after: Revision, until: Revision, page: HistoryPage) -> Self {
        let through = match (page.reached, page.events.last()) {
            (true, _) => until,
            (false, Some(last)) => last.revision,
            (false, None) => after,
        };
        Self { after, events: page.events, through }
    }

    /// Up to `limit` events after `position` and the position reached, when the chunk covers it.
    pub(crate) fn serve(&self, position: Revision, limit: usize) -> Option<(Vec<Event>, Revision)> {
        if position < self.after || position >= self.through {
            return None;
        }
        let first = self.events.partition_point(|e| e.revision <= position);
        let taken: Vec<Event> = self.events[first..].iter().take(limit).cloned().collect();
        let reached = match taken.last() {
            _ if first + taken.len() == self.events.len() => self.through,
            Some(last) => last.revision,
            None => self.through,
        };
        Some((taken, reached))
    }
}

pub(crate) async fn read(
    watch: &WatchClient,
    keys: &KeySpace,
    after: Revision,
    until: Revision,
    limit: usize,
    timeout: Duration,
) -> Result<HistoryPage, StorageError> {
    match tokio::time::timeout(timeout, read_unbounded(watch, keys, after, until, limit)).await {
        Ok(page) => page,
        Err(_) => Err(StorageError::Backend(format!("etcd: reading the change log after revision {after} timed out after {timeout:?}"))),
    }
}

async fn read_unbounded(watch: &WatchClient, keys: &KeySpace, after: Revision, until: Revision, limit: usize) -> Result<HistoryPage, StorageError> {
    let (start, end) = keys.whole();
    let options = WatchOptions::new().with_range(end).with_start_revision(i64::try_from(after + 1).unwrap_or(i64::MAX)).with_prev_key();
    let mut stream = watch.clone().watch(start, Some(options)).await.map_err(|e| errors::backend(&e))?;
    let mut events = Vec::new();
    let mut bytes = 0;
    while let Some(response) = stream.message().await.map_err(|e| errors::backend(&e))? {
        if response.compact_revision() > 0 {
            let compacted = u64::try_from(response.compact_revision()).unwrap_or(0);
            return Err(StorageError::Compacted { requested: after, compacted });
        }
        if response.canceled() {
            return Err(StorageError::Backend(format!("etcd canceled a change-log read: {}", response.cancel_reason())));
        }
        for etcd_event in response.events() {
            let Some(event) = convert(keys, etcd_event) else { continue };
            if event.revision > until {
                return Ok(HistoryPage { events, reached: true });
            }
            let last = event.revision == until;
            bytes += event.value.len();
            events.push(event);
            if last {
                return Ok(HistoryPage { events, reached: true });
            }
            if events.len() >= limit || bytes >= CHUNK_BYTES {
                return Ok(HistoryPage { events, reached: false });
            }
        }
    }
    Err(StorageError::Backend("etcd: the change-log read ended before reaching the window".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventKind;

    fn events(revisions: &[Revision]) -> Vec<Event> {
        revisions
            .iter()
            .map(|&revision| Event { revision, key: "/k".into(), kind: EventKind::Added, value: Default::default(), prev_revision: 0 })
            .collect()
    }

    fn revisions(events: &[Event]) -> Vec<Revision> {
        events.iter().map(|e| e.revision).collect()
    }

    #[test]
    fn a_chunk_that_reached_the_window_covers_up_to_it() {
        let chunk = Chunk::new(10, 30, HistoryPage { events: events(&[12, 15, 20]), reached: true });
        let (page, reached) = chunk.serve(10, 2).unwrap();
        assert_eq!((revisions(&page), reached), (vec![12, 15], 15));
        let (page, reached) = chunk.serve(15, 10).unwrap();
        assert_eq!((revisions(&page), reached), (vec![20], 30));
        let (page, reached) = chunk.serve(20, 10).unwrap();
        assert_eq!((revisions(&page), reached), (vec![], 30));
        assert!(chunk.serve(30, 10).is_none());
        assert!(chunk.serve(9, 10).is_none());
    }

    #[test]
    fn a_cut_chunk_covers_up_to_its_last_event() {
        let chunk = Chunk::new(10, 30, HistoryPage { events: events(&[12, 15]), reached: false });
        let (page, reached) = chunk.serve(12, 10).unwrap();
        assert_eq!((revisions(&page), reached), (vec![15], 15));
        assert!(chunk.serve(15, 10).is_none());
    }
}
