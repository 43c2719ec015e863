//! The authenticator and authorizer chains, as kube-apiserver builds them from its flags.

use super::*;

/// kube's authenticator chain: request-header, x509, bearer tokens; then anonymous when enabled.
pub(super) fn authenticator(
    opts: &Options,
    tokens: Arc<dyn TokenAuthenticator>,
    api_audiences: Vec<String>,
) -> Result<Arc<dyn Authenticator>, StartError> {
    let mut chain: Vec<Box<dyn Authenticator>> = Vec::new();
    if opts.requestheader_client_ca_file.is_some() {
        let rh = RequestHeaderAuthenticator::new(&opts.requestheader).map_err(|e| config_error("--requestheader-*", e))?;
        chain.push(Box::new(rh));
    }
    chain.push(Box::new(X509Authenticator));
    chain.push(Box::new(BearerTokenAuthenticator::new(tokens, api_audiences)));
    let union: Box<dyn Authenticator> = Box::new(UnionAuthenticator::new(chain));
    Ok(if opts.anonymous_auth { Arc::new(AnonymousFallback::new(union)) } else { Arc::from(union) })
}

/// kube's authorizer chain: `system:masters` first, then each `--authorization-mode` in order.
pub(super) type Authorizers = (Arc<dyn Authorizer>, Option<RbacAuthorizer>, Option<kapi_auth::node::NodeAuthorizer>);

pub(super) fn authorizer(
    modes: &[AuthorizationMode],
    webhooks: &[crate::auth_webhooks::authorizer::WebhookSettings],
    client: &kapi_webhook::Client,
) -> Result<Authorizers, StartError> {
    if modes.is_empty() {
        return Err(StartError::Config("at least one --authorization-mode must be given".into()));
    }
    let (mut rbac, mut node) = (None, None);
    let mut chain: Vec<Box<dyn Authorizer>> = vec![Box::new(PrivilegedGroups::new([kapi_auth::user::SYSTEM_MASTERS]))];
    for mode in modes {
        match mode {
            AuthorizationMode::AlwaysAllow => chain.push(Box::new(AlwaysAllow)),
            AuthorizationMode::AlwaysDeny => chain.push(Box::new(AlwaysDeny)),
            AuthorizationMode::Rbac => {
                let authz = rbac.get_or_insert_with(RbacAuthorizer::new).clone();
                chain.push(Box::new(authz));
            }
            AuthorizationMode::Node => {
                if node.is_none() {
                    node = Some(kapi_auth::node::NodeAuthorizer::new().map_err(StartError::Config)?);
                }
                chain.extend(node.clone().map(|n| Box::new(n) as Box<dyn Authorizer>));
            }
            AuthorizationMode::Webhook(i) => {
                let settings = webhooks.get(*i).cloned().ok_or_else(|| {
                    StartError::Config(
                        "authorization-mode Webhook's authorization config file not passed (--authorization-webhook-config-file)".into(),
                    )
                })?;
                let name = settings.name.clone();
                let webhook = crate::auth_webhooks::authorizer::WebhookAuthorizer::new(client.clone(), settings)
                    .map_err(|e| StartError::Config(format!("authorizer {name}: {e}")))?;
                chain.push(Box::new(webhook));
            }
        }
    }
    Ok((Arc::new(UnionAuthorizer::new(chain)), rbac, node))
}
