//! Acting as someone else (kube's `WithImpersonation`): `Impersonate-User`, `-Group`, `-Uid`
//! and `Impersonate-Extra-<key>` replace the authenticated user, each part authorized with the
//! `impersonate` verb on users, serviceaccounts, groups, uids or userextras first.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::{HeaderMap, Request, Response};
use hyper::body::Incoming;
use kapi_apimachinery::ApiError;
use kapi_auth::user::{ALL_AUTHENTICATED, ALL_UNAUTHENTICATED, ANONYMOUS};
use kapi_auth::{Attributes, UserInfo};
use tower::ServiceExt;

use super::authorization::forbidden;
use super::{filter, ErrorOutput};
use crate::negotiation::Output;
use crate::response::{self, Body};
use crate::state::ApiServer;

const USER: &str = "impersonate-user";
const UID: &str = "impersonate-uid";
const GROUP: &str = "impersonate-group";
const EXTRA_PREFIX: &str = "impersonate-extra-";

/// One thing the caller asks to act as.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Impersonation {
    User(String),
    ServiceAccount { namespace: String, name: String },
    Group(String),
    Extra { key: String, value: String },
    Uid(String),
}

impl Impersonation {
    /// What must be allowed: verb `impersonate` on the resource the request names.
    fn attributes(&self, requestor: &UserInfo) -> Attributes {
        let (group, resource, subresource, namespace, name) = match self {
            Impersonation::User(name) => ("", "users", "", "", name.as_str()),
            Impersonation::ServiceAccount { namespace, name } => ("", "serviceaccounts", "", namespace.as_str(), name.as_str()),
            Impersonation::Group(name) => ("", "groups", "", "", name.as_str()),
            Impersonation::Extra { key, value } => ("authentication.k8s.io", "userextras", key.as_str(), "", value.as_str()),
            Impersonation::Uid(uid) => ("authentication.k8s.io", "uids", "", "", uid.as_str()),
        };
        Attributes {
            user: requestor.clone(),
            verb: "impersonate".into(),
            namespace: namespace.into(),
            api_group: group.into(),
            api_version: "v1".into(),
            resource: resource.into(),
            subresource: subresource.into(),
            name: name.into(),
            resource_request: true,
            path: String::new(),
            field_selector: String::new(),
        }
    }
}

fn header_values<'a>(headers: &'a HeaderMap, name: &str) -> impl Iterator<Item = &'a str> {
    headers.get_all(name).iter().filter_map(|v| v.to_str().ok())
}

/// kube's `buildImpersonationRequests`; an error when groups, extras or a uid come without a
/// user.
fn requests(headers: &HeaderMap) -> Result<Vec<Impersonation>, String> {
    let mut out = Vec::new();
    let user = header_values(headers, USER).next().unwrap_or_default();
    if !user.is_empty() {
        out.push(match user.strip_prefix("system:serviceaccount:").and_then(|rest| rest.split_once(':')) {
            Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() && !name.contains(':') => {
                Impersonation::ServiceAccount { namespace: namespace.into(), name: name.into() }
            }
            _ => Impersonation::User(user.into()),
        });
    }
    out.extend(header_values(headers, GROUP).map(|g| Impersonation::Group(g.into())));
    for (name, value) in headers {
        let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX) else { continue };
        let key = unescape(key);
        if let Ok(value) = value.to_str() {
            out.push(Impersonation::Extra { key, value: value.into() });
        }
    }
    let uid = header_values(headers, UID).next().unwrap_or_default();
    if !uid.is_empty() {
        out.push(Impersonation::Uid(uid.into()));
    }
    if user.is_empty() && !out.is_empty() {
        return Err(format!("requested {out:?} without impersonating a user"));
    }
    Ok(out)
}

