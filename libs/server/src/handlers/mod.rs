//! Request handlers behind the router.

pub mod admission;
pub mod discovery;
pub mod openapi;
pub mod resource;
pub mod reviews;
pub mod system;

use kapi_auth::UserInfo;

/// Who sent a request, as handlers need it: the authenticated user (admission, reviews) and the
/// user agent (default field managers).
#[derive(Clone, Copy, Debug)]
pub struct Caller<'a> {
    /// The authenticated (possibly impersonated) user.
    pub user: &'a UserInfo,
    /// The `User-Agent` header.
    pub user_agent: Option<&'a str>,
}
