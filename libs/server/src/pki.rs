//! The embedded default's certificates, laid out like kubeadm's: a CA, a serving certificate
//! signed by it, an admin client certificate, and the admin kubeconfig.
//!
//! Several kapi processes may start at once on one data directory, so every file is created
//! atomically: written to a temporary name, then hard-linked to its final name only if that
//! name is still free. The loser of a race reads the winner's file, so all processes end up with
//! the same CA. Private keys are the source of truth: a certificate that does not match its key,
//! is not signed by the CA, misses a requested host or is about to expire is reissued for the
//! existing key. Everything here is blocking file IO: call it before the runtime starts or from
//! `spawn_blocking`.

use std::collections::hash_map::RandomState;
use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{ErrorKind, Write};
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use base64::Engine;
use kapi_auth::x509::CertificateInfo;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SerialNumber, SigningKey,
};
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::ClientCertVerifier;

use crate::tls;

/// Common name of the generated CA.
pub const CA_COMMON_NAME: &str = "kapi-ca";
/// Common name of the generated front-proxy CA (kubeadm's).
pub const FRONT_PROXY_CA_COMMON_NAME: &str = "front-proxy-ca";
/// Common name of the aggregator's client certificate under it, the name extension API servers
/// allow (`--requestheader-allowed-names`), as kubeadm names it.
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";
/// Common name of the serving certificate, as kubeadm names it.
pub const SERVING_COMMON_NAME: &str = "kube-apiserver";
/// User name of the admin client certificate.
pub const ADMIN_USER: &str = "kapi-admin";
/// Group of the admin client certificate: bound to cluster-admin by RBAC's defaults.
pub const ADMIN_GROUP: &str = kapi_auth::user::SYSTEM_MASTERS;
/// Names the serving certificate always covers besides the caller's hosts: loopback and the
/// in-cluster names of the `kubernetes` service (with kubeadm's default service IP).
pub const DEFAULT_SERVING_HOSTS: [&str; 8] = [
    "localhost",
    "127.0.0.1",
    "::1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    "10.96.0.1",
];

const CA_VALIDITY_DAYS: i64 = 3650;
const LEAF_VALIDITY_DAYS: i64 = 365;
/// Certificates closer than this to their end are reissued at start.
const RENEW_BEFORE_SECS: i64 = 30 * 24 * 3600;
/// Tolerates clocks of other hosts running slightly behind ours.
const BACKDATE_MINUTES: i64 = 5;

