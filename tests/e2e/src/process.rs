//! Bounded child processes: every client command the tests run has a deadline.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::HarnessError;

/// Runs `cmd` to completion, capturing stdout and stderr, and kills it (by its own PID) when it
/// outlives `timeout`.
pub fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Result<Output, HarnessError> {
    let description = format!("{cmd:?}");
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| HarnessError::Io { context: format!("spawning {description}"), source })?;
    let stdout = child.stdout.take().map(reader_thread);
    let stderr = child.stderr.take().map(reader_thread);
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(HarnessError::Timeout { command: description, timeout });
            }
            Err(source) => return Err(HarnessError::Io { context: format!("waiting for {description}"), source }),
        }
    };
    let collect = |h: Option<std::thread::JoinHandle<Vec<u8>>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
    Ok(Output { status, stdout: collect(stdout), stderr: collect(stderr) })
}

fn reader_thread(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        buf
    })
}

/// Convenience accessors for command output in assertions.
pub trait OutputExt {
    fn stdout_str(&self) -> String;
    fn stderr_str(&self) -> String;
    /// Panics with both streams unless the command succeeded; returns stdout.
    fn ok(&self, what: &str) -> String;
    /// (succeeded, stdout, stderr), for checks of a command that may fail.
    fn outcome(&self) -> (bool, String, String);
}

impl OutputExt for Output {
    fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    fn stderr_str(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    fn ok(&self, what: &str) -> String {
        assert!(
            self.status.success(),
            "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout_str(),
            self.stderr_str()
        );
        self.stdout_str()
    }

    fn outcome(&self) -> (bool, String, String) {
        (self.status.success(), self.stdout_str(), self.stderr_str())
    }
}

/// A long-running client (for example `kubectl get --watch`) whose stdout is read line by line
/// while it runs. Dropping it kills the process by its PID.
pub struct Streaming {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: mpsc::Receiver<Vec<u8>>,
}

impl Streaming {
    pub fn spawn(cmd: &mut Command) -> Result<Self, HarnessError> {
        let description = format!("{cmd:?}");
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| HarnessError::Io { context: format!("spawning {description}"), source })?;
        let (tx, lines) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let (err_tx, stderr) = mpsc::channel();
        if let Some(mut err) = child.stderr.take() {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = err.read_to_end(&mut buf);
                let _ = err_tx.send(buf);
            });
        }
        Ok(Self { child, lines, seen: Vec::new(), stderr })
    }

    /// Waits (bounded) for a stdout line matching `pred`; returns it. Lines read on the way are
    /// kept for [`Streaming::seen`].
    pub fn wait_for_line(&mut self, timeout: Duration, pred: impl Fn(&str) -> bool) -> Option<String> {
        if let Some(hit) = self.seen.iter().find(|l| pred(l)) {
            return Some(hit.clone());
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = pred(&line);
                    self.seen.push(line.clone());
                    if hit {
                        return Some(line);
                    }
                }
                Err(_) => return None,
            }
        }
    }

    /// Every stdout line read so far.
    pub fn seen(&self) -> &[String] {
        &self.seen
    }

    /// Waits (bounded) for the process to exit on its own.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
                _ => return None,
            }
        }
    }

    /// Kills the process and returns its stderr (for failure messages).
    pub fn stop(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Bounded: a grandchild may still hold the pipe open.
        self.stderr
            .recv_timeout(Duration::from_secs(2))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }
}

impl Drop for Streaming {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts one of the Python helpers of `python/` (a webhook, a fake kubelet) with `args` and
/// waits until it prints its `ready` line; a helper that says anything else is killed and
/// reported, with `what` naming it.
pub(crate) fn start_python_helper(script: &str, args: &[&std::ffi::OsStr], what: &str) -> Result<Child, HarnessError> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("python").join(script);
    let mut child = Command::new("python3")
        .arg(path)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|source| HarnessError::Io { context: format!("starting {what}"), source })?;
    let mut line = String::new();
    if let Some(stdout) = child.stdout.take() {
        if let Err(source) = BufReader::new(stdout).read_line(&mut line) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(HarnessError::Io { context: format!("reading the output of {what}"), source });
        }
    }
    if line.trim() != "ready" {
        let _ = child.kill();
        let _ = child.wait();
        return Err(HarnessError::Io { context: format!("{what} did not start"), source: std::io::Error::other(line) });
    }
    Ok(child)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_output_and_times_out() {
        let out = run_with_timeout(Command::new("sh").args(["-c", "echo hi; echo err >&2"]), Duration::from_secs(10))
            .expect("sh runs");
        assert_eq!(out.stdout_str(), "hi\n");
        assert_eq!(out.stderr_str(), "err\n");
        let slow = run_with_timeout(Command::new("sleep").arg("5"), Duration::from_millis(200));
        assert!(matches!(slow, Err(HarnessError::Timeout { .. })));
    }

    #[test]
    fn streaming_reads_lines_as_they_come() {
        let mut s = Streaming::spawn(Command::new("sh").args(["-c", "echo one; sleep 0.2; echo two; sleep 30"]))
            .expect("sh runs");
        assert_eq!(s.wait_for_line(Duration::from_secs(10), |l| l == "two").as_deref(), Some("two"));
        assert_eq!(s.seen(), ["one", "two"]);
        assert!(s.wait_for_line(Duration::from_millis(200), |l| l == "three").is_none());
        assert!(s.wait_exit(Duration::from_millis(100)).is_none());
        s.stop();
    }
}


/// Client processes (curl) a fault injector may cut: each is registered by its PID while it
/// runs and unregistered before it is reaped, so [`Connections::cut`] only ever signals live
/// children of this process (never a reused PID).
#[derive(Debug, Default)]
pub struct Connections {
    pids: std::sync::Mutex<std::collections::BTreeSet<u32>>,
}

impl Connections {
    /// Spawns `cmd` (stdout and stderr piped) and registers it; call [`Connections::forget`]
    /// before waiting for it.
    pub fn spawn(&self, cmd: &mut Command) -> Result<Child, HarnessError> {
        let mut pids = self.pids.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| HarnessError::Io { context: format!("spawning {cmd:?}"), source })?;
        pids.insert(child.id());
        Ok(child)
    }

    /// Unregisters `child` (before it is waited for).
    pub fn forget(&self, child: &Child) {
        self.pids.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&child.id());
    }

    /// Runs `cmd` to completion while registered (curl's own `--max-time` bounds it).
    pub fn run(&self, cmd: &mut Command) -> Result<Output, HarnessError> {
        let mut child = self.spawn(cmd)?;
        let stdout = child.stdout.take().map(reader_thread);
        let stderr = child.stderr.take().map(reader_thread);
        let collect = |h: Option<std::thread::JoinHandle<Vec<u8>>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
        // The pipes close when the process ends: only then is it unregistered and reaped.
        let (out, err) = (collect(stdout), collect(stderr));
        self.forget(&child);
        let status = child.wait().map_err(|source| HarnessError::Io { context: "waiting for curl".into(), source })?;
        Ok(Output { status, stdout: out, stderr: err })
    }

    /// SIGKILLs every registered client (their connections drop mid-request or mid-stream);
    /// how many.
    pub fn cut(&self) -> usize {
        let pids = self.pids.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if pids.is_empty() {
            return 0;
        }
        let mut kill = Command::new("kill");
        kill.arg("-KILL").args(pids.iter().map(u32::to_string)).stdout(Stdio::null()).stderr(Stdio::null());
        let _ = kill.status();
        pids.len()
    }
}
