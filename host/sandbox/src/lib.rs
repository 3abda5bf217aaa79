//! Grants that hold past the process boundary. A process a plugin spawns
//! runs under what the plugin was granted, enforced by the kernel:
//!
//! - **files** — a Landlock ruleset from the plugin's filesystem grants
//!   (read-write, read-only) plus read-only, executable system locations
//!   ([`SystemPaths`]); nothing else, inherited by every descendant;
//! - **network** — a private user + network namespace with only a loopback;
//!   with an `http` grant, the host's egress proxy ([`proxy`]) listens inside
//!   it and applies the plugin's host rules and SSRF screening;
//! - **system calls** — a short seccomp deny list ([`seccomp`]).
//!
//! Everything the child runs is prepared in the parent ([`Sandbox::prepare`]);
//! between `fork` and `exec` only raw system calls run (no allocation, no
//! locks), so spawning from a multi-threaded host is safe.

mod fs;
mod netns;
pub mod proxy;
pub mod seccomp;
mod support;

pub use fs::{DEFAULT_DEVICES, DEFAULT_HOME_CONFIG, DEFAULT_SYSTEM_PATHS, SystemPaths};
pub use proxy::EgressPolicy;
pub use support::Support;

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;

/// Port the egress proxy listens on inside a sandbox's network namespace
/// (the namespace is private, so the port is always free).
pub const PROXY_PORT: u16 = 3128;

/// Why a process could not be sandboxed.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel lacks what the sandbox needs (or an operator setting
    /// pretends so).
    #[error("the process sandbox is unavailable: {0}")]
    Unsupported(String),
    /// Building the Landlock ruleset failed.
    #[error("cannot build the Landlock ruleset: {0}")]
    Landlock(String),
    /// Building the seccomp filter failed.
    #[error("cannot build the seccomp filter: {0}")]
    Seccomp(String),
    /// An OS call in the parent failed.
    #[error("sandbox setup failed: {0}")]
    Io(#[from] std::io::Error),
}

/// What one spawned process may do beyond the system locations.
#[derive(Clone, Default)]
pub struct Policy {
    /// Directories (or files) it may read, write, create in and remove from.
    pub read_write: Vec<PathBuf>,
    /// Directories (or files) it may read and execute.
    pub read_only: Vec<PathBuf>,
    /// Outbound network through the egress proxy; `None`: no network at all.
    pub network: Option<Arc<dyn EgressPolicy>>,
    /// A private temporary directory: read-write, and `TMPDIR` (`TMP`,
    /// `TEMP`) point there, since `/tmp` is not writable in the sandbox.
    pub tmp_dir: Option<PathBuf>,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("read_write", &self.read_write)
            .field("read_only", &self.read_only)
            .field("network", &self.network.is_some())
            .field("tmp_dir", &self.tmp_dir)
            .finish()
    }
}

/// The host-wide sandbox: what the kernel supports and which system
/// locations every sandboxed process may read.
#[derive(Debug, Clone)]
pub struct Sandbox {
    support: Support,
    system: SystemPaths,
}

impl Sandbox {
    /// A sandbox on this kernel with these system locations.
    pub fn new(support: Support, system: SystemPaths) -> Self {
        Self { support, system }
    }

    /// What the kernel offers.
    pub fn support(&self) -> &Support {
        &self.support
    }

    /// The system locations granted read-only to every sandboxed process.
    pub fn system_paths(&self) -> &SystemPaths {
        &self.system
    }

    /// Builds everything the child needs (ruleset, filter, namespace maps)
    /// before the fork. Fails when the kernel cannot enforce the policy:
    /// a sandbox that silently does less than it says is worse than none.
    pub fn prepare(&self, policy: &Policy) -> Result<Prepared, SandboxError> {
        self.support.require()?;
        let ruleset = fs::ruleset(&self.system, policy)?;
        let filters = seccomp::filters()?;
        let (parent_sock, child_sock) = if policy.network.is_some() {
            let (a, b) = netns::socket_pair()?;
            (Some(a), Some(b))
        } else {
            (None, None)
        };
        let hook = netns::ChildSetup::new(ruleset, filters, child_sock.as_ref());
        Ok(Prepared {
            hook: Some(hook),
            parent_sock,
            child_sock,
            egress: policy.network.clone(),
            tmp_dir: policy.tmp_dir.clone(),
        })
    }
}

/// A sandbox ready to be installed on one command.
pub struct Prepared {
    hook: Option<netns::ChildSetup>,
    parent_sock: Option<OwnedFd>,
    child_sock: Option<OwnedFd>,
    egress: Option<Arc<dyn EgressPolicy>>,
    tmp_dir: Option<PathBuf>,
}

impl Prepared {
    /// Installs the sandbox on `cmd`: the pre-exec setup (the child starts
    /// its own session, which is also its own process group: do not set
    /// `process_group` as well) and, with network, the proxy variables
    /// (`HTTP_PROXY`, `HTTPS_PROXY` and lower-case).
    pub fn install(&mut self, cmd: &mut tokio::process::Command) {
        if let Some(tmp) = &self.tmp_dir {
            for name in ["TMPDIR", "TMP", "TEMP"] {
                cmd.env(name, tmp);
            }
        }
        if self.egress.is_some() {
            let url = format!("http://127.0.0.1:{PROXY_PORT}");
            for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
                cmd.env(name, &url);
            }
            cmd.env_remove("NO_PROXY").env_remove("no_proxy");
        }
        if let Some(mut hook) = self.hook.take() {
            // SAFETY: the hook runs between fork and exec and only makes raw
            // system calls on data prepared here (see `netns::ChildSetup::run`).
            unsafe {
                cmd.pre_exec(move || hook.run());
            }
        }
    }

    /// After a successful spawn: takes the proxy listener the child created
    /// in its namespace and serves it. The returned guard stops the proxy
    /// when dropped (keep it as long as the process lives).
    pub fn start(mut self) -> Result<Running, SandboxError> {
        // The child's end is the child's now; the parent's copy must go so
        // a dead child is noticed.
        drop(self.child_sock.take());
        let proxy = match (self.parent_sock.take(), self.egress.take()) {
            (Some(sock), Some(egress)) => {
                let listener = netns::receive_listener(&sock)?;
                Some(proxy::serve(listener, egress)?)
            }
            _ => None,
        };
        Ok(Running { proxy })
    }
}

/// A sandboxed process's host-side companions (its egress proxy).
#[derive(Debug)]
pub struct Running {
    proxy: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(p) = self.proxy.take() {
            p.abort();
        }
    }
}
