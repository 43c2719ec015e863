//! Admission expressions (ValidatingAdmissionPolicy, MutatingAdmissionPolicy, match
//! conditions), compiled in the environment CRD rules use: the same parser, libraries and
//! checker, with the variables kube declares for admission (kube's
//! `admission/plugin/cel/compile.go` and `composition.go`): `object`, `oldObject`,
//! `params` (dyn), `request` and `namespaceObject` (kube's declared types), `variables` (the
//! policy's named expressions, each typed by its result) and `authorizer` with
//! `authorizer.requestResource`.
//!
//! Compilation gives kube's error texts (`compilation failed: ERROR: <input>:1:5: ...`,
//! `must evaluate to bool but got int`); evaluation is in [`super::activation`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};

use super::authz;
use super::check::{Checker, Est, TypeError};
use super::compile::{literal_error, parse_issues, type_issue};
use super::infer::field_names;
use super::mutation::{JSONPATCH, OBJECT};
use super::types::{Decl, Ty, MAX_REQUEST_SIZE_BYTES};

/// Which optional variables an expression may use (kube's `OptionalVariableDeclarations`):
/// `params` when the policy has a `paramKind`, `authorizer` where kube binds one (validations,
/// match conditions, variables; not message or audit expressions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Declarations {
    /// `params` is declared.
    pub params: bool,
    /// `authorizer` and `authorizer.requestResource` are declared.
    pub authorizer: bool,
}

/// The result types kube accepts for each kind of expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReturnType {
    /// Validations and match conditions.
    Bool,
    /// Message expressions.
    String,
    /// Audit annotation values.
    StringOrNull,
    /// Variables.
    Any,
    /// MutatingAdmissionPolicy `jsonPatch.expression`: a list of `JSONPatch` (or dyn, whose
    /// elements are checked when evaluated).
    JsonPatch,
    /// MutatingAdmissionPolicy `applyConfiguration.expression`: an `Object` (or dyn).
    ApplyConfiguration,
}

/// Why an expression cannot be used; `detail` is kube's text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct CompileError {
    /// kube's `ErrorTypeInternal` (the environment failed) rather than an invalid expression.
    pub internal: bool,
    /// kube's message.
    pub detail: String,
}

impl CompileError {
    fn invalid(detail: String) -> Self {
        CompileError { internal: false, detail }
    }
}

/// Which of a request's values an expression reads (`object`, `oldObject`, `params`,
/// `request`, `namespaceObject`, `authorizer`): an [`super::Activation`] converts only those, so
/// a policy that reads `object.data` does not pay for converting the AdmissionRequest and the
/// Namespace on every write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Reads(u8);

/// The names an activation binds, in [`Reads`]'s bit order (`claims` and `user` are the
/// authentication expressions' of an AuthenticationConfiguration).
pub(crate) const ACTIVATION_NAMES: [&str; 8] =
    ["object", "oldObject", "params", "request", "namespaceObject", "authorizer", "claims", "user"];

impl Reads {
    /// Every value (what an activation built without knowing its expressions converts).
    pub const ALL: Reads = Reads(0b1111_1111);

    /// Whether `name` (one of the activation's names; `authorizer.requestResource` counts as
    /// `authorizer`) is read.
    pub fn has(self, name: &str) -> bool {
        let name = if name == "authorizer.requestResource" { "authorizer" } else { name };
        ACTIVATION_NAMES.iter().position(|n| *n == name).is_some_and(|i| self.0 & (1 << i) != 0)
    }

    /// What either reads.
    pub fn union(self, other: Reads) -> Reads {
        Reads(self.0 | other.0)
    }

    fn of(e: &IdedExpr) -> Reads {
        let mut bits = 0;
        super::compile::find(e, &mut |x| {
            if let Expr::Ident(n) = &x.expr {
                let n = if n == "authorizer.requestResource" { "authorizer" } else { n.as_str() };
                if let Some(i) = ACTIVATION_NAMES.iter().position(|a| *a == n) {
                    bits |= 1 << i;
                }
            }
            false
        });
        Reads(bits)
    }
}

