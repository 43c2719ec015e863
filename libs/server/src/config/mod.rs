//! Options -> a running server: the one place that wires storage, caches, TLS and filters.
//!
//! Config flows one way, as in kube-apiserver: flags become [`Options`], [`run`] validates and
//! completes them (certificates, database), builds the server, serves until a signal.

mod auth;
use auth::{authenticator, authorizer};
mod options;
pub mod tracing_config;

pub use options::*;

use crate::tier::{Chain, Tier, TierBuilder, TierContext};
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kapi_auth::rbac::RbacAuthorizer;
use kapi_auth::serviceaccount::{
    generate_signing_key_pem, load_verification_keys, OpenIdMetadata, ServiceAccountTokenAuthenticator, SigningKey, TokenIssuer,
    VerificationKey,
};
use kapi_auth::token::AudienceAgnostic;
use kapi_auth::{BearerTokenAuthenticator, RequestHeaderAuthenticator, TokenAuthenticator, TokenFileAuthenticator, TokenUnion};
use kapi_auth::{
    AlwaysAllow, AlwaysDeny, AnonymousFallback, Authenticator, Authorizer, PrivilegedGroups, UnionAuthenticator, UnionAuthorizer,
    X509Authenticator,
};
use kapi_registry::catalog::{self, Serving};
use kapi_registry::rest::RestStore;
use kapi_watch::{CacheConfig, CacheSet, NatsConfig, NatsFanout};

