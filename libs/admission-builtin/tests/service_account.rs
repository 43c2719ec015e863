//! ServiceAccount through `kapi_admission::Chain` over ServiceAccounts stored in SQLite.

mod support;

use kapi_admission::Operation;
use kapi_admission_builtin::ServiceAccount;
use kapi_apimachinery::StatusReason;
use serde_json::{json, Value};
use support::{attrs, create_attrs, pod, Cluster};

const MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

async fn cluster() -> Cluster {
    let c = Cluster::new(|rest| Box::new(ServiceAccount::new(rest))).await;
    c.create("", "v1", "serviceaccounts", account("default", json!({}))).await;
    c
}

fn account(name: &str, extra: Value) -> Value {
    let mut sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": "default"}});
    if let (Some(sa), Some(extra)) = (sa.as_object_mut(), extra.as_object()) {
        sa.extend(extra.clone());
    }
    sa
}

async fn admitted(c: &Cluster, spec: Value) -> Value {
    let mut a = create_attrs("pods", pod("default", "p", spec));
    c.admit(&mut a).await.0.unwrap();
    a.object.unwrap()["spec"].clone()
}

fn containers() -> Value {
    json!([{"name": "c", "image": "nginx"}])
}

#[tokio::test]
async fn a_pod_runs_as_default_with_the_projected_token_volume_in_every_container() {
    let c = cluster().await;
    let spec = admitted(
        &c,
        json!({"initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [{"name": "app", "image": "nginx"}, {"name": "own", "image": "nginx", "volumeMounts": [{"name": "mine", "mountPath": MOUNT}]}],
            "volumes": [{"name": "mine", "emptyDir": {}}]}),
    )
    .await;
    assert_eq!((spec["serviceAccountName"].clone(), spec["serviceAccount"].clone()), (json!("default"), json!("default")));

    let volume = &spec["volumes"][1];
    let name = volume["name"].as_str().unwrap();
    assert!(name.len() == "kube-api-access-".len() + 5 && name.starts_with("kube-api-access-"), "{name}");
    assert!(name["kube-api-access-".len()..].bytes().all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b)), "{name}");
    assert_eq!(
        volume["projected"],
        json!({"sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}],
            "defaultMode": 420})
    );
    let mount = json!([{"name": name, "readOnly": true, "mountPath": MOUNT}]);
    assert_eq!(spec["initContainers"][0]["volumeMounts"], mount);
    assert_eq!(spec["containers"][0]["volumeMounts"], mount);
    // A container that mounts something of its own at the path keeps it.
    assert_eq!(spec["containers"][1]["volumeMounts"], json!([{"name": "mine", "mountPath": MOUNT}]));
    assert!(spec.get("imagePullSecrets").is_none(), "{spec}");
}

#[tokio::test]
async fn automount_false_on_the_pod_or_its_account_means_no_token() {
    let c = cluster().await;
    c.create("", "v1", "serviceaccounts", account("quiet", json!({"automountServiceAccountToken": false}))).await;
    let spec = admitted(&c, json!({"containers": containers(), "automountServiceAccountToken": false})).await;
    assert!(spec.get("volumes").is_none() && spec["containers"][0].get("volumeMounts").is_none(), "{spec}");
    let spec = admitted(&c, json!({"containers": containers(), "serviceAccountName": "quiet"})).await;
    assert!(spec.get("volumes").is_none(), "{spec}");
    // The pod's word wins over its account's.
    let spec = admitted(&c, json!({"containers": containers(), "serviceAccountName": "quiet", "automountServiceAccountToken": true})).await;
    assert_eq!(spec["volumes"].as_array().map(Vec::len), Some(1), "{spec}");
}

#[tokio::test]
async fn image_pull_secrets_come_from_the_account_unless_the_pod_has_some() {
    let c = cluster().await;
    c.create("", "v1", "serviceaccounts", account("puller", json!({"imagePullSecrets": [{"name": "registry"}, {"name": "mirror"}]}))).await;
    let spec = admitted(&c, json!({"containers": containers(), "serviceAccountName": "puller"})).await;
    assert_eq!(spec["imagePullSecrets"], json!([{"name": "registry"}, {"name": "mirror"}]));
    let spec = admitted(&c, json!({"containers": containers(), "serviceAccountName": "puller", "imagePullSecrets": [{"name": "own"}]})).await;
    assert_eq!(spec["imagePullSecrets"], json!([{"name": "own"}]));
    // The deprecated field names the account when the new one is absent.
    let spec = admitted(&c, json!({"containers": containers(), "serviceAccount": "puller"})).await;
    assert_eq!((spec["serviceAccountName"].clone(), spec["imagePullSecrets"][0]["name"].clone()), (json!("puller"), json!("registry")));
}

