//! `turnstone:plugin/process`: spawning granted programs with streamed output.
//! Children run in their own process group with a scrubbed environment; dropping
//! the resource (or the whole store, on cancel) kills the group.

use crate::bindings::v0_1_0::host::turnstone::plugin::process::{
    self as wit, BackgroundOutput, ChunkWait, Command, ExitStatus, OutputChunk, ProcessError,
    StreamKind,
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
    pub(super) child: tokio::process::Child,
    pub(super) pgid: Option<u32>,
    pub(super) output: mpsc::Receiver<OutputChunk>,
    pub(super) status: Option<ExitStatus>,
    /// The sandbox's host side (its egress proxy), kept while it runs.
    pub(super) _sandbox: Option<turnstone_sandbox::Running>,
    /// How it is confined, for the capability audit.
    pub(super) confinement: String,
}

/// Converts an OS exit status.
pub(super) fn exit_status(status: std::process::ExitStatus) -> ExitStatus {
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitStatus::Exited(code),
        (None, Some(sig)) => ExitStatus::Signaled(sig),
        (None, None) => ExitStatus::Exited(-1),
    }
}

/// Variable names whose values look like credentials. They are never passed
/// from the host's environment to a child, whatever the grant says.
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    ["_KEY", "_SECRET", "_TOKEN", "_PAT", "_APIKEY"]
        .iter()
        .any(|s| n.ends_with(s))
        || [
            "PASSWORD",
            "PASSWD",
            "CREDENTIAL",
            "SECRET",
            "API_KEY",
            "AUTH",
        ]
        .iter()
        .any(|s| n.contains(s))
        || n.starts_with("AWS_")
        || n == "DATABASE_URL"
        || n.starts_with("TURNSTONE_")
}

impl ChildProcess {
    /// Records the exit so dropping the handle does not signal a reused pgid.
    pub(super) fn mark_exited(&mut self, status: ExitStatus) {
        self.status = Some(status);
    }

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
    mut hints: Option<crate::sandboxing::DenialHints>,
) {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 8192];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    // A sandbox refusal reads like any failure to the
                    // program; the host says which grant would allow it.
                    // In the same chunk: a reader that stops at the exit
                    // must not miss it.
                    let mut data = buf[..n].to_vec();
                    if let Some(text) = hints.as_mut().and_then(|h| h.after(&buf[..n])) {
                        if !data.ends_with(b"\n") {
                            data.push(b'\n');
                        }
                        data.extend_from_slice(text.as_bytes());
                    }
                    let chunk = OutputChunk { stream: kind, data };
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

fn spawn(state: &mut HostState, cmd: Command) -> Result<ChildProcess, ProcessError> {
    let (program, args) = (cmd.program.clone(), cmd.args.clone());
    let result = spawn_for(&state.plugin, cmd, &state.audit);
    let sandbox = result.as_ref().ok().map(|c| c.confinement.clone());
    let denied = match &result {
        Ok(_) => None,
        Err(ProcessError::Denied(d)) => Some(format!(
            "{} denied: {}; {}",
            d.capability, d.detail, d.grant_hint
        )),
        Err(ProcessError::SpawnFailed(m)) => Some(format!("spawn failed: {m}")),
    };
    state.audit.process(&program, &args, denied, sandbox);
    result
}

