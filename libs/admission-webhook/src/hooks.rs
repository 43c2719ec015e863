//! The webhooks of the Mutating- or ValidatingWebhookConfigurations in the watch cache, parsed
//! once per change of the configurations: every replica's cache follows the store, so a
//! configuration written anywhere takes effect here as soon as the cache has it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kapi_apimachinery::labels::LabelSelector;
use kapi_registry::catalog;
use kapi_registry::rest::RestStore;
use kapi_webhook::ClientConfig;
use serde_json::Value;

use crate::conditions::MatchConditions;

/// Which configurations a plugin reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookKind {
    /// MutatingWebhookConfigurations.
    Mutating,
    /// ValidatingWebhookConfigurations.
    Validating,
}

impl HookKind {
    fn resource(self) -> &'static str {
        match self {
            HookKind::Mutating => "mutatingwebhookconfigurations",
            HookKind::Validating => "validatingwebhookconfigurations",
        }
    }
}

/// One `rules[]` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    /// `operations` (`*` for all).
    pub operations: Vec<String>,
    /// `apiGroups`.
    pub api_groups: Vec<String>,
    /// `apiVersions`.
    pub api_versions: Vec<String>,
    /// `resources`, `resource/subresource` with `*` on either side.
    pub resources: Vec<String>,
    /// `scope`: `*` (None), `Cluster` or `Namespaced`.
    pub scope: Option<String>,
}

/// One webhook of a configuration, ready to match and call.
pub struct Hook {
    /// kube's accessor UID: `<configuration>/<webhook>/<index>`, unique across configurations.
    pub uid: String,
    /// The webhook's name (messages name it).
    pub name: String,
    /// The configuration's name.
    pub configuration: String,
    /// Where to call; an unusable clientConfig is an error when the webhook is called.
    pub client: Result<ClientConfig, String>,
    /// `rules`.
    pub rules: Vec<Rule>,
    /// `failurePolicy: Ignore` (kube's v1 default is Fail).
    pub ignore_failures: bool,
    /// `matchPolicy: Equivalent` (the v1 default).
    pub equivalent: bool,
    /// `namespaceSelector` (`{}`: everything).
    pub namespace_selector: Result<LabelSelector, String>,
    /// `objectSelector` (`{}`: everything).
    pub object_selector: Result<LabelSelector, String>,
    /// `sideEffects` (None when absent).
    pub side_effects: Option<String>,
    /// `timeoutSeconds` (default 10 s).
    pub timeout: Duration,
    /// `admissionReviewVersions`, in the webhook's order of preference.
    pub review_versions: Vec<String>,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks).
    pub reinvoke_if_needed: bool,
    /// `matchConditions`, compiled.
    pub conditions: MatchConditions,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array).map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect()).unwrap_or_default()
}

fn selector(v: Option<&Value>) -> Result<LabelSelector, String> {
    match v {
        // An absent selector selects everything, as kube's defaulting makes it `{}`.
        None | Some(Value::Null) => Ok(LabelSelector::everything()),
        Some(sel) => LabelSelector::from_json(sel),
    }
}

impl Hook {
    /// Reads the `index`th webhook of configuration `configuration`.
    pub fn parse(configuration: &str, index: usize, hook: &Value) -> Hook {
        let name = hook.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let rules = hook
            .get("rules")
            .and_then(Value::as_array)
            .map(|rules| {
                rules
                    .iter()
                    .map(|r| Rule {
                        operations: strings(r.get("operations")),
                        api_groups: strings(r.get("apiGroups")),
                        api_versions: strings(r.get("apiVersions")),
                        resources: strings(r.get("resources")),
                        scope: r.get("scope").and_then(Value::as_str).filter(|s| *s != "*").map(str::to_owned),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let client = match hook.get("clientConfig") {
            Some(config) => ClientConfig::from_json(config),
            None => Err("the webhook has no clientConfig".to_owned()),
        };
        let mut review_versions = strings(hook.get("admissionReviewVersions"));
        if review_versions.is_empty() {
            review_versions.push("v1".into());
        }
        Hook {
            uid: format!("{configuration}/{name}/{index}"),
            configuration: configuration.to_owned(),
            client,
            rules,
            ignore_failures: hook.get("failurePolicy").and_then(Value::as_str) == Some("Ignore"),
            equivalent: hook.get("matchPolicy").and_then(Value::as_str) != Some("Exact"),
            namespace_selector: selector(hook.get("namespaceSelector")),
            object_selector: selector(hook.get("objectSelector")),
            side_effects: hook.get("sideEffects").and_then(Value::as_str).map(str::to_owned),
            timeout: Duration::from_secs(hook.get("timeoutSeconds").and_then(Value::as_u64).unwrap_or(10)),
            review_versions,
            reinvoke_if_needed: hook.get("reinvocationPolicy").and_then(Value::as_str) == Some("IfNeeded"),
            conditions: MatchConditions::compile(hook.get("matchConditions")),
            name,
        }
    }
}

/// The webhooks of every configuration of one kind, in kube's order: configurations by name,
/// webhooks in their configuration's order.
pub struct HookSource {
    rest: RestStore,
    prefix: String,
    parsed: Mutex<Parsed>,
}

#[derive(Default)]
struct Parsed {
    /// Count and newest revision of the configurations parsed: any create, update or delete
    /// changes one of them.
    fingerprint: (usize, u64),
    hooks: Arc<Vec<Arc<Hook>>>,
}

impl HookSource {
    /// The source of `kind`'s configurations.
    pub fn new(rest: RestStore, kind: HookKind) -> HookSource {
        let prefix = catalog::find("admissionregistration.k8s.io", "v1", kind.resource()).map(|s| s.key_prefix()).unwrap_or_default();
        HookSource { rest, prefix, parsed: Mutex::default() }
    }

    /// The current webhooks.
    pub fn hooks(&self) -> Arc<Vec<Arc<Hook>>> {
        let Some(cache) = self.rest.caches().cache(&self.prefix) else { return Arc::default() };
        let (items, _) = cache.list(&self.prefix);
        let fingerprint = (items.len(), items.iter().map(|o| o.revision).max().unwrap_or(0));
        let mut parsed = self.parsed.lock().unwrap_or_else(|p| p.into_inner());
        if parsed.fingerprint == fingerprint {
            return parsed.hooks.clone();
        }
        let mut configurations: Vec<&Value> = items.iter().map(|o| o.object.as_ref()).collect();
        configurations.sort_by_key(|c| c.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned());
        let mut hooks = Vec::new();
        for configuration in configurations {
            let name = configuration.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            for (i, hook) in configuration.get("webhooks").and_then(Value::as_array).into_iter().flatten().enumerate() {
                hooks.push(Arc::new(Hook::parse(name, i, hook)));
            }
        }
        *parsed = Parsed { fingerprint, hooks: Arc::new(hooks) };
        parsed.hooks.clone()
    }
}
