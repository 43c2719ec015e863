//! Writes the seed corpus of every fuzz target into `fuzz/corpus/<target>/` from real data:
//! one example object of every served built-in kind (filled from its OpenAPI schema, as the
//! reference `/openapi/v2` describes it), the e2e fixtures' manifests, the reference discovery
//! documents and the prometheus-operator CRDs' CEL rules, plus hand-picked inputs for the
//! query-string and header parsers. Seeds are named `seed-*`; inputs the fuzzers find keep
//! libFuzzer's names, so rerunning this replaces the seeds only.
//!
//! `cargo run -p kapi-fuzz-targets --example seed_corpus`

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kapi_apimachinery::continue_token;
use kapi_fieldmanager::{apply, FieldSet, Writer};
use kapi_openapi::{apply_schema, OpenApi, ServedResource};
use kapi_protobuf_codec::Codec;
use kapi_registry::catalog;
use serde_json::{json, Map, Value};

/// The largest example written: bigger inputs slow every fuzzer iteration down.
const MAX_EXAMPLE_BYTES: usize = 12 * 1024;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Corpus {
    dir: PathBuf,
    written: usize,
}

impl Corpus {
    /// Empties the seeds (not the fuzzers' finds) of every target.
    fn new() -> Corpus {
        let dir = root().join("fuzz/corpus");
        for (name, _) in kapi_fuzz_targets::TARGETS {
            let target = dir.join(name);
            std::fs::create_dir_all(&target).expect("create the corpus folder");
            for entry in std::fs::read_dir(&target).expect("list the corpus folder").flatten() {
                if entry.file_name().to_string_lossy().starts_with("seed-") {
                    std::fs::remove_file(entry.path()).expect("remove an old seed");
                }
            }
        }
        Corpus { dir, written: 0 }
    }

    fn put(&mut self, target: &str, name: &str, data: impl AsRef<[u8]>) {
        let safe: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect();
        let path = self.dir.join(target).join(format!("seed-{safe}"));
        std::fs::write(&path, data).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        self.written += 1;
    }

    fn pair(&mut self, target: &str, name: &str, first: &Value, second: &[u8]) {
        let mut data = serde_json::to_vec(first).expect("encode");
        data.push(0);
        data.extend_from_slice(second);
        self.put(target, name, data);
    }
}

/// The OpenAPI definitions of the served kinds, from the document kapi serves.
fn definitions() -> Map<String, Value> {
    let served = catalog::resources()
        .iter()
        .map(|r| ServedResource {
            group: r.group.to_owned(),
            version: r.version.to_owned(),
            kind: r.kind.to_owned(),
            resource: r.resource.to_owned(),
            namespaced: r.namespaced,
            verbs: r.verbs.iter().map(|v| (*v).to_owned()).collect(),
            subresources: Vec::new(),
            delete_returns_object: false,
        })
        .collect();
    let v2: Value = serde_json::from_slice(&OpenApi::new(served).v2()).expect("the v2 document is JSON");
    v2.get("definitions").and_then(Value::as_object).cloned().expect("definitions")
}

/// A value for `schema`, every property filled down to `depth` levels.
fn sample(defs: &Map<String, Value>, schema: &Value, depth: usize) -> Option<Value> {
    if let Some(name) = schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/definitions/")) {
        if let Some(special) = special(name) {
            return Some(special);
        }
        return sample(defs, defs.get(name)?, depth);
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => Some(match schema.get("format").and_then(Value::as_str) {
            Some("byte") => json!("ZXhhbXBsZQ=="),
            Some("date-time") => json!("2026-01-01T00:00:00Z"),
            _ => json!("example"),
        }),
        Some("integer") => Some(json!(3)),
        Some("number") => Some(json!(0.5)),
        Some("boolean") => Some(json!(true)),
        Some("array") if depth > 0 => Some(json!([sample(defs, schema.get("items")?, depth - 1)?])),
        Some("object") | None if depth > 0 => {
            let mut out = Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, p) in props {
                    if let Some(v) = sample(defs, p, depth - 1) {
                        out.insert(k.clone(), v);
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties") {
                out.insert("key".into(), sample(defs, ap, depth - 1)?);
            }
            Some(Value::Object(out))
        }
        _ => None,
    }
}

