//! Front-proxy authentication (kube's `headerrequest` behind its x509 `Verifier`): a proxy that
//! authenticated the user itself (kube-aggregator, an auth proxy) connects with a client
//! certificate from `--requestheader-client-ca-file` and names the user in headers.
//!
//! The headers are only believed when the connection's certificate chain verifies against the
//! front-proxy CA and, when `--requestheader-allowed-names` is set, the leaf's common name is
//! one of them. Otherwise anyone able to send a header could claim to be anyone.

use std::collections::BTreeMap;

use http::header::HeaderName;
use http::HeaderMap;

use crate::authn::{AuthOutcome, AuthRequest, Authenticator, ChainVerdict};
use crate::user::UserInfo;
use crate::x509::CertificateInfo;

/// The `--requestheader-*` flags.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestHeaderConfig {
    /// `--requestheader-allowed-names`: common names the proxy's certificate may have; empty
    /// allows any certificate the front-proxy CA issued.
    pub allowed_names: Vec<String>,
    /// `--requestheader-username-headers`, in order; the first one with a value names the user.
    pub username_headers: Vec<String>,
    /// `--requestheader-uid-headers` (kube 1.32+), in order; the first one with a value is the
    /// user's UID.
    pub uid_headers: Vec<String>,
    /// `--requestheader-group-headers`; every value of every one of them is a group.
    pub group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix`; `<prefix><key>: <value>` adds `value` to the
    /// extra `key` (lower-cased, then percent-decoded).
    pub extra_header_prefixes: Vec<String>,
}

/// Why the request-header configuration is unusable.
#[derive(Debug, thiserror::Error)]
pub enum RequestHeaderError {
    /// A header name is empty once trimmed (kube's wording).
    #[error("empty header {0:?}")]
    EmptyHeader(String),
    /// A header name is not a valid HTTP header name.
    #[error("invalid header name {name:?}: {reason}")]
    InvalidHeader {
        /// The name as configured.
        name: String,
        /// Why it is invalid.
        reason: String,
    },
}

/// kube's request-header authenticator (see the module documentation).
#[derive(Clone, Debug)]
pub struct RequestHeaderAuthenticator {
    allowed_names: Vec<String>,
    username_headers: Vec<HeaderName>,
    uid_headers: Vec<HeaderName>,
    group_headers: Vec<HeaderName>,
    /// Lower-cased, as `HeaderName`s are, so that prefixes compare case-insensitively.
    extra_prefixes: Vec<String>,
}

fn header_names(names: &[String]) -> Result<Vec<HeaderName>, RequestHeaderError> {
    trimmed(names)?
        .into_iter()
        .map(|name| {
            HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| RequestHeaderError::InvalidHeader { name: name.clone(), reason: e.to_string() })
        })
        .collect()
}

/// kube's `trimHeaders`: surrounding space is dropped, an empty name is a configuration error.
fn trimmed(names: &[String]) -> Result<Vec<String>, RequestHeaderError> {
    names
        .iter()
        .map(|name| {
            let t = name.trim();
            if t.is_empty() {
                Err(RequestHeaderError::EmptyHeader(name.clone()))
            } else {
                Ok(t.to_owned())
            }
        })
        .collect()
}

/// Why a header value cannot be used. kube keeps header bytes as Go strings whatever they are;
/// here a value that is not UTF-8 is refused rather than altered, so that two different byte
/// strings can never turn into the same user or group name.
fn text(name: &HeaderName, value: &http::HeaderValue) -> Result<String, String> {
    String::from_utf8(value.as_bytes().to_vec()).map_err(|_| format!("header {:?} is not valid UTF-8", name.as_str()))
}

/// Go's `url.PathUnescape`: `%XX` escapes decoded, `+` left alone; `None` when an escape is
/// malformed. A decoding that is not UTF-8 is treated as malformed too (kube would keep the
/// bytes; a Rust `String` cannot).
fn path_unescape(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl RequestHeaderAuthenticator {
    /// Validates the configuration: header names are trimmed and must not be empty, as kube's
    /// `headerrequest.New` requires.
    pub fn new(config: &RequestHeaderConfig) -> Result<Self, RequestHeaderError> {
        Ok(RequestHeaderAuthenticator {
            allowed_names: config.allowed_names.clone(),
            username_headers: header_names(&config.username_headers)?,
            uid_headers: header_names(&config.uid_headers)?,
            group_headers: header_names(&config.group_headers)?,
            extra_prefixes: trimmed(&config.extra_header_prefixes)?
                .into_iter()
                .map(|p| p.to_ascii_lowercase())
                .collect(),
        })
    }

    /// Removes every header this authenticator reads, as kube does after a successful
    /// authentication, so that handlers and proxied backends never see the proxy's claims.
    pub fn clear_authentication_headers(&self, headers: &mut HeaderMap) {
        for name in self.username_headers.iter().chain(&self.uid_headers).chain(&self.group_headers) {
            headers.remove(name);
        }
        let prefixed: Vec<HeaderName> = headers
            .keys()
            .filter(|name| self.extra_prefixes.iter().any(|p| name.as_str().starts_with(p)))
            .cloned()
            .collect();
        for name in prefixed {
            headers.remove(name);
        }
    }

    /// The first non-empty first-value among `names` (Go's `Header.Get` looks at the first
    /// value of each header only).
    fn first_value(headers: &HeaderMap, names: &[HeaderName]) -> Result<Option<String>, String> {
        for name in names {
            if let Some(value) = headers.get(name) {
                if !value.is_empty() {
                    return text(name, value).map(Some);
                }
            }
        }
        Ok(None)
    }

    fn read_user(&self, headers: &HeaderMap) -> Result<Option<UserInfo>, String> {
        let Some(name) = Self::first_value(headers, &self.username_headers)? else {
            return Ok(None);
        };
        let uid = Self::first_value(headers, &self.uid_headers)?.unwrap_or_default();
        let mut groups = Vec::new();
        for header in &self.group_headers {
            for value in headers.get_all(header) {
                if !value.is_empty() {
                    groups.push(text(header, value)?);
                }
            }
        }
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        // Prefixes first, so that values keep the prefixes' order, as kube iterates.
        for prefix in &self.extra_prefixes {
            for header in headers.keys() {
                let Some(suffix) = header.as_str().strip_prefix(prefix.as_str()) else { continue };
                let key = path_unescape(suffix).unwrap_or_else(|| suffix.to_owned());
                let values = extra.entry(key).or_default();
                for value in headers.get_all(header) {
                    values.push(text(header, value)?);
                }
            }
        }
        Ok(Some(UserInfo { name, uid, groups, extra }))
    }
}

impl Authenticator for RequestHeaderAuthenticator {
    fn authenticate(&self, req: &AuthRequest<'_>) -> AuthOutcome {
        match req.front_proxy_ca {
            ChainVerdict::Absent => return AuthOutcome::NotApplicable,
            // kube returns the verification error, which the union keeps only if no other
            // authenticator (x509 with the client CA, a token) succeeds.
            ChainVerdict::Failed(reason) => return AuthOutcome::Rejected(reason.clone()),
            ChainVerdict::Verified => {}
        }
        let Some(leaf) = req.peer_certificates.and_then(<[Vec<u8>]>::first) else {
            return AuthOutcome::NotApplicable;
        };
        if !self.allowed_names.is_empty() {
            let common_name = match CertificateInfo::from_der(leaf) {
                Ok(info) => info.common_name,
                Err(e) => return AuthOutcome::Rejected(e.to_string()),
            };
            if !self.allowed_names.contains(&common_name) {
                return AuthOutcome::Rejected(format!(
                    "x509: subject with cn={common_name} is not in the allowed list"
                ));
            }
        }
        match self.read_user(req.headers) {
            Ok(Some(user)) => AuthOutcome::Authenticated(user),
            Ok(None) => AuthOutcome::NotApplicable,
            Err(reason) => AuthOutcome::Rejected(reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair};

    fn cert(cn: &str) -> Vec<u8> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, cn);
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    fn config(allowed: &[&str]) -> RequestHeaderConfig {
        let s = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        RequestHeaderConfig {
            allowed_names: s(allowed),
            username_headers: s(&["X-Remote-User", "X-Other-User"]),
            uid_headers: s(&["X-Remote-Uid"]),
            group_headers: s(&["X-Remote-Group", "X-Other-Group"]),
            extra_header_prefixes: s(&["X-Remote-Extra-", "X-Other-Extra-"]),
        }
    }

    fn headers(pairs: &[(&str, &[u8])]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(HeaderName::from_bytes(name.as_bytes()).unwrap(), http::HeaderValue::from_bytes(value).unwrap());
        }
        map
    }

    fn run(
        auth: &RequestHeaderAuthenticator,
        verdict: ChainVerdict,
        cn: Option<&str>,
        headers: &HeaderMap,
    ) -> AuthOutcome {
        let chain = cn.map(|cn| vec![cert(cn)]);
        auth.authenticate(&AuthRequest {
            peer_certificates: chain.as_deref(),
            client_ca: &ChainVerdict::Absent,
            front_proxy_ca: &verdict,
            headers,
        })
    }

    #[test]
    fn verified_proxy_names_the_user() {
        let auth = RequestHeaderAuthenticator::new(&config(&["front-proxy-client"])).unwrap();
        let h = headers(&[
            ("x-remote-user", b""),
            ("x-other-user", b"jane"),
            ("x-remote-uid", b"uid-1"),
            ("x-remote-group", b"dev"),
            ("x-remote-group", b""),
            ("x-remote-group", b"ops"),
            ("x-other-group", b"qa"),
            ("x-remote-extra-scopes", b"view"),
            ("x-remote-extra-scopes", b"edit"),
            ("X-Remote-Extra-Acme.com%2Fproject", b"p1"),
            ("x-other-extra-scopes", b"admin"),
            ("x-remote-extra-bad%zz", b"kept"),
        ]);
        let AuthOutcome::Authenticated(user) = run(&auth, ChainVerdict::Verified, Some("front-proxy-client"), &h)
        else {
            panic!("not authenticated")
        };
        assert_eq!(user.name, "jane");
        assert_eq!(user.uid, "uid-1");
        assert_eq!(user.groups, ["dev", "ops", "qa"]);
        let extra: Vec<(&str, Vec<&str>)> =
            user.extra.iter().map(|(k, v)| (k.as_str(), v.iter().map(String::as_str).collect())).collect();
        assert_eq!(
            extra,
            vec![("acme.com/project", vec!["p1"]), ("bad%zz", vec!["kept"]), ("scopes", vec!["view", "edit", "admin"])]
        );
    }

    #[test]
    fn first_value_of_first_header_wins() {
        let auth = RequestHeaderAuthenticator::new(&config(&[])).unwrap();
        let h = headers(&[("x-remote-user", b"first"), ("x-remote-user", b"second"), ("x-other-user", b"other")]);
        let AuthOutcome::Authenticated(user) = run(&auth, ChainVerdict::Verified, Some("anyone"), &h) else { panic!() };
        assert_eq!(user.name, "first");
        assert_eq!(user.uid, "");
        assert!(user.groups.is_empty() && user.extra.is_empty());
    }

    #[test]
    fn chain_verdicts_and_allowed_names() {
        let auth = RequestHeaderAuthenticator::new(&config(&["front-proxy-client"])).unwrap();
        let h = headers(&[("x-remote-user", b"jane")]);
        assert_eq!(run(&auth, ChainVerdict::Absent, Some("front-proxy-client"), &h), AuthOutcome::NotApplicable);
        assert_eq!(
            run(&auth, ChainVerdict::Failed("x509: certificate signed by unknown authority".into()), Some("x"), &h),
            AuthOutcome::Rejected("x509: certificate signed by unknown authority".into())
        );
        assert_eq!(
            run(&auth, ChainVerdict::Verified, Some("mallory"), &h),
            AuthOutcome::Rejected("x509: subject with cn=mallory is not in the allowed list".into())
        );
        // No user header from an allowed proxy: no opinion.
        assert_eq!(
            run(&auth, ChainVerdict::Verified, Some("front-proxy-client"), &HeaderMap::new()),
            AuthOutcome::NotApplicable
        );
        assert_eq!(run(&auth, ChainVerdict::Verified, None, &h), AuthOutcome::NotApplicable);
        // Empty allowed list: any verified certificate will do.
        let any = RequestHeaderAuthenticator::new(&config(&[])).unwrap();
        assert!(matches!(run(&any, ChainVerdict::Verified, Some("mallory"), &h), AuthOutcome::Authenticated(_)));
    }

    #[test]
    fn non_utf8_values_are_refused() {
        let auth = RequestHeaderAuthenticator::new(&config(&[])).unwrap();
        let h = headers(&[("x-remote-user", b"jane"), ("x-remote-group", b"d\xffv")]);
        assert!(
            matches!(run(&auth, ChainVerdict::Verified, Some("p"), &h), AuthOutcome::Rejected(m) if m.contains("x-remote-group"))
        );
    }

    #[test]
    fn configuration_is_validated_and_trimmed() {
        let mut c = config(&[]);
        c.group_headers.push("  ".into());
        assert_eq!(RequestHeaderAuthenticator::new(&c).unwrap_err().to_string(), "empty header \"  \"");
        let mut c = config(&[]);
        c.username_headers = vec![" X-Remote-User ".into()];
        let auth = RequestHeaderAuthenticator::new(&c).unwrap();
        let h = headers(&[("x-remote-user", b"jane")]);
        assert!(
            matches!(run(&auth, ChainVerdict::Verified, Some("p"), &h), AuthOutcome::Authenticated(u) if u.name == "jane")
        );
        let mut c = config(&[]);
        c.uid_headers = vec!["bad header".into()];
        assert!(matches!(RequestHeaderAuthenticator::new(&c), Err(RequestHeaderError::InvalidHeader { .. })));
    }

    #[test]
    fn clears_what_it_reads() {
        let auth = RequestHeaderAuthenticator::new(&config(&[])).unwrap();
        let mut h = headers(&[
            ("x-remote-user", b"jane"),
            ("x-remote-uid", b"1"),
            ("x-other-group", b"g"),
            ("x-remote-extra-a", b"b"),
            ("x-other-extra-c", b"d"),
            ("accept", b"application/json"),
        ]);
        auth.clear_authentication_headers(&mut h);
        assert_eq!(h.keys().map(HeaderName::as_str).collect::<Vec<_>>(), ["accept"]);
    }

    #[test]
    fn path_unescape_matches_go() {
        assert_eq!(path_unescape("a%2Fb").as_deref(), Some("a/b"));
        assert_eq!(path_unescape("a%2fb+c").as_deref(), Some("a/b+c"));
        assert_eq!(path_unescape("100%"), None);
        assert_eq!(path_unescape("%g0"), None);
        assert_eq!(path_unescape("plain").as_deref(), Some("plain"));
    }
}
