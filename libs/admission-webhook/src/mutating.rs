//! MutatingAdmissionWebhook: matching webhooks are called one after another, each seeing the
//! object as the previous ones patched it (JSONPatch answers). A webhook with
//! `reinvocationPolicy: IfNeeded` is called once more when a later webhook or plugin changed the
//! object after it ran (kube's reinvocation).

use std::collections::BTreeSet;

use std::sync::Arc;

use async_trait::async_trait;
use kapi_admission::{AdmissionObserver, AdmissionPlugin, Attributes, EquivalentResources, Operation, Outcome, WebhookRejection};
use kapi_apimachinery::patch::apply_json_patch;
use kapi_apiextensions::cel::CelAuthorizer;
use kapi_apimachinery::ApiError;
use kapi_registry::rest::RestStore;
use kapi_webhook::Client;
use serde_json::{json, Value};

use crate::call::{self, CallFailure};
use crate::hooks::HookKind;
use crate::plugin::Webhooks;
use crate::matching::{self, Equivalents, Invocation};

const PLUGIN: &str = "MutatingAdmissionWebhook";
/// kube's audit annotation prefixes of mutating webhooks.
const MUTATION_PREFIX: &str = "mutation.webhook.admission.k8s.io/";
const FAILED_OPEN_PREFIX: &str = "failed-open.mutation.webhook.admission.k8s.io/";

/// The plugin.
pub struct MutatingWebhooks {
    webhooks: Webhooks,
}

impl MutatingWebhooks {
    /// The plugin over the configurations in `rest`'s watch cache, calling through `client`;
    /// match conditions check with `authorizer` (without one, `authorizer` checks fail);
    /// `equivalents` serves `matchPolicy: Equivalent` (without it, only exact matches call).
    pub fn new(
        rest: RestStore,
        client: Client,
        authorizer: Option<Arc<dyn CelAuthorizer>>,
        equivalents: Option<Arc<dyn EquivalentResources>>,
    ) -> Self {
        MutatingWebhooks { webhooks: Webhooks::new(HookKind::Mutating, rest, client, authorizer, equivalents) }
    }

    /// The plugin reporting each call to `observer` (kube's webhook metrics).
    pub fn with_observer(mut self, observer: Arc<dyn AdmissionObserver>) -> Self {
        self.webhooks.observer = Some(observer);
        self
    }
}

/// What the plugin remembers between the two rounds (kube's webhookReinvokeContext).
#[derive(Default)]
struct Rounds {
    /// IfNeeded webhooks called since the object last changed.
    previously_invoked: BTreeSet<String>,
    /// Webhooks to call in the second round.
    reinvoke: BTreeSet<String>,
    /// The object as this plugin left it.
    last_output: Value,
}

impl Rounds {
    fn load(attrs: &Attributes) -> Rounds {
        let Some(saved) = attrs.reinvocation.value(PLUGIN) else { return Rounds::default() };
        let set = |k: &str| saved.get(k).and_then(Value::as_array).map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect()).unwrap_or_default();
        Rounds { previously_invoked: set("previouslyInvoked"), reinvoke: set("reinvoke"), last_output: saved.get("lastOutput").cloned().unwrap_or(Value::Null) }
    }

    fn save(self, attrs: &mut Attributes) {
        let saved = json!({"previouslyInvoked": self.previously_invoked, "reinvoke": self.reinvoke, "lastOutput": self.last_output});
        attrs.reinvocation.set_value(PLUGIN, saved);
    }

    /// A change after IfNeeded webhooks ran: they run again in the second round.
    fn require_reinvoking_previous(&mut self) {
        self.reinvoke.append(&mut self.previously_invoked);
    }
}

#[async_trait]
impl AdmissionPlugin for MutatingWebhooks {
    fn name(&self) -> &'static str {
        PLUGIN
    }

    fn handles(&self, operation: Operation) -> bool {
        self.webhooks.handles(operation)
    }

    async fn admit(&self, attrs: &mut Attributes, outcome: &mut Outcome) -> Result<(), ApiError> {
        if matching::exempt(attrs) {
            return Ok(());
        }
        let mut rounds = Rounds::load(attrs);
        let reinvoke = attrs.reinvocation.is_reinvoke();
        let round = usize::from(reinvoke);
        if reinvoke && attrs.object.as_ref().unwrap_or(&Value::Null) != &rounds.last_output {
            // Plugins after this one changed the object.
            rounds.require_reinvoking_previous();
        }
        let result = self.run(attrs, outcome, &mut rounds, round).await;
        rounds.last_output = attrs.object.clone().unwrap_or(Value::Null);
        rounds.save(attrs);
        result
    }
}

