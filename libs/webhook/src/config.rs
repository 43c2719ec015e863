//! A webhook's `clientConfig`, read once when its configuration (a CRD, a
//! Validating/MutatingWebhookConfiguration) is loaded, so that a call does no parsing.
//!
//! The request path follows client-go's REST client: `path.Join("/", path)`, so `""` and `"/"`
//! are `/` and a trailing slash is dropped. kube's validation refuses a query in `url`; one that
//! got in anyway is kept and `timeout=` is added after it.

use base64::Engine;
use serde_json::Value;

/// A webhook's clientConfig (admissionregistration.k8s.io and apiextensions.k8s.io share its shape).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientConfig {
    pub(crate) endpoint: Endpoint,
    /// PEM certificates trusted for the webhook's serving certificate. Empty trusts nothing:
    /// kube would fall back to the system's roots, which a cluster-internal webhook never uses.
    pub(crate) ca_bundle: Vec<u8>,
    /// How kapi proves itself to the webhook: nothing for admission and conversion webhooks;
    /// a client certificate or a bearer token from an authentication or authorization
    /// webhook's kubeconfig.
    pub(crate) credentials: Credentials,
}

/// kapi's credentials towards a webhook.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub(crate) enum Credentials {
    #[default]
    None,
    /// PEM certificate chain and private key.
    Certificate { cert: Vec<u8>, key: Vec<u8> },
    /// `Authorization: Bearer <token>`.
    Token(String),
}

/// Where the webhook listens.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Endpoint {
    Url {
        /// Host and port as written (brackets kept), for messages and the Host header.
        authority: String,
        /// What is dialled and verified: a DNS name or an IP address without brackets.
        host: String,
        port: u16,
        path: String,
        query: Option<String>,
    },
    Service { namespace: String, name: String, port: u16, path: String },
}

/// Never prints the key or the token (options are logged with `{:?}`).
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::None => f.write_str("None"),
            Credentials::Certificate { .. } => f.write_str("Certificate(<redacted>)"),
            Credentials::Token(_) => f.write_str("Token(<redacted>)"),
        }
    }
}

const URL_FORM: &str = "; desired format: https://host[/path]";

impl ClientConfig {
    /// Reads the `clientConfig` JSON object; errors say what is wrong.
    pub fn from_json(v: &Value) -> Result<ClientConfig, String> {
        let config = v.as_object().ok_or("clientConfig must be an object")?;
        let present = |field: &str| config.get(field).filter(|v| !v.is_null());
        let endpoint = match (present("url"), present("service")) {
            (Some(_), Some(_)) => return Err("exactly one of url or service is required".into()),
            (Some(url), None) => parse_url(url.as_str().ok_or("url must be a string")?)?,
            (None, Some(service)) => parse_service(service)?,
            (None, None) => return Err("webhook configuration must have either service or URL".into()),
        };
        let ca_bundle = match present("caBundle") {
            None => Vec::new(),
            Some(Value::String(b64)) => base64::engine::general_purpose::STANDARD.decode(b64).map_err(|e| format!("caBundle: {}", go_base64_error(&e)))?,
            Some(_) => return Err("caBundle must be a base64 string".into()),
        };
        if !ca_bundle.is_empty() {
            crate::tls::roots(&ca_bundle).map_err(|e| format!("caBundle: {e}"))?;
        }
        let config = ClientConfig { endpoint, ca_bundle, credentials: Credentials::None };
        // Go's URL type escapes what HTTP cannot carry; here such a path is refused up front
        // rather than failing every call.
        let path = config.path_and_query(None);
        if path.parse::<http::uri::PathAndQuery>().is_err() {
            return Err(format!("path {} is not a valid request path", crate::error::go_quote(&path)));
        }
        Ok(config)
    }