/// Types whose JSON form is not their schema's shape.
fn special(name: &str) -> Option<Value> {
    Some(match name.rsplit('.').next()? {
        "Time" => json!("2026-01-01T00:00:00Z"),
        "MicroTime" => json!("2026-01-01T00:00:00.000000Z"),
        "Quantity" => json!("500m"),
        "IntOrString" => json!(8080),
        "RawExtension" => json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "inner"}, "data": {"a": "b"}}),
        "FieldsV1" => json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}),
        "JSON" => json!({"a": [1, "two"]}),
        "ObjectMeta" => json!({
            "name": "example", "namespace": "default", "uid": "6d3f1b0e-2f6c-4c1e-9a4b-1f2e3d4c5b6a",
            "resourceVersion": "42", "generation": 2, "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "example", "tier": "front"}, "annotations": {"note": "seed"},
            "finalizers": ["example.com/cleanup"],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u1", "controller": true}]
        }),
        _ => return None,
    })
}

/// One example of every served built-in kind, each at most [`MAX_EXAMPLE_BYTES`].
fn examples() -> BTreeMap<String, Value> {
    let defs = definitions();
    let mut out = BTreeMap::new();
    for r in catalog::resources() {
        let api_version = if r.group.is_empty() { r.version.to_owned() } else { format!("{}/{}", r.group, r.version) };
        let Some(def) = defs.values().find(|d| {
            d.get("x-kubernetes-group-version-kind").and_then(Value::as_array).is_some_and(|gvks| {
                gvks.iter().any(|g| g["group"] == r.group && g["version"] == r.version && g["kind"] == r.kind)
            })
        }) else {
            continue;
        };
        for depth in (2..=8).rev() {
            let Some(Value::Object(mut obj)) = sample(&defs, def, depth) else { continue };
            obj.insert("apiVersion".into(), json!(api_version));
            obj.insert("kind".into(), json!(r.kind));
            let obj = Value::Object(obj);
            if serde_json::to_vec(&obj).map(|v| v.len()).unwrap_or(usize::MAX) <= MAX_EXAMPLE_BYTES {
                out.insert(format!("{}-{}-{}", if r.group.is_empty() { "core" } else { r.group }, r.version, r.kind), obj);
                break;
            }
        }
    }
    out
}

/// The objects of the e2e fixtures, each with its YAML text.
fn fixtures() -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for file in ["app.yaml", "platform.yaml", "pod.yaml", "rbac-policy.yaml"] {
        let text = std::fs::read_to_string(root().join("tests/e2e/fixtures").join(file)).expect("read a fixture");
        for (i, doc) in text.split("\n---").enumerate() {
            if let Ok(v @ Value::Object(_)) = serde_saphyr::from_str::<Value>(doc) {
                out.push((format!("{file}-{i}"), doc.trim_start_matches('\n').to_owned(), v));
            }
        }
    }
    out
}

