//! TaintNodesByCondition (kube's `plugin/pkg/admission/nodetaint`): a new Node is tainted
//! `node.kubernetes.io/not-ready:NoSchedule`, so that nothing is scheduled onto it before
//! the node lifecycle controller has seen it ready and removed the taint.

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;
use serde_json::{json, Value};

use crate::default_toleration_seconds::NOT_READY;

/// The plugin.
#[derive(Default)]
pub struct TaintNodesByCondition;

impl TaintNodesByCondition {
    /// The plugin.
    pub fn new() -> Self {
        TaintNodesByCondition
    }
}

#[async_trait]
impl AdmissionPlugin for TaintNodesByCondition {
    fn name(&self) -> &'static str {
        "TaintNodesByCondition"
    }

    fn handles(&self, operation: Operation) -> bool {
        operation == Operation::Create
    }

    async fn admit(&self, attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !(attrs.resource.group.is_empty() && attrs.resource.name == "nodes" && attrs.subresource.is_empty()) {
            return Ok(());
        }
        let Some(node) = attrs.object.as_mut().and_then(Value::as_object_mut) else { return Ok(()) };
        let spec = node.entry("spec").or_insert_with(|| json!({}));
        let Some(spec) = spec.as_object_mut() else { return Ok(()) };
        let taints = spec.entry("taints").or_insert_with(|| json!([]));
        if !taints.is_array() {
            *taints = json!([]);
        }
        if let Some(taints) = taints.as_array_mut() {
            // kube's MatchTaint: the same key and effect, whatever the value.
            let present = taints.iter().any(|t| t.get("key").and_then(Value::as_str) == Some(NOT_READY) && t.get("effect").and_then(Value::as_str) == Some("NoSchedule"));
            if !present {
                taints.push(json!({"key": NOT_READY, "effect": "NoSchedule"}));
            }
        }
        Ok(())
    }
}
