//! `turnstone:plugin/process`: spawning granted programs with streamed output.
//! Children run in their own process group with a scrubbed environment; dropping
//! the resource (or the whole store, on cancel) kills the group.

use crate::bindings::v0_1_0::host::turnstone::plugin::process::{
    self as wit, Command, ExitStatus, OutputChunk, ProcessError, StreamKind,
};
use crate::capability::Access;
use crate::host::denial_to_wit;
use crate::state::HostState;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use wasmtime::component::Resource;

/// Host side of the `child` resource.
pub struct ChildProcess {
    child: tokio::process::Child,
    pgid: Option<u32>,
    output: mpsc::Receiver<OutputChunk>,
    status: Option<ExitStatus>,
}

impl ChildProcess {
    fn kill_group(&mut self) {
        if self.status.is_none()
            && let Some(pgid) = self
                .pgid
                .and_then(|p| rustix::process::Pid::from_raw(p as i32))
        {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.kill_group();
    }
}

fn pump(
    mut reader: impl AsyncRead + Unpin + Send + 'static,
    kind: StreamKind,
    tx: mpsc::Sender<OutputChunk>,
) {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 8192];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let chunk = OutputChunk {
                        stream: kind,
                        data: buf[..n].to_vec(),
                    };
                    if tx.send(chunk).await.is_err() {
                        break;
                    }
                }
            }
        }
    });
}

/// Baseline variables every child gets so programs resolve and print sanely.
const BASE_ENV: &[&str] = &["PATH", "LANG", "TERM"];

async fn spawn(state: &mut HostState, cmd: Command) -> Result<ChildProcess, ProcessError> {
    let caps = &state.plugin.caps;
    let deny = |d: crate::capability::Denial| {
        state.plugin.counters.denial();
        tracing::warn!(plugin = %state.plugin.name, "{d}");
        ProcessError::Denied(denial_to_wit(&d))
    };
    caps.check_exec(&cmd.program).map_err(deny)?;
    for (name, _) in &cmd.env {
        caps.check_env(name).map_err(deny)?;
    }
    if let Some(cwd) = &cmd.cwd {
        let path = std::fs::canonicalize(cwd)
            .map_err(|e| ProcessError::SpawnFailed(format!("working directory {cwd}: {e}")))?;
        caps.check_path(&path, Access::ReadOnly).map_err(deny)?;
    }
    let mut c = tokio::process::Command::new(&cmd.program);
    c.args(&cmd.args)
        .env_clear()
        .stdin(if cmd.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for name in BASE_ENV {
        if let Some(v) = std::env::var_os(name) {
            c.env(name, v);
        }
    }
    c.envs(cmd.env.iter().map(|(k, v)| (k, v)));
    match &cmd.cwd {
        Some(cwd) => c.current_dir(cwd),
        // Never inherit the host's cwd: use the first granted directory, else /.
        None => c.current_dir(
            caps.dirs()
                .first()
                .map(|d| d.path.as_path())
                .unwrap_or(Path::new("/")),
        ),
    };
    let mut child = c
        .spawn()
        .map_err(|e| ProcessError::SpawnFailed(format!("{}: {e}", cmd.program)))?;
    if let (Some(input), Some(mut stdin)) = (cmd.stdin, child.stdin.take()) {
        tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        });
    }
    let (tx, rx) = mpsc::channel(64);
    if let Some(out) = child.stdout.take() {
        pump(out, StreamKind::Stdout, tx.clone());
    }
    if let Some(err) = child.stderr.take() {
        pump(err, StreamKind::Stderr, tx);
    }
    Ok(ChildProcess {
        pgid: child.id(),
        child,
        output: rx,
        status: None,
    })
}

impl wit::Host for HostState {
    async fn spawn(
        &mut self,
        cmd: Command,
    ) -> wasmtime::Result<Result<Resource<ChildProcess>, ProcessError>> {
        match spawn(self, cmd).await {
            Ok(child) => Ok(Ok(self.table().push(child)?)),
            Err(e) => Ok(Err(e)),
        }
    }
}

impl wit::HostChild for HostState {
    async fn next_chunk(
        &mut self,
        child: Resource<ChildProcess>,
    ) -> wasmtime::Result<Option<OutputChunk>> {
        let child = self.table().get_mut(&child)?;
        Ok(child.output.recv().await)
    }

    async fn wait(&mut self, child: Resource<ChildProcess>) -> wasmtime::Result<ExitStatus> {
        let child = self.table().get_mut(&child)?;
        if let Some(s) = child.status {
            return Ok(s);
        }
        // Drain remaining output first so pipes never block the child.
        while child.output.recv().await.is_some() {}
        let status = child.child.wait().await?;
        let status = match (status.code(), status.signal()) {
            (Some(code), _) => ExitStatus::Exited(code),
            (None, Some(sig)) => ExitStatus::Signaled(sig),
            (None, None) => ExitStatus::Exited(-1),
        };
        child.status = Some(status);
        Ok(status)
    }

    async fn kill(&mut self, child: Resource<ChildProcess>) -> wasmtime::Result<()> {
        self.table().get_mut(&child)?.kill_group();
        Ok(())
    }

    async fn id(&mut self, child: Resource<ChildProcess>) -> wasmtime::Result<u32> {
        Ok(self.table().get(&child)?.pgid.unwrap_or(0))
    }

    async fn drop(&mut self, child: Resource<ChildProcess>) -> wasmtime::Result<()> {
        // Dropping kills the group (see `Drop for ChildProcess`).
        self.table().delete(child)?;
        Ok(())
    }
}