fn main() {
    let mut c = Corpus::new();
    let examples = examples();
    let fixtures = fixtures();
    let codec = Codec::global();

    for (name, obj) in &examples {
        let json = serde_json::to_vec(obj).expect("encode");
        c.put("decode_json", &format!("{name}.json"), &json);
        if let Ok(bytes) = codec.encode(obj) {
            c.put("protobuf_object", &format!("{name}.pb"), &bytes);
        }
    }
    for (name, yaml, obj) in &fixtures {
        c.put("decode_yaml", &format!("{name}.yaml"), yaml);
        c.put("decode_json", &format!("{name}.json"), serde_json::to_vec_pretty(obj).expect("encode"));
    }
    for doc in ["api.json", "apis.json", "api__v1.json"] {
        let text = std::fs::read(root().join("tests/reference/discovery").join(doc)).expect("read discovery");
        c.put("decode_json", doc, text);
    }
    let crd = std::fs::read_to_string(root().join("tests/e2e/fixtures/crds/prometheus-operator/monitoring.coreos.com_prometheusrules.yaml"))
        .expect("read the PrometheusRule CRD");
    c.put("decode_yaml", "prometheusrules-crd.yaml", &crd);
    for name in ["apps-v1-Deployment", "core-v1-Pod", "core-v1-Service", "core-v1-ConfigMap", "batch-v1-CronJob"] {
        if let Some(obj) = examples.get(name) {
            c.put("decode_yaml", &format!("{name}.json-as-yaml"), serde_json::to_vec_pretty(obj).expect("encode"));
        }
    }

    watch_seeds(&mut c, &examples, codec);
    patch_seeds(&mut c, &examples, &fixtures);
    apply_seeds(&mut c, &examples, &fixtures);
    text_seeds(&mut c);
    cel_seeds(&mut c);
    println!("wrote {} seeds under {}", c.written, c.dir.display());
}

fn watch_seeds(c: &mut Corpus, examples: &BTreeMap<String, Value>, codec: &Codec) {
    let events = ["ADDED", "MODIFIED", "DELETED", "BOOKMARK"];
    for (i, name) in ["core-v1-ConfigMap", "core-v1-Pod", "apps-v1-Deployment", "core-v1-Event", "coordination.k8s.io-v1-Lease", "discovery.k8s.io-v1-EndpointSlice"]
        .iter()
        .enumerate()
    {
        let Some(obj) = examples.get(*name) else { continue };
        let Ok(encoded) = codec.encode(obj) else { continue };
        let frame = codec.watch_frame(events[i % events.len()], &encoded);
        c.put("protobuf_watch", &format!("{name}.event"), &frame[4..]);
    }
}

