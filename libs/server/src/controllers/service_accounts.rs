//! kube's serviceaccount and root-ca-cert-publisher controllers: every Active namespace has a
//! `default` ServiceAccount and a `kube-root-ca.crt` ConfigMap holding the cluster CA (what
//! pods' projected `kube-api-access-*` volumes mount). Deleting either brings it back; a
//! changed ConfigMap is put back. Terminating namespaces are left alone, as kube leaves them.

use std::sync::Arc;

use kapi_apimachinery::ApiError;
use kapi_registry::catalog::{self, ResourceSpec};
use kapi_registry::rest::{object_key, RestStore, WriteHooks};
use kapi_registry::strategy::{CatalogStrategy, WriteTarget};
use kapi_watch::EventType;
use serde_json::{json, Value};

use super::{follow, str_at, MANAGER};

/// The account every namespace has.
const DEFAULT_ACCOUNT: &str = "default";
/// kube's `RootCACertConfigMapName`.
const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
/// kube's annotation on that ConfigMap, and its text.
const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

struct Controller {
    rest: RestStore,
    /// Whether the serviceaccount controller runs.
    accounts: bool,
    /// The CA the root-ca-certificate-publisher publishes, when it runs.
    root_ca: Option<String>,
    namespaces: &'static ResourceSpec,
    accounts_spec: &'static ResourceSpec,
    configmaps: &'static ResourceSpec,
}

/// Starts the serviceaccount controller (`accounts`) and the root-ca-certificate-publisher
/// (`root_ca`: the CA to publish), one queue of namespaces: each reconcile ensures what runs.
pub fn start(ctx: &super::ControllerContext, accounts: bool, root_ca: Option<String>) {
    let (caches, rest) = (ctx.caches.clone(), ctx.rest.clone());
    let accounts_running = accounts;
    let (Some(namespaces), Some(accounts), Some(configmaps)) =
        (catalog::find("", "v1", "namespaces"), catalog::find("", "v1", "serviceaccounts"), catalog::find("", "v1", "configmaps"))
    else {
        tracing::error!("namespaces, serviceaccounts or configmaps are not served; no service-account controller");
        return;
    };
    let queue = ctx.queue();
    let on_namespace = queue.clone();
    tokio::spawn(follow(caches.clone(), namespaces, move |ty, ns| {
        if ty != EventType::Deleted && is_active(ns) {
            on_namespace.add(str_at(ns, "/metadata/name"));
        }
    }));
    let on_account = queue.clone();
    tokio::spawn(follow(caches.clone(), accounts, move |ty, sa| {
        if ty == EventType::Deleted && str_at(sa, "/metadata/name") == DEFAULT_ACCOUNT {
            on_account.add(str_at(sa, "/metadata/namespace"));
        }
    }));
    let on_configmap = queue.clone();
    tokio::spawn(follow(caches, configmaps, move |ty, cm| {
        if ty != EventType::Added && str_at(cm, "/metadata/name") == ROOT_CA_CONFIGMAP {
            on_configmap.add(str_at(cm, "/metadata/namespace"));
        }
    }));
    let controller = Controller { rest, accounts: accounts_running, root_ca, namespaces, accounts_spec: accounts, configmaps };
    tokio::spawn(async move {
        loop {
            let ns = queue.next().await;
            if let Err(e) = controller.sync(&ns).await {
                tracing::warn!(namespace = %ns, "service-account controller: {e}; retrying");
                queue.retry(ns);
            }
        }
    });
}


fn is_active(ns: &Value) -> bool {
    str_at(ns, "/status/phase") == "Active" && ns.pointer("/metadata/deletionTimestamp").is_none()
}

/// kube's controllers give up quietly on a namespace that is gone or going.
fn namespace_gone(e: &ApiError) -> bool {
    e.code == 404 || e.details.as_ref().is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating"))
}

impl Controller {
    fn cached(&self, spec: &ResourceSpec, ns: Option<&str>, name: &str) -> Option<Arc<Value>> {
        self.rest.caches().cache(&spec.key_prefix())?.get(&object_key(spec, ns, name)).map(|o| o.object)
    }

    async fn sync(&self, ns: &str) -> Result<(), ApiError> {
        if !self.cached(self.namespaces, None, ns).is_some_and(|n| is_active(&n)) {
            return Ok(());
        }
        if self.accounts && self.cached(self.accounts_spec, Some(ns), DEFAULT_ACCOUNT).is_none() {
            let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DEFAULT_ACCOUNT, "namespace": ns}});
            self.create(self.accounts_spec, ns, sa).await?;
        }
        let Some(root_ca) = &self.root_ca else { return Ok(()) };
        let data = json!({"ca.crt": root_ca});
        match self.cached(self.configmaps, Some(ns), ROOT_CA_CONFIGMAP) {
            None => {
                let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": ROOT_CA_CONFIGMAP, "namespace": ns, "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                    "data": data});
                self.create(self.configmaps, ns, cm).await
            }
            Some(cm) if current(&cm, &data) => Ok(()),
            Some(_) => self.put_back(ns, &data).await,
        }
    }

    /// Creates `obj`; one another replica (or an earlier round) made meanwhile is as good.
    async fn create(&self, spec: &'static ResourceSpec, ns: &str, obj: Value) -> Result<(), ApiError> {
        let track = crate::field_manager::tracker(spec, crate::field_manager::writer(spec, MANAGER.into(), ""));
        match self.rest.create(&CatalogStrategy(spec), Some(ns), obj, false, WriteHooks::tracking(track.as_deref())).await {
            Ok(_) => Ok(()),
            Err(e) if e.code == 409 || namespace_gone(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Restores the CA and the description on the stored ConfigMap, keeping what else it has.
    async fn put_back(&self, ns: &str, data: &Value) -> Result<(), ApiError> {
        let spec = self.configmaps;
        let track = crate::field_manager::tracker(spec, crate::field_manager::writer(spec, MANAGER.into(), ""));
        let hooks = WriteHooks::tracking(track.as_deref());
        let result = self
            .rest
            .update_with(&CatalogStrategy(spec), Some(ns), ROOT_CA_CONFIGMAP, WriteTarget::Main, false, hooks, |stored| {
                let mut cm = stored.clone();
                cm["data"] = data.clone();
                if !cm.pointer("/metadata/annotations").is_some_and(Value::is_object) {
                    cm["metadata"]["annotations"] = json!({});
                }
                cm["metadata"]["annotations"][DESCRIPTION_ANNOTATION] = json!(DESCRIPTION);
                Ok(cm)
            })
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) if namespace_gone(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// kube's check: exactly the CA as data, and a description (whatever it says).
fn current(cm: &Value, data: &Value) -> bool {
    cm.get("data") == Some(data) && !str_at(cm, &format!("/metadata/annotations/{}", DESCRIPTION_ANNOTATION.replace('/', "~1"))).is_empty()
}
