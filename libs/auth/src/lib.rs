//! Authentication and authorization, in kube-apiserver's shapes: an [`Authenticator`] turns a
//! request into a [`UserInfo`] (x509 client certificates today; tokens, service accounts and
//! request-header auth plug in behind the same trait later), and an [`Authorizer`] turns
//! [`Attributes`] into a [`Decision`] (RBAC plugs in behind it later).
#![warn(missing_docs)]

pub mod authn;
pub mod authz;
pub mod user;
pub mod x509;

pub use authn::{AuthOutcome, AuthRequest, Authenticator, UnionAuthenticator};
pub use authz::{AlwaysAllow, AlwaysDeny, Attributes, Authorizer, Decision, UnionAuthorizer};
pub use user::UserInfo;
pub use x509::X509Authenticator;
