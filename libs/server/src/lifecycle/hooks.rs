//! Post-start and pre-shutdown hooks (kube's `AddPostStartHook`, `AddPreShutdownHook`).
//!
//! A post-start hook is registered by name before serving starts, which also registers its
//! `poststarthook/<name>` health check; it runs once the server is built and reports done or
//! failed. Failures are retried for a while (storage may be busy at start); a hook that keeps
//! failing ends the process, as kube's `PostStartHook %q failed` is fatal: a server that cannot
//! bootstrap must not sit half-started.

use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::health::{CheckError, CheckFuture, HealthCheck};

/// A hook that gave up.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HookError {
    /// A post-start hook kept failing past its retry budget.
    #[error("PostStartHook {name:?} failed: {reason}")]
    PostStart {
        /// The hook.
        name: String,
        /// Its last error.
        reason: String,
    },
    /// A pre-shutdown hook failed (termination goes on).
    #[error("PreShutdownHook {name:?} failed: {reason}")]
    PreShutdown {
        /// The hook.
        name: String,
        /// Its error.
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Running,
    Done,
    Failed(String),
}

/// One registered post-start hook: cheap to clone, shared by its runner and its health check.
#[derive(Debug, Clone)]
pub struct PostStartHook {
    name: String,
    outcome: Arc<watch::Sender<Outcome>>,
}

/// First and longest pause between attempts of a failing hook.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(2));

impl PostStartHook {
    /// The hook's name (without the `poststarthook/` prefix).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it finished.
    pub fn is_done(&self) -> bool {
        *self.outcome.borrow() == Outcome::Done
    }

    /// Resolves once the hook is done (a hook that depends on another waits for it).
    pub async fn finished(&self) {
        let mut rx = self.outcome.subscribe();
        let _ = rx.wait_for(|o| *o == Outcome::Done).await;
    }

    /// Runs `attempt` until it succeeds, retrying failures with backoff for up to `budget`.
    pub async fn run<F, Fut, E>(&self, budget: Duration, mut attempt: F) -> Result<(), HookError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(), E>>,
        E: Display,
    {
        let started = Instant::now();
        let mut pause = BACKOFF.0;
        loop {
            match attempt().await {
                Ok(()) => {
                    self.outcome.send_replace(Outcome::Done);
                    tracing::info!(hook = %self.name, elapsed_ms = started.elapsed().as_millis() as u64, "post-start hook finished");
                    return Ok(());
                }
                Err(e) if started.elapsed() + pause < budget => {
                    tracing::warn!(hook = %self.name, "post-start hook failed, retrying: {e}");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(BACKOFF.1);
                }
                Err(e) => {
                    let reason = e.to_string();
                    self.outcome.send_replace(Outcome::Failed(reason.clone()));
                    return Err(HookError::PostStart { name: self.name.clone(), reason });
                }
            }
        }
    }
}

/// `poststarthook/<name>`: fails until the hook is done.
struct PostStartHookCheck {
    check_name: String,
    hook: PostStartHook,
}

impl HealthCheck for PostStartHookCheck {
    fn name(&self) -> &str {
        &self.check_name
    }
    fn check(&self) -> CheckFuture<'_> {
        Box::pin(async move {
            match &*self.hook.outcome.borrow() {
                Outcome::Done => Ok(()),
                Outcome::Running => Err(CheckError::NotFinished),
                Outcome::Failed(reason) => Err(CheckError::HookFailed(reason.clone())),
            }
        })
    }
}

/// The post-start hooks of one server, in registration order.
#[derive(Debug, Default)]
pub struct PostStartHooks {
    hooks: Vec<PostStartHook>,
}

impl PostStartHooks {
    /// No hooks yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a hook by kube's name for the same job.
    pub fn register(&mut self, name: &str) -> PostStartHook {
        let hook = PostStartHook { name: name.to_owned(), outcome: Arc::new(watch::Sender::new(Outcome::Running)) };
        self.hooks.push(hook.clone());
        hook
    }

    /// One health check per hook, for [`crate::health::Registry::add_boot_sequence_checks`].
    pub fn checks(&self) -> Vec<Arc<dyn HealthCheck>> {
        self.hooks
            .iter()
            .map(|h| Arc::new(PostStartHookCheck { check_name: format!("poststarthook/{}", h.name), hook: h.clone() }) as Arc<dyn HealthCheck>)
            .collect()
    }
}

/// What a pre-shutdown hook runs.
pub type PreShutdownFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// A named job run when termination starts, before the listener closes.
pub struct PreShutdownHook {
    name: String,
    run: Box<dyn FnOnce() -> PreShutdownFuture + Send>,
}

impl PreShutdownHook {
    /// A hook named as kube names the same job.
    pub fn new(name: &str, run: impl FnOnce() -> PreShutdownFuture + Send + 'static) -> Self {
        Self { name: name.to_owned(), run: Box::new(run) }
    }

    /// Runs it, bounded by `timeout`.
    pub async fn run(self, timeout: Duration) -> Result<(), HookError> {
        let name = self.name;
        let fail = |reason: String| HookError::PreShutdown { name: name.clone(), reason };
        match tokio::time::timeout(timeout, (self.run)()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => Err(fail(reason)),
            Err(_) => Err(fail(format!("did not finish within {timeout:?}"))),
        }
    }
}

impl std::fmt::Debug for PreShutdownHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreShutdownHook").field("name", &self.name).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hook_is_retried_until_done_and_its_check_follows() {
        let mut hooks = PostStartHooks::new();
        let hook = hooks.register("demo");
        let check = hooks.checks().pop().unwrap();
        assert_eq!(check.name(), "poststarthook/demo");
        assert_eq!(check.check().await, Err(CheckError::NotFinished));
        let mut tries = 0;
        hook.run(Duration::from_secs(5), || {
            tries += 1;
            let fail = tries < 3;
            async move { if fail { Err("busy") } else { Ok(()) } }
        })
        .await
        .unwrap();
        assert_eq!(tries, 3);
        assert!(check.check().await.is_ok());
    }

    #[tokio::test]
    async fn a_hook_failing_past_its_budget_fails() {
        let mut hooks = PostStartHooks::new();
        let hook = hooks.register("broken");
        let err = hook.run(Duration::from_millis(50), || async { Err::<(), _>("nope") }).await.unwrap_err();
        assert_eq!(err.to_string(), "PostStartHook \"broken\" failed: nope");
        assert_eq!(hooks.checks()[0].check().await, Err(CheckError::HookFailed("nope".into())));
    }
}
