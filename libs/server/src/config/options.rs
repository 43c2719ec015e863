//! [`Options`]: kube-apiserver's flags as the server takes them, with kube's defaults.

use super::*;

/// Server options, named after kube-apiserver's flags.
#[derive(Debug, Clone)]
pub struct Options {
    /// `--bind-address`.
    pub bind_address: IpAddr,
    /// `--secure-port` (0 picks a free port).
    pub secure_port: u16,
    /// `--data-dir`: database, generated certificates, admin kubeconfig.
    pub data_dir: PathBuf,
    /// `--tls-cert-file` (with `--tls-private-key-file`); generated when absent.
    pub tls_cert_file: Option<PathBuf>,
    /// `--tls-private-key-file`.
    pub tls_private_key_file: Option<PathBuf>,
    /// `--client-ca-file`; the generated CA when absent.
    pub client_ca_file: Option<PathBuf>,
    /// `--request-timeout`.
    pub request_timeout: Duration,
    /// `--min-request-timeout`.
    pub min_request_timeout: Duration,
    /// `--shutdown-delay-duration`: keep serving after SIGTERM while `/readyz` fails.
    pub shutdown_delay: Duration,
    /// `--shutdown-watch-termination-grace-period`: spread the end of watches over this period.
    pub watch_termination_grace: Duration,
    /// `--shutdown-send-retry-after`: after the delay, keep listening and answer new requests
    /// 429 with `Retry-After` until requests in flight are drained.
    pub shutdown_send_retry_after: bool,
    /// `--livez-grace-period`: unfinished post-start hooks pass `/livez` this long after start.
    pub livez_grace_period: Duration,
    /// `--goaway-chance`: fraction of HTTP/2 requests whose connection gets GOAWAY (0..=0.02).
    pub goaway_chance: f64,
    /// `--disable-request-metrics` (hidden, a benchmark aid): the metrics filter records
    /// nothing, so the per-request series stay empty; `kapi-bench --only observability`'s
    /// baseline.
    pub disable_request_metrics: bool,
    /// `-v=3` and above: a log line per answered request.
    pub http_log: bool,
    /// `--strict-transport-security-directives` and `--cors-allowed-origins`, checked.
    pub http_headers: Arc<crate::filters::http_headers::HeaderPolicy>,
    /// `--advertise-address`: this replica's address in the `kubernetes` endpoints; the bind
    /// address when absent, or the host's default-route address when binding everything.
    pub advertise_address: Option<IpAddr>,
    /// `--endpoint-reconciler-type`: `lease` (per-replica leases) or `none`.
    pub endpoint_reconciler: EndpointReconcilerType,
    /// `--endpoint-lease-duration`: how long a replica's lease keeps it in the endpoints
    /// without renewal (kube's fixed 15 s; a flag so tests need not wait that long).
    pub endpoint_lease_duration: Duration,
    /// `--http2-max-streams-per-connection`: concurrent streams per HTTP/2 connection; 0 means
    /// kube's 100.
    pub http2_max_streams_per_connection: u32,
    /// How long a connection may go without a request in progress (HTTP/1.1: waiting for a
    /// request's head): kube's idle time (90 s); a hidden flag so tests need not wait that long.
    pub connection_idle_timeout: Duration,
    /// `--storage-compaction-window`: how much change log history is kept.
    pub compaction_window: Duration,
    /// `--watch-cache-size`: events kept per resource for watch resumption.
    pub watch_cache_size: usize,
    /// `--max-requests-inflight`: concurrent read-only requests (0: unlimited).
    pub max_requests_inflight: usize,
    /// `--max-mutating-requests-inflight`: concurrent mutating requests (0: unlimited).
    pub max_mutating_requests_inflight: usize,
    /// `--enable-priority-and-fairness`: API Priority and Fairness in max-in-flight's place,
    /// sharing the sum of both in-flight limits among priority levels.
    pub enable_priority_and_fairness: bool,
    /// `--authorization-mode`, asked in order after the privileged groups.
    pub authorization_modes: Vec<AuthorizationMode>,
    /// `--anonymous-auth`: requests without credentials run as `system:anonymous`.
    pub anonymous_auth: bool,
    /// `--token-auth-file`: static bearer tokens (kube's CSV format).
    pub token_auth_file: Option<PathBuf>,
    /// `--service-account-issuer`: the first issues tokens, all are accepted.
    pub service_account_issuers: Vec<String>,
    /// `--service-account-key-file`: extra verification keys (rotation).
    pub service_account_key_files: Vec<PathBuf>,
    /// `--service-account-signing-key-file`; `<data-dir>/pki/sa.key` is generated when absent.
    pub service_account_signing_key_file: Option<PathBuf>,
    /// `--api-audiences`; the issuers when empty.
    pub api_audiences: Vec<String>,
    /// `--service-account-max-token-expiration` (zero: no bound beyond kube's 2^32 s).
    pub service_account_max_token_expiration: Duration,
    /// `--requestheader-client-ca-file`: front proxies' CA; request-header auth is off without it.
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// The other `--requestheader-*` flags.
    pub requestheader: RequestHeaderConfig,
    /// `--storage-backend`.
    pub storage_backend: crate::storage::StorageBackend,
    /// `--fdb-cluster-file`: FoundationDB's cluster file (its default location when absent).
    pub fdb_cluster_file: Option<PathBuf>,
    /// `--fdb-directory`: the FoundationDB directory (slash-separated path) of this kapi cluster,
    /// so several share one FoundationDB.
    pub fdb_directory: String,
    /// The `--etcd-*` flags (`--storage-backend=etcd3`).
    pub etcd: crate::storage::EtcdOptions,
    /// `--nats-url`: replicas wake each other through NATS; without it they poll the store.
    pub nats_url: Option<String>,
    /// `--nats-subject`: the subject this kapi cluster's replicas share.
    pub nats_subject: String,
    /// `--storage-poll-interval`: how often the store is polled for other replicas' commits
    /// (default [`crate::storage::POLL_WITHOUT_NATS`], or [`crate::storage::POLL_WITH_NATS`]).
    pub storage_poll_interval: Option<Duration>,
    /// The `--kubelet-*` flags: how pod log, exec, attach and portforward reach kubelets.
    pub kubelet: crate::kubelet::KubeletClientOptions,
    /// `--controllers` and the `--leader-elect*` flags: the in-process controllers.
    pub controllers: crate::controllers::ControllerOptions,
    /// The webhook authorizers `AuthorizationMode::Webhook(n)` names: the legacy
    /// `--authorization-webhook-*` flags' one, or those of `--authorization-config`.
    pub authorization_webhooks: Vec<crate::auth_webhooks::authorizer::WebhookSettings>,
    /// `--authentication-token-webhook-config-file` (read) and its `-version` and `-cache-ttl`.
    pub token_webhook: Option<crate::auth_webhooks::token::TokenWebhookOptions>,
    /// `--authentication-config` or the `--oidc-*` flags, read and checked: the JWT
    /// authenticators, tried after service accounts and before the token webhook.
    pub authentication: crate::oidc::AuthenticationSettings,
    /// `--service-cluster-ip-range` and `--service-node-port-range`.
    pub service_network: kapi_registry::service_alloc::ServiceNetwork,
    /// `--tls-sni-cert-key`: serving certificates chosen by the client's SNI.
    pub tls_sni_cert_keys: Vec<crate::tls_sni::SniCertKey>,
    /// `--tls-min-version` and `--tls-cipher-suites`.
    pub tls_policy: crate::tls_policy::TlsPolicy,
    /// `--encryption-provider-config`, read and validated: which resources are stored
    /// encrypted, with which providers (None: everything as plaintext); live, so that
    /// `encryption_reload` can replace it.
    pub encryption: Option<Arc<kapi_encryption::LiveConfig>>,
    /// `--encryption-provider-config-automatic-reload`: the file to watch and how often to
    /// look at it (kube's one minute).
    pub encryption_reload: Option<(PathBuf, Duration)>,
    /// `--enable-admission-plugins`, `--disable-admission-plugins` and
    /// `--admission-control-config-file`, checked.
    pub admission: crate::admission::AdmissionOptions,
    /// `--audit-policy-file` (read), the `--audit-log-*` and `--audit-webhook-*` flags; None:
    /// no auditing.
    pub audit: Option<AuditOptions>,
}

