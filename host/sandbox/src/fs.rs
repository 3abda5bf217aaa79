//! Files: the Landlock ruleset of one process.

use crate::{Policy, SandboxError};
use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, Scope,
};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The newest ABI this build knows; older kernels get what they support of
/// it (Landlock's best-effort mode), newer ones at least this.
const ABI_TARGET: ABI = ABI::V10;

/// System locations every sandboxed process may read and execute from, so
/// programs, their libraries and their configuration resolve. Explicit and
/// configurable (`[process_sandbox] system_paths`, `extra_read_only`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemPaths {
    /// Read-only and executable.
    pub read_only: Vec<PathBuf>,
    /// Device files a program may read and write (`/dev/null` and kin).
    pub devices: Vec<PathBuf>,
}

/// The standard binary, library and configuration directories.
pub const DEFAULT_SYSTEM_PATHS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/proc",
    "/sys",
    "/run/current-system",
    "/nix/store",
];

/// Per-user configuration every sandboxed process may read (relative to
/// `$HOME`): `git` refuses to run when its user config exists but cannot
/// be read. Nothing else of `$HOME` is readable unless granted.
pub const DEFAULT_HOME_CONFIG: &[&str] = &[
    ".gitconfig",
    ".config/git/config",
    ".config/git/ignore",
    ".config/git/attributes",
];

/// Device files every process may use.
pub const DEFAULT_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

impl Default for SystemPaths {
    fn default() -> Self {
        Self {
            read_only: DEFAULT_SYSTEM_PATHS.iter().map(PathBuf::from).collect(),
            devices: DEFAULT_DEVICES.iter().map(PathBuf::from).collect(),
        }
    }
}

impl SystemPaths {
    /// The defaults plus the toolchains on `path` (each `PATH` entry outside
    /// the defaults, read-only; for a rustup proxy directory also its
    /// `RUSTUP_HOME`, since `cargo` there only forwards to a toolchain; for
    /// a version manager's `shims`, the manager's root).
    pub fn with_toolchains(
        mut self,
        path: Option<&std::ffi::OsStr>,
        rustup_home: Option<PathBuf>,
    ) -> Self {
        let Some(path) = path else { return self };
        let home = std::env::var_os("HOME").map(PathBuf::from);
        for dir in std::env::split_paths(path) {
            // Never `/`, `$HOME` or above it: a toolchain lives below.
            let too_wide =
                dir.parent().is_none() || home.as_ref().is_some_and(|h| h.starts_with(&dir));
            if !dir.is_absolute() || too_wide || self.covers(&dir) {
                continue;
            }
            if dir.join("rustup").exists() {
                let home = rustup_home.clone().or_else(|| {
                    dir.parent()
                        .and_then(Path::parent)
                        .map(|h| h.join(".rustup"))
                });
                if let Some(h) = home.filter(|h| h.is_dir() && !self.covers(h)) {
                    self.read_only.push(h);
                }
            }
            // A version manager's shims run the manager itself (pyenv,
            // rbenv, nodenv: `<root>/shims` beside `<root>/versions`).
            if dir.ends_with("shims")
                && let Some(root) = dir.parent().filter(|r| r.join("versions").is_dir())
            {
                if !self.covers(root) {
                    self.read_only.push(root.to_path_buf());
                }
                continue;
            }
            self.read_only.push(dir);
        }
        self
    }

    /// Adds the per-user configuration `names` (relative to `home`) that
    /// exist, read-only.
    pub fn with_home_config(mut self, home: Option<&Path>, names: &[impl AsRef<Path>]) -> Self {
        let Some(home) = home.filter(|h| h.is_absolute()) else {
            return self;
        };
        for n in names {
            let p = home.join(n);
            if p.exists() && !self.covers(&p) {
                self.read_only.push(p);
            }
        }
        self
    }

    /// Adds operator-configured read-only locations.
    pub fn extend(&mut self, extra: impl IntoIterator<Item = PathBuf>) {
        for p in extra {
            if !self.covers(&p) {
                self.read_only.push(p);
            }
        }
    }

    fn covers(&self, dir: &Path) -> bool {
        self.read_only.iter().any(|r| dir.starts_with(r))
    }
}

/// Builds the ruleset in the parent; the child only enforces it.
pub(crate) fn ruleset(
    system: &SystemPaths,
    policy: &Policy,
) -> Result<RulesetCreated, SandboxError> {
    let err = |e: landlock::RulesetError| SandboxError::Landlock(e.to_string());
    let all = AccessFs::from_all(ABI_TARGET);
    let read = AccessFs::from_read(ABI_TARGET);
    let device = AccessFs::ReadFile | AccessFs::WriteFile;
    let mut created = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(err)?
        // Signals to processes outside the sandbox (the host included) and
        // abstract Unix sockets outside it are refused.
        .scope(Scope::Signal | Scope::AbstractUnixSocket)
        .map_err(err)?
        .create()
        .map_err(err)?;
    let mut add = |path: &Path, access| -> Result<(), SandboxError> {
        // A location that does not exist on this machine grants nothing.
        let Ok(fd) = PathFd::new(path) else {
            return Ok(());
        };
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(ABI_TARGET)
        };
        created
            .as_mut()
            .add_rule(PathBeneath::new(fd, access))
            .map(|_| ())
            .map_err(|e| SandboxError::Landlock(format!("{}: {e}", path.display())))
    };
    for p in &system.read_only {
        add(p, read)?;
    }
    for p in &system.devices {
        add(p, device)?;
    }
    for p in &policy.read_only {
        add(p, read)?;
    }
    for p in policy.read_write.iter().chain(&policy.tmp_dir) {
        add(p, all)?;
    }
    Ok(created)
}
