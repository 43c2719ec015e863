//! The OTLP receiver of the tracing tests (`python/otlp_receiver.py`): a real gRPC
//! TraceService that logs every span it is sent; stopped by its PID on drop.

use std::path::PathBuf;
use std::process::Child;

use serde_json::Value;
use tempfile::TempDir;

use crate::process::start_python_helper;
use crate::{free_port, io_err, HarnessError};

/// A running OTLP trace receiver on 127.0.0.1.
pub struct OtlpReceiver {
    child: Child,
    /// Its gRPC port.
    pub port: u16,
    log: PathBuf,
    _dir: TempDir,
}

impl OtlpReceiver {
    /// Starts the receiver on a free port once it says it listens.
    pub fn start() -> Result<Self, HarnessError> {
        let dir = tempfile::Builder::new().prefix("kapi-otlp-").tempdir().map_err(io_err("creating the receiver dir"))?;
        let port = free_port()?;
        let log = dir.path().join("spans.jsonl");
        let port_arg = port.to_string();
        let child = start_python_helper("otlp_receiver.py", &[port_arg.as_ref(), log.as_os_str()], "the OTLP receiver")?;
        Ok(OtlpReceiver { child, port, log, _dir: dir })
    }

    /// Every span received so far, as the receiver logged it.
    pub fn spans(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
