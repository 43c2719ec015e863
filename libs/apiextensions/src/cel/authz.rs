//! kube's authorizer library (`k8s.io/apiserver/pkg/cel/library/authz.go`) for admission
//! expressions: `authorizer.group('apps').resource('deployments').namespace(ns).check('create')`
//! builds authorization attributes step by step, `check` asks the authorizer the caller
//! supplies, and the decision answers `allowed()`, `reason()`, `errored()`, `error()`.
//!
//! The values are opaque: the authorizer travels inside them, so the functions are plain
//! function items added to each evaluation's context rather than to the shared environment,
//! whose overloads are built once. The checker learns their signatures through
//! [`signature`], an extension of the shared checker.

use std::collections::BTreeMap;
use std::sync::Arc;

use cel::extractors::This;
use cel::objects::Opaque;
use cel::{Context, ExecutionError, Value};
use kapi_apimachinery::validation::{is_dns1123_label, is_dns1123_subdomain};

use super::check::{factor, Est, TypeError};
use super::types::{Decl, Ty, MAX_REQUEST_SIZE_BYTES};

pub(crate) const AUTHORIZER: &str = "kubernetes.authorization.Authorizer";
pub(crate) const PATH_CHECK: &str = "kubernetes.authorization.PathCheck";
pub(crate) const GROUP_CHECK: &str = "kubernetes.authorization.GroupCheck";
pub(crate) const RESOURCE_CHECK: &str = "kubernetes.authorization.ResourceCheck";
pub(crate) const DECISION: &str = "kubernetes.authorization.Decision";

/// kube's fixed cost of one authorization check: two per expression fit the per-call limit.
const CHECK_COST: u64 = 350_000;

/// The user an authorization check is made for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct AuthzUser {
    /// User name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// What an expression asks the authorizer (kube's `authorizer.AttributesRecord` as the library
/// fills it: resource checks use API version `*`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct AuthzAttributes {
    /// Who.
    pub user: AuthzUser,
    /// The verb given to `check`.
    pub verb: String,
    /// True for `group(..).resource(..)` checks, false for `path(..)` checks.
    pub resource_request: bool,
    /// API group.
    pub api_group: String,
    /// API version (`*` for resource checks).
    pub api_version: String,
    /// Resource.
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Non-resource path.
    pub path: String,
    /// `fieldSelector(..)` as written (the authorizer parses it).
    pub field_selector: String,
    /// `labelSelector(..)` as written.
    pub label_selector: String,
}

/// The authorizer's answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthzDecision {
    /// Whether the request is allowed.
    pub allowed: bool,
    /// Why (`reason()`).
    pub reason: String,
    /// An authorizer error (`errored()`, `error()`).
    pub error: Option<String>,
}

/// The authorizer behind `authorizer`, implemented by the server over its real authorizer
/// (RBAC, webhook, ...). Synchronous: decisions come from in-memory state.
pub trait CelAuthorizer: Send + Sync {
    /// Decides whether `attrs.user` may do what `attrs` describes.
    fn authorize(&self, attrs: &AuthzAttributes) -> AuthzDecision;
}

/// `authorizer`: the authorizer and the user checks are made for.
#[derive(Clone)]
pub(crate) struct AuthorizerVal {
    pub authz: Arc<dyn CelAuthorizer>,
    pub user: AuthzUser,
}

impl std::fmt::Debug for AuthorizerVal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer").field("user", &self.user.name).finish()
    }
}

impl PartialEq for AuthorizerVal {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.authz, &other.authz) && self.user == other.user
    }
}

impl Eq for AuthorizerVal {}

/// `authorizer.path(p)`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PathCheckVal {
    authorizer: AuthorizerVal,
    path: String,
}

/// `authorizer.group(g)`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct GroupCheckVal {
    authorizer: AuthorizerVal,
    group: String,
}

/// `authorizer.group(g).resource(r)` and its narrowing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResourceCheckVal {
    authorizer: AuthorizerVal,
    group: String,
    resource: String,
    subresource: String,
    namespace: String,
    name: String,
    field_selector: String,
    label_selector: String,
}

/// The answer of `check`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct DecisionVal(AuthzDecision);

macro_rules! opaque {
    ($($t:ty => $name:expr),*) => {$(
        impl Opaque for $t {
            fn runtime_type_name(&self) -> &str {
                $name
            }
        }
    )*};
}

opaque!(AuthorizerVal => AUTHORIZER, PathCheckVal => PATH_CHECK, GroupCheckVal => GROUP_CHECK,
    ResourceCheckVal => RESOURCE_CHECK, DecisionVal => DECISION);

