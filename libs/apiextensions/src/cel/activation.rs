//! Evaluation of admission expressions (kube's `admission/plugin/cel/activation.go` and the
//! composition context): one [`Activation`] per request (and param) holds the converted
//! values, one [`Evaluator`] per set of expressions (validations, messages, audit annotations,
//! match conditions) holds the cost budget and the `variables`, which are evaluated lazily, at
//! most once, and charged to the budget of the expression that first reads them.
//!
//! Cost: the cel crate does not count cost as it runs, so each evaluation is priced before it
//! runs by the checker's model over the declarations of the actual values
//! ([`super::infer`]), as CRD rules are; over [`PER_CALL_LIMIT`] the expression fails as
//! cel-go's cancelled evaluation does, past the budget nothing more runs.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use cel::common::traits::Indexer;
use cel::common::types::{CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, Type};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::objects::Key;
use cel::{Context, ExecutionError, Value as CelValue};
use serde_json::Value;

use super::authz::{self, AuthorizerVal, AuthzUser, CelAuthorizer, RequestResource, ResourceCheckVal};
use super::check::Checker;
use super::expression::{namespace_type, Expression, Reads, Variable};
use super::infer::{self, infer};
use super::runtime::{to_cel, PER_CALL_LIMIT};
use super::types::{Decl, Ty};

/// `ExecutionError::FunctionError` functions whose message is the whole error text.
const AS_IS: &str = "kapi.error";

/// The worst-case cost under which an expression is not priced before it runs.
const CHEAP: u64 = 1_000;

/// The authorizer `authorizer` checks with, and for whom.
#[derive(Clone)]
pub struct AuthorizerInput {
    /// The server's authorizer.
    pub authorizer: Arc<dyn CelAuthorizer>,
    /// The requesting user.
    pub user: AuthzUser,
    /// The resource of the request (`authorizer.requestResource`).
    pub request_resource: RequestResource,
}

/// The values of one request as expressions see them; JSON in the request's version.
#[derive(Clone, Default)]
pub struct Input<'a> {
    /// The object (None on delete: `null`).
    pub object: Option<&'a Value>,
    /// The stored object (None on create: `null`).
    pub old_object: Option<&'a Value>,
    /// The param (None without one: `null`).
    pub params: Option<&'a Value>,
    /// kube's AdmissionRequest shape.
    pub request: Option<&'a Value>,
    /// The namespace (None for cluster-scoped requests: `null`).
    pub namespace_object: Option<&'a Value>,
    /// The authorizer, where expressions may check with it.
    pub authorizer: Option<AuthorizerInput>,
    /// A JWT's claims (AuthenticationConfiguration's claim rules and mappings).
    pub claims: Option<&'a Value>,
    /// kube's authentication.k8s.io UserInfo (AuthenticationConfiguration's user rules).
    pub user: Option<&'a Value>,
}

/// The converted values of one [`Input`], shared by every expression evaluated on it.
pub struct Activation {
    /// For the interpreter, converted once: only the values the expressions read.
    bound: BTreeMap<String, Box<dyn Val>>,
    /// The same values as `cel::Value`s, for cost estimates; made from `bound` when an
    /// expression first needs an estimate (most are cheap enough to need none).
    values: OnceLock<Vec<(String, CelValue)>>,
}

impl std::fmt::Debug for Activation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Activation").field("names", &self.bound.keys().collect::<Vec<_>>()).finish()
    }
}

/// A string of a declared timestamp field becomes a timestamp, as kube's typed Namespace has it.
fn typed(decl: &Decl, v: &Value) -> CelValue {
    match (&decl.ty, v) {
        (Ty::Timestamp, Value::String(s)) => {
            super::time::rfc3339(s).map_or_else(|| CelValue::String(Arc::new(s.clone())), CelValue::Timestamp)
        }
        (Ty::Object(fields), Value::Object(m)) => {
            let map = m
                .iter()
                .map(|(k, x)| {
                    let val = match fields.get(k) {
                        Some(d) => typed(d, x),
                        None => to_cel(None, x),
                    };
                    (Key::String(Arc::new(k.clone())), val)
                })
                .collect();
            CelValue::Map(cel::objects::Map { map: Arc::new(map) })
        }
        (Ty::List(e), Value::Array(a)) => CelValue::List(Arc::new(a.iter().map(|x| typed(e, x)).collect())),
        _ => to_cel(None, v),
    }
}