impl MutatingWebhooks {
    async fn run(&self, attrs: &mut Attributes, outcome: &mut Outcome, rounds: &mut Rounds, round: usize) -> Result<(), ApiError> {
        let hooks = self.webhooks.source.hooks();
        let equivalents = Equivalents::new(self.webhooks.equivalents.as_deref());
        for (index, hook) in hooks.iter().enumerate() {
            let Some(invocation) = matching::invocation(&self.webhooks.rest, hook, attrs, &equivalents)? else { continue };
            // In the second round, only webhooks that asked for it and saw an older object.
            if round == 1 && !rounds.reinvoke.contains(&hook.uid) {
                continue;
            }
            // The request in the version the webhook's rules name (kube's versioned attributes).
            let versioned = equivalents.versioned(attrs, &invocation).await?;
            let seen = versioned.as_ref().unwrap_or(attrs);
            if !matching::conditions_allow(hook, seen, attrs, self.webhooks.authorizer.as_ref())? {
                continue;
            }
            let mut changed = false;
            let started = std::time::Instant::now();
            let answer = call::call(&self.webhooks.client, hook, &call::Reviews::new(seen, attrs), true).await;
            let elapsed = started.elapsed();
            let observe = |rejection| call::observe(self.webhooks.observer.as_ref(), hook, "admit", attrs, rejection, elapsed);
            match answer {
                Ok(answer) => {
                    call::record(hook, &answer, outcome);
                    if !answer.allowed {
                        let e = call::denied(hook, answer.result.as_ref());
                        observe(Some((WebhookRejection::Denied, e.code)));
                        return Err(e);
                    }
                    observe(None);
                    if let Some(patch) = answer.patch.filter(|p| !is_empty_patch(p)) {
                        let Some(object) = seen.object.as_ref() else {
                            return Err(ApiError::internal(format!(
                                "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
                                hook.name
                            )));
                        };
                        let patched = apply_json_patch(object, &patch).map_err(|e| ApiError::internal(e.message))?;
                        changed = &patched != object;
                        if changed {
                            let patched = match &invocation {
                                Invocation::Exact => patched,
                                Invocation::Equivalent(resource, _) => equivalents.back(patched, resource, &attrs.resource).await?,
                            };
                            attrs.object = Some(patched);
                        }
                    }
                    let mutation = json!({"configuration": hook.configuration, "webhook": hook.name, "mutated": changed});
                    let _ = outcome.annotate(format!("{MUTATION_PREFIX}round_{round}_index_{index}"), mutation.to_string());
                }
                Err(CallFailure::Calling(reason)) if hook.ignore_failures => {
                    tracing::warn!(webhook = %hook.name, "failed calling webhook, failing open: {reason}");
                    let _ = outcome.annotate(format!("{FAILED_OPEN_PREFIX}round_{round}_index_{index}"), hook.name.clone());
                    observe(None);
                }
                Err(CallFailure::Calling(reason)) => {
                    tracing::warn!(webhook = %hook.name, "failed calling webhook, failing closed: {reason}");
                    let e = ApiError::internal(reason);
                    observe(Some((WebhookRejection::CallFailed, e.code)));
                    return Err(e);
                }
                Err(CallFailure::Rejected(e)) => {
                    observe(Some((WebhookRejection::Internal, e.code)));
                    return Err(e);
                }
            }
            if changed {
                rounds.require_reinvoking_previous();
                attrs.reinvocation.request();
            }
            if hook.reinvoke_if_needed {
                rounds.previously_invoked.insert(hook.uid.clone());
            }
        }
        Ok(())
    }
}

/// `[]` (or whitespace around it) patches nothing.
fn is_empty_patch(patch: &[u8]) -> bool {
    serde_json::from_slice::<Value>(patch).is_ok_and(|p| p.as_array().is_some_and(Vec::is_empty))
}
