//! The shared state of one API server: storage, filters' dependencies, options, lifecycle.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kapi_auth::{Authenticator, Authorizer};
use kapi_registry::rest::RestStore;
use tokio::sync::watch;

use crate::metrics::Metrics;

/// Serving options that handlers read (kube-apiserver's flag names in comments).
#[derive(Debug, Clone)]
pub struct ServingOptions {
    /// `--request-timeout`: bound of non-long-running requests.
    pub request_timeout: Duration,
    /// `--min-request-timeout`: watches last a random time in [min, 2*min] unless the client
    /// sets `timeoutSeconds`.
    pub min_request_timeout: Duration,
    /// Largest accepted request body (kube: 3 MiB).
    pub max_body_bytes: usize,
    /// `host:port` clients reach this server at (discovery's serverAddressByClientCIDRs).
    pub external_address: String,
    /// How often a watch with `allowWatchBookmarks` receives a bookmark.
    pub bookmark_interval: Duration,
    /// `--shutdown-watch-termination-grace-period`: watches end spread over this period once
    /// draining starts (zero: all at once).
    pub watch_termination_grace: Duration,
}

impl Default for ServingOptions {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(60),
            min_request_timeout: Duration::from_secs(1800),
            max_body_bytes: 3 * 1024 * 1024,
            external_address: "127.0.0.1:6443".into(),
            bookmark_interval: Duration::from_secs(60),
            watch_termination_grace: Duration::ZERO,
        }
    }
}

/// Lifecycle signals shared with health checks and long-running requests.
#[derive(Debug)]
pub struct Lifecycle {
    ready: AtomicBool,
    shutting_down: watch::Sender<bool>,
    draining: watch::Sender<bool>,
}

impl Lifecycle {
    /// A server that is not ready yet and not shutting down.
    pub fn new() -> Self {
        Self { ready: AtomicBool::new(false), shutting_down: watch::channel(false).0, draining: watch::channel(false).0 }
    }

    /// Post-start hooks finished: `/readyz` may pass.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::SeqCst);
    }

    /// Whether post-start hooks have finished.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// Starts shutdown (SIGTERM): `/readyz` fails so load balancers stop sending new work, and
    /// HTTP/1.1 answers carry `Connection: close`; serving goes on for the shutdown delay.
    pub fn begin_shutdown(&self) {
        self.shutting_down.send_replace(true);
    }

    /// The shutdown delay is over: the listener closes, in-flight requests drain and watches
    /// end, so their clients resume from their last resourceVersion on another replica.
    pub fn begin_drain(&self) {
        self.shutting_down.send_replace(true);
        self.draining.send_replace(true);
    }

    /// A receiver that flips to `true` when draining starts (watches end then).
    pub fn drain_signal(&self) -> watch::Receiver<bool> {
        self.draining.subscribe()
    }

    /// Whether shutdown has started.
    pub fn is_shutting_down(&self) -> bool {
        *self.shutting_down.borrow()
    }
}

impl Default for Lifecycle {
    fn default() -> Self {
        Self::new()
    }
}

/// One `--authorization-mode` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// `AlwaysAllow`.
    AlwaysAllow,
    /// `AlwaysDeny`.
    AlwaysDeny,
    /// `RBAC`.
    Rbac,
}

impl std::str::FromStr for AuthorizationMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "AlwaysAllow" => Ok(Self::AlwaysAllow),
            "AlwaysDeny" => Ok(Self::AlwaysDeny),
            "RBAC" => Ok(Self::Rbac),
            "Node" | "ABAC" | "Webhook" => Err(format!("authorization mode {s:?} is not supported by kapi")),
            other => Err(format!("unknown authorization mode {other:?}")),
        }
    }
}

/// Everything a request needs, shared by all connections.
pub struct ApiServer {
    /// The generic REST store over storage and watch caches.
    pub rest: RestStore,
    /// Metrics registry.
    pub metrics: Metrics,
    /// Who is calling.
    pub authenticator: Arc<dyn Authenticator>,
    /// May they: privileged groups, then `--authorization-mode` in order.
    pub authorizer: Arc<dyn Authorizer>,
    /// `--authorization-mode`, for SelfSubjectRulesReview.
    pub authorization_modes: Vec<AuthorizationMode>,
    /// The RBAC authorizer when RBAC is a mode (escalation checks and rule listing read it).
    pub rbac: Option<kapi_auth::rbac::RbacAuthorizer>,
    /// Service-account token issuing and review.
    pub service_accounts: Arc<crate::service_accounts::ServiceAccounts>,
    /// Serving options.
    pub options: ServingOptions,
    /// Readiness and shutdown.
    pub lifecycle: Lifecycle,
    /// OpenAPI documents and the schemas behind field validation.
    pub openapi: Arc<kapi_openapi::OpenApi>,
    /// `--max-requests-inflight` / `--max-mutating-requests-inflight` budgets.
    pub in_flight: crate::filters::max_in_flight::InFlightLimits,
    /// NATS wake-ups across replicas (`--nats-url`); None follows other replicas' commits by
    /// polling the store.
    pub fanout: Option<kapi_watch::NatsFanout>,
}