/// Why the PKI could not be loaded or created.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// A file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A stored certificate could not be read.
    #[error("{}: invalid certificate: {reason}", path.display())]
    InvalidCertificate {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A stored private key could not be read.
    #[error("{}: invalid private key: {reason}", path.display())]
    InvalidKey {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The CA certificate does not belong to the CA key; kapi will not guess which one to keep.
    #[error("{} does not match the private key {}", cert.display(), key.display())]
    KeyMismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// A host name cannot be put in a certificate.
    #[error("invalid host {0:?} for the serving certificate")]
    InvalidHost(String),
    /// Certificate generation failed.
    #[error("generating a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// The certificate rcgen produced could not be re-encoded (malformed DER).
    #[error("encoding a certificate: {0}")]
    Encode(&'static str),
    /// The kubeconfig could not be serialized.
    #[error("encoding the kubeconfig: {0}")]
    Kubeconfig(String),
}

/// The PEM material of the embedded default's PKI.
#[derive(Clone)]
pub struct Pki {
    /// The CA certificate: trust anchor for clients and the client-certificate CA.
    pub ca_cert_pem: String,
    /// The CA key, to sign client certificates.
    pub ca_key_pem: String,
    /// The serving certificate (signed by the CA).
    pub serving_cert_pem: String,
    /// The serving key.
    pub serving_key_pem: String,
    /// The admin client certificate (CN=kapi-admin, O=system:masters).
    pub admin_cert_pem: String,
    /// The admin client key.
    pub admin_key_pem: String,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki").field("ca_cert_pem", &self.ca_cert_pem).finish_non_exhaustive()
    }
}

/// Loads `<data_dir>/pki/{ca.crt,ca.key,apiserver.crt,apiserver.key,admin.crt,admin.key}`,
/// creating what is missing: a self-signed CA ("kapi-ca"), a serving certificate signed by it
/// for [`DEFAULT_SERVING_HOSTS`] plus `hosts` (DNS names or IP addresses), and an admin client
/// certificate (CN=kapi-admin, O=system:masters). Restarting reuses existing files.
pub fn ensure_pki(data_dir: &Path, hosts: &[String]) -> Result<Pki, PkiError> {
    let dir = data_dir.join("pki");
    fs::create_dir_all(&dir).map_err(|source| PkiError::Io { path: dir.clone(), source })?;
    let mut wanted: Vec<String> = Vec::new();
    for host in DEFAULT_SERVING_HOSTS.iter().copied().chain(hosts.iter().map(String::as_str)) {
        let host = host.trim();
        if host.is_empty() || wanted.iter().any(|h| h == host) {
            continue;
        }
        ServerName::try_from(host).map_err(|_| PkiError::InvalidHost(host.to_owned()))?;
        wanted.push(host.to_owned());
    }

    let (ca_key, ca_key_pem) = ensure_key(&dir, "ca")?;
    let ca_cert_pem = ensure_ca_cert(&dir, "ca", CA_COMMON_NAME, &ca_key)?;
    let ca = Ca::new(&ca_cert_pem, &dir.join("ca.crt"), ca_key)?;

    let (serving_key, serving_key_pem) = ensure_key(&dir, "apiserver")?;
    let serving_cert_pem = ensure_leaf(
        &dir,
        "apiserver",
        &serving_key,
        |der, _| ca.serves(der, &wanted),
        |previous| {
            let mut names = wanted.clone();
            if let Some(prev) = previous {
                let old = prev.dns_names.iter().cloned().chain(prev.ip_addresses.iter().map(IpAddr::to_string));
                for name in old {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
            sign_serving_cert(&ca, &serving_key, names)
        },
    )?;

    let (admin_key, admin_key_pem) = ensure_key(&dir, "admin")?;
    let admin_cert_pem = ensure_leaf(
        &dir,
        "admin",
        &admin_key,
        |der, info| {
            info.common_name == ADMIN_USER && info.organizations.iter().any(|o| o == ADMIN_GROUP) && ca.authenticates(der)
        },
        |_| sign_client_cert(&ca, &admin_key, ADMIN_USER, &[ADMIN_GROUP]),
    )?;

    Ok(Pki {
        ca_cert_pem,
        ca_key_pem,
        serving_cert_pem,
        serving_key_pem,
        admin_cert_pem,
        admin_key_pem,
    })
}

/// The embedded default's front-proxy identity, as kubeadm lays it out.
#[derive(Debug, Clone)]
pub struct FrontProxy {
    /// `front-proxy-ca.crt`: what extension API servers (and kapi's request-header
    /// authenticator) trust the aggregator's identity headers under.
    pub ca_cert: PathBuf,
    /// `front-proxy-client.crt` (CN=front-proxy-client): the aggregator's client certificate.
    pub client_cert: PathBuf,
    /// `front-proxy-client.key`.
    pub client_key: PathBuf,
}

/// Loads `<data_dir>/pki/front-proxy-{ca,client}.{crt,key}`, creating what is missing (a CA of
/// its own, as kubeadm's, so that a client certificate of the cluster CA can never assert
/// identity headers), with the same atomic creation as [`ensure_pki`].
pub fn ensure_front_proxy(data_dir: &Path) -> Result<FrontProxy, PkiError> {
    let dir = data_dir.join("pki");
    fs::create_dir_all(&dir).map_err(|source| PkiError::Io { path: dir.clone(), source })?;
    let (ca_key, _) = ensure_key(&dir, "front-proxy-ca")?;
    let ca_cert_pem = ensure_ca_cert(&dir, "front-proxy-ca", FRONT_PROXY_CA_COMMON_NAME, &ca_key)?;
    let ca = Ca::new(&ca_cert_pem, &dir.join("front-proxy-ca.crt"), ca_key)?;
    let (client_key, _) = ensure_key(&dir, "front-proxy-client")?;
    ensure_leaf(
        &dir,
        "front-proxy-client",
        &client_key,
        |der, info| info.common_name == FRONT_PROXY_CLIENT && ca.authenticates(der),
        |_| sign_client_cert(&ca, &client_key, FRONT_PROXY_CLIENT, &[]),
    )?;
    Ok(FrontProxy {
        ca_cert: dir.join("front-proxy-ca.crt"),
        client_cert: dir.join("front-proxy-client.crt"),
        client_key: dir.join("front-proxy-client.key"),
    })
}

/// Writes `<path>` (kubeconfig for the admin user: cluster "kapi" with server URL and CA data,
/// user "kapi-admin" with client cert/key data, context "kapi", current-context set),
/// atomically and readable by the owner only, since it holds the admin key.
pub fn write_admin_kubeconfig(path: &Path, server_url: &str, pki: &Pki) -> Result<(), PkiError> {
    let yaml = admin_kubeconfig(server_url, pki)?;
    replace_file(path, yaml.as_bytes(), 0o600)
}

/// The admin kubeconfig as YAML, for callers that store it elsewhere.
pub fn admin_kubeconfig(server_url: &str, pki: &Pki) -> Result<String, PkiError> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "kapi",
            "cluster": { "server": server_url, "certificate-authority-data": b64(&pki.ca_cert_pem) },
        }],
        "users": [{
            "name": ADMIN_USER,
            "user": {
                "client-certificate-data": b64(&pki.admin_cert_pem),
                "client-key-data": b64(&pki.admin_key_pem),
            },
        }],
        "contexts": [{ "name": "kapi", "context": { "cluster": "kapi", "user": ADMIN_USER } }],
        "current-context": "kapi",
        "preferences": {},
    });
    // Plain scalars, as kubectl writes them: folded blocks would parse the same but read oddly.
    let mut options = serde_saphyr::SerializerOptions::default();
    options.prefer_block_scalars = false;
    serde_saphyr::to_string_with_options(&config, options).map_err(|e| PkiError::Kubeconfig(e.to_string()))
}

