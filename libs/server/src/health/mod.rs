//! kube-apiserver's health endpoints: `/healthz`, `/livez` and `/readyz`, each a list of named
//! checks kept in a [`Registry`] rather than hard-coded, so that whatever registers a post-start
//! hook or a storage backend also registers its check, as kube's `AddHealthChecks`,
//! `AddBootSequenceHealthChecks` and `AddReadyzChecks` do.
//!
//! Which endpoint gets which check is kube's rule: generic checks (`ping`, `log`, `etcd`) go
//! everywhere; boot-sequence checks (`poststarthook/<name>`) go everywhere but count as passing
//! on `/livez` during `--livez-grace-period`, so a slow start does not get the process restarted;
//! readiness-only checks (`etcd-readiness`, `informer-sync`, `shutdown`) go to `/readyz` only,
//! because a server that is starting or draining is alive but must not get traffic.

pub mod checks;
mod handler;
pub mod slis;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

pub use handler::respond;

use crate::lifecycle::Lifecycle;

/// Why a check failed. The texts are kube's for the same failure; they appear only on a check's
/// own path (`/readyz/<name>`) and in the log, since the lists are public and say "reason
/// withheld".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// A post-start hook is still running.
    #[error("not finished")]
    NotFinished,
    /// A post-start hook gave up; the process exits right after, as kube's does.
    #[error("{0}")]
    HookFailed(String),
    /// SIGTERM arrived (`shutdown`).
    #[error("process is shutting down")]
    ShuttingDown,
    /// Watch caches or indexes still loading (`informer-sync`).
    #[error("{} informers not started yet: [{}]", .0.len(), .0.join(" "))]
    InformersNotStarted(Vec<&'static str>),
    /// The storage backend is not open yet (`etcd`).
    #[error("etcd client connection not yet established")]
    StorageNotConnected,
    /// The storage backend did not answer, or answered with an error (`etcd`).
    #[error("{0}")]
    Storage(String),
    /// A KMS v2 plugin is down or unhealthy (`kms-providers`), kube's text.
    #[error("{0}")]
    Kms(String),
}

/// The future a check returns.
pub type CheckFuture<'a> = Pin<Box<dyn Future<Output = Result<(), CheckError>> + Send + 'a>>;

/// One named check (kube's `healthz.HealthChecker`).
pub trait HealthCheck: Send + Sync {
    /// The name in the lists and in the check's own path.
    fn name(&self) -> &str;
    /// Runs the check.
    fn check(&self) -> CheckFuture<'_>;
}

/// The three endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/healthz` (deprecated in kube, kept for old probes).
    Healthz,
    /// `/livez`: restart the process when this fails.
    Livez,
    /// `/readyz`: send traffic only while this passes.
    Readyz,
}

impl Endpoint {
    /// The path segment, also the word in "readyz check passed".
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Healthz => "healthz",
            Self::Livez => "livez",
            Self::Readyz => "readyz",
        }
    }

    /// The endpoint of a path segment.
    pub fn from_segment(s: &str) -> Option<Self> {
        match s {
            "healthz" => Some(Self::Healthz),
            "livez" => Some(Self::Livez),
            "readyz" => Some(Self::Readyz),
            _ => None,
        }
    }
}

/// A registered check, with the moment before which it passes regardless (livez grace).
#[derive(Clone)]
pub struct Entry {
    check: Arc<dyn HealthCheck>,
    passes_until: Option<Instant>,
}

impl Entry {
    /// The check's name.
    pub fn name(&self) -> &str {
        self.check.name()
    }

    /// Runs the check unless it is still within its grace period.
    pub async fn run(&self) -> Result<(), CheckError> {
        match self.passes_until {
            Some(until) if Instant::now() < until => Ok(()),
            _ => self.check.check().await,
        }
    }
}

/// Every check of every endpoint, in registration order (the order of the verbose lists).
pub struct Registry {
    healthz: Vec<Entry>,
    livez: Vec<Entry>,
    readyz: Vec<Entry>,
    livez_grace_until: Instant,
    lifecycle: Arc<Lifecycle>,
    slis: slis::Slis,
}

