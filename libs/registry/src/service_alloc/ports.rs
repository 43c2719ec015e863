//! Node ports, one storage key a port under `/registry/ranges/servicenodeports/` (kube keeps a
//! bitmap there in one RangeAllocation object; a key a port lets replicas take different ports
//! without contending on one object). A port is taken by creating its key, which the store
//! does for exactly one writer.

use std::collections::HashSet;
use std::ops::RangeInclusive;

use bytes::Bytes;
use kapi_apimachinery::ApiError;
use kapi_storage::{DynStore, ListOptions, Revision, StorageError};
use rand::Rng;
use serde_json::{json, Value};

use super::AllocError;

/// Where node port claims live.
pub(super) const PREFIX: &str = "/registry/ranges/servicenodeports/";
/// Random picks before falling back to a scan of what is free.
const RANDOM_TRIES: usize = 16;

/// One port's claim: which Service holds it and since when (the repair pass leaves young
/// claims alone: their Service may be on its way into the store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PortClaim {
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) since: i64,
}

impl PortClaim {
    fn encode(&self) -> Bytes {
        Bytes::from(json!({"namespace": self.namespace, "name": self.name, "since": self.since}).to_string())
    }

    pub(super) fn decode(value: &[u8]) -> Option<Self> {
        let v: Value = serde_json::from_slice(value).ok()?;
        Some(PortClaim {
            namespace: v.get("namespace")?.as_str()?.to_owned(),
            name: v.get("name")?.as_str()?.to_owned(),
            since: v.get("since").and_then(Value::as_i64).unwrap_or(0),
        })
    }
}

pub(super) fn now_unix() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Takes and gives back node ports.
#[derive(Clone)]
pub(super) struct PortAllocator {
    pub(super) store: DynStore,
    pub(super) range: RangeInclusive<u16>,
}

impl PortAllocator {
    fn key(port: u16) -> String {
        format!("{PREFIX}{port}")
    }

    /// Takes `port` for the Service; Ok(false) when another holds it.
    async fn claim(&self, port: u16, namespace: &str, name: &str, dry_run: bool) -> Result<bool, ApiError> {
        if dry_run {
            return match self.store.get(&Self::key(port)).await {
                Ok(found) => Ok(found.is_none()),
                Err(e) => Err(ApiError::internal(e)),
            };
        }
        let claim = PortClaim { namespace: namespace.into(), name: name.into(), since: now_unix() };
        match self.store.create(&Self::key(port), claim.encode()).await {
            Ok(_) => Ok(true),
            Err(StorageError::AlreadyExists(_)) => Ok(false),
            Err(e) => Err(ApiError::internal(e)),
        }
    }

    /// Takes the port a user asked for.
    pub(super) async fn allocate(&self, port: u16, namespace: &str, name: &str, dry_run: bool) -> Result<(), AllocError> {
        if !self.range.contains(&port) {
            return Err(AllocError::PortNotInRange(format!("{}-{}", self.range.start(), self.range.end())));
        }
        match self.claim(port, namespace, name, dry_run).await? {
            true => Ok(()),
            false => Err(AllocError::Allocated),
        }
    }

    /// Takes any free port, the dynamic band (above kube's static band) first; `avoid` are
    /// ports this request already took in a dry run.
    pub(super) async fn allocate_next(&self, namespace: &str, name: &str, dry_run: bool, avoid: &HashSet<u16>) -> Result<u16, AllocError> {
        let (lo, hi) = (u32::from(*self.range.start()), u32::from(*self.range.end()));
        let size = hi - lo + 1;
        let band = if size < 16 { 0 } else { (size / 16).clamp(16, 128) };
        let picks: Vec<u16> = {
            let mut rng = rand::thread_rng();
            (0..RANDOM_TRIES).map(|_| (lo + if band < size { rng.gen_range(band..size) } else { rng.gen_range(0..size) }) as u16).collect()
        };
        for port in picks {
            if !avoid.contains(&port) && self.claim(port, namespace, name, dry_run).await? {
                return Ok(port);
            }
        }
        let used: HashSet<u16> = self.claims().await?.into_iter().map(|(p, _, _)| p).chain(avoid.iter().copied()).collect();
        let start = rand::thread_rng().gen_range(0..size);
        let dynamic = (0..size - band).map(|i| band + (start + i) % (size - band).max(1));
        for offset in dynamic.chain(0..band) {
            let port = (lo + offset) as u16;
            if !used.contains(&port) && self.claim(port, namespace, name, dry_run).await? {
                return Ok(port);
            }
        }
        Err(AllocError::Full)
    }

    /// Every claim in the store, with the revision it was read at.
    pub(super) async fn claims(&self) -> Result<Vec<(u16, PortClaim, Revision)>, ApiError> {
        let listed = self.store.list(PREFIX, ListOptions::default()).await.map_err(ApiError::internal)?;
        Ok(listed
            .items
            .iter()
            .filter_map(|kv| {
                let port = kv.key.strip_prefix(PREFIX)?.parse().ok()?;
                Some((port, PortClaim::decode(&kv.value)?, kv.mod_revision))
            })
            .collect())
    }

    /// Records a claim the Service already holds (repair of a claim lost or never written).
    pub(super) async fn restore(&self, port: u16, namespace: &str, name: &str) -> Result<bool, ApiError> {
        self.claim(port, namespace, name, false).await
    }

    /// Gives `port` back if the Service `namespace/name` holds it.
    pub(super) async fn release(&self, port: u16, namespace: &str, name: &str) -> Result<(), ApiError> {
        let key = Self::key(port);
        let Some(kv) = self.store.get(&key).await.map_err(ApiError::internal)? else { return Ok(()) };
        if PortClaim::decode(&kv.value).is_none_or(|c| c.namespace != namespace || c.name != name) {
            return Ok(());
        }
        match self.store.delete(&key, Some(kv.mod_revision)).await {
            Ok(_) | Err(StorageError::NotFound(_) | StorageError::Conflict { .. }) => Ok(()),
            Err(e) => Err(ApiError::internal(e)),
        }
    }

    /// Removes a stale claim if it is still the one read at `revision`; Ok(false) when it
    /// changed or went meanwhile.
    pub(super) async fn drop_claim(&self, port: u16, revision: Revision) -> Result<bool, ApiError> {
        match self.store.delete(&Self::key(port), Some(revision)).await {
            Ok(_) => Ok(true),
            Err(StorageError::NotFound(_) | StorageError::Conflict { .. }) => Ok(false),
            Err(e) => Err(ApiError::internal(e)),
        }
    }
}