impl ResourceCheckVal {
    /// `authorizer.requestResource`: the resource of the request being admitted.
    pub(crate) fn for_request(authorizer: AuthorizerVal, resource: &RequestResource) -> Self {
        ResourceCheckVal {
            authorizer,
            group: resource.group.clone(),
            resource: resource.resource.clone(),
            subresource: resource.subresource.clone(),
            namespace: resource.namespace.clone(),
            name: resource.name.clone(),
            field_selector: String::new(),
            label_selector: String::new(),
        }
    }
}

/// The request's resource, which `authorizer.requestResource` starts from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestResource {
    /// API group.
    pub group: String,
    /// Resource.
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

pub(crate) fn opaque_val<T: Opaque>(t: T) -> Value {
    Value::Opaque(Arc::new(t))
}

fn receiver<'a, T: 'static>(f: &str, v: &'a Arc<dyn Opaque>) -> Result<&'a T, ExecutionError> {
    v.downcast_ref::<T>().ok_or_else(|| ExecutionError::no_such_overload(f, vec![v.runtime_type_name().to_string()]))
}

type R = Result<Value, ExecutionError>;
type Recv = This<Arc<dyn Opaque>>;

fn path(This(a): Recv, p: Arc<String>) -> R {
    let authorizer = receiver::<AuthorizerVal>("path", &a)?.clone();
    if p.trim().is_empty() {
        return Err(ExecutionError::function_error("path", "path must not be empty"));
    }
    Ok(opaque_val(PathCheckVal { authorizer, path: p.to_string() }))
}

fn group(This(a): Recv, g: Arc<String>) -> R {
    let authorizer = receiver::<AuthorizerVal>("group", &a)?.clone();
    Ok(opaque_val(GroupCheckVal { authorizer, group: g.to_string() }))
}

fn service_account(This(a): Recv, namespace: Arc<String>, name: Arc<String>) -> R {
    let authorizer = receiver::<AuthorizerVal>("serviceAccount", &a)?;
    if !is_dns1123_subdomain(&name).is_empty() {
        return Err(ExecutionError::function_error("serviceAccount", "Invalid service account name"));
    }
    if !is_dns1123_label(&namespace).is_empty() {
        return Err(ExecutionError::function_error("serviceAccount", "Invalid service account namespace"));
    }
    // kube's ServiceAccountInfo.UserInfo: the account's user name and its two groups
    let user = AuthzUser {
        name: format!("system:serviceaccount:{namespace}:{name}"),
        groups: vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{namespace}")],
        ..AuthzUser::default()
    };
    Ok(opaque_val(AuthorizerVal { authz: authorizer.authz.clone(), user }))
}

fn resource(This(a): Recv, r: Arc<String>) -> R {
    let g = receiver::<GroupCheckVal>("resource", &a)?;
    if r.trim().is_empty() {
        return Err(ExecutionError::function_error("resource", "resource must not be empty"));
    }
    Ok(opaque_val(ResourceCheckVal {
        authorizer: g.authorizer.clone(),
        group: g.group.clone(),
        resource: r.to_string(),
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
        field_selector: String::new(),
        label_selector: String::new(),
    }))
}

fn narrow(f: &str, a: &Arc<dyn Opaque>, set: impl FnOnce(&mut ResourceCheckVal)) -> R {
    let mut r = receiver::<ResourceCheckVal>(f, a)?.clone();
    set(&mut r);
    Ok(opaque_val(r))
}

fn subresource(This(a): Recv, s: Arc<String>) -> R {
    narrow("subresource", &a, |r| r.subresource = s.to_string())
}

fn namespace(This(a): Recv, s: Arc<String>) -> R {
    narrow("namespace", &a, |r| r.namespace = s.to_string())
}

fn name(This(a): Recv, s: Arc<String>) -> R {
    narrow("name", &a, |r| r.name = s.to_string())
}

fn field_selector(This(a): Recv, s: Arc<String>) -> R {
    narrow("fieldSelector", &a, |r| r.field_selector = s.to_string())
}

fn label_selector(This(a): Recv, s: Arc<String>) -> R {
    narrow("labelSelector", &a, |r| r.label_selector = s.to_string())
}

fn check(This(a): Recv, verb: Arc<String>) -> R {
    let (authorizer, attrs) = if let Some(p) = a.downcast_ref::<PathCheckVal>() {
        let attrs = AuthzAttributes {
            user: p.authorizer.user.clone(),
            verb: verb.to_string(),
            path: p.path.clone(),
            ..AuthzAttributes::default()
        };
        (&p.authorizer, attrs)
    } else {
        let r = receiver::<ResourceCheckVal>("check", &a)?;
        let attrs = AuthzAttributes {
            user: r.authorizer.user.clone(),
            verb: verb.to_string(),
            resource_request: true,
            api_group: r.group.clone(),
            api_version: "*".into(),
            resource: r.resource.clone(),
            subresource: r.subresource.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            field_selector: r.field_selector.clone(),
            label_selector: r.label_selector.clone(),
            ..AuthzAttributes::default()
        };
        (&r.authorizer, attrs)
    };
    Ok(opaque_val(DecisionVal(authorizer.authz.authorize(&attrs))))
}

fn decision<'a>(f: &str, a: &'a Arc<dyn Opaque>) -> Result<&'a AuthzDecision, ExecutionError> {
    receiver::<DecisionVal>(f, a).map(|d| &d.0)
}

