//! Running programs through the host (requires an `exec` grant).

use crate::CapabilityError;
use crate::bindings::turnstone::plugin0_1_0::process as wp;

pub use wp::{BackgroundOutput, ChunkWait, ExitStatus, OutputChunk, StreamKind};

/// Why a process could not be started.
#[derive(Debug)]
pub enum ProcessError {
    /// The program, a variable or the working directory is not granted.
    Denied(CapabilityError),
    /// The OS refused (e.g. program not found).
    SpawnFailed(String),
}

impl std::fmt::Display for ProcessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProcessError::Denied(e) => f.write_str(&crate::describe_denial(e)),
            ProcessError::SpawnFailed(m) => write!(f, "cannot start process: {m}"),
        }
    }
}

impl std::error::Error for ProcessError {}

/// A process to start.
#[derive(Debug, Clone, Default)]
pub struct Command {
    program: String,
    args: Vec<String>,
    cwd: Option<String>,
    env: Vec<(String, String)>,
    stdin: Option<Vec<u8>>,
}

impl Command {
    /// A command running `program` (granted by name).
    pub fn new(program: impl Into<String>) -> Self {
        Self {
            program: program.into(),
            ..Self::default()
        }
    }

    /// Adds an argument.
    pub fn arg(mut self, a: impl Into<String>) -> Self {
        self.args.push(a.into());
        self
    }

    /// Sets the working directory (inside a granted directory).
    pub fn cwd(mut self, dir: impl Into<String>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Sets an environment variable (its name must be granted).
    pub fn env(mut self, k: impl Into<String>, v: impl Into<String>) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    /// Bytes for the child's stdin.
    pub fn stdin(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(data.into());
        self
    }

    fn into_wit(self) -> wp::Command {
        wp::Command {
            program: self.program,
            args: self.args,
            cwd: self.cwd,
            env: self.env,
            stdin: self.stdin,
        }
    }

    /// Starts the process.
    pub fn spawn(self) -> Result<Child, ProcessError> {
        wp::spawn(&self.into_wit())
            .map(Child)
            .map_err(ProcessError::from)
    }

    /// Starts the process in the background: it outlives this call and belongs
    /// to the calling session. Read it with [`read_background`].
    pub fn spawn_background(self) -> Result<u32, ProcessError> {
        wp::spawn_background(&self.into_wit()).map_err(ProcessError::from)
    }
}

impl From<wp::ProcessError> for ProcessError {
    fn from(e: wp::ProcessError) -> Self {
        match e {
            wp::ProcessError::Denied(e) => ProcessError::Denied(e),
            wp::ProcessError::SpawnFailed(m) => ProcessError::SpawnFailed(m),
        }
    }
}

/// Output of a background process since the previous read; `None` when this
/// session has no such process (never started, or finished and fully read).
pub fn read_background(handle: u32) -> Option<BackgroundOutput> {
    wp::read_background(handle)
}

/// Kills a background process group; false for an unknown handle.
pub fn kill_background(handle: u32) -> bool {
    wp::kill_background(handle)
}

/// A running process; dropping it kills its process group.
pub struct Child(wp::Child);

impl Child {
    /// The next chunk of stdout/stderr, `None` when both are closed.
    pub fn next_chunk(&self) -> Option<OutputChunk> {
        self.0.next_chunk()
    }

    /// The next chunk, waiting at most `timeout_ms`.
    pub fn next_chunk_timeout(&self, timeout_ms: u64) -> ChunkWait {
        self.0.next_chunk_timeout(timeout_ms)
    }

    /// Waits for the exit status.
    pub fn wait(&self) -> ExitStatus {
        self.0.wait()
    }

    /// Kills the process group.
    pub fn kill(&self) {
        self.0.kill()
    }
}