/// `to_cel(None, v)` straight into the interpreter's values, without the `cel::Value` step.
fn json_val(v: &Value) -> Box<dyn Val> {
    match v {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Box::new(CelInt::from(i)),
            None => Box::new(CelDouble::from(n.as_f64().unwrap_or(0.0))),
        },
        Value::String(x) => Box::new(CelString::from(x.clone())),
        Value::Array(a) => Box::new(CelList::from(a.iter().map(json_val).collect::<Vec<_>>())),
        Value::Object(m) => Box::new(CelMap::from(
            m.iter().map(|(k, x)| (CelMapKey::from(k.clone()), json_val(x))).collect::<HashMap<_, _>>(),
        )),
    }
}

/// kube's typed Namespace, built once.
fn namespace_decl() -> &'static Decl {
    static DECL: OnceLock<Decl> = OnceLock::new();
    DECL.get_or_init(namespace_type)
}

impl Activation {
    /// Converts `input` once for all the expressions that run on it.
    pub fn new(input: &Input<'_>) -> Activation {
        Activation::with_reads(input, Reads::ALL)
    }

    /// Converts the values of `input` that `reads` names (the union of what the expressions
    /// to run read, [`super::Expression::reads`]); the others are not bound at all.
    pub fn with_reads(input: &Input<'_>, reads: Reads) -> Activation {
        let json = |v: Option<&Value>| v.map_or_else(|| Box::new(CelNull) as Box<dyn Val>, json_val);
        let mut bound: BTreeMap<String, Box<dyn Val>> = BTreeMap::new();
        let mut bind = |name: &str, make: &dyn Fn() -> Box<dyn Val>| {
            if reads.has(name) {
                bound.insert(name.to_owned(), make());
            }
        };
        bind("object", &|| json(input.object));
        bind("oldObject", &|| json(input.old_object));
        bind("params", &|| json(input.params));
        bind("request", &|| json(input.request));
        bind("claims", &|| json(input.claims));
        bind("user", &|| json(input.user));
        bind("namespaceObject", &|| {
            let v = input.namespace_object.map_or(CelValue::Null, |n| typed(namespace_decl(), n));
            Box::<dyn Val>::try_from(v).unwrap_or_else(|_| Box::new(CelNull))
        });
        if let Some(a) = input.authorizer.as_ref().filter(|_| reads.has("authorizer")) {
            let val = AuthorizerVal { authz: a.authorizer.clone(), user: a.user.clone() };
            let check = authz::opaque_val(ResourceCheckVal::for_request(val.clone(), &a.request_resource));
            for (name, v) in [("authorizer.requestResource", check), ("authorizer", authz::opaque_val(val))] {
                if let Ok(b) = Box::<dyn Val>::try_from(v) {
                    bound.insert(name.into(), b);
                }
            }
        }
        Activation { bound, values: OnceLock::new() }
    }

    fn has_authorizer(&self) -> bool {
        self.bound.contains_key("authorizer")
    }

    /// The bound values as `cel::Value`s, for cost estimates.
    fn values(&self) -> &[(String, CelValue)] {
        self.values.get_or_init(|| {
            self.bound
                .iter()
                .map(|(k, v)| (k.clone(), CelValue::try_from(v.as_ref()).unwrap_or(CelValue::Null)))
                .collect()
        })
    }
}

/// Why an evaluation gave no value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// The expression failed: kube's `expression '<e>' resulted in error: <cause>`.
    #[error("{0}")]
    Failed(String),
    /// The budget is spent: no further expression of the set runs.
    #[error("validation failed due to running out of cost budget, no further validation rules will be run")]
    OutOfBudget,
}

/// A result.
#[derive(Debug, Clone, PartialEq)]
pub struct Output(CelValue);

