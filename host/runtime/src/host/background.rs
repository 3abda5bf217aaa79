//! Background processes (`process.spawn-background`): children that outlive the
//! call that started them, owned by one session of one plugin. Their output is
//! buffered on the host (bounded; the oldest unread bytes are dropped first)
//! until the plugin reads it. Unloading the plugin kills them all.

use super::process::{ChildProcess, exit_status};
use crate::bindings::v0_1_0::host::turnstone::plugin::process::{
    BackgroundOutput, ExitStatus, StreamKind,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// Most background processes one session may keep (running or unread).
pub const MAX_PER_SESSION: usize = 8;
/// Unread output kept per process and stream before the oldest bytes go.
pub const MAX_UNREAD: usize = 1 << 20;

#[derive(Default)]
struct Buffer {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    dropped: u64,
    status: Option<ExitStatus>,
}

impl Buffer {
    fn push(&mut self, kind: StreamKind, data: &[u8]) {
        let buf = match kind {
            StreamKind::Stdout => &mut self.stdout,
            StreamKind::Stderr => &mut self.stderr,
        };
        buf.extend_from_slice(data);
        if buf.len() > MAX_UNREAD {
            let excess = buf.len() - MAX_UNREAD;
            buf.drain(..excess);
            self.dropped += excess as u64;
        }
    }
}

struct Entry {
    session: String,
    pgid: Option<u32>,
    buffer: Arc<Mutex<Buffer>>,
    task: tokio::task::JoinHandle<()>,
}

fn lock(b: &Mutex<Buffer>) -> std::sync::MutexGuard<'_, Buffer> {
    b.lock().unwrap_or_else(|p| p.into_inner())
}

impl Entry {
    fn kill(&self) {
        if lock(&self.buffer).status.is_none()
            && let Some(pgid) = self
                .pgid
                .and_then(|p| rustix::process::Pid::from_raw(p as i32))
        {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.kill();
        self.task.abort();
    }
}

/// One plugin's background processes.
#[derive(Default)]
pub struct BackgroundProcesses {
    entries: Mutex<HashMap<u32, Entry>>,
    next: AtomicU32,
}

/// Why a background process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum BackgroundError {
    /// The session already keeps [`MAX_PER_SESSION`] processes.
    #[error(
        "this session already has {MAX_PER_SESSION} background processes; kill one (or read a finished one to completion) first"
    )]
    TooMany,
}

impl BackgroundProcesses {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checks the per-session cap before a spawn.
    pub(crate) fn admit(&self, session: &str) -> Result<(), BackgroundError> {
        let n = self
            .entries()
            .values()
            .filter(|e| e.session == session)
            .count();
        if n >= MAX_PER_SESSION {
            return Err(BackgroundError::TooMany);
        }
        Ok(())
    }

    /// Takes ownership of a spawned child; returns its handle.
    pub(crate) fn adopt(&self, session: &str, mut child: ChildProcess) -> u32 {
        let handle = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let buffer = Arc::new(Mutex::new(Buffer::default()));
        let pgid = child.pgid;
        let buf = buffer.clone();
        let task = tokio::spawn(async move {
            while let Some(chunk) = child.output.recv().await {
                lock(&buf).push(chunk.stream, &chunk.data);
            }
            let status = match child.child.wait().await {
                Ok(s) => exit_status(s),
                Err(_) => ExitStatus::Exited(-1),
            };
            child.mark_exited(status);
            lock(&buf).status = Some(status);
        });
        self.entries().insert(
            handle,
            Entry {
                session: session.to_string(),
                pgid,
                buffer,
                task,
            },
        );
        handle
    }

    /// Output since the last read. A finished process whose output has been
    /// read completely is forgotten after this read.
    pub(crate) fn read(&self, session: &str, handle: u32) -> Option<BackgroundOutput> {
        let mut entries = self.entries();
        let entry = entries.get(&handle).filter(|e| e.session == session)?;
        let out = {
            let mut b = lock(&entry.buffer);
            BackgroundOutput {
                stdout: std::mem::take(&mut b.stdout),
                stderr: std::mem::take(&mut b.stderr),
                dropped: std::mem::take(&mut b.dropped),
                status: b.status,
            }
        };
        if out.status.is_some() {
            entries.remove(&handle);
        }
        Some(out)
    }

    /// Kills a process group; false when the handle is unknown to `session`.
    pub(crate) fn kill(&self, session: &str, handle: u32) -> bool {
        let entries = self.entries();
        match entries.get(&handle).filter(|e| e.session == session) {
            Some(e) => {
                e.kill();
                true
            }
            None => false,
        }
    }
}
