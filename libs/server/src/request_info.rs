//! What a request is about, parsed once from method, path and query (kube's `RequestInfoFactory`).
//!
//! Filters (authorization, metrics, timeouts) and the router read this instead of re-parsing the
//! path, exactly as kube-apiserver's filters read `request.RequestInfo` from the context.

use http::Method;

/// The parsed request, as kube-apiserver's `RequestInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// `/api` or `/apis` requests naming a group version.
    pub is_resource_request: bool,
    /// URL path.
    pub path: String,
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection, or the
    /// lowercased HTTP method for non-resource requests.
    pub verb: String,
    /// `api` or `apis`.
    pub api_prefix: String,
    /// API group ("" for core).
    pub api_group: String,
    /// API version.
    pub api_version: String,
    /// Namespace, if the path has one.
    pub namespace: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource (status, scale, binding, ...).
    pub subresource: String,
    /// Object name.
    pub name: String,
    /// Path segments after the group version (for discovery of groups and versions).
    pub parts: Vec<String>,
    /// The `fieldSelector` query parameter, decoded ("" when none), for authorization.
    pub field_selector: String,
}

fn query_flag(query: Option<&str>, key: &str) -> bool {
    query
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
        .any(|(k, v)| k == key && (v == "true" || v == "1"))
}

/// A URL path with its `%XX` escapes decoded, as Go's `url.URL.Path`; an escape that is not
/// two hex digits stays as it is, and bytes that are not UTF-8 become U+FFFD (a Rust string
/// cannot hold them; kube's Go strings can, and print them as `\xff`).
fn percent_decode_path(path: &str) -> std::borrow::Cow<'_, str> {
    if !path.contains('%') {
        return std::borrow::Cow::Borrowed(path);
    }
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    std::borrow::Cow::Owned(String::from_utf8_lossy(&out).into_owned())
}