impl Output {
    /// The value, if a bool.
    pub fn as_bool(&self) -> Option<bool> {
        match self.0 {
            CelValue::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The value, if a string.
    pub fn as_str(&self) -> Option<&str> {
        match &self.0 {
            CelValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// Whether the value is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self.0, CelValue::Null)
    }

    /// The value's type as cel-go names it in messages.
    pub fn type_name(&self) -> &'static str {
        match &self.0 {
            CelValue::List(_) => "list",
            CelValue::Map(_) => "map",
            CelValue::Int(_) => "int",
            CelValue::UInt(_) => "uint",
            CelValue::Float(_) => "double",
            CelValue::String(_) => "string",
            CelValue::Bytes(_) => "bytes",
            CelValue::Bool(_) => "bool",
            CelValue::Duration(_) => "google.protobuf.Duration",
            CelValue::Timestamp(_) => "google.protobuf.Timestamp",
            CelValue::Null => "null_type",
            _ => "object",
        }
    }

    /// The value as JSON (mutation types as objects); None for values JSON has no form for
    /// (library types).
    pub fn to_json(&self) -> Option<Value> {
        super::mutation::to_json(&self.0)
    }

    /// A JSONPatch expression's operations as JSON Patch, or kube's type mismatch text.
    pub fn json_patches(&self) -> Result<Vec<Value>, String> {
        super::mutation::json_patches(&self.0)
    }

    /// An ApplyConfiguration expression's object, or kube's text for what it is not.
    pub fn apply_configuration(&self) -> Result<Value, String> {
        super::mutation::apply_configuration(&self.0, self.type_name())
    }
}

/// cel-go's texts for the interpreter's errors.
fn render(e: &ExecutionError) -> String {
    match e {
        ExecutionError::FunctionError { function, message } if function == AS_IS => message.clone(),
        ExecutionError::FunctionError { function, .. } if function == "duration" || function == "timestamp" => {
            let ty = if function == "duration" { "Duration" } else { "Timestamp" };
            format!("type conversion error from 'string' to 'google.protobuf.{ty}'")
        }
        ExecutionError::FunctionError { message, .. } => message.clone(),
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::NoSuchOverload(_) | ExecutionError::UnexpectedType { .. } => "no such overload".into(),
        ExecutionError::DivisionByZero(_) => "division by zero".into(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
        ExecutionError::Overflow(..) => "integer overflow".into(),
        ExecutionError::IndexOutOfBounds(_) => "index out of range".into(),
        other => other.to_string(),
    }
}

fn failure(message: String) -> ExecutionError {
    ExecutionError::function_error(AS_IS, message)
}

/// A variable's outcome, computed once per evaluator.
struct Slot {
    value: Result<(CelValue, Box<dyn Val>), String>,
    decl: Decl,
    cost: u64,
    charged: AtomicBool,
}

static VARIABLES_TYPE: Type = Type::new_unspecified_type("kubernetes.variables");

/// `variables`: the policy's named expressions, each evaluated when first read (kube's lazy
/// map), its cost charged to the expression that read it.
struct LazyVariables {
    activation: Arc<Activation>,
    variables: Arc<[Variable]>,
    slots: Vec<OnceLock<Slot>>,
    pending: AtomicU64,
}

impl std::fmt::Debug for LazyVariables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("variables")
            .field("names", &self.variables.iter().map(Variable::name).collect::<Vec<_>>())
            .finish()
    }
}

/// The names an evaluation resolves: the activation's values and `variables`.
struct Resolver<'a> {
    activation: &'a Activation,
    variables: &'a LazyVariables,
}

impl VariableResolver for Resolver<'_> {
    fn resolve<'b>(&'b self, name: &str) -> Option<CowVal<'b, 'b>> {
        if name == "variables" {
            return Some(CowVal::Borrowed(self.variables as &dyn Val));
        }
        self.activation.bound.get(name).map(|v| CowVal::Borrowed(v.as_ref()))
    }
}

impl LazyVariables {
    fn new(activation: Arc<Activation>, variables: Arc<[Variable]>) -> Self {
        let slots = variables.iter().map(|_| OnceLock::new()).collect();
        LazyVariables { activation, variables, slots, pending: AtomicU64::new(0) }
    }

    fn slot(&self, i: usize) -> &Slot {
        if let Some(s) = self.slots[i].get() {
            return s;
        }
        let v = &self.variables[i];
        let slot = match &v.result {
            Err(e) => Slot {
                value: Err(format!("composited variable {:?} fails to compile: {}", v.name, e.detail)),
                decl: Decl::dyn_(),
                cost: 0,
                charged: AtomicBool::new(false),
            },
            Ok(expr) => {
                let (result, cost) = self.run(expr);
                let value = result
                    .map_err(|e| format!("composited variable {:?} fails to evaluate: {}", v.name, render(&e)))
                    .and_then(|val| Box::<dyn Val>::try_from(val.clone()).map(|b| (val, b)).map_err(|e| render(&e)));
                let decl = match &value {
                    Ok((val, _)) => infer(val, &expr.names),
                    Err(_) => Decl::dyn_(),
                };
                Slot { value, decl, cost, charged: AtomicBool::new(false) }
            }
        };
        // a variable read while it was being computed (not possible: variables only see
        // earlier ones) would keep the first outcome
        let _ = self.slots[i].set(slot);
        self.slots[i].get().unwrap_or_else(|| unreachable!("the slot was just set"))
    }

