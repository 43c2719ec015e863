//! Where big answers are encoded: a runtime of its own beside the request workers, so that the
//! CPU a LIST of megabytes takes to encode does not sit in the workers' run queues ahead of
//! every small request (a GET queued behind tens of LIST streams, each encoding its next chunk,
//! waits for all of them). The workers keep what every answer needs (TLS, writing to the
//! socket); the encoding runs here, on fewer threads than the machine has cores, so requests
//! always have a core's worth of CPU the bulk work cannot take.

use std::sync::OnceLock;

use tokio::runtime::{Handle, Runtime};

static BULK: OnceLock<Option<Runtime>> = OnceLock::new();

/// The bulk threads' nice value: under contention a request worker gets about ten times their CPU.
const BULK_NICE: i32 = 10;

/// The bulk runtime: one thread less than the machine's cores, at least one. None when it
/// cannot be built (no threads left): then callers encode on the workers as before.
pub fn handle() -> Option<Handle> {
    BULK.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cores.saturating_sub(1).max(1))
            .thread_name("kapi-bulk")
            // Behind the request workers when both want a core (the calling thread's nice value).
            .on_thread_start(|| {
                let _ = rustix::process::setpriority_process(None, BULK_NICE);
            })
            .build()
            .map_err(|e| tracing::warn!("no bulk encoding runtime, encoding on the request workers: {e}"))
            .ok()
    })
    .as_ref()
    .map(|rt| rt.handle().clone())
}
