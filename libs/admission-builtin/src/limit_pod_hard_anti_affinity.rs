//! LimitPodHardAntiAffinityTopology (kube's `plugin/pkg/admission/antiaffinity`): a Pod's
//! required anti-affinity may only spread it across hosts (`kubernetes.io/hostname`), so that
//! one tenant cannot claim a whole zone against everyone else's pods.

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;
use serde_json::Value;

const HOSTNAME: &str = "kubernetes.io/hostname";

/// The plugin.
#[derive(Default)]
pub struct LimitPodHardAntiAffinityTopology;

impl LimitPodHardAntiAffinityTopology {
    /// The plugin.
    pub fn new() -> Self {
        LimitPodHardAntiAffinityTopology
    }
}

#[async_trait]
impl AdmissionPlugin for LimitPodHardAntiAffinityTopology {
    fn name(&self) -> &'static str {
        "LimitPodHardAntiAffinityTopology"
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
    }

    async fn validate(&self, attrs: &Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !attrs.is_core("pods") {
            return Ok(());
        }
        let terms = attrs
            .object
            .as_ref()
            .and_then(|p| p.pointer("/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution"))
            .and_then(Value::as_array);
        for term in terms.into_iter().flatten() {
            let key = term.get("topologyKey").and_then(Value::as_str).unwrap_or("");
            if key != HOSTNAME {
                return Err(attrs.forbidden(&format!(
                    "affinity.PodAntiAffinity.RequiredDuringScheduling has TopologyKey {key} but only key {HOSTNAME} is allowed"
                )));
            }
        }
        Ok(())
    }
}
