//! This replica's identity Lease (kube's `start-kube-apiserver-identity-lease-controller`):
//! `kube-system/apiserver-<hash>`, labelled `apiserver.kubernetes.io/identity: kube-apiserver`,
//! renewed periodically. It doubles as kube's endpoint-reconciler lease: once the replica is
//! ready it carries its address in `kubernetes.io/peer-advertise-address` (kube's annotation for
//! "this apiserver's network location"), and the `kubernetes` endpoints list exactly the
//! addresses of unexpired leases, so a replica that dies without cleaning up drops out when
//! its lease expires.

use std::net::SocketAddr;
use std::time::Duration;

use kapi_apimachinery::labels::LabelSelector;
use kapi_apimachinery::time::{format_rfc3339_micro, parse_rfc3339};
use kapi_apimachinery::ApiError;
use kapi_registry::rest::{DeleteOptions, ListParams, RestStore};
use serde_json::{json, Value};
use time::OffsetDateTime;

use super::Resource;

/// The label marking identity leases, and the value kube-apiserver puts there.
pub const IDENTITY_LABEL: (&str, &str) = ("apiserver.kubernetes.io/identity", "kube-apiserver");
/// kube's convenience label naming the host of an apiserver.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// kube's annotation for an apiserver's `ip:port` (`AnnotationPeerAdvertiseAddress`).
pub const ADDRESS_ANNOTATION: &str = "kubernetes.io/peer-advertise-address";
/// Where identity leases live.
pub const NAMESPACE: &str = "kube-system";

/// Who this replica is.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The Lease's name: `apiserver-<hash>`, stable for a host and address.
    pub lease_name: String,
    /// `spec.holderIdentity`: the name plus a per-process UUID (kube's form).
    pub holder: String,
    /// The host name, for the hostname label.
    pub hostname: String,
}

impl Identity {
    /// kube hashes the host name and "kube-apiserver" into the lease name; kapi adds the
    /// advertised address, since several replicas may share one host (on different ports).
    pub fn new(hostname: &str, address: SocketAddr) -> Self {
        let mut data = Vec::new();
        for part in [hostname, "kube-apiserver", &address.to_string()] {
            // cryptobyte's uint16 length prefix, as kube builds the hash input.
            data.extend_from_slice(&(part.len() as u16).to_be_bytes());
            data.extend_from_slice(part.as_bytes());
        }
        let digest = ring::digest::digest(&ring::digest::SHA256, &data);
        let lease_name = format!("apiserver-{}", base32_lower(&digest.as_ref()[..16]));
        let holder = format!("{lease_name}_{}", uuid::Uuid::new_v4());
        Self { lease_name, holder, hostname: hostname.to_owned() }
    }
}

/// The machine's host name (kube's `os.Hostname`).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// RFC 4648 base32 without padding, lowercased (kube's lease-name encoding).
fn base32_lower(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::new();
    let (mut buffer, mut bits) = (0u32, 0u32);
    for &b in bytes {
        buffer = (buffer << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}

/// What this replica writes into its lease.
#[derive(Debug, Clone)]
pub struct LeaseSpec<'a> {
    /// Who.
    pub identity: &'a Identity,
    /// `spec.leaseDurationSeconds`.
    pub duration: Duration,
    /// The address to advertise, once ready; `None` keeps the replica out of the endpoints.
    pub advertise: Option<SocketAddr>,
}

impl LeaseSpec<'_> {
    fn apply(&self, lease: &mut Value, now: OffsetDateTime) {
        let meta = &mut lease["metadata"];
        if !meta.get("labels").is_some_and(Value::is_object) {
            meta["labels"] = json!({});
        }
        meta["labels"][IDENTITY_LABEL.0] = json!(IDENTITY_LABEL.1);
        meta["labels"][HOSTNAME_LABEL] = json!(self.identity.hostname);
        match (self.advertise, meta.get_mut("annotations").and_then(Value::as_object_mut)) {
            (Some(addr), Some(annotations)) => {
                annotations.insert(ADDRESS_ANNOTATION.into(), json!(addr.to_string()));
            }
            (Some(addr), None) => meta["annotations"] = json!({ADDRESS_ANNOTATION: addr.to_string()}),
            (None, Some(annotations)) => {
                annotations.remove(ADDRESS_ANNOTATION);
                if annotations.is_empty() {
                    if let Some(m) = meta.as_object_mut() {
                        m.remove("annotations");
                    }
                }
            }
            (None, None) => {}
        }
        lease["spec"] = json!({
            "holderIdentity": self.identity.holder,
            "leaseDurationSeconds": self.duration.as_secs().max(1),
            "renewTime": format_rfc3339_micro(now),
        });
    }

    fn new_object(&self, now: OffsetDateTime) -> Value {
        let mut lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.identity.lease_name, "namespace": NAMESPACE},
        });
        self.apply(&mut lease, now);
        lease
    }
}

fn leases() -> Result<Resource, ApiError> {
    Resource::new("coordination.k8s.io", "leases")
}

