//! The FoundationDB client network thread: one per process, started on first use.
//!
//! libfdb_c allows selecting the API version and running the network exactly once per process,
//! and every `Database` of the process shares that thread. So the first [`super::FdbStore::open`]
//! starts it and keeps its guard in a static; later opens reuse it. The foundationdb crate panics
//! if something else in the process already selected an API version: let kapi-storage own it.

use std::sync::Mutex;

use foundationdb::api::{FdbApiBuilder, NetworkAutoStop};

use crate::{Result, StorageError};

enum Network {
    NotStarted,
    /// The guard stays in this static until [`stop`]: statics are never dropped, which is the
    /// deliberate leak that keeps the thread alive for every `Database` and in-flight future
    /// of the process, however the process ends.
    Running(NetworkAutoStop),
    /// Starting failed (wrong libfdb_c, API version refused); the reason is kept because the
    /// API version cannot be selected a second time.
    Failed(String),
    Stopped,
}

static NETWORK: Mutex<Network> = Mutex::new(Network::NotStarted);

/// Starts the network thread if this process has not yet.
pub(super) fn ensure_running() -> Result<()> {
    let mut state = NETWORK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    match &*state {
        Network::Running(_) => Ok(()),
        Network::Failed(why) => Err(StorageError::Backend(why.clone())),
        Network::Stopped => Err(StorageError::Backend(
            "foundationdb: the client network was stopped; it cannot restart in this process"
                .into(),
        )),
        Network::NotStarted => match boot() {
            Ok(guard) => {
                *state = Network::Running(guard);
                Ok(())
            }
            Err(why) => {
                *state = Network::Failed(why.clone());
                Err(StorageError::Backend(why))
            }
        },
    }
}

/// Selects API version 730 (the `fdb-7_3` feature's header version, the crate's default) and
/// starts the network thread.
#[allow(unsafe_code)]
fn boot() -> std::result::Result<NetworkAutoStop, String> {
    let builder = FdbApiBuilder::default().build().map_err(|e| {
        format!(
            "foundationdb: cannot select API version {} (is libfdb_c 7.3 or newer installed?): {e}",
            FdbApiBuilder::default().runtime_version()
        )
    })?;
    // SAFETY: `boot` is unsafe only because the returned guard must be dropped (stopping the
    // network) before the process exits. The guard goes into the `NETWORK` static, where it is
    // dropped by `stop_network` at the end of an orderly shutdown; a process that exits without
    // calling it ends the network thread with the process, as the Go bindings always do, and
    // loses nothing: a write is acknowledged only after FoundationDB made it durable.
    let guard = unsafe { builder.boot() }
        .map_err(|e| format!("foundationdb: cannot start the client network: {e}"))?;
    Ok(guard)
}

/// Stops the FoundationDB client network of this process, for an orderly exit.
///
/// Call it last in `main`, after every [`super::FdbStore`] is dropped: FoundationDB cannot restart
/// the network, so later opens fail, and operations still in flight never complete. Exiting
/// without calling it is allowed (see the module docs); calling it twice is a no-op.
pub fn stop_network() {
    let guard = {
        let mut state = NETWORK
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match std::mem::replace(&mut *state, Network::Stopped) {
            Network::Running(guard) => Some(guard),
            other => {
                *state = other;
                None
            }
        }
    };
    // Dropping stops the run loop and joins the thread, outside the lock.
    drop(guard);
}
