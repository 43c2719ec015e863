//! A webhook's `matchConditions`: CEL expressions over `object`, `oldObject`, `request` and
//! `authorizer`; the webhook is called only when every one is true. An expression that fails
//! to evaluate refuses the request (kube fails closed here, whatever the failurePolicy).

use kapi_admission::Attributes;
use serde_json::Value;

/// The compiled conditions of one webhook.
pub struct MatchConditions {
    conditions: Vec<(String, String)>,
}

impl MatchConditions {
    /// Compiles `matchConditions` (validation refused bad expressions when the configuration
    /// was written).
    pub fn compile(conditions: Option<&Value>) -> MatchConditions {
        let conditions = conditions
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|c| {
                        let text = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
                        (text("name"), text("expression"))
                    })
                    .collect()
            })
            .unwrap_or_default();
        MatchConditions { conditions }
    }

    /// Whether the webhook should be called: Ok(false) when a condition is false, Err with
    /// kube's text when one cannot be evaluated.
    pub fn matches(&self, _attrs: &Attributes) -> Result<bool, String> {
        match self.conditions.first() {
            None => Ok(true),
            Some((name, _)) => Err(format!("matchCondition {name:?}: CEL match conditions are not evaluated by kapi yet")),
        }
    }
}
