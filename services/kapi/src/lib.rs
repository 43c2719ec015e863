//! What every kapi binary does: flags -> [`kapi_server::Options`] -> [`kapi_server::run`] with
//! the tiers of that binary. `kapi` runs the aggregator, core and extensions tiers in one
//! process (the embedded default); `kapi-aggregator`, `kapi-core` and `kapi-extensions` run one
//! tier each, for split deployments, with the same flags.

mod cli;
mod logging;

use cli::Cli;

use std::process::ExitCode;

use clap::Parser;

/// Exit code for bad command lines (sysexits EX_USAGE).
const EX_USAGE: u8 = 64;


/// The audit flags, read as kube-apiserver reads them: events need both a policy and a log.
fn audit_options(cli: &Cli) -> Result<Option<kapi_server::config::AuditOptions>, String> {
    if cli.audit_log_format != "json" {
        return Err(format!("--audit-log-format {:?} is not supported by kapi (only \"json\")", cli.audit_log_format));
    }
    let mode: kapi_audit::Mode = cli.audit_log_mode.parse()?;
    let webhook_mode: kapi_audit::Mode =
        cli.audit_webhook_mode.parse().map_err(|e: String| e.replace("audit log mode", "audit webhook mode"))?;
    if cli.audit_webhook_version != "audit.k8s.io/v1" {
        return Err(format!("--audit-webhook-version {:?} is not supported by kapi (only \"audit.k8s.io/v1\")", cli.audit_webhook_version));
    }
    let Some(policy) = &cli.audit_policy_file else { return Ok(None) };
    if cli.audit_log_path.is_none() && cli.audit_webhook_config_file.is_none() {
        return Ok(None);
    }
    let policy = kapi_audit::Policy::load(policy).map_err(|e| e.to_string())?;
    let log = cli.audit_log_path.as_ref().map(|path| kapi_audit::LogOptions {
        path: path.clone(),
        max_size_mb: cli.audit_log_maxsize,
        max_backups: cli.audit_log_maxbackup,
        max_age_days: cli.audit_log_maxage,
        mode,
    });
    let webhook = match &cli.audit_webhook_config_file {
        Some(file) => Some(kapi_server::audit_webhook::AuditWebhookOptions {
            config: kapi_server::audit_webhook::kubeconfig(file).map_err(|e| format!("--audit-webhook-config-file: {e}"))?,
            mode: webhook_mode,
            buffer_size: cli.audit_webhook_batch_buffer_size,
            max_size: cli.audit_webhook_batch_max_size.max(1),
            max_wait: cli.audit_webhook_batch_max_wait,
            throttle: cli.audit_webhook_batch_throttle_enable.then_some((cli.audit_webhook_batch_throttle_qps, cli.audit_webhook_batch_throttle_burst)),
            initial_backoff: cli.audit_webhook_initial_backoff,
        }),
        None => None,
    };
    Ok(Some(kapi_server::config::AuditOptions { policy, log, webhook }))
}

/// The server a binary runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// aggregator -> core -> extensions in one process.
    AllInOne,
    /// The aggregator alone: built-in groups proxied to `--core-url`, the others to
    /// `--extensions-url`.
    Aggregator,
    /// The core tier alone (kube-apiserver's built-in groups).
    Core,
    /// The extensions tier alone (CRDs and custom resources).
    Extensions,
}

/// The stack of every runtime thread (workers and blocking threads): 8 MiB, a Linux main
/// thread's, instead of tokio's 2 MiB. A request is decoded several futures deep on a worker's
/// stack, and decoding recurses once per level of nesting (serde_json to 128 levels, YAML to
/// its parser's limit, JSON patches to 1000): in a debug build a 100,000-deep YAML body
/// overflowed 2 MiB and aborted the process. Only the pages a thread touches are resident.
const WORKER_STACK_BYTES: usize = 8 << 20;

