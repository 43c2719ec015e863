//! DefaultTolerationSeconds (kube's `plugin/pkg/admission/defaulttolerationseconds`): a Pod
//! that does not say how long it tolerates its node being not-ready or unreachable tolerates
//! it for 300 seconds, so that its eviction from a failed node waits that long.
//!
//! kube's `--default-not-ready-toleration-seconds` and `--default-unreachable-toleration-seconds`
//! are not flags of kapi yet: [`DefaultTolerationSeconds::with_seconds`] takes them.

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;
use serde_json::{json, Value};

/// The taint a node gets when its kubelet reports it not ready.
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The taint a node gets when the node controller cannot hear from it.
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

/// The plugin.
pub struct DefaultTolerationSeconds {
    not_ready: i64,
    unreachable: i64,
}

impl Default for DefaultTolerationSeconds {
    fn default() -> Self {
        Self::with_seconds(300, 300)
    }
}

impl DefaultTolerationSeconds {
    /// The plugin with kube's defaults, 300 seconds each.
    pub fn new() -> Self {
        Self::default()
    }

    /// The plugin with the values of kube's two flags.
    pub fn with_seconds(not_ready: i64, unreachable: i64) -> Self {
        DefaultTolerationSeconds { not_ready, unreachable }
    }
}

/// Whether `toleration` already covers `key`'s NoExecute taint (an empty key or effect
/// matches everything, as kube counts it).
fn covers(toleration: &Value, key: &str) -> bool {
    let field = |f: &str| toleration.get(f).and_then(Value::as_str).unwrap_or("");
    (field("key") == key || field("key").is_empty()) && (field("effect") == "NoExecute" || field("effect").is_empty())
}

#[async_trait]
impl AdmissionPlugin for DefaultTolerationSeconds {
    fn name(&self) -> &'static str {
        "DefaultTolerationSeconds"
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
    }

    async fn admit(&self, attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !attrs.is_core("pods") {
            return Ok(());
        }
        let Some(spec) = attrs.object.as_mut().and_then(|p| p.get_mut("spec")).and_then(Value::as_object_mut) else {
            return Ok(());
        };
        let existing: Vec<Value> = spec.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
        let mut added = Vec::new();
        for (key, seconds) in [(NOT_READY, self.not_ready), (UNREACHABLE, self.unreachable)] {
            if !existing.iter().any(|t| covers(t, key)) {
                added.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}));
            }
        }
        if !added.is_empty() {
            let mut tolerations = existing;
            tolerations.extend(added);
            spec.insert("tolerations".into(), Value::Array(tolerations));
        }
        Ok(())
    }
}