use crate::endpoints::EndpointController;
use crate::health::checks::{Informers, StoreSlot};
use crate::lifecycle::shutdown::ShutdownOptions;
use crate::lifecycle::{Lifecycle, PostStartHooks, PreShutdownHook};
use crate::metrics::Metrics;
use crate::post_start::PostStart;
use crate::serve::{ChainSlot, ServeConfig};
use crate::service_accounts::{CachedObjects, ServiceAccounts};
pub use crate::state::AuthorizationMode;
use crate::state::{ApiServer, ServingOptions};
use crate::{health, pki, serve, tls};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Data directory or certificate files.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The IO error.
        source: std::io::Error,
    },
    /// Certificates could not be made or loaded.
    #[error("certificates: {0}")]
    Pki(#[from] pki::PkiError),
    /// TLS configuration.
    #[error("TLS: {0}")]
    Tls(#[from] tls::TlsError),
    /// Storage could not be opened.
    #[error("storage: {0}")]
    Storage(#[from] kapi_storage::StorageError),
    /// Watch caches could not be loaded.
    #[error("watch cache: {0}")]
    Watch(#[from] kapi_watch::WatchError),
    /// The RBAC index could not be loaded.
    #[error("RBAC: {0}")]
    Rbac(#[from] crate::rbac_sync::SyncError),
    /// A post-start hook kept failing (fatal, as in kube).
    #[error("{0}")]
    PostStartHook(#[from] crate::lifecycle::HookError),
    /// Flags that contradict each other or name something missing.
    #[error("{0}")]
    Config(String),
}

/// Every storage prefix the watch caches follow.
fn cached_prefixes() -> Vec<String> {
    let mut prefixes: Vec<String> =
        catalog::resources().iter().filter(|r| matches!(r.serving, Serving::Stored)).map(|r| r.key_prefix()).collect();
    prefixes.sort();
    prefixes.dedup();
    prefixes
}

/// What start-up prepares from disk before the listener starts: certificates and TLS.
struct Prepared {
    pki: pki::Pki,
    tls_config: Arc<rustls::ServerConfig>,
    client_chains: serve::ChainVerifiers,
    tls_source: Option<Arc<dyn serve::TlsSource>>,
    credentials: Credentials,
}

/// Key and token material read at start.
struct Credentials {
    signing_key: SigningKey,
    verification_keys: Vec<VerificationKey>,
    token_file: Option<TokenFileAuthenticator>,
    /// The kubelet client, with its `--kubelet-*` certificates.
    kubelet: crate::kubelet::KubeletClient,
}

fn config_error(what: &str, e: impl std::fmt::Display) -> StartError {
    StartError::Config(format!("{what}: {e}"))
}

/// Loads (or, in the embedded default, generates) the service-account keys and the token file.
fn load_credentials(opts: &Options) -> Result<Credentials, StartError> {
    let signing_path = match &opts.service_account_signing_key_file {
        Some(p) => p.clone(),
        None => {
            let path = opts.data_dir.join("pki").join("sa.key");
            if !path.exists() {
                let pem = generate_signing_key_pem().map_err(|e| config_error("generating the service-account key", e))?;
                pki::create_private_if_absent(&path, pem.as_bytes())?;
            }
            path
        }
    };
    let signing_key = SigningKey::load(&signing_path).map_err(|e| config_error("--service-account-signing-key-file", e))?;
    let mut verification_keys = vec![signing_key.verification_key().clone()];
    for path in &opts.service_account_key_files {
        for key in load_verification_keys(path).map_err(|e| config_error("--service-account-key-file", e))? {
            if !verification_keys.iter().any(|k| k.kid() == key.kid()) {
                verification_keys.push(key);
            }
        }
    }
    let token_file = match &opts.token_auth_file {
        Some(p) => Some(TokenFileAuthenticator::load(p).map_err(|e| config_error("--token-auth-file", e))?),
        None => None,
    };
    if let Some(tf) = &token_file {
        for w in tf.warnings() {
            tracing::warn!("--token-auth-file: {w}");
        }
    }
    let kubelet = crate::kubelet::KubeletClient::new(&opts.kubelet).map_err(|e| StartError::Config(e.to_string()))?;
    Ok(Credentials { signing_key, verification_keys, token_file, kubelet })
}

/// The blocking part of start-up before serving (file IO, key generation), run off the async
/// workers.
fn prepare(opts: &Options) -> Result<Prepared, StartError> {
    std::fs::create_dir_all(&opts.data_dir)
        .map_err(|source| StartError::Io { context: format!("creating {}", opts.data_dir.display()), source })?;
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    if !opts.bind_address.is_unspecified() {
        hosts.push(opts.bind_address.to_string());
    }
    let pki = pki::ensure_pki(&opts.data_dir, &hosts)?;
    let files = crate::tls_files::TlsFiles {
        serving: opts.tls_cert_file.clone().zip(opts.tls_private_key_file.clone()),
        client_ca: opts.client_ca_file.clone(),
        front_proxy_ca: opts.requestheader_client_ca_file.clone(),
        generated: (pki.serving_cert_pem.clone(), pki.serving_key_pem.clone(), pki.ca_cert_pem.clone()),
        policy: opts.tls_policy.clone(),
        sni: opts.tls_sni_cert_keys.clone(),
    };
    let (tls_config, client_chains) = files.material().map_err(StartError::Config)?;
    let tls_source: Option<Arc<dyn serve::TlsSource>> = files.watched().then(|| Arc::new(files) as Arc<dyn serve::TlsSource>);
    let credentials = load_credentials(opts)?;
    Ok(Prepared { pki, tls_config, client_chains, tls_source, credentials })
}

/// Runs blocking start-up work on the blocking pool.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> Result<T, StartError> + Send + 'static) -> Result<T, StartError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| StartError::Io { context: "start-up task".into(), source: std::io::Error::other(e.to_string()) })?
}

/// Names of what `informer-sync` waits for.
const WATCH_CACHES: &str = "watch-caches";
const RBAC_INDEX: &str = "rbac-index";

/// Flag values that cannot work.
fn validate(opts: &Options) -> Result<(), StartError> {
    if !(0.0..=crate::filters::goaway::MAX_GOAWAY_CHANCE).contains(&opts.goaway_chance) {
        return Err(StartError::Config("--goaway-chance can not be less than 0 or greater than 0.02".into()));
    }
    if opts.connection_idle_timeout.is_zero() {
        return Err(StartError::Config("--connection-idle-timeout must be positive".into()));
    }
    if opts.enable_priority_and_fairness && opts.max_requests_inflight + opts.max_mutating_requests_inflight == 0 {
        // kube's message: priority levels share this sum, and nothing can run without seats.
        return Err(StartError::Config(format!(
            "invalid configuration: MaxRequestsInFlight={} and MaxMutatingRequestsInFlight={}; they must add up to something positive",
            opts.max_requests_inflight, opts.max_mutating_requests_inflight
        )));
    }
    if opts.endpoint_lease_duration < Duration::from_secs(1) {
        return Err(StartError::Config("--endpoint-lease-duration must be at least 1s".into()));
    }
    Ok(())
}

/// This replica's address for the `kubernetes` endpoints (kube's `--advertise-address` rule).
fn advertise_address(opts: &Options) -> IpAddr {
    if let Some(ip) = opts.advertise_address {
        return ip;
    }
    if !opts.bind_address.is_unspecified() {
        return opts.bind_address;
    }
    // The address of the default route's interface: connecting a UDP socket sends nothing.
    std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| s.connect("192.0.2.1:443").and_then(|()| s.local_addr()))
        .map(|a| a.ip())
        .unwrap_or(IpAddr::from([127, 0, 0, 1]))
}

/// The checks of `/healthz`, `/livez` and `/readyz`, in kube's order.
fn health_registry(
    opts: &Options,
    lifecycle: &Arc<Lifecycle>,
    store: &StoreSlot,
    informers: &Arc<Informers>,
    hooks: &PostStartHooks,
) -> health::Registry {
    use health::checks::{InformerSync, Log, Ping, Shutdown, Storage};
    let mut registry = health::Registry::new(opts.livez_grace_period, lifecycle.clone());
    registry.add_health_checks(&[Arc::new(Ping), Arc::new(Log), Arc::new(Storage::liveness(store.clone(), health::STORAGE_CHECK_TIMEOUT))]);
    if let Some(encryption) = opts.encryption.as_ref().filter(|e| !e.current().kms_providers().is_empty()) {
        registry.add_health_checks_without_livez(&[Arc::new(health::checks::KmsProviders(encryption.clone()))]);
    }
    registry.add_readyz_checks(&[
        Arc::new(Storage::readiness(store.clone(), health::STORAGE_CHECK_TIMEOUT)),
        Arc::new(InformerSync(informers.clone())),
    ]);
    registry.add_boot_sequence_checks(&hooks.checks());
    // Last, as kube adds it when the server is prepared to run.
    registry.add_readyz_checks(&[Arc::new(Shutdown::new(lifecycle.clone()))]);
    registry
}

/// Starts kapi and serves until SIGTERM or SIGINT, then terminates as kube-apiserver does.
///
/// Start-up order: certificates, then the listener (health answers from here on, and the
/// "Serving securely on" line is printed), then storage, watch caches and the handler chain,
/// then the post-start hooks, which gate `/readyz`.
///
/// `tiers` are the servers of the chain in delegation order (kube's `CreateServerChain`:
/// aggregator -> kube-apiserver -> apiextensions-apiserver in the all-in-one binary; one tier
/// alone in a split deployment).
pub async fn run(opts: Options, mut tiers: Vec<Box<dyn TierBuilder>>) -> Result<(), StartError> {
    // Before anything else: a SIGTERM that comes during start-up ends kapi through the same
    // clean path (exit 0), not by the signal's default action.
    let signals = TerminationSignals::install();
    tls::install_crypto_provider();
    validate(&opts)?;
    let Prepared { pki, tls_config, client_chains, tls_source, credentials } = {
        let opts = opts.clone();
        blocking(move || prepare(&opts)).await?
    };
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(opts.bind_address, opts.secure_port))
        .await
        .map_err(|source| StartError::Io { context: format!("binding {}:{}", opts.bind_address, opts.secure_port), source })?;
    let local = listener
        .local_addr()
        .map_err(|source| StartError::Io { context: "reading the bound address".into(), source })?;
    let client_host = if opts.bind_address.is_unspecified() { "127.0.0.1".to_owned() } else { opts.bind_address.to_string() };
    let client_addr = match opts.bind_address {
        IpAddr::V6(_) if !opts.bind_address.is_unspecified() => format!("[{client_host}]:{}", local.port()),
        _ => format!("{client_host}:{}", local.port()),
    };
    {
        let (path, server) = (opts.data_dir.join("kubeconfig"), format!("https://{client_addr}"));
        blocking(move || Ok(pki::write_admin_kubeconfig(&path, &server, &pki)?)).await?;
    }

    let lifecycle = Arc::new(Lifecycle::new());
    let store_slot: StoreSlot = Arc::new(OnceLock::new());
    let rbac_enabled = opts.authorization_modes.contains(&AuthorizationMode::Rbac);
    let informers = Arc::new(Informers::new(if rbac_enabled { &[WATCH_CACHES, RBAC_INDEX] } else { &[WATCH_CACHES] }));
    let mut hooks = PostStartHooks::new();
    let authentication = crate::bootstrap::ClusterAuthentication {
        client_ca: opts.client_ca_file.clone().unwrap_or_else(|| opts.data_dir.join("pki").join("ca.crt")),
        requestheader: opts.requestheader_client_ca_file.clone().map(|ca| (ca, opts.requestheader.clone())),
    };
    let post_start = PostStart::register(&mut hooks, opts.endpoint_reconciler == EndpointReconcilerType::Lease, opts.enable_priority_and_fairness, authentication);
    for tier in &mut tiers {
        tier.register_hooks(&mut hooks);
    }
    let health = Arc::new(health_registry(&opts, &lifecycle, &store_slot, &informers, &hooks));
    let chain = Arc::new(ChainSlot::new());
    let serving = tokio::spawn(serve::serve(
        listener,
        ServeConfig {
            tls: tls_config,
            verifiers: client_chains,
            tls_source,
            lifecycle: lifecycle.clone(),
            health: health.clone(),
            chain: chain.clone(),
            send_retry_after: opts.shutdown_send_retry_after,
            connection_idle_timeout: opts.connection_idle_timeout,
            http2_max_streams: match opts.http2_max_streams_per_connection {
                0 => serve::DEFAULT_HTTP2_MAX_STREAMS,
                n => n,
            },
            // With Retry-After the listener closes only once everything drained: a GOAWAY
            // round trip is all that is left (kube's 2 s).
            shutdown_timeout: if opts.shutdown_send_retry_after {
                Duration::from_secs(2)
            } else {
                opts.request_timeout.max(opts.watch_termination_grace + Duration::from_secs(1))
            },
            install_wait: opts.request_timeout,
        },
    ));
    tracing::info!("Serving securely on {local}");
    // The line scripts wait for. A closed stdout (the reader went away) must not take the
    // server down, so write errors are ignored instead of panicking as println! would.
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "Serving securely on {local}");
        let _ = writeln!(out, "Admin kubeconfig: {}", opts.data_dir.join("kubeconfig").display());
        let _ = out.flush();
    }

    let signal = wait_for_signal(signals);
    tokio::pin!(signal);
    let built = tokio::select! {
        built = build_server(&opts, credentials, &store_slot, &informers, &lifecycle, &health, client_addr, tiers) => Some(built?),
        () = &mut signal => None,
    };
    let caches = if let Some((srv, caches)) = built {
        chain.install(crate::filters::chain(srv.clone()));
        let endpoints = (opts.endpoint_reconciler == EndpointReconcilerType::Lease).then(|| {
            let address = SocketAddr::new(advertise_address(&opts), local.port());
            let controller =
                Arc::new(EndpointController::new(srv.rest.clone(), lifecycle.clone(), health.clone(), address, opts.endpoint_lease_duration));
            let stopping = controller.clone();
            lifecycle.add_pre_shutdown_hook(PreShutdownHook::new("stop-kubernetes-service-controller", move || {
                Box::pin(async move { stopping.stop().await.map_err(|e| e.message) })
            }));
            controller
        });
        let mut hook_tasks = post_start.spawn(&srv, local.port(), &opts.service_network, endpoints);
        loop {
            tokio::select! {
                () = &mut signal => break,
                Some(done) = hook_tasks.join_next() => match done {
                    Ok(Err(e)) => return Err(e.into()),
                    Err(e) if e.is_panic() => return Err(StartError::Config(format!("a post-start hook panicked: {e}"))),
                    _ => {}
                },
            }
        }
        Some(caches)
    } else {
        None
    };

    tracing::info!(delay = ?opts.shutdown_delay, "received termination signal; /readyz now fails, serving on for the shutdown delay");
    let shutdown = ShutdownOptions { delay: opts.shutdown_delay, request_timeout: opts.request_timeout, watch_termination_grace: opts.watch_termination_grace };
    crate::lifecycle::shutdown::terminate(&lifecycle, shutdown).await;
    if serving.await.is_err() {
        tracing::error!("the listener task failed");
    }
    if let Some(caches) = caches {
        caches.shutdown();
    }
    tracing::info!("[graceful-termination] apiserver is exiting");
    Ok(())
}

