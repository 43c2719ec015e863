//! The aggregator of a split deployment (`kapi-aggregator`): the core and extensions tiers run
//! as services of their own, and the aggregator sends them every request it does not answer
//! itself, as it sends APIService groups to their servers. Built-in groups go to the core tier
//! and every other group to the extensions tier (which answers 404 for what no CRD defines);
//! apiregistration.k8s.io is the aggregator's own. Discovery is merged from the tiers'
//! aggregated discovery documents, read again every half second from the extensions tier
//! (a new CRD shows within a second) and every five from the core tier.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use kapi_auth::UserInfo;
use kapi_registry::catalog;
use kapi_server::response::Body;
use kapi_server::tier::{builtin_group_order, Proxy, ServedGroup, TierFuture, CUSTOM_GROUP_ORDER};
use serde_json::Value;
use tokio::sync::watch;

use crate::proxy::{forward, plain_error, set_identity};
use crate::transport::{ProxyIdentity, Transport, TransportKey};

/// The groups the aggregator serves itself.
pub(crate) const OWN_GROUP: &str = "apiregistration.k8s.io";
/// The extensions tier's own built-in group.
const EXTENSIONS_GROUP: &str = "apiextensions.k8s.io";
/// kube's aggregated discovery media type.
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
/// The most of a discovery document read.
const MAX_DISCOVERY_BYTES: usize = 64 << 20;

/// Where the core and extensions tiers are served (`--core-url`, `--extensions-url`), and the
/// CA of their serving certificates (`--backend-ca-file`).
#[derive(Debug, Clone)]
pub struct Backends {
    /// `https://host:port` of the core tier (behind its load balancer).
    pub core: String,
    /// `https://host:port` of the extensions tier.
    pub extensions: String,
    /// The CA both tiers' serving certificates chain to.
    pub ca_file: PathBuf,
}

/// What a tier's aggregated discovery said last.
#[derive(Default)]
struct Discovered {
    groups: Vec<ServedGroup>,
    resources: HashMap<(String, String), Arc<Vec<Value>>>,
    current: bool,
}

/// One tier behind the aggregator.
pub(crate) struct Backend {
    host: String,
    port: u16,
    transport: Arc<Transport>,
    discovered: RwLock<Arc<Discovered>>,
    extensions: bool,
}

impl Backend {
    fn new(url: &str, ca_bundle: &[u8], identity: Option<&ProxyIdentity>, extensions: bool) -> Result<Backend, String> {
        let uri: http::Uri = url.parse().map_err(|e| format!("{url:?}: {e}"))?;
        if uri.scheme_str() != Some("https") {
            return Err(format!("{url:?}: the tiers are reached over https"));
        }
        let host = uri.host().ok_or_else(|| format!("{url:?}: no host"))?.trim_start_matches('[').trim_end_matches(']').to_owned();
        let port = uri.port_u16().unwrap_or(443);
        let key = TransportKey::new(ca_bundle.to_vec(), false, host.clone());
        let transport = Arc::new(Transport::new(&key, identity)?);
        Ok(Backend { host, port, transport, discovered: RwLock::new(Arc::default()), extensions })
    }

    fn discovered(&self) -> Arc<Discovered> {
        self.discovered.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Reads the tier's aggregated discovery (`/api` and `/apis`) as the aggregator (kube's
    /// probe identity); `true` when what it serves changed.
    async fn refresh(&self) -> bool {
        let mut next = Discovered { current: true, ..Discovered::default() };
        for path in ["/api", "/apis"] {
            match self.get_json(path).await {
                Ok(doc) => self.read_groups(&doc, &mut next),
                Err(e) => {
                    tracing::debug!(host = %self.host, port = self.port, "reading {path}: {e}");
                    // Keep what was known, marked stale: a tier that is down never empties
                    // discovery.
                    let old = self.discovered();
                    let stale = Discovered { groups: old.groups.clone(), resources: old.resources.clone(), current: false };
                    let changed = old.current;
                    *self.discovered.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(stale);
                    return changed;
                }
            }
        }
        let old = self.discovered();
        let changed = !old.current || old.groups != next.groups || old.resources != next.resources;
        if changed {
            *self.discovered.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(next);
        }
        changed
    }

    fn read_groups(&self, doc: &Value, into: &mut Discovered) {
        for item in doc.get("items").and_then(Value::as_array).into_iter().flatten() {
            let name = item.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
            if name == OWN_GROUP {
                continue;
            }
            let mut versions = Vec::new();
            for v in item.get("versions").and_then(Value::as_array).into_iter().flatten() {
                let Some(version) = v.get("version").and_then(Value::as_str) else { continue };
                versions.push(version.to_owned());
                let resources = v.get("resources").and_then(Value::as_array).cloned().unwrap_or_default();
                into.resources.insert((name.clone(), version.to_owned()), Arc::new(resources));
            }
            let order = if name.is_empty() {
                0
            } else if self.extensions && name != EXTENSIONS_GROUP {
                CUSTOM_GROUP_ORDER
            } else {
                builtin_group_order(&name).unwrap_or(CUSTOM_GROUP_ORDER)
            };
            into.groups.push(ServedGroup { name, versions, order });
        }
    }

    async fn get_json(&self, path: &str) -> Result<Value, String> {
        let mut request = http::Request::get(format!("https://{}:{}{path}", self.host, self.port));
        if let Some(headers) = request.headers_mut() {
            set_identity(headers, &UserInfo::new("system:kube-aggregator", ["system:masters"]));
            headers.insert(http::header::ACCEPT, http::HeaderValue::from_static(AGGREGATED));
        }
        let request = request.body(Full::new(Bytes::new())).map_err(|e| e.to_string())?;
        let answer = tokio::time::timeout(Duration::from_secs(5), self.transport.send(request)).await.map_err(|_| "timed out".to_owned())??;
        if answer.status() != StatusCode::OK {
            return Err(format!("status {}", answer.status()));
        }
        let body = Limited::new(answer.into_body(), MAX_DISCOVERY_BYTES).collect().await.map_err(|e| e.to_string())?.to_bytes();
        serde_json::from_slice(&body).map_err(|e| e.to_string())
    }
}

impl Proxy for Backend {
    fn serve(&self, head: http::request::Parts, body: Bytes, user: UserInfo) -> TierFuture<'static, Response<Body>> {
        let (transport, host, port) = (self.transport.clone(), self.host.clone(), self.port);
        Box::pin(async move {
            match forward(&transport, &host, port, head, body, &user).await {
                Ok(resp) => resp,
                Err(e) => plain_error(StatusCode::SERVICE_UNAVAILABLE, &e),
            }
        })
    }
}

