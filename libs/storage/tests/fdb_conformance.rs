//! The backend-neutral conformance suite, run against the FoundationDB backend.
//!
//! Needs a running FoundationDB cluster: `FDB_CLUSTER_FILE=/path/to/fdb.cluster cargo test -p
//! kapi-storage --features fdb --test fdb_conformance`. Every check works in its own directory
//! `kapi-conformance/<unique id>`, removed when the check ends, so runs may share a cluster.
//!
//! Without `FDB_CLUSTER_FILE` every check fails at once, naming the variable: this binary only
//! exists in builds with `--features fdb` (which already need libfdb_c), and a suite that passed
//! without a cluster would claim coverage it does not have.

#![cfg(feature = "fdb")]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use kapi_storage::conformance::{Location, StoreFactory};
use kapi_storage::fdb::{FdbConfig, FdbStore};
use kapi_storage::{DynStore, Result, StorageError};

const CLUSTER_FILE_ENV: &str = "FDB_CLUSTER_FILE";
const ROOT: &str = "kapi-conformance";

/// The production configuration on the cluster named by `FDB_CLUSTER_FILE`, except a faster
/// fallback poll; `address` is the directory path, `/`-separated.
fn config(address: &str) -> Result<FdbConfig> {
    let cluster_file = std::env::var_os(CLUSTER_FILE_ENV).ok_or_else(|| {
        StorageError::Backend(format!(
            "{CLUSTER_FILE_ENV} is not set: the FoundationDB conformance suite needs a cluster \
             (see docs/foundationdb.md)"
        ))
    })?;
    Ok(FdbConfig {
        cluster_file: Some(PathBuf::from(cluster_file)),
        directory: address.split('/').map(str::to_owned).collect(),
        poll_interval: Duration::from_millis(50),
        ..FdbConfig::default()
    })
}

/// Removes a check's directory when its location is dropped.
struct RemoveOnDrop(FdbConfig);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let config = self.0.clone();
        // Drop runs inside the test's runtime, which must not block: use a runtime of our own
        // on a thread of our own.
        let removal = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| StorageError::Backend(e.to_string()))?;
            runtime.block_on(FdbStore::remove(&config))
        });
        match removal.join() {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => eprintln!("cannot remove the conformance directory: {e}"),
            Err(_) => eprintln!("removing the conformance directory panicked"),
        }
    }
}

struct FdbFactory;

#[async_trait]
impl StoreFactory for FdbFactory {
    fn fresh() -> Result<Location> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let address = format!(
            "{ROOT}/{}-{nanos}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let guard = RemoveOnDrop(config(&address)?);
        Ok(Location::new(address, guard))
    }

    async fn open(address: &str) -> Result<DynStore> {
        let store: DynStore = FdbStore::open(config(address)?).await?;
        Ok(store)
    }
}

kapi_storage::storage_conformance_tests!(FdbFactory);