/// Auditing: the policy, and the backends events go to (a log, a webhook, or both).
#[derive(Debug, Clone)]
pub struct AuditOptions {
    /// `--audit-policy-file`, read.
    pub policy: kapi_audit::Policy,
    /// The `--audit-log-*` flags, when `--audit-log-path` is given.
    pub log: Option<kapi_audit::LogOptions>,
    /// The `--audit-webhook-*` flags, when `--audit-webhook-config-file` is given.
    pub webhook: Option<crate::audit_webhook::AuditWebhookOptions>,
}

/// `--endpoint-reconciler-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointReconcilerType {
    /// Every replica keeps a lease; the endpoints list replicas with unexpired leases.
    Lease,
    /// The `kubernetes` Service gets no endpoints from kapi.
    None,
}

impl std::str::FromStr for EndpointReconcilerType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "lease" => Ok(Self::Lease),
            "none" => Ok(Self::None),
            "master-count" => Err("endpoint reconciler \"master-count\" is not supported by kapi (use lease)".into()),
            other => Err(format!("unknown endpoint reconciler type {other:?}")),
        }
    }
}

/// The default `--service-account-issuer` (kubeadm's).
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The `--requestheader-*` flags other than the CA.
pub use kapi_auth::RequestHeaderConfig;

/// Go's duration syntax, as every duration flag takes it.
pub use kapi_apimachinery::time::parse_go_duration;

