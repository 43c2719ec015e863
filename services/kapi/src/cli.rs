//! kapi's command line: kube-apiserver's flag names, defaults and value syntax.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

/// A Kubernetes API server in Rust. Flags follow kube-apiserver's names.
#[derive(Debug, Parser)]
#[command(name = "kapi", version, about)]
pub(crate) struct Cli {
    /// The IP address on which to listen for the --secure-port port.
    #[arg(long, default_value = "127.0.0.1")]
    pub(crate) bind_address: IpAddr,
    /// The port on which to serve HTTPS with authentication and authorization (0: pick a free port).
    #[arg(long, default_value_t = 6443)]
    pub(crate) secure_port: u16,
    /// Directory for the SQLite database, generated certificates and the admin kubeconfig.
    #[arg(long, default_value = "./kapi-data")]
    pub(crate) data_dir: PathBuf,
    /// File containing the default x509 certificate for HTTPS (generated when absent).
    #[arg(long)]
    pub(crate) tls_cert_file: Option<PathBuf>,
    /// File containing the default x509 private key matching --tls-cert-file.
    #[arg(long)]
    pub(crate) tls_private_key_file: Option<PathBuf>,
    /// CA bundle for client certificates (CN = user, O = groups); the generated CA when absent.
    #[arg(long)]
    pub(crate) client_ca_file: Option<PathBuf>,
    /// Duration a non-long-running request may take before it times out (Go duration, e.g. 1m0s).
    #[arg(long, default_value = "1m0s", value_parser = parse_go_duration)]
    pub(crate) request_timeout: Duration,
    /// Minimum duration of a watch; each watch lasts a random time in [min, 2*min].
    #[arg(long, default_value = "1800", value_parser = parse_seconds)]
    pub(crate) min_request_timeout: Duration,
    /// Time to keep serving after SIGTERM while /readyz fails, so load balancers notice.
    #[arg(long, default_value = "0s", value_parser = parse_go_duration)]
    pub(crate) shutdown_delay_duration: Duration,
    /// After the shutdown delay, watches end at random moments within this period.
    #[arg(long, default_value = "0s", value_parser = parse_go_duration)]
    pub(crate) shutdown_watch_termination_grace_period: Duration,
    /// After the shutdown delay, keep listening and answer new requests 429 with Retry-After
    /// (and Connection: close) until requests in flight have drained, instead of closing the
    /// listener.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub(crate) shutdown_send_retry_after: bool,
    /// For this long after start, unfinished post-start hooks do not fail /livez.
    #[arg(long, default_value = "0s", value_parser = parse_go_duration)]
    pub(crate) livez_grace_period: Duration,
    /// Fraction (0 to 0.02) of HTTP/2 requests whose connection gets a GOAWAY, so clients
    /// spread over replicas behind a load balancer; 0 disables it.
    #[arg(long, default_value_t = 0.0, value_parser = parse_goaway_chance)]
    pub(crate) goaway_chance: f64,
    /// Benchmark aid, not for production: requests skip the metrics filter, so
    /// `apiserver_request_*` are not recorded (`kapi-bench --only observability`'s baseline
    /// for the cost of metrics).
    #[arg(long, hide = true)]
    pub(crate) disable_request_metrics: bool,
    /// IP address of this replica in the kubernetes Service's endpoints (default: the bind
    /// address, or the default route's address when binding all addresses).
    #[arg(long)]
    pub(crate) advertise_address: Option<IpAddr>,
    /// The CIDR (or two, one a family, for dual-stack) Service cluster IPs are allocated from;
    /// the first address of the first is the kubernetes Service's.
    #[arg(long, default_value = "10.96.0.0/12")]
    pub(crate) service_cluster_ip_range: String,
    /// The ports NodePort Services are given (min-max, base+size or one port).
    #[arg(long, default_value = "30000-32767")]
    pub(crate) service_node_port_range: String,
    /// A kubeconfig naming the TokenReview webhook that decides bearer tokens no other
    /// authenticator knows.
    #[arg(long)]
    pub(crate) authentication_token_webhook_config_file: Option<PathBuf>,
    /// The TokenReview version sent to the webhook: v1 or v1beta1.
    #[arg(long, default_value = "v1beta1")]
    pub(crate) authentication_token_webhook_version: String,
    /// How long the webhook's answers are cached.
    #[arg(long, default_value = "2m", value_parser = parse_go_duration)]
    pub(crate) authentication_token_webhook_cache_ttl: Duration,
    /// File with an AuthenticationConfiguration (apiserver.config.k8s.io v1, v1beta1,
    /// v1alpha1): JWT authenticators and the anonymous authenticator. Mutually exclusive with
    /// the --oidc-* flags.
    #[arg(long)]
    pub(crate) authentication_config: Option<PathBuf>,
    /// The URL of the OpenID issuer (https only) whose JWTs are accepted.
    #[arg(long)]
    pub(crate) oidc_issuer_url: Option<String>,
    /// The client ID tokens must be issued for (their audience); required with
    /// --oidc-issuer-url.
    #[arg(long)]
    pub(crate) oidc_client_id: Option<String>,
    /// The CA that signed the issuer's serving certificate (default: the host's roots).
    #[arg(long)]
    pub(crate) oidc_ca_file: Option<PathBuf>,
    /// The claim naming the user (default sub).
    #[arg(long)]
    pub(crate) oidc_username_claim: Option<String>,
    /// Prefix of usernames; by default claims other than email are prefixed by the issuer URL
    /// and '#'; '-' for none.
    #[arg(long)]
    pub(crate) oidc_username_prefix: Option<String>,
    /// The claim holding the user's groups (a string or a list of strings).
    #[arg(long)]
    pub(crate) oidc_groups_claim: Option<String>,
    /// Prefix of groups.
    #[arg(long)]
    pub(crate) oidc_groups_prefix: Option<String>,
    /// A key=value claim the ID token must carry (repeatable).
    #[arg(long)]
    pub(crate) oidc_required_claim: Vec<String>,
    /// The JOSE algorithms tokens may be signed with (default RS256).
    #[arg(long, value_delimiter = ',')]
    pub(crate) oidc_signing_algs: Option<Vec<String>>,
    /// The tolerationSeconds DefaultTolerationSeconds gives pods for the not-ready taint.
    #[arg(long, default_value_t = 300)]
    pub(crate) default_not_ready_toleration_seconds: i64,
    /// The tolerationSeconds DefaultTolerationSeconds gives pods for the unreachable taint.
    #[arg(long, default_value_t = 300)]
    pub(crate) default_unreachable_toleration_seconds: i64,
    /// The in-process controllers to run, by kube-controller-manager's names: '*' all, 'foo'
    /// enables foo, '-foo' disables it; empty for none (a real controller manager runs them).
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub(crate) controllers: Vec<String>,
    /// Run the controllers only while holding the kube-system/kube-controller-manager Lease, so
    /// that one replica at a time acts.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub(crate) leader_elect: bool,
    /// How long a leader's Lease lasts without renewal before another replica takes over.
    #[arg(long, default_value = "15s", value_parser = parse_go_duration)]
    pub(crate) leader_elect_lease_duration: Duration,
    /// How long a leader keeps trying to renew before it stops acting.
    #[arg(long, default_value = "10s", value_parser = parse_go_duration)]
    pub(crate) leader_elect_renew_deadline: Duration,
    /// How often candidates try to acquire and leaders renew.
    #[arg(long, default_value = "2s", value_parser = parse_go_duration)]
    pub(crate) leader_elect_retry_period: Duration,
    /// How the kubernetes Service's endpoints are kept: lease (one lease per replica) or none.
    #[arg(long, default_value = "lease")]
    pub(crate) endpoint_reconciler_type: kapi_server::EndpointReconcilerType,
    /// How long a replica's lease keeps it in the kubernetes endpoints without renewal.
    #[arg(long, default_value = "15s", value_parser = parse_go_duration, hide = true)]
    pub(crate) endpoint_lease_duration: Duration,
    /// The most concurrent streams a client may open on one HTTP/2 connection (0: 100, as kube).
    #[arg(long, default_value_t = 0)]
    pub(crate) http2_max_streams_per_connection: u32,
    /// How long a connection may go without a request in progress before it is closed (kube's
    /// 90 s idle time; on HTTP/1.1 it also bounds a client sending its headers slowly).
    #[arg(long, default_value = "90s", value_parser = parse_go_duration, hide = true)]
    pub(crate) connection_idle_timeout: Duration,
    /// How long the change log is kept for watch resumption and paginated lists.
    #[arg(long, default_value = "5m0s", value_parser = parse_go_duration)]
    pub(crate) storage_compaction_window: Duration,
    /// Events kept per resource in the watch cache.
    #[arg(long, default_value_t = 4096)]
    pub(crate) watch_cache_size: usize,
    /// Concurrent non-mutating requests beyond which kapi answers 429 (0: no limit).
    #[arg(long, default_value_t = 400)]
    pub(crate) max_requests_inflight: usize,
    /// Concurrent mutating requests beyond which kapi answers 429 (0: no limit).
    #[arg(long, default_value_t = 200)]
    pub(crate) max_mutating_requests_inflight: usize,
    /// API Priority and Fairness: requests are classified by FlowSchemas and queued fairly per
    /// priority level, which share the sum of both in-flight limits (instead of the two limits).
    /// On by default, as in kube; `=false` restores the two max-in-flight limits.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub(crate) enable_priority_and_fairness: bool,
    /// Ordered list of authorization modes (comma-separated): RBAC, Node, Webhook, AlwaysAllow,
    /// AlwaysDeny (default RBAC). Members of system:masters are always allowed.
    #[arg(long, value_delimiter = ',')]
    pub(crate) authorization_mode: Option<Vec<kapi_server::AuthorizationMode>>,
    /// An AuthorizationConfiguration file: the ordered authorizers, webhooks with their
    /// timeouts, TTLs, failure policies and match conditions (instead of --authorization-mode).
    #[arg(long)]
    pub(crate) authorization_config: Option<PathBuf>,
    /// A kubeconfig naming the SubjectAccessReview webhook of --authorization-mode=Webhook.
    #[arg(long)]
    pub(crate) authorization_webhook_config_file: Option<PathBuf>,
    /// The SubjectAccessReview version sent to the webhook: v1 or v1beta1.
    #[arg(long, default_value = "v1beta1")]
    pub(crate) authorization_webhook_version: String,
    /// How long the webhook's allowed answers are cached.
    #[arg(long, default_value = "5m", value_parser = parse_go_duration)]
    pub(crate) authorization_webhook_cache_authorized_ttl: Duration,
    /// How long the webhook's other answers are cached.
    #[arg(long, default_value = "30s", value_parser = parse_go_duration)]
    pub(crate) authorization_webhook_cache_unauthorized_ttl: Duration,
    /// Requests without credentials run as system:anonymous (group system:unauthenticated);
    /// with false they are answered 401.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub(crate) anonymous_auth: bool,
    /// File of static bearer tokens: `token,user,uid,"group1,group2"` per line.
    #[arg(long)]
    pub(crate) token_auth_file: Option<PathBuf>,
    /// Identifier of the service-account token issuer (repeat or comma-separate: the first
    /// issues, all are accepted).
    #[arg(long, value_delimiter = ',', default_value = kapi_server::config::DEFAULT_ISSUER)]
    pub(crate) service_account_issuer: Vec<String>,
    /// PEM file of keys that verify service-account tokens (repeatable, for rotation).
    #[arg(long)]
    pub(crate) service_account_key_file: Vec<PathBuf>,
    /// PEM private key that signs service-account tokens (RSA or P-256); generated in the data
    /// directory when absent.
    #[arg(long)]
    pub(crate) service_account_signing_key_file: Option<PathBuf>,
    /// Audiences of the API (tokens must be meant for one of them); the issuers when empty.
    #[arg(long, value_delimiter = ',')]
    pub(crate) api_audiences: Vec<String>,
    /// Longest lifetime of a requested service-account token (Go duration; 0: no limit).
    #[arg(long, default_value = "0s", value_parser = parse_go_duration)]
    pub(crate) service_account_max_token_expiration: Duration,
    /// CA bundle of front proxies allowed to assert users in request headers.
    #[arg(long)]
    pub(crate) requestheader_client_ca_file: Option<PathBuf>,
    /// Client certificate the aggregator presents to extension API servers (they trust the
    /// identity headers it sends under it).
    #[arg(long)]
    pub(crate) proxy_client_cert_file: Option<PathBuf>,
    /// Private key of --proxy-client-cert-file.
    #[arg(long)]
    pub(crate) proxy_client_key_file: Option<PathBuf>,
    /// kapi-aggregator: where the core tier is served (built-in groups), e.g.
    /// https://kapi-core.kapi.svc:6443 behind its load balancer.
    #[arg(long)]
    pub(crate) core_url: Option<String>,
    /// kapi-aggregator: where the extensions tier is served (CRDs and custom resources).
    #[arg(long)]
    pub(crate) extensions_url: Option<String>,
    /// kapi-aggregator: the CA of the core and extensions tiers' serving certificates
    /// (default: the data directory's generated CA).
    #[arg(long)]
    pub(crate) backend_ca_file: Option<PathBuf>,
    /// Common names a front proxy's certificate may have (empty: any from its CA).
    #[arg(long, value_delimiter = ',')]
    pub(crate) requestheader_allowed_names: Vec<String>,
    /// Headers naming the user, first non-empty wins.
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-User")]
    pub(crate) requestheader_username_headers: Vec<String>,
    /// Headers carrying the user's UID.
    #[arg(long, value_delimiter = ',')]
    pub(crate) requestheader_uid_headers: Vec<String>,
    /// Headers carrying the user's groups.
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Group")]
    pub(crate) requestheader_group_headers: Vec<String>,
    /// Header prefixes carrying extra user attributes.
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Extra-")]
    pub(crate) requestheader_extra_headers_prefix: Vec<String>,
    /// Where objects live: sqlite (one file in --data-dir, shareable by replicas on one host),
    /// etcd3 (an etcd v3 cluster, --etcd-servers) or fdb (FoundationDB; needs a build with the
    /// fdb feature).
    #[arg(long, default_value = "sqlite")]
    pub(crate) storage_backend: kapi_server::storage::StorageBackend,
    /// FoundationDB cluster file (--storage-backend=fdb); FoundationDB's default when absent.
    #[arg(long)]
    pub(crate) fdb_cluster_file: Option<PathBuf>,
    /// FoundationDB directory (slash-separated path) holding this kapi cluster's keys, so
    /// several kapi clusters share one FoundationDB.
    #[arg(long, default_value = "kapi/default")]
    pub(crate) fdb_directory: String,
    /// etcd client URLs (comma-separated) for --storage-backend=etcd3; https:// with TLS.
    #[arg(long, value_delimiter = ',')]
    pub(crate) etcd_servers: Vec<String>,
    /// etcd key prefix of this cluster's objects.
    #[arg(long, default_value = "/registry")]
    pub(crate) etcd_prefix: String,
    /// CA bundle etcd's serving certificates are checked against.
    #[arg(long)]
    pub(crate) etcd_cafile: Option<PathBuf>,
    /// Client certificate presented to etcd (PEM).
    #[arg(long)]
    pub(crate) etcd_certfile: Option<PathBuf>,
    /// Key of --etcd-certfile (PEM).
    #[arg(long)]
    pub(crate) etcd_keyfile: Option<PathBuf>,
    /// How often etcd is compacted (Go duration; 0 disables): one replica per interval compacts
    /// to the revision of the interval before, as kube-apiserver's compactor.
    #[arg(long, default_value = "5m", value_parser = parse_go_duration)]
    pub(crate) etcd_compaction_interval: Duration,
    /// Period of apiserver_storage_objects (Go duration; 0 turns it off). kapi reads the counts
    /// from its watch caches at each scrape, so any non-zero value reports them.
    #[arg(long, default_value = "1m", value_parser = parse_go_duration)]
    pub(crate) etcd_count_metric_poll_period: Duration,
    /// NATS server(s) replicas use to wake each other after commits (comma-separated URLs).
    /// Without it, replicas notice each other's writes by polling the store.
    #[arg(long)]
    pub(crate) nats_url: Option<String>,
    /// NATS subject shared by the replicas of this kapi cluster.
    #[arg(long, default_value = "kapi.revisions")]
    pub(crate) nats_subject: String,
    /// How often the store is polled for commits by other replicas (Go duration); 100ms
    /// without --nats-url, 1s with it (a safety net under the NATS hints).
    #[arg(long, value_parser = parse_go_duration)]
    pub(crate) storage_poll_interval: Option<Duration>,
    /// Client certificate kapi presents to kubelets (pod log, exec, attach, portforward).
    #[arg(long)]
    pub(crate) kubelet_client_certificate: Option<PathBuf>,
    /// Key of --kubelet-client-certificate.
    #[arg(long)]
    pub(crate) kubelet_client_key: Option<PathBuf>,
    /// CA bundle kubelets' serving certificates are checked against; without it they are not
    /// verified, as in kube-apiserver.
    #[arg(long)]
    pub(crate) kubelet_certificate_authority: Option<PathBuf>,
    /// Bound on reaching a kubelet and reading the head of its answer (Go duration).
    #[arg(long, default_value = "5s", value_parser = parse_go_duration)]
    pub(crate) kubelet_timeout: Duration,
    /// Node address types tried in order to reach a node's kubelet.
    #[arg(long, value_delimiter = ',', default_value = "Hostname,InternalDNS,InternalIP,ExternalDNS,ExternalIP")]
    pub(crate) kubelet_preferred_address_types: Vec<String>,
    /// EncryptionConfiguration file: which resources are stored encrypted, and how
    /// (identity, aescbc, aesgcm, secretbox, kms v2 providers).
    #[arg(long)]
    pub(crate) encryption_provider_config: Option<PathBuf>,
    /// Read --encryption-provider-config again when it changes, without a restart.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub(crate) encryption_provider_config_automatic_reload: bool,
    /// How often the automatically reloaded encryption configuration is looked at (kube's
    /// one minute; shorter for tests).
    #[arg(long, default_value = "1m", value_parser = parse_go_duration, hide = true)]
    pub(crate) encryption_provider_config_automatic_reload_interval: Duration,
    /// Admission plugins to run besides kube-apiserver's default set (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub(crate) enable_admission_plugins: Vec<String>,
    /// Admission plugins of the default set not to run (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub(crate) disable_admission_plugins: Vec<String>,
    /// AdmissionConfiguration file (apiserver.config.k8s.io/v1): each plugin's configuration.
    #[arg(long)]
    pub(crate) admission_control_config_file: Option<PathBuf>,
    /// Strict-Transport-Security directives (comma-separated: max-age=<s>, includeSubDomains,
    /// preload).
    #[arg(long, value_delimiter = ',')]
    pub(crate) strict_transport_security_directives: Vec<String>,
    /// Origins (regular expressions, comma-separated) browsers may call the API from (CORS).
    #[arg(long, value_delimiter = ',')]
    pub(crate) cors_allowed_origins: Vec<String>,
    /// Minimum TLS version served: VersionTLS12 (or lower, served as 1.2) or VersionTLS13.
    #[arg(long)]
    pub(crate) tls_min_version: Option<String>,
    /// TLS 1.2 cipher suites served, by Go name (comma-separated); TLS 1.3's are always on.
    #[arg(long, value_delimiter = ',')]
    pub(crate) tls_cipher_suites: Vec<String>,
    /// A certificate and key served to clients asking for certain names (SNI):
    /// `cert,key` (the certificate's own names) or `cert,key:*.example.com,example.com`;
    /// repeatable.
    #[arg(long)]
    pub(crate) tls_sni_cert_key: Vec<kapi_server::tls_sni::SniCertKey>,
    /// audit.k8s.io/v1 Policy file: which requests are audited, at which level. Without it,
    /// nothing is audited.
    #[arg(long)]
    pub(crate) audit_policy_file: Option<PathBuf>,
    /// File with apiserver tracing configuration (kube's TracingConfiguration: OTLP gRPC
    /// `endpoint`, `samplingRatePerMillion`). Without it, nothing is traced.
    #[arg(long)]
    pub(crate) tracing_config_file: Option<PathBuf>,
    /// Where audit events go, one JSON line each (`-` for stdout). Without it, nothing is
    /// audited.
    #[arg(long)]
    pub(crate) audit_log_path: Option<PathBuf>,
    /// Days old audit log files are kept (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub(crate) audit_log_maxage: u64,
    /// Old audit log files kept (0: all).
    #[arg(long, default_value_t = 0)]
    pub(crate) audit_log_maxbackup: usize,
    /// Megabytes an audit log file grows to before it is rotated (0: never).
    #[arg(long, default_value_t = 0)]
    pub(crate) audit_log_maxsize: u64,
    /// blocking (each event written before its request goes on), blocking-strict (and a
    /// failed write fails the request) or batch.
    #[arg(long, default_value = "blocking")]
    pub(crate) audit_log_mode: String,
    /// Audit log line format; kapi writes kube's `json`.
    #[arg(long, default_value = "json")]
    pub(crate) audit_log_format: String,
    /// A kubeconfig naming the webhook audit events are POSTed to (as audit.k8s.io/v1
    /// EventLists).
    #[arg(long)]
    pub(crate) audit_webhook_config_file: Option<PathBuf>,
    /// batch (events buffered and sent in batches), blocking or blocking-strict.
    #[arg(long, default_value = "batch")]
    pub(crate) audit_webhook_mode: String,
    /// Events buffered before new ones are dropped (batch mode).
    #[arg(long, default_value_t = 10000)]
    pub(crate) audit_webhook_batch_buffer_size: usize,
    /// The most events in one batch.
    #[arg(long, default_value_t = 400)]
    pub(crate) audit_webhook_batch_max_size: usize,
    /// How long a batch waits for more events before it is sent.
    #[arg(long, default_value = "30s", value_parser = parse_go_duration)]
    pub(crate) audit_webhook_batch_max_wait: Duration,
    /// Throttle the batches sent.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub(crate) audit_webhook_batch_throttle_enable: bool,
    /// Batches sent per second at most, when throttled.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) audit_webhook_batch_throttle_qps: f64,
    /// Batches sent at once before the throttle applies.
    #[arg(long, default_value_t = 15)]
    pub(crate) audit_webhook_batch_throttle_burst: u32,
    /// The first wait before a failed batch is sent again.
    #[arg(long, default_value = "10s", value_parser = parse_go_duration)]
    pub(crate) audit_webhook_initial_backoff: Duration,
    /// The API version of the events sent; kapi sends audit.k8s.io/v1.
    #[arg(long, default_value = "audit.k8s.io/v1")]
    pub(crate) audit_webhook_version: String,
    /// Log filter (tracing env-filter syntax), e.g. info or kapi_server=debug; overrides -v.
    #[arg(long)]
    pub(crate) log_level: Option<String>,
    /// Log verbosity as kube's klog: 0-2 the usual lines, 3 also one line per HTTP request,
    /// 4-5 debug detail, 6 and up everything.
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    pub(crate) v: u8,
    /// Log line format: text, or json in kube's JSON log shape.
    #[arg(long, default_value = "text")]
    pub(crate) logging_format: String,
}

