//! Bad requests get kube-apiserver's status code and `Status` reason, and change nothing.
//!
//! Every case runs through curl with the admin client certificate (unless stated), and the
//! stored configmaps and namespaces are listed before and after to prove nothing was written.

use kapi_e2e::{Kapi, Request};
use serde_json::{json, Value};

const NS: &str = "bad";


struct Case {
    name: &'static str,
    req: Request,
    code: u16,
    /// Expected `Status.reason` ("" = do not check).
    reason: &'static str,
    /// A substring the `Status.message` must contain ("" = do not check).
    message: &'static str,
}

fn case(name: &'static str, req: Request, code: u16, reason: &'static str) -> Case {
    Case { name, req, code, reason, message: "" }
}

fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}})
}

fn cm_path(name: &str) -> String {
    format!("/api/v1/namespaces/{NS}/configmaps/{name}")
}

fn collection() -> String {
    format!("/api/v1/namespaces/{NS}/configmaps")
}

/// Every stored configmap and namespace with its resourceVersion, plus the data of `cm`.
fn snapshot(kapi: &Kapi) -> Vec<String> {
    let mut out = Vec::new();
    for path in ["/api/v1/configmaps", "/api/v1/namespaces"] {
        let list = kapi.get_json(path);
        for item in list["items"].as_array().into_iter().flatten() {
            let m = &item["metadata"];
            out.push(format!(
                "{path} {}/{} rv={} data={}",
                m["namespace"].as_str().unwrap_or(""),
                m["name"].as_str().unwrap_or(""),
                m["resourceVersion"].as_str().unwrap_or("?"),
                item["data"]
            ));
        }
    }
    out.sort();
    out
}

