//! Sizing the process's file descriptor table once, before threads start.
//!
//! Linux keeps a process's open files in one table of 64 slots at first,
//! then 128, 256, … as a new descriptor needs one past the end.
//! While more than one thread shares the table, each growth waits for an RCU
//! grace period (`expand_files` → `synchronize_rcu`) before the new table is
//! used, and every other thread that opens a file or socket meanwhile waits
//! too. On this kind of machine that wait was 16 ms, in the middle of the
//! first 100-turn burst after start (a tokio worker creating a model
//! connection's socket). A node with 1,000 streaming workstreams holds about
//! 3,000 descriptors (each one's event stream, send and model connection),
//! six doublings past the first table. The table never shrinks, so a server
//! pays this once per doubling, on its first busy moments after start.
//!
//! [`reserve`] grows the table to its working size while the process still
//! has a single thread, when growth needs no grace period: it asks for a
//! descriptor numbered near the open-file limit and closes it again. The
//! table costs 8 bytes of kernel memory per slot (128 KiB at the cap below,
//! counted by a container's memory cgroup) and nothing in the process's
//! resident size.

/// The most descriptor slots reserved up front: enough for 16,384 open
/// connections and files, far above what one node's streams use (three per
/// streaming workstream). Beyond it the table grows as before.
pub const MAX_RESERVED: u64 = 16_384;

/// Grows the descriptor table to `min(open-file soft limit, MAX_RESERVED)`
/// slots. Returns the slots reserved, or `None` when it could not (no
/// `/dev/null`, a limit too low to matter, not Linux). Call first thing in
/// `main`, before any thread is spawned: with threads running it still works
/// but pays the grace period once, here.
pub fn reserve() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        linux::reserve(MAX_RESERVED)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use rustix::process::{Resource, getrlimit};

    /// The table's initial size: below it nothing needs reserving.
    const INITIAL_SLOTS: u64 = 64;

    pub(super) fn reserve(cap: u64) -> Option<u64> {
        let soft = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
        let slots = soft.min(cap);
        if slots <= INITIAL_SLOTS {
            return None;
        }
        let file = std::fs::File::open("/dev/null").ok()?;
        // The lowest free descriptor at or above `slots - 1`: the kernel
        // grows the table to hold it. Closed at once (dropped).
        let highest = i32::try_from(slots - 1).ok()?;
        let probe = rustix::io::fcntl_dupfd_cloexec(&file, highest).ok()?;
        drop(probe);
        Some(slots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table size the kernel reports for this process (`FDSize` in
    /// `/proc/self/status`).
    #[cfg(target_os = "linux")]
    fn fd_slots() -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("FDSize:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap()
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reserving_grows_the_table_to_the_limit_and_leaves_no_descriptor_open() {
        use rustix::process::{Resource, getrlimit};
        let soft = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
        let want = soft.min(MAX_RESERVED);
        if want <= 64 {
            assert_eq!(reserve(), None);
            return;
        }
        let before = fd_slots();
        assert!(before < want, "FDSize {before} already holds {want}");
        // The probe takes the highest slot (unless something already holds
        // it) and is closed again: whatever was there before is there after.
        let probe = format!("/proc/self/fd/{}", want - 1);
        let held = std::path::Path::new(&probe).exists();
        assert_eq!(reserve(), Some(want));
        assert!(
            fd_slots() >= want,
            "FDSize {} after reserving {want}",
            fd_slots()
        );
        assert_eq!(std::path::Path::new(&probe).exists(), held, "{probe}");
    }
}
