//! What both webhook plugins hold: where their configurations come from and what calls and
//! matches them.

use std::sync::Arc;

use kapi_admission::{AdmissionObserver, EquivalentResources, Operation};
use kapi_apiextensions::cel::CelAuthorizer;
use kapi_registry::rest::RestStore;
use kapi_webhook::Client;

use crate::hooks::{HookKind, HookSource};

/// The parts of a webhook plugin.
pub(crate) struct Webhooks {
    pub source: HookSource,
    pub rest: RestStore,
    pub client: Client,
    pub authorizer: Option<Arc<dyn CelAuthorizer>>,
    pub equivalents: Option<Arc<dyn EquivalentResources>>,
    pub observer: Option<Arc<dyn AdmissionObserver>>,
}

impl Webhooks {
    pub fn new(
        kind: HookKind,
        rest: RestStore,
        client: Client,
        authorizer: Option<Arc<dyn CelAuthorizer>>,
        equivalents: Option<Arc<dyn EquivalentResources>>,
    ) -> Self {
        Webhooks { source: HookSource::new(rest.clone(), kind), rest, client, authorizer, equivalents, observer: None }
    }

    /// kube's webhooks see every operation but CONNECT; none when no webhook is configured.
    pub fn handles(&self, operation: Operation) -> bool {
        operation != Operation::Connect && !self.source.hooks().is_empty()
    }
}
