//! Resources served in two versions of one storage: autoscaling/v1 and v2
//! HorizontalPodAutoscalers, core and events.k8s.io Events.

use kapi_e2e::{Kapi, OutputExt, Request};
use serde_json::json;

#[test]
fn hpa_versions_and_event_apis_share_objects() {
    let kapi = Kapi::start().expect("start kapi");
    let v1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
    let v2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";
    let created = kapi.request(&Request::new("POST", v1).json(&json!({
        "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 1, "maxReplicas": 4, "targetCPUUtilizationPercentage": 60}})));
    assert_eq!(created.status, 201, "{}", created.raw);
    assert_eq!(created.body["apiVersion"], "autoscaling/v1");
    assert_eq!(created.body["spec"]["targetCPUUtilizationPercentage"], 60);

    let as_v2 = kapi.get_json(&format!("{v2}/web"));
    assert_eq!(as_v2["apiVersion"], "autoscaling/v2");
    assert_eq!(as_v2["spec"]["metrics"][0]["resource"]["target"], json!({"type": "Utilization", "averageUtilization": 60}));
    assert!(as_v2["spec"].get("targetCPUUtilizationPercentage").is_none());

    // A v2-only metric survives a v1 round trip (update through v1 keeps it).
    let mut v2_obj = as_v2.clone();
    v2_obj["spec"]["metrics"].as_array_mut().expect("metrics").push(json!(
        {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "512Mi"}}}));
    let r = kapi.request(&Request::new("PUT", &format!("{v2}/web")).json(&v2_obj));
    assert_eq!(r.status, 200, "{}", r.raw);
    let mut through_v1 = kapi.get_json(&format!("{v1}/web"));
    assert_eq!(through_v1["spec"]["targetCPUUtilizationPercentage"], 60);
    through_v1["spec"]["maxReplicas"] = json!(6);
    let r = kapi.request(&Request::new("PUT", &format!("{v1}/web")).json(&through_v1));
    assert_eq!(r.status, 200, "{}", r.raw);
    let after = kapi.get_json(&format!("{v2}/web"));
    assert_eq!(after["spec"]["maxReplicas"], 6);
    assert_eq!(after["spec"]["metrics"].as_array().map(Vec::len), Some(2), "{after}");
    let listed = kapi.get_json(v1);
    assert_eq!(listed["kind"], "HorizontalPodAutoscalerList");
    assert_eq!(listed["apiVersion"], "autoscaling/v1");
    assert_eq!(listed["items"][0]["spec"]["targetCPUUtilizationPercentage"], 60);
    // kubectl prints it from either version.
    let table = kapi.kubectl(&["get", "hpa", "web"]).ok("kubectl get hpa");
    assert!(table.lines().any(|l| l.starts_with("web ")), "{table}");

    // An events.k8s.io Event is a core Event too.
    let ev = kapi.request(&Request::new("POST", "/apis/events.k8s.io/v1/namespaces/default/events").json(&json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e1"},
        "eventTime": "2026-11-23T05:00:00.000000Z", "reportingController": "example.com/ctl", "reportingInstance": "ctl-1",
        "action": "Scaling", "reason": "Scaled", "type": "Normal", "note": "scaled to 3",
        "regarding": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "default"}})));
    assert_eq!(ev.status, 201, "{}", ev.raw);
    assert_eq!(ev.body["note"], "scaled to 3");
    let core = kapi.get_json("/api/v1/namespaces/default/events/e1");
    assert_eq!(core["apiVersion"], "v1");
    assert_eq!(core["message"], "scaled to 3");
    assert_eq!(core["involvedObject"]["name"], "web");
    assert_eq!(core["reportingComponent"], "example.com/ctl");
    let events = kapi.kubectl(&["get", "events", "-o", "name"]).ok("kubectl get events");
    assert!(events.lines().any(|l| l.trim() == "event/e1"), "{events}");
}
