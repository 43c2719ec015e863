//! Storage spans: with a tracer installed, the store the REST store writes and reads through is
//! wrapped so that each call made inside a traced request gets kube's storage span (`Create
//! etcd3`, `GuaranteedUpdate etcd3`, `Delete etcd3`, `Get etcd3`, `List(recursive=true)
//! etcd3`) with the key and the resource, whatever the backend: trace queries written for
//! kube-apiserver find them. Without a tracer the store is not wrapped at all.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use kapi_otel::KeyValue;
use kapi_storage::{DynStore, Event, KeyValue as Stored, ListOptions, ListResult, Result, Revision, Store};

/// `store`, traced when a tracer is installed.
pub fn wrap(store: DynStore) -> DynStore {
    if kapi_otel::enabled() {
        Arc::new(TracedStore { inner: store })
    } else {
        store
    }
}

struct TracedStore {
    inner: DynStore,
}

/// kube's storage span attributes: the key, and the group and resource it belongs to
/// (`/registry/<group>/<resource>/...`, `core` for the core group).
fn attributes(key: &str) -> Vec<KeyValue> {
    let mut parts = key.trim_start_matches('/').split('/');
    let (group, resource) = match (parts.next(), parts.next(), parts.next()) {
        (Some("registry"), Some(group), Some(resource)) => (if group == "core" { "" } else { group }, resource),
        _ => ("", ""),
    };
    vec![KeyValue::new("key", key.to_owned()), KeyValue::new("group", group.to_owned()), KeyValue::new("resource", resource.to_owned())]
}

#[async_trait]
impl Store for TracedStore {
    async fn get(&self, key: &str) -> Result<Option<Stored>> {
        kapi_otel::traced("Get etcd3", || attributes(key), self.inner.get(key)).await
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision> {
        kapi_otel::traced("Create etcd3", || attributes(key), self.inner.create(key, value)).await
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<Revision> {
        kapi_otel::traced("GuaranteedUpdate etcd3", || attributes(key), self.inner.update(key, value, expected)).await
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, Stored)> {
        kapi_otel::traced("Delete etcd3", || attributes(key), self.inner.delete(key, expected)).await
    }

    async fn list(&self, prefix: &str, opts: ListOptions) -> Result<ListResult> {
        kapi_otel::traced("List(recursive=true) etcd3", || attributes(prefix), self.inner.list(prefix, opts)).await
    }

    async fn count(&self, prefix: &str) -> Result<u64> {
        self.inner.count(prefix).await
    }

    async fn read_log(&self, after: Revision, limit: usize) -> Result<Vec<Event>> {
        self.inner.read_log(after, limit).await
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.inner.current_revision().await
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        self.inner.compacted_revision().await
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.inner.compact(revision).await
    }

    fn subscribe(&self) -> tokio::sync::watch::Receiver<Revision> {
        self.inner.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_come_from_keys() {
        let of = |key: &str| {
            let attrs = attributes(key);
            (attrs[1].value.as_str().into_owned(), attrs[2].value.as_str().into_owned())
        };
        assert_eq!(of("/registry/core/configmaps/default/a"), ("".into(), "configmaps".into()));
        assert_eq!(of("/registry/apps/deployments/"), ("apps".into(), "deployments".into()));
        assert_eq!(of("/other"), ("".into(), "".into()));
    }
}
