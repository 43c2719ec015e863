//! Commit notifications for commits of other processes: a FoundationDB watch on `meta/last`,
//! which every write sets, re-armed after each change. The watch is the fast path; a poll every
//! `poll_interval` covers watches that fire late or not at all (FoundationDB may coalesce or drop
//! them, and a transaction timeout cancels them).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::layout::META_LAST;
use super::revision::Stamp;
use super::{from_binding, Inner};

/// Pause after a failed read before trying again.
const ERROR_BACKOFF: Duration = Duration::from_secs(1);

/// Publishes foreign commits until `stop` is dropped.
pub(super) fn spawn(inner: Arc<Inner>, poll_interval: Duration, mut stop: watch::Receiver<()>) {
    tokio::spawn(async move {
        let last_key = inner.layout.meta(META_LAST);
        loop {
            let last_key = last_key.as_slice();
            let armed = inner
                .db
                .run(|trx, _| async move {
                    let last = trx.get(last_key, false).await?;
                    // Registered when this (read-only) transaction commits; outlives it.
                    let changed = trx.watch(last_key);
                    Ok((last, changed))
                })
                .await;
            let wait: Pin<Box<dyn Future<Output = ()> + Send>> = match armed {
                Ok((last, changed)) => {
                    if let Some(stamp) = last.as_deref().and_then(Stamp::from_slice) {
                        match inner.revs.revision(stamp) {
                            Ok(revision) => inner.observe(revision),
                            Err(e) => tracing::warn!(error = %e, "foundationdb: bad last revision"),
                        }
                    }
                    Box::pin(async move {
                        // A failed watch (timed out, too many watches) re-arms after a pause.
                        if changed.await.is_err() {
                            tokio::time::sleep(ERROR_BACKOFF).await;
                        }
                    })
                }
                Err(e) => {
                    let e = from_binding(e);
                    tracing::warn!(error = %e, "foundationdb: cannot watch for commits");
                    Box::pin(tokio::time::sleep(ERROR_BACKOFF))
                }
            };
            let poll = async {
                if poll_interval.is_zero() {
                    std::future::pending::<()>().await;
                } else {
                    tokio::time::sleep(poll_interval).await;
                }
            };
            tokio::select! {
                _ = stop.changed() => return,
                () = wait => {}
                () = poll => {}
            }
        }
    });
}