pub(crate) fn parse_seconds(s: &str) -> Result<Duration, String> {
    s.parse::<u64>().map(Duration::from_secs).map_err(|_| format!("invalid number of seconds {s:?}"))
}

/// Parses Go's `time.ParseDuration` syntax (`1h2m3.5s`, `500ms`, `0`), as kube-apiserver flags use.
pub(crate) fn parse_go_duration(s: &str) -> Result<Duration, String> {
    match kapi_server::config::parse_go_duration(s) {
        Ok(Some(d)) => Ok(d),
        Ok(None) => Err(format!("{s:?} must not be negative")),
        Err(e) => Err(e.to_string()),
    }
}

/// `--goaway-chance`, validated as kube-apiserver validates it.
pub(crate) fn parse_goaway_chance(s: &str) -> Result<f64, String> {
    let chance: f64 = s.parse().map_err(|_| format!("invalid number {s:?}"))?;
    if !(0.0..=kapi_server::filters::goaway::MAX_GOAWAY_CHANCE).contains(&chance) {
        return Err("--goaway-chance can not be less than 0 or greater than 0.02".into());
    }
    Ok(chance)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("1m0s").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_go_duration("1h2m3s").unwrap(), Duration::from_secs(3723));
        assert_eq!(parse_go_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_go_duration("10").is_err());
        assert!(parse_go_duration("abc").is_err());
        assert!(parse_go_duration("-1s").is_err());
    }

    #[test]
    fn goaway_chance_is_bounded_as_kube_bounds_it() {
        assert_eq!(parse_goaway_chance("0.001"), Ok(0.001));
        assert!(parse_goaway_chance("0.5").is_err());
        assert!(parse_goaway_chance("-0.1").is_err());
    }
}
