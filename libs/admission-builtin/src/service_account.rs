//! ServiceAccount (kube's `plugin/pkg/admission/serviceaccount`): a new Pod runs as a
//! ServiceAccount that exists (`default` unless it names one), gets that account's image pull
//! secrets, and, unless the pod or the account opts out, the projected `kube-api-access-*`
//! volume (a bound token, the cluster CA from `kube-root-ca.crt`, the namespace) mounted in
//! every container and init container. Mirror pods (the kubelet's static pods) may reference
//! no account and no secret, since nothing here may change their spec.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use async_trait::async_trait;
use kapi_admission::{AdmissionPlugin, Attributes, Operation, Outcome};
use kapi_apimachinery::{ApiError, GroupResource};
use kapi_registry::rest::RestStore;
use kapi_registry::strategy::CatalogStrategy;
use serde_json::{json, Map, Value};

use crate::lookup;

/// The account of pods that name none.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// Where the token, CA and namespace appear in containers.
pub const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The generated volume's name prefix.
const VOLUME_PREFIX: &str = "kube-api-access-";
/// kube's `MirrorPodAnnotationKey`.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// A ServiceAccount annotated `true` limits its pods to the secrets it lists.
const ENFORCE_MOUNTABLE_SECRETS: &str = "kubernetes.io/enforce-mountable-secrets";
/// kube's `WarnOnlyBoundTokenExpirationSeconds`: an hour and seven seconds, so that the
/// kubelet's tokens are recognisable as the ones kube-apiserver may extend.
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;
/// kube's `SimpleNameGenerator` alphabet (no vowels, no look-alikes).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The plugin.
pub struct ServiceAccount {
    rest: RestStore,
}

impl ServiceAccount {
    /// The plugin over `rest`'s ServiceAccount cache (and the store, for accounts the cache
    /// does not have yet).
    pub fn new(rest: RestStore) -> Self {
        ServiceAccount { rest }
    }

    /// The account from the cache, else from the store: once, or for `default`, which its
    /// controller creates with the namespace, ten times 100 to 200 ms apart, as kube tries.
    async fn service_account(&self, namespace: &str, name: &str) -> Result<Value, ApiError> {
        let spec = lookup::spec("", "v1", "serviceaccounts")?;
        if let Some(sa) = lookup::get(&self.rest, spec, Some(namespace), name) {
            return Ok((*sa).clone());
        }
        let attempts = if name == DEFAULT_SERVICE_ACCOUNT { 10 } else { 1 };
        let pause = Duration::from_millis(100 + random() % 100);
        for attempt in 0..attempts {
            if attempt > 0 {
                tokio::time::sleep(pause).await;
            }
            match self.rest.get(&CatalogStrategy(spec), Some(namespace), name).await {
                Ok(sa) => return Ok(sa),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        // kube names the resource in the singular here.
        Err(ApiError::not_found(&GroupResource::new("", "serviceaccount"), name))
    }

    async fn looked_up(&self, attrs: &Attributes, name: &str) -> Result<Value, ApiError> {
        let ns = &attrs.namespace;
        self.service_account(ns, name).await.map_err(|e| attrs.forbidden(&format!("error looking up service account {ns}/{name}: {}", e.message)))
    }
}

/// Pods and their ephemeral containers are this plugin's; other subresources (status,
/// binding) are not.
fn ignored(attrs: &Attributes) -> bool {
    let ours = attrs.resource.group.is_empty() && attrs.resource.name == "pods" && matches!(attrs.subresource.as_str(), "" | "ephemeralcontainers");
    !ours || attrs.object.as_ref().is_none_or(|o| !o.is_object())
}

fn is_mirror(pod: &Value) -> bool {
    pod.pointer("/metadata/annotations").and_then(|a| a.get(MIRROR_ANNOTATION)).is_some()
}

fn account_name(pod: &Value) -> &str {
    lookup::str_at(pod, "/spec/serviceAccountName")
}

/// The pod's `automountServiceAccountToken` wins, then the account's; kube mounts by default.
fn should_automount(sa: &Value, pod: &Value) -> bool {
    let pod_says = pod.pointer("/spec/automountServiceAccountToken").and_then(Value::as_bool);
    pod_says.or_else(|| sa.get("automountServiceAccountToken").and_then(Value::as_bool)).unwrap_or(true)
}

/// A random `u64` without a generator crate: std's per-process random hash keys.
fn random() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
    hasher.finish()
}

/// kube's `SimpleNameGenerator`: the prefix and five random characters.
fn generated_name(prefix: &str) -> String {
    let mut n = random();
    let mut name = prefix.to_owned();
    for _ in 0..5 {
        name.push(char::from(NAME_ALPHABET[(n % NAME_ALPHABET.len() as u64) as usize]));
        n /= NAME_ALPHABET.len() as u64;
    }
    name
}

/// kube's `TokenVolumeSource`: the bound token, the CA bundle and the namespace.
fn token_volume(name: &str) -> Value {
    json!({"name": name, "projected": {
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
        ],
        "defaultMode": 420
    }})
}

