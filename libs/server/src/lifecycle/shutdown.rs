//! The termination sequence, step by step as kube's `preparedGenericAPIServer.RunWithContext`
//! (see the module docs of [`crate::lifecycle`] for the picture).

use std::time::Duration;

use super::Lifecycle;

/// The flags that shape termination.
#[derive(Debug, Clone, Copy)]
pub struct ShutdownOptions {
    /// `--shutdown-delay-duration`.
    pub delay: Duration,
    /// `--request-timeout`: bounds the wait for requests in flight and for pre-shutdown hooks.
    pub request_timeout: Duration,
    /// `--shutdown-watch-termination-grace-period`.
    pub watch_termination_grace: Duration,
}

/// Extra time given to watches past their grace period to send their last bytes.
const WATCH_END_MARGIN: Duration = Duration::from_secs(1);

/// Runs termination from the signal on; returns once requests in flight are drained. The
/// listener follows the signals (see [`crate::serve`]).
pub async fn terminate(lifecycle: &Lifecycle, opts: ShutdownOptions) {
    lifecycle.shutdown_initiated.signal();
    let delay = async {
        tokio::time::sleep(opts.delay).await;
        lifecycle.after_shutdown_delay.signal();
    };
    // Pre-shutdown hooks start at once, in parallel with the delay: they write through storage
    // while the server still fully works.
    let hooks = async {
        for hook in lifecycle.take_pre_shutdown_hooks() {
            if let Err(e) = hook.run(opts.request_timeout).await {
                tracing::error!("{e}");
            }
        }
        lifecycle.pre_shutdown_hooks_stopped.signal();
    };
    tokio::join!(delay, hooks);
    lifecycle.not_accepting_new_requests.signal();

    let requests = async {
        // Requests are bounded by the request timeout; a slow request body is not, so the wait is.
        if tokio::time::timeout(opts.request_timeout, lifecycle.requests.wait()).await.is_err() {
            tracing::warn!(in_flight = lifecycle.requests.len(), "requests still in flight after {:?}", opts.request_timeout);
        }
    };
    let watches = async {
        let bound = opts.watch_termination_grace + WATCH_END_MARGIN;
        if tokio::time::timeout(bound, lifecycle.watches.wait()).await.is_err() {
            tracing::warn!(active = lifecycle.watches.len(), "watches still open after {bound:?}");
        }
    };
    tokio::join!(requests, watches);
    lifecycle.in_flight_drained.signal();
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::lifecycle::PreShutdownHook;

    #[tokio::test(start_paused = true)]
    async fn new_requests_stop_only_after_the_delay_and_the_hooks() {
        let lifecycle = Arc::new(Lifecycle::new());
        let hook_ran = Arc::new(AtomicBool::new(false));
        let flag = hook_ran.clone();
        let seen = lifecycle.clone();
        lifecycle.add_pre_shutdown_hook(PreShutdownHook::new("stop-kubernetes-service-controller", move || {
            Box::pin(async move {
                // Runs while the server still serves: readyz already fails, requests are taken.
                assert!(seen.shutdown_initiated.is_signaled());
                assert!(!seen.not_accepting_new_requests.is_signaled());
                tokio::time::sleep(Duration::from_secs(5)).await;
                flag.store(true, Ordering::SeqCst);
                Ok(())
            })
        }));
        let request = lifecycle.requests.add().expect("accepting");
        let opts = ShutdownOptions { delay: Duration::from_secs(2), request_timeout: Duration::from_secs(60), watch_termination_grace: Duration::ZERO };
        let run = tokio::spawn({
            let lifecycle = lifecycle.clone();
            async move { terminate(&lifecycle, opts).await }
        });
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(lifecycle.after_shutdown_delay.is_signaled());
        assert!(!lifecycle.not_accepting_new_requests.is_signaled(), "the hook is still running");
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(hook_ran.load(Ordering::SeqCst));
        assert!(lifecycle.not_accepting_new_requests.is_signaled());
        assert!(lifecycle.requests.add().is_none(), "no new request once draining");
        assert!(!lifecycle.in_flight_drained.is_signaled(), "one request still runs");
        drop(request);
        run.await.unwrap();
        assert!(lifecycle.in_flight_drained.is_signaled());
    }
}
