//! The log backend (`--audit-log-path`): one JSON event per line, to a file or stdout (`-`),
//! rotated as kube's lumberjack rotates (`--audit-log-maxsize` megabytes, then the file is
//! renamed with its time and a new one started; `--audit-log-maxbackup` old files kept,
//! `--audit-log-maxage` days).
//!
//! Writing happens on a thread of its own, never on an async worker. `blocking` mode (kube's
//! default for the log backend) waits until an event is written before the request goes on;
//! `batch` queues it (bounded) and goes on. The writer group-commits: it writes everything
//! queued in one call, then wakes every request waiting on it. It never spins: a writer
//! looking for the next event between yields of the CPU stays runnable under load and takes
//! a fair share of the 2 cores from the request workers (half of its time was `sched_yield`).
//! In blocking mode it sleeps as soon as the queue is empty, and the events queued while it
//! wakes and writes go in its next write. In batch mode, after a write it waits [`BATCH_WAIT`]
//! before it looks again, so that under load a queued event seldom has to wake it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// `--audit-log-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Each event is written before its request goes on.
    Blocking,
    /// Each event is written before its request goes on, and a failed write fails the request.
    BlockingStrict,
    /// Events are queued and written in the background.
    Batch,
}

impl std::str::FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "blocking" => Ok(Mode::Blocking),
            "blocking-strict" => Ok(Mode::BlockingStrict),
            "batch" => Ok(Mode::Batch),
            other => Err(format!("invalid audit log mode {other:?}, allowed modes are \"batch\", \"blocking\", \"blocking-strict\"")),
        }
    }
}

/// The `--audit-log-*` flags.
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// `--audit-log-path` (`-` for stdout).
    pub path: PathBuf,
    /// `--audit-log-maxsize`, megabytes; 0: no rotation.
    pub max_size_mb: u64,
    /// `--audit-log-maxbackup`; 0: keep all.
    pub max_backups: usize,
    /// `--audit-log-maxage`, days; 0: no age limit.
    pub max_age_days: u64,
    /// `--audit-log-mode`.
    pub mode: Mode,
}

/// How many events batch mode queues before requests wait (kube's batch buffer).
const BATCH_BUFFER: usize = 10_000;
/// Batch mode: how long the writer waits after a write before it takes what has queued
/// since (it sleeps until the next event when nothing has). No request waits on it; the events
/// of a busy server go out in a few writes a millisecond, without a wake-up per event.
const BATCH_WAIT: Duration = Duration::from_millis(2);
/// At most this many events go into one write.
const MAX_BATCH: usize = 512;

struct Entry {
    line: Vec<u8>,
    done: Option<oneshot::Sender<std::io::Result<()>>>,
}

/// The backend: cheap to clone, shared by every request.
#[derive(Clone)]
pub struct LogBackend {
    queue: mpsc::Sender<Entry>,
    mode: Mode,
}

impl LogBackend {
    /// Opens the log (creating its directory) and starts its writer thread.
    pub fn start(options: LogOptions) -> std::io::Result<LogBackend> {
        let sink = Sink::open(&options)?;
        let (queue, entries) = mpsc::channel(BATCH_BUFFER);
        let wait = if options.mode == Mode::Batch { BATCH_WAIT } else { Duration::ZERO };
        std::thread::Builder::new().name("audit-log".into()).spawn(move || sink.run(entries, wait))?;
        Ok(LogBackend { queue, mode: options.mode })
    }

    /// Writes `event` as the mode says; an error only in blocking-strict mode.
    pub async fn write(&self, event: &Value) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(event).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.write_line(line).await
    }

    /// Writes one line (an event serialized, newline included) as the mode says.
    pub async fn write_line(&self, line: Vec<u8>) -> std::io::Result<()> {
        match self.mode {
            Mode::Batch => {
                let _ = self.queue.send(Entry { line, done: None }).await;
                Ok(())
            }
            Mode::Blocking | Mode::BlockingStrict => {
                let (done, written) = oneshot::channel();
                if self.queue.send(Entry { line, done: Some(done) }).await.is_err() {
                    return self.failed(std::io::Error::other("the audit log writer stopped"));
                }
                match written.await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => self.failed(e),
                    Err(_) => self.failed(std::io::Error::other("the audit log writer stopped")),
                }
            }
        }
    }

    fn failed(&self, e: std::io::Error) -> std::io::Result<()> {
        tracing::error!("writing the audit log: {e}");
        if self.mode == Mode::BlockingStrict {
            Err(e)
        } else {
            Ok(())
        }
    }
}