/// Creates or renews this replica's lease.
pub async fn renew(rest: &RestStore, lease: &LeaseSpec<'_>) -> Result<(), ApiError> {
    let res = leases()?;
    let name = lease.identity.lease_name.as_str();
    for _ in 0..3 {
        let updated = rest
            .update_with(&res.strategy(), Some(NAMESPACE), name, kapi_registry::strategy::WriteTarget::Main, false, res.hooks(), |stored| {
                let mut next = stored.clone();
                // Not pinned to the read revision: a concurrent write is retried on the fresh object.
                if let Some(m) = next["metadata"].as_object_mut() {
                    m.remove("resourceVersion");
                }
                lease.apply(&mut next, OffsetDateTime::now_utc());
                Ok(next)
            })
            .await;
        match updated {
            Ok(_) => return Ok(()),
            Err(e) if e.code == 404 => match rest.create(&res.strategy(), Some(NAMESPACE), lease.new_object(OffsetDateTime::now_utc()), false, res.hooks()).await {
                Ok(_) => return Ok(()),
                Err(e) if e.code == 409 => continue,
                Err(e) => return Err(e),
            },
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::internal(format!("lease {NAMESPACE}/{name} kept changing while it was renewed")))
}

/// Deletes this replica's lease (gone already is fine).
pub async fn release(rest: &RestStore, identity: &Identity) -> Result<(), ApiError> {
    let res = leases()?;
    match rest.delete(&res.strategy(), Some(NAMESPACE), &identity.lease_name, &DeleteOptions::default()).await {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// When a lease stops counting: `renewTime + leaseDurationSeconds`.
fn expiry(lease: &Value) -> Option<OffsetDateTime> {
    let renewed = parse_rfc3339(lease.pointer("/spec/renewTime").and_then(Value::as_str)?)?;
    let secs = lease.pointer("/spec/leaseDurationSeconds").and_then(Value::as_i64)?;
    Some(renewed + time::Duration::seconds(secs))
}

/// The addresses advertised by other replicas' unexpired leases. Expired leases are deleted
/// on the way (kube's identity-lease garbage collector), with a resourceVersion precondition
/// so a lease renewed meanwhile survives.
pub async fn live_addresses(rest: &RestStore, own: &Identity) -> Result<Vec<SocketAddr>, ApiError> {
    let res = leases()?;
    let selector = LabelSelector::parse(&format!("{}={}", IDENTITY_LABEL.0, IDENTITY_LABEL.1))?;
    let params = ListParams { labels: Some(selector), ..ListParams::default() };
    let page = rest.list(&res.strategy(), Some(NAMESPACE), &params).await?;
    let now = OffsetDateTime::now_utc();
    let mut addresses = Vec::new();
    for lease in &page.items {
        let name = lease.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        if name == own.lease_name {
            continue;
        }
        match expiry(lease) {
            Some(until) if until > now => {
                let advertised = lease.pointer(&format!("/metadata/annotations/{}", ADDRESS_ANNOTATION.replace('/', "~1"))).and_then(Value::as_str);
                if let Some(addr) = advertised.and_then(|a| a.parse::<SocketAddr>().ok()) {
                    addresses.push(addr);
                }
            }
            _ => {
                let rv = lease.pointer("/metadata/resourceVersion").and_then(Value::as_str).map(str::to_owned);
                let opts = DeleteOptions { precondition_resource_version: rv, ..DeleteOptions::default() };
                match rest.delete(&res.strategy(), Some(NAMESPACE), name, &opts).await {
                    Ok(_) => tracing::info!(lease = name, "deleted an expired apiserver lease"),
                    Err(e) if e.code == 404 || e.code == 409 => {}
                    Err(e) => tracing::warn!(lease = name, "deleting an expired apiserver lease: {}", e.message),
                }
            }
        }
    }
    Ok(addresses)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_follow_kubes_shape() {
        assert_eq!(base32_lower(b"foobar"), "mzxw6ytboi");
        let a = Identity::new("host", "127.0.0.1:6443".parse().unwrap());
        let b = Identity::new("host", "127.0.0.1:6444".parse().unwrap());
        assert!(a.lease_name.starts_with("apiserver-") && a.lease_name.len() == "apiserver-".len() + 26, "{}", a.lease_name);
        assert_ne!(a.lease_name, b.lease_name, "replicas on one host have their own leases");
        assert_eq!(a.lease_name, Identity::new("host", "127.0.0.1:6443".parse().unwrap()).lease_name, "stable across restarts");
        assert!(a.holder.starts_with(&format!("{}_", a.lease_name)));
    }

    #[test]
    fn the_address_is_advertised_only_when_asked() {
        let id = Identity::new("host", "127.0.0.1:6443".parse().unwrap());
        let spec = LeaseSpec { identity: &id, duration: Duration::from_secs(15), advertise: None };
        let mut lease = spec.new_object(OffsetDateTime::now_utc());
        assert!(lease.pointer("/metadata/annotations").is_none());
        assert_eq!(lease["metadata"]["labels"]["apiserver.kubernetes.io/identity"], "kube-apiserver");
        assert_eq!(lease["spec"]["leaseDurationSeconds"], 15);
        let ready = LeaseSpec { advertise: Some("127.0.0.1:6443".parse().unwrap()), ..spec.clone() };
        ready.apply(&mut lease, OffsetDateTime::now_utc());
        assert_eq!(lease["metadata"]["annotations"]["kubernetes.io/peer-advertise-address"], "127.0.0.1:6443");
        assert!(expiry(&lease).is_some_and(|t| t > OffsetDateTime::now_utc()));
        spec.apply(&mut lease, OffsetDateTime::now_utc());
        assert!(lease.pointer("/metadata/annotations").is_none());
    }
}