#[tokio::test]
async fn a_missing_account_refuses_the_pod() {
    let c = cluster().await;
    let mut a = create_attrs("pods", pod("default", "p", json!({"containers": containers(), "serviceAccountName": "missing"})));
    let err = c.admit(&mut a).await.0.unwrap_err();
    assert_eq!((err.code, err.reason), (403, StatusReason::Forbidden));
    assert_eq!(err.message, "pods \"p\" is forbidden: error looking up service account default/missing: serviceaccount \"missing\" not found");

    // A namespace whose default account never comes: kube's retries, then the same refusal.
    c.namespace("fresh").await;
    let mut a = create_attrs("pods", pod("fresh", "p", json!({"containers": containers()})));
    let err = c.admit(&mut a).await.0.unwrap_err();
    assert_eq!(err.message, "pods \"p\" is forbidden: error looking up service account fresh/default: serviceaccount \"default\" not found");

    // An account the cache lacks is read from the store.
    c.rest
        .create(
            &kapi_registry::strategy::CatalogStrategy(kapi_registry::catalog::find("", "v1", "serviceaccounts").unwrap()),
            Some("fresh"),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": "fresh"}}),
            false,
            Default::default(),
        )
        .await
        .unwrap();
    let mut a = create_attrs("pods", pod("fresh", "p", json!({"containers": containers()})));
    c.admit(&mut a).await.0.unwrap();
}

#[tokio::test]
async fn mirror_pods_are_left_alone_but_may_reference_no_account_or_secret() {
    let c = cluster().await;
    let mirror = |spec: Value| {
        let mut p = pod("default", "static", spec);
        p["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "hash"});
        p
    };
    let mut a = create_attrs("pods", mirror(json!({"containers": containers()})));
    c.admit(&mut a).await.0.unwrap();
    assert_eq!(a.object.unwrap()["spec"], json!({"containers": containers()}));

    let cases = [
        (json!({"containers": containers(), "serviceAccountName": "default"}), "a mirror pod may not reference service accounts"),
        (json!({"containers": containers(), "volumes": [{"name": "s", "secret": {"secretName": "x"}}]}), "a mirror pod may not reference secrets"),
        (json!({"containers": [{"name": "c", "image": "i", "envFrom": [{"secretRef": {"name": "x"}}]}]}), "a mirror pod may not reference secrets"),
        (
            json!({"containers": containers(), "volumes": [{"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]}),
            "a mirror pod may not use ServiceAccountToken volume projections",
        ),
    ];
    for (spec, reason) in cases {
        let err = c.admit(&mut create_attrs("pods", mirror(spec))).await.0.unwrap_err();
        assert_eq!(err.message, format!("pods \"static\" is forbidden: {reason}"));
    }
}

#[tokio::test]
async fn an_account_enforcing_mountable_secrets_limits_what_its_pods_reference() {
    let c = cluster().await;
    let strict = json!({"metadata": {"name": "strict", "namespace": "default", "annotations": {"kubernetes.io/enforce-mountable-secrets": "true"}},
        "secrets": [{"name": "allowed"}], "imagePullSecrets": [{"name": "pull"}]});
    c.create("", "v1", "serviceaccounts", account("strict", strict)).await;
    let base = |extra: Value| {
        let mut spec = json!({"serviceAccountName": "strict", "containers": [{"name": "app", "image": "i"}]});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        spec
    };
    admitted(&c, base(json!({"volumes": [{"name": "v", "secret": {"secretName": "allowed"}}]}))).await;
    let tail = "is not allowed because service account strict does not reference that secret";
    let cases = [
        (json!({"volumes": [{"name": "v", "secret": {"secretName": "other"}}]}), format!("volume with secret.secretName=\"other\" {tail}")),
        (
            json!({"containers": [{"name": "app", "image": "i", "env": [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "other", "key": "k"}}}]}]}),
            format!("container app with envVar PW referencing secret.secretName=\"other\" {tail}"),
        ),
        (
            json!({"initContainers": [{"name": "init", "image": "i", "envFrom": [{"secretRef": {"name": "other"}}]}]}),
            format!("init container init with envFrom referencing secret.secretName=\"other\" {tail}"),
        ),
        (
            json!({"imagePullSecrets": [{"name": "pull"}, {"name": "nope"}]}),
            "imagePullSecrets[1].name=\"nope\" is not allowed because service account strict does not reference that imagePullSecret".to_owned(),
        ),
    ];
    for (extra, reason) in cases {
        let err = c.admit(&mut create_attrs("pods", pod("default", "p", base(extra)))).await.0.unwrap_err();
        assert_eq!(err.message, format!("pods \"p\" is forbidden: {reason}"));
    }

    // Ephemeral containers added later are held to the same list.
    let running = pod("default", "p", base(json!({})));
    let mut debug = running.clone();
    debug["spec"]["ephemeralContainers"] =
        json!([{"name": "dbg", "image": "i", "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "other", "key": "k"}}}]}]);
    let mut a = attrs(Operation::Update, ("", "v1", "pods"), "Pod", "default", "p", Some(debug), Some(running));
    a.subresource = "ephemeralcontainers".into();
    let err = c.admit(&mut a).await.0.unwrap_err();
    assert_eq!(err.message, format!("pods \"p\" is forbidden: ephemeral container dbg with envVar T referencing secret.secretName=\"other\" {tail}"));
}
