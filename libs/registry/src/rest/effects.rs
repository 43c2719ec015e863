//! Side effects a resource's writes carry beyond storing the object (kube's store decorators
//! `BeginCreate`, `BeginUpdate` and `AfterDelete`): a Service takes cluster IPs and node ports
//! before it is stored, and gives them back when the write fails or the Service goes.

use serde_json::Value;

use kapi_apimachinery::Result;

/// What a resource reserves around its writes.
#[async_trait::async_trait]
pub trait WriteEffects: Send + Sync {
    /// Reserves what the object to be created needs, filling it in; runs after validating
    /// admission, right before the store write.
    async fn begin_create(&self, obj: &mut Value, dry_run: bool) -> Result<Box<dyn PendingEffects>>;
    /// Reserves what the updated object needs beyond `old`'s, filling it in.
    async fn begin_update(&self, old: &Value, new: &mut Value, dry_run: bool) -> Result<Box<dyn PendingEffects>>;
    /// Gives back what a deleted object held.
    async fn after_delete(&self, obj: &Value);
}

/// The reservations of one write, settled once the store answered.
#[async_trait::async_trait]
pub trait PendingEffects: Send {
    /// `stored`: the write committed (release what the old object held and the new does not);
    /// otherwise give back what was reserved for it.
    async fn finish(self: Box<Self>, stored: bool);
}
