//! Where a store's keys sit in etcd's single key space.
//!
//! A store key `k` (always starting with `/`) is the etcd key `root + k'`, where `k'` is `k`
//! with the store's own root (`/registry` in kapi) replaced: with `--etcd-prefix=/registry`
//! (kube's default) kapi's keys are exactly kube's (`/registry/pods/default/web`), and
//! `etcdctl get --prefix /registry/` shows them. Everything the store writes lies in
//! `[root + "/", root + "0")`, the one range its change-log watch covers; its bookkeeping keys sit
//! just outside that range, at `root + ".kapi/..."`, so they never appear in lists or the log.

/// Maps store keys to etcd keys and back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeySpace {
    /// Prefix of store keys that `etcd_root` replaces (`/registry` for kapi, empty in tests).
    store_root: String,
    /// etcd prefix of this store's keys, without a trailing `/` (`/registry`).
    etcd_root: String,
}

impl KeySpace {
    pub(crate) fn new(store_root: &str, etcd_root: &str) -> Self {
        Self { store_root: store_root.trim_end_matches('/').to_owned(), etcd_root: etcd_root.trim_end_matches('/').to_owned() }
    }

    /// The etcd key of a store key, or None for a key outside the store root.
    pub(crate) fn to_etcd(&self, key: &str) -> Option<Vec<u8>> {
        let rest = key.strip_prefix(self.store_root.as_str())?;
        if !rest.starts_with('/') {
            return None;
        }
        Some([self.etcd_root.as_bytes(), rest.as_bytes()].concat())
    }

    /// The store key of an etcd key from this store's range.
    pub(crate) fn to_store(&self, key: &[u8]) -> Option<String> {
        let rest = key.strip_prefix(self.etcd_root.as_bytes())?;
        let rest = std::str::from_utf8(rest).ok()?;
        rest.starts_with('/').then(|| format!("{}{rest}", self.store_root))
    }

    /// etcd range `[start, end)` of the store keys starting with `prefix` (a byte prefix, as the
    /// `Store` contract says: `/a/b` includes `/a/bc`). A prefix shorter than the store root
    /// covers the whole store.
    pub(crate) fn prefix_range(&self, prefix: &str) -> (Vec<u8>, Vec<u8>) {
        match prefix.strip_prefix(self.store_root.as_str()) {
            Some(rest) if rest.starts_with('/') => {
                let start = [self.etcd_root.as_bytes(), rest.as_bytes()].concat();
                let end = range_end(&start);
                (start, end)
            }
            Some("") => self.whole(),
            None if self.store_root.starts_with(prefix) => self.whole(),
            // A prefix that no store key can have: an empty range inside the store's range.
            _ => {
                let (start, _) = self.whole();
                (start.clone(), start)
            }
        }
    }

    /// The range of every store key (what the change-log watch covers).
    pub(crate) fn whole(&self) -> (Vec<u8>, Vec<u8>) {
        let start = format!("{}/", self.etcd_root).into_bytes();
        let end = range_end(&start);
        (start, end)
    }

    /// Written in every write's transaction: its mod revision is the store's current revision.
    pub(crate) fn last_write(&self) -> Vec<u8> {
        format!("{}.kapi/last-write", self.etcd_root).into_bytes()
    }
}

/// The first key after every key with this prefix (etcd's `clientv3.GetPrefixRangeEnd`).
pub(crate) fn range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // All 0xff (or empty): to the end of the key space.
    vec![0]
}

/// The first key strictly after `key`.
pub(crate) fn key_after(key: &[u8]) -> Vec<u8> {
    let mut next = key.to_vec();
    next.push(0);
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_layout_with_the_default_prefix() {
        let keys = KeySpace::new("/registry", "/registry");
        assert_eq!(keys.to_etcd("/registry/pods/default/web").unwrap(), b"/registry/pods/default/web");
        assert_eq!(keys.to_store(b"/registry/pods/default/web").unwrap(), "/registry/pods/default/web");
        assert_eq!(keys.to_etcd("/other/x"), None);
        assert_eq!(keys.to_etcd("/registryx/a"), None);
        assert_eq!(keys.prefix_range("/registry/pods/"), (b"/registry/pods/".to_vec(), b"/registry/pods0".to_vec()));
        assert_eq!(keys.prefix_range("/registry/"), keys.whole());
        assert_eq!(keys.whole(), (b"/registry/".to_vec(), b"/registry0".to_vec()));
        let marker = keys.last_write();
        let (start, end) = keys.whole();
        assert!(marker < start || marker >= end, "bookkeeping inside the watched range");
    }

    #[test]
    fn another_prefix_moves_every_key() {
        let keys = KeySpace::new("/registry", "/clusters/a/");
        assert_eq!(keys.to_etcd("/registry/pods/x").unwrap(), b"/clusters/a/pods/x");
        assert_eq!(keys.to_store(b"/clusters/a/pods/x").unwrap(), "/registry/pods/x");
        assert_eq!(keys.to_store(b"/clusters/ab/pods/x"), None);
    }

    #[test]
    fn test_roots_keep_arbitrary_keys() {
        let keys = KeySpace::new("", "/kapi-conformance/1");
        assert_eq!(keys.to_etcd("/a/b").unwrap(), b"/kapi-conformance/1/a/b");
        assert_eq!(keys.to_store(b"/kapi-conformance/1/a/b").unwrap(), "/a/b");
        assert_eq!(keys.prefix_range("/a/b"), (b"/kapi-conformance/1/a/b".to_vec(), b"/kapi-conformance/1/a/c".to_vec()));
        assert_eq!(keys.prefix_range(""), keys.whole());
    }

    #[test]
    fn range_ends() {
        assert_eq!(range_end(b"/a"), b"/b");
        assert_eq!(range_end(b"a\xff"), b"b");
        assert_eq!(range_end(b"\xff"), vec![0]);
        assert_eq!(key_after(b"/a"), b"/a\0");
    }
}