/// A compiled expression, shared read-only by every evaluation.
#[derive(Debug, Clone)]
pub struct Expression {
    source: String,
    /// The checked form, which is also the one evaluated: `authorizer.requestResource` as one
    /// name, mutation types as calls ([`super::mutation`]).
    pub(crate) checked: Arc<IdedExpr>,
    /// Whether it builds mutation types (their functions are added when it runs).
    pub(crate) mutation: bool,
    /// The field selections `<ident>.<field>` (and `has(<ident>.<field>)`) it makes.
    selects: Arc<BTreeSet<(String, String)>>,
    pub(crate) output: Ty,
    /// Field names the expression selects, the only ones cost estimates need.
    pub(crate) names: Arc<BTreeSet<String>>,
    /// The policy variables it reads.
    pub(crate) variables: Vec<String>,
    /// The request's values it reads itself (not through variables).
    reads: Reads,
    pub(crate) static_cost: u64,
}

impl Expression {
    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The worst-case cost the checker estimates with `dyn` inputs at their largest (kube does
    /// not refuse admission expressions on it; the actual cost is bounded at evaluation).
    pub fn estimated_cost(&self) -> u64 {
        self.static_cost
    }

    /// The result type as cel-go names it (`bool`, `string`, `dyn`, `list(int)`).
    pub fn output_type(&self) -> String {
        self.output.name()
    }

    /// Whether the expression selects `field` of the variable `ident` (`claims.email`,
    /// `has(claims.email)`), as kube's AuthenticationConfiguration validation looks for
    /// `claims.email` and `claims.email_verified`.
    pub fn selects(&self, ident: &str, field: &str) -> bool {
        self.selects.contains(&(ident.to_owned(), field.to_owned()))
    }

    /// The request's values it reads itself; a policy's are the union over its expressions and
    /// variables.
    pub fn reads(&self) -> Reads {
        self.reads
    }
}

/// One named expression of `spec.variables`, compiled or not: a variable that fails to compile
/// fails only the expressions that read it.
#[derive(Debug, Clone)]
pub struct Variable {
    pub(crate) name: String,
    pub(crate) result: Result<Expression, CompileError>,
}

impl Variable {
    /// The variable's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The compiled expression or why it failed.
    pub fn result(&self) -> &Result<Expression, CompileError> {
        &self.result
    }
}

/// The compiler of one policy (kube's `CompositedCompiler`): variables are compiled in order,
/// each visible to the ones after it and to every other expression of the policy.
#[derive(Debug, Clone, Default)]
pub struct ExpressionCompiler {
    variables: Vec<Variable>,
    /// `object` and `oldObject` typed by a schema (kube's type checking), else dyn.
    object: Option<Decl>,
    /// `params` typed by a schema, else dyn.
    params: Option<Decl>,
    /// `request` of another shape than admission's AdmissionRequest (authorization webhooks'
    /// SubjectAccessReviewSpec).
    request: Option<Decl>,
    /// The only variables declared, instead of admission's (AuthenticationConfiguration's
    /// `claims` or `user`).
    only: Option<Vec<(String, Decl)>>,
}

/// kube's SubjectAccessReviewSpec type, `request` of authorization webhooks' match conditions.
fn subject_access_review_spec_type() -> Decl {
    let s = || Decl::new(Ty::String, MAX_REQUEST_SIZE_BYTES);
    let object = |fields: &[(&str, Decl)]| {
        Decl::new(Ty::Object(fields.iter().map(|(k, d)| (k.to_string(), d.clone())).collect()), fields.len() as u64)
    };
    let strings = || Decl::new(Ty::List(Box::new(s())), MAX_REQUEST_SIZE_BYTES);
    let resource = object(&[
        ("namespace", s()),
        ("verb", s()),
        ("group", s()),
        ("version", s()),
        ("resource", s()),
        ("subresource", s()),
        ("name", s()),
        ("fieldSelector", Decl::dyn_()),
        ("labelSelector", Decl::dyn_()),
    ]);
    object(&[
        ("resourceAttributes", resource),
        ("nonResourceAttributes", object(&[("path", s()), ("verb", s())])),
        ("user", s()),
        ("groups", strings()),
        ("extra", Decl::new(Ty::Map(Box::new(strings())), MAX_REQUEST_SIZE_BYTES)),
        ("uid", s()),
    ])
}

/// kube's `BuildRequestType`.
fn request_type() -> Decl {
    let s = || Decl::new(Ty::String, MAX_REQUEST_SIZE_BYTES);
    let object = |fields: &[(&str, Decl)]| {
        Decl::new(Ty::Object(fields.iter().map(|(k, d)| (k.to_string(), d.clone())).collect()), fields.len() as u64)
    };
    let gvk = object(&[("group", s()), ("version", s()), ("kind", s())]);
    let gvr = object(&[("group", s()), ("version", s()), ("resource", s())]);
    let strings = Decl::new(Ty::List(Box::new(s())), MAX_REQUEST_SIZE_BYTES);
    let user = object(&[
        ("username", s()),
        ("uid", s()),
        ("groups", strings.clone()),
        ("extra", Decl::new(Ty::Map(Box::new(strings)), MAX_REQUEST_SIZE_BYTES)),
    ]);
    object(&[
        ("kind", gvk.clone()),
        ("resource", gvr.clone()),
        ("subResource", s()),
        ("requestKind", gvk),
        ("requestResource", gvr),
        ("requestSubResource", s()),
        ("name", s()),
        ("namespace", s()),
        ("operation", s()),
        ("userInfo", user),
        ("dryRun", Decl::scalar(Ty::Bool)),
        ("options", Decl::dyn_()),
    ])
}

/// kube's `BuildNamespaceType`.
pub(crate) fn namespace_type() -> Decl {
    let s = || Decl::new(Ty::String, MAX_REQUEST_SIZE_BYTES);
    let object = |fields: &[(&str, Decl)]| {
        Decl::new(Ty::Object(fields.iter().map(|(k, d)| (k.to_string(), d.clone())).collect()), fields.len() as u64)
    };
    let strings = || Decl::new(Ty::List(Box::new(s())), MAX_REQUEST_SIZE_BYTES);
    let string_map = || Decl::new(Ty::Map(Box::new(s())), MAX_REQUEST_SIZE_BYTES);
    let time = || Decl::scalar(Ty::Timestamp);
    let condition =
        object(&[("status", s()), ("type", s()), ("lastTransitionTime", time()), ("message", s()), ("reason", s())]);
    let metadata = object(&[
        ("name", s()),
        ("generateName", s()),
        ("namespace", s()),
        ("labels", string_map()),
        ("annotations", string_map()),
        ("UID", s()),
        ("creationTimestamp", time()),
        ("deletionGracePeriodSeconds", Decl::scalar(Ty::Int)),
        ("deletionTimestamp", time()),
        ("generation", Decl::scalar(Ty::Int)),
        ("resourceVersion", s()),
        ("finalizers", strings()),
    ]);
    object(&[
        ("metadata", metadata),
        ("spec", object(&[("finalizers", strings())])),
        (
            "status",
            object(&[("conditions", Decl::new(Ty::List(Box::new(condition)), MAX_REQUEST_SIZE_BYTES)), ("phase", s())]),
        ),
    ])
}

/// The functions admission expressions add to the shared environment's: kube's authorizer
/// library and the mutation types.
pub(crate) fn functions(id: u64, f: &str, member: bool, a: &[&Est]) -> Option<Result<Est, TypeError>> {
    authz::signature(id, f, member, a).or_else(|| super::mutation::signature(id, f, member, a))
}

/// `authorizer.requestResource` parses as a field of `authorizer`; kube declares it as one
/// qualified name, and so does the checker here (the interpreter resolves qualified names).
fn join_request_resource(e: &mut IdedExpr) {
    if let Expr::Select(s) = &e.expr {
        if !s.test && s.field == "requestResource" && matches!(&s.operand.expr, Expr::Ident(n) if n == "authorizer") {
            e.expr = Expr::Ident("authorizer.requestResource".into());
            return;
        }
    }
    let entries = |entries: &mut Vec<cel::common::ast::IdedEntryExpr>| {
        for x in entries {
            match &mut x.expr {
                EntryExpr::MapEntry(me) => {
                    join_request_resource(&mut me.key);
                    join_request_resource(&mut me.value);
                }
                EntryExpr::StructField(f) => join_request_resource(&mut f.value),
            }
        }
    };
    match &mut e.expr {
        Expr::Select(s) => join_request_resource(&mut s.operand),
        Expr::Call(c) => {
            if let Some(t) = c.target.as_deref_mut() {
                join_request_resource(t);
            }
            c.args.iter_mut().for_each(join_request_resource);
        }
        Expr::List(l) => l.elements.iter_mut().for_each(join_request_resource),
        Expr::Map(m) => entries(&mut m.entries),
        Expr::Struct(s) => entries(&mut s.entries),
        Expr::Comprehension(c) => {
            for x in [&mut c.iter_range, &mut c.accu_init, &mut c.loop_cond, &mut c.loop_step, &mut c.result] {
                join_request_resource(x);
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// The `<ident>.<field>` selections of `e`.
fn selections(e: &IdedExpr) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    super::compile::find(e, &mut |x| {
        if let Expr::Select(s) = &x.expr {
            if let Expr::Ident(n) = &s.operand.expr {
                out.insert((n.clone(), s.field.clone()));
            }
        }
        false
    });
    out
}

/// The policy variables `e` reads (`variables.<name>`).
fn variables_read(e: &IdedExpr) -> Vec<String> {
    let mut out = Vec::new();
    super::compile::find(e, &mut |x| {
        if let Expr::Select(s) = &x.expr {
            if matches!(&s.operand.expr, Expr::Ident(n) if n == "variables") && !out.contains(&s.field) {
                out.push(s.field.clone());
            }
        }
        false
    });
    out
}

/// A variable's type as kube declares it for the expressions after it
/// (`convertCelTypeToDeclType`): library types become `dyn`.
fn declared(ty: &Ty) -> Decl {
    match ty {
        Ty::Opaque(_) | Ty::Optional(_) | Ty::Type | Ty::Object(_) => Decl::dyn_(),
        Ty::List(_) | Ty::Map(_) => Decl::new(ty.clone(), MAX_REQUEST_SIZE_BYTES),
        t => Decl::new(t.clone(), MAX_REQUEST_SIZE_BYTES),
    }
}

impl ExpressionCompiler {
    /// A compiler with no variables.
    pub fn new() -> Self {
        Self::default()
    }

    /// The compiler of authorization webhooks' match conditions: `request` is a
    /// SubjectAccessReviewSpec (v1).
    pub fn subject_access_review() -> Self {
        ExpressionCompiler { request: Some(subject_access_review_spec_type()), ..Self::default() }
    }

    /// The compiler of AuthenticationConfiguration's claim validation rules and claim
    /// mappings: `claims` (a `map(string, dyn)`) is the only variable.
    pub fn claims() -> Self {
        let claims = Decl::new(Ty::Map(Box::new(Decl::dyn_())), MAX_REQUEST_SIZE_BYTES);
        ExpressionCompiler { only: Some(vec![("claims".into(), claims)]), ..Self::default() }
    }

    /// The compiler of AuthenticationConfiguration's user validation rules: `user` (kube's
    /// `kubernetes.UserInfo`: username, uid, groups, extra) is the only variable.
    pub fn user_info() -> Self {
        let s = || Decl::new(Ty::String, MAX_REQUEST_SIZE_BYTES);
        let strings = || Decl::new(Ty::List(Box::new(s())), MAX_REQUEST_SIZE_BYTES);
        let fields = [
            ("username", s()),
            ("uid", s()),
            ("groups", strings()),
            ("extra", Decl::new(Ty::Map(Box::new(strings())), MAX_REQUEST_SIZE_BYTES)),
        ];
        let user = Decl::new(Ty::Object(fields.iter().map(|(k, d)| (k.to_string(), d.clone())).collect()), 4);
        ExpressionCompiler { only: Some(vec![("user".into(), user)]), ..Self::default() }
    }

    /// A compiler whose `object`/`oldObject` and `params` have the types of OpenAPI v3 schemas
    /// (structural, references resolved), for kube's policy type checking, which reports
    /// fields a kind does not have; a schema that cannot be read leaves the variable dyn.
    pub fn with_schemas(object: Option<&serde_json::Value>, params: Option<&serde_json::Value>) -> Self {
        let decl = |s: Option<&serde_json::Value>| {
            let schema = crate::schema::Schema::parse(s?).ok()?;
            super::types::decl_of(&schema, true)
        };
        ExpressionCompiler { variables: Vec::new(), object: decl(object), params: decl(params), request: None, only: None }
    }

    /// Compiles `spec.variables[i]` and keeps it for the expressions compiled after it
    /// (kube's `CompileAndStoreVariable`); a failed variable is kept too, typed `dyn`.
    pub fn add_variable(&mut self, name: &str, expression: &str, decls: Declarations) -> Result<(), CompileError> {
        let result = self.compile(expression, ReturnType::Any, decls);
        let err = result.as_ref().err().cloned();
        self.variables.push(Variable { name: name.to_string(), result });
        err.map_or(Ok(()), Err)
    }

    /// The variables compiled so far, in order.
    pub fn variables(&self) -> Arc<[Variable]> {
        self.variables.clone().into()
    }

    pub(crate) fn declarations(&self, decls: Declarations) -> Vec<(String, Decl)> {
        if let Some(only) = &self.only {
            return only.clone();
        }
        let object = self.object.clone().unwrap_or_else(Decl::dyn_);
        let mut vars = vec![
            ("object".to_string(), object.clone()),
            ("oldObject".to_string(), object),
            ("request".to_string(), self.request.clone().unwrap_or_else(request_type)),
            ("namespaceObject".to_string(), namespace_type()),
        ];
        if decls.params {
            vars.push(("params".into(), self.params.clone().unwrap_or_else(Decl::dyn_)));
        }
        if decls.authorizer {
            vars.push(("authorizer".into(), Decl::scalar(Ty::Opaque(authz::AUTHORIZER))));
            vars.push(("authorizer.requestResource".into(), Decl::scalar(Ty::Opaque(authz::RESOURCE_CHECK))));
        }
        let fields: BTreeMap<String, Decl> = self
            .variables
            .iter()
            .map(|v| (v.name.clone(), v.result.as_ref().map_or_else(|_| Decl::dyn_(), |e| declared(&e.output))))
            .collect();
        let n = fields.len() as u64;
        vars.push(("variables".into(), Decl::new(Ty::Object(fields), n)));
        vars
    }

    /// Compiles `expression` (kube's `CompileCELExpression`).
    pub fn compile(&self, expression: &str, ret: ReturnType, decls: Declarations) -> Result<Expression, CompileError> {
        let env = super::environment().ok_or_else(|| CompileError {
            internal: true,
            detail: "unexpected error loading CEL environment: the environment does not build".into(),
        })?;
        let program = env
            .compile(expression)
            .map_err(|e| CompileError::invalid(format!("compilation failed: {}", parse_issues(expression, &e))))?;
        let mut checked = program.expression().clone();
        join_request_resource(&mut checked);
        let mutation = matches!(ret, ReturnType::JsonPatch | ReturnType::ApplyConfiguration);
        if mutation {
            super::mutation::rewrite(&mut checked);
        }
        let typed: Est = Checker::new(self.declarations(decls))
            .with_extension(functions)
            .check(&checked)
            .and_then(|r| literal_error(&checked).map_or(Ok(r), Err))
            .map_err(|e| {
                CompileError::invalid(format!("compilation failed: {}", type_issue(expression, &program, &e)))
            })?;
        let output = typed.d.ty;
        let patches = Ty::List(Box::new(Decl::scalar(Ty::Opaque(JSONPATCH))));
        let (accepted, lenient): (&[Ty], &[Ty]) = match ret {
            ReturnType::Bool => (&[Ty::Bool], &[]),
            ReturnType::String => (&[Ty::String], &[]),
            ReturnType::StringOrNull => (&[Ty::String, Ty::Null], &[]),
            ReturnType::Any => (&[], &[]),
            // kapi's checker types fewer expressions than cel-go (`c ? [JSONPatch{..}] : []`
            // is dyn here): dyn ones are checked when they run
            ReturnType::JsonPatch => (std::slice::from_ref(&patches), &[Ty::Dyn]),
            ReturnType::ApplyConfiguration => (&[Ty::Opaque(OBJECT)], &[Ty::Dyn]),
        };
        let list_of_dyn = matches!(&output, Ty::List(e) if e.ty == Ty::Dyn) && ret == ReturnType::JsonPatch;
        let fits = |t: &Ty| match (t, &output) {
            (Ty::List(a), Ty::List(b)) => a.ty == b.ty,
            (a, b) => a == b,
        };
        let ok = accepted.is_empty() || accepted.iter().any(fits) || lenient.contains(&output) || list_of_dyn;
        if !ok {
            let want: Vec<String> = accepted.iter().map(Ty::name).collect();
            let detail = match want.as_slice() {
                [one] => format!("must evaluate to {one} but got {}", output.name()),
                many => format!("must evaluate to one of [{}] but got {}", many.join(" "), output.name()),
            };
            return Err(CompileError::invalid(detail));
        }
        Ok(Expression {
            source: expression.to_string(),
            names: Arc::new(field_names(&checked)),
            selects: Arc::new(selections(&checked)),
            variables: variables_read(&checked),
            reads: Reads::of(&checked),
            checked: Arc::new(checked),
            mutation,
            output,
            static_cost: typed.cost,
        })
    }
}