    /// The name the serving certificate must carry and the Host header's host: kube's
    /// `<service>.<namespace>.svc` for services.
    pub(crate) fn server_name(&self) -> String {
        match &self.endpoint {
            Endpoint::Url { host, .. } => host.clone(),
            Endpoint::Service { namespace, name, .. } => format!("{name}.{namespace}.svc"),
        }
    }

    /// `host[:port]` as kube puts it in the URL and the Host header.
    pub(crate) fn authority(&self) -> String {
        match &self.endpoint {
            Endpoint::Url { authority, .. } => authority.clone(),
            Endpoint::Service { port, .. } => format!("{}:{port}", self.server_name()),
        }
    }

    /// Path and query of the request, with client-go's `timeout` parameter.
    pub(crate) fn path_and_query(&self, timeout: Option<&str>) -> String {
        let (path, query) = match &self.endpoint {
            Endpoint::Url { path, query, .. } => (path, query.as_deref()),
            Endpoint::Service { path, .. } => (path, None),
        };
        let timeout = timeout.map(|t| format!("timeout={t}"));
        match (query, timeout) {
            (Some(q), Some(t)) => format!("{path}?{q}&{t}"),
            (Some(q), None) => format!("{path}?{q}"),
            (None, Some(t)) => format!("{path}?{t}"),
            (None, None) => path.clone(),
        }
    }
}

pub(crate) fn parse_url(url: &str) -> Result<Endpoint, String> {
    let unparsable = |why: String| format!("Unparsable URL: parse {}: {why}", crate::error::go_quote(url));
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    if !scheme.eq_ignore_ascii_case("https") {
        return Err(format!("'https' is the only allowed URL scheme{URL_FORM}"));
    }
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    if !fragment.is_empty() {
        return Err("fragments are not permitted in the URL".into());
    }
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, rest) = rest.split_at(end);
    if authority.contains('@') {
        return Err("user information is not permitted in the URL".into());
    }
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => (path, Some(query.to_owned()).filter(|q| !q.is_empty())),
        None => (rest, None),
    };
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']').ok_or_else(|| unparsable("missing ']' in host".into()))?;
        let port = match after {
            "" => None,
            after => Some(after.strip_prefix(':').ok_or_else(|| unparsable(format!("invalid port {} after host", crate::error::go_quote(after))))?),
        };
        (host, port)
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(format!("host must be specified{URL_FORM}"));
    }
    let port = match port {
        None | Some("") => 443,
        Some(p) => match p.parse::<u16>() {
            Ok(port) if port > 0 && p.bytes().all(|b| b.is_ascii_digit()) => port,
            _ => return Err(unparsable(format!("invalid port {} after host", crate::error::go_quote(&format!(":{p}"))))),
        },
    };
    if rustls::pki_types::ServerName::try_from(host).is_err() {
        return Err(unparsable(format!("invalid host {}", crate::error::go_quote(host))));
    }
    Ok(Endpoint::Url { authority: authority.to_owned(), host: host.to_owned(), port, path: clean_path(path), query })
}

fn parse_service(service: &Value) -> Result<Endpoint, String> {
    let field = |name: &str| service.get(name).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (namespace, name) = (field("namespace"), field("name"));
    if name.is_empty() {
        return Err("service.name: Required value".into());
    }
    if namespace.is_empty() {
        return Err("service.namespace: Required value".into());
    }
    let port = match service.get("port").filter(|p| !p.is_null()) {
        None => 443,
        Some(p) => p.as_u64().and_then(|p| u16::try_from(p).ok()).filter(|p| *p > 0).ok_or_else(|| {
            format!("service.port: Invalid value: {p}: port is not valid: must be between 1 and 65535, inclusive")
        })?,
    };
    let path = service.get("path").and_then(Value::as_str).unwrap_or_default();
    Ok(Endpoint::Service { namespace, name, port, path: clean_path(path) })
}