impl Registry {
    /// An empty registry; boot-sequence checks added later pass on `/livez` until
    /// `livez_grace` after now (kube measures it from registration, which is start-up).
    pub fn new(livez_grace: Duration, lifecycle: Arc<Lifecycle>) -> Self {
        Self {
            healthz: Vec::new(),
            livez: Vec::new(),
            readyz: Vec::new(),
            livez_grace_until: Instant::now() + livez_grace,
            lifecycle,
            slis: slis::Slis::new(),
        }
    }

    fn entry(check: &Arc<dyn HealthCheck>, passes_until: Option<Instant>) -> Entry {
        Entry { check: check.clone(), passes_until }
    }

    /// Generic checks: every endpoint, no grace (kube's `AddHealthChecks`).
    pub fn add_health_checks(&mut self, checks: &[Arc<dyn HealthCheck>]) {
        for c in checks {
            self.healthz.push(Self::entry(c, None));
            self.livez.push(Self::entry(c, None));
            self.readyz.push(Self::entry(c, None));
        }
    }

    /// Start-up checks: every endpoint, passing on `/livez` during the grace period (kube's
    /// `AddBootSequenceHealthChecks`).
    pub fn add_boot_sequence_checks(&mut self, checks: &[Arc<dyn HealthCheck>]) {
        for c in checks {
            self.healthz.push(Self::entry(c, None));
            self.livez.push(Self::entry(c, Some(self.livez_grace_until)));
            self.readyz.push(Self::entry(c, None));
        }
    }

    /// `/healthz` and `/readyz`, not `/livez` (kube's `addHealthChecksWithoutLivez`, for the
    /// KMS plugins: a plugin outage must not get the server restarted).
    pub fn add_health_checks_without_livez(&mut self, checks: &[Arc<dyn HealthCheck>]) {
        for c in checks {
            self.healthz.push(Self::entry(c, None));
            self.readyz.push(Self::entry(c, None));
        }
    }

    /// Readiness-only checks (kube's `AddReadyzChecks`).
    pub fn add_readyz_checks(&mut self, checks: &[Arc<dyn HealthCheck>]) {
        self.readyz.extend(checks.iter().map(|c| Self::entry(c, None)));
    }

    /// The checks of one endpoint.
    pub fn checks(&self, endpoint: Endpoint) -> &[Entry] {
        match endpoint {
            Endpoint::Healthz => &self.healthz,
            Endpoint::Livez => &self.livez,
            Endpoint::Readyz => &self.readyz,
        }
    }

    /// Whether every check of `endpoint` passes now. The first time `/readyz` passes, the
    /// lifecycle's `HasBeenReady` fires, whoever asked (a probe or an internal controller).
    pub async fn passes(&self, endpoint: Endpoint) -> bool {
        for entry in self.checks(endpoint) {
            let ok = entry.run().await.is_ok();
            self.slis.observe(entry.name(), endpoint, ok);
            if !ok {
                return false;
            }
        }
        self.passed(endpoint);
        true
    }

    /// The checks' SLIs (`/metrics/slis`).
    pub fn slis(&self) -> &slis::Slis {
        &self.slis
    }

    fn passed(&self, endpoint: Endpoint) {
        if endpoint == Endpoint::Readyz {
            self.lifecycle.has_been_ready.signal();
        }
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |v: &[Entry]| v.iter().map(|e| e.name().to_owned()).collect::<Vec<_>>();
        f.debug_struct("Registry")
            .field("healthz", &names(&self.healthz))
            .field("livez", &names(&self.livez))
            .field("readyz", &names(&self.readyz))
            .finish_non_exhaustive()
    }
}

/// How long a storage check may take (kube's `--etcd-healthcheck-timeout` default).
pub const STORAGE_CHECK_TIMEOUT: Duration = Duration::from_secs(2);
