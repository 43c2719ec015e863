//! Real etcd servers for tests (feature `conformance`): single members and clusters on
//! 127.0.0.1 with free ports and temporary data directories, stopped by PID when dropped.
//!
//! The binary is `$KAPI_ETCD` or `etcd` on `PATH` (`scripts/test.sh` unpacks Debian's etcd
//! 3.4 and puts it first on `PATH`). Members run with `--max-request-bytes` of 3 MiB so that objects of
//! Kubernetes' maximum size fit, as kubeadm configures etcd.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Result, StorageError};

/// How long a member may take to answer `/health` after it starts.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// The etcd binary the tests run.
pub fn etcd_binary() -> PathBuf {
    std::env::var_os("KAPI_ETCD").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("etcd"))
}

fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| StorageError::Backend(format!("no free port: {e}")))?;
    listener.local_addr().map(|a| a.port()).map_err(|e| StorageError::Backend(e.to_string()))
}

fn failure(message: impl Into<String>) -> StorageError {
    StorageError::Backend(message.into())
}

/// One member's fixed identity: its name, ports and data directory survive restarts.
#[derive(Debug, Clone)]
struct MemberSpec {
    name: String,
    client_port: u16,
    peer_port: u16,
    data_dir: PathBuf,
}

impl MemberSpec {
    fn client_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }
}

/// A running etcd member process.
#[derive(Debug)]
struct Member {
    spec: MemberSpec,
    child: Option<Child>,
    stopped: bool,
}

impl Member {
    fn spawn(&mut self, initial_cluster: &str, state: &str) -> Result<()> {
        let spec = &self.spec;
        let log = std::fs::File::create(spec.data_dir.with_extension("log")).map_err(|e| failure(format!("etcd log file: {e}")))?;
        let child = Command::new(etcd_binary())
            .args(["--name", &spec.name])
            .arg("--data-dir")
            .arg(&spec.data_dir)
            .args(["--listen-client-urls", &spec.client_url(), "--advertise-client-urls", &spec.client_url()])
            .args(["--listen-peer-urls", &spec.peer_url(), "--initial-advertise-peer-urls", &spec.peer_url()])
            .args(["--initial-cluster", initial_cluster, "--initial-cluster-state", state, "--initial-cluster-token", "kapi-test"])
            .args(["--max-request-bytes", "3145728", "--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(["--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|e| failure(format!("cannot start {} (scripts/test.sh installs etcd; or set KAPI_ETCD): {e}", etcd_binary().display())))?;
        self.child = Some(child);
        self.stopped = false;
        Ok(())
    }

    fn signal(&mut self, signal: &str) -> Result<()> {
        let Some(child) = &self.child else { return Err(failure(format!("member {} is not running", self.spec.name))) };
        let status = Command::new("kill").arg(format!("-{signal}")).arg(child.id().to_string()).status();
        match status {
            Ok(s) if s.success() => Ok(()),
            other => Err(failure(format!("kill -{signal} {}: {other:?}", child.id()))),
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            if self.stopped {
                _ = Command::new("kill").arg("-CONT").arg(child.id().to_string()).status();
            }
            _ = child.kill();
            _ = child.wait();
        }
        self.stopped = false;
    }

    /// Whether the member answers `/health` with a leader.
    fn healthy(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect_timeout(&([127, 0, 0, 1], self.spec.client_port).into(), Duration::from_millis(500)) else {
            return false;
        };
        _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let request = format!("GET /health HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n", self.spec.client_port);
        if stream.write_all(request.as_bytes()).is_err() {
            return false;
        }
        let mut answer = String::new();
        _ = stream.read_to_string(&mut answer);
        answer.contains("\"health\":\"true\"")
    }

    /// The member's own id and the leader id it knows of, from the gRPC gateway's
    /// `POST /v3/maintenance/status` (ids are decimal strings there); None when it does not
    /// answer within a second (stopped, killed) or knows no leader.
    fn status(&self) -> Option<(String, String)> {
        let answer = self.status_answer()?;
        let own = json_string(&answer, "member_id")?;
        let leader = json_string(&answer, "leader").filter(|l| l != "0")?;
        Some((own, leader))
    }

    /// The raw answer to `POST /v3/maintenance/status`.
    fn status_answer(&self) -> Option<String> {
        if self.child.is_none() || self.stopped {
            return None;
        }
        let mut stream = TcpStream::connect_timeout(&([127, 0, 0, 1], self.spec.client_port).into(), Duration::from_millis(500)).ok()?;
        _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
        let request = format!(
            "POST /v3/maintenance/status HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}",
            self.spec.client_port
        );
        stream.write_all(request.as_bytes()).ok()?;
        let mut answer = String::new();
        _ = stream.read_to_string(&mut answer);
        Some(answer)
    }
}

/// The string value of the first `"name":"..."` in `text` (enough for etcd's status answer).
fn json_string(text: &str, name: &str) -> Option<String> {
    let start = text.find(&format!("\"{name}\":\""))? + name.len() + 4;
    let len = text[start..].find('"')?;
    Some(text[start..start + len].to_owned())
}

/// An etcd cluster of one or more members on loopback; every member is killed on drop.
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<Member>,
    initial_cluster: String,
    _dir: tempfile::TempDir,
}

