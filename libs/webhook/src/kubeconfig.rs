//! A webhook named by a kubeconfig file, as kube-apiserver's authentication and authorization
//! webhooks are (`--authentication-token-webhook-config-file`, AuthorizationConfiguration's
//! `connectionInfo.kubeConfigFile`): the current context's cluster gives the URL and the CA,
//! its user the client certificate or bearer token kapi presents. Relative paths are relative
//! to the file, as client-go resolves them.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde::Deserialize;

use crate::config::{parse_url, ClientConfig, Credentials};

#[derive(Deserialize, Default)]
#[serde(default)]
struct File {
    clusters: Vec<Named<Cluster>>,
    users: Vec<Named<User>>,
    contexts: Vec<Named<Context>>,
    #[serde(rename = "current-context")]
    current_context: String,
}

#[derive(Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "user", alias = "context")]
    value: Option<T>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "kebab-case")]
struct Cluster {
    server: String,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    insecure_skip_tls_verify: bool,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "kebab-case")]
struct User {
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Context {
    cluster: String,
    user: String,
}

impl ClientConfig {
    /// Reads the webhook's kubeconfig; errors name the file and what is wrong with it.
    pub fn from_kubeconfig(path: &Path) -> Result<ClientConfig, String> {
        let shown = path.display();
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {shown}: {e}"))?;
        let file: File = serde_saphyr::from_str(&text).map_err(|e| format!("{shown}: {e}"))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let bad = |what: String| format!("{shown}: {what}");
        let (cluster_name, user_name) = if file.current_context.is_empty() {
            match (file.clusters.as_slice(), file.users.as_slice()) {
                ([c], users) if users.len() <= 1 => (c.name.clone(), users.first().map(|u| u.name.clone()).unwrap_or_default()),
                _ => return Err(bad("no current-context, and more than one cluster or user to choose from".into())),
            }
        } else {
            let context = file
                .contexts
                .iter()
                .find(|c| c.name == file.current_context)
                .and_then(|c| c.value.as_ref())
                .ok_or_else(|| bad(format!("context {:?} not found", file.current_context)))?;
            (context.cluster.clone(), context.user.clone())
        };
        let cluster = file
            .clusters
            .iter()
            .find(|c| c.name == cluster_name)
            .and_then(|c| c.value.as_ref())
            .ok_or_else(|| bad(format!("cluster {cluster_name:?} not found")))?;
        if cluster.insecure_skip_tls_verify {
            return Err(bad("insecure-skip-tls-verify is not supported by kapi: give the webhook's CA".into()));
        }
        let endpoint = parse_url(&cluster.server).map_err(|e| bad(format!("server {:?}: {e}", cluster.server)))?;
        let ca_bundle = match (&cluster.certificate_authority_data, &cluster.certificate_authority) {
            (Some(data), _) => decode(data).map_err(|e| bad(format!("certificate-authority-data: {e}")))?,
            (None, Some(file)) => read(base, file).map_err(bad)?,
            (None, None) => Vec::new(),
        };
        if !ca_bundle.is_empty() {
            crate::tls::roots(&ca_bundle).map_err(|e| bad(format!("certificate authority: {e}")))?;
        }
        let user = file.users.iter().find(|u| u.name == user_name).and_then(|u| u.value.as_ref());
        let credentials = match user {
            None => Credentials::None,
            Some(user) => {
                let pem = |data: &Option<String>, file: &Option<String>, what: &str| -> Result<Option<Vec<u8>>, String> {
                    match (data, file) {
                        (Some(d), _) => decode(d).map(Some).map_err(|e| bad(format!("{what}-data: {e}"))),
                        (None, Some(f)) => read(base, f).map(Some).map_err(bad),
                        (None, None) => Ok(None),
                    }
                };
                let cert = pem(&user.client_certificate_data, &user.client_certificate, "client-certificate")?;
                let key = pem(&user.client_key_data, &user.client_key, "client-key")?;
                let token = match (&user.token, &user.token_file) {
                    (Some(t), _) => Some(t.clone()),
                    (None, Some(f)) => Some(String::from_utf8_lossy(&read(base, f).map_err(bad)?).trim().to_owned()),
                    (None, None) => None,
                };
                match (cert, key, token) {
                    (Some(cert), Some(key), _) => Credentials::Certificate { cert, key },
                    (Some(_), None, _) | (None, Some(_), _) => return Err(bad("client-certificate and client-key must be given together".into())),
                    (None, None, Some(token)) => Credentials::Token(token),
                    (None, None, None) => Credentials::None,
                }
            }
        };
        let config = ClientConfig { endpoint, ca_bundle, credentials };
        // Refused now rather than on every call.
        crate::tls::client_config(&config.ca_bundle, &config.credentials).map_err(bad)?;
        Ok(config)
    }
}

fn decode(data: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD.decode(data.trim()).map_err(|e| e.to_string())
}

fn read(base: &Path, file: &str) -> Result<Vec<u8>, String> {
    let path = if Path::new(file).is_absolute() { PathBuf::from(file) } else { base.join(file) };
    std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn reads_the_current_context() {
        let dir = tempfile::tempdir().unwrap();
        let ca = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        write(dir.path(), "ca.crt", &ca.cert.pem());
        let path = write(
            dir.path(),
            "webhook.yaml",
            "apiVersion: v1\nkind: Config\nclusters:\n- name: authz\n  cluster:\n    server: https://127.0.0.1:9443/authorize\n    certificate-authority: ca.crt\nusers:\n- name: kapi\n  user:\n    token: secret\ncontexts:\n- name: webhook\n  context:\n    cluster: authz\n    user: kapi\ncurrent-context: webhook\n",
        );
        let config = ClientConfig::from_kubeconfig(&path).unwrap();
        assert_eq!(config.authority(), "127.0.0.1:9443");
        assert_eq!(config.path_and_query(None), "/authorize");
        assert_eq!(config.credentials, Credentials::Token("secret".into()));
        assert!(!config.ca_bundle.is_empty());
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let missing = ClientConfig::from_kubeconfig(&dir.path().join("nope.yaml")).unwrap_err();
        assert!(missing.starts_with("reading "), "{missing}");
        let path = write(dir.path(), "a.yaml", "clusters:\n- name: a\n  cluster:\n    server: http://127.0.0.1:1/x\n");
        let err = ClientConfig::from_kubeconfig(&path).unwrap_err();
        assert!(err.contains("'https' is the only allowed URL scheme"), "{err}");
        let path = write(dir.path(), "b.yaml", "current-context: gone\n");
        assert!(ClientConfig::from_kubeconfig(&path).unwrap_err().contains("context \"gone\" not found"));
    }
}
