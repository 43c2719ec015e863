use serde_json::json;

use super::pod::image_pull_policy;
use super::*;

#[test]
fn minimal_deployment_matches_kube() {
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}
            }
        }
    });
    apply_defaults("apps", "Deployment", &mut d);
    prepare_for_create("apps", "Deployment", &mut d);
    let expected = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "progressDeadlineSeconds": 600,
            "replicas": 1,
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}, "type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{
                        "image": "nginx:1.25",
                        "imagePullPolicy": "IfNotPresent",
                        "name": "nginx",
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "resources": {},
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File"
                    }],
                    "dnsPolicy": "ClusterFirst",
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                    "securityContext": {},
                    "terminationGracePeriodSeconds": 30
                }
            }
        },
        "status": {}
    });
    assert_eq!(d, expected);
    // Idempotent.
    let again = d.clone();
    apply_defaults("apps", "Deployment", &mut d);
    assert_eq!(d, again);
}

#[test]
fn defaults_never_overwrite() {
    let mut d = json!({"spec": {"replicas": 0, "strategy": {"type": "Recreate"}, "template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "a", "image": "x", "imagePullPolicy": "Never"}]}}}});
    apply_defaults("apps", "Deployment", &mut d);
    assert_eq!(d["spec"]["replicas"], 0);
    assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
    assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Never");
    assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "Never");
}

#[test]
fn image_pull_policy_rules() {
    for (image, want) in [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("docker.io/library/nginx", "Always"),
        ("localhost:5000/app", "Always"),
        ("localhost:5000/app:latest", "Always"),
        ("nginx:1.25", "IfNotPresent"),
        ("localhost:5000/app:v2", "IfNotPresent"),
        ("nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "IfNotPresent"),
        ("nginx:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "Always"),
        ("", "IfNotPresent"),
        ("Nginx", "IfNotPresent"),
    ] {
        assert_eq!(image_pull_policy(image), want, "{image}");
    }
}

#[test]
fn pod_defaults_and_status() {
    let mut p = json!({"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "busybox",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
            "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
        "volumes": [{"name": "cm", "configMap": {"name": "x"}}, {"name": "scratch"}]
    }});
    apply_defaults("", "Pod", &mut p);
    prepare_for_create("", "Pod", &mut p);
    let c = &p["spec"]["containers"][0];
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(c["resources"]["requests"], json!({"cpu": "1", "memory": "1Gi"}));
    assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
    assert_eq!(p["spec"]["enableServiceLinks"], true);
    assert_eq!(p["spec"]["volumes"][0]["configMap"]["defaultMode"], 420);
    assert_eq!(p["spec"]["volumes"][1]["emptyDir"], json!({}));
    assert_eq!(p["status"], json!({"phase": "Pending", "qosClass": "Guaranteed"}));
}

#[test]
fn qos_classes() {
    let best = json!({"spec": {"containers": [{"name": "a"}]}});
    assert_eq!(pod_qos_class(&best), "BestEffort");
    let burst = json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}]}});
    assert_eq!(pod_qos_class(&burst), "Burstable");
    let guar = json!({"spec": {"containers": [{"name": "a", "resources": {
        "requests": {"cpu": "1000m", "memory": "1024Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}});
    assert_eq!(pod_qos_class(&guar), "Guaranteed");
}

#[test]
fn template_has_no_pod_only_defaults() {
    let mut rs = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x:1"}]}}}});
    apply_defaults("apps", "ReplicaSet", &mut rs);
    assert!(rs["spec"]["template"]["spec"].get("enableServiceLinks").is_none());
    assert_eq!(rs["spec"]["replicas"], 1);
}

#[test]
fn job_defaults_and_generated_selector() {
    let mut j = json!({"metadata": {"name": "pi", "uid": "u-1"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl:5"}]}}}});
    apply_defaults("batch", "Job", &mut j);
    prepare_for_create("batch", "Job", &mut j);
    let spec = &j["spec"];
    assert_eq!(spec["completions"], 1);
    assert_eq!(spec["parallelism"], 1);
    assert_eq!(spec["backoffLimit"], 6);
    assert_eq!(spec["completionMode"], "NonIndexed");
    assert_eq!(spec["suspend"], false);
    assert_eq!(spec["podReplacementPolicy"], "TerminatingOrFailed");
    assert_eq!(spec["selector"], json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}));
    let labels = json!({
        "batch.kubernetes.io/controller-uid": "u-1", "batch.kubernetes.io/job-name": "pi",
        "controller-uid": "u-1", "job-name": "pi"
    });
    assert_eq!(spec["template"]["metadata"]["labels"], labels);
    assert_eq!(j["metadata"]["labels"], labels);
    assert_eq!(j["status"], json!({}));
}

#[test]
fn job_parallelism_only_leaves_completions_unset() {
    let mut j = json!({"spec": {"parallelism": 3, "podFailurePolicy": {"rules": [{"action": "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget"}]}]}, "template": {"spec": {"containers": []}}}});
    apply_defaults("batch", "Job", &mut j);
    assert!(j["spec"].get("completions").is_none());
    assert_eq!(j["spec"]["podReplacementPolicy"], "Failed");
    assert_eq!(j["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"], "True");
}

#[test]
fn manual_selector_is_not_generated() {
    let mut j = json!({"metadata": {"name": "pi", "uid": "u"}, "spec": {"manualSelector": true,
        "selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}}}});
    prepare_for_create("batch", "Job", &mut j);
    assert_eq!(j["spec"]["selector"], json!({"matchLabels": {"a": "b"}}));
    assert_eq!(j["spec"]["template"]["metadata"]["labels"], json!({"a": "b"}));
}

#[test]
fn service_defaults() {
    let mut s = json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"},
        "ports": [{"port": 80}, {"port": 443, "targetPort": "https", "protocol": "UDP"}]}});
    apply_defaults("", "Service", &mut s);
    prepare_for_create("", "Service", &mut s);
    assert_eq!(s["spec"]["type"], "ClusterIP");
    assert_eq!(s["spec"]["sessionAffinity"], "None");
    // Families come from the cluster's ranges, at allocation (service_alloc), not defaulting.
    assert!(s["spec"].get("ipFamilies").is_none());
    assert_eq!(s["spec"]["internalTrafficPolicy"], "Cluster");
    assert_eq!(s["spec"]["ports"][0], json!({"port": 80, "protocol": "TCP", "targetPort": 80}));
    assert_eq!(s["spec"]["ports"][1]["targetPort"], "https");
    assert_eq!(s["spec"]["ports"][1]["protocol"], "UDP");
    assert!(s["spec"].get("externalTrafficPolicy").is_none());
    assert_eq!(s["status"], json!({"loadBalancer": {}}));

    let mut ext = json!({"spec": {"type": "ExternalName", "externalName": "example.com"}});
    apply_defaults("", "Service", &mut ext);
    assert!(ext["spec"].get("ipFamilies").is_none());
    let mut lb = json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}});
    apply_defaults("", "Service", &mut lb);
    assert_eq!(lb["spec"]["externalTrafficPolicy"], "Cluster");
    assert_eq!(lb["spec"]["allocateLoadBalancerNodePorts"], true);
}

#[test]
fn namespace_and_secret_and_pvc() {
    let mut ns = json!({"metadata": {"name": "team-a"}});
    apply_defaults("", "Namespace", &mut ns);
    prepare_for_create("", "Namespace", &mut ns);
    assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "team-a");
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(ns["status"], json!({"phase": "Active"}));

    let mut sec = json!({"metadata": {"name": "s"}});
    apply_defaults("", "Secret", &mut sec);
    assert_eq!(sec["type"], "Opaque");

    let mut pvc = json!({"spec": {"accessModes": ["ReadWriteOnce"]}});
    apply_defaults("", "PersistentVolumeClaim", &mut pvc);
    prepare_for_create("", "PersistentVolumeClaim", &mut pvc);
    assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");
    assert_eq!(pvc["status"]["phase"], "Pending");
}

#[test]
fn statefulset_daemonset_cronjob_defaults() {
    let mut sts = json!({"spec": {"template": {"spec": {"containers": []}}, "volumeClaimTemplates": [{"spec": {}}]}});
    apply_defaults("apps", "StatefulSet", &mut sts);
    assert_eq!(sts["spec"]["podManagementPolicy"], "OrderedReady");
    assert_eq!(sts["spec"]["updateStrategy"], json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}));
    assert_eq!(
        sts["spec"]["persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
    );
    assert_eq!(sts["spec"]["volumeClaimTemplates"][0]["spec"]["volumeMode"], "Filesystem");

    let mut ds = json!({"spec": {"template": {"spec": {"containers": []}}}});
    apply_defaults("apps", "DaemonSet", &mut ds);
    assert_eq!(
        ds["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);

    let mut cj = json!({"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
        "containers": [{"name": "a", "image": "busybox"}]}}}}}});
    apply_defaults("batch", "CronJob", &mut cj);
    assert_eq!(cj["spec"]["concurrencyPolicy"], "Allow");
    assert_eq!(cj["spec"]["successfulJobsHistoryLimit"], 3);
    assert_eq!(cj["spec"]["failedJobsHistoryLimit"], 1);
    assert_eq!(cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"], "ClusterFirst");
}