impl EtcdCluster {
    /// A single-member etcd, ready to serve.
    pub fn single() -> Result<Self> {
        Self::start(1)
    }

    /// `size` members, started together and ready (a leader is elected) when this returns.
    pub fn start(size: usize) -> Result<Self> {
        let dir = tempfile::Builder::new().prefix("kapi-etcd-").tempdir().map_err(|e| failure(format!("temp dir: {e}")))?;
        let mut specs = Vec::new();
        for i in 0..size {
            specs.push(MemberSpec {
                name: format!("m{i}"),
                client_port: free_port()?,
                peer_port: free_port()?,
                data_dir: dir.path().join(format!("m{i}")),
            });
        }
        let initial_cluster = specs.iter().map(|s| format!("{}={}", s.name, s.peer_url())).collect::<Vec<_>>().join(",");
        let mut cluster =
            Self { members: specs.into_iter().map(|spec| Member { spec, child: None, stopped: false }).collect(), initial_cluster, _dir: dir };
        for i in 0..size {
            let initial = cluster.initial_cluster.clone();
            cluster.members[i].spawn(&initial, "new")?;
        }
        for i in 0..size {
            cluster.wait_healthy(i)?;
        }
        Ok(cluster)
    }

    /// Client URLs of every member.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.spec.client_url()).collect()
    }

    /// Number of members.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// Process ID of member `i`, while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members.get(i)?.child.as_ref().map(Child::id)
    }

    /// Waits until member `i` answers `/health` (it has a leader).
    pub fn wait_healthy(&self, i: usize) -> Result<()> {
        let member = &self.members[i];
        let deadline = Instant::now() + READY_WITHIN;
        while Instant::now() < deadline {
            if member.healthy() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = std::fs::read_to_string(member.spec.data_dir.with_extension("log")).unwrap_or_default();
        Err(failure(format!("etcd member {} not healthy within {READY_WITHIN:?}; its log:\n{log}", member.spec.name)))
    }

    /// Index of the current leader: the member that calls itself leader and that a majority
    /// of the cluster's members reports as leader. None while there is none (an election is
    /// under way, no quorum); stopped and killed members are not asked.
    pub fn leader(&self) -> Option<usize> {
        let statuses: Vec<Option<(String, String)>> = self.members.iter().map(Member::status).collect();
        statuses.iter().enumerate().find_map(|(i, status)| {
            let (own, leader) = status.as_ref()?;
            let backers = statuses.iter().flatten().filter(|(_, l)| l == own).count();
            (own == leader && backers > self.members.len() / 2).then_some(i)
        })
    }

    /// The revision of member `i`'s key-value store (its status answer's header), while it
    /// runs and answers: members of a healthy cluster agree within moments.
    pub fn revision(&self, i: usize) -> Option<u64> {
        json_string(&self.members[i].status_answer()?, "revision")?.parse().ok()
    }

    /// Waits (up to 30 s) until the cluster has a leader, and returns its index.
    pub fn wait_leader(&self) -> Result<usize> {
        let deadline = Instant::now() + READY_WITHIN;
        while Instant::now() < deadline {
            if let Some(i) = self.leader() {
                return Ok(i);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(failure(format!("no etcd leader within {READY_WITHIN:?}")))
    }

    /// SIGKILLs member `i` (its data directory stays, for [`Self::restart`]).
    pub fn kill(&mut self, i: usize) {
        self.members[i].kill();
    }

    /// SIGSTOPs member `i`: it holds its connections but answers nothing.
    pub fn pause(&mut self, i: usize) -> Result<()> {
        self.members[i].signal("STOP")?;
        self.members[i].stopped = true;
        Ok(())
    }

    /// SIGCONTs member `i`.
    pub fn resume(&mut self, i: usize) -> Result<()> {
        self.members[i].signal("CONT")?;
        self.members[i].stopped = false;
        Ok(())
    }

    /// Starts a killed member again on its data directory; it rejoins the cluster.
    pub fn restart(&mut self, i: usize) -> Result<()> {
        self.members[i].kill();
        let initial = self.initial_cluster.clone();
        self.members[i].spawn(&initial, "existing")
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for member in &mut self.members {
            member.kill();
        }
    }
}
