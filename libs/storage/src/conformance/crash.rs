//! Durability across `kill -9`: a child process (this test binary, re-executed on the generated
//! child test) writes concurrently and prints every acknowledged write; the parent SIGKILLs it
//! mid-load, reopens the store and finds every acknowledged write.
//!
//! The child is started as `<test binary> <child test name> --exact --nocapture`, which both
//! `cargo test` and `cargo nextest` binaries (libtest harness) accept.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{read_all, violation, StoreFactory};
use crate::{Result, Revision, StorageError};

/// Tells the child test where the store lives; without it the child test passes at once.
pub const CHILD_ENV: &str = "KAPI_STORAGE_CONFORMANCE_CHILD_ADDRESS";
const ACK: &str = "KAPI-ACK ";
const CHILD_WRITERS: usize = 8;
/// Acknowledged writes the parent waits for before it kills the child.
const KILL_AFTER: usize = 300;

fn io_error(context: &str) -> impl Fn(std::io::Error) -> StorageError + '_ {
    move |e| violation(format!("{context}: {e}"))
}

/// The libtest name of `test_fn` generated next to the caller: `module_path!()` minus the crate.
fn test_name(module_path: &str, test_fn: &str) -> String {
    match module_path.split_once("::") {
        Some((_, inner)) => format!("{inner}::{test_fn}"),
        None => test_fn.to_owned(),
    }
}

/// Parent half: `module_path` is the caller's `module_path!()`, `child_test` the child test's
/// function name in that module.
pub async fn parent<F: StoreFactory>(module_path: &str, child_test: &str) -> Result<()> {
    let location = F::fresh()?;
    let address = location.address().to_owned();
    let name = test_name(module_path, child_test);
    let acked = tokio::task::spawn_blocking(move || run_and_kill(&name, &address))
        .await
        .map_err(|e| violation(format!("crash orchestration panicked: {e}")))??;
    assert!(
        acked.len() >= KILL_AFTER,
        "only {} acknowledged writes",
        acked.len()
    );

    let store = F::open(location.address()).await?;
    let log: BTreeMap<Revision, String> = read_all(&store, 0)
        .await?
        .into_iter()
        .map(|e| (e.revision, e.key))
        .collect();
    let mut newest: BTreeMap<&str, Revision> = BTreeMap::new();
    for (revision, key) in &acked {
        assert_eq!(
            log.get(revision).map(String::as_str),
            Some(key.as_str()),
            "acknowledged write of {key} at revision {revision} lost after kill -9"
        );
        let entry = newest.entry(key.as_str()).or_default();
        *entry = (*entry).max(*revision);
    }
    for (key, revision) in newest {
        let kv = store
            .get(key)
            .await?
            .ok_or_else(|| violation(format!("{key} lost after kill -9")))?;
        assert!(
            kv.mod_revision >= revision,
            "{key} went back from {revision} to {}",
            kv.mod_revision
        );
    }
    // The reopened store keeps allocating above everything acknowledged.
    let max = acked.iter().map(|a| a.0).max().unwrap_or(0);
    let next = store.create("/crash/after-reopen", Bytes::new()).await?;
    assert!(
        next > max,
        "revision {next} reused after the crash (acknowledged up to {max})"
    );
    Ok(())
}