/// Spawns `cmd` with `plugin`'s grants: the program, variables and working
/// directory must be granted; the child gets its own process group and a
/// scrubbed environment.
pub(crate) fn spawn_for(
    plugin: &crate::plugin::PluginContext,
    cmd: Command,
    audit: &crate::audit::AuditRecorder,
) -> Result<ChildProcess, ProcessError> {
    let caps = &plugin.caps;
    let deny = |d: crate::capability::Denial| {
        plugin.counters.denial();
        tracing::warn!(plugin = %plugin.name, "{d}");
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
        .kill_on_drop(true);
    for name in BASE_ENV {
        if let Some(v) = std::env::var_os(name) {
            c.env(name, v);
        }
    }
    // Granted names the host has a value for are inherited, minus anything
    // that looks like a credential; values the plugin sets itself win.
    for name in caps.env_names() {
        if !is_secret_name(name)
            && let Some(v) = std::env::var_os(name)
        {
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
    let mut sandbox =
        crate::sandboxing::prepare(plugin, audit).map_err(ProcessError::SpawnFailed)?;
    let confinement = match &sandbox {
        Some(_) => crate::sandboxing::describe(plugin.caps.has_http()),
        None => crate::sandboxing::OPTED_OUT.to_string(),
    };
    // Its own process group (killed as one); a sandboxed child gets its
    // own session instead, which is also a new group.
    match sandbox.as_mut() {
        Some(s) => s.install(&mut c),
        None => {
            c.process_group(0);
        }
    }
    let mut child = c.spawn().map_err(|e| {
        ProcessError::SpawnFailed(match sandbox {
            Some(_) => format!("{}: {e} (while entering the process sandbox)", cmd.program),
            None => format!("{}: {e}", cmd.program),
        })
    })?;
    let sandbox = match sandbox.map(turnstone_sandbox::Prepared::start).transpose() {
        Ok(s) => s,
        Err(e) => {
            if let Some(pid) = child
                .id()
                .and_then(|p| rustix::process::Pid::from_raw(p as i32))
            {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
            let _ = child.start_kill();
            return Err(ProcessError::SpawnFailed(e.to_string()));
        }
    };
    if let (Some(input), Some(mut stdin)) = (cmd.stdin, child.stdin.take()) {
        tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        });
    }
    let (tx, rx) = mpsc::channel(64);
    if let Some(out) = child.stdout.take() {
        pump(out, StreamKind::Stdout, tx.clone(), None);
    }
    if let Some(err) = child.stderr.take() {
        let hints = sandbox
            .is_some()
            .then(|| crate::sandboxing::DenialHints::new(plugin));
        pump(err, StreamKind::Stderr, tx, hints);
    }
    Ok(ChildProcess {
        pgid: child.id(),
        child,
        output: rx,
        status: None,
        _sandbox: sandbox,
        confinement,
    })
}

impl wit::Host for HostState {
    async fn spawn(
        &mut self,
        cmd: Command,
    ) -> wasmtime::Result<Result<Resource<ChildProcess>, ProcessError>> {
        match spawn(self, cmd) {
            Ok(child) => Ok(Ok(self.table().push(child)?)),
            Err(e) => Ok(Err(e)),
        }
    }

    async fn spawn_background(
        &mut self,
        cmd: Command,
    ) -> wasmtime::Result<Result<u32, ProcessError>> {
        let Some(session) = self.session_id.clone() else {
            return Ok(Err(ProcessError::SpawnFailed(
                "background processes can only be started by a tool call in a session".into(),
            )));
        };
        let plugin = self.plugin.clone();
        if let Err(e) = plugin.background.admit(&session) {
            return Ok(Err(ProcessError::SpawnFailed(e.to_string())));
        }
        Ok(spawn(self, cmd).map(|child| plugin.background.adopt(&session, child)))
    }

    async fn read_background(&mut self, handle: u32) -> wasmtime::Result<Option<BackgroundOutput>> {
        let session = self.session_id.clone().unwrap_or_default();
        Ok(self.plugin.background.read(&session, handle))
    }

    async fn kill_background(&mut self, handle: u32) -> wasmtime::Result<bool> {
        let session = self.session_id.clone().unwrap_or_default();
        Ok(self.plugin.background.kill(&session, handle))
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
        let status = exit_status(child.child.wait().await?);
        child.status = Some(status);
        Ok(status)
    }

    async fn kill(&mut self, child: Resource<ChildProcess>) -> wasmtime::Result<()> {
        self.table().get_mut(&child)?.kill_group();
        Ok(())
    }

    async fn next_chunk_timeout(
        &mut self,
        child: Resource<ChildProcess>,
        timeout_ms: u64,
    ) -> wasmtime::Result<ChunkWait> {
        let child = self.table().get_mut(&child)?;
        let wait = std::time::Duration::from_millis(timeout_ms);
        Ok(
            match tokio::time::timeout(wait, child.output.recv()).await {
                Ok(Some(chunk)) => ChunkWait::Chunk(chunk),
                Ok(None) => ChunkWait::Closed,
                Err(_) => ChunkWait::Pending,
            },
        )
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

/// What a command run to completion produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// stdout, then stderr lines prefixed `[stderr] `, as bash tools show them.
    pub output: String,
    /// The exit code (128 + signal when killed by one; -1 when it timed out).
    pub exit_code: i32,
    /// It ran out of time and its process group was killed.
    pub timed_out: bool,
}

/// Runs `cmd` with `plugin`'s grants to completion or `timeout` (then the
/// process group is killed), collecting at most `max_bytes` of output (the
/// end is kept). `cancel` stops it early.
pub(crate) async fn run_for(
    plugin: &crate::plugin::PluginContext,
    cmd: Command,
    timeout: std::time::Duration,
    max_bytes: usize,
    cancel: Option<&tokio_util::sync::CancellationToken>,
) -> Result<CommandOutput, ProcessError> {
    let mut child = spawn_for(plugin, cmd, &crate::audit::AuditRecorder::default())?;
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let collect = async {
        while let Some(chunk) = child.output.recv().await {
            let buf = match chunk.stream {
                StreamKind::Stdout => &mut stdout,
                StreamKind::Stderr => &mut stderr,
            };
            buf.extend_from_slice(&chunk.data);
            if buf.len() > 2 * max_bytes {
                buf.drain(..buf.len() - max_bytes);
            }
        }
        child.child.wait().await
    };
    let never = tokio_util::sync::CancellationToken::new();
    let cancel = cancel.unwrap_or(&never);
    let status = tokio::select! {
        s = tokio::time::timeout(timeout, collect) => s,
        () = cancel.cancelled() => Ok(Err(std::io::Error::other("cancelled"))),
    };
    let (exit_code, timed_out) = match status {
        Ok(Ok(st)) => {
            let code = match exit_status(st) {
                ExitStatus::Exited(c) => c,
                ExitStatus::Signaled(s) => 128 + s,
            };
            child.mark_exited(exit_status(st));
            (code, false)
        }
        Ok(Err(e)) => return Err(ProcessError::SpawnFailed(e.to_string())),
        // Dropping `child` kills the group.
        Err(_) => (-1, true),
    };
    let mut output = String::from_utf8_lossy(&stdout).into_owned();
    for line in String::from_utf8_lossy(&stderr).lines() {
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        output.push_str("[stderr] ");
        output.push_str(line);
        output.push('\n');
    }
    if output.len() > max_bytes {
        let mut start = output.len() - max_bytes;
        while !output.is_char_boundary(start) {
            start += 1;
        }
        output.drain(..start);
    }
    Ok(CommandOutput {
        output,
        exit_code,
        timed_out,
    })
}