#[test]
fn replication_controller_copies_template_labels() {
    let mut rc = json!({"metadata": {"name": "r"}, "spec": {"template": {"metadata": {"labels": {"app": "r"}},
        "spec": {"containers": []}}}});
    apply_defaults("", "ReplicationController", &mut rc);
    assert_eq!(rc["spec"]["selector"], json!({"app": "r"}));
    assert_eq!(rc["metadata"]["labels"], json!({"app": "r"}));
    assert_eq!(rc["spec"]["replicas"], 1);
}

#[test]
fn csi_driver_defaults_as_kube() {
    let mut driver = json!({"metadata": {"name": "csi.example.com"}, "spec": {}});
    apply_defaults("storage.k8s.io", "CSIDriver", &mut driver);
    assert_eq!(
        driver["spec"],
        json!({
            "attachRequired": true,
            "podInfoOnMount": false,
            "storageCapacity": false,
            "fsGroupPolicy": "ReadWriteOnceWithFSType",
            "requiresRepublish": false,
            "seLinuxMount": false,
            "volumeLifecycleModes": ["Persistent"]
        })
    );
    // No spec at all is the same; what a client set stays, and an empty modes list is unset.
    let mut bare = json!({"metadata": {"name": "d"}});
    apply_defaults("storage.k8s.io", "CSIDriver", &mut bare);
    assert_eq!(bare["spec"], driver["spec"]);
    let mut set = json!({"spec": {"attachRequired": false, "fsGroupPolicy": "File", "volumeLifecycleModes": [], "seLinuxMount": true}});
    apply_defaults("storage.k8s.io", "CSIDriver", &mut set);
    assert_eq!(set["spec"]["attachRequired"], false);
    assert_eq!(set["spec"]["fsGroupPolicy"], "File");
    assert_eq!(set["spec"]["seLinuxMount"], true);
    assert_eq!(set["spec"]["volumeLifecycleModes"], json!(["Persistent"]));
    let mut ephemeral = json!({"spec": {"volumeLifecycleModes": ["Ephemeral"]}});
    apply_defaults("storage.k8s.io", "CSIDriver", &mut ephemeral);
    assert_eq!(ephemeral["spec"]["volumeLifecycleModes"], json!(["Ephemeral"]));
}