/// `url.PathUnescape` of an extra key (`Impersonate-Extra-Example.com%2fscopes`).
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Some(b) = key.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The impersonated user, once every part is authorized; the 403 of the first part that is not.
async fn impersonate(srv: &ApiServer, requestor: &UserInfo, wanted: &[Impersonation], groups_given: bool) -> Result<UserInfo, ApiError> {
    let mut user = UserInfo::default();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for want in wanted {
        let attrs = want.attributes(requestor);
        let decision = srv.authorizer.authorize_async(&attrs).await;
        if !decision.is_allowed() {
            return Err(forbidden(&attrs, decision.reason()));
        }
        match want {
            Impersonation::User(name) => user.name = name.clone(),
            Impersonation::ServiceAccount { namespace, name } => {
                user.name = kapi_auth::user::service_account_user(namespace, name);
                if !groups_given {
                    user.groups = kapi_auth::user::service_account_groups(namespace);
                }
            }
            Impersonation::Group(g) => user.groups.push(g.clone()),
            Impersonation::Extra { key, value } => extra.entry(key.clone()).or_default().push(value.clone()),
            Impersonation::Uid(uid) => user.uid = uid.clone(),
        }
    }
    user.extra = extra;
    if user.name != ANONYMOUS {
        if !user.groups.iter().any(|g| g == ALL_AUTHENTICATED || g == ALL_UNAUTHENTICATED) {
            user.groups.push(ALL_AUTHENTICATED.into());
        }
    } else if !user.in_group(ALL_UNAUTHENTICATED) {
        user.groups.push(ALL_UNAUTHENTICATED.into());
    }
    Ok(user)
}

async fn run<S>(srv: Arc<ApiServer>, inner: S, mut req: Request<Incoming>) -> Response<Body>
where
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = std::convert::Infallible> + Send,
    S::Future: Send,
{
    let output = req.extensions().get::<ErrorOutput>().map_or(Output::JSON, |o| o.0);
    let wanted = match requests(req.headers()) {
        Ok(w) if w.is_empty() => None,
        Ok(w) => Some(w),
        // kube answers this with an internal error.
        Err(e) => return response::error(&ApiError::internal(e), output),
    };
    if let Some(wanted) = wanted {
        let Some(requestor) = req.extensions().get::<UserInfo>().cloned() else {
            return response::error(&ApiError::internal("no user found for request"), output);
        };
        let groups_given = req.headers().contains_key(GROUP);
        match impersonate(&srv, &requestor, &wanted, groups_given).await {
            Ok(user) => {
                tracing::debug!(requestor = %requestor.name, impersonated = %user.name, "impersonating");
                if let Some(audit) = req.extensions().get::<super::audit::AuditHandle>() {
                    audit.impersonated(&user);
                }
                req.extensions_mut().insert(user);
                let headers = req.headers_mut();
                let extra: Vec<http::HeaderName> =
                    headers.keys().filter(|k| k.as_str().starts_with(EXTRA_PREFIX)).cloned().collect();
                for name in [USER, UID, GROUP] {
                    headers.remove(name);
                }
                for name in extra {
                    headers.remove(name);
                }
            }
            Err(e) => return super::reject(req, srv.options.max_body_bytes, &e).await,
        }
    }
    match inner.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    }
}

filter!(
    /// Replaces the user with the impersonated one when the headers ask and the authorizer allows.
    ImpersonationLayer => WithImpersonation { srv: Arc<ApiServer> },
    Incoming,
    run
);

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        h
    }

    #[test]
    fn builds_requests_as_kube() {
        assert!(requests(&HeaderMap::new()).unwrap().is_empty());
        let r = requests(&headers(&[
            ("Impersonate-User", "system:serviceaccount:ns:robot"),
            ("Impersonate-Group", "a"),
            ("Impersonate-Group", "b"),
            ("Impersonate-Extra-Example.com%2fScopes", "view"),
            ("Impersonate-Uid", "1234"),
        ]))
        .unwrap();
        assert_eq!(
            r,
            vec![
                Impersonation::ServiceAccount { namespace: "ns".into(), name: "robot".into() },
                Impersonation::Group("a".into()),
                Impersonation::Group("b".into()),
                Impersonation::Extra { key: "example.com/scopes".into(), value: "view".into() },
                Impersonation::Uid("1234".into()),
            ]
        );
        assert_eq!(requests(&headers(&[("Impersonate-User", "jane")])).unwrap(), vec![Impersonation::User("jane".into())]);
        assert!(requests(&headers(&[("Impersonate-Group", "a")])).is_err(), "groups without a user");
    }

    #[test]
    fn unescapes_extra_keys() {
        assert_eq!(unescape("example.com%2fscopes"), "example.com/scopes");
        assert_eq!(unescape("bad%zzkey%2"), "bad%zzkey%2");
    }
}
