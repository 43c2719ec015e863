//! A bounded cache of webhook answers with a time to live per entry (kube caches authorized
//! and unauthorized SubjectAccessReviews for different TTLs, TokenReviews for one).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries at most: the oldest half goes when it fills (kube's LRU holds 1024 for authz, more
/// for tokens; a bound is what matters).
const CAPACITY: usize = 4096;

/// Answers by key, each until its own expiry.
pub struct TtlCache<V> {
    entries: Mutex<HashMap<String, (V, Instant)>>,
}

impl<V: Clone> Default for TtlCache<V> {
    fn default() -> Self {
        TtlCache { entries: Mutex::new(HashMap::new()) }
    }
}

impl<V: Clone> TtlCache<V> {
    /// The unexpired answer for `key`.
    pub fn get(&self, key: &str) -> Option<V> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match entries.get(key) {
            Some((value, until)) if *until > Instant::now() => Some(value.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps `value` for `ttl` (a zero TTL keeps nothing).
    pub fn put(&self, key: String, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CAPACITY {
            let now = Instant::now();
            entries.retain(|_, (_, until)| *until > now);
            if entries.len() >= CAPACITY {
                let mut by_expiry: Vec<(String, Instant)> = entries.iter().map(|(k, (_, until))| (k.clone(), *until)).collect();
                by_expiry.sort_by_key(|(_, until)| *until);
                for (k, _) in by_expiry.into_iter().take(CAPACITY / 2) {
                    entries.remove(&k);
                }
            }
        }
        entries.insert(key, (value, Instant::now() + ttl));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_stay_bounded() {
        let cache = TtlCache::default();
        cache.put("a".into(), 1, Duration::from_secs(60));
        cache.put("b".into(), 2, Duration::ZERO);
        assert_eq!(cache.get("a"), Some(1));
        assert_eq!(cache.get("b"), None);
        cache.put("c".into(), 3, Duration::from_nanos(1));
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(cache.get("c"), None);
        for i in 0..CAPACITY + 10 {
            cache.put(i.to_string(), i, Duration::from_secs(60));
        }
        assert!(cache.entries.lock().unwrap().len() <= CAPACITY);
    }
}