fn allowed(This(a): Recv) -> R {
    Ok(Value::Bool(decision("allowed", &a)?.allowed))
}

fn reason(This(a): Recv) -> R {
    Ok(Value::String(Arc::new(decision("reason", &a)?.reason.clone())))
}

fn errored(This(a): Recv) -> R {
    Ok(Value::Bool(decision("errored", &a)?.error.is_some()))
}

fn error(This(a): Recv) -> R {
    Ok(Value::String(Arc::new(decision("error", &a)?.error.clone().unwrap_or_default())))
}

/// Adds the library's functions to an evaluation's context.
pub(crate) fn register(ctx: &mut Context) -> Result<(), cel::DeclarationError> {
    ctx.add_function("path", path)?;
    ctx.add_function("group", group)?;
    ctx.add_function("serviceAccount", service_account)?;
    ctx.add_function("resource", resource)?;
    ctx.add_function("subresource", subresource)?;
    ctx.add_function("namespace", namespace)?;
    ctx.add_function("name", name)?;
    ctx.add_function("fieldSelector", field_selector)?;
    ctx.add_function("labelSelector", label_selector)?;
    ctx.add_function("check", check)?;
    ctx.add_function("allowed", allowed)?;
    ctx.add_function("reason", reason)?;
    ctx.add_function("errored", errored)?;
    ctx.add_function("error", error)?;
    Ok(())
}

/// The library's signatures and costs (kube's `library/cost.go`), for the checker.
pub(crate) fn signature(id: u64, f: &str, member: bool, a: &[&Est]) -> Option<Result<Est, TypeError>> {
    let (receivers, args, result): (&[&str], usize, Ty) = match f {
        "path" => (&[AUTHORIZER], 1, Ty::Opaque(PATH_CHECK)),
        "group" => (&[AUTHORIZER], 1, Ty::Opaque(GROUP_CHECK)),
        "serviceAccount" => (&[AUTHORIZER], 2, Ty::Opaque(AUTHORIZER)),
        "resource" => (&[GROUP_CHECK], 1, Ty::Opaque(RESOURCE_CHECK)),
        "subresource" | "namespace" | "name" | "fieldSelector" | "labelSelector" => {
            (&[RESOURCE_CHECK], 1, Ty::Opaque(RESOURCE_CHECK))
        }
        "check" => (&[PATH_CHECK, RESOURCE_CHECK], 1, Ty::Opaque(DECISION)),
        "allowed" | "errored" => (&[DECISION], 0, Ty::Bool),
        "reason" | "error" => (&[DECISION], 0, Ty::String),
        _ => return None,
    };
    let receiver_ok = member
        && a.first().is_some_and(|r| match &r.d.ty {
            Ty::Dyn => true,
            Ty::Opaque(n) => receivers.contains(n),
            _ => false,
        });
    let args_ok = a.len() == args + 1 && a[1..].iter().all(|x| matches!(x.d.ty, Ty::String | Ty::Dyn));
    if !receiver_ok || !args_ok {
        let names: Vec<String> = a.iter().map(|x| x.d.ty.name()).collect();
        let sig = match (member, names.split_first()) {
            (true, Some((recv, rest))) => format!("{recv}.({})", rest.join(", ")),
            _ => format!("({})", names.join(", ")),
        };
        return Some(Err(TypeError { id, msg: format!("found no matching overload for '{f}' applied to '{sig}'") }));
    }
    let cost = match f {
        "check" => CHECK_COST,
        // a selector is parsed: traversal of the string
        "fieldSelector" | "labelSelector" => factor(a[1].d.max, 0.1) + 1,
        _ => 1,
    };
    let max = if result == Ty::String { MAX_REQUEST_SIZE_BYTES } else { 0 };
    Some(Ok(Est { d: Decl::new(result, max), cost }))
}
