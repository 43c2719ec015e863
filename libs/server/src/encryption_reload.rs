//! `--encryption-provider-config-automatic-reload` (kube's encryption config controller): the
//! file is read again every interval; a changed file that loads and validates is put in force
//! (its KMS providers primed first), one that does not is logged and counted and the running
//! configuration stays. Writes from then on seal with the new first provider; data sealed by
//! the old one stays readable as long as the new file lists its provider.

use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kapi_encryption::LiveConfig;

fn fingerprint(text: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// Watches `path` every `every`, replacing `live` when the file changes and loads.
pub fn start(live: Arc<LiveConfig>, path: PathBuf, every: Duration) {
    tokio::spawn(async move {
        let mut last = tokio::fs::read_to_string(&path).await.map(|t| fingerprint(&t)).ok();
        loop {
            tokio::time::sleep(every).await;
            let text = match tokio::fs::read_to_string(&path).await {
                Ok(text) => text,
                Err(e) => {
                    tracing::warn!(path = %path.display(), "reading the encryption configuration: {e}");
                    continue;
                }
            };
            let now = fingerprint(&text);
            if last == Some(now) {
                continue;
            }
            last = Some(now);
            let shown = path.display().to_string();
            let parsed = tokio::task::spawn_blocking(move || kapi_encryption::parse(&text, &shown)).await;
            match parsed {
                Ok(Ok(config)) => {
                    config.start_kms().await;
                    live.replace(config);
                    crate::metrics::encryption_config_reload(true);
                    tracing::info!(path = %path.display(), "loaded a new encryption configuration");
                }
                Ok(Err(e)) => {
                    crate::metrics::encryption_config_reload(false);
                    tracing::error!(path = %path.display(), "the new encryption configuration is refused, the running one stays: {e}");
                }
                Err(e) => tracing::error!("reading the encryption configuration: {e}"),
            }
        }
    });
}