/// Mounts the token volume in every init container and container that has nothing at
/// [`MOUNT_PATH`] yet (ephemeral containers are left alone, as kube leaves them), adding the
/// volume, or reusing one a previous round added, when a container needs it.
fn mount_token(spec: &mut Map<String, Value>) {
    let existing = spec
        .get("volumes")
        .and_then(Value::as_array)
        .and_then(|vs| vs.iter().filter_map(|v| v.get("name").and_then(Value::as_str)).find(|n| n.starts_with(VOLUME_PREFIX)))
        .map(str::to_owned);
    let name = existing.clone().unwrap_or_else(|| generated_name(VOLUME_PREFIX));
    let mount = json!({"name": name, "readOnly": true, "mountPath": MOUNT_PATH});
    let mut needed = false;
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else { continue };
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            let mounts = container.entry("volumeMounts").or_insert_with(|| json!([]));
            let Some(mounts) = mounts.as_array_mut() else { continue };
            if !mounts.iter().any(|m| m.get("mountPath").and_then(Value::as_str) == Some(MOUNT_PATH)) {
                mounts.push(mount.clone());
                needed = true;
            }
        }
    }
    if needed && existing.is_none() {
        let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
        if let Some(volumes) = volumes.as_array_mut() {
            volumes.push(token_volume(&name));
        }
    }
}

fn refs(list: Option<&Value>) -> impl Iterator<Item = &Value> {
    list.and_then(Value::as_array).into_iter().flatten()
}

fn name_of<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// Every secret a pod references (kube's `VisitPodSecretNames`): image pull secrets,
/// containers' env and envFrom, and the volume sources that name a secret.
fn secret_names(spec: &Value) -> Vec<&str> {
    let mut names: Vec<&str> = refs(spec.get("imagePullSecrets")).filter_map(|r| name_of(r, "/name")).collect();
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for c in refs(spec.get(list)) {
            names.extend(refs(c.get("env")).filter_map(|e| name_of(e, "/valueFrom/secretKeyRef/name")));
            names.extend(refs(c.get("envFrom")).filter_map(|e| name_of(e, "/secretRef/name")));
        }
    }
    const VOLUME_SECRETS: &[&str] = &[
        "/secret/secretName",
        "/azureFile/secretName",
        "/cephfs/secretRef/name",
        "/cinder/secretRef/name",
        "/flexVolume/secretRef/name",
        "/rbd/secretRef/name",
        "/scaleIO/secretRef/name",
        "/iscsi/secretRef/name",
        "/storageos/secretRef/name",
        "/csi/nodePublishSecretRef/name",
    ];
    for v in refs(spec.get("volumes")) {
        names.extend(VOLUME_SECRETS.iter().filter_map(|p| name_of(v, p)));
        names.extend(refs(v.pointer("/projected/sources")).filter_map(|s| name_of(s, "/secret/name")));
    }
    names
}

/// kube's `enforceMountableSecrets`: the annotation, parsed as Go's `ParseBool`.
fn enforces_mountable_secrets(sa: &Value) -> bool {
    let value = sa.pointer("/metadata/annotations").and_then(|a| a.get(ENFORCE_MOUNTABLE_SECRETS)).and_then(Value::as_str);
    matches!(value, Some("1" | "t" | "T" | "TRUE" | "true" | "True"))
}

/// The names an account lists under `field` (`secrets`, `imagePullSecrets`).
fn listed<'a>(sa: &'a Value, field: &str) -> Vec<&'a str> {
    refs(sa.get(field)).filter_map(|r| name_of(r, "/name")).collect()
}

/// kube's `limitSecretReferences` for the containers of `lists` (with kube's word for each
/// kind of container), and for volumes and image pull secrets when `whole_pod`.
fn limit_secret_references(sa: &Value, spec: &Value, lists: &[(&str, &str)], whole_pod: bool) -> Result<(), String> {
    let sa_name = lookup::str_at(sa, "/metadata/name");
    let mountable = listed(sa, "secrets");
    let denied = |name: &str| !mountable.contains(&name);
    let tail = format!("is not allowed because service account {sa_name} does not reference that secret");
    if whole_pod {
        if let Some(secret) = refs(spec.get("volumes")).filter_map(|v| name_of(v, "/secret/secretName")).find(|n| denied(n)) {
            return Err(format!("volume with secret.secretName=\"{secret}\" {tail}"));
        }
    }
    for (list, word) in lists {
        for c in refs(spec.get(*list)) {
            let container = lookup::str_at(c, "/name");
            for env in refs(c.get("env")) {
                if let Some(secret) = name_of(env, "/valueFrom/secretKeyRef/name").filter(|n| denied(n)) {
                    let var = lookup::str_at(env, "/name");
                    return Err(format!("{word} {container} with envVar {var} referencing secret.secretName=\"{secret}\" {tail}"));
                }
            }
            for from in refs(c.get("envFrom")) {
                if let Some(secret) = name_of(from, "/secretRef/name").filter(|n| denied(n)) {
                    return Err(format!("{word} {container} with envFrom referencing secret.secretName=\"{secret}\" {tail}"));
                }
            }
        }
    }
    if whole_pod {
        let pull = listed(sa, "imagePullSecrets");
        for (i, r) in refs(spec.get("imagePullSecrets")).enumerate() {
            let name = lookup::str_at(r, "/name");
            if !pull.contains(&name) {
                return Err(format!(
                    "imagePullSecrets[{i}].name=\"{name}\" is not allowed because service account {sa_name} does not reference that imagePullSecret"
                ));
            }
        }
    }
    Ok(())
}

