//! CEL admission policies (kube's `k8s.io/apiserver/pkg/admission/plugin/policy`).
//!
//! [`ValidatingAdmissionPolicy`] is the admission plugin of that name: for each write it
//! finds the policies whose `matchConstraints` and bindings match, collects each binding's
//! params, evaluates match conditions, variables, validations and audit annotations in the CEL
//! environment CRD rules use ([`kapi_apiextensions::cel`]), and answers as kube does (the
//! refusal's text and code, `Warning` headers, audit annotations).
//!
//! The plugin keeps no state of its own beyond compiled programs: policies, bindings,
//! namespaces and params are read from the watch caches on every request, so every replica
//! applies a change as soon as its cache has it. What the plugin cannot know alone comes from
//! the server: where the objects of a param kind are cached ([`ParamResolver`]; the built-ins
//! are [`BuiltinResolver`]) and the authorizer behind `authorizer` ([`CelAuthorizer`]).
//!
//! [`MutatingAdmissionPolicy`] is the mutating plugin of that name: the same matching, params,
//! match conditions and variables, then each matching binding's mutations (JSON Patch or an
//! apply configuration merged with the kind's schema), with kube's reinvocation.
//!
//! [`type_checking`] computes kube's `status.typeChecking` of a policy.

mod compiled;
mod decisions;
mod matching;
mod mutating;
mod params;
mod patching;
mod plugin;
mod reinvocation;
pub mod request;
mod resolver;
mod source;
mod typecheck;
mod validator;

pub use kapi_apiextensions::cel::{AuthzAttributes, AuthzDecision, AuthzUser, CelAuthorizer};
pub use mutating::MutatingAdmissionPolicy;
pub use patching::merge_apply_configuration;
pub use plugin::ValidatingAdmissionPolicy;
pub use resolver::{BuiltinResolver, Equivalent, ParamResolver, ParamSource};
pub use typecheck::{type_checking, SchemaResolver};