/// Opens storage, loads the watch caches and builds the server behind the handler chain.
#[allow(clippy::too_many_arguments)]
async fn build_server(
    opts: &Options,
    credentials: Credentials,
    store_slot: &StoreSlot,
    informers: &Arc<Informers>,
    lifecycle: &Arc<Lifecycle>,
    health: &Arc<health::Registry>,
    client_addr: String,
    builders: Vec<Box<dyn TierBuilder>>,
) -> Result<(Arc<ApiServer>, Arc<CacheSet>), StartError> {
    // KMS v2 plugins: primed (each call bounded by its timeout) and polled from here on, as
    // kube does; a plugin that is down is not fatal (its writes fail until it answers).
    if let Some(encryption) = &opts.encryption {
        encryption.current().start_kms().await;
        if let Some((path, every)) = &opts.encryption_reload {
            crate::encryption_reload::start(encryption.clone(), path.clone(), *every);
        }
    }
    // Opened after the listener is up: health checks report it (`etcd`) while it waits, for
    // instance for another process's lock on a shared database.
    let store = {
        let opts = opts.clone();
        blocking(move || crate::storage::open(&opts)).await?
    };
    let _ = store_slot.set(store.clone());
    let caches = CacheSet::start(store.clone(), cached_prefixes(), CacheConfig { window: opts.watch_cache_size, ..CacheConfig::default() }).await?;
    informers.mark_synced(WATCH_CACHES);
    let fanout = match &opts.nats_url {
        Some(url) => {
            let config = NatsConfig { url: url.clone(), subject: opts.nats_subject.clone(), repair_interval: crate::storage::POLL_WITH_NATS };
            Some(NatsFanout::start(config, store.clone(), caches.clone()).await.map_err(|e| StartError::Config(e.to_string()))?)
        }
        None => None,
    };
    // Writes go through the announcing store, so other replicas hear of each commit at once.
    let writes = match &fanout {
        Some(f) => f.announcing(store),
        None => store,
    };
    let writes = crate::traced_store::wrap(writes);
    // Services take their cluster IPs and node ports around their writes; the allocator
    // itself writes through a store without that effect (IPAddresses allocate nothing).
    let plain = RestStore::new(writes.clone(), caches.clone());
    let allocator = kapi_registry::service_alloc::ServiceAllocator::new(opts.service_network.clone(), plain.clone(), writes);
    kapi_registry::service_alloc::repair::start(allocator.clone());
    let rest = plain.with_effects("", "services", Arc::new(allocator));

    // Building every schema takes a moment of CPU: do it off the async workers.
    let openapi = Arc::new(kapi_openapi::OpenApi::new(crate::handlers::openapi::served_resources()));
    let warm = openapi.clone();
    let started = std::time::Instant::now();
    tokio::task::spawn_blocking(move || warm.warm())
        .await
        .map_err(|e| StartError::Io { context: "building the OpenAPI documents".into(), source: std::io::Error::other(e.to_string()) })?;
    tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, "OpenAPI documents built");

    let context = TierContext { rest: rest.clone(), openapi: openapi.clone(), lifecycle: lifecycle.clone(), informers: informers.clone() };
    let mut tiers: Vec<Arc<dyn Tier>> = Vec::new();
    for builder in builders {
        tiers.push(builder.build(context.clone()).await?);
    }
    let chain = Chain::new(tiers);
    chain.start();

    let api_audiences = if opts.api_audiences.is_empty() { opts.service_account_issuers.clone() } else { opts.api_audiences.clone() };
    let Some(issuer) = opts.service_account_issuers.first().cloned() else {
        return Err(StartError::Config("--service-account-issuer must be given".into()));
    };
    let mut tokens = TokenUnion::new(Vec::new());
    if let Some(tf) = credentials.token_file {
        tokens.push(Box::new(AudienceAgnostic::new(api_audiences.clone(), tf)));
    }
    tokens.push(Box::new(ServiceAccountTokenAuthenticator::new(
        opts.service_account_issuers.clone(),
        credentials.verification_keys.clone(),
        api_audiences.clone(),
        Arc::new(CachedObjects::new(caches.clone())),
    )));
    kapi_webhook::observe_calls_with(Arc::new(crate::metrics::RestClientMetrics));
    // One webhook client for the authentication and authorization webhooks.
    let webhooks = kapi_webhook::Client::new(Arc::new(kapi_webhook::EndpointSliceResolver::new(rest.clone())));
    for jwt in crate::oidc::token_authenticators(&opts.authentication, &api_audiences).map_err(StartError::Config)? {
        tokens.push(jwt);
    }
    if let Some(webhook) = &opts.token_webhook {
        tokens.push(Box::new(crate::auth_webhooks::token::WebhookTokenAuthenticator::new(webhooks.clone(), webhook.clone(), api_audiences.clone())));
    }
    let tokens: Arc<dyn TokenAuthenticator> = Arc::new(tokens);
    let metadata = match OpenIdMetadata::new(&issuer, None, Some(&client_addr), &credentials.verification_keys) {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::warn!("not serving the service-account issuer discovery documents: {e}");
            None
        }
    };
    let service_accounts = Arc::new(ServiceAccounts {
        issuer: TokenIssuer::new(issuer, credentials.signing_key),
        api_audiences: api_audiences.clone(),
        tokens: tokens.clone(),
        metadata,
        max_expiration: opts.service_account_max_token_expiration.as_secs() as i64,
    });
    let authenticator = authenticator(opts, tokens, api_audiences)?;
    let (authorizer, rbac, node_authorizer) = authorizer(&opts.authorization_modes, &opts.authorization_webhooks, &webhooks)?;
    if let Some(rbac) = &rbac {
        crate::rbac_sync::start(caches.clone(), rest.clone(), rbac.clone()).await?;
        informers.mark_synced(RBAC_INDEX);
    }
    if let Some(node) = node_authorizer {
        crate::node_sync::start(caches.clone(), node).await?;
    }
    if let Some(election) = crate::controllers::start(&opts.controllers, &opts.data_dir, caches.clone(), rest.clone(), chain.clone()).await? {
        lifecycle.add_pre_shutdown_hook(PreShutdownHook::new("release-controller-lease", move || {
            Box::pin(async move { election.release().await.map_err(|e| e.message) })
        }));
    }
    crate::admission::type_checking::start(caches.clone(), rest.clone(), chain.clone());
    let admission = crate::admission::build_chain(
        &opts.admission,
        crate::admission::PluginContext { rest: rest.clone(), tiers: chain.clone(), authorizer: authorizer.clone(), rbac: rbac.clone() },
    )
    .map_err(StartError::Config)?;
    let audit = match &opts.audit {
        Some(audit) => {
            let log = match &audit.log {
                Some(log) => Some(
                    kapi_audit::LogBackend::start(log.clone())
                        .map_err(|source| StartError::Io { context: format!("opening the audit log {}", log.path.display()), source })?,
                ),
                None => None,
            };
            let webhook = audit.webhook.clone().map(|options| crate::audit_webhook::AuditWebhook::start(webhooks.clone(), options));
            Some(Arc::new(crate::filters::audit::Auditor { policy: audit.policy.clone(), log, webhook }))
        }
        None => None,
    };
    let srv = Arc::new(ApiServer {
        rest,
        chain,
        audit,
        admission: Arc::new(admission),
        metrics: Metrics::new(),
        authenticator,
        authorizer,
        authorization_modes: opts.authorization_modes.clone(),
        rbac,
        service_accounts,
        options: ServingOptions {
            request_timeout: opts.request_timeout,
            min_request_timeout: opts.min_request_timeout,
            external_address: client_addr,
            watch_termination_grace: opts.watch_termination_grace,
            shutdown_send_retry_after: opts.shutdown_send_retry_after,
            goaway_chance: opts.goaway_chance,
            request_metrics: !opts.disable_request_metrics,
            http_log: opts.http_log,
            http_headers: opts.http_headers.clone(),
            ..ServingOptions::default()
        },
        lifecycle: lifecycle.clone(),
        health: health.clone(),
        openapi,
        in_flight: crate::filters::max_in_flight::InFlightLimits::new(opts.max_requests_inflight, opts.max_mutating_requests_inflight),
        flow_control: opts.enable_priority_and_fairness.then(|| {
            let limit = opts.max_requests_inflight.saturating_add(opts.max_mutating_requests_inflight);
            crate::flow_control::FlowControl::new(u32::try_from(limit).unwrap_or(u32::MAX))
        }),
        kubelet: Arc::new(credentials.kubelet),
        fanout,
    });
    Ok((srv, caches))
}

/// SIGTERM and SIGINT, caught from the moment [`TerminationSignals::install`] returns.
struct TerminationSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl TerminationSignals {
    /// None when the handlers cannot be installed: then the process can only be killed.
    fn install() -> Option<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Some(TerminationSignals { term: signal(SignalKind::terminate()).ok()?, int: signal(SignalKind::interrupt()).ok()? })
    }
}

/// Resolves at the first SIGTERM or SIGINT (never without handlers).
async fn wait_for_signal(signals: Option<TerminationSignals>) {
    let Some(mut signals) = signals else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = signals.term.recv() => {}
        _ = signals.int.recv() => {}
    }
}
