//! kapi's post-start hooks, each under kube-apiserver's name for the same job, so
//! `/readyz?verbose` reads as it does on kube:
//!
//! - `start-system-namespaces-controller`: `kube-system`, `kube-public`, `kube-node-lease`;
//! - `bootstrap-controller`: the `default` namespace and the `kubernetes` Service, then the
//!   endpoint controller (its address is added once `/readyz` passes, as kube's);
//! - `rbac/bootstrap-roles`: the default roles and bindings;
//! - `start-cluster-authentication-info-controller`: `kube-system/extension-apiserver-authentication`,
//!   the CAs and request-header names extension API servers trust;
//! - `start-kube-apiserver-identity-lease-controller`: this replica's Lease;
//! - with `--enable-priority-and-fairness`: `priority-and-fairness-config-producer` (kube's
//!   FlowSchemas and PriorityLevelConfigurations kept stored), `priority-and-fairness-config-consumer`
//!   (the configuration in force follows the stored objects) and `priority-and-fairness-filter`
//!   (done once the filter applies the stored configuration).
//!
//! All are idempotent and safe from several replicas at once. They retry while storage is busy;
//! one that still fails after [`HOOK_BUDGET`] ends the process, as a failed kube post-start hook
//! does.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use crate::endpoints::EndpointController;
use crate::lifecycle::{HookError, PostStartHook, PostStartHooks};
use crate::state::ApiServer;
use crate::flow_control::{self, FlowControl};
use crate::{bootstrap, rbac_bootstrap};
use kapi_registry::rest::RestStore;
use kapi_registry::service_alloc::ServiceNetwork;

/// How long a failing hook is retried before the process gives up.
pub const HOOK_BUDGET: Duration = Duration::from_secs(60);

/// The registered hooks, waiting for the server they run against.
#[derive(Debug)]
pub struct PostStart {
    system_namespaces: PostStartHook,
    bootstrap_controller: PostStartHook,
    bootstrap_roles: PostStartHook,
    authentication_info: (PostStartHook, bootstrap::ClusterAuthentication),
    priority_classes: PostStartHook,
    identity_lease: Option<PostStartHook>,
    flow_control: Option<FlowControlHooks>,
}

/// The hooks of API Priority and Fairness.
#[derive(Debug)]
struct FlowControlHooks {
    producer: PostStartHook,
    consumer: PostStartHook,
    filter: PostStartHook,
}

impl PostStart {
    /// Registers kapi's hooks (the identity lease only with the lease endpoint reconciler, the
    /// flow-control ones only with priority and fairness).
    pub fn register(hooks: &mut PostStartHooks, endpoint_leases: bool, priority_and_fairness: bool, authentication: bootstrap::ClusterAuthentication) -> Self {
        Self {
            system_namespaces: hooks.register("start-system-namespaces-controller"),
            bootstrap_controller: hooks.register("bootstrap-controller"),
            bootstrap_roles: hooks.register("rbac/bootstrap-roles"),
            authentication_info: (hooks.register("start-cluster-authentication-info-controller"), authentication),
            priority_classes: hooks.register("scheduling/bootstrap-system-priority-classes"),
            identity_lease: endpoint_leases.then(|| hooks.register("start-kube-apiserver-identity-lease-controller")),
            flow_control: priority_and_fairness.then(|| FlowControlHooks {
                producer: hooks.register("priority-and-fairness-config-producer"),
                consumer: hooks.register("priority-and-fairness-config-consumer"),
                filter: hooks.register("priority-and-fairness-filter"),
            }),
        }
    }

    /// Runs every hook in its own task; a task's error is fatal to the server.
    pub fn spawn(
        self,
        srv: &Arc<ApiServer>,
        secure_port: u16,
        network: &ServiceNetwork,
        endpoints: Option<Arc<EndpointController>>,
    ) -> JoinSet<Result<(), HookError>> {
        let mut tasks = JoinSet::new();
        let rest = srv.rest.clone();
        let namespaces = self.system_namespaces.clone();
        tasks.spawn({
            let rest = rest.clone();
            async move { self.system_namespaces.run(HOOK_BUDGET, || bootstrap::system_namespaces(&rest)).await }
        });
        tasks.spawn({
            let (rest, endpoints, network) = (rest.clone(), endpoints.clone(), network.clone());
            async move {
                self.bootstrap_controller.run(HOOK_BUDGET, || bootstrap::kubernetes_service(&rest, secure_port, &network)).await?;
                // kube's bootstrap controller keeps the Service: one deleted comes back.
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(bootstrap::KUBERNETES_SERVICE_INTERVAL).await;
                        if let Err(e) = bootstrap::kubernetes_service(&rest, secure_port, &network).await {
                            tracing::warn!("keeping the kubernetes Service: {e}");
                        }
                    }
                });
                if let Some(controller) = endpoints {
                    controller.start();
                }
                Ok(())
            }
        });
        tasks.spawn({
            let rest = rest.clone();
            async move {
                let policy = match kapi_auth::rbac::bootstrap_policy() {
                    Ok(policy) => policy,
                    Err(e) => return Err(HookError::PostStart { name: "rbac/bootstrap-roles".into(), reason: e.to_string() }),
                };
                self.bootstrap_roles.run(HOOK_BUDGET, || rbac_bootstrap::run(&rest, &policy)).await
            }
        });
        tasks.spawn({
            let rest = rest.clone();
            async move { self.priority_classes.run(HOOK_BUDGET, || bootstrap::system_priority_classes(&rest)).await }
        });
        tasks.spawn({
            let (rest, namespaces) = (rest.clone(), namespaces.clone());
            let (hook, info) = self.authentication_info;
            async move {
                // The ConfigMap lives in kube-system.
                namespaces.finished().await;
                hook.run(HOOK_BUDGET, || bootstrap::cluster_authentication_info(&rest, &info)).await
            }
        });
        if let (Some(hooks), Some(fc)) = (self.flow_control, srv.flow_control.clone()) {
            spawn_flow_control(&mut tasks, hooks, rest.clone(), fc);
        }
        if let (Some(hook), Some(controller)) = (self.identity_lease, endpoints) {
            tasks.spawn(async move {
                // The lease lives in kube-system.
                namespaces.finished().await;
                hook.run(HOOK_BUDGET, || controller.acquire_lease()).await
            });
        }
        tasks
    }
}

/// The flow-control hooks: the consumer loads the stored configuration (the filter's hook is
/// done then), the producer ensures kube's objects once and then keeps them.
fn spawn_flow_control(tasks: &mut JoinSet<Result<(), HookError>>, hooks: FlowControlHooks, rest: RestStore, fc: Arc<FlowControl>) {
    // Seats move between levels by their demand from now on.
    tokio::spawn(flow_control::borrowing::run(Arc::downgrade(&fc)));
    tasks.spawn({
        let (rest, fc) = (rest.clone(), fc.clone());
        async move {
            hooks.consumer.run(HOOK_BUDGET, || flow_control::controller::start(rest.clone(), fc.clone())).await?;
            hooks.filter.run(HOOK_BUDGET, || std::future::ready(Ok::<(), HookError>(()))).await
        }
    });
    tasks.spawn(async move {
        hooks.producer.run(HOOK_BUDGET, || flow_control::producer::ensure_all(&rest)).await?;
        tokio::spawn(flow_control::producer::keep(rest, fc));
        Ok(())
    });
}
