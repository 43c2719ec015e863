//! haproxy in front of kapi replicas, configured by `deploy/haproxy/haproxy.cfg` (the file
//! deployments use), on a free loopback port; stopped by its PID.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::{free_port, io_err, which, HarnessError};

/// How long haproxy may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A haproxy process; dropping it kills the process.
pub struct Haproxy {
    _dir: TempDir,
    port: u16,
    child: Child,
}

impl Haproxy {
    /// Starts haproxy balancing over the replicas listening on `ports`, checking their
    /// `/readyz` with `ca` (the replicas' CA certificate).
    pub fn start(ports: &[u16], ca: &Path) -> Result<Self, HarnessError> {
        let bin = which("haproxy")?;
        let dir = tempfile::Builder::new().prefix("kapi-haproxy-").tempdir().map_err(io_err("creating the haproxy dir"))?;
        let template_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/haproxy/haproxy.cfg");
        let template = std::fs::read_to_string(&template_path).map_err(io_err(format!("reading {}", template_path.display())))?;
        let servers: String = ports.iter().enumerate().map(|(i, p)| format!("    server kapi-{i} 127.0.0.1:{p}\n")).collect();
        let config = template.replace("    # @SERVERS@\n", &servers);
        let config_path: PathBuf = dir.path().join("haproxy.cfg");
        std::fs::write(&config_path, config).map_err(io_err("writing haproxy.cfg"))?;
        let port = free_port()?;
        let stats = free_port()?;
        let log = std::fs::File::create(dir.path().join("haproxy.log")).map_err(io_err("creating the haproxy log"))?;
        let err = log.try_clone().map_err(io_err("cloning the haproxy log handle"))?;
        let child = Command::new(bin)
            .arg("-f")
            .arg(&config_path)
            .env("KAPI_LB_BIND", format!("127.0.0.1:{port}"))
            .env("KAPI_LB_STATS", format!("127.0.0.1:{stats}"))
            .env("KAPI_CA_FILE", ca)
            .env("KAPI_CHECK_HOST", "localhost")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(io_err("spawning haproxy"))?;
        let mut haproxy = Self { _dir: dir, port, child };
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(haproxy);
            }
            if let Ok(Some(status)) = haproxy.child.try_wait() {
                return Err(HarnessError::ExitedEarly { status: status.to_string(), log: haproxy.log() });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(HarnessError::StartTimeout { timeout: START_TIMEOUT, log: haproxy.log() })
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// What haproxy printed.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("haproxy.log")).unwrap_or_default()
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
