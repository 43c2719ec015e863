//! One write's admission: the attributes the handler knows (who, what resource, which
//! operation and options), completed by the store with the objects of each attempt, and the
//! warnings and audit annotations the plugins leave for the response.

use std::sync::Mutex;

use async_trait::async_trait;
use kapi_admission::attributes::Gvx;
use kapi_admission::{Attributes, Chain, Operation, Outcome};
use kapi_apimachinery::ApiError;
use kapi_auth::UserInfo;
use kapi_registry::rest::StoreAdmission;
use serde_json::Value;

use crate::request_info::RequestInfo;
use crate::scope::ResourceScope;

/// What admission sees of the stored object: the object itself, or its Scale (kube admits
/// `scale` writes as autoscaling/v1 Scale objects).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The object, in the request's version.
    Object,
    /// The object's Scale.
    Scale,
    /// A request body of its own kind that the store does not keep (a Binding, a
    /// TokenRequest), admitted with [`RequestAdmission::admit_object`]: group, version, kind.
    Body(&'static str, &'static str, &'static str),
}

/// Admission of one request's write, handed to the store.
pub struct RequestAdmission<'a> {
    chain: &'a Chain,
    scope: &'a dyn ResourceScope,
    base: Attributes,
    view: View,
    outcome: Mutex<Outcome>,
    audit: Option<crate::filters::audit::AuditHandle>,
}

/// What the handler tells admission about the request.
pub struct Request<'a> {
    /// The routed request (group, version, resource, subresource, namespace, name).
    pub info: &'a RequestInfo,
    /// The requester.
    pub user: &'a UserInfo,
    /// The operation (a PUT that creates is admitted as Create by the store's call).
    pub operation: Operation,
    /// kube's options object of the verb (CreateOptions, UpdateOptions, PatchOptions, DeleteOptions).
    pub options: Value,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// The request's audit event, which gets the plugins' annotations.
    pub audit: Option<crate::filters::audit::AuditHandle>,
}

impl<'a> RequestAdmission<'a> {
    /// The admission of `request` on `scope`'s resource.
    pub fn new(chain: &'a Chain, scope: &'a dyn ResourceScope, request: Request<'_>, view: View) -> Self {
        let info = request.info;
        let kind = match view {
            View::Scale => Gvx { group: "autoscaling".into(), version: "v1".into(), name: "Scale".into() },
            View::Body(group, version, kind) => Gvx { group: group.into(), version: version.into(), name: kind.into() },
            View::Object => Gvx { group: info.api_group.clone(), version: info.api_version.clone(), name: scope.spec().kind.to_owned() },
        };
        let base = Attributes {
            kind,
            resource: Gvx { group: info.api_group.clone(), version: info.api_version.clone(), name: info.resource.clone() },
            subresource: info.subresource.clone(),
            namespace: if scope.spec().namespaced { info.namespace.clone() } else { String::new() },
            name: info.name.clone(),
            operation: request.operation,
            options: request.options,
            dry_run: request.dry_run,
            user: request.user.clone(),
            object: None,
            old_object: None,
            reinvocation: Default::default(),
        };
        RequestAdmission { chain, scope, base, view, outcome: Mutex::default(), audit: request.audit }
    }

    /// The warnings the plugins left, for the response's `Warning` headers.
    pub fn warnings(&self) -> Vec<String> {
        self.outcome.lock().map(|o| o.warnings.clone()).unwrap_or_default()
    }

    /// Admits a write the store does not make (binding, token requests): both phases on
    /// `object`, which mutating plugins may change.
    pub async fn admit_object(&self, object: &mut Value) -> Result<(), ApiError> {
        let mut attrs = self.base.clone();
        attrs.object = Some(std::mem::take(object));
        let result = self.run_mutating(&mut attrs).await;
        *object = attrs.object.take().unwrap_or_default();
        result?;
        attrs.object = Some(object.clone());
        self.run_validating(&attrs).await
    }

    /// A stored object as admission sees it: in the request's version, or its Scale.
    async fn external(&self, stored: &Value) -> Result<Value, ApiError> {
        match self.view {
            View::Scale => Ok(self.scope.scale_of(stored)),
            View::Object if self.scope.converts() => self.scope.convert_from_storage(stored.clone()).await,
            View::Object | View::Body(..) => Ok(stored.clone()),
        }
    }

