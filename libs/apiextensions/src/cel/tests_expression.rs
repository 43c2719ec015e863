//! Admission expressions: kube's compile errors, evaluation with JSON bindings, variables,
//! the authorizer library, cost limits.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::{
    Activation, AuthorizerInput, AuthzAttributes, AuthzDecision, AuthzUser, CelAuthorizer, Declarations, EvalError,
    Evaluator, ExpressionCompiler, Input, Output, RequestResource, ReturnType, RUNTIME_CEL_COST_BUDGET,
};

const PARAMS: Declarations = Declarations { params: true, authorizer: true };

fn compile_err(src: &str, ret: ReturnType) -> String {
    ExpressionCompiler::new().compile(src, ret, PARAMS).expect_err(src).detail
}

fn eval_with(compiler: &ExpressionCompiler, src: &str, ret: ReturnType, input: &Input) -> Result<Output, EvalError> {
    let expr = compiler.compile(src, ret, PARAMS).unwrap_or_else(|e| panic!("{src}: {e}"));
    let mut ev = Evaluator::new(Arc::new(Activation::new(input)), compiler.variables(), RUNTIME_CEL_COST_BUDGET);
    ev.evaluate(&expr)
}

fn deployment(replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "a", "image": "nginx:1"}, {"name": "b", "image": "busybox"}]}}}})
}

fn request() -> Value {
    json!({"kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "requestKind": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "requestResource": {"group": "apps", "version": "v1", "resource": "deployments"},
        "name": "web", "namespace": "default", "operation": "CREATE",
        "userInfo": {"username": "alice", "groups": ["dev"]}, "dryRun": false})
}

#[test]
fn calls_without_arguments_are_undeclared_not_a_panic() {
    // Found by the cel fuzz target: the checker indexed the first argument of `cii()`.
    for expr in ["cii()", "object.metadata.name.lowerAs % cii()", "1 + f()"] {
        assert!(compile_err(expr, ReturnType::Any).starts_with("compilation failed: ERROR: <input>:1:"), "{expr}");
    }
}

#[test]
fn compile_errors_have_kubes_text() {
    assert!(compile_err("object.spec.replicas > 'a' +", ReturnType::Bool)
        .starts_with("compilation failed: ERROR: <input>:1:"));
    assert_eq!(
        compile_err("foo == 1", ReturnType::Bool),
        "compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo == 1\n | ^"
    );
    assert_eq!(
        compile_err("request.nope == 'x'", ReturnType::Bool),
        "compilation failed: ERROR: <input>:1:8: undefined field 'nope'\n | request.nope == 'x'\n | .......^"
    );
    assert_eq!(
        compile_err("variables.missing", ReturnType::Bool),
        "compilation failed: ERROR: <input>:1:10: undefined field 'missing'\n | variables.missing\n | .........^"
    );
    assert_eq!(compile_err("object.spec.replicas", ReturnType::Bool), "must evaluate to bool but got dyn");
    assert_eq!(compile_err("1", ReturnType::String), "must evaluate to string but got int");
    assert_eq!(compile_err("1", ReturnType::StringOrNull), "must evaluate to one of [string null_type] but got int");
    // params exist only with a paramKind
    let no_params = ExpressionCompiler::new().compile("params.x == 1", ReturnType::Bool, Declarations::default());
    assert!(no_params.unwrap_err().detail.contains("undeclared reference to 'params'"));
    // the authorizer library: types checked
    assert!(compile_err("authorizer.group('').check('get').allowed()", ReturnType::Bool)
        .contains("found no matching overload for 'check' applied to 'kubernetes.authorization.GroupCheck.(string)'"));
    let no_authz = ExpressionCompiler::new().compile(
        "authorizer.path('/x').check('get').allowed()",
        ReturnType::Bool,
        Declarations { params: false, authorizer: false },
    );
    assert!(no_authz.unwrap_err().detail.contains("undeclared reference to 'authorizer'"));
}

