//! Encryption at rest through kapi (`--encryption-provider-config`): Secrets written through
//! the API never reach the data directory in plaintext, read back intact (GET, LIST, watch,
//! kubectl), survive a restart and kube's documented key rotation, never cross NATS; a bad
//! configuration stops start-up naming the file and field.

use std::path::Path;
use std::process::Command;

use kapi_e2e::scan::{contains, data_bytes};
use kapi_e2e::{Kapi, Request};
use serde_json::{json, Value};

const KEY1: &str = "c2VjcmV0IGlzIHNlY3VyZSwgaXMgaXQ/IDMyIGJ5dGU=";
const KEY2: &str = "YW5vdGhlciAzMi1ieXRlIGtleSBmb3Igcm90YXRpb24=";
const SECRETS: &str = "/api/v1/namespaces/default/secrets";

fn write_config(path: &Path, providers: &str) {
    let text = format!("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n{providers}");
    std::fs::write(path, text).expect("write the encryption configuration");
}


fn secret(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": {"token": value}})
}

#[test]
fn secrets_are_stored_sealed_and_rotate_to_a_new_key() {
    let config_dir = tempfile::tempdir().expect("tempdir");
    let config = config_dir.path().join("encryption.yaml");
    write_config(&config, &format!("  - aescbc: {{keys: [{{name: key1, secret: {KEY1}}}]}}\n  - identity: {{}}\n"));
    let config_arg = config.to_str().expect("utf-8 path");
    let mut kapi = Kapi::start_with(&["--encryption-provider-config", config_arg]).expect("start kapi");

    for i in 0..3 {
        let r = kapi.request(&Request::new("POST", SECRETS).json(&secret(&format!("s{i}"), &format!("SEALED-VALUE-{i}"))));
        assert_eq!(r.status, 201, "{}", r.raw);
    }
    let cm = kapi.request(&Request::new("POST", "/api/v1/namespaces/default/configmaps").json(
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"note": "PLAIN-CONFIG-VALUE"}}),
    ));
    assert_eq!(cm.status, 201, "{}", cm.raw);

    // Read back through the API and kubectl: the plaintext.
    let got = kapi.get_json(&format!("{SECRETS}/s1"));
    assert_eq!(got["data"]["token"], "U0VBTEVELVZBTFVFLTE=", "{got}"); // base64 of SEALED-VALUE-1
    let out = Command::new("kubectl").args(["--kubeconfig", kapi.kubeconfig().to_str().expect("path"), "get", "secret", "s2", "-o", "jsonpath={.data.token}"]).output().expect("kubectl");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "U0VBTEVELVZBTFVFLTI=", "{}", String::from_utf8_lossy(&out.stderr));
    let watch = kapi.request(&Request::get(&format!("{SECRETS}?watch=1&resourceVersion=0&timeoutSeconds=1")));
    assert_eq!(watch.raw.lines().filter(|l| l.contains("\"ADDED\"")).count(), 3, "{}", watch.raw);

    // The data directory: the ConfigMap's value in plaintext (the scan sees stored values),
    // no Secret value in any form (plain or base64), the aescbc prefix instead.
    let bytes = data_bytes(&kapi.data_dir());
    assert!(contains(&bytes, "PLAIN-CONFIG-VALUE"));
    for i in 0..3 {
        assert!(!contains(&bytes, &format!("SEALED-VALUE-{i}")), "plaintext of s{i} on disk");
        let b64 = ["U0VBTEVELVZBTFVFLTA=", "U0VBTEVELVZBTFVFLTE=", "U0VBTEVELVZBTFVFLTI="][i];
        assert!(!contains(&bytes, b64), "base64 of s{i} on disk");
    }
    assert!(contains(&bytes, "k8s:enc:aescbc:v1:key1:"));

    // kube's rotation: key2 first, restart, rewrite every Secret, drop key1, restart.
    write_config(&config, &format!("  - aescbc: {{keys: [{{name: key2, secret: {KEY2}}}, {{name: key1, secret: {KEY1}}}]}}\n  - identity: {{}}\n"));
    kapi.restart().expect("restart with key2 first");
    let list = kapi.get_json(SECRETS);
    for item in list["items"].as_array().expect("items") {
        let name = item["metadata"]["name"].as_str().expect("name");
        let r = kapi.request(&Request::new("PUT", &format!("{SECRETS}/{name}")).json(item));
        assert_eq!(r.status, 200, "{}", r.raw);
    }
    write_config(&config, &format!("  - aescbc: {{keys: [{{name: key2, secret: {KEY2}}}]}}\n  - identity: {{}}\n"));
    kapi.restart().expect("restart with key2 only");
    assert_eq!(kapi.get_json(&format!("{SECRETS}/s0"))["data"]["token"], "U0VBTEVELVZBTFVFLTA=");
    let fresh = data_bytes(&kapi.data_dir());
    assert!(contains(&fresh, "k8s:enc:aescbc:v1:key2:"));
}