/// Signs a client certificate with the CA (tests use it to make users: CN=user, O=groups).
/// Returns `(certificate PEM, private key PEM)`.
pub fn issue_client_cert(pki: &Pki, user: &str, groups: &[&str]) -> Result<(String, String), PkiError> {
    let ca_key = KeyPair::from_pem(&pki.ca_key_pem)
        .map_err(|e| PkiError::InvalidKey { path: PathBuf::from("ca.key"), reason: e.to_string() })?;
    let ca = Ca::new(&pki.ca_cert_pem, Path::new("ca.crt"), ca_key)?;
    let key = KeyPair::generate()?;
    let cert = sign_client_cert(&ca, &key, user, groups)?;
    Ok((cert, key.serialize_pem()))
}

/// The CA, loaded once: the signing issuer plus verifiers that check stored certificates
/// exactly as clients and the server will.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    server_verifier: Arc<dyn ServerCertVerifier>,
    client_verifier: Arc<dyn ClientCertVerifier>,
}

impl Ca {
    fn new(cert_pem: &str, path: &Path, key: KeyPair) -> Result<Self, PkiError> {
        let invalid = |reason: String| PkiError::InvalidCertificate { path: path.to_owned(), reason };
        let roots = Arc::new(tls::root_store(cert_pem).map_err(|e| invalid(e.to_string()))?);
        let provider = tls::crypto_provider();
        let server_verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| invalid(e.to_string()))?;
        let client_verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| invalid(e.to_string()))?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key).map_err(|e| invalid(e.to_string()))?;
        Ok(Ca { issuer, server_verifier, client_verifier })
    }

    /// Whether a serving certificate chains to this CA and is valid for every host.
    fn serves(&self, der: &CertificateDer<'_>, hosts: &[String]) -> bool {
        hosts.iter().all(|host| {
            ServerName::try_from(host.as_str()).is_ok_and(|name| {
                self.server_verifier.verify_server_cert(der, &[], &name, &[], UnixTime::now()).is_ok()
            })
        })
    }

    /// Whether a client certificate chains to this CA and is usable for client auth.
    fn authenticates(&self, der: &CertificateDer<'_>) -> bool {
        self.client_verifier.verify_client_cert(der, &[], UnixTime::now()).is_ok()
    }
}

fn validity(params: &mut CertificateParams, days: i64) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(BACKDATE_MINUTES);
    params.not_after = now + time::Duration::days(days);
    params.serial_number = Some(random_serial());
}

