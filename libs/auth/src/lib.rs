//! Authentication and authorization, in kube-apiserver's shapes: an [`Authenticator`] turns a
//! request into a [`UserInfo`] (x509 client certificates, front-proxy request headers, bearer
//! tokens from the token file or bound service-account JWTs, anonymous), and an [`Authorizer`]
//! turns [`Attributes`] into a [`Decision`] (privileged groups, RBAC over an in-memory index,
//! AlwaysAllow/AlwaysDeny). Everything here works on in-memory data; the server feeds the RBAC
//! index and the service-account lookups from its watch caches.
#![warn(missing_docs)]

pub mod authn;
pub mod authz;
pub mod jwt;
pub mod node;
pub mod rbac;
pub mod request_header;
pub mod serviceaccount;
pub mod token;
pub mod token_file;
pub mod user;
pub mod x509;

pub use authn::{AnonymousFallback, AuthOutcome, AuthRequest, Authenticator, ChainVerdict, UnionAuthenticator};
pub use authz::{AlwaysAllow, AlwaysDeny, Attributes, Authorizer, Decision, PrivilegedGroups, UnionAuthorizer};
pub use request_header::{RequestHeaderAuthenticator, RequestHeaderConfig};
pub use serviceaccount::{ServiceAccountTokenAuthenticator, TokenIssuer};
pub use token::{BearerTokenAuthenticator, TokenAuthenticator, TokenOutcome, TokenUnion};
pub use token_file::TokenFileAuthenticator;
pub use user::UserInfo;
pub use x509::X509Authenticator;