#[test]
fn evaluates_with_json_bindings() {
    let obj = deployment(5);
    let params = json!({"data": {"maxReplicas": "3"}});
    let req = request();
    let input = Input { object: Some(&obj), params: Some(&params), request: Some(&req), ..Input::default() };
    let c = ExpressionCompiler::new();
    let out = eval_with(&c, "object.spec.replicas <= int(params.data.maxReplicas)", ReturnType::Bool, &input).unwrap();
    assert_eq!(out.as_bool(), Some(false));
    let out = eval_with(&c, "request.userInfo.username + '/' + request.operation", ReturnType::String, &input).unwrap();
    assert_eq!(out.as_str(), Some("alice/CREATE"));
    let out = eval_with(&c, "oldObject == null && has(object.metadata.labels)", ReturnType::Bool, &input).unwrap();
    assert_eq!(out.as_bool(), Some(true));
    let out = eval_with(&c, "object.spec.template.spec.containers.map(c, c.image)", ReturnType::Any, &input).unwrap();
    assert_eq!(out.to_json(), Some(json!(["nginx:1", "busybox"])));
    assert_eq!(out.type_name(), "list");
    // a runtime error in kube's words
    let err = eval_with(&c, "object.spec.nope > 1", ReturnType::Bool, &input).unwrap_err();
    assert_eq!(err, EvalError::Failed("expression 'object.spec.nope > 1' resulted in error: no such key: nope".into()));
}

#[test]
fn namespace_object_has_kubes_types() {
    let ns =
        json!({"metadata": {"name": "prod", "labels": {"env": "prod"}, "creationTimestamp": "2024-01-02T03:04:05Z"}});
    let input = Input { namespace_object: Some(&ns), ..Input::default() };
    let c = ExpressionCompiler::new();
    let src = "namespaceObject.metadata.labels.env == 'prod' && namespaceObject.metadata.creationTimestamp < timestamp('2025-01-01T00:00:00Z')";
    assert_eq!(eval_with(&c, src, ReturnType::Bool, &input).unwrap().as_bool(), Some(true));
}

#[test]
fn variables_compose_lazily() {
    let obj = deployment(5);
    let input = Input { object: Some(&obj), ..Input::default() };
    let mut c = ExpressionCompiler::new();
    c.add_variable("replicas", "object.spec.replicas", PARAMS).unwrap();
    c.add_variable("big", "variables.replicas > 3", PARAMS).unwrap();
    c.add_variable("broken", "object.spec.nope", PARAMS).unwrap();
    // a later variable's type is known to the expressions after it
    assert_eq!(c.compile("variables.big", ReturnType::Bool, PARAMS).unwrap().output_type(), "bool");
    assert_eq!(
        eval_with(&c, "variables.big && variables.replicas == 5", ReturnType::Bool, &input).unwrap().as_bool(),
        Some(true)
    );
    // an unread failing variable does not matter; a read one fails the expression
    assert_eq!(eval_with(&c, "true || variables.broken == 1", ReturnType::Bool, &input).unwrap().as_bool(), Some(true));
    assert_eq!(
        eval_with(&c, "variables.broken == 1", ReturnType::Bool, &input).unwrap_err(),
        EvalError::Failed("expression 'variables.broken == 1' resulted in error: composited variable \"broken\" fails to evaluate: no such key: nope".into())
    );
    let mut bad = ExpressionCompiler::new();
    assert!(bad.add_variable("x", "object.", PARAMS).is_err());
    let err = eval_with(&bad, "variables.x == 1", ReturnType::Bool, &input).unwrap_err().to_string();
    assert!(err.starts_with("expression 'variables.x == 1' resulted in error: composited variable \"x\" fails to compile: compilation failed: ERROR:"), "{err}");
}

/// Allows `get` of pods in `default` to alice, and records what it was asked.
#[derive(Default)]
struct Recording(Mutex<Vec<AuthzAttributes>>);

impl CelAuthorizer for Recording {
    fn authorize(&self, attrs: &AuthzAttributes) -> AuthzDecision {
        self.0.lock().unwrap().push(attrs.clone());
        let allowed = attrs.user.name == "alice" && attrs.verb == "get" && attrs.namespace == "default";
        AuthzDecision { allowed, reason: if allowed { "ok".into() } else { "no".into() }, error: None }
    }
}

