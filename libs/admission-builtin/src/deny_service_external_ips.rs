//! DenyServiceExternalIPs (kube's `plugin/pkg/admission/network/denyserviceexternalips`): no
//! new `spec.externalIPs` on a Service (CVE-2020-8554: a tenant's Service could capture
//! another's traffic); what a Service already has may stay or shrink.

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;
use serde_json::Value;

/// The plugin.
#[derive(Default)]
pub struct DenyServiceExternalIPs;

impl DenyServiceExternalIPs {
    /// The plugin.
    pub fn new() -> Self {
        DenyServiceExternalIPs
    }
}

fn external_ips(svc: Option<&Value>) -> Vec<&str> {
    svc.and_then(|s| s.pointer("/spec/externalIPs"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[async_trait]
impl AdmissionPlugin for DenyServiceExternalIPs {
    fn name(&self) -> &'static str {
        "DenyServiceExternalIPs"
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
    }

    async fn validate(&self, attrs: &Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !attrs.is_core("services") {
            return Ok(());
        }
        let old = external_ips(attrs.old_object.as_ref());
        if external_ips(attrs.object.as_ref()).iter().all(|ip| old.contains(ip)) {
            return Ok(());
        }
        Err(attrs.forbidden("use of external IPs is denied by admission control"))
    }
}