/// A 16-byte serial that differs between reissues for the same key (rcgen's default derives it
/// from the key, which would repeat). Uniqueness is all that is needed: std's randomly keyed
/// hasher, the clock and a counter provide it without another dependency.
fn random_serial() -> SerialNumber {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut bytes = Vec::with_capacity(16);
    for round in 0u8..2 {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u8(round);
        hasher.write_u128(nanos);
        hasher.write_u64(count);
        hasher.write_u32(std::process::id());
        bytes.extend_from_slice(&hasher.finish().to_be_bytes());
    }
    // Positive and of full length, as RFC 5280 wants.
    bytes[0] = (bytes[0] & 0x7f) | 0x40;
    SerialNumber::from_slice(&bytes)
}

fn ca_params(common_name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    validity(&mut params, CA_VALIDITY_DAYS);
    params
}

fn sign_serving_cert(ca: &Ca, key: &KeyPair, hosts: Vec<String>) -> Result<String, PkiError> {
    let mut params = CertificateParams::new(hosts)?;
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, SERVING_COMMON_NAME);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    validity(&mut params, LEAF_VALIDITY_DAYS);
    Ok(params.signed_by(key, &ca.issuer)?.pem())
}

/// rcgen keeps one value per attribute type, but kube reads every `O` of the subject as a group,
/// so the subject rcgen wrote is replaced by one with an `O` per group and the certificate is
/// signed again with the CA key.
fn sign_client_cert(ca: &Ca, key: &KeyPair, user: &str, groups: &[&str]) -> Result<String, PkiError> {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, user);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.use_authority_key_identifier_extension = true;
    validity(&mut params, LEAF_VALIDITY_DAYS);
    let draft = params.signed_by(key, &ca.issuer)?;
    let der = der::replace_subject(draft.der(), &der::name(user, groups), |tbs| ca.issuer.key().sign(tbs))?;
    Ok(pem_certificate(&der))
}

fn pem_certificate(der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// Loads `<name>.key`, or creates it if absent (losing a creation race means using the winner's).
fn ensure_key(dir: &Path, name: &str) -> Result<(KeyPair, String), PkiError> {
    let path = dir.join(format!("{name}.key"));
    let pem = match read_if_exists(&path)? {
        Some(pem) => pem,
        None => {
            let pem = KeyPair::generate()?.serialize_pem();
            if create_if_absent(&path, pem.as_bytes(), 0o600)? {
                pem
            } else {
                read_if_exists(&path)?.unwrap_or_default()
            }
        }
    };
    let key = KeyPair::from_pem(&pem).map_err(|e| PkiError::InvalidKey { path: path.clone(), reason: e.to_string() })?;
    Ok((key, pem))
}

fn ensure_ca_cert(dir: &Path, name: &str, common_name: &str, key: &KeyPair) -> Result<String, PkiError> {
    let path = dir.join(format!("{name}.crt"));
    let pem = match read_if_exists(&path)? {
        Some(pem) => pem,
        None => {
            let pem = ca_params(common_name).self_signed(key)?.pem();
            if create_if_absent(&path, pem.as_bytes(), 0o644)? {
                return Ok(pem);
            }
            read_if_exists(&path)?.unwrap_or_default()
        }
    };
    let (_, info) = parse_cert(&path, &pem)?;
    if info.public_key != key.public_key_raw() {
        return Err(PkiError::KeyMismatch { cert: path, key: dir.join(format!("{name}.key")) });
    }
    Ok(pem)
}

/// Loads `<name>.crt` if it belongs to `key`, passes `usable` and is not about to expire;
/// otherwise issues a new one (given the old one's facts when it belonged to `key`).
fn ensure_leaf(
    dir: &Path,
    name: &str,
    key: &KeyPair,
    usable: impl Fn(&CertificateDer<'_>, &CertificateInfo) -> bool,
    issue: impl Fn(Option<&CertificateInfo>) -> Result<String, PkiError>,
) -> Result<String, PkiError> {
    let path = dir.join(format!("{name}.crt"));
    let good = |pem: &str| -> Result<(bool, CertificateInfo), PkiError> {
        let (der, info) = parse_cert(&path, pem)?;
        let ours = info.public_key == key.public_key_raw();
        let fresh = info.not_after_unix > time::OffsetDateTime::now_utc().unix_timestamp() + RENEW_BEFORE_SECS;
        Ok((ours && fresh && usable(&der, &info), info))
    };
    if let Some(existing) = read_if_exists(&path)? {
        let (ok, info) = good(&existing)?;
        if ok {
            return Ok(existing);
        }
        let ours = info.public_key == key.public_key_raw();
        let pem = issue(ours.then_some(&info))?;
        replace_file(&path, pem.as_bytes(), 0o644)?;
        return Ok(pem);
    }
    let pem = issue(None)?;
    if create_if_absent(&path, pem.as_bytes(), 0o644)? {
        return Ok(pem);
    }
    // Another process created it meanwhile: prefer its certificate so that all agree on disk.
    if let Some(theirs) = read_if_exists(&path)? {
        if good(&theirs)?.0 {
            return Ok(theirs);
        }
    }
    replace_file(&path, pem.as_bytes(), 0o644)?;
    Ok(pem)
}

fn parse_cert(path: &Path, pem: &str) -> Result<(CertificateDer<'static>, CertificateInfo), PkiError> {
    let invalid = |reason: String| PkiError::InvalidCertificate { path: path.to_owned(), reason };
    let der = tls::parse_certificates(pem, "a certificate")
        .map_err(|e| invalid(e.to_string()))?
        .into_iter()
        .next()
        .ok_or_else(|| invalid("no certificate found".into()))?;
    let info = CertificateInfo::from_der(&der).map_err(|e| invalid(e.to_string()))?;
    Ok((der, info))
}

fn read_if_exists(path: &Path) -> Result<Option<String>, PkiError> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(source) => Err(PkiError::Io { path: path.to_owned(), source }),
    }
}