#[test]
fn authorizer_library() {
    let recording = Arc::new(Recording::default());
    let authorizer = AuthorizerInput {
        authorizer: recording.clone(),
        user: AuthzUser { name: "alice".into(), ..AuthzUser::default() },
        request_resource: RequestResource {
            group: "apps".into(),
            resource: "deployments".into(),
            namespace: "default".into(),
            name: "web".into(),
            ..RequestResource::default()
        },
    };
    let input = Input { authorizer: Some(authorizer), ..Input::default() };
    let c = ExpressionCompiler::new();
    let allowed = "authorizer.group('').resource('pods').namespace('default').name('p').check('get').allowed()";
    assert_eq!(eval_with(&c, allowed, ReturnType::Bool, &input).unwrap().as_bool(), Some(true));
    let attrs = recording.0.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        (
            attrs.api_group.as_str(),
            attrs.api_version.as_str(),
            attrs.resource.as_str(),
            attrs.name.as_str(),
            attrs.resource_request
        ),
        ("", "*", "pods", "p", true)
    );
    let reason = "authorizer.serviceAccount('kube-system', 'builder').group('').resource('pods').namespace('default').check('get').reason()";
    assert_eq!(eval_with(&c, reason, ReturnType::String, &input).unwrap().as_str(), Some("no"));
    let sa = recording.0.lock().unwrap().last().cloned().unwrap().user;
    assert_eq!(sa.name, "system:serviceaccount:kube-system:builder");
    assert_eq!(sa.groups, ["system:serviceaccounts", "system:serviceaccounts:kube-system"]);
    let request =
        "authorizer.requestResource.check('get').allowed() && !authorizer.requestResource.check('delete').allowed()";
    assert_eq!(eval_with(&c, request, ReturnType::Bool, &input).unwrap().as_bool(), Some(true));
    let attrs = recording.0.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        (attrs.api_group.as_str(), attrs.resource.as_str(), attrs.name.as_str()),
        ("apps", "deployments", "web")
    );
    let path = "authorizer.path('/healthz').check('get').allowed()";
    assert_eq!(eval_with(&c, path, ReturnType::Bool, &input).unwrap().as_bool(), Some(false));
    assert_eq!(recording.0.lock().unwrap().last().unwrap().path, "/healthz");
    let err = eval_with(&c, "authorizer.path(' ').check('get').allowed()", ReturnType::Bool, &input).unwrap_err();
    assert_eq!(
        err.to_string(),
        "expression 'authorizer.path(' ').check('get').allowed()' resulted in error: path must not be empty"
    );
}

#[test]
fn cost_limits() {
    let obj = json!({"items": (0..2000).collect::<Vec<_>>()});
    let input = Input { object: Some(&obj), ..Input::default() };
    let c = ExpressionCompiler::new();
    // cheap on small values even though `object` is dyn
    let small = json!({"items": [1, 2, 3]});
    let cheap = "object.items.all(x, object.items.all(y, x + y > 0))";
    let small_input = Input { object: Some(&small), ..Input::default() };
    assert_eq!(eval_with(&c, cheap, ReturnType::Bool, &small_input).unwrap().as_bool(), Some(true));
    // 2000 x 2000 iterations: over the per-call limit
    assert_eq!(
        eval_with(&c, cheap, ReturnType::Bool, &input).unwrap_err(),
        EvalError::Failed(format!(
            "expression '{cheap}' resulted in error: operation cancelled: actual cost limit exceeded"
        ))
    );
    // the budget of a set of expressions: ten calls near the limit spend it
    let expr =
        c.compile("object.items.all(x, object.items.all(y, y < 300 || x < 0))", ReturnType::Bool, PARAMS).unwrap();
    let mut ev = Evaluator::new(Arc::new(Activation::new(&input)), c.variables(), RUNTIME_CEL_COST_BUDGET);
    let mut results = Vec::new();
    for _ in 0..40 {
        results.push(ev.evaluate(&expr));
    }
    assert!(results.iter().any(|r| *r == Err(EvalError::OutOfBudget)), "{:?}", &results[..2]);
    assert_eq!(
        EvalError::OutOfBudget.to_string(),
        "validation failed due to running out of cost budget, no further validation rules will be run"
    );
}

#[test]
fn operators_with_one_dyn_operand_are_typed_by_the_other() {
    let c = ExpressionCompiler::new();
    let ty = |src: &str| c.compile(src, ReturnType::Any, PARAMS).unwrap().output_type();
    assert_eq!(ty("'at most ' + params.data.max"), "string");
    assert_eq!(ty("object.spec.replicas + 1"), "int");
    assert_eq!(ty("2.0 * object.spec.ratio"), "double");
    assert_eq!(ty("object.items + [1]"), "list(int)");
    assert_eq!(ty("timestamp('2024-01-01T00:00:00Z') + object.d"), "google.protobuf.Timestamp");
    assert_eq!(ty("duration('1s') + object.d"), "dyn");
    assert_eq!(ty("object.a + object.b"), "dyn");
    assert!(c.compile("'replicas: ' + object.spec.replicas", ReturnType::String, PARAMS).is_ok());
}