fn cases(stale_rv: &str, current_rv: &str) -> Vec<Case> {
    let json_ct = "application/json";
    let big = "x".repeat(3 * 1024 * 1024 + 512 * 1024);
    vec![
        case(
            "malformed JSON",
            Request::new("POST", &collection()).raw(json_ct, r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"#),
            400,
            "BadRequest",
        ),
        case(
            "malformed YAML",
            Request::new("POST", &collection()).raw("application/yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n  data: {\n"),
            400,
            "BadRequest",
        ),
        case(
            "wrong kind for the path",
            Request::new("POST", &collection()).json(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "wrongkind"}})),
            400,
            "BadRequest",
        ),
        case(
            "metadata of the wrong type",
            Request::new("POST", &collection()).json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": "nokind"})),
            400,
            "BadRequest",
        ),
        case(
            "wrong apiVersion",
            Request::new("POST", &collection()).json(&json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "wrongapi"}})),
            400,
            "BadRequest",
        ),
        Case {
            name: "invalid name Bad_Name",
            req: Request::new("POST", &collection()).json(&configmap("Bad_Name")),
            code: 422,
            reason: "Invalid",
            message: r#"ConfigMap "Bad_Name" is invalid"#,
        },
        case(
            "missing name",
            Request::new("POST", &collection()).json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})),
            422,
            "Invalid",
        ),
        case(
            "invalid data key",
            Request::new("POST", &collection())
                .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "badkey"}, "data": {"bad key!": "v"}})),
            422,
            "Invalid",
        ),
        case(
            "invalid namespace name",
            Request::new("POST", "/api/v1/namespaces").json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Upper"}})),
            422,
            "Invalid",
        ),
        case(
            "body over 3 MiB",
            Request::new("POST", &collection())
                .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "huge"}, "data": {"big": big}})),
            413,
            "RequestEntityTooLarge",
        ),
        case(
            "unknown field with fieldValidation=Strict",
            Request::new("POST", &format!("{}?fieldValidation=Strict", collection()))
                .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "strict"}, "bogus": 1})),
            400,
            "BadRequest",
        ),
        case("bad label selector", Request::get(&format!("{}?labelSelector=a%20b", collection())), 400, "BadRequest"),
        case(
            "unknown field selector",
            Request::get(&format!("{}?fieldSelector=spec.unknownField%3Dx", collection())),
            400,
            "BadRequest",
        ),
        case(
            "field selector unsupported on this kind",
            Request::get(&format!("/api/v1/namespaces/{NS}/secrets?fieldSelector=spec.nodeName%3Dn1")),
            400,
            "BadRequest",
        ),
        case("limit=abc", Request::get(&format!("{}?limit=abc", collection())), 400, "BadRequest"),
        // kube-apiserver validates ListOptions into an Invalid (422) Status.
        case(
            "resourceVersionMatch=Bogus",
            Request::get(&format!("{}?resourceVersion=0&resourceVersionMatch=Bogus", collection())),
            422,
            "Invalid",
        ),
        Case {
            name: "stale resourceVersion on update",
            req: Request::new("PUT", &cm_path("cm")).json(&json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm", "namespace": NS, "resourceVersion": stale_rv},
                "data": {"stale": "write"}
            })),
            code: 409,
            reason: "Conflict",
            message: "the object has been modified",
        },
        Case {
            name: "update with a different name than the URL",
            req: Request::new("PUT", &cm_path("cm")).json(&json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "other", "namespace": NS, "resourceVersion": current_rv},
                "data": {"renamed": "yes"}
            })),
            code: 400,
            reason: "BadRequest",
            message: "does not match the name on the URL",
        },
        Case {
            name: "wrong namespace in body",
            req: Request::new("POST", &collection()).json(&json!({
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "wrongns", "namespace": "default"}
            })),
            code: 400,
            reason: "BadRequest",
            message: "does not match the namespace",
        },
        case(
            "JSON patch that is not an array",
            Request::new("PATCH", &cm_path("cm")).raw("application/json-patch+json", r#"{"op":"add"}"#),
            400,
            "BadRequest",
        ),
        case(
            "JSON patch test op failing",
            Request::new("PATCH", &cm_path("cm"))
                .raw("application/json-patch+json", r#"[{"op":"test","path":"/data/a","value":"nope"},{"op":"replace","path":"/data/a","value":"changed"}]"#),
            422,
            "Invalid",
        ),
        case(
            "merge patch that is not an object",
            Request::new("PATCH", &cm_path("cm")).raw("application/merge-patch+json", "[1,2,3]"),
            400,
            "BadRequest",
        ),
        case(
            "unsupported patch content type",
            Request::new("PATCH", &cm_path("cm")).raw("text/plain", r#"{"data":{"a":"2"}}"#),
            415,
            "UnsupportedMediaType",
        ),
        case("unsupported Accept text/html", Request::get(&collection()).accept("text/html"), 406, "NotAcceptable"),
        case(
            "garbage protobuf body",
            Request::new("POST", &collection()).raw("application/vnd.kubernetes.protobuf", b"k8s\0\x0a\xff\xff garbage".to_vec()),
            400,
            "BadRequest",
        ),
        case(
            "truncated protobuf body",
            // A ConfigMap envelope cut inside its raw bytes.
            Request::new("POST", &collection())
                .raw("application/vnd.kubernetes.protobuf", b"k8s\0\x0a\x0f\x0a\x02v1\x12\x09ConfigMap\x12\x20\x0a\x03".to_vec()),
            400,
            "BadRequest",
        ),
        case(
            "protobuf body without the k8s magic",
            Request::new("POST", &collection()).raw("application/vnd.kubernetes.protobuf", br#"{"kind":"ConfigMap"}"#.to_vec()),
            400,
            "BadRequest",
        ),
        Case {
            name: "create in a missing namespace",
            req: Request::new("POST", "/api/v1/namespaces/missing/configmaps").json(&configmap("orphan")),
            code: 404,
            reason: "NotFound",
            message: r#"namespaces "missing" not found"#,
        },
        Case {
            name: "get of a missing object",
            req: Request::get(&cm_path("x")),
            code: 404,
            reason: "NotFound",
            message: r#"configmaps "x" not found"#,
        },
        Case {
            name: "delete of a missing object",
            req: Request::new("DELETE", &cm_path("x")),
            code: 404,
            reason: "NotFound",
            message: r#"configmaps "x" not found"#,
        },
        Case {
            name: "create of an existing object",
            req: Request::new("POST", &collection()).json(&configmap("cm")),
            code: 409,
            reason: "AlreadyExists",
            message: r#"configmaps "cm" already exists"#,
        },
        // Anonymous requests are on by default, as in kube-apiserver: the request is the
        // anonymous user's, and RBAC forbids it.
        case("request without client certificate", Request::get(&collection()).without_client_cert(), 403, "Forbidden"),
        case("cluster-scoped resource under a namespace", Request::get(&format!("/api/v1/namespaces/{NS}/nodes")), 404, "NotFound"),
        case("unknown resource", Request::get(&format!("/api/v1/namespaces/{NS}/widgets")), 404, "NotFound"),
        case(
            "DELETE with propagationPolicy=Bogus",
            Request::new("DELETE", &format!("{}?propagationPolicy=Bogus", cm_path("cm"))),
            422,
            "Invalid",
        ),
        Case {
            name: "create with dryRun=All stores nothing",
            req: Request::new("POST", &format!("{}?dryRun=All", collection())).json(&configmap("dry")),
            code: 201,
            reason: "",
            message: "",
        },
    ]
}

#[test]
fn bad_requests_get_kube_errors_and_change_nothing() {
    let kapi = Kapi::start().expect("start kapi");
    let ns = kapi.request(
        &Request::new("POST", "/api/v1/namespaces").json(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})),
    );
    assert_eq!(ns.status, 201, "create namespace: {}", ns.raw);
    let created = kapi.request(&Request::new("POST", &collection()).json(&configmap("cm")));
    assert_eq!(created.status, 201, "create cm: {}", created.raw);
    let stale_rv = created.body["metadata"]["resourceVersion"].as_str().expect("resourceVersion").to_owned();
    let mut updated = created.body.clone();
    updated["data"] = json!({"a": "2"});
    let updated = kapi.request(&Request::new("PUT", &cm_path("cm")).json(&updated));
    assert_eq!(updated.status, 200, "update cm: {}", updated.raw);
    let current_rv = updated.body["metadata"]["resourceVersion"].as_str().expect("resourceVersion").to_owned();
    assert_ne!(stale_rv, current_rv, "an update must change resourceVersion");

    let cases = cases(&stale_rv, &current_rv);
    assert!(cases.len() >= 22);
    let mut failures = Vec::new();
    for c in &cases {
        let before = snapshot(&kapi);
        let r = kapi.request(&c.req);
        let after = snapshot(&kapi);
        let code_ok = r.status == c.code;
        let expected_code = c.code;
        let short: String = r.raw.chars().take(300).collect();
        if !code_ok {
            failures.push(format!("{}: {} {}: expected HTTP {expected_code}, got {}: {short}", c.name, c.req.method, c.req.path, r.status));
        }
        if r.status >= 400
            && (r.body["kind"] != json!("Status") || r.body["status"] != json!("Failure") || r.body["code"] != json!(r.status))
        {
            failures.push(format!("{}: error body is not a Failure Status with code {}: {short}", c.name, r.status));
        }
        if !c.reason.is_empty() && r.reason() != c.reason {
            failures.push(format!("{}: expected reason {}, got {:?}: {short}", c.name, c.reason, r.reason()));
        }
        if !c.message.is_empty() && !r.message().contains(c.message) {
            failures.push(format!("{}: message {:?} lacks {:?}", c.name, r.message(), c.message));
        }
        if before != after {
            failures.push(format!("{}: the request changed stored state:\nbefore {before:?}\nafter  {after:?}", c.name));
        }
    }
    let cm = kapi.get_json(&cm_path("cm"));
    if cm["data"] != json!({"a": "2"}) || cm["metadata"]["resourceVersion"] != json!(current_rv) {
        failures.push(format!("configmap cm changed: {cm}"));
    }
    assert!(failures.is_empty(), "{} of {} bad-input cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