/// Writes `bytes` to a fresh temporary file next to `path`, flushed to disk, and returns its name.
fn write_temp(path: &Path, bytes: &[u8], mode: u32) -> Result<PathBuf, PkiError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    let base = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{base}.tmp.{}.{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed)));
    let io = |source| PkiError::Io { path: tmp.clone(), source };
    let mut file = OpenOptions::new().write(true).create_new(true).mode(mode).open(&tmp).map_err(io)?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    if let Err(source) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io(source));
    }
    Ok(tmp)
}

/// Creates `path` with `bytes` unless it exists; returns whether this call created it. Readers
/// never see a partial file: the name appears only once the content is complete.
/// Writes a private file (mode 0600) unless it exists; false when another process (a replica
/// sharing the data dir) created it first, whose content then stands.
pub fn create_private_if_absent(path: &Path, bytes: &[u8]) -> Result<bool, PkiError> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|source| PkiError::Io { path: dir.to_path_buf(), source })?;
    }
    create_if_absent(path, bytes, 0o600)
}

fn create_if_absent(path: &Path, bytes: &[u8], mode: u32) -> Result<bool, PkiError> {
    let tmp = write_temp(path, bytes, mode)?;
    let linked = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            sync_parent(path);
            Ok(true)
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
        Err(source) => Err(PkiError::Io { path: path.to_owned(), source }),
    }
}

/// Atomically replaces (or creates) `path` with `bytes`.
fn replace_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), PkiError> {
    let tmp = write_temp(path, bytes, mode)?;
    if let Err(source) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(PkiError::Io { path: path.to_owned(), source });
    }
    sync_parent(path);
    Ok(())
}