/// Go's `path.Join("/", p)`, which client-go applies to the webhook's path.
fn clean_path(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Go's `base64.CorruptInputError` wording.
fn go_base64_error(e: &base64::DecodeError) -> String {
    let at = match e {
        base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => *at,
        base64::DecodeError::InvalidLength(len) => *len,
        base64::DecodeError::InvalidPadding => 0,
    };
    format!("illegal base64 data at input byte {at}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn url(u: &str) -> Result<ClientConfig, String> {
        ClientConfig::from_json(&json!({"url": u}))
    }

    #[test]
    fn urls_keep_their_authority_and_clean_their_path() {
        let c = url("https://Example.com:8443/a//b/./c/?x=1").unwrap();
        assert_eq!(c.authority(), "Example.com:8443");
        assert_eq!(c.server_name(), "Example.com");
        assert_eq!(c.path_and_query(Some("5s")), "/a/b/c?x=1&timeout=5s");
        let c = url("https://[::1]:9443").unwrap();
        assert_eq!((c.authority(), c.server_name(), c.path_and_query(Some("1s"))), ("[::1]:9443".into(), "::1".into(), "/?timeout=1s".into()));
        assert!(matches!(url("https://[::1]/x").unwrap().endpoint, Endpoint::Url { port: 443, .. }));
        assert!(matches!(url("https://h:/x").unwrap().endpoint, Endpoint::Url { port: 443, .. }));
    }

    #[test]
    fn bad_urls_say_why() {
        assert_eq!(url("http://h/x").unwrap_err(), "'https' is the only allowed URL scheme; desired format: https://host[/path]");
        assert_eq!(url("https:///x").unwrap_err(), "host must be specified; desired format: https://host[/path]");
        assert_eq!(url("https://u:p@h/x").unwrap_err(), "user information is not permitted in the URL");
        assert_eq!(url("https://h/x#f").unwrap_err(), "fragments are not permitted in the URL");
        assert_eq!(url("https://h:x/y").unwrap_err(), r#"Unparsable URL: parse "https://h:x/y": invalid port ":x" after host"#);
        let none = ClientConfig::from_json(&json!({"caBundle": ""})).unwrap_err();
        assert_eq!(none, "webhook configuration must have either service or URL");
        assert_eq!(url("https://h/a b").unwrap_err(), r#"path "/a b" is not a valid request path"#);
        let both = ClientConfig::from_json(&json!({"url": "https://h", "service": {"namespace": "n", "name": "s"}})).unwrap_err();
        assert_eq!(both, "exactly one of url or service is required");
    }

    #[test]
    fn services_default_to_port_443() {
        let c = ClientConfig::from_json(&json!({"service": {"namespace": "ns", "name": "hook"}})).unwrap();
        assert_eq!((c.authority(), c.server_name(), c.path_and_query(Some("30s"))), ("hook.ns.svc:443".into(), "hook.ns.svc".into(), "/?timeout=30s".into()));
        let c = ClientConfig::from_json(&json!({"service": {"namespace": "ns", "name": "hook", "port": 8443, "path": "/convert/"}})).unwrap();
        assert_eq!((c.authority(), c.path_and_query(None)), ("hook.ns.svc:8443".into(), "/convert".into()));
        let bad = ClientConfig::from_json(&json!({"service": {"namespace": "ns", "name": "hook", "port": 0}})).unwrap_err();
        assert_eq!(bad, "service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive");
    }

    #[test]
    fn ca_bundles_must_be_base64_pem() {
        let bad = ClientConfig::from_json(&json!({"url": "https://h", "caBundle": "no$"})).unwrap_err();
        assert_eq!(bad, "caBundle: illegal base64 data at input byte 2");
        let not_pem = base64::engine::general_purpose::STANDARD.encode("hello");
        let bad = ClientConfig::from_json(&json!({"url": "https://h", "caBundle": not_pem})).unwrap_err();
        assert_eq!(bad, "caBundle: unable to load root certificates: unable to parse bytes as PEM block");
    }
}
