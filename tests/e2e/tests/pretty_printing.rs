//! Pretty printing as kube-apiserver does it (issue 25 point 10): JSON answers are indented
//! (Go's `json.MarshalIndent` with two spaces, no newline at the end) when the query says
//! `pretty=true` or `pretty=1`, when the media type asks `pretty=1`, or, unless the query says
//! otherwise, when the User-Agent is curl, Wget or a browser; objects, lists, Status errors
//! (from handlers and filters alike) and discovery, never protobuf or watch streams. `/version`
//! is always indented. Checked byte for byte over raw HTTP.

use kapi_e2e::{Kapi, Request};
use serde_json::{json, Value};

const CM: &str = "/api/v1/namespaces/default/configmaps/settings";
const CURL: &str = "curl/8.5.0";

/// The body kube writes for `compact` when it pretty-prints: the same members in the same
/// order, indented by two spaces, without the compact encoder's final newline.
fn indented(compact: &str) -> String {
    let value: Value = serde_json::from_str(compact).expect("a JSON answer");
    serde_json::to_string_pretty(&value).expect("re-encode")
}

fn get(kapi: &Kapi, path: &str, agent: &str) -> String {
    let r = kapi.request(&Request::get(path).header("User-Agent", agent));
    assert!(r.status < 500, "GET {path}: {}", r.raw);
    r.raw
}

#[test]
fn json_answers_are_indented_for_people_and_on_request() {
    let kapi = Kapi::start().expect("start kapi");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
        "data": {"mode": "fast", "empty": ""}});
    assert_eq!(kapi.request(&Request::new("POST", "/api/v1/namespaces/default/configmaps").json(&cm)).status, 201);

    // A program gets compact JSON with a newline; curl, Wget and browsers get it indented.
    let compact = get(&kapi, CM, "kapi-e2e");
    assert!(compact.ends_with("}\n") && !compact.contains("\n "), "{compact}");
    let pretty = indented(&compact);
    for line in ["{", "  \"kind\": \"ConfigMap\",", "    \"name\": \"settings\",", "        \"fieldsV1\": {", "          \"f:data\": {", "            \".\": {},", "    \"mode\": \"fast\",", "}"] {
        assert!(pretty.lines().any(|l| l == line), "no line {line:?} in:\n{pretty}");
    }
    for agent in [CURL, "Wget/1.21.3", "Mozilla/5.0 (X11; Linux x86_64)"] {
        assert_eq!(get(&kapi, CM, agent), pretty, "User-Agent {agent}");
    }
    // The query decides first (Go's ParseBool; an unreadable value is false, an empty one is
    // no answer), then the agent.
    for (query, agent, want) in [
        ("pretty=true", "kapi-e2e", &pretty),
        ("pretty=1", "kapi-e2e", &pretty),
        ("pretty=T", "kapi-e2e", &pretty),
        ("pretty=false", CURL, &compact),
        ("pretty=0", "Mozilla/5.0", &compact),
        ("pretty=yes", CURL, &compact),
        ("pretty=", CURL, &pretty),
        ("pretty=", "kapi-e2e", &compact),
    ] {
        assert_eq!(&get(&kapi, &format!("{CM}?{query}"), agent), want, "?{query} from {agent}");
    }
    // The media type may ask too.
    let r = kapi.request(&Request::get(CM).accept("application/json;pretty=1"));
    assert_eq!(r.raw, pretty);

    // Lists (the streaming fast path), Tables and discovery.
    let list = get(&kapi, "/api/v1/namespaces/default/configmaps", "kapi-e2e");
    assert_eq!(get(&kapi, "/api/v1/namespaces/default/configmaps", CURL), indented(&list));
    let table_accept = "application/json;as=Table;v=v1;g=meta.k8s.io";
    let table = kapi.request(&Request::get("/api/v1/namespaces/default/configmaps").accept(table_accept));
    let table_pretty = kapi.request(&Request::get("/api/v1/namespaces/default/configmaps?pretty=true").accept(table_accept));
    assert_eq!(table_pretty.raw, indented(&table.raw));
    for path in ["/api", "/apis", "/api/v1", "/apis/apps"] {
        assert_eq!(get(&kapi, &format!("{path}?pretty=1"), "kapi-e2e"), indented(&get(&kapi, path, "kapi-e2e")), "{path}");
    }
    let aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let agg = kapi.request(&Request::get("/apis").accept(aggregated));
    let agg_pretty = kapi.request(&Request::get("/apis").accept(aggregated).header("User-Agent", CURL));
    assert_eq!(agg_pretty.raw, indented(&agg.raw));

    // /version is indented for everyone (kube writes it with WriteRawJSON).
    let version = get(&kapi, "/version", "kapi-e2e");
    assert!(version.starts_with("{\n  \"major\": \"1\",\n  \"minor\": \"36\",") && version.ends_with("\n}"), "{version}");
}

#[test]
fn errors_are_indented_too_but_never_protobuf_or_watch_streams() {
    let kapi = Kapi::start().expect("start kapi");
    // A handler's Status.
    assert_eq!(
        get(&kapi, "/api/v1/namespaces/default/configmaps/nope", CURL),
        "{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {},\n  \"status\": \"Failure\",\n  \
         \"message\": \"configmaps \\\"nope\\\" not found\",\n  \"reason\": \"NotFound\",\n  \"details\": {\n    \
         \"name\": \"nope\",\n    \"kind\": \"configmaps\"\n  },\n  \"code\": 404\n}"
    );
    // A filter's Status: an anonymous request refused by authorization.
    let r = kapi.request(&Request::get("/api/v1/namespaces?pretty=true").without_client_cert());
    assert_eq!(r.status, 403, "{}", r.raw);
    assert_eq!(
        r.raw,
        "{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {},\n  \"status\": \"Failure\",\n  \
         \"message\": \"namespaces is forbidden: User \\\"system:anonymous\\\" cannot list resource \\\"namespaces\\\" in API group \\\"\\\" at the cluster scope\",\n  \
         \"reason\": \"Forbidden\",\n  \"details\": {\n    \"kind\": \"namespaces\"\n  },\n  \"code\": 403\n}"
    );

    // Protobuf is binary whoever asks.
    let r = kapi.request(&Request::get("/api/v1/namespaces/default?pretty=true").accept("application/vnd.kubernetes.protobuf"));
    assert!(r.raw.starts_with("k8s\u{0}"), "{:?}", r.raw);

    // A watch stream stays one compact event per line.
    let r = kapi.request(
        &Request::get("/api/v1/namespaces?watch=1&timeoutSeconds=1&pretty=true").header("User-Agent", CURL),
    );
    let lines: Vec<&str> = r.raw.lines().collect();
    assert!(lines.len() >= 4, "{}", r.raw);
    for line in lines {
        assert!(line.starts_with("{\"type\":\"ADDED\",\"object\":{"), "{line}");
    }
}
