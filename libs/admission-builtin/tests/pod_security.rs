//! PodSecurity through `kapi_admission::Chain` over namespaces and pods stored in SQLite: the
//! namespace labels choose what is enforced, audited and warned about, with kube's texts.

mod support;

use kapi_admission::{Attributes, Operation};
use kapi_admission_builtin::PodSecurity;
use kapi_apimachinery::StatusReason;
use serde_json::{json, Value};
use support::{attrs, create_attrs, pod, Cluster};

async fn cluster(config: Option<Value>) -> Cluster {
    Cluster::new(move |rest| Box::new(PodSecurity::new(rest, config.as_ref()).expect("valid configuration"))).await
}

async fn labelled(c: &Cluster, name: &str, labels: Value) {
    c.create("", "v1", "namespaces", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})).await;
}

fn privileged_pod(ns: &str, name: &str) -> Value {
    pod(ns, name, json!({"containers": [{"name": "c", "image": "nginx", "securityContext": {"privileged": true}}]}))
}

fn restricted_pod(ns: &str, name: &str) -> Value {
    pod(
        ns,
        name,
        json!({"securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "image": "nginx", "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}]}),
    )
}

const PRIVILEGED_IN_RESTRICTED: &str = "privileged (container \"c\" must not set securityContext.privileged=true), \
    allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
    unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
    runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
    seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")";

const PRIVILEGED_IN_BASELINE: &str = "privileged (container \"c\" must not set securityContext.privileged=true)";

fn annotation(outcome: &kapi_admission::Outcome, key: &str) -> Option<String> {
    outcome.annotations.get(&format!("pod-security.kubernetes.io/{key}")).cloned()
}

#[tokio::test]
async fn enforce_refuses_violating_pods_with_kube_message() {
    let c = cluster(None).await;
    labelled(&c, "locked", json!({"pod-security.kubernetes.io/enforce": "restricted"})).await;
    let (r, outcome) = c.admit(&mut create_attrs("pods", privileged_pod("locked", "x"))).await;
    let err = r.unwrap_err();
    assert_eq!((err.code, err.reason), (403, StatusReason::Forbidden));
    assert_eq!(err.message, format!("pods \"x\" is forbidden: violates PodSecurity \"restricted:latest\": {PRIVILEGED_IN_RESTRICTED}"));
    let details = err.details.unwrap();
    assert_eq!((details.name.as_str(), details.kind.as_str()), ("x", "pods"));
    assert_eq!(annotation(&outcome, "enforce-policy").as_deref(), Some("restricted:latest"));
    // Refused requests get no warning; warn (defaulted to enforce's level) would repeat it.
    assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);

    let (r, outcome) = c.admit(&mut create_attrs("pods", restricted_pod("locked", "ok"))).await;
    r.unwrap();
    assert_eq!(annotation(&outcome, "enforce-policy").as_deref(), Some("restricted:latest"));
    assert!(outcome.warnings.is_empty() && annotation(&outcome, "audit-violations").is_none());

    // A pinned version is shown as labelled.
    labelled(
        &c,
        "pinned",
        json!({"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "v1.30"}),
    )
    .await;
    let err = c.admit(&mut create_attrs("pods", privileged_pod("pinned", "x"))).await.0.unwrap_err();
    assert_eq!(err.message, format!("pods \"x\" is forbidden: violates PodSecurity \"baseline:v1.30\": {PRIVILEGED_IN_BASELINE}"));

    // An unlabelled namespace is privileged at latest: nothing checked.
    let (r, outcome) = c.admit(&mut create_attrs("pods", privileged_pod("default", "x"))).await;
    r.unwrap();
    assert_eq!(annotation(&outcome, "enforce-policy").as_deref(), Some("privileged:latest"));
}

#[tokio::test]
async fn warn_and_audit_let_the_pod_in_and_say_why() {
    let c = cluster(None).await;
    labelled(&c, "watched", json!({"pod-security.kubernetes.io/warn": "baseline", "pod-security.kubernetes.io/audit": "restricted"})).await;
    let (r, outcome) = c.admit(&mut create_attrs("pods", privileged_pod("watched", "x"))).await;
    r.unwrap();
    assert_eq!(outcome.warnings, vec![format!("would violate PodSecurity \"baseline:latest\": {PRIVILEGED_IN_BASELINE}")]);
    assert_eq!(
        annotation(&outcome, "audit-violations"),
        Some(format!("would violate PodSecurity \"restricted:latest\": {PRIVILEGED_IN_RESTRICTED}"))
    );
    assert_eq!(annotation(&outcome, "enforce-policy").as_deref(), Some("privileged:latest"));
}

#[tokio::test]
async fn workloads_are_warned_about_never_refused() {
    let c = cluster(None).await;
    labelled(&c, "locked", json!({"pod-security.kubernetes.io/enforce": "restricted"})).await;
    let template = privileged_pod("locked", "")["spec"].clone();
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "locked"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": template}}});
    let cronjob = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj", "namespace": "locked"},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": template}}}}});
    let want = format!("would violate PodSecurity \"restricted:latest\": {PRIVILEGED_IN_RESTRICTED}");
    for (resource, obj) in [("deployments", deployment), ("cronjobs", cronjob)] {
        let (r, outcome) = c.admit(&mut create_attrs(resource, obj)).await;
        r.unwrap();
        assert_eq!(outcome.warnings, vec![want.clone()], "{resource}");
        // Only pods are enforced, so no enforce-policy annotation.
        assert_eq!(annotation(&outcome, "enforce-policy"), None, "{resource}");
    }
    // Other kinds are not looked at.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "locked"}});
    let (r, outcome) = c.admit(&mut create_attrs("configmaps", cm)).await;
    assert!(r.is_ok() && outcome.warnings.is_empty() && outcome.annotations.is_empty());
}

