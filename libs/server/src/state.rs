//! The shared state of one API server: storage, filters' dependencies, options, lifecycle.

use std::sync::Arc;
use std::time::Duration;

use kapi_auth::{Authenticator, Authorizer};
use kapi_registry::rest::RestStore;

use crate::health;
use crate::lifecycle::Lifecycle;
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
    /// `--shutdown-send-retry-after`: once draining, new requests get 429 + `Retry-After`.
    pub shutdown_send_retry_after: bool,
    /// `--goaway-chance`: fraction of HTTP/2 answers that close their connection.
    pub goaway_chance: f64,
    /// Whether the metrics filter records requests (off only with the hidden
    /// `--disable-request-metrics`, the benchmark's baseline).
    pub request_metrics: bool,
    /// `-v=3` and above: a log line per answered request (kube's httplog).
    pub http_log: bool,
    /// `--strict-transport-security-directives` and `--cors-allowed-origins`.
    pub http_headers: Arc<crate::filters::http_headers::HeaderPolicy>,
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
            shutdown_send_retry_after: false,
            goaway_chance: 0.0,
            request_metrics: true,
            http_log: false,
            http_headers: Arc::default(),
        }
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
    /// `Node`: kubelets' access to the objects of their pods (kapi_auth::node).
    Node,
    /// `Webhook`: the SubjectAccessReview webhook of index `n` in the server's webhook
    /// authorizers (the legacy flags' one, or an AuthorizationConfiguration entry).
    Webhook(usize),
}

impl std::str::FromStr for AuthorizationMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "AlwaysAllow" => Ok(Self::AlwaysAllow),
            "AlwaysDeny" => Ok(Self::AlwaysDeny),
            "RBAC" => Ok(Self::Rbac),
            "Node" => Ok(Self::Node),
            "Webhook" => Ok(Self::Webhook(0)),
            "ABAC" => Err(format!("authorization mode {s:?} is not supported by kapi")),
            other => Err(format!("unknown authorization mode {other:?}")),
        }
    }
}

/// Everything a request needs, shared by all connections.
pub struct ApiServer {
    /// The generic REST store over storage and watch caches.
    pub rest: RestStore,
    /// The tiers that serve resources: core, then extensions, then 404.
    pub chain: crate::tier::Chain,
    /// The admission chain every write runs.
    pub admission: Arc<kapi_admission::Chain>,
    /// Auditing, when `--audit-policy-file` and `--audit-log-path` are given.
    pub audit: Option<Arc<crate::filters::audit::Auditor>>,
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
    pub lifecycle: Arc<Lifecycle>,
    /// `/healthz`, `/livez`, `/readyz` checks.
    pub health: Arc<health::Registry>,
    /// OpenAPI documents and the schemas behind field validation.
    pub openapi: Arc<kapi_openapi::OpenApi>,
    /// `--max-requests-inflight` / `--max-mutating-requests-inflight` budgets.
    pub in_flight: crate::filters::max_in_flight::InFlightLimits,
    /// API Priority and Fairness, in max-in-flight's place (`--enable-priority-and-fairness`).
    pub flow_control: Option<Arc<crate::flow_control::FlowControl>>,
    /// The client of nodes' kubelets (pod log, exec, attach, portforward).
    pub kubelet: Arc<crate::kubelet::KubeletClient>,
    /// NATS wake-ups across replicas (`--nats-url`); None follows other replicas' commits by
    /// polling the store.
    pub fanout: Option<kapi_watch::NatsFanout>,
}