#[test]
fn a_bad_configuration_stops_start_up_naming_file_and_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("encryption.yaml");
    write_config(&config, "  - aescbc: {keys: [{name: key1, secret: c2hvcnQ=}]}\n");
    let data = dir.path().join("data");
    let out = Command::new(kapi_e2e::kapi_binary().expect("kapi binary"))
        .args(["--secure-port", "0", "--data-dir", data.to_str().expect("path"), "--encryption-provider-config", config.to_str().expect("path")])
        .output()
        .expect("run kapi");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("encryption.yaml"), "{stderr}");
    assert!(
        stderr.contains("resources[0].providers[0].aescbc.keys[0].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 5, expected one of [16 24 32]"),
        "{stderr}"
    );
}

/// `--encryption-provider-config-automatic-reload`: a changed file is put in force without a
/// restart (new writes sealed with the new first key, old data still read); a broken one is
/// refused, counted, and the running configuration stays.
#[test]
fn the_configuration_reloads_without_a_restart() {
    let config_dir = tempfile::tempdir().expect("tempdir");
    let config = config_dir.path().join("encryption.yaml");
    write_config(&config, &format!("  - aescbc: {{keys: [{{name: key1, secret: {KEY1}}}]}}\n  - identity: {{}}\n"));
    let kapi = Kapi::start_with(&[
        "--encryption-provider-config",
        config.to_str().expect("utf-8 path"),
        "--encryption-provider-config-automatic-reload",
        "--encryption-provider-config-automatic-reload-interval",
        "200ms",
    ])
    .expect("start kapi");
    let create = |name: &str, value: &str| {
        let r = kapi.request(&Request::new("POST", SECRETS).json(&secret(name, value)));
        assert_eq!(r.status, 201, "{}", r.raw);
    };
    create("before", "RELOAD-BEFORE");
    write_config(&config, &format!("  - aescbc: {{keys: [{{name: key2, secret: {KEY2}}}, {{name: key1, secret: {KEY1}}}]}}\n  - identity: {{}}\n"));
    let reloaded = kapi_e2e::wait_for(std::time::Duration::from_secs(10), || {
        let metrics = kapi.request(&Request::get("/metrics")).raw;
        metrics.contains("apiserver_encryption_config_controller_automatic_reloads_total{status=\"success\"} 1").then_some(())
    });
    assert!(reloaded.is_some(), "the new configuration was loaded");
    create("after", "RELOAD-AFTER");
    let bytes = data_bytes(&kapi.data_dir());
    assert!(contains(&bytes, "k8s:enc:aescbc:v1:key2:"), "the new write is sealed with key2");
    assert!(!contains(&bytes, "RELOAD-AFTER") && !contains(&bytes, "RELOAD-BEFORE"));
    assert_eq!(kapi.get_json(&format!("{SECRETS}/before"))["data"]["token"], "UkVMT0FELUJFRk9SRQ==", "key1 data still reads");

    // A broken file is refused; the running configuration keeps sealing with key2.
    std::fs::write(&config, "kind: EncryptionConfiguration\napiVersion: apiserver.config.k8s.io/v1\nresources: [{resources: [secrets], providers: [{aescbc: {keys: [{name: k, secret: short}]}}]}]\n").unwrap();
    let refused = kapi_e2e::wait_for(std::time::Duration::from_secs(10), || {
        let metrics = kapi.request(&Request::get("/metrics")).raw;
        metrics.contains("apiserver_encryption_config_controller_automatic_reloads_total{status=\"failure\"} 1").then_some(())
    });
    assert!(refused.is_some(), "the broken configuration was refused");
    create("still", "RELOAD-STILL");
    let bytes = data_bytes(&kapi.data_dir());
    assert!(!contains(&bytes, "RELOAD-STILL"), "still sealed after a refused reload");
    assert_eq!(kapi.get_json(&format!("{SECRETS}/still"))["data"]["token"], "UkVMT0FELVNUSUxM");
}

