//! The backend-neutral conformance suite, run against the SQLite backend.

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use kapi_storage::conformance::{Location, StoreFactory};
use kapi_storage::sqlite::{SqliteConfig, SqliteStore};
use kapi_storage::{DynStore, Result, StorageError};

/// Opens SQLite stores in temporary directories with the production configuration, except a
/// faster poll so that foreign commits are noticed quickly.
struct SqliteFactory;

#[async_trait]
impl StoreFactory for SqliteFactory {
    fn fresh() -> Result<Location> {
        let dir = tempfile::tempdir().map_err(|e| StorageError::Backend(e.to_string()))?;
        let path = dir.path().join("kapi.db");
        let address = path
            .to_str()
            .ok_or_else(|| StorageError::Backend("non UTF-8 temp path".into()))?;
        Ok(Location::new(address, dir))
    }

    async fn open(address: &str) -> Result<DynStore> {
        let config = SqliteConfig {
            poll_interval: Duration::from_millis(20),
            ..SqliteConfig::default()
        };
        let store: DynStore = SqliteStore::open(Path::new(address), config)?;
        Ok(store)
    }
}

kapi_storage::storage_conformance_tests!(SqliteFactory);