/// The writer thread's end: the open file and what rotation needs.
struct Sink {
    out: Out,
    written: u64,
    options: LogOptions,
}

enum Out {
    Stdout,
    File(File),
}

impl Sink {
    fn open(options: &LogOptions) -> std::io::Result<Sink> {
        if options.path == Path::new("-") {
            return Ok(Sink { out: Out::Stdout, written: 0, options: options.clone() });
        }
        if let Some(dir) = options.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(&options.path)?;
        let written = file.metadata()?.len();
        Ok(Sink { out: Out::File(file), written, options: options.clone() })
    }

    /// Writes what is queued in one go: under load many events wait together, and one write
    /// call (and one wake-up of each waiting request) serves them all. After a write, waits
    /// `wait` (batch mode) before it looks again.
    fn run(mut self, mut entries: mpsc::Receiver<Entry>, wait: Duration) {
        let mut batch: Vec<Entry> = Vec::new();
        loop {
            let first = match entries.try_recv() {
                Ok(entry) => entry,
                Err(mpsc::error::TryRecvError::Disconnected) => return,
                // Nothing queued: sleep until an event comes (its sender wakes the writer).
                Err(mpsc::error::TryRecvError::Empty) => match entries.blocking_recv() {
                    Some(entry) => entry,
                    None => return,
                },
            };
            batch.push(first);
            while batch.len() < MAX_BATCH {
                match entries.try_recv() {
                    Ok(entry) => batch.push(entry),
                    Err(_) => break,
                }
            }
            let result = self.write_batch(&batch);
            for entry in batch.drain(..) {
                if let Some(done) = entry.done {
                    let _ = done.send(result.as_ref().map(|_| ()).map_err(|e| std::io::Error::new(e.kind(), e.to_string())));
                }
            }
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
        }
    }

    fn write_batch(&mut self, batch: &[Entry]) -> std::io::Result<()> {
        let max = self.options.max_size_mb.saturating_mul(1024 * 1024);
        let mut pending: Vec<u8> = Vec::new();
        for entry in batch {
            // A rotation falls between events, never inside one.
            if max > 0 && self.written + (pending.len() + entry.line.len()) as u64 > max && self.written + pending.len() as u64 > 0 {
                self.flush(&pending)?;
                pending.clear();
                self.rotate()?;
            }
            pending.extend_from_slice(&entry.line);
        }
        self.flush(&pending)
    }

    fn flush(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        match &mut self.out {
            Out::Stdout => std::io::stdout().lock().write_all(bytes)?,
            Out::File(file) => file.write_all(bytes)?,
        }
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// lumberjack's rotation: the current file becomes `<name>-<UTC time>.<ext>`, a new file
    /// starts, and old backups beyond the count or the age go.
    fn rotate(&mut self) -> std::io::Result<()> {
        let path = self.options.path.clone();
        let now = time::OffsetDateTime::now_utc();
        let stamp = format!(
            "{:04}-{:02}-{:02}T{:02}-{:02}-{:02}.{:03}",
            now.year(),
            u8::from(now.month()),
            now.day(),
            now.hour(),
            now.minute(),
            now.second(),
            now.millisecond()
        );
        let backup = backup_name(&path, &stamp);
        std::fs::rename(&path, &backup)?;
        self.out = Out::File(OpenOptions::new().create(true).append(true).open(&path)?);
        self.written = 0;
        self.prune();
        Ok(())
    }

    fn prune(&self) {
        let path = &self.options.path;
        let (Some(dir), Some(stem)) = (path.parent(), path.file_stem().and_then(|s| s.to_str())) else { return };
        let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
        let prefix = format!("{stem}-");
        let Ok(read) = std::fs::read_dir(dir) else { return };
        let mut backups: Vec<(std::time::SystemTime, PathBuf)> = read
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with(&prefix)))
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .collect();
        backups.sort();
        backups.reverse();
        let max_age = Duration::from_secs(self.options.max_age_days * 24 * 3600);
        for (i, (modified, file)) in backups.iter().enumerate() {
            let too_many = self.options.max_backups > 0 && i >= self.options.max_backups;
            let too_old = self.options.max_age_days > 0 && modified.elapsed().is_ok_and(|age| age > max_age);
            if too_many || too_old {
                let _ = std::fs::remove_file(file);
            }
        }
    }
}

/// `audit.log` -> `audit-<stamp>.log`.
fn backup_name(path: &Path, stamp: &str) -> PathBuf {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("audit");
    let name = match path.extension().and_then(|e| e.to_str()) {
        Some(ext) => format!("{stem}-{stamp}.{ext}"),
        None => format!("{stem}-{stamp}"),
    };
    path.with_file_name(name)
}
