//! Encryption at rest cost: Secret creates and GETs against kapi storing Secrets in plaintext
//! (identity), sealed with aescbc, and sealed by a KMS v2 plugin (the e2e tests' grpcio plugin,
//! `tests/e2e/python/kms_plugin.py`, on a Unix socket), measured one after the other in the
//! same run. GETs are answered from the watch cache (plaintext in memory), so they measure
//! what a reader sees; creates pay the sealing on every write (and, with KMS, no plugin call:
//! one Encrypt per key ID).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use http::{Method, StatusCode};
use serde_json::json;

use crate::stats::{ms, Samples};
use crate::{check, drive, Kapi};

struct Plan {
    objects: usize,
    concurrency: usize,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Plan { objects: 200, concurrency: 4 }
        } else {
            Plan { objects: 5_000, concurrency: 8 }
        }
    }
}

const KEY: &str = "c2VjcmV0IGlzIHNlY3VyZSwgaXMgaXQ/IDMyIGJ5dGU=";

fn secret(name: &str) -> bytes::Bytes {
    let body = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": {"token": format!("bench-secret-value-{name}"), "user": "admin"}});
    bytes::Bytes::from(body.to_string())
}

async fn workload(kapi: &Kapi, plan: &Plan) -> Result<(Samples, Samples), String> {
    let mut conn = kapi.target.connect().await?;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}});
    let (status, body) = conn.send(Method::POST, "/api/v1/namespaces", Some(bytes::Bytes::from(ns.to_string()))).await?;
    check(status, StatusCode::CREATED, &body, "create namespace")?;
    let creates = drive(&kapi.target, plan.objects, plan.concurrency, |mut conn, i| async move {
        let (status, body) = conn.send(Method::POST, "/api/v1/namespaces/bench/secrets", Some(secret(&format!("s-{i}")))).await?;
        check(status, StatusCode::CREATED, &body, "create")?;
        Ok(conn)
    })
    .await?;
    let gets = drive(&kapi.target, plan.objects, plan.concurrency, |mut conn, i| async move {
        let (status, body) = conn.send(Method::GET, &format!("/api/v1/namespaces/bench/secrets/s-{i}"), None).await?;
        check(status, StatusCode::OK, &body, "get")?;
        Ok(conn)
    })
    .await?;
    Ok((creates, gets))
}

fn row(label: &str, s: &Samples, base: &Samples) -> String {
    format!(
        "| {label} | {:.0} | {:.1}% | {} | {} |\n",
        s.per_second(),
        100.0 * (1.0 - s.per_second() / base.per_second().max(1e-9)),
        ms(s.percentile(0.5)),
        ms(s.percentile(0.99))
    )
}

fn config(providers: &str) -> String {
    format!("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n{providers}")
}

/// The workload against a kapi with `providers` for Secrets.
async fn sealed(kapi_bin: &Path, plan: &Plan, dir: &Path, name: &str, providers: &str) -> Result<(Samples, Samples), String> {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, config(providers)).map_err(|e| e.to_string())?;
    let arg = path.to_string_lossy().into_owned();
    let kapi = Kapi::start_with(kapi_bin, &["--encryption-provider-config", &arg])?;
    kapi.wait_ready().await?;
    workload(&kapi, plan).await
}

/// The e2e tests' KMS v2 plugin, started and listening.
struct Plugin(Child);

impl Plugin {
    fn start(dir: &Path) -> Result<Self, String> {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/e2e/python/kms_plugin.py");
        let mut child = Command::new("python3")
            .arg("-u")
            .arg(&script)
            .arg(dir.join("kms.sock"))
            .arg(dir.join("keys.json"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting the KMS plugin {}: {e}", script.display()))?;
        let stdout = child.stdout.take().ok_or("no plugin stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        match lines.next() {
            Some(Ok(line)) if line.starts_with("listening") => {}
            other => {
                let _ = child.kill();
                return Err(format!("the KMS plugin did not start (python3 with grpcio and cryptography needed): {other:?}"));
            }
        }
        // Keep reading its per-call lines so it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Ok(Plugin(child))
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The section.
pub async fn run(kapi_bin: &Path, quick: bool) -> Result<String, String> {
    let plan = Plan::new(quick);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let plain = Kapi::start(kapi_bin)?;
    plain.wait_ready().await?;
    let (creates, gets) = workload(&plain, &plan).await?;
    drop(plain);
    let (cbc_creates, cbc_gets) =
        sealed(kapi_bin, &plan, dir.path(), "aescbc", &format!("  - aescbc: {{keys: [{{name: key1, secret: {KEY}}}]}}\n")).await?;
    let plugin = Plugin::start(dir.path())?;
    let kms = format!("  - kms: {{apiVersion: v2, name: bench, endpoint: 'unix://{}', timeout: 3s}}\n", dir.path().join("kms.sock").display());
    let (kms_creates, kms_gets) = sealed(kapi_bin, &plan, dir.path(), "kms", &kms).await?;
    drop(plugin);

    let mut report = String::from("## Encryption at rest\n\n");
    report.push_str(&format!(
        "{} Secret creates then {} GETs over {} connections, against kapi storing Secrets as they are (identity), sealed with aescbc (32-byte key), and sealed by a KMS v2 plugin (grpcio, Unix socket; one Encrypt per key ID, HKDF-derived AES-256-GCM key per write).\n\n",
        plan.objects, plan.objects, plan.concurrency
    ));
    report.push_str("| requests | per second | cost | p50 | p99 |\n|---|---|---|---|---|\n");
    report.push_str(&row("creates, identity", &creates, &creates));
    report.push_str(&row("creates, aescbc", &cbc_creates, &creates));
    report.push_str(&row("creates, KMS v2", &kms_creates, &creates));
    report.push_str(&row("GETs, identity", &gets, &gets));
    report.push_str(&row("GETs, aescbc", &cbc_gets, &gets));
    report.push_str(&row("GETs, KMS v2", &kms_gets, &gets));
    let cost = |a: &Samples, b: &Samples| 100.0 * (1.0 - a.per_second() / b.per_second().max(1e-9));
    let cbc_worst = cost(&cbc_creates, &creates).max(cost(&cbc_gets, &gets));
    let kms_worst = cost(&kms_creates, &creates).max(cost(&kms_gets, &gets));
    report.push_str(&format!(
        "\naescbc costs at most {cbc_worst:.1}% of the rate (target: at most 10%: {}); KMS v2 at most {kms_worst:.1}%.\n\n",
        if cbc_worst <= 10.0 { "met" } else { "missed" }
    ));
    Ok(report)
}