/// Two replicas sharing NATS: what crosses NATS while Secrets are written through one replica
/// and watched through the other carries no Secret value, plain or base64, and neither does
/// anything nats-server stored. NATS carries the replicas' revision hints, never objects; the
/// tap proves the traffic was there to scan.
#[test]
fn nats_carries_no_secret_values() {
    let nats = kapi_e2e::NatsServer::start().expect("start nats-server");
    let url = nats.url();
    let config_dir = tempfile::tempdir().expect("tempdir");
    let config = config_dir.path().join("encryption.yaml");
    write_config(&config, &format!("  - aescbc: {{keys: [{{name: key1, secret: {KEY1}}}]}}\n  - identity: {{}}\n"));
    let args = ["--encryption-provider-config", config.to_str().expect("utf-8 path"), "--nats-url", url.as_str()];
    let writer = Kapi::start_with(&args).expect("start the first replica");
    let reader = writer.start_replica(&args).expect("start the second replica");
    let tap = nats.tap().expect("subscribe to every NATS subject");

    for i in 0..5 {
        let r = writer.request(&Request::new("POST", SECRETS).json(&secret(&format!("n{i}"), &format!("NATS-SECRET-{i}"))));
        assert_eq!(r.status, 201, "{}", r.raw);
    }
    // The second replica's watch cache has every write (woken by the hints on NATS).
    let watched = format!("{SECRETS}?watch=1&resourceVersion=0&timeoutSeconds=1");
    let seen = kapi_e2e::wait_for(std::time::Duration::from_secs(10), || {
        let text = reader.request(&Request::get(&watched)).raw;
        (0..5).all(|i| text.contains(&format!("\"n{i}\""))).then_some(())
    });
    assert!(seen.is_some(), "the second replica saw the writes");
    let traffic = tap.stop();
    let messages = traffic.windows(4).filter(|w| *w == b"MSG ").count();
    // One revision hint per write (sequential writes: no group commit joins two).
    assert!(messages >= 5, "NATS carried the replicas' hints: {}", String::from_utf8_lossy(&traffic));

    let mut stored = data_bytes(&nats.store_dir());
    stored.extend(data_bytes(&writer.data_dir()));
    for i in 0..5 {
        let plain = format!("NATS-SECRET-{i}");
        let b64 = base64_of(&plain);
        assert!(!contains(&traffic, &plain) && !contains(&traffic, &b64), "n{i}'s value crossed NATS");
        assert!(!contains(&stored, &plain) && !contains(&stored, &b64), "n{i}'s value stored in plaintext");
    }
}

/// Standard base64 with padding, as the API shows Secret data.
fn base64_of(text: &str) -> String {
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, text)
}

/// secretbox and aesgcm seal as aescbc does: values read back intact, the data directory holds
/// the provider's prefix and no value, plain or base64.
#[test]
fn secretbox_and_aesgcm_seal_too() {
    for provider in ["secretbox", "aesgcm"] {
        let config_dir = tempfile::tempdir().expect("tempdir");
        let config = config_dir.path().join("encryption.yaml");
        write_config(&config, &format!("  - {provider}: {{keys: [{{name: key1, secret: {KEY1}}}]}}\n  - identity: {{}}\n"));
        let kapi = Kapi::start_with(&["--encryption-provider-config", config.to_str().expect("utf-8 path")]).expect("start kapi");
        for i in 0..3 {
            let r = kapi.request(&Request::new("POST", SECRETS).json(&secret(&format!("s{i}"), &format!("{provider}-VALUE-{i}"))));
            assert_eq!(r.status, 201, "{provider}: {}", r.raw);
        }
        let list = kapi.get_json(SECRETS);
        let items = list["items"].as_array().expect("items");
        assert_eq!(items.len(), 3, "{provider}: {list}");
        for (i, item) in items.iter().enumerate() {
            assert_eq!(item["data"]["token"], base64_of(&format!("{provider}-VALUE-{i}")), "{provider}: {item}");
        }
        let bytes = data_bytes(&kapi.data_dir());
        assert!(contains(&bytes, &format!("k8s:enc:{provider}:v1:key1:")), "{provider}: the provider's prefix is stored");
        for i in 0..3 {
            let plain = format!("{provider}-VALUE-{i}");
            assert!(!contains(&bytes, &plain) && !contains(&bytes, &base64_of(&plain)), "{provider}: s{i} stored in plaintext");
        }
    }
}
