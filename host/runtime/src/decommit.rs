//! Whether freed pool slots may give their pages back in batches.
//!
//! wasmtime's pooling allocator can queue the regions of freed slots and give
//! them back together: one `process_madvise(PIDFD_SELF, …, MADV_DONTNEED)`
//! for the batch, so one TLB shootdown of the other cores instead of one per
//! region. That call needs Linux 6.14 (`PIDFD_SELF`; `MADV_DONTNEED` through
//! `process_madvise` since 6.13). wasmtime falls back to one `madvise` per
//! region only on `ENOSYS`, `EINVAL` or `EPERM`; an older kernel answers
//! `EBADF`, which it takes as a failed decommit, and its slots' pages
//! (fiber stacks included) would then stay resident and not zeroed. So the
//! host batches only where the very call wasmtime makes works here.

/// Regions (a memory, a table, a stack) of freed slots given back together
/// where [`batched_decommit_works`]; at most one fewer per shard (one shard
/// per core, at most 16) stays resident until the next batch.
pub const DECOMMIT_BATCH: usize = 8;

/// The decommit batch for this process: [`DECOMMIT_BATCH`] where the kernel
/// gives pages back for a list of regions in one call, else 1 (each region
/// at once, with its own `madvise`).
pub fn decommit_batch_size() -> usize {
    if batched_decommit_works() {
        DECOMMIT_BATCH
    } else {
        1
    }
}

/// Makes the call wasmtime's batched decommit makes, on two pages of a
/// private mapping of its own, and checks that both came back zeroed.
#[cfg(target_os = "linux")]
pub fn batched_decommit_works() -> bool {
    // `PIDFD_SELF` (Linux 6.14): this process, without opening a pidfd.
    const PIDFD_SELF: libc::c_int = -10000;
    let page = rustix::param::page_size();
    let len = 2 * page;
    // SAFETY: a fresh private anonymous mapping that nothing else knows of;
    // it is only written, advised and read within its `len` bytes here, and
    // unmapped before returning.
    unsafe {
        let base = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if base == libc::MAP_FAILED {
            return false;
        }
        let bytes = base.cast::<u8>();
        std::ptr::write_bytes(bytes, 0xA5, len);
        let regions = [
            libc::iovec {
                iov_base: base,
                iov_len: page,
            },
            libc::iovec {
                iov_base: bytes.add(page).cast(),
                iov_len: page,
            },
        ];
        let given_back = libc::syscall(
            libc::SYS_process_madvise,
            PIDFD_SELF,
            regions.as_ptr(),
            regions.len(),
            libc::MADV_DONTNEED,
            0,
        );
        let works = usize::try_from(given_back) == Ok(len)
            && bytes.read_volatile() == 0
            && bytes.add(page).read_volatile() == 0;
        libc::munmap(base, len);
        works
    }
}

/// Elsewhere wasmtime gives each region back on its own.
#[cfg(not(target_os = "linux"))]
pub fn batched_decommit_works() -> bool {
    false
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The kernel's (major, minor) version.
    fn kernel_version() -> (u32, u32) {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut parts = release
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|p| p.parse::<u32>().ok());
        (parts.next().unwrap(), parts.next().unwrap())
    }

    /// The probe answers what the kernel supports: yes from 6.14, no before
    /// (where the call fails with `EBADF`, which wasmtime would take for a
    /// failed decommit), and the batch follows it.
    #[test]
    fn batching_follows_what_the_kernel_can_do() {
        let works = batched_decommit_works();
        assert_eq!(works, kernel_version() >= (6, 14), "{:?}", kernel_version());
        let expected = if works { DECOMMIT_BATCH } else { 1 };
        assert_eq!(decommit_batch_size(), expected);
    }
}
