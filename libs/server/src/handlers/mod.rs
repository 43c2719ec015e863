//! Request handlers behind the router.

pub mod discovery;
pub mod openapi;
pub mod resource;
pub mod system;