impl RequestInfo {
    /// Parses a request line the way kube-apiserver does.
    pub fn parse(method: &Method, path: &str, query: Option<&str>) -> Self {
        let mut info = RequestInfo { path: path.to_owned(), verb: method.as_str().to_ascii_lowercase(), ..Default::default() };
        // Go's server decodes the path before kube splits it: `system%3Anode` (the Python
        // client escapes every reserved character) names `system:node`, `%00` a NUL.
        let decoded = percent_decode_path(path);
        let segments: Vec<&str> = decoded.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
        let Some(prefix) = segments.first().copied() else { return info };
        if prefix != "api" && prefix != "apis" {
            return info;
        }
        let mut rest: &[&str] = &segments[1..];
        info.api_prefix = prefix.to_owned();
        if prefix == "apis" {
            let Some(group) = rest.first() else { return info };
            info.api_group = (*group).to_owned();
            rest = &rest[1..];
        }
        let Some(version) = rest.first() else { return info };
        info.api_version = (*version).to_owned();
        rest = &rest[1..];
        info.is_resource_request = true;
        info.parts = rest.iter().map(|s| (*s).to_owned()).collect();
        info.field_selector = crate::query::Query::parse(query).get("fieldSelector").unwrap_or_default().to_owned();

        let mut watch_path = false;
        if rest.first() == Some(&"watch") {
            watch_path = true;
            rest = &rest[1..];
        }
        if rest.first() == Some(&"namespaces") && rest.len() > 1 {
            info.namespace = rest[1].to_owned();
            // `namespaces/<ns>/status` and `/finalize` are subresources of the namespace itself.
            if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
                rest = &rest[2..];
            }
        }
        info.resource = rest.first().map(|s| (*s).to_owned()).unwrap_or_default();
        info.name = rest.get(1).map(|s| (*s).to_owned()).unwrap_or_default();
        info.subresource = rest.get(2).map(|s| (*s).to_owned()).unwrap_or_default();
        info.verb = match *method {
            Method::GET | Method::HEAD if watch_path || query_flag(query, "watch") => "watch",
            Method::GET | Method::HEAD if info.name.is_empty() => "list",
            Method::GET | Method::HEAD => "get",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if info.name.is_empty() => "deletecollection",
            Method::DELETE => "delete",
            _ => return RequestInfo { verb: method.as_str().to_ascii_lowercase(), ..info },
        }
        .to_owned();
        info
    }

    /// Long-running requests (watches, and later exec/attach/proxy) are exempt from the request
    /// timeout and in-flight limits.
    pub fn is_long_running(&self) -> bool {
        self.verb == "watch"
            || matches!(self.subresource.as_str(), "exec" | "attach" | "portforward" | "proxy" | "log")
    }

    /// Read-only verbs (for the mutating in-flight limit and metrics).
    pub fn is_read_only(&self) -> bool {
        matches!(self.verb.as_str(), "get" | "list" | "watch")
    }

    /// kube's metrics `scope` label: resource, namespace or cluster.
    pub fn scope(&self) -> &'static str {
        if !self.name.is_empty() {
            "resource"
        } else if !self.namespace.is_empty() {
            "namespace"
        } else if self.is_resource_request {
            "cluster"
        } else {
            ""
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(m: Method, p: &str, q: Option<&str>) -> RequestInfo {
        RequestInfo::parse(&m, p, q)
    }

    #[test]
    fn namespaced_object_and_subresource() {
        let i = parse(Method::PUT, "/apis/apps/v1/namespaces/ns1/deployments/web/scale", None);
        assert_eq!((i.verb.as_str(), i.api_group.as_str(), i.namespace.as_str()), ("update", "apps", "ns1"));
        assert_eq!((i.resource.as_str(), i.name.as_str(), i.subresource.as_str()), ("deployments", "web", "scale"));
    }

    #[test]
    fn namespace_object_itself() {
        let i = parse(Method::GET, "/api/v1/namespaces/kube-system", None);
        assert_eq!((i.resource.as_str(), i.name.as_str(), i.namespace.as_str()), ("namespaces", "kube-system", "kube-system"));
        let i = parse(Method::GET, "/api/v1/namespaces", None);
        assert_eq!((i.verb.as_str(), i.resource.as_str()), ("list", "namespaces"));
        let i = parse(Method::PUT, "/api/v1/namespaces/x/finalize", None);
        assert_eq!((i.resource.as_str(), i.name.as_str(), i.subresource.as_str()), ("namespaces", "x", "finalize"));
    }

    #[test]
    fn path_escapes_are_decoded_as_go_decodes_them() {
        let i = parse(Method::GET, "/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Anode", None);
        assert_eq!((i.resource.as_str(), i.name.as_str()), ("clusterroles", "system:node"));
        assert_eq!(i.path, "/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Anode");
        let i = parse(Method::GET, "/api/v1/namespaces/a%00/config%00maps/b%00c", None);
        assert_eq!((i.namespace.as_str(), i.resource.as_str(), i.name.as_str()), ("a\0", "config\0maps", "b\0c"));
        let i = parse(Method::GET, "/api/v1/namespaces/default/configmaps/a%FFb", None);
        assert_eq!(i.name, "a\u{fffd}b");
        // Not an escape: kept.
        assert_eq!(parse(Method::GET, "/api/v1/namespaces/d/configmaps/a%zz%4", None).name, "a%zz%4");
        // Decoded before the split, as kube splits Go's decoded path.
        let i = parse(Method::GET, "/api/v1/namespaces/d/configmaps/a%2Fb", None);
        assert_eq!((i.name.as_str(), i.subresource.as_str()), ("a", "b"));
    }

    #[test]
    fn watch_forms_and_collections() {
        assert_eq!(parse(Method::GET, "/api/v1/pods", Some("watch=true")).verb, "watch");
        let i = parse(Method::GET, "/api/v1/watch/namespaces/a/pods", None);
        assert_eq!((i.verb.as_str(), i.namespace.as_str(), i.resource.as_str()), ("watch", "a", "pods"));
        assert_eq!(parse(Method::DELETE, "/api/v1/namespaces/a/pods", None).verb, "deletecollection");
        assert_eq!(parse(Method::GET, "/healthz", None).verb, "get");
        assert!(!parse(Method::GET, "/healthz", None).is_resource_request);
        assert!(!parse(Method::GET, "/apis/apps", None).is_resource_request);
    }
}
