//! The plugin seam and kube's chain (`chainAdmissionHandler`): every plugin that handles the
//! operation mutates, in order; then every one validates, in order; the first refusal ends
//! the write.

use async_trait::async_trait;
use kapi_apimachinery::ApiError;

use crate::attributes::{Attributes, Operation, Outcome};

/// An admission plugin. A plugin that only validates keeps the default `admit`; one that only
/// mutates keeps the default `validate`.
#[async_trait]
pub trait AdmissionPlugin: Send + Sync {
    /// kube's plugin name (`NamespaceLifecycle`, `ValidatingAdmissionWebhook`, ...).
    fn name(&self) -> &'static str;

    /// Whether the plugin looks at writes of this operation.
    fn handles(&self, operation: Operation) -> bool;

    /// Mutates the write (`attrs.object`); an error refuses it.
    async fn admit(&self, _attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        Ok(())
    }

    /// Validates the write, which no longer changes; an error refuses it.
    async fn validate(&self, _attrs: &Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        Ok(())
    }
}

/// The enabled plugins, in kube's order.
#[derive(Default)]
pub struct Chain {
    plugins: Vec<Box<dyn AdmissionPlugin>>,
    observer: Option<std::sync::Arc<dyn crate::AdmissionObserver>>,
}

impl Chain {
    /// A chain of `plugins`, run in the order given (build it from
    /// [`crate::enabled_plugins`]).
    pub fn new(plugins: Vec<Box<dyn AdmissionPlugin>>) -> Self {
        Chain { plugins, observer: None }
    }

    /// The chain reporting each plugin's time to `observer` (kube's
    /// `apiserver_admission_controller_admission_duration_seconds`).
    pub fn with_observer(mut self, observer: std::sync::Arc<dyn crate::AdmissionObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    fn observe(&self, plugin: &dyn AdmissionPlugin, step: &'static str, operation: Operation, rejected: bool, started: std::time::Instant) {
        if let Some(observer) = &self.observer {
            observer.plugin(plugin.name(), step, operation, rejected, started.elapsed());
        }
    }

    async fn admit_round(&self, attrs: &mut Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        let operation = attrs.operation;
        for plugin in self.plugins.iter().filter(|p| p.handles(operation)) {
            let started = std::time::Instant::now();
            let result = plugin.admit(attrs, outcome).await;
            self.observe(plugin.as_ref(), "admit", operation, result.is_err(), started);
            result?;
        }
        Ok(())
    }

    /// The plugins' names, in order (kube logs them at start).
    pub fn names(&self) -> Vec<&'static str> {
        self.plugins.iter().map(|p| p.name()).collect()
    }

    /// Whether any plugin handles `operation` (a write no plugin looks at skips admission).
    pub fn handles(&self, operation: Operation) -> bool {
        self.plugins.iter().any(|p| p.handles(operation))
    }

    /// The mutating phase: each plugin that handles the operation may change the object; if a
    /// plugin asks for it, every one runs a second time (kube's reinvocation), so that a
    /// plugin sees what later plugins changed.
    pub async fn admit(&self, attrs: &mut Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        self.admit_round(attrs, outcome).await?;
        if attrs.reinvocation.requested() {
            attrs.reinvocation.start_reinvoke();
            self.admit_round(attrs, outcome).await?;
        }
        Ok(())
    }

    /// The validating phase, after the object's own validation: no plugin changes it any more.
    pub async fn validate(&self, attrs: &Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        for plugin in self.plugins.iter().filter(|p| p.handles(attrs.operation)) {
            let started = std::time::Instant::now();
            let result = plugin.validate(attrs, outcome).await;
            self.observe(plugin.as_ref(), "validate", attrs.operation, result.is_err(), started);
            result?;
        }
        Ok(())
    }
}