/// The two tiers behind a split aggregator.
pub(crate) struct Split {
    core: Arc<Backend>,
    extensions: Arc<Backend>,
    /// Turns true once both tiers' discovery has been read once.
    ready: watch::Sender<bool>,
    /// Wakes the reader at once (a CRD changed).
    wake: tokio::sync::Notify,
    /// One extensions refresh at a time.
    refreshing: tokio::sync::Mutex<()>,
}

impl Split {
    pub(crate) fn new(backends: &Backends, identity: Option<&ProxyIdentity>) -> Result<Split, String> {
        let ca = std::fs::read(&backends.ca_file).map_err(|e| format!("--backend-ca-file {}: {e}", backends.ca_file.display()))?;
        Ok(Split {
            core: Arc::new(Backend::new(&backends.core, &ca, identity, false).map_err(|e| format!("--core-url {e}"))?),
            extensions: Arc::new(Backend::new(&backends.extensions, &ca, identity, true).map_err(|e| format!("--extensions-url {e}"))?),
            ready: watch::Sender::new(false),
            wake: tokio::sync::Notify::new(),
            refreshing: tokio::sync::Mutex::new(()),
        })
    }

    /// The tier that serves `group`: the core one for built-in groups, the extensions one for
    /// the rest; `None` for the aggregator's own group.
    pub(crate) fn route(&self, group: &str) -> Option<Arc<Backend>> {
        if group == OWN_GROUP {
            return None;
        }
        let builtin = group.is_empty() || (group != EXTENSIONS_GROUP && catalog::groups().iter().any(|g| g.name == group));
        Some(if builtin { self.core.clone() } else { self.extensions.clone() })
    }

    /// The extensions tier (its OpenAPI documents hold the built-in kinds and every CRD).
    pub(crate) fn extensions(&self) -> Arc<Backend> {
        self.extensions.clone()
    }

    /// Every group the tiers serve, with their places in `/apis`.
    pub(crate) fn groups(&self) -> Vec<ServedGroup> {
        let mut groups = self.core.discovered().groups.clone();
        groups.extend(self.extensions.discovered().groups.iter().cloned());
        groups
    }

    /// A tier's aggregated discovery resources of one group version, and whether current.
    pub(crate) fn resources(&self, group: &str, version: &str) -> Option<(Arc<Vec<Value>>, bool)> {
        let backend = self.route(group)?;
        let discovered = backend.discovered();
        let resources = discovered.resources.get(&(group.to_owned(), version.to_owned()))?.clone();
        Some((resources, discovered.current))
    }

    /// Reads the extensions tier's discovery again now (a CRD changed).
    pub(crate) fn nudge(&self) {
        self.wake.notify_one();
    }

    /// Group versions the extensions tier's discovery lacks among `served` (the Established
    /// CRDs' served versions, from this process's CRD cache).
    fn lacks(&self, served: &[(String, String)]) -> bool {
        let discovered = self.extensions.discovered();
        served.iter().any(|gv| !discovered.resources.contains_key(gv))
    }

    /// Makes discovery include every group version in `served`: the extensions tier is read
    /// again (it may itself take a moment to serve a CRD it just established) until it does,
    /// for at most two seconds.
    pub(crate) async fn catch_up(&self, served: &[(String, String)], generation: &std::sync::atomic::AtomicU64) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        while self.lacks(served) && tokio::time::Instant::now() < deadline {
            {
                let _one = self.refreshing.lock().await;
                if self.lacks(served) && self.extensions.refresh().await {
                    generation.fetch_add(1, Ordering::Relaxed);
                }
            }
            if self.lacks(served) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// Waits until both tiers' discovery has been read once.
    pub(crate) async fn wait_ready(&self) {
        let mut ready = self.ready.subscribe();
        let _ = ready.wait_for(|r| *r).await;
    }

    /// Reads the tiers' discovery again and again; a change moves `generation`.
    pub(crate) async fn follow(self: Arc<Self>, generation: Arc<std::sync::atomic::AtomicU64>) {
        let mut round: u64 = 0;
        loop {
            let mut changed = {
                let _one = self.refreshing.lock().await;
                self.extensions.refresh().await
            };
            if round.is_multiple_of(10) || !self.core.discovered().current {
                changed |= self.core.refresh().await;
            }
            if changed {
                generation.fetch_add(1, Ordering::Relaxed);
            }
            if self.core.discovered().current && self.extensions.discovered().current {
                self.ready.send_replace(true);
            }
            round = round.wrapping_add(1);
            let _ = tokio::time::timeout(Duration::from_millis(500), self.wake.notified()).await;
        }
    }
}