/// Makes a new directory entry durable; best effort, since the files are recreated if lost.
fn sync_parent(path: &Path) {
    if let Some(dir) = path.parent() {
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
}

/// Just enough DER to rewrite a certificate's subject.
mod der {
    use super::PkiError;

    const SEQUENCE: u8 = 0x30;
    const SET: u8 = 0x31;
    const UTF8_STRING: u8 = 0x0c;
    const BIT_STRING: u8 = 0x03;
    const OID_COMMON_NAME: [u8; 5] = [0x06, 0x03, 0x55, 0x04, 0x03];
    const OID_ORGANIZATION: [u8; 5] = [0x06, 0x03, 0x55, 0x04, 0x0a];

    pub(super) fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        let len = content.len();
        if len < 0x80 {
            out.push(len as u8);
        } else {
            let bytes = len.to_be_bytes();
            let skip = bytes.iter().take_while(|b| **b == 0).count();
            out.push(0x80 | (bytes.len() - skip) as u8);
            out.extend_from_slice(&bytes[skip..]);
        }
        out.extend_from_slice(content);
        out
    }

    /// A TLV split off a buffer: (whole element, content, rest of the buffer).
    pub(super) type Split<'a> = (&'a [u8], &'a [u8], &'a [u8]);

    /// Splits the first TLV off `buf`.
    pub(super) fn split(buf: &[u8]) -> Result<Split<'_>, PkiError> {
        let bad = PkiError::Encode("truncated DER");
        let first = *buf.get(1).ok_or(PkiError::Encode("truncated DER"))?;
        let (header, len) = if first < 0x80 {
            (2, usize::from(first))
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 {
                return Err(PkiError::Encode("unsupported DER length"));
            }
            let bytes = buf.get(2..2 + n).ok_or(PkiError::Encode("truncated DER"))?;
            (2 + n, bytes.iter().fold(0usize, |acc, b| (acc << 8) | usize::from(*b)))
        };
        let end = header.checked_add(len).filter(|end| *end <= buf.len()).ok_or(bad)?;
        Ok((&buf[..end], &buf[header..end], &buf[end..]))
    }

    /// A subject Name with one `O` per group, then the `CN`, in Go's attribute order.
    pub(super) fn name(common_name: &str, organizations: &[&str]) -> Vec<u8> {
        let rdn = |oid: &[u8], value: &str| {
            let mut atv = oid.to_vec();
            atv.extend(tlv(UTF8_STRING, value.as_bytes()));
            tlv(SET, &tlv(SEQUENCE, &atv))
        };
        let mut content = Vec::new();
        for org in organizations {
            content.extend(rdn(&OID_ORGANIZATION, org));
        }
        content.extend(rdn(&OID_COMMON_NAME, common_name));
        tlv(SEQUENCE, &content)
    }

    /// Rebuilds `cert` with `subject` in place of its subject, re-signing the new TBS with `sign`
    /// (which must use the algorithm the certificate already names).
    pub(super) fn replace_subject(
        cert: &[u8],
        subject: &[u8],
        sign: impl FnOnce(&[u8]) -> Result<Vec<u8>, rcgen::Error>,
    ) -> Result<Vec<u8>, PkiError> {
        let (_, cert_content, _) = split(cert)?;
        let (_, tbs_content, after_tbs) = split(cert_content)?;
        let (algorithm, _, _) = split(after_tbs)?;
        // TBSCertificate: [0] version, serial, signature, issuer, validity, subject, ...
        let mut rest = tbs_content;
        let mut new_tbs = Vec::with_capacity(tbs_content.len() + subject.len());
        for _ in 0..5 {
            let (element, _, next) = split(rest)?;
            new_tbs.extend_from_slice(element);
            rest = next;
        }
        let (_, _, after_subject) = split(rest)?;
        new_tbs.extend_from_slice(subject);
        new_tbs.extend_from_slice(after_subject);
        let tbs = tlv(SEQUENCE, &new_tbs);
        let signature = sign(&tbs)?;
        let mut bits = vec![0u8];
        bits.extend(signature);
        let mut content = tbs;
        content.extend_from_slice(algorithm);
        content.extend(tlv(BIT_STRING, &bits));
        Ok(tlv(SEQUENCE, &content))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A scratch directory removed on drop (the server crate has no tempfile dependency).
    pub(crate) struct TempDir(PathBuf);

    impl TempDir {
        pub(crate) fn new(tag: &str) -> Self {
            static COUNTER: AtomicU64 = AtomicU64::new(0);
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
            let path = std::env::temp_dir().join(format!(
                "kapi-{tag}-{}-{}-{nanos}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }

        pub(crate) fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn info(pem: &str) -> CertificateInfo {
        parse_cert(Path::new("test"), pem).unwrap().1
    }

    #[test]
    fn creates_a_kubeadm_like_pki() {
        let dir = TempDir::new("pki-create");
        let pki = ensure_pki(dir.path(), &["192.168.7.7".to_owned(), "api.example.com".to_owned()]).unwrap();
        let ca = info(&pki.ca_cert_pem);
        assert_eq!(ca.common_name, CA_COMMON_NAME);

        let serving = info(&pki.serving_cert_pem);
        assert_eq!(serving.issuer_common_name, CA_COMMON_NAME);
        for dns in ["localhost", "kubernetes.default.svc.cluster.local", "api.example.com"] {
            assert!(serving.dns_names.iter().any(|d| d == dns), "{dns} missing: {:?}", serving.dns_names);
        }
        for ip in ["127.0.0.1", "::1", "10.96.0.1", "192.168.7.7"] {
            assert!(serving.ip_addresses.contains(&ip.parse().unwrap()), "{ip} missing");
        }

        let admin = info(&pki.admin_cert_pem);
        assert_eq!((admin.common_name.as_str(), admin.organizations.clone()), (ADMIN_USER, vec![ADMIN_GROUP.to_owned()]));

        for name in ["ca", "apiserver", "admin"] {
            let key = dir.path().join("pki").join(format!("{name}.key"));
            assert_eq!(fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600, "{name}.key");
            assert!(dir.path().join("pki").join(format!("{name}.crt")).exists());
        }
        // No temporary files left behind.
        let leftovers: Vec<_> = fs::read_dir(dir.path().join("pki"))
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn restart_reuses_files_and_reissues_for_new_hosts() {
        let dir = TempDir::new("pki-reuse");
        let first = ensure_pki(dir.path(), &[]).unwrap();
        let second = ensure_pki(dir.path(), &[]).unwrap();
        assert_eq!(first.ca_cert_pem, second.ca_cert_pem);
        assert_eq!(first.serving_cert_pem, second.serving_cert_pem);
        assert_eq!(first.admin_cert_pem, second.admin_cert_pem);

        let third = ensure_pki(dir.path(), &["10.1.2.3".to_owned()]).unwrap();
        assert_eq!(first.ca_cert_pem, third.ca_cert_pem);
        assert_eq!(first.serving_key_pem, third.serving_key_pem);
        assert_ne!(first.serving_cert_pem, third.serving_cert_pem);
        assert!(info(&third.serving_cert_pem).ip_addresses.contains(&"10.1.2.3".parse().unwrap()));
        assert_ne!(info(&first.serving_cert_pem), info(&third.serving_cert_pem));
        let on_disk = fs::read_to_string(dir.path().join("pki/apiserver.crt")).unwrap();
        assert_eq!(on_disk, third.serving_cert_pem);
    }

    #[test]
    fn serving_cert_from_another_ca_is_reissued_and_ca_mismatch_is_an_error() {
        let dir = TempDir::new("pki-foreign");
        let other = TempDir::new("pki-foreign-2");
        let mine = ensure_pki(dir.path(), &[]).unwrap();
        let theirs = ensure_pki(other.path(), &[]).unwrap();
        fs::write(dir.path().join("pki/apiserver.crt"), &theirs.serving_cert_pem).unwrap();
        let again = ensure_pki(dir.path(), &[]).unwrap();
        assert_ne!(again.serving_cert_pem, theirs.serving_cert_pem);
        assert_eq!(again.ca_cert_pem, mine.ca_cert_pem);

        fs::write(dir.path().join("pki/ca.crt"), &theirs.ca_cert_pem).unwrap();
        assert!(matches!(ensure_pki(dir.path(), &[]), Err(PkiError::KeyMismatch { .. })));
    }

    #[test]
    fn missing_ca_certificate_is_recreated_for_the_existing_key() {
        let dir = TempDir::new("pki-crash");
        let first = ensure_pki(dir.path(), &[]).unwrap();
        fs::remove_file(dir.path().join("pki/ca.crt")).unwrap();
        let second = ensure_pki(dir.path(), &[]).unwrap();
        assert_eq!(first.ca_key_pem, second.ca_key_pem);
        assert_eq!(info(&first.ca_cert_pem).public_key, info(&second.ca_cert_pem).public_key);
    }

    #[test]
    fn racing_processes_agree_on_one_ca() {
        let dir = TempDir::new("pki-race");
        let handles: Vec<_> = (0..6)
            .map(|_| {
                let path = dir.path().to_owned();
                std::thread::spawn(move || ensure_pki(&path, &[]).unwrap())
            })
            .collect();
        let results: Vec<Pki> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let on_disk = fs::read_to_string(dir.path().join("pki/ca.crt")).unwrap();
        for pki in &results {
            assert_eq!(pki.ca_cert_pem, on_disk);
            assert_eq!(pki.admin_key_pem, results[0].admin_key_pem);
            // Every process's serving certificate works with the shared key and CA.
            assert!(tls::server_config(&pki.serving_cert_pem, &pki.serving_key_pem, Some(&on_disk)).is_ok());
        }
    }

    #[test]
    fn client_certs_carry_every_group() {
        let dir = TempDir::new("pki-client");
        let pki = ensure_pki(dir.path(), &[]).unwrap();
        let (cert, key) = issue_client_cert(&pki, "jane", &["dev", "ops", "system:masters"]).unwrap();
        let parsed = info(&cert);
        assert_eq!(parsed.common_name, "jane");
        assert_eq!(parsed.organizations, vec!["dev", "ops", "system:masters"]);
        assert_eq!(parsed.issuer_common_name, CA_COMMON_NAME);
        assert_eq!(parsed.public_key, KeyPair::from_pem(&key).unwrap().public_key_raw());
        // The re-signed certificate verifies against the CA as a client certificate.
        let ca = Ca::new(&pki.ca_cert_pem, Path::new("ca.crt"), KeyPair::from_pem(&pki.ca_key_pem).unwrap()).unwrap();
        let der = tls::parse_certificates(&cert, "client").unwrap().remove(0);
        assert!(ca.authenticates(&der));
        assert!(!ca.serves(&der, &["localhost".to_owned()]));

        let (nogroups, _) = issue_client_cert(&pki, "bob", &[]).unwrap();
        assert!(info(&nogroups).organizations.is_empty());
    }

    #[test]
    fn der_lengths_round_trip() {
        for len in [0usize, 1, 127, 128, 255, 256, 70_000] {
            let content = vec![7u8; len];
            let encoded = der::tlv(0x04, &content);
            let (whole, inner, rest) = der::split(&encoded).unwrap();
            assert_eq!((whole.len(), inner, rest.len()), (encoded.len(), &content[..], 0));
        }
        assert!(der::split(&[0x30, 0x05, 0x01]).is_err());
        assert!(der::split(&[0x30]).is_err());
    }

    #[test]
    fn kubeconfig_round_trips() {
        let dir = TempDir::new("pki-kubeconfig");
        let pki = ensure_pki(dir.path(), &[]).unwrap();
        let path = dir.path().join("kubeconfig");
        write_admin_kubeconfig(&path, "https://127.0.0.1:6443", &pki).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let text = fs::read_to_string(&path).unwrap();
        let parsed: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        let b64 = |v: &serde_json::Value| {
            String::from_utf8(base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap()).unwrap()).unwrap()
        };
        assert_eq!(parsed["kind"], "Config");
        assert_eq!(parsed["current-context"], "kapi");
        assert_eq!(parsed["clusters"][0]["name"], "kapi");
        assert_eq!(parsed["clusters"][0]["cluster"]["server"], "https://127.0.0.1:6443");
        assert_eq!(b64(&parsed["clusters"][0]["cluster"]["certificate-authority-data"]), pki.ca_cert_pem);
        assert_eq!(parsed["users"][0]["name"], ADMIN_USER);
        assert_eq!(b64(&parsed["users"][0]["user"]["client-certificate-data"]), pki.admin_cert_pem);
        assert_eq!(b64(&parsed["users"][0]["user"]["client-key-data"]), pki.admin_key_pem);
        assert_eq!(parsed["contexts"][0]["context"]["cluster"], "kapi");
        assert_eq!(parsed["contexts"][0]["context"]["user"], ADMIN_USER);

        // Rewriting replaces the file in place.
        write_admin_kubeconfig(&path, "https://[::1]:6443", &pki).unwrap();
        let parsed: serde_json::Value = serde_saphyr::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(parsed["clusters"][0]["cluster"]["server"], "https://[::1]:6443");
    }

    #[test]
    fn invalid_hosts_are_refused() {
        let dir = TempDir::new("pki-badhost");
        assert!(matches!(ensure_pki(dir.path(), &["not a host".to_owned()]), Err(PkiError::InvalidHost(_))));
    }
}
