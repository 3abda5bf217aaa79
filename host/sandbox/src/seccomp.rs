//! System calls: a short deny list of what a tool process never needs. A
//! deny list (not an allow list) keeps ordinary programs working across
//! libc and kernel versions; everything here fails with `EPERM`, except
//! `clone3`, which fails with `ENOSYS` so libc falls back to `clone`, whose
//! flags the filter can read.

use crate::SandboxError;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// Refused outright, with why.
pub const DENIED: &[(&str, libc::c_long)] = &[
    ("ptrace (inspecting other processes)", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("fsopen", libc::SYS_fsopen),
    ("fsmount", libc::SYS_fsmount),
    ("fsconfig", libc::SYS_fsconfig),
    ("fspick", libc::SYS_fspick),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("unshare (new namespaces)", libc::SYS_unshare),
    ("setns (entering namespaces)", libc::SYS_setns),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("reboot", libc::SYS_reboot),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("add_key (kernel keyring)", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("keyctl", libc::SYS_keyctl),
    ("bpf", libc::SYS_bpf),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("acct", libc::SYS_acct),
    ("quotactl", libc::SYS_quotactl),
    ("syslog (kernel log)", libc::SYS_syslog),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("adjtimex", libc::SYS_adjtimex),
    ("iopl", libc::SYS_iopl),
    ("ioperm", libc::SYS_ioperm),
];

/// `clone` flags that create namespaces (refused like `unshare`).
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
];

/// The obsolete `SOCK_PACKET` type (libc deprecates the name; the kernel
/// still honours it with `CAP_NET_RAW`).
const SOCK_PACKET: i32 = 10;

/// `ioctl` requests that inject input into a terminal.
const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;

fn err(e: impl std::fmt::Display) -> SandboxError {
    SandboxError::Seccomp(e.to_string())
}

fn masked(arg: u8, mask: u64) -> Result<SeccompCondition, SandboxError> {
    SeccompCondition::new(
        arg,
        SeccompCmpArgLen::Qword,
        SeccompCmpOp::MaskedEq(mask),
        mask,
    )
    .map_err(err)
}

fn equals(arg: u8, value: u64) -> Result<SeccompCondition, SandboxError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value).map_err(err)
}

/// The compiled filters (installed in the child, in order).
pub(crate) fn filters() -> Result<Vec<BpfProgram>, SandboxError> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (_, nr) in DENIED {
        rules.insert(*nr, vec![]);
    }
    // Packet and raw IP sockets (sniffing, spoofing) and Unix sockets:
    // Landlock before ABI 9 cannot restrict connecting to a socket file
    // by path, and a session bus, container runtime or agent socket would
    // be a way out. `socketpair` (pipes between processes) stays, as do
    // TCP/UDP (the namespace confines them) and netlink.
    let sock_type = |t: i32| {
        SeccompCondition::new(
            1,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(0xf),
            t as u64,
        )
        .map_err(err)
    };
    let mut socket = vec![
        SeccompRule::new(vec![equals(0, libc::AF_PACKET as u64)?]).map_err(err)?,
        SeccompRule::new(vec![equals(0, libc::AF_UNIX as u64)?]).map_err(err)?,
    ];
    for family in [libc::AF_INET, libc::AF_INET6] {
        for t in [libc::SOCK_RAW, SOCK_PACKET] {
            socket.push(
                SeccompRule::new(vec![equals(0, family as u64)?, sock_type(t)?]).map_err(err)?,
            );
        }
    }
    rules.insert(libc::SYS_socket, socket);
    // Typing into the terminal of whoever started the host.
    rules.insert(
        libc::SYS_ioctl,
        vec![
            SeccompRule::new(vec![equals(1, TIOCSTI)?]).map_err(err)?,
            SeccompRule::new(vec![equals(1, TIOCLINUX)?]).map_err(err)?,
        ],
    );
    let mut clone = Vec::new();
    for flag in NAMESPACE_FLAGS {
        clone.push(SeccompRule::new(vec![masked(0, *flag)?]).map_err(err)?);
    }
    rules.insert(libc::SYS_clone, clone);
    let deny = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        ARCH,
    )
    .map_err(err)?;
    let clone3 = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, vec![])]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        ARCH,
    )
    .map_err(err)?;
    Ok(vec![
        BpfProgram::try_from(deny).map_err(err)?,
        BpfProgram::try_from(clone3).map_err(err)?,
    ])
}
