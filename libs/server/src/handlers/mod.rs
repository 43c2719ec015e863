//! Request handlers behind the router.

pub mod discovery;
pub mod openapi;
pub mod pod_connect;
pub mod resource;
pub mod reviews;
pub mod system;

use kapi_auth::UserInfo;

/// Who sent a request, as handlers need it: the authenticated user (admission, reviews), the
/// user agent (default field managers) and the request's head (headers and the connection's
/// pending upgrade, which the pod connect subresources pass on to the kubelet).
#[derive(Clone, Copy, Debug)]
pub struct Caller<'a> {
    /// The authenticated (possibly impersonated) user.
    pub user: &'a UserInfo,
    /// The `User-Agent` header.
    pub user_agent: Option<&'a str>,
    /// Method, headers and extensions of the request.
    pub head: &'a http::request::Parts,
}
