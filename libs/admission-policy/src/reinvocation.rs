//! What MutatingAdmissionPolicy remembers between the chain's two mutating rounds (kube's
//! `policyReinvokeContext`): the object it last left, the `IfNeeded` invocations that ran,
//! and which of them run again because the object changed after them.

use std::collections::BTreeSet;

use kapi_admission::Attributes;
use serde_json::{json, Value};

const PLUGIN: &str = "MutatingAdmissionPolicy";

/// The state, kept in the request's [`kapi_admission::Reinvocation`] under the plugin's name.
#[derive(Debug, Default)]
pub(crate) struct ReinvokeState {
    last_output: Option<Value>,
    previously_invoked: BTreeSet<String>,
    reinvoke: BTreeSet<String>,
}

fn keys(v: &Value, key: &str) -> BTreeSet<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

impl ReinvokeState {
    pub(crate) fn load(attrs: &Attributes) -> Self {
        let Some(v) = attrs.reinvocation.value(PLUGIN) else { return Self::default() };
        ReinvokeState {
            last_output: v.get("lastOutput").filter(|o| !o.is_null()).cloned(),
            previously_invoked: keys(v, "previouslyInvoked"),
            reinvoke: keys(v, "reinvoke"),
        }
    }

    /// Remembers the object as the plugin leaves it.
    pub(crate) fn store(mut self, attrs: &mut Attributes) {
        self.last_output = attrs.object.clone();
        let v = json!({"lastOutput": self.last_output, "previouslyInvoked": self.previously_invoked, "reinvoke": self.reinvoke});
        attrs.reinvocation.set_value(PLUGIN, v);
    }

    /// Whether the object changed since the plugin last left it.
    pub(crate) fn changed_since_last(&self, object: Option<&Value>) -> bool {
        self.last_output.as_ref() != object
    }

    /// Every `IfNeeded` invocation so far runs again in the second round.
    pub(crate) fn require_reinvoking(&mut self) {
        let invoked = std::mem::take(&mut self.previously_invoked);
        self.reinvoke.extend(invoked);
    }

    pub(crate) fn should_reinvoke(&self, key: &str) -> bool {
        self.reinvoke.contains(key)
    }

    pub(crate) fn invoked(&mut self, key: String) {
        self.previously_invoked.insert(key);
    }
}
