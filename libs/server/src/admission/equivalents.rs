//! kube's EquivalentResourceMapper over the tiers: the resources that share a resource's storage
//! under other versions (a custom resource's other served versions, autoscaling/v1 and v2
//! HorizontalPodAutoscalers, core and events.k8s.io Events), and conversion between them
//! through storage, as the scopes convert requests.

use async_trait::async_trait;
use kapi_admission::attributes::Gvx;
use kapi_admission::EquivalentResources;
use kapi_apimachinery::ApiError;
use serde_json::Value;

use crate::tier::Chain;

/// Groups whose resources share storage with another group's (kube's cross-group equivalents).
const SHARED_ACROSS_GROUPS: &[(&str, &str, &str)] = &[("", "events.k8s.io", "events"), ("events.k8s.io", "", "events")];

/// The mapper.
pub struct TierEquivalents(pub Chain);

impl TierEquivalents {
    fn storage_of(&self, resource: &Gvx) -> Option<String> {
        self.0.scope(&resource.group, &resource.version, &resource.name).map(|s| s.spec().key_prefix())
    }
}

#[async_trait]
impl EquivalentResources for TierEquivalents {
    fn equivalents(&self, resource: &Gvx, _subresource: &str) -> Vec<(Gvx, Gvx)> {
        let Some(storage) = self.storage_of(resource) else { return Vec::new() };
        let mut groups = vec![resource.group.clone()];
        groups.extend(
            SHARED_ACROSS_GROUPS.iter().filter(|(from, _, r)| *from == resource.group && *r == resource.name).map(|(_, to, _)| (*to).to_owned()),
        );
        let mut found = Vec::new();
        for group in groups {
            let Some(served) = self.0.group(&group) else { continue };
            for version in served.versions {
                if group == resource.group && version == resource.version {
                    continue;
                }
                let Some(scope) = self.0.scope(&group, &version, &resource.name) else { continue };
                if scope.spec().key_prefix() != storage {
                    continue;
                }
                let kind = Gvx { group: group.clone(), version: version.clone(), name: scope.spec().kind.to_owned() };
                found.push((Gvx { group: group.clone(), version, name: resource.name.clone() }, kind));
            }
        }
        found
    }

    async fn convert(&self, object: Value, from: &Gvx, to: &Gvx) -> Result<Value, ApiError> {
        let scope = |r: &Gvx| {
            self.0.scope(&r.group, &r.version, &r.name).ok_or_else(|| ApiError::internal(format!("unable to convert to {}/{}: unknown resource", r.version, r.name)))
        };
        let (from_scope, to_scope) = (scope(from)?, scope(to)?);
        let stored = from_scope.convert_to_storage(object).await?;
        to_scope.convert_from_storage(stored).await
    }
}
