//! The pod subresources kube-apiserver serves by talking to the pod's kubelet: `log` (a GET
//! whose answer streams the kubelet's), and `exec`, `attach`, `portforward` (connect requests
//! upgraded to SPDY or WebSocket, whose bytes pass through both ways).
//!
//! The steps and their order are kube's (`ConnectResource`, `pkg/registry/core/pod/rest`,
//! `LogLocation`/`streamLocation` in `pkg/registry/core/pod/strategy.go`): options from the
//! query (400), for connect requests the `create` check on WebSocket upgrades (403), for logs
//! their validation (422); then the pod (404), its container (400), its node: a pod without one
//! answers exec, attach and portforward with 400 `pod <name> does not have a host assigned` and
//! log with an empty 204; then the Node's kubelet address, and the kubelet itself.

mod options;
pub mod proxy;

use http::StatusCode;
use kapi_apimachinery::{ApiError, GroupResource};
use kapi_auth::Decision;
use kapi_registry::catalog::ResourceSpec;
use kapi_registry::strategy::Strategy;
use serde_json::Value;

use crate::filters::authorization::attributes;
use crate::handlers::Caller;
use crate::query::Query;
use crate::request_info::RequestInfo;
use crate::response::{self, Body};
use crate::state::ApiServer;

use options::ConnectOptions;

/// Whether `spec`'s `subresource` is one of these (core pods' log, exec, attach, portforward).
pub fn serves(spec: &ResourceSpec, subresource: &str) -> bool {
    spec.group.is_empty() && spec.resource == "pods" && matches!(subresource, "log" | "exec" | "attach" | "portforward")
}

/// Serves one pod connect or log request; `strategy` is the pods'.
pub async fn serve(
    srv: &ApiServer,
    strategy: &dyn Strategy,
    info: &RequestInfo,
    ns: Option<&str>,
    query: &Query,
    caller: &Caller<'_>,
) -> Result<http::Response<Body>, ApiError> {
    let (sub, name) = (info.subresource.as_str(), info.name.as_str());
    let connect = sub != "log";
    // kube's connect handler refuses dry runs before anything else.
    if connect && query.has("dryRun") {
        return Err(ApiError::bad_request("dryRun is not supported"));
    }
    let options = ConnectOptions::parse(sub, query)?;
    if connect {
        authorize_create(srv, info, caller).await?;
    }
    if let ConnectOptions::Log(log) = &options {
        log.validate(name)?;
    }
    let pod = srv.rest.get(strategy, ns, name).await?;
    let container = match options.container() {
        Some(asked) => Some(container(&pod, name, asked)?),
        None => None,
    };
    let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default();
    if node.is_empty() {
        if connect {
            return Err(ApiError::bad_request(format!("pod {name} does not have a host assigned")));
        }
        // kube's log streamer without a location: no content.
        let mut resp = http::Response::new(response::full(Vec::new()));
        *resp.status_mut() = StatusCode::NO_CONTENT;
        return Ok(resp);
    }
    let nodes = srv.chain.scope("", "v1", "nodes").ok_or_else(|| ApiError::internal("nodes are not served"))?;
    let node = srv.rest.get(nodes.strategy(), None, node).await?;
    let address = srv.kubelet.address(&node).map_err(|e| e.into_api_error(""))?;
    let namespace = ns.unwrap_or_default();
    let path = match (&options, container) {
        (ConnectOptions::PortForward(_), _) => format!("/portForward/{namespace}/{name}"),
        (ConnectOptions::Log(_), Some(c)) => format!("/containerLogs/{namespace}/{name}/{c}"),
        (_, Some(c)) => format!("/{sub}/{namespace}/{name}/{c}"),
        (_, None) => return Err(ApiError::internal("no container for a container subresource")),
    };
    let query = options.kubelet_query();
    let target = if query.is_empty() { path } else { format!("{path}?{query}") };
    match &options {
        ConnectOptions::Log(log) => {
            proxy::stream_log(&srv.kubelet, &address, &target, log.insecure_skip_tls_verify_backend, name).await
        }
        _ => proxy::upgrade(&srv.kubelet, &address, &target, caller.head).await,
    }
}

/// kube 1.35's `AuthorizePodWebsocketUpgradeCreatePermission` (on by default): a WebSocket
/// upgrade is a GET, authorized as `get` by the filter, so exec, attach and portforward check
/// `create` as well, which SPDY's POST was authorized as. A denial is kube's
/// `NewForbidden(pods, name, reason)`.
async fn authorize_create(srv: &ApiServer, info: &RequestInfo, caller: &Caller<'_>) -> Result<(), ApiError> {
    if info.verb == "create" {
        return Ok(());
    }
    let mut attrs = attributes(info, caller.user);
    attrs.verb = "create".into();
    match srv.authorizer.authorize_async(&attrs).await {
        Decision::Allow(_) => Ok(()),
        Decision::Deny(reason) | Decision::NoOpinion(reason) => {
            Err(ApiError::forbidden_for(&GroupResource::new(&info.api_group, &info.resource), &info.name, &reason))
        }
    }
}

/// kube's `validateContainer`: the named container must be one of the pod's (init, regular or
/// ephemeral); without a name, the pod's only regular container.
fn container(pod: &Value, name: &str, asked: &str) -> Result<String, ApiError> {
    let names = |field: &str| -> Vec<String> {
        pod.pointer(&format!("/spec/{field}"))
            .and_then(Value::as_array)
            .map(|cs| cs.iter().filter_map(|c| c.get("name").and_then(Value::as_str)).map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let regular = names("containers");
    let all: Vec<String> = names("initContainers").into_iter().chain(regular.iter().cloned()).chain(names("ephemeralContainers")).collect();
    if !asked.is_empty() {
        return if all.iter().any(|c| c == asked) {
            Ok(asked.to_owned())
        } else {
            Err(ApiError::bad_request(format!("container {asked} is not valid for pod {name}")))
        };
    }
    match regular.as_slice() {
        [only] => Ok(only.clone()),
        [] => Err(ApiError::bad_request(format!("a container name must be specified for pod {name}"))),
        _ => Err(ApiError::bad_request(format!("a container name must be specified for pod {name}, choose one of: [{}]", all.join(" ")))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn container_is_the_only_one_or_must_be_named_among_all_kinds() {
        let one = json!({"spec": {"containers": [{"name": "app"}]}});
        assert_eq!(container(&one, "web", "").unwrap(), "app");
        let many = json!({"spec": {"initContainers": [{"name": "init"}], "containers": [{"name": "app"}, {"name": "side"}],
                                   "ephemeralContainers": [{"name": "debug"}]}});
        let err = container(&many, "web", "").unwrap_err();
        assert_eq!((err.code, err.message.as_str()), (400, "a container name must be specified for pod web, choose one of: [init app side debug]"));
        assert_eq!(container(&many, "web", "debug").unwrap(), "debug");
        assert_eq!(container(&many, "web", "nope").unwrap_err().message, "container nope is not valid for pod web");
        let none = json!({"spec": {"containers": []}});
        assert_eq!(container(&none, "web", "").unwrap_err().message, "a container name must be specified for pod web");
    }
}
