//! kube's `status.typeChecking`.

use serde_json::Value;

/// kube's `status.typeChecking` of a ValidatingAdmissionPolicy.
pub fn type_checking(_policy: &Value) -> Value {
    Value::Null
}
