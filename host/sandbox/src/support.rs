//! What the running kernel offers: Landlock (and its ABI), seccomp, and
//! unprivileged user + network namespaces.

use crate::SandboxError;
use serde::Serialize;

/// The kernel features the sandbox relies on, probed once at start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Support {
    /// Landlock ABI version; `None`: Landlock is not available.
    pub landlock_abi: Option<u32>,
    /// Seccomp filters can be installed.
    pub seccomp: bool,
    /// An unprivileged process can create a user + network namespace.
    pub namespaces: bool,
    /// An operator setting pretends the kernel lacks Landlock
    /// (`[process_sandbox] assume_unsupported`), to check the refusal path.
    pub simulated: bool,
}

/// The oldest Landlock ABI the sandbox accepts (truncation is controlled
/// from 3 on).
pub const MIN_LANDLOCK_ABI: u32 = 3;

/// `landlock_create_ruleset` flag asking for the ABI version.
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;

impl Support {
    /// Probes this kernel. Forks once (the child only calls `unshare`).
    pub fn probe() -> Self {
        Self {
            landlock_abi: landlock_abi(),
            seccomp: seccomp_available(),
            namespaces: namespaces_available(),
            simulated: false,
        }
    }

    /// What a kernel without Landlock looks like (the operator's
    /// `assume_unsupported` setting).
    pub fn simulated_unsupported() -> Self {
        Self {
            landlock_abi: None,
            seccomp: seccomp_available(),
            namespaces: namespaces_available(),
            simulated: true,
        }
    }

    /// Whether every part is available.
    pub fn complete(&self) -> bool {
        self.missing().is_none()
    }

    /// What is missing, as people read it.
    pub fn missing(&self) -> Option<String> {
        let mut gone = Vec::new();
        match self.landlock_abi {
            None if self.simulated => gone.push("Landlock (assume_unsupported is set)"),
            None => gone.push("Landlock (kernel 6.2+ with lsm=landlock)"),
            // Before ABI 3 truncation is not controlled: any file the
            // process may open could be emptied.
            Some(v) if v < MIN_LANDLOCK_ABI => {
                gone.push("Landlock ABI 3 or newer (kernel 6.2+; truncation control)")
            }
            Some(_) => {}
        }
        if !self.seccomp {
            gone.push("seccomp");
        }
        if !self.namespaces {
            gone.push("unprivileged user and network namespaces");
        }
        (!gone.is_empty()).then(|| format!("this kernel lacks {}", gone.join(", ")))
    }

    /// Fails with what is missing.
    pub fn require(&self) -> Result<(), SandboxError> {
        match self.missing() {
            None => Ok(()),
            Some(m) => Err(SandboxError::Unsupported(m)),
        }
    }

    /// One line for logs and `/health`, e.g. `Landlock ABI 7, seccomp,
    /// user+network namespaces`.
    pub fn summary(&self) -> String {
        match self.missing() {
            Some(m) => format!("unavailable: {m}"),
            None => {
                let abi = self.landlock_abi.unwrap_or(0);
                let mut s = format!("Landlock ABI {abi}, seccomp, user+network namespaces");
                // Said, not hidden: older kernels enforce less.
                if abi < 6 {
                    s.push_str(
                        " (ABI < 6: signals to processes outside the sandbox are not scoped)",
                    );
                }
                if abi < 9 {
                    s.push_str(
                        " (Unix sockets refused by seccomp; Landlock ABI 9 would scope them by path)",
                    );
                }
                s
            }
        }
    }
}

fn landlock_abi() -> Option<u32> {
    // SAFETY: the documented version query: no attribute pointer, size 0.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).ok().filter(|v| *v > 0)
}

fn seccomp_available() -> bool {
    // SAFETY: a read-only query of this thread's seccomp mode.
    unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 }
}

fn namespaces_available() -> bool {
    // SAFETY: the child makes one system call and exits without returning
    // into Rust; the parent waits for it.
    unsafe {
        let pid = libc::fork();
        if pid < 0 {
            return false;
        }
        if pid == 0 {
            let ok = libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) == 0;
            libc::_exit(if ok { 0 } else { 1 });
        }
        let mut status = 0;
        loop {
            let r = libc::waitpid(pid, &mut status, 0);
            if r == pid {
                break;
            }
            if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return false;
            }
        }
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
    }
}