    fn attributes(&self, operation: Operation, name: &str) -> Attributes {
        let mut attrs = self.base.clone();
        attrs.operation = operation;
        if attrs.name.is_empty() && operation != Operation::Delete {
            name.clone_into(&mut attrs.name);
        }
        attrs
    }

    async fn run_mutating(&self, attrs: &mut Attributes) -> Result<(), ApiError> {
        let mut outcome = Outcome::default();
        let started = std::time::Instant::now();
        let span = kapi_otel::Span::child("Admit", kapi_otel::SpanKind::Internal, || phase_attributes(attrs));
        let result = kapi_otel::within(span.as_ref(), self.chain.admit(attrs, &mut outcome)).await;
        drop(span);
        crate::metrics::admission_step("admit", attrs.operation.as_str(), result.is_err(), started);
        self.merge(outcome);
        result
    }

    async fn run_validating(&self, attrs: &Attributes) -> Result<(), ApiError> {
        let mut outcome = Outcome::default();
        let started = std::time::Instant::now();
        let result = kapi_otel::traced("Validate", || phase_attributes(attrs), self.chain.validate(attrs, &mut outcome)).await;
        crate::metrics::admission_step("validate", attrs.operation.as_str(), result.is_err(), started);
        self.merge(outcome);
        result
    }

    /// Keeps what an attempt left; a retried write repeats the same warnings once.
    fn merge(&self, outcome: Outcome) {
        let Ok(mut kept) = self.outcome.lock() else { return };
        for warning in outcome.warnings {
            kept.warn(warning);
        }
        for (key, value) in outcome.annotations {
            if let Some(audit) = &self.audit {
                audit.annotate(key.clone(), value.clone());
            }
            // A retry may compute another value; the last attempt's is the one stored.
            kept.annotations.insert(key, value);
        }
    }
}

impl RequestAdmission<'_> {
    /// The attributes of a create (`old` None) or update of `new`, with both objects as
    /// admission sees them; None when no plugin looks at the operation.
    async fn write_attributes(&self, old: Option<&Value>, new: &Value) -> Result<Option<Attributes>, ApiError> {
        let operation = operation_of(old, self.base.operation);
        if !self.chain.handles(operation) {
            return Ok(None);
        }
        let mut attrs = self.attributes(operation, name_of(new));
        attrs.old_object = match old {
            Some(old) => Some(self.external(old).await?),
            None => None,
        };
        attrs.object = Some(self.external(new).await?);
        Ok(Some(attrs))
    }
}

/// The attributes of an admission phase's span (mutating `Admit`, validating `Validate`).
fn phase_attributes(attrs: &Attributes) -> Vec<kapi_otel::KeyValue> {
    use kapi_otel::KeyValue;
    vec![
        KeyValue::new("operation", attrs.operation.as_str()),
        KeyValue::new("resource", attrs.resource.name.clone()),
        KeyValue::new("subresource", attrs.subresource.clone()),
    ]
}

fn operation_of(old: Option<&Value>, base: Operation) -> Operation {
    if old.is_none() {
        Operation::Create
    } else {
        base
    }
}

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
}

#[async_trait]
impl StoreAdmission for RequestAdmission<'_> {
    async fn mutate(&self, old: Option<&Value>, new: &mut Value) -> Result<(), ApiError> {
        let Some(mut attrs) = self.write_attributes(old, new).await? else { return Ok(()) };
        self.run_mutating(&mut attrs).await?;
        let Some(admitted) = attrs.object.take() else { return Ok(()) };
        *new = match self.view {
            View::Scale => self.scope.apply_scale(new, &admitted)?,
            View::Object if self.scope.converts() => self.scope.convert_to_storage(admitted).await?,
            View::Object | View::Body(..) => admitted,
        };
        Ok(())
    }

    async fn validate(&self, old: Option<&Value>, new: &Value) -> Result<(), ApiError> {
        match self.write_attributes(old, new).await? {
            Some(attrs) => self.run_validating(&attrs).await,
            None => Ok(()),
        }
    }

    async fn delete(&self, old: &Value) -> Result<(), ApiError> {
        if !self.chain.handles(Operation::Delete) {
            return Ok(());
        }
        let mut attrs = self.attributes(Operation::Delete, "");
        attrs.old_object = Some(self.external(old).await?);
        self.run_mutating(&mut attrs).await?;
        self.run_validating(&attrs).await
    }
}
