//! The conformance suite every [`Store`](crate::Store) backend runs unchanged.
//!
//! A backend provides a [`StoreFactory`] and expands [`storage_conformance_tests!`] in a test
//! crate (or a `#[cfg(test)]` module):
//!
//! ```ignore
//! struct SqliteFactory;
//! #[async_trait::async_trait]
//! impl kapi_storage::conformance::StoreFactory for SqliteFactory { /* fresh, open */ }
//! kapi_storage::storage_conformance_tests!(SqliteFactory);
//! ```
//!
//! The expansion is one `#[tokio::test(flavor = "multi_thread")]` per check, so the calling
//! crate needs `tokio` (with `macros` and `rt-multi-thread`) as a (dev-)dependency. The
//! durability check re-executes the test binary with the name of a generated child test, so the
//! macro must be expanded at most once per module.

pub mod checks;
pub mod concurrency;
pub mod crash;

use std::any::Any;
use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::{DynStore, Event, EventKind, KeyValue, ListOptions, Result, Revision};

/// Opens a backend for the suite: at a fresh location, and again at a location used before (the
/// durability check reopens what a killed child process wrote).
#[async_trait]
pub trait StoreFactory: Send + Sync + 'static {
    /// Prepares a new, empty location for one check. Dropping the [`Location`] cleans it up.
    fn fresh() -> Result<Location>;

    /// Opens the store at `address` (from [`Location::address`]), possibly in another process
    /// than the one that created it, possibly after a process using it was killed.
    async fn open(address: &str) -> Result<DynStore>;
}

/// A place a store lives (a file, a key-space prefix), named by a string that can cross a
/// process boundary, plus whatever keeps it alive and cleans it up.
pub struct Location {
    address: String,
    _guard: Box<dyn Any + Send + Sync>,
}

impl Location {
    /// Binds `address` to `guard`, which is dropped (and cleans up) with the location.
    pub fn new(address: impl Into<String>, guard: impl Any + Send + Sync) -> Self {
        Self {
            address: address.into(),
            _guard: Box::new(guard),
        }
    }

    /// The address to pass to [`StoreFactory::open`].
    pub fn address(&self) -> &str {
        &self.address
    }
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Location")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

/// Expands to one `#[tokio::test(flavor = "multi_thread")]` per conformance check for the given
/// [`StoreFactory`](crate::conformance::StoreFactory) type.
#[macro_export]
macro_rules! storage_conformance_tests {
    ($factory:ty) => {
        $crate::storage_conformance_tests!(@checks $factory;
            checks::conditional_writes,
            checks::get_after_delete,
            checks::list_of_empty_prefix,
            checks::prefix_isolation,
            checks::large_values,
            checks::subscribe_observes_commits,
            checks::snapshots_at_past_revisions,
            checks::compaction_horizon,
            checks::reopen_preserves_state,
            concurrency::revisions_follow_commit_order,
            concurrency::failed_conditions_fail_alone,
            concurrency::paginated_snapshot_under_writes,
            concurrency::change_log_is_complete_and_ordered
        );

        #[::tokio::test(flavor = "multi_thread")]
        async fn durability_across_kill() -> ::std::result::Result<(), $crate::StorageError> {
            $crate::conformance::crash::parent::<$factory>(
                ::std::module_path!(),
                "durability_child",
            )
            .await
        }

        /// Runs only when `durability_across_kill` re-executes the binary; passes otherwise.
        #[::tokio::test(flavor = "multi_thread")]
        async fn durability_child() -> ::std::result::Result<(), $crate::StorageError> {
            $crate::conformance::crash::child::<$factory>().await
        }
    };
    (@checks $factory:ty; $($module:ident :: $check:ident),* $(,)?) => {
        $(
            #[::tokio::test(flavor = "multi_thread")]
            async fn $check() -> ::std::result::Result<(), $crate::StorageError> {
                $crate::conformance::$module::$check::<$factory>().await
            }
        )*
    };
}

/// Opens a fresh store; the location must outlive the store.
pub(crate) async fn fresh_store<F: StoreFactory>() -> Result<(Location, DynStore)> {
    let location = F::fresh()?;
    let store = F::open(location.address()).await?;
    Ok((location, store))
}

/// Reads the whole log after `after`, page by page.
pub(crate) async fn read_all(store: &DynStore, after: Revision) -> Result<Vec<Event>> {
    let mut events: Vec<Event> = Vec::new();
    let mut position = after;
    loop {
        let page = store.read_log(position, 64).await?;
        let Some(last) = page.last() else {
            return Ok(events);
        };
        position = last.revision;
        events.extend(page);
    }
}

/// Replays `events` up to and including revision `at`: the state a snapshot at `at` must show.
pub(crate) fn state_at(events: &[Event], prefix: &str, at: Revision) -> BTreeMap<String, KeyValue> {
    let mut state: BTreeMap<String, KeyValue> = BTreeMap::new();
    for event in events
        .iter()
        .filter(|e| e.revision <= at && e.key.starts_with(prefix))
    {
        match event.kind {
            EventKind::Deleted => {
                state.remove(&event.key);
            }
            EventKind::Added | EventKind::Modified => {
                let create_revision = match (event.kind, state.get(&event.key)) {
                    (EventKind::Modified, Some(old)) => old.create_revision,
                    _ => event.revision,
                };
                state.insert(
                    event.key.clone(),
                    KeyValue {
                        key: event.key.clone(),
                        value: event.value.clone(),
                        mod_revision: event.revision,
                        create_revision,
                        stale: false,
                    },
                );
            }
        }
    }
    state
}

/// Lists a whole prefix at one revision (`None`: current), page by page.
pub(crate) async fn list_all(
    store: &DynStore,
    prefix: &str,
    revision: Option<Revision>,
) -> Result<(Revision, Vec<KeyValue>)> {
    let first = store
        .list(
            prefix,
            ListOptions {
                revision,
                limit: Some(50),
                start_after: None,
            },
        )
        .await?;
    let at = first.revision;
    let mut more = first.more;
    let mut items = first.items;
    while more {
        let start_after = items.last().map(|kv| kv.key.clone());
        let page = store
            .list(
                prefix,
                ListOptions {
                    revision: Some(at),
                    limit: Some(50),
                    start_after,
                },
            )
            .await?;
        assert_eq!(
            page.revision, at,
            "a page of one list changed snapshot revision"
        );
        more = page.more;
        items.extend(page.items);
    }
    Ok((at, items))
}

/// Checks return this on a contract violation found through an error value.
pub(crate) fn violation(message: impl Into<String>) -> crate::StorageError {
    crate::StorageError::Backend(format!("conformance violation: {}", message.into()))
}