fn patch_seeds(c: &mut Corpus, examples: &BTreeMap<String, Value>, fixtures: &[(String, String, Value)]) {
    let deployment = kapi_fuzz_targets::default_document();
    let json_patches = [
        r#"[{"op":"replace","path":"/spec/replicas","value":5}]"#,
        r#"[{"op":"add","path":"/metadata/labels/tier","value":"front"},{"op":"remove","path":"/metadata/labels/app"}]"#,
        r#"[{"op":"test","path":"/metadata/finalizers","value":null},{"op":"add","path":"/metadata/finalizers","value":["a/b"]}]"#,
        r#"[{"op":"add","path":"/spec/template/spec/containers/-","value":{"name":"x","image":"y"}}]"#,
        r#"[{"op":"move","from":"/spec/template/spec/containers/0","path":"/spec/template/spec/containers/1"}]"#,
        r#"[{"op":"copy","from":"/metadata/labels","path":"/spec/template/metadata/annotations"},{"op":"test","path":"/spec/replicas","value":2}]"#,
        r#"[{"op":"replace","path":"/spec/template/spec/containers/0/env/0/value","value":"2"},{"op":"remove","path":"/spec/template/spec/tolerations/0"}]"#,
        r#"[{"op":"add","path":"/metadata/annotations","value":{"a~1b":"c"}},{"op":"replace","path":"/metadata/annotations/a~1b","value":"d"}]"#,
    ];
    let merge_patches = [
        r#"{"metadata":{"labels":{"app":null,"tier":"front"}},"spec":{"replicas":3}}"#,
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.28"}]}}}}"#,
        r#"{"metadata":{"annotations":{"a":{"nested":null,"b":1}}},"status":null}"#,
        r#"[{"a":null,"b":{"c":null}}]"#,
    ];
    let strategic = [
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.28"}]}}}}"#,
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","$patch":"delete"}]}}}}"#,
        r#"{"spec":{"template":{"spec":{"$setElementOrder/containers":[{"name":"sidecar"},{"name":"web"}],"containers":[{"name":"web","ports":[{"containerPort":8080}]}]}}}}"#,
        r#"{"metadata":{"$deleteFromPrimitiveList/finalizers":["a"],"finalizers":["b"]},"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate"}}}"#,
        r#"{"spec":{"template":{"spec":{"tolerations":[{"key":"k2","operator":"Equal","value":"v"}],"volumes":[{"name":"v","emptyDir":{}}]}}}}"#,
        r#"{"metadata":{"labels":{"$patch":"replace","only":"this"}},"spec":{"selector":null}}"#,
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"A","$patch":"delete"},{"name":"B","value":"2"}]}]}}}}"#,
    ];
    for (i, p) in json_patches.iter().enumerate() {
        c.pair("json_patch", &format!("deployment-{i}"), &deployment, p.as_bytes());
    }
    for (i, p) in merge_patches.iter().enumerate() {
        c.pair("merge_patch", &format!("deployment-{i}"), &deployment, p.as_bytes());
    }
    for (i, p) in strategic.iter().enumerate() {
        c.pair("strategic_merge_patch", &format!("deployment-{i}"), &deployment, p.as_bytes());
    }
    let service_patch = br#"{"spec":{"ports":[{"port":443,"name":"https","targetPort":8443}],"selector":{"app":"web"}}}"#;
    let pod_patch = br#"{"spec":{"containers":[{"name":"example","resources":{"limits":{"cpu":"1"}}}],"initContainers":[{"name":"init","$patch":"delete"}]},"metadata":{"ownerReferences":[{"uid":"u1","$patch":"delete"}]}}"#;
    for (name, patch) in [("core-v1-Service", &service_patch[..]), ("core-v1-Pod", &pod_patch[..])] {
        if let Some(obj) = examples.get(name) {
            c.pair("strategic_merge_patch", name, obj, patch);
            c.pair("merge_patch", name, obj, patch);
            c.pair("json_patch", name, obj, br#"[{"op":"replace","path":"/metadata/name","value":"renamed"}]"#);
        }
    }
    for (name, _, obj) in fixtures.iter().take(4) {
        c.pair("strategic_merge_patch", name, obj, br#"{"metadata":{"labels":{"patched":"yes"}}}"#);
    }
}

fn apply_seeds(c: &mut Corpus, examples: &BTreeMap<String, Value>, fixtures: &[(String, String, Value)]) {
    let configs = [
        ("deployment-create", None, "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.28\n"),
        ("configmap-create", None, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  labels:\n    a: b\ndata:\n  key: value\n"),
        ("service-ports", None, "apiVersion: v1\nkind: Service\nmetadata:\n  name: svc\nspec:\n  ports:\n  - port: 80\n    protocol: TCP\n  - port: 443\n    protocol: TCP\n"),
    ];
    let deployment = kapi_fuzz_targets::default_document();
    for (name, live, yaml) in configs {
        let live: Option<&Value> = live;
        match live {
            Some(l) => c.pair("server_side_apply", name, l, yaml.as_bytes()),
            None => c.put("server_side_apply", name, yaml),
        }
    }
    c.pair("server_side_apply", "deployment-update", &deployment, configs[0].2.as_bytes());
    for (name, _, obj) in fixtures.iter().take(6) {
        let config = serde_json::to_vec(obj).expect("encode");
        c.put("server_side_apply", &format!("{name}-create"), &config);
    }
    // managedFields made by real applies, and the examples' own FieldsV1.
    let writer = Writer { manager: "kubectl".into(), api_version: "apps/v1".into(), subresource: String::new(), reset: FieldSet::new(), now: "2026-01-01T00:00:00Z".into() };
    if let Some(schema) = apply_schema("apps", "v1", "Deployment") {
        for (i, (_, _, obj)) in fixtures.iter().enumerate().take(3) {
            if let Ok(applied) = apply(Some(&deployment), obj, &schema, &writer, true) {
                if let Some(mf) = applied.pointer("/metadata/managedFields") {
                    c.put("fields_v1", &format!("applied-{i}"), serde_json::to_vec(mf).expect("encode"));
                }
            }
        }
        if let Ok(applied) = apply(None, &deployment, &schema, &writer, false) {
            if let Some(mf) = applied.pointer("/metadata/managedFields") {
                c.put("fields_v1", "deployment", serde_json::to_vec(mf).expect("encode"));
                c.pair("server_side_apply", "deployment-managed", &applied, br#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":1}}"#);
            }
        }
    }
    c.put("fields_v1", "fieldsv1-keys", br#"{"f:spec":{"f:containers":{"k:{\"name\":\"a\"}":{".":{},"f:image":{}}},"f:replicas":{}},"f:metadata":{"f:finalizers":{"v:\"x\"":{}}},"f:items":{"i:0":{}}}"#);
    if let Some(pod) = examples.get("core-v1-Pod") {
        c.put("fields_v1", "pod-managed", serde_json::to_vec(&json!([{"manager": "m", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": pod.pointer("/metadata/managedFields/0/fieldsV1").cloned().unwrap_or(json!({}))}])).expect("encode"));
    }
}

fn text_seeds(c: &mut Corpus) {
    let lists: &[(&str, &[&str])] = &[
        ("label_selector", &[
            "app=web", "app==web,tier!=db", "environment in (production, qa)", "tier notin (frontend,backend)",
            "partition", "!partition", "x>5,y<10", "app.kubernetes.io/name=kapi,example.com/key", "a in (),b",
            "k in (a,b),k2 notin (c),!k3,k4", "  spaced  =  value ", "key=", "a=b,c",
        ]),
        ("field_selector", &[
            "metadata.name=web", "metadata.namespace!=kube-system", "spec.nodeName=node-1,status.phase=Running",
            "metadata.name==a\\,b", "involvedObject.kind=Pod,involvedObject.name=p\\=1", "a=b\\\\c", "type!=Normal",
        ]),
        ("resource_version", &[
            "", "0", "42\nNotOlderThan", "42\nExact", "0\nExact", "\nExact", "18446744073709551615",
            "18446744073709551616", "-1", "42\n\n\nw", "\nNotOlderThan\n\nwS", "7\nExact\ntoken", "3\n\ncontinue\n",
        ]),
        ("go_duration", &[
            "0", "1s", "1m0s", "1h2m3.5s", "500ms", "10us", "1\u{b5}s", "3ns", "-1s", "+5m", "2562047h", "9999999999h",
            "1.5.5s", ".5s", "1.s", "10", "3x", "", "1h1h1h",
        ]),
        ("quantity", &[
            "0", "1", "500m", "1.5Gi", "+3k", "-2", "1e3", "1E-3", ".5", "5.", "128974848", "129e6", "123Mi", "1Ki",
            "100n", "8Ei", "9223372036854775807", "1iK", "1 Gi", "lots", "", "0.001m",
        ]),
        ("media_type", &[
            "application/json", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            "application/vnd.kubernetes.protobuf,application/json;q=0.9,*/*;q=0.8",
            "application/yaml; charset=utf-8", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
            "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8",
            "application/json;stream=watch", "application/apply-patch+yaml", "application/strategic-merge-patch+json",
            "application/json; param=\"quoted, value\"; q=0.5", "*/*", "text/*;q=0",
        ]),
    ];
    for (target, items) in lists {
        for (i, item) in items.iter().enumerate() {
            c.put(target, &i.to_string(), item);
        }
    }
    let tokens = [
        continue_token::encode(42, "default/web-1"),
        continue_token::encode(7, "ns/a"),
        continue_token::encode(u64::MAX, "kube-system/coredns"),
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6Nywic3RhcnQiOiJucy9hXHUwMDAwIn0".to_owned(),
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6Mywic3RhcnQiOiIuLi9zZWNyZXRzL3gifQ".to_owned(),
        "!!!!".to_owned(),
    ];
    for (i, t) in tokens.iter().enumerate() {
        c.put("continue_token", &i.to_string(), t);
    }
}

/// kube's documented rule examples, admission expressions, and every rule of the
/// prometheus-operator CRDs.
fn cel_seeds(c: &mut Corpus) {
    let mut rules: Vec<String> = [
        "self.minReplicas <= self.replicas && self.replicas <= self.maxReplicas",
        "self.spec.replicas > 0",
        "has(self.expired) && self.created + self.ttl < self.expired",
        "self.health.startsWith('ok')",
        "self.widgets.exists(w, w.key == 'x' && w.foo < 10)",
        "type(self) == string ? self == '100%' : self == 1000",
        "self.metadata.name.startsWith(self.prefix)",
        "self.set1.all(e, !(e in self.set2))",
        "size(self.names) == size(self.details) && self.names.all(n, n in self.details)",
        "size(self.clusters.filter(c, c.name == self.primary)) == 1",
        "self.map(k, self[k]).all(v, v > 0)",
        "!has(oldSelf.x) || self.x == oldSelf.x",
        "self == oldSelf",
        "object.spec.replicas <= params.limit",
        "request.userInfo.username.endsWith(':admin') || object.metadata.labels['app'] == 'web'",
        "variables.foo + 1 > 2",
        "quantity(object.spec.quantity).isLessThan(quantity('1'))",
        "isURL('https://example.com/x') && url('https://example.com:8443/a').getPort() == '8443'",
        "ip('10.0.0.1').family() == 4 && cidr('10.0.0.0/8').containsIP('10.1.2.3')",
        "'abc'.matches('^a.c$') && 'a,b'.split(',').size() == 2",
        "[1, 2, 3].sum() == 6 && [3, 1].sort() == [1, 3] && [1, [2]].flatten() == [1, 2]",
        "sets.contains([1, 2, 3], [1]) && sets.intersects([1], [1, 2])",
        "timestamp('2026-01-01T00:00:00Z') + duration('1h') > timestamp(object.metadata.creationTimestamp)",
        "object.metadata.name.lowerAscii().replace('-', '_').substring(1, 3).size() < 5",
        "format.dns1123Label().validate(object.metadata.name).hasValue() == false",
        "optional.of(1).orValue(2) == 1 && object.?spec.?replicas.orValue(0) > 0",
        "math.greatest(1, 2) == 2 && math.abs(-1) == 1 && 2.5.ceil() == 3.0",
        "authorizer.group('apps').resource('deployments').namespace('default').check('get').allowed()",
        "[JSONPatch{op: 'add', path: '/metadata/labels/a', value: 'b'}]",
        "Object{spec: Object.spec{replicas: 3}}",
        "dyn(1) == 1u || 1.0 / 0.0 > 1.0 || -9223372036854775808 / -1 == 0",
        "'%s-%d'.format(['a', 1]) == 'a-1'",
        "base64.encode(b'hi') == 'aGk=' && string(base64.decode('aGk=')) == 'hi'",
        "x.y", "1 +", "(((1)))", "[1,2][5]", "{'a': 1}['b']", "'\\x'",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    for crd in std::fs::read_dir(root().join("tests/e2e/fixtures/crds/prometheus-operator")).expect("CRDs").flatten() {
        let text = std::fs::read_to_string(crd.path()).unwrap_or_default();
        for line in text.lines() {
            if let Some(rule) = line.trim().strip_prefix("- rule: ").or_else(|| line.trim().strip_prefix("rule: ")) {
                let rule = serde_saphyr::from_str::<String>(rule).unwrap_or_else(|_| rule.to_owned());
                if !rules.contains(&rule) {
                    rules.push(rule);
                }
            }
        }
    }
    for (i, rule) in rules.iter().enumerate() {
        c.put("cel", &i.to_string(), rule);
    }
}
