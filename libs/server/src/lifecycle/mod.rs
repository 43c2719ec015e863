//! The life of one server, as kube-apiserver's `lifecycleSignals`: start-up gated by
//! post-start hooks, then an orderly termination.
//!
//! On SIGTERM ([`shutdown::terminate`]):
//!
//! 1. `ShutdownInitiated`: `/readyz` fails at once (the `shutdown` check), HTTP/1.1 answers
//!    carry `Connection: close` and HTTP/2 connections get GOAWAY, so clients reconnect through
//!    the load balancer; pre-shutdown hooks start (this replica leaves the `kubernetes`
//!    endpoints).
//! 2. `AfterShutdownDelayDuration`: `--shutdown-delay-duration` later. Serving goes on during
//!    the delay: load balancers need that long to notice the failing `/readyz`.
//! 3. `NotAcceptingNewRequest`: the delay is over *and* the pre-shutdown hooks are done (they
//!    write through storage, so they must finish while the server still works). The listener
//!    closes, or with `--shutdown-send-retry-after` stays open and answers new requests 429 with
//!    `Retry-After`; watches end, spread over `--shutdown-watch-termination-grace-period`, so
//!    their clients resume elsewhere from their last resourceVersion.
//! 4. `InFlightRequestsDrained`: requests in flight finished (bounded by `--request-timeout`)
//!    and watches ended; the process exits 0.

pub mod hooks;
pub mod shutdown;
pub mod signal;
pub mod wait_group;

use std::sync::Mutex;

pub use hooks::{HookError, PostStartHook, PostStartHooks, PreShutdownHook};
pub use signal::Signal;
pub use wait_group::{InFlight, RequestWaitGroup};

/// Lifecycle signals and request accounting shared by the listener, filters, health checks and
/// hooks.
#[derive(Debug)]
pub struct Lifecycle {
    /// `/readyz` passed for the first time (controllers that must only run on a ready server
    /// wait for it, as kube's wait for `/readyz`).
    pub has_been_ready: Signal,
    /// SIGTERM (or SIGINT) arrived.
    pub shutdown_initiated: Signal,
    /// `--shutdown-delay-duration` passed since [`Lifecycle::shutdown_initiated`].
    pub after_shutdown_delay: Signal,
    /// Every pre-shutdown hook returned.
    pub pre_shutdown_hooks_stopped: Signal,
    /// New requests are refused from now on.
    pub not_accepting_new_requests: Signal,
    /// Requests in flight and watches are done.
    pub in_flight_drained: Signal,
    /// Non-long-running requests in flight (kube's `NonLongRunningRequestWaitGroup`).
    pub requests: RequestWaitGroup,
    /// Watches and other long-running requests in flight (kube's `WatchRequestWaitGroup`).
    pub watches: RequestWaitGroup,
    pre_shutdown_hooks: Mutex<Vec<PreShutdownHook>>,
}

impl Lifecycle {
    /// A server that is starting.
    pub fn new() -> Self {
        Self {
            has_been_ready: Signal::new("HasBeenReady"),
            shutdown_initiated: Signal::new("ShutdownInitiated"),
            after_shutdown_delay: Signal::new("AfterShutdownDelayDuration"),
            pre_shutdown_hooks_stopped: Signal::new("PreShutdownHooksStopped"),
            not_accepting_new_requests: Signal::new("NotAcceptingNewRequest"),
            in_flight_drained: Signal::new("InFlightRequestsDrained"),
            requests: RequestWaitGroup::new(),
            watches: RequestWaitGroup::new(),
            pre_shutdown_hooks: Mutex::new(Vec::new()),
        }
    }

    /// Registers a hook that runs when termination starts (kube's `AddPreShutdownHook`).
    pub fn add_pre_shutdown_hook(&self, hook: PreShutdownHook) {
        if let Ok(mut hooks) = self.pre_shutdown_hooks.lock() {
            hooks.push(hook);
        }
    }

    fn take_pre_shutdown_hooks(&self) -> Vec<PreShutdownHook> {
        self.pre_shutdown_hooks.lock().map(|mut h| std::mem::take(&mut *h)).unwrap_or_default()
    }

    /// Whether the server is terminating (the filters' cue to tell clients to reconnect).
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown_initiated.is_signaled()
    }
}

impl Default for Lifecycle {
    fn default() -> Self {
        Self::new()
    }
}