/// Starts the child, collects acknowledgements until enough arrived, SIGKILLs it mid-load and
/// returns every acknowledgement it printed.
fn run_and_kill(name: &str, address: &str) -> Result<Vec<(Revision, String)>> {
    let exe = std::env::current_exe().map_err(io_error("locating the test binary"))?;
    let mut child = Command::new(exe)
        .args([name, "--exact", "--nocapture"])
        .env(CHILD_ENV, address)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_error("starting the child test"))?;
    let (acks_tx, acks) = mpsc::channel();
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| violation("child stdout missing"))?;
    let reader = std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout);
        let mut line = String::new();
        while matches!(lines.read_line(&mut line), Ok(n) if n > 0) {
            // A line cut short by the kill has no newline and is no acknowledgement.
            if let (true, Some(ack)) = (line.ends_with('\n'), parse_ack(&line)) {
                if acks_tx.send(ack).is_err() {
                    break;
                }
            }
            line.clear();
        }
    });
    let mut stderr = child.stderr.take();
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(stderr) = stderr.as_mut() {
            let _ = stderr.read_to_string(&mut text);
        }
        text
    });

    let mut acked = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    let outcome = loop {
        if acked.len() >= KILL_AFTER {
            break Ok(());
        }
        match acks.recv_timeout(Duration::from_millis(200)) {
            Ok(ack) => acked.push(ack),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Err("the child stopped before it was killed".to_owned());
            }
            Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() > deadline => {
                break Err("the child was too slow".to_owned());
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    };
    let still_running = matches!(child.try_wait(), Ok(None));
    kill(&mut child)?;
    let _ = reader.join();
    acked.extend(acks.try_iter());
    let stderr = stderr_reader.join().unwrap_or_default();
    match outcome {
        Err(why) => Err(violation(format!(
            "{why} ({} acks); child stderr:\n{stderr}",
            acked.len()
        ))),
        Ok(()) if !still_running => Err(violation(format!(
            "the child exited on its own; stderr:\n{stderr}"
        ))),
        Ok(()) => Ok(acked),
    }
}

fn kill(child: &mut Child) -> Result<()> {
    // `Child::kill` is SIGKILL on Unix: no destructor, no flush, no orderly shutdown.
    match child.kill() {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {} // already exited
        Err(e) => return Err(violation(format!("killing the child: {e}"))),
    }
    child.wait().map_err(io_error("reaping the child"))?;
    Ok(())
}

fn parse_ack(line: &str) -> Option<(Revision, String)> {
    let rest = &line[line.find(ACK)? + ACK.len()..];
    let (revision, key) = rest.trim_end().split_once(' ')?;
    Some((revision.parse().ok()?, key.to_owned()))
}

/// Child half: writes until killed (or for at most a minute) and prints each acknowledgement.
/// A no-op when [`CHILD_ENV`] is absent, so normal test runs pass it.
pub async fn child<F: StoreFactory>() -> Result<()> {
    let Ok(address) = std::env::var(CHILD_ENV) else {
        return Ok(());
    };
    let store = F::open(&address).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut tasks = Vec::new();
    for t in 0..CHILD_WRITERS {
        let store = std::sync::Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let counter = format!("/crash/counter/{t}");
            let mut counter_rev = None;
            let mut i = 0u64;
            while tokio::time::Instant::now() < deadline {
                i += 1;
                let key = format!("/crash/items/{t}/{i}");
                let rev = store.create(&key, Bytes::from(vec![t as u8; 512])).await?;
                if !acknowledge(rev, &key) {
                    break;
                }
                let value = Bytes::from(i.to_string());
                let rev = match counter_rev {
                    None => store.create(&counter, value).await?,
                    Some(expected) => store.update(&counter, value, expected).await?,
                };
                counter_rev = Some(rev);
                if !acknowledge(rev, &counter) {
                    break;
                }
            }
            Ok::<_, StorageError>(())
        }));
    }
    for task in tasks {
        task.await
            .map_err(|e| violation(format!("child writer panicked: {e}")))??;
    }
    Ok(())
}

/// Prints one acknowledgement as a whole line; false once the parent stopped listening.
fn acknowledge(revision: Revision, key: &str) -> bool {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{ACK}{revision} {key}")
        .and_then(|()| out.flush())
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_acks_parse() {
        assert_eq!(test_name("sqlite_conformance", "child"), "child");
        assert_eq!(
            test_name("kapi_storage::sqlite::tests", "child"),
            "sqlite::tests::child"
        );
        assert_eq!(
            parse_ack("noise KAPI-ACK 42 /crash/items/1/2\n"),
            Some((42, "/crash/items/1/2".into()))
        );
        assert_eq!(parse_ack("KAPI-ACK x /k\n"), None);
        assert_eq!(parse_ack("test foo ... ok\n"), None);
    }
}