#[tokio::test]
async fn exemptions_and_defaults_come_from_the_configuration() {
    let config = json!({"apiVersion": "pod-security.admission.config.k8s.io/v1", "kind": "PodSecurityConfiguration",
        "defaults": {"enforce": "baseline"},
        "exemptions": {"usernames": ["ci-bot"], "namespaces": ["tools"], "runtimeClasses": ["kata"]}});
    let c = cluster(Some(config)).await;
    c.namespace("tools").await;
    // The default applies where no label says otherwise.
    let err = c.admit(&mut create_attrs("pods", privileged_pod("default", "x"))).await.0.unwrap_err();
    assert_eq!(err.message, format!("pods \"x\" is forbidden: violates PodSecurity \"baseline:latest\": {PRIVILEGED_IN_BASELINE}"));

    let (r, outcome) = c.admit(&mut create_attrs("pods", privileged_pod("tools", "x"))).await;
    r.unwrap();
    assert_eq!(annotation(&outcome, "exempt").as_deref(), Some("namespace"));

    let mut by_bot = create_attrs("pods", privileged_pod("default", "x"));
    by_bot.user = kapi_auth::UserInfo::new("ci-bot", ["system:authenticated"]);
    let (r, outcome) = c.admit(&mut by_bot).await;
    r.unwrap();
    assert_eq!(annotation(&outcome, "exempt").as_deref(), Some("user"));

    let mut kata = privileged_pod("default", "x");
    kata["spec"]["runtimeClassName"] = json!("kata");
    let (r, outcome) = c.admit(&mut create_attrs("pods", kata)).await;
    r.unwrap();
    assert_eq!(annotation(&outcome, "exempt").as_deref(), Some("runtimeClass"));
}

#[tokio::test]
async fn invalid_labels_are_refused_on_namespaces_and_fail_closed_for_pods() {
    let c = cluster(None).await;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "typo", "labels": {"pod-security.kubernetes.io/enforce": "strict"}}});
    let err = c.admit(&mut create_attrs("namespaces", ns.clone())).await.0.unwrap_err();
    assert_eq!((err.code, err.reason), (422, StatusReason::Invalid));
    assert_eq!(
        err.message,
        "Namespace \"typo\" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"
    );

    // Stored anyway (by an older server, say): the pod is held to restricted, and told why.
    c.create("", "v1", "namespaces", ns.clone()).await;
    let (r, outcome) = c.admit(&mut create_attrs("pods", privileged_pod("typo", "x"))).await;
    assert!(r.unwrap_err().message.contains("violates PodSecurity \"restricted:latest\""));
    assert_eq!(
        annotation(&outcome, "error").as_deref(),
        Some("Failed to parse policy: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted")
    );
    // An update leaving the same invalid label in place is not refused for it.
    let mut relabelled = ns.clone();
    relabelled["metadata"]["labels"]["team"] = json!("a");
    let mut a = attrs(Operation::Update, ("", "v1", "namespaces"), "Namespace", "", "typo", Some(relabelled), Some(ns));
    c.admit(&mut a).await.0.unwrap();
}

