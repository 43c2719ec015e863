//! TLS towards webhooks: trust is the clientConfig's `caBundle` alone, and handshake failures are
//! worded as Go's crypto/tls and crypto/x509 word them, because kube's messages (and the tests
//! and people that read them) carry those words.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::{AlertDescription, CertificateError, RootCertStore};

/// The roots of a PEM bundle, refused as client-go refuses it when nothing in it is a certificate.
pub(crate) fn roots(pem: &[u8]) -> Result<RootCertStore, String> {
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<_, _>>()
        .map_err(|_| "unable to load root certificates: unable to parse bytes as PEM block".to_owned())?;
    if certs.is_empty() {
        return Err("unable to load root certificates: unable to parse bytes as PEM block".into());
    }
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| format!("unable to load root certificates: {e}"))?;
    }
    Ok(roots)
}

/// A client configuration trusting `ca_bundle` (nothing when empty), presenting `credentials`'
/// certificate if they are one. HTTP/1.1 only, as kube forces for webhooks: HTTP/2 would
/// multiplex every call on one connection to one endpoint.
pub(crate) fn client_config(ca_bundle: &[u8], credentials: &crate::config::Credentials) -> Result<Arc<rustls::ClientConfig>, String> {
    let identity = match credentials {
        crate::config::Credentials::Certificate { cert, key } => Some((cert.as_slice(), key.as_slice())),
        _ => None,
    };
    backend_client_config(ca_bundle, identity, &[b"http/1.1"])
}

