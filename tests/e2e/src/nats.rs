//! A real nats-server (JetStream on) on a free loopback port, stopped by its PID.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::{io_err, which, HarnessError};

/// How long nats-server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A nats-server process; dropping it kills the process.
pub struct NatsServer {
    dir: TempDir,
    port: u16,
    child: Option<Child>,
}

impl NatsServer {
    /// Starts `nats-server -js` on a free port (scripts/test.sh installs the pinned build).
    pub fn start() -> Result<Self, HarnessError> {
        let dir = tempfile::Builder::new().prefix("kapi-nats-").tempdir().map_err(io_err("creating the NATS dir"))?;
        let port = free_port()?;
        let mut nats = Self { dir, port, child: None };
        nats.spawn()?;
        Ok(nats)
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// SIGKILL, as a crash or an OOM kill would end it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends a signal ("STOP", "CONT") by PID through the `kill` command: SIGSTOP freezes it
    /// with its connections open, as a stalled host would.
    pub fn signal(&self, sig: &str) -> Result<(), HarnessError> {
        let pid = self.child.as_ref().map(Child::id).ok_or(HarnessError::NotRunning)?.to_string();
        let out = crate::run_with_timeout(Command::new("kill").arg(format!("-{sig}")).arg(&pid), Duration::from_secs(10))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(HarnessError::Io { context: format!("kill -{sig} {pid}"), source: std::io::Error::other(String::from_utf8_lossy(&out.stderr).into_owned()) })
        }
    }

    /// Starts it again on the same port and storage directory.
    pub fn restart(&mut self) -> Result<(), HarnessError> {
        self.kill();
        self.spawn()
    }

    /// The JetStream storage directory (`-sd`): what nats-server wrote to disk.
    pub fn store_dir(&self) -> PathBuf {
        self.dir.path().join("jetstream")
    }

    /// Subscribes to every subject (`>`) over NATS's text protocol and records the raw bytes
    /// the server sends until the returned tap is stopped: what any client of this NATS could
    /// read of kapi's traffic.
    pub fn tap(&self) -> Result<NatsTap, HarnessError> {
        use std::io::{Read, Write};
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", self.port)).map_err(io_err("connecting to nats-server"))?;
        conn.write_all(b"CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true}\r\nSUB > 1\r\nPING\r\n")
            .map_err(io_err("subscribing to >"))?;
        conn.set_read_timeout(Some(Duration::from_millis(100))).map_err(io_err("setting a read timeout"))?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (stopped, mut reader) = (stop.clone(), conn.try_clone().map_err(io_err("cloning the NATS connection"))?);
        let thread = std::thread::spawn(move || {
            let (mut seen, mut buf) = (Vec::new(), [0u8; 16384]);
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                match reader.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        seen.extend_from_slice(&buf[..n]);
                        // The server's keep-alive: answered so the subscription stays.
                        if seen.ends_with(b"PING\r\n") {
                            let _ = reader.write_all(b"PONG\r\n");
                        }
                    }
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                    Err(_) => break,
                }
            }
            seen
        });
        Ok(NatsTap { stop, thread: Some(thread), _conn: conn })
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("nats.log")
    }

    fn spawn(&mut self) -> Result<(), HarnessError> {
        let bin = which("nats-server")?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(io_err("opening the NATS log"))?;
        let err = log.try_clone().map_err(io_err("cloning the NATS log handle"))?;
        let child = Command::new(bin)
            .args(["-js", "-a", "127.0.0.1", "-p", &self.port.to_string(), "-sd"])
            .arg(self.dir.path().join("jetstream"))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(io_err("spawning nats-server"))?;
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
        Err(HarnessError::StartTimeout { timeout: START_TIMEOUT, log: std::fs::read_to_string(self.log_path()).unwrap_or_default() })
    }
}

/// A subscription to every subject, recording what arrives (see [`NatsServer::tap`]).
pub struct NatsTap {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<u8>>>,
    _conn: std::net::TcpStream,
}

impl NatsTap {
    /// Stops recording; every byte the server sent, protocol lines included.
    pub fn stop(mut self) -> Vec<u8> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default()
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port nothing listens on right now (the kernel's pick; it may be taken again before use,
/// which the caller's start-up check would reveal).
pub fn free_port() -> Result<u16, HarnessError> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).map_err(io_err("binding a probe port"))?;
    Ok(listener.local_addr().map_err(io_err("reading the probe port"))?.port())
}
