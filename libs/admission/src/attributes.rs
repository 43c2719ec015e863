//! What a plugin sees of a write (kube's `admission.Attributes`) and what it leaves behind.

use std::collections::BTreeMap;

use kapi_apimachinery::ApiError;
use kapi_auth::UserInfo;
use serde_json::Value;

/// kube's admission operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// POST, and PUT or apply that creates.
    Create,
    /// PUT, PATCH and apply of an existing object, and subresource writes.
    Update,
    /// DELETE and each object of a deletecollection.
    Delete,
    /// Connect subresources (exec, attach, portforward, proxy).
    Connect,
}

impl Operation {
    /// The name AdmissionReview and audit use (`CREATE`, ...).
    pub fn as_str(&self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// Group, version and a kind or resource name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Gvx {
    /// API group ("" for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind (for the object's kind) or plural resource (for the resource).
    pub name: String,
}

/// One write as admission sees it.
#[derive(Debug, Clone)]
pub struct Attributes {
    /// The object's kind.
    pub kind: Gvx,
    /// The resource written.
    pub resource: Gvx,
    /// The subresource ("" for the main resource).
    pub subresource: String,
    /// Namespace ("" for cluster-scoped objects).
    pub namespace: String,
    /// Name (may be empty on create with `generateName`).
    pub name: String,
    /// What the write does.
    pub operation: Operation,
    /// The request's options object (CreateOptions, UpdateOptions, DeleteOptions).
    pub options: Value,
    /// A dry run: plugins with side effects must not act.
    pub dry_run: bool,
    /// Who writes.
    pub user: UserInfo,
    /// The object to store (mutating plugins change it); None for deletes.
    pub object: Option<Value>,
    /// The stored object (updates and deletes).
    pub old_object: Option<Value>,
    /// Whether this is the second mutating round and what plugins remember between rounds.
    pub reinvocation: Reinvocation,
}

/// kube's ReinvocationContext: a mutating plugin whose change may matter to plugins that ran
/// before it asks for a second round ([`Reinvocation::request`]); the chain then runs every
/// mutating plugin once more with [`Reinvocation::is_reinvoke`] set. Plugins keep what they
/// need between rounds (which webhooks ran, the object they last saw) under their name.
#[derive(Debug, Clone, Default)]
pub struct Reinvocation {
    is_reinvoke: bool,
    requested: bool,
    values: BTreeMap<&'static str, Value>,
}

impl Reinvocation {
    /// Whether this is the second round.
    pub fn is_reinvoke(&self) -> bool {
        self.is_reinvoke
    }

    /// Asks for a second round of the mutating plugins.
    pub fn request(&mut self) {
        self.requested = true;
    }

    /// Whether a plugin asked for a second round.
    pub fn requested(&self) -> bool {
        self.requested
    }

    /// Starts the second round.
    pub fn start_reinvoke(&mut self) {
        self.is_reinvoke = true;
    }

    /// What `plugin` remembered from the first round.
    pub fn value(&self, plugin: &'static str) -> Option<&Value> {
        self.values.get(plugin)
    }

    /// Remembers `value` for `plugin`.
    pub fn set_value(&mut self, plugin: &'static str, value: Value) {
        self.values.insert(plugin, value);
    }
}

impl Attributes {
    /// The `resource.group` kube names resources by in messages (`deployments.apps`, `pods`).
    pub fn group_resource(&self) -> kapi_apimachinery::gvk::GroupResource {
        kapi_apimachinery::gvk::GroupResource { group: self.resource.group.clone(), resource: self.resource.name.clone() }
    }

    /// Whether the write is to the core-group `resource` itself, not a subresource (kube's
    /// `a.GetResource().GroupResource() == core.Resource(...) && a.GetSubresource() == ""`, the
    /// test most built-in plugins start with).
    pub fn is_core(&self, resource: &str) -> bool {
        self.subresource.is_empty() && self.resource.group.is_empty() && self.resource.name == resource
    }

    /// kube's `admission.NewForbidden`: the write is refused with 403 and the plugin's reason.
    pub fn forbidden(&self, reason: &str) -> ApiError {
        let name = if self.name.is_empty() { self.object.as_ref().and_then(generate_name).unwrap_or_default() } else { self.name.clone() };
        ApiError::forbidden_for(&self.group_resource(), &name, reason)
    }
}

fn generate_name(obj: &Value) -> Option<String> {
    obj.pointer("/metadata/generateName").and_then(Value::as_str).map(str::to_owned)
}

/// What plugins leave besides their verdict: `Warning` headers for the client and audit
/// annotations for the audit log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Warnings, in the order plugins added them, without duplicates.
    pub warnings: Vec<String>,
    /// Audit annotations by key.
    pub annotations: BTreeMap<String, String>,
}

/// An audit annotation a plugin tried to overwrite with another value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
// kube's text, its spelling included.
#[error("admission annotations are not allowd to be overwritten, key:{key:?}, old value: {old}, new value: {new}")]
pub struct AnnotationConflict {
    /// The key.
    pub key: String,
    /// The value it has.
    pub old: String,
    /// The value refused.
    pub new: String,
}

impl Outcome {
    /// Adds a warning for the client (kube's `warning.AddWarning`: the same text once).
    pub fn warn(&mut self, text: impl Into<String>) {
        let text = text.into();
        if !self.warnings.contains(&text) {
            self.warnings.push(text);
        }
    }

    /// Adds an audit annotation; setting a key again to another value is refused, as kube's
    /// `AddAnnotation` refuses it.
    pub fn annotate(&mut self, key: impl Into<String>, value: impl Into<String>) -> Result<(), AnnotationConflict> {
        let (key, value) = (key.into(), value.into());
        match self.annotations.get(&key) {
            Some(old) if *old != value => Err(AnnotationConflict { key, old: old.clone(), new: value }),
            Some(_) => Ok(()),
            None => {
                self.annotations.insert(key, value);
                Ok(())
            }
        }
    }
}