/// A client configuration for a server kube-apiserver calls over TLS (webhooks, aggregated API
/// servers): trusting `ca_bundle` alone (nothing when empty), presenting the PEM certificate
/// and key of `identity` if given, offering `alpn`.
pub fn backend_client_config(ca_bundle: &[u8], identity: Option<(&[u8], &[u8])>, alpn: &[&[u8]]) -> Result<Arc<rustls::ClientConfig>, String> {
    let roots = if ca_bundle.is_empty() { RootCertStore::empty() } else { roots(ca_bundle)? };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let mut config = match identity {
        Some((cert, key)) => {
            let chain: Vec<CertificateDer<'static>> =
                rustls_pemfile::certs(&mut &cert[..]).collect::<Result<_, _>>().map_err(|e| format!("client certificate: {e}"))?;
            let key = rustls_pemfile::private_key(&mut &key[..])
                .map_err(|e| format!("client key: {e}"))?
                .ok_or("client key: no private key found")?;
            builder.with_client_auth_cert(chain, key).map_err(|e| format!("client certificate: {e}"))?
        }
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// A failed handshake as Go reports it; `host` is the name the certificate was checked against.
pub(crate) fn handshake_error(e: &std::io::Error, host: &str, local: SocketAddr, peer: SocketAddr) -> String {
    let Some(tls) = e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) else {
        return crate::error::go_io_error(e, "read", local, peer);
    };
    match tls {
        rustls::Error::InvalidCertificate(cert) => format!("tls: failed to verify certificate: {}", x509_error(cert, host)),
        rustls::Error::AlertReceived(alert) => format!("remote error: tls: {}", alert_text(*alert)),
        other => format!("tls: {other}"),
    }
}

/// crypto/x509's texts for the verification failures a webhook meets.
fn x509_error(e: &CertificateError, host: &str) -> String {
    match e {
        // A bad signature means a trusted CA of the issuer's name did not sign it: Go says
        // unknown authority too, with a hint naming that CA, which rustls does not give.
        CertificateError::UnknownIssuer | CertificateError::BadSignature => "x509: certificate signed by unknown authority".into(),
        CertificateError::NotValidForNameContext { presented, .. } => hostname_error(host, presented),
        CertificateError::NotValidForName => format!("x509: certificate is not valid for {host}"),
        CertificateError::ExpiredContext { time, not_after } => {
            format!("x509: certificate has expired or is not yet valid: current time {} is after {}", rfc3339(*time), rfc3339(*not_after))
        }
        CertificateError::NotValidYetContext { time, not_before } => {
            format!("x509: certificate has expired or is not yet valid: current time {} is before {}", rfc3339(*time), rfc3339(*not_before))
        }
        CertificateError::Expired | CertificateError::NotValidYet => "x509: certificate has expired or is not yet valid".into(),
        other => format!("x509: {other:?}"),
    }
}

/// Go's `x509.HostnameError`: an IP is matched against IP SANs only, a name against DNS SANs.
fn hostname_error(host: &str, presented: &[String]) -> String {
    // webpki describes each SAN as `DnsName("a.b")` or `IpAddress(1.2.3.4)`.
    let sans = |kind: &str| -> Vec<String> {
        presented
            .iter()
            .filter_map(|p| p.strip_prefix(kind)?.strip_prefix('(')?.strip_suffix(')').map(|v| v.trim_matches('"').to_owned()))
            .collect()
    };
    let valid = if host.parse::<IpAddr>().is_ok() {
        let ips: Vec<String> = sans("IpAddress").into_iter().map(|ip| ip.parse::<IpAddr>().map_or(ip, |ip| ip.to_string())).collect();
        if ips.is_empty() {
            return format!("x509: cannot validate certificate for {host} because it doesn't contain any IP SANs");
        }
        ips.join(", ")
    } else {
        sans("DnsName").join(", ")
    };
    if valid.is_empty() {
        return format!("x509: certificate is not valid for any names, but wanted to match {host}");
    }
    format!("x509: certificate is valid for {valid}, not {host}")
}

/// Go's crypto/tls alert texts.
fn alert_text(alert: AlertDescription) -> String {
    let text = match alert {
        AlertDescription::CloseNotify => "close notify",
        AlertDescription::UnexpectedMessage => "unexpected message",
        AlertDescription::BadRecordMac => "bad record MAC",
        AlertDescription::RecordOverflow => "record overflow",
        AlertDescription::HandshakeFailure => "handshake failure",
        AlertDescription::BadCertificate => "bad certificate",
        AlertDescription::UnsupportedCertificate => "unsupported certificate",
        AlertDescription::CertificateRevoked => "revoked certificate",
        AlertDescription::CertificateExpired => "expired certificate",
        AlertDescription::CertificateUnknown => "unknown certificate",
        AlertDescription::IllegalParameter => "illegal parameter",
        AlertDescription::UnknownCA => "unknown certificate authority",
        AlertDescription::AccessDenied => "access denied",
        AlertDescription::DecodeError => "error decoding message",
        AlertDescription::DecryptError => "error decrypting message",
        AlertDescription::ProtocolVersion => "protocol version not supported",
        AlertDescription::InsufficientSecurity => "insufficient security level",
        AlertDescription::InternalError => "internal error",
        AlertDescription::InappropriateFallback => "inappropriate fallback",
        AlertDescription::UserCanceled => "user canceled",
        AlertDescription::NoRenegotiation => "no renegotiation",
        AlertDescription::MissingExtension => "missing extension",
        AlertDescription::UnsupportedExtension => "unsupported extension",
        AlertDescription::UnrecognisedName => "unrecognized name",
        AlertDescription::CertificateRequired => "certificate required",
        AlertDescription::NoApplicationProtocol => "no application protocol",
        other => return format!("alert({})", u8::from(other)),
    };
    text.to_owned()
}

/// A time as Go's `time.RFC3339` prints it in UTC.
fn rfc3339(t: UnixTime) -> String {
    let secs = t.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3_600, rem % 3_600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostname_errors_read_as_go_prints_them() {
        let dns = vec![r#"DnsName("a.example")"#.to_owned(), r#"DnsName("b.example")"#.to_owned(), "IpAddress(10.0.0.1)".to_owned()];
        assert_eq!(hostname_error("c.example", &dns), "x509: certificate is valid for a.example, b.example, not c.example");
        assert_eq!(hostname_error("10.0.0.2", &dns), "x509: certificate is valid for 10.0.0.1, not 10.0.0.2");
        assert_eq!(hostname_error("::1", &dns[..2]), "x509: cannot validate certificate for ::1 because it doesn't contain any IP SANs");
        assert_eq!(hostname_error("c.example", &dns[2..]), "x509: certificate is not valid for any names, but wanted to match c.example");
    }

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(UnixTime::since_unix_epoch(std::time::Duration::from_secs(0))), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_709_210_096))), "2024-02-29T12:34:56Z");
    }
}
