//! DefaultIngressClass (kube's `plugin/pkg/admission/network/defaultingressclass`): a new
//! Ingress that names no class gets the default IngressClass.

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::ApiError;
use kapi_registry::rest::RestStore;
use serde_json::Value;

use crate::lookup;

/// The annotation that marks an IngressClass as the default.
pub const DEFAULT_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";

/// The plugin.
pub struct DefaultIngressClass {
    rest: RestStore,
}

impl DefaultIngressClass {
    /// The plugin over `rest`'s IngressClass cache.
    pub fn new(rest: RestStore) -> Self {
        DefaultIngressClass { rest }
    }
}

#[async_trait]
impl AdmissionPlugin for DefaultIngressClass {
    fn name(&self) -> &'static str {
        "DefaultIngressClass"
    }

    fn handles(&self, operation: Operation) -> bool {
        operation == Operation::Create
    }

    async fn admit(&self, attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if !(attrs.resource.group == "networking.k8s.io" && attrs.resource.name == "ingresses" && attrs.subresource.is_empty()) {
            return Ok(());
        }
        let Some(ingress) = attrs.object.as_ref() else { return Ok(()) };
        // A class by field or by the older annotation is the user's choice.
        if ingress.pointer("/spec/ingressClassName").is_some_and(|c| !c.is_null())
            || ingress.pointer("/metadata/annotations/kubernetes.io~1ingress.class").is_some()
        {
            return Ok(());
        }
        let spec = lookup::spec("networking.k8s.io", "v1", "ingressclasses")?;
        let classes = lookup::list(&self.rest, spec, None);
        let Some(default) = lookup::newest_marked(&classes, &[DEFAULT_ANNOTATION]) else { return Ok(()) };
        if let Some(spec) = attrs.object.as_mut().and_then(|i| i.get_mut("spec")).and_then(Value::as_object_mut) {
            spec.insert("ingressClassName".into(), Value::String(default));
        }
        Ok(())
    }
}
