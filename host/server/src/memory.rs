//! Giving memory back to the operating system after a burst.
//!
//! glibc's allocator keeps freed heap pages and, by default, up to eight
//! arenas per core, so a node that served a burst of concurrent turns stays at
//! its peak resident size long after. The server caps the arenas at start
//! ([`tune_allocator`]) and, once activity has stopped for a few seconds,
//! trims the heap once ([`purge_when_quiet`]). Other allocators and targets:
//! both are no-ops. The same quiet moment also unmaps the code pages start-up
//! or the burst touched ([`crate::image_pages`]).

use crate::metrics::Metrics;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long activity must have stopped before the heap is trimmed.
pub const QUIET: Duration = Duration::from_secs(5);

/// Caps glibc's malloc arenas: with many worker and blocking threads the
/// default (8 per core) spreads a burst over arenas that are never trimmed
/// together. Call once, early, before threads allocate.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; M_ARENA_MAX takes
    // any positive count.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Returns freed heap memory to the system (glibc `malloc_trim`). Blocking:
/// it walks the heap.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim is thread-safe and only releases free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// What the allocator holds, from glibc's `mallinfo2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapStats {
    /// Bytes in live allocations (arena blocks in use plus mmapped blocks).
    pub in_use: u64,
    /// Bytes the allocator holds free in its arenas: resident until trimmed
    /// or reused, so resident size minus code can exceed `in_use` by this.
    pub free: u64,
}

/// How long one reading of the allocator's totals is served.
const HEAP_STATS_TTL: Duration = Duration::from_secs(2);

/// The allocator's totals, read at most every [`HEAP_STATS_TTL`]: reading
/// them locks and walks every arena, and `/metrics` is public, so a client
/// polling it must not slow every allocation in the process. `None` where
/// the allocator is not glibc's.
pub fn heap_stats() -> Option<HeapStats> {
    static LAST: std::sync::Mutex<Option<(std::time::Instant, Option<HeapStats>)>> =
        std::sync::Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((at, stats)) = *last
        && at.elapsed() < HEAP_STATS_TTL
    {
        return stats;
    }
    let stats = read_heap_stats();
    *last = Some((std::time::Instant::now(), stats));
    stats
}

fn read_heap_stats() -> Option<HeapStats> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's counters.
        let m = unsafe { libc::mallinfo2() };
        Some(HeapStats {
            in_use: (m.uordblks + m.hblkhd) as u64,
            free: m.fordblks as u64,
        })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

/// Trims the heap and (with `release_code`) releases the executable's
/// touched code pages once after each stretch of activity, when `metrics`
/// has not moved for [`QUIET`]; also once after start-up (loading components
/// leaves garbage behind, and start-up code is not run again). Ends with
/// `shutdown`.
pub async fn purge_when_quiet(
    metrics: Arc<Metrics>,
    release_code: bool,
    shutdown: CancellationToken,
) {
    let mut last = metrics.activity();
    let mut dirty = true;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(QUIET) => {}
        }
        let now = metrics.activity();
        if now != last {
            (last, dirty) = (now, true);
        } else if dirty {
            dirty = false;
            let _ = tokio::task::spawn_blocking(move || {
                trim();
                if !release_code {
                    return;
                }
                match crate::image_pages::release() {
                    Ok(r) => {
                        tracing::debug!(bytes = r.bytes, objects = r.objects, "released code pages")
                    }
                    Err(e) => tracing::debug!("releasing code pages: {e}"),
                }
            })
            .await;
        }
    }
}
