//! Client-certificate authentication (kube's `request/x509` with `CommonNameUserConversion`),
//! plus the certificate facts the PKI bootstrap needs to decide whether a stored certificate
//! can be reused.

use std::net::IpAddr;

use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::authn::{AuthOutcome, AuthRequest, Authenticator, ChainVerdict};
use crate::user::UserInfo;

/// Why a certificate could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    /// The bytes are not a DER X.509 certificate.
    #[error("unable to parse certificate: {0}")]
    Parse(String),
    /// A subject attribute uses a string type that cannot be decoded.
    #[error("unable to decode certificate subject: {0}")]
    Subject(String),
}

/// The parts of a certificate that authentication and PKI housekeeping look at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertificateInfo {
    /// The subject common name (the last one, as Go's `pkix.Name` keeps); empty when absent.
    pub common_name: String,
    /// Every subject organization, in order: kube's groups.
    pub organizations: Vec<String>,
    /// Issuer common name, for diagnostics.
    pub issuer_common_name: String,
    /// End of validity, seconds since the Unix epoch.
    pub not_after_unix: i64,
    /// DNS subject alternative names.
    pub dns_names: Vec<String>,
    /// IP subject alternative names.
    pub ip_addresses: Vec<IpAddr>,
    /// The raw subject public key (the bit string inside SubjectPublicKeyInfo), to match a
    /// certificate with its private key.
    pub public_key: Vec<u8>,
}

impl CertificateInfo {
    /// Reads a DER certificate.
    pub fn from_der(der: &[u8]) -> Result<Self, CertificateError> {
        let (_, cert) = X509Certificate::from_der(der).map_err(|e| CertificateError::Parse(e.to_string()))?;
        let subject = cert.subject();
        let mut common_name = String::new();
        for cn in subject.iter_common_name() {
            common_name = cn.as_str().map_err(|e| CertificateError::Subject(e.to_string()))?.to_owned();
        }
        let organizations = subject
            .iter_organization()
            .map(|o| o.as_str().map(str::to_owned).map_err(|e| CertificateError::Subject(e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        let issuer_common_name =
            cert.issuer().iter_common_name().filter_map(|cn| cn.as_str().ok()).last().unwrap_or_default().to_owned();
        let mut dns_names = Vec::new();
        let mut ip_addresses = Vec::new();
        if let Ok(Some(san)) = cert.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::DNSName(dns) => dns_names.push((*dns).to_owned()),
                    GeneralName::IPAddress(bytes) => {
                        if let Some(ip) = ip_from_bytes(bytes) {
                            ip_addresses.push(ip);
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(CertificateInfo {
            common_name,
            organizations,
            issuer_common_name,
            not_after_unix: cert.validity().not_after.timestamp(),
            dns_names,
            ip_addresses,
            public_key: cert.public_key().subject_public_key.data.to_vec(),
        })
    }
}

fn ip_from_bytes(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => <[u8; 4]>::try_from(bytes).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(bytes).ok().map(IpAddr::from),
        _ => None,
    }
}

/// Authenticates a client by its certificate: CN is the user name, O the groups. The server
/// verified the chain against the client CA once per connection ([`ChainVerdict`]); a chain
/// from another CA is an error (401 unless another authenticator succeeds), and a leaf without
/// a CN is not a credential (kube ignores it rather than rejecting it).
#[derive(Clone, Copy, Debug, Default)]
pub struct X509Authenticator;

impl Authenticator for X509Authenticator {
    fn authenticate(&self, req: &AuthRequest<'_>) -> AuthOutcome {
        let Some(leaf) = req.peer_certificates.and_then(<[Vec<u8>]>::first) else {
            return AuthOutcome::NotApplicable;
        };
        match req.client_ca {
            ChainVerdict::Verified => {}
            ChainVerdict::Absent => return AuthOutcome::NotApplicable,
            ChainVerdict::Failed(reason) => return AuthOutcome::Rejected(format!("verifying certificate: {reason}")),
        }
        match CertificateInfo::from_der(leaf) {
            Err(e) => AuthOutcome::Rejected(e.to_string()),
            Ok(info) if info.common_name.is_empty() => AuthOutcome::NotApplicable,
            Ok(info) => AuthOutcome::Authenticated(UserInfo::new(info.common_name, info.organizations)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair};

    fn cert(cn: Option<&str>, org: Option<&str>) -> Vec<u8> {
        let mut params = CertificateParams::new(vec!["localhost".to_owned(), "10.0.0.1".to_owned()]).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        if let Some(org) = org {
            params.distinguished_name.push(DnType::OrganizationName, org);
        }
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    fn authenticate(chain: Option<&[Vec<u8>]>) -> AuthOutcome {
        let headers = http::HeaderMap::new();
        X509Authenticator.authenticate(&AuthRequest {
            peer_certificates: chain,
            client_ca: &ChainVerdict::Verified,
            front_proxy_ca: &ChainVerdict::Absent,
            headers: &headers,
        })
    }

    #[test]
    fn a_chain_from_another_ca_is_rejected() {
        let chain = vec![cert(Some("jane"), None)];
        let headers = http::HeaderMap::new();
        let failed = ChainVerdict::Failed("unknown issuer".into());
        let req = AuthRequest { peer_certificates: Some(&chain), client_ca: &failed, front_proxy_ca: &ChainVerdict::Absent, headers: &headers };
        assert!(matches!(X509Authenticator.authenticate(&req), AuthOutcome::Rejected(m) if m.contains("unknown issuer")));
    }

    #[test]
    fn cn_and_o_become_user_and_groups() {
        let chain = vec![cert(Some("jane"), Some("developers"))];
        assert_eq!(authenticate(Some(&chain)), AuthOutcome::Authenticated(UserInfo::new("jane", ["developers"])));
    }

    #[test]
    fn no_certificate_or_no_cn_is_not_applicable() {
        assert_eq!(authenticate(None), AuthOutcome::NotApplicable);
        assert_eq!(authenticate(Some(&[])), AuthOutcome::NotApplicable);
        let chain = vec![cert(None, Some("developers"))];
        assert_eq!(authenticate(Some(&chain)), AuthOutcome::NotApplicable);
    }

    #[test]
    fn garbage_is_rejected() {
        let chain = vec![b"not a certificate".to_vec()];
        assert!(matches!(authenticate(Some(&chain)), AuthOutcome::Rejected(m) if m.contains("unable to parse")));
    }

    #[test]
    fn certificate_info_reads_sans_and_key() {
        let der = cert(Some("svc"), None);
        let info = CertificateInfo::from_der(&der).unwrap();
        assert_eq!(info.dns_names, vec!["localhost".to_owned()]);
        assert_eq!(info.ip_addresses, vec!["10.0.0.1".parse::<IpAddr>().unwrap()]);
        assert!(info.organizations.is_empty());
        assert!(!info.public_key.is_empty());
        assert!(info.not_after_unix > 4_000_000_000);
    }
}