impl Default for Options {
    fn default() -> Self {
        Self {
            bind_address: IpAddr::from([127, 0, 0, 1]),
            secure_port: 6443,
            data_dir: PathBuf::from("kapi-data"),
            tls_cert_file: None,
            tls_private_key_file: None,
            client_ca_file: None,
            request_timeout: Duration::from_secs(60),
            min_request_timeout: Duration::from_secs(1800),
            shutdown_delay: Duration::ZERO,
            watch_termination_grace: Duration::ZERO,
            shutdown_send_retry_after: false,
            livez_grace_period: Duration::ZERO,
            goaway_chance: 0.0,
            disable_request_metrics: false,
            http_log: false,
            encryption_reload: None,
            tls_sni_cert_keys: Vec::new(),
            service_network: Default::default(),
            controllers: Default::default(),
            token_webhook: None,
            authentication: Default::default(),
            authorization_webhooks: Vec::new(),
            http_headers: Arc::default(),
            advertise_address: None,
            endpoint_reconciler: EndpointReconcilerType::Lease,
            endpoint_lease_duration: Duration::from_secs(15),
            http2_max_streams_per_connection: 0,
            connection_idle_timeout: Duration::from_secs(90),
            compaction_window: Duration::from_secs(300),
            watch_cache_size: 4096,
            max_requests_inflight: 400,
            max_mutating_requests_inflight: 200,
            enable_priority_and_fairness: true,
            authorization_modes: vec![AuthorizationMode::Rbac],
            anonymous_auth: true,
            token_auth_file: None,
            service_account_issuers: vec![DEFAULT_ISSUER.to_owned()],
            service_account_key_files: Vec::new(),
            service_account_signing_key_file: None,
            api_audiences: Vec::new(),
            service_account_max_token_expiration: Duration::ZERO,
            requestheader_client_ca_file: None,
            requestheader: RequestHeaderConfig::default(),
            storage_backend: crate::storage::StorageBackend::Sqlite,
            fdb_cluster_file: None,
            fdb_directory: "kapi/default".into(),
            etcd: crate::storage::EtcdOptions::default(),
            nats_url: None,
            nats_subject: "kapi.revisions".into(),
            storage_poll_interval: None,
            kubelet: crate::kubelet::KubeletClientOptions::default(),
            encryption: None,
            tls_policy: crate::tls_policy::TlsPolicy::default(),
            admission: crate::admission::AdmissionOptions::default(),
            audit: None,
        }
    }
}