    /// The estimated cost of evaluating `expr` on the activation.
    fn estimate(&self, expr: &Expression) -> u64 {
        let mut decls: Vec<(String, Decl)> =
            self.activation.values().iter().map(|(name, v)| (name.clone(), infer(v, &expr.names))).collect();
        let mut fields = BTreeMap::new();
        for (i, v) in self.variables.iter().enumerate() {
            if expr.variables.contains(&v.name) {
                fields.insert(v.name.clone(), self.slot(i).decl.clone());
            }
        }
        let n = fields.len() as u64;
        decls.push(("variables".into(), Decl::new(Ty::Object(fields), n)));
        Checker::new(decls).with_extension(infer::estimate).check(&expr.checked).map_or(1, |e| e.cost)
    }

    /// Prices and runs `expr`: its result and cost.
    fn run(&self, expr: &Expression) -> (Result<CelValue, ExecutionError>, u64) {
        // An expression whose worst case is cheap is charged that worst case: pricing it with
        // the actual values would cost more than running it (at most CHEAP per expression is
        // overcharged, a ten-thousandth of the budget).
        let cost = if expr.static_cost <= CHEAP { expr.static_cost } else { self.estimate(expr) };
        if cost > PER_CALL_LIMIT {
            return (Err(failure("operation cancelled: actual cost limit exceeded".into())), PER_CALL_LIMIT);
        }
        let Some(env) = super::environment() else {
            return (Err(failure("unexpected error loading CEL environment".into())), 0);
        };
        let resolver = Resolver { activation: &self.activation, variables: self };
        let mut ctx = Context::with_env(env);
        ctx.set_variable_resolver(&resolver);
        // a value read through a variable may be one of the authorizer's
        let authorizer = expr.reads().has("authorizer") || !expr.variables.is_empty();
        if self.activation.has_authorizer() && authorizer {
            if let Err(e) = authz::register(&mut ctx) {
                return (Err(failure(format!("unexpected error loading the authorizer library: {e}"))), 0);
            }
        }
        if expr.mutation {
            if let Err(e) = super::mutation::register(&mut ctx) {
                return (Err(failure(format!("unexpected error loading the mutation library: {e}"))), 0);
            }
        }
        (ctx.resolve(&expr.checked), cost)
    }

    fn take_pending(&self) -> u64 {
        self.pending.swap(0, Ordering::Relaxed)
    }
}

impl Indexer for LazyVariables {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        let name = idx.downcast_ref::<CelString>().map(CelString::inner).unwrap_or_default();
        let Some(i) = self.variables.iter().position(|v| v.name == name) else {
            return Err(ExecutionError::no_such_key(name));
        };
        let slot = self.slot(i);
        if !slot.charged.swap(true, Ordering::Relaxed) {
            self.pending.fetch_add(slot.cost, Ordering::Relaxed);
        }
        match &slot.value {
            Ok((_, b)) => Ok(CowVal::Borrowed(b.as_ref())),
            Err(message) => Err(failure(message.clone())),
        }
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

impl Val for LazyVariables {
    fn get_type(&self) -> &Type {
        &VARIABLES_TYPE
    }

    fn cel_type() -> &'static Type {
        &VARIABLES_TYPE
    }

    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        // a copy starts afresh; the interpreter copies `variables` only where an expression
        // uses the map itself as a value
        Box::new(LazyVariables::new(self.activation.clone(), self.variables.clone()))
    }
}

/// Evaluates one set of expressions on one activation within one cost budget (kube's
/// `ForInput` with a composition context).
pub struct Evaluator {
    variables: LazyVariables,
    remaining: i64,
}

impl Evaluator {
    /// An evaluator of expressions that may read `variables`, within `budget`
    /// ([`super::RUNTIME_CEL_COST_BUDGET`] for validations).
    pub fn new(activation: Arc<Activation>, variables: Arc<[Variable]>, budget: i64) -> Self {
        Evaluator { variables: LazyVariables::new(activation, variables), remaining: budget }
    }

    /// What is left of the budget.
    pub fn remaining(&self) -> i64 {
        self.remaining
    }

    fn charge(&mut self, cost: u64) -> Result<(), EvalError> {
        let cost = i64::try_from(cost).unwrap_or(i64::MAX);
        if cost > self.remaining {
            self.remaining = -1;
            return Err(EvalError::OutOfBudget);
        }
        self.remaining -= cost;
        Ok(())
    }

    /// Evaluates `expr` (kube's `Evaluate`): its value, or why there is none.
    pub fn evaluate(&mut self, expr: &Expression) -> Result<Output, EvalError> {
        if self.remaining < 0 {
            return Err(EvalError::OutOfBudget);
        }
        let (result, cost) = self.variables.run(expr);
        let composition = self.variables.take_pending();
        self.charge(composition)?;
        self.charge(cost)?;
        result
            .map(Output)
            .map_err(|e| EvalError::Failed(format!("expression '{}' resulted in error: {}", expr.source(), render(&e))))
    }
}