/// What a mirror pod may not reference.
fn check_mirror(attrs: &Attributes, pod: &Value) -> Result<(), ApiError> {
    let spec = pod.get("spec").cloned().unwrap_or_default();
    if !account_name(pod).is_empty() {
        return Err(attrs.forbidden("a mirror pod may not reference service accounts"));
    }
    if !secret_names(&spec).is_empty() {
        return Err(attrs.forbidden("a mirror pod may not reference secrets"));
    }
    if refs(spec.get("volumes")).any(|v| refs(v.pointer("/projected/sources")).any(|s| s.get("serviceAccountToken").is_some())) {
        return Err(attrs.forbidden("a mirror pod may not use ServiceAccountToken volume projections"));
    }
    Ok(())
}

#[async_trait]
impl AdmissionPlugin for ServiceAccount {
    fn name(&self) -> &'static str {
        "ServiceAccount"
    }

    fn handles(&self, operation: Operation) -> bool {
        matches!(operation, Operation::Create | Operation::Update)
    }

    async fn admit(&self, attrs: &mut Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        if ignored(attrs) || attrs.operation != Operation::Create || attrs.subresource == "ephemeralcontainers" {
            return Ok(());
        }
        let Some(pod) = attrs.object.as_ref() else { return Ok(()) };
        if is_mirror(pod) {
            return Ok(());
        }
        // kube reads the deprecated `serviceAccount` when the name is not given, and writes
        // both fields alike.
        let name = match (account_name(pod), lookup::str_at(pod, "/spec/serviceAccount")) {
            ("", "") => DEFAULT_SERVICE_ACCOUNT.to_owned(),
            ("", deprecated) => deprecated.to_owned(),
            (name, _) => name.to_owned(),
        };
        let sa = self.looked_up(attrs, &name).await?;
        let Some(pod) = attrs.object.as_mut() else { return Ok(()) };
        let automount = should_automount(&sa, pod);
        let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else { return Ok(()) };
        spec.insert("serviceAccountName".into(), Value::String(name.clone()));
        spec.insert("serviceAccount".into(), Value::String(name));
        if automount {
            mount_token(spec);
        }
        let pull = listed(&sa, "imagePullSecrets");
        if !pull.is_empty() && spec.get("imagePullSecrets").and_then(Value::as_array).is_none_or(Vec::is_empty) {
            spec.insert("imagePullSecrets".into(), pull.iter().map(|n| json!({"name": n})).collect());
        }
        Ok(())
    }

    async fn validate(&self, attrs: &Attributes, _outcome: &mut Outcome) -> Result<(), ApiError> {
        let Some(pod) = attrs.object.as_ref().filter(|_| !ignored(attrs)) else { return Ok(()) };
        let ephemeral = attrs.operation == Operation::Update && attrs.subresource == "ephemeralcontainers";
        if !ephemeral && (attrs.operation != Operation::Create || !attrs.subresource.is_empty()) {
            return Ok(());
        }
        if !ephemeral && is_mirror(pod) {
            return check_mirror(attrs, pod);
        }
        let name = account_name(pod);
        if name.is_empty() {
            let pod_name = lookup::str_at(pod, "/metadata/name");
            return Err(attrs.forbidden(&format!("no service account specified for pod {}/{pod_name}", attrs.namespace)));
        }
        let sa = self.looked_up(attrs, name).await?;
        if !enforces_mountable_secrets(&sa) {
            return Ok(());
        }
        let spec = pod.get("spec").cloned().unwrap_or_default();
        let result = if ephemeral {
            limit_secret_references(&sa, &spec, &[("ephemeralContainers", "ephemeral container")], false)
        } else {
            limit_secret_references(&sa, &spec, &[("initContainers", "init container"), ("containers", "container")], true)
        };
        result.map_err(|e| attrs.forbidden(&e))
    }
}