/// Runs `server` with the process's command line; the exit code says how it ended (64: a bad
/// command line or configuration).
pub fn main(server: Server) -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EX_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    if cli.tls_cert_file.is_some() != cli.tls_private_key_file.is_some() {
        eprintln!("error: --tls-cert-file and --tls-private-key-file must be given together");
        return ExitCode::from(EX_USAGE);
    }
    let level = cli.log_level.clone().unwrap_or_else(|| logging::filter_for(cli.v).to_owned());
    let filter = match tracing_subscriber::EnvFilter::try_new(&level) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: invalid --log-level {level:?}: {e}");
            return ExitCode::from(EX_USAGE);
        }
    };
    if let Err(e) = logging::init(&cli.logging_format, filter) {
        eprintln!("error: {e}");
        return ExitCode::from(EX_USAGE);
    }
    // A bad encryption configuration stops start-up like a bad flag, naming file and field.
    let encryption = match cli.encryption_provider_config.as_deref().map(kapi_encryption::load).transpose() {
        Ok(config) => config.map(|c| std::sync::Arc::new(kapi_encryption::LiveConfig::new(c))),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EX_USAGE);
        }
    };
    let encryption_reload = match (&cli.encryption_provider_config, cli.encryption_provider_config_automatic_reload) {
        (Some(path), true) => Some((path.clone(), cli.encryption_provider_config_automatic_reload_interval)),
        (None, true) => {
            eprintln!("error: --encryption-provider-config-automatic-reload must be set with --encryption-provider-config");
            return ExitCode::from(EX_USAGE);
        }
        _ => None,
    };
    let admission = match kapi_server::admission::AdmissionOptions::from_flags(
        &cli.enable_admission_plugins,
        &cli.disable_admission_plugins,
        cli.admission_control_config_file.as_deref(),
    ) {
        Ok(admission) => kapi_server::admission::AdmissionOptions {
            default_toleration_seconds: (cli.default_not_ready_toleration_seconds, cli.default_unreachable_toleration_seconds),
            ..admission
        },
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EX_USAGE);
        }
    };

    let service_network = match kapi_server::ServiceNetwork::parse(&cli.service_cluster_ip_range, &cli.service_node_port_range) {
        Ok(network) => network,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EX_USAGE);
        }
    };
    let legacy_webhook = kapi_server::auth_webhooks::authorization_config::LegacyWebhookFlags {
        config_file: cli.authorization_webhook_config_file.as_deref(),
        version: &cli.authorization_webhook_version,
        authorized_ttl: cli.authorization_webhook_cache_authorized_ttl,
        unauthorized_ttl: cli.authorization_webhook_cache_unauthorized_ttl,
    };
    let (authorization_modes, authorization_webhooks) = match kapi_server::auth_webhooks::authorization_config::chain_from_flags(
        cli.authorization_mode.clone(),
        cli.authorization_config.as_deref(),
        &legacy_webhook,
    ) {
        Ok(chain) => chain,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EX_USAGE);
        }
    };
    let token_webhook = match &cli.authentication_token_webhook_config_file {
        None => None,
        Some(path) => match kapi_server::auth_webhooks::token::TokenWebhookOptions::from_flags(
            path,
            &cli.authentication_token_webhook_version,
            cli.authentication_token_webhook_cache_ttl,
        ) {
            Ok(options) => Some(options),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(EX_USAGE);
            }
        },
    };
    let oidc_flags = kapi_server::oidc::OidcFlags {
        issuer_url: cli.oidc_issuer_url.clone(),
        client_id: cli.oidc_client_id.clone(),
        ca_file: cli.oidc_ca_file.clone(),
        username_claim: cli.oidc_username_claim.clone(),
        username_prefix: cli.oidc_username_prefix.clone(),
        groups_claim: cli.oidc_groups_claim.clone(),
        groups_prefix: cli.oidc_groups_prefix.clone(),
        required_claims: cli.oidc_required_claim.clone(),
        signing_algs: cli.oidc_signing_algs.clone(),
    };
    let anonymous_flag_set = std::env::args().any(|a| a == "--anonymous-auth" || a.starts_with("--anonymous-auth="));
    let authentication = match kapi_server::oidc::load(cli.authentication_config.as_deref(), &oidc_flags, &cli.service_account_issuer, anonymous_flag_set) {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EX_USAGE);
        }
    };
    let mut anonymous_auth = cli.anonymous_auth;
    if let Some(anonymous) = &authentication.anonymous {
        if !anonymous.paths.is_empty() {
            eprintln!("error: invalid authentication configuration: anonymous.conditions: kapi does not support anonymous authentication limited to paths");
            return ExitCode::from(EX_USAGE);
        }
        anonymous_auth = anonymous.enabled;
    }
    let election = kapi_server::controllers::ElectionConfig {
        lease_duration: cli.leader_elect_lease_duration,
        renew_deadline: cli.leader_elect_renew_deadline,
        retry_period: cli.leader_elect_retry_period,
    };
    if let Err(e) = election.validate() {
        eprintln!("error: --leader-elect-*: {e}");
        return ExitCode::from(EX_USAGE);
    }
    let controllers = match kapi_server::controllers::Selection::parse(&cli.controllers) {
        Ok(selection) => kapi_server::controllers::ControllerOptions {
            selection,
            leader_elect: cli.leader_elect,
            election,
        },
        Err(e) => {
            eprintln!("error: --controllers: {e}");
            return ExitCode::from(EX_USAGE);
        }
    };
    let tls_policy = match kapi_server::tls_policy::TlsPolicy::from_flags(cli.tls_min_version.as_deref(), &cli.tls_cipher_suites) {
        Ok(policy) => policy,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EX_USAGE);
        }
    };
    let http_headers = match kapi_server::filters::http_headers::HeaderPolicy::from_flags(&cli.strict_transport_security_directives, &cli.cors_allowed_origins) {
        Ok(policy) => std::sync::Arc::new(policy),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EX_USAGE);
        }
    };
    let audit = match audit_options(&cli) {
        Ok(audit) => audit,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EX_USAGE);
        }
    };
    let tracing_settings = match cli.tracing_config_file.as_deref().map(kapi_server::config::tracing_config::load).transpose() {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EX_USAGE);
        }
    };

    // kubeadm's front-proxy layout when neither side of it is configured: the aggregator's
    // client certificate, and the CA this server (and extension API servers, through
    // kube-system/extension-apiserver-authentication) trust identity headers under.
    let front_proxy = match (&cli.requestheader_client_ca_file, &cli.proxy_client_cert_file, &cli.proxy_client_key_file) {
        (None, None, None) => match kapi_server::pki::ensure_front_proxy(&cli.data_dir) {
            Ok(generated) => Some(generated),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        },
        _ => None,
    };
    let (proxy_client_cert_file, proxy_client_key_file) = match &front_proxy {
        Some(generated) => (Some(generated.client_cert.clone()), Some(generated.client_key.clone())),
        None => (cli.proxy_client_cert_file.clone(), cli.proxy_client_key_file.clone()),
    };
    let backends = match (server, &cli.core_url, &cli.extensions_url) {
        (Server::Aggregator, Some(core), Some(extensions)) => Some(kapi_aggregator::Backends {
            core: core.clone(),
            extensions: extensions.clone(),
            ca_file: cli.backend_ca_file.clone().unwrap_or_else(|| cli.data_dir.join("pki").join("ca.crt")),
        }),
        (Server::Aggregator, _, _) => {
            eprintln!("error: kapi-aggregator needs --core-url and --extensions-url");
            return ExitCode::from(EX_USAGE);
        }
        (_, None, None) => None,
        _ => {
            eprintln!("error: --core-url and --extensions-url are flags of kapi-aggregator");
            return ExitCode::from(EX_USAGE);
        }
    };
    let aggregator = kapi_aggregator::AggregatorOptions { proxy_client_cert_file, proxy_client_key_file, backends };
    let mut opts = kapi_server::Options {
        bind_address: cli.bind_address,
        secure_port: cli.secure_port,
        data_dir: cli.data_dir,
        tls_sni_cert_keys: cli.tls_sni_cert_key,
        tls_cert_file: cli.tls_cert_file,
        tls_private_key_file: cli.tls_private_key_file,
        client_ca_file: cli.client_ca_file,
        request_timeout: cli.request_timeout,
        min_request_timeout: cli.min_request_timeout,
        shutdown_delay: cli.shutdown_delay_duration,
        watch_termination_grace: cli.shutdown_watch_termination_grace_period,
        shutdown_send_retry_after: cli.shutdown_send_retry_after,
        livez_grace_period: cli.livez_grace_period,
        goaway_chance: cli.goaway_chance,
        disable_request_metrics: cli.disable_request_metrics,
        http_headers,
        advertise_address: cli.advertise_address,
        endpoint_reconciler: cli.endpoint_reconciler_type,
        endpoint_lease_duration: cli.endpoint_lease_duration,
        http2_max_streams_per_connection: cli.http2_max_streams_per_connection,
        connection_idle_timeout: cli.connection_idle_timeout,
        compaction_window: cli.storage_compaction_window,
        watch_cache_size: cli.watch_cache_size,
        max_requests_inflight: cli.max_requests_inflight,
        max_mutating_requests_inflight: cli.max_mutating_requests_inflight,
        enable_priority_and_fairness: cli.enable_priority_and_fairness,
        authorization_modes,
        authorization_webhooks,
        anonymous_auth,
        token_auth_file: cli.token_auth_file,
        service_account_issuers: cli.service_account_issuer,
        service_account_key_files: cli.service_account_key_file,
        service_account_signing_key_file: cli.service_account_signing_key_file,
        api_audiences: cli.api_audiences,
        service_account_max_token_expiration: cli.service_account_max_token_expiration,
        requestheader_client_ca_file: cli.requestheader_client_ca_file,
        requestheader: kapi_server::config::RequestHeaderConfig {
            allowed_names: cli.requestheader_allowed_names,
            username_headers: cli.requestheader_username_headers,
            uid_headers: cli.requestheader_uid_headers,
            group_headers: cli.requestheader_group_headers,
            extra_header_prefixes: cli.requestheader_extra_headers_prefix,
        },
        storage_backend: cli.storage_backend,
        fdb_cluster_file: cli.fdb_cluster_file,
        fdb_directory: cli.fdb_directory,
        etcd: kapi_server::storage::EtcdOptions {
            servers: cli.etcd_servers,
            prefix: cli.etcd_prefix,
            ca_file: cli.etcd_cafile,
            cert_file: cli.etcd_certfile,
            key_file: cli.etcd_keyfile,
            compaction_interval: cli.etcd_compaction_interval,
            count_metric_poll_period: cli.etcd_count_metric_poll_period,
        },
        nats_url: cli.nats_url,
        nats_subject: cli.nats_subject,
        storage_poll_interval: cli.storage_poll_interval,
        kubelet: kapi_server::kubelet::KubeletClientOptions {
            client_certificate: cli.kubelet_client_certificate,
            client_key: cli.kubelet_client_key,
            certificate_authority: cli.kubelet_certificate_authority,
            timeout: cli.kubelet_timeout,
            preferred_address_types: cli.kubelet_preferred_address_types,
        },
        encryption,
        encryption_reload,
        admission,
        audit,
        tls_policy,
        service_network,
        http_log: cli.v >= 3,
        controllers,
        token_webhook,
        authentication,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().thread_stack_size(WORKER_STACK_BYTES).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(settings) = &tracing_settings {
        if let Err(e) = runtime.block_on(async { kapi_server::config::tracing_config::install(settings) }) {
            eprintln!("error: tracing: {e}");
            return ExitCode::FAILURE;
        }
    }
    if let Some(generated) = front_proxy {
        opts.requestheader_client_ca_file = Some(generated.ca_cert);
        let default = |v: &mut Vec<String>, value: &str| {
            if v.is_empty() {
                v.push(value.to_owned());
            }
        };
        default(&mut opts.requestheader.allowed_names, kapi_server::pki::FRONT_PROXY_CLIENT);
        default(&mut opts.requestheader.username_headers, "X-Remote-User");
        default(&mut opts.requestheader.group_headers, "X-Remote-Group");
        default(&mut opts.requestheader.extra_header_prefixes, "X-Remote-Extra-");
    }
    // kube's chain: aggregator -> kube-apiserver (core) -> apiextensions-apiserver.
    let tiers: Vec<Box<dyn kapi_server::tier::TierBuilder>> = match server {
        Server::AllInOne => vec![
            Box::new(kapi_aggregator::AggregatorTierBuilder::new(aggregator)),
            Box::new(kapi_server::tier::CoreTierBuilder),
            Box::new(kapi_apiextensions_apiserver::ExtensionsTierBuilder::default()),
        ],
        Server::Aggregator => vec![Box::new(kapi_aggregator::AggregatorTierBuilder::new(aggregator))],
        Server::Core => vec![Box::new(kapi_server::tier::CoreTierBuilder)],
        Server::Extensions => vec![Box::new(kapi_apiextensions_apiserver::ExtensionsTierBuilder::default())],
    };
    let served = runtime.block_on(kapi_server::run(opts, tiers));
    // The runtime still runs here: the last spans leave through it.
    kapi_server::config::tracing_config::shutdown();
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
