//! kube's EquivalentResourceMapper and object convertor as admission plugins use them: the
//! same resource under other versions (one storage, several served versions), and conversion of
//! an object between them. Webhooks and policies with `matchPolicy: Equivalent` are called for
//! a request through another version, with the object in the version their rules name.

use async_trait::async_trait;
use kapi_apimachinery::ApiError;
use serde_json::Value;

use crate::attributes::Gvx;

/// The server's answer to "which other resources are this one".
#[async_trait]
pub trait EquivalentResources: Send + Sync {
    /// The resources (group, version, plural) stored with `resource` and served under another
    /// version or group, with their kinds; `resource` itself excluded.
    fn equivalents(&self, resource: &Gvx, subresource: &str) -> Vec<(Gvx, Gvx)>;

    /// `object`, served as `from`, in the version of `to` (both resources of one storage).
    async fn convert(&self, object: Value, from: &Gvx, to: &Gvx) -> Result<Value, ApiError>;
}
