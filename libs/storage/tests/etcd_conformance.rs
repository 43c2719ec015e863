//! The backend-neutral conformance suite, run against the etcd backend.
//!
//! Every check gets its own single-member etcd (a real `etcd` process on free loopback ports,
//! see `kapi_storage::etcd::testing`): etcd compacts its whole key space at once, so checks that
//! compact must not share a server with checks reading old revisions. The store's in-memory
//! change-log window is kept small, so the checks read etcd's history as well as the window.

#![cfg(feature = "etcd")]

use std::time::Duration;

use async_trait::async_trait;
use kapi_storage::conformance::{Location, StoreFactory};
use kapi_storage::etcd::testing::EtcdCluster;
use kapi_storage::etcd::{EtcdConfig, EtcdStore};
use kapi_storage::{DynStore, Result};

struct EtcdFactory;

#[async_trait]
impl StoreFactory for EtcdFactory {
    fn fresh() -> Result<Location> {
        let etcd = EtcdCluster::single()?;
        let address = etcd.endpoints().join(",");
        Ok(Location::new(address, etcd))
    }

    async fn open(address: &str) -> Result<DynStore> {
        let config = EtcdConfig {
            endpoints: address.split(',').map(str::to_owned).collect(),
            prefix: "/kapi-conformance".into(),
            store_root: String::new(),
            request_timeout: Duration::from_secs(20),
            compaction_interval: Duration::ZERO,
            window_events: 16,
            ..EtcdConfig::default()
        };
        let store: DynStore = EtcdStore::open(config).await?;
        Ok(store)
    }
}

kapi_storage::storage_conformance_tests!(EtcdFactory);
