//! The `authorizer` of admission CEL expressions (webhook match conditions, policies), backed
//! by the server's own authorizer chain, so that an expression's check answers as the same
//! request through the API would.

use std::sync::Arc;

use kapi_apiextensions::cel::{AuthzAttributes, AuthzDecision, CelAuthorizer};
use kapi_auth::{Attributes, Authorizer, UserInfo};

/// The adapter.
pub struct ServerCelAuthorizer(pub Arc<dyn Authorizer>);

impl CelAuthorizer for ServerCelAuthorizer {
    fn authorize(&self, a: &AuthzAttributes) -> AuthzDecision {
        let attrs = Attributes {
            user: UserInfo { name: a.user.name.clone(), uid: a.user.uid.clone(), groups: a.user.groups.clone(), extra: a.user.extra.clone() },
            verb: a.verb.clone(),
            namespace: a.namespace.clone(),
            api_group: a.api_group.clone(),
            api_version: a.api_version.clone(),
            resource: a.resource.clone(),
            subresource: a.subresource.clone(),
            name: a.name.clone(),
            resource_request: a.resource_request,
            path: a.path.clone(),
            field_selector: a.field_selector.clone(),
        };
        let decision = self.0.authorize(&attrs);
        AuthzDecision { allowed: decision.is_allowed(), reason: decision.reason().to_owned(), error: None }
    }
}