fn pod_update(old: &Value, new: Value, subresource: &str) -> Attributes {
    let ns = old["metadata"]["namespace"].as_str().unwrap();
    let name = old["metadata"]["name"].as_str().unwrap();
    let mut a = attrs(Operation::Update, ("", "v1", "pods"), "Pod", ns, name, Some(new), Some(old.clone()));
    a.subresource = subresource.into();
    a
}

#[tokio::test]
async fn pod_updates_are_checked_only_when_they_change_what_runs() {
    let c = cluster(None).await;
    labelled(&c, "locked", json!({"pod-security.kubernetes.io/enforce": "baseline"})).await;
    // Stored before the label was set.
    let old = c.create("", "v1", "pods", privileged_pod("locked", "x")).await;

    let mut labelled_pod = old.clone();
    labelled_pod["metadata"]["labels"] = json!({"new": "label"});
    c.admit(&mut pod_update(&old, labelled_pod, "")).await.0.unwrap();

    let mut new_image = old.clone();
    new_image["spec"]["containers"][0]["image"] = json!("nginx:2");
    let err = c.admit(&mut pod_update(&old, new_image, "")).await.0.unwrap_err();
    assert_eq!(err.message, format!("pods \"x\" is forbidden: violates PodSecurity \"baseline:latest\": {PRIVILEGED_IN_BASELINE}"));

    // An ephemeral container is evaluated like any other.
    let ok = c.create("", "v1", "pods", pod("locked", "ok", json!({"containers": [{"name": "c", "image": "nginx"}]}))).await;
    let mut debug = ok.clone();
    debug["spec"]["ephemeralContainers"] = json!([{"name": "debug", "image": "busybox", "securityContext": {"privileged": true}}]);
    let err = c.admit(&mut pod_update(&ok, debug.clone(), "ephemeralcontainers")).await.0.unwrap_err();
    assert_eq!(
        err.message,
        "pods \"ok\" is forbidden: violates PodSecurity \"baseline:latest\": privileged (container \"debug\" must not set securityContext.privileged=true)"
    );
    // Status writes are never evaluated.
    c.admit(&mut pod_update(&old, old.clone(), "status")).await.0.unwrap();
}

#[tokio::test]
async fn raising_enforce_warns_about_the_pods_already_there() {
    let c = cluster(None).await;
    c.namespace("team").await;
    c.create("", "v1", "pods", privileged_pod("team", "b")).await;
    c.create("", "v1", "pods", privileged_pod("team", "a")).await;
    let host = pod("team", "h", json!({"hostNetwork": true, "containers": [{"name": "c", "image": "nginx"}]}));
    c.create("", "v1", "pods", host).await;
    c.create("", "v1", "pods", restricted_pod("team", "fine")).await;

    let old = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}});
    let mut new = old.clone();
    new["metadata"]["labels"] = json!({"pod-security.kubernetes.io/enforce": "baseline"});
    let mut a = attrs(Operation::Update, ("", "v1", "namespaces"), "Namespace", "", "team", Some(new.clone()), Some(old.clone()));
    let (r, outcome) = c.admit(&mut a).await;
    r.unwrap();
    assert_eq!(
        outcome.warnings,
        vec![
            "existing pods in namespace \"team\" violate the new PodSecurity enforce level \"baseline:latest\"".to_owned(),
            "a (and 1 other pod): privileged".to_owned(),
            "h: host namespaces".to_owned(),
        ]
    );
    // Relaxing, or keeping, the level dry-runs nothing.
    let mut a = attrs(Operation::Update, ("", "v1", "namespaces"), "Namespace", "", "team", Some(old), Some(new));
    let (r, outcome) = c.admit(&mut a).await;
    r.unwrap();
    assert!(outcome.warnings.is_empty());
}