#[test]
fn mutation_expressions_build_patches_and_apply_configurations() {
    let obj = deployment(5);
    let input = Input { object: Some(&obj), ..Input::default() };
    let c = ExpressionCompiler::new();
    let patches = "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey('a/b~c'), value: 'x'}, JSONPatch{op: 'replace', path: '/spec/replicas', value: object.spec.replicas + 1}]";
    let out = eval_with(&c, patches, ReturnType::JsonPatch, &input).unwrap();
    assert_eq!(
        out.json_patches().unwrap(),
        [
            json!({"op": "add", "path": "/metadata/labels/a~1b~0c", "value": "x"}),
            json!({"op": "replace", "path": "/spec/replicas", "value": 6}),
        ]
    );
    let apply = "Object{spec: Object.spec{replicas: 2, template: Object.spec.template{metadata: Object.spec.template.metadata{labels: {'x': 'y'}}}}}";
    let out = eval_with(&c, apply, ReturnType::ApplyConfiguration, &input).unwrap();
    assert_eq!(
        out.apply_configuration().unwrap(),
        json!({"spec": {"replicas": 2, "template": {"metadata": {"labels": {"x": "y"}}}}})
    );
    // type names must follow the field path
    let wrong =
        eval_with(&c, "Object{spec: Object.status{replicas: 2}}", ReturnType::ApplyConfiguration, &input).unwrap();
    assert_eq!(
        wrong.apply_configuration().unwrap_err(),
        "type mismatch: unexpected type name \"Object.status\", expected \"Object.spec\", which matches field name path from root Object type"
    );
    // result types
    assert_eq!(compile_err("Object{}", ReturnType::JsonPatch), "must evaluate to list(JSONPatch) but got Object");
    assert_eq!(
        compile_err("[JSONPatch{}]", ReturnType::ApplyConfiguration),
        "must evaluate to Object but got list(JSONPatch)"
    );
    assert!(compile_err("Foo{}", ReturnType::ApplyConfiguration).contains("undeclared reference to 'Foo'"));
    // a dyn list is checked when it runs
    let dyn_list = eval_with(&c, "object.spec.template.spec.containers", ReturnType::JsonPatch, &input).unwrap();
    assert_eq!(
        dyn_list.json_patches().unwrap_err(),
        "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch"
    );
    let empty = eval_with(
        &c,
        "object.spec.replicas > 10 ? [JSONPatch{op: 'remove', path: '/spec/paused'}] : []",
        ReturnType::JsonPatch,
        &input,
    );
    assert_eq!(empty.unwrap().json_patches().unwrap(), Vec::<Value>::new());
}

#[test]
fn authentication_claims_and_user() {
    let none = Declarations::default();
    let claims = ExpressionCompiler::claims();
    // only `claims` is declared, as in kube's authentication environment
    let err = claims.compile("object.spec", ReturnType::Any, none).unwrap_err().detail;
    assert!(err.contains("undeclared reference to 'object'"), "{err}");
    let token = json!({"sub": "jane", "email": "j@example.com", "groups": ["dev", "ops"]});
    let input = Input { claims: Some(&token), ..Input::default() };
    let expr = claims.compile("'oidc:' + claims.sub", ReturnType::Any, none).unwrap();
    assert!(!expr.selects("claims", "email"));
    let mut ev = Evaluator::new(Arc::new(Activation::new(&input)), claims.variables(), RUNTIME_CEL_COST_BUDGET);
    assert_eq!(ev.evaluate(&expr).unwrap().as_str(), Some("oidc:jane"));
    let expr = claims.compile("has(claims.email) ? claims.groups.map(g, 'x:' + g) : []", ReturnType::Any, none).unwrap();
    assert!(expr.selects("claims", "email"));
    assert_eq!(ev.evaluate(&expr).unwrap().to_json(), Some(json!(["x:dev", "x:ops"])));

    let users = ExpressionCompiler::user_info();
    let err = users.compile("claims.sub == ''", ReturnType::Bool, none).unwrap_err().detail;
    assert!(err.contains("undeclared reference to 'claims'"), "{err}");
    let err = users.compile("user.nope", ReturnType::Any, none).unwrap_err().detail;
    assert!(err.contains("undefined field 'nope'"), "{err}");
    let user = json!({"username": "system:jane", "uid": "", "groups": ["dev"], "extra": {}});
    let input = Input { user: Some(&user), ..Input::default() };
    let expr = users.compile("!user.username.startsWith('system:')", ReturnType::Bool, none).unwrap();
    let mut ev = Evaluator::new(Arc::new(Activation::new(&input)), users.variables(), RUNTIME_CEL_COST_BUDGET);
    assert_eq!(ev.evaluate(&expr).unwrap().as_bool(), Some(false));
}
