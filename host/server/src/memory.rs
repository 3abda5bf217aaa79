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
use turnstone_runtime::LivePlugins;

/// How long activity must have stopped before the heap is trimmed.
pub const QUIET: Duration = Duration::from_secs(5);

/// Caps glibc's malloc arenas: with many worker and blocking threads the
/// default (8 per core) spreads a burst over arenas that are never trimmed
/// together. Call once, first thing in `main`, before other threads start:
/// the cap does not undo arenas created before it.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; M_ARENA_MAX takes
    // any positive count.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// How much of glibc's thread arena [`reserve_thread_arena`] makes writable
/// at start: half its 64 MiB reservation. The serve bench's 100- and 200-turn
/// bursts stay within it: 110 `mprotect` calls in both, about 100 of them
/// wasmtime's own (mapping instance images), against 2,204 without.
pub const THREAD_ARENA_RESERVE: usize = 32 << 20;

/// Makes glibc's thread arena writable for `bytes` up front, so a burst
/// does not take the process's address-space lock for writing page by page.
///
/// With [`tune_allocator`]'s cap of two arenas, the first thread other than
/// `main` to allocate creates a second arena, and later threads are dealt
/// out between the two. The second is a 64 MiB reservation that glibc makes
/// writable as it grows: one `mprotect` per growth of a page or a few,
/// without the padding the main heap gets. Each `mprotect` takes the
/// address-space lock for writing, and the page faults of every other
/// thread wait behind it: the first 100- and 200-turn bursts after start
/// made about 6 such calls per turn (2,204 `mprotect` calls in all, nearly
/// all glibc's), and the faults waiting on the lock added up to 9–22 ms per
/// run in four traces (`perf` of the serve bench's `concurrent` section,
/// docs/server.md). Freeing gives pages back with `madvise` and keeps the
/// writable size, so the calls come only while the arena grows past its
/// largest size so far: on a server's first bursts. (With
/// `vm.overcommit_memory = 2` glibc instead makes freed space inaccessible
/// again, and the reserve does not last.)
///
/// Done here, from a thread of its own before any other starts: the first
/// thread that allocates creates the arena, makes it writable for `bytes`
/// by allocating blocks below the mmap threshold, and frees them again,
/// which returns the pages (resident size is unchanged afterwards). When the
/// thread ends, glibc hands its arena to the next new thread. Call after
/// [`tune_allocator`] and before starting the async runtime; elsewhere, or
/// with another allocator, it costs a few milliseconds and changes nothing.
pub fn reserve_thread_arena(bytes: usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let reserve = std::thread::Builder::new()
            .name("arena-reserve".into())
            .spawn(move || grow_and_release(bytes));
        if let Ok(handle) = reserve {
            let _ = handle.join();
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = bytes;
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn grow_and_release(bytes: usize) {
    // Below glibc's mmap threshold (128 KiB), so each comes from the arena.
    const BLOCK: usize = 64 << 10;
    let mut blocks = Vec::with_capacity(bytes / BLOCK);
    for _ in 0..bytes / BLOCK {
        // SAFETY: a plain allocation of a nonzero size, freed below.
        let block = unsafe { libc::malloc(BLOCK) };
        if block.is_null() {
            break;
        }
        blocks.push(block);
    }
    // Newest first: each joins the free top of the arena, which glibc then
    // gives back to the system.
    for block in blocks.into_iter().rev() {
        // SAFETY: allocated above by malloc and freed once.
        unsafe { libc::free(block) };
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

/// Code pages that came back while the server stayed quiet, beyond which they
/// are released again: a client's connections closing, or a timer, runs code
/// that was released without counting as activity, and on kernels that keep
/// files in large folios one such fault can map far more than the page it
/// needs.
pub const REGROWTH: u64 = 1 << 20;

/// The longest wait, in quiet ticks, between releases while code keeps coming
/// back without activity (64 ticks of [`QUIET`]: about five minutes).
const MAX_BACKOFF_TICKS: u32 = 64;

/// When the quiet loop purges: once after each stretch of activity, and again
/// while still quiet when the resident file-backed pages grew by [`REGROWTH`] since
/// the last purge, backing off (1, 2, 4 … [`MAX_BACKOFF_TICKS`] ticks) while
/// they keep coming back, so code a periodic task runs is not released and
/// faulted back every few seconds.
#[derive(Debug)]
pub struct QuietPurge {
    last_activity: u64,
    dirty: bool,
    /// Resident file bytes right after the last purge.
    after_purge: Option<u64>,
    backoff: u32,
    wait: u32,
}

impl QuietPurge {
    /// A loop that purges once the activity figure, now `activity`, stops
    /// moving (start-up counts as activity).
    pub fn new(activity: u64) -> Self {
        Self {
            last_activity: activity,
            dirty: true,
            after_purge: None,
            backoff: 0,
            wait: 0,
        }
    }

    /// One tick, [`QUIET`] after the last: the activity figure and the
    /// process's resident file bytes (when known) now. True means purge now,
    /// then report the resident file bytes to [`QuietPurge::purged`].
    pub fn tick(&mut self, activity: u64, file_resident: Option<u64>) -> bool {
        if activity != self.last_activity {
            (self.last_activity, self.dirty) = (activity, true);
            (self.backoff, self.wait) = (0, 0);
            return false;
        }
        if self.dirty {
            self.dirty = false;
            return true;
        }
        let (Some(before), Some(now)) = (self.after_purge, file_resident) else {
            return false;
        };
        if now < before.saturating_add(REGROWTH) {
            return false;
        }
        if self.wait > 0 {
            self.wait -= 1;
            return false;
        }
        self.backoff = (self.backoff * 2).clamp(1, MAX_BACKOFF_TICKS);
        self.wait = self.backoff;
        true
    }

    /// Records the resident file bytes right after a purge.
    pub fn purged(&mut self, file_resident: Option<u64>) {
        self.after_purge = file_resident;
    }
}

/// The process's resident file-backed and shared bytes (`/proc/self/statm`'s
/// third field): its code, read-only data and mapped files.
async fn file_resident() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let statm = tokio::fs::read_to_string("/proc/self/statm").await.ok()?;
        let pages: u64 = statm.split_whitespace().nth(2)?.parse().ok()?;
        // SAFETY: sysconf only reads a constant of the system.
        let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
        Some(pages * page)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Trims the heap and (with `release_code`) releases the executable's
/// touched code pages once after each stretch of activity, when `metrics`
/// has not moved for [`QUIET`], and again while quiet when released code came
/// back ([`QuietPurge`]). It also purges at once when it starts, which is
/// when start-up is done: loading components leaves garbage behind, and the
/// code and component pages start-up touched (the migrations, every
/// component's `describe`) are not needed again, so a burst that comes
/// before the first quiet moment does not carry them on top of its own peak.
/// Start-up still counts as activity, so the first quiet spell purges again:
/// what ran after this first purge (binding the listener, the first passes
/// of the background tasks) goes then. With `plugins`, the code images of the components loaded now are released
/// too. Ends with `shutdown`.
pub async fn purge_when_quiet(
    metrics: Arc<Metrics>,
    release_code: bool,
    plugins: Option<Arc<LivePlugins>>,
    shutdown: CancellationToken,
) {
    let mut state = QuietPurge::new(metrics.activity());
    purge(release_code, plugins.as_deref()).await;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(QUIET) => {}
        }
        // Without the code release there is nothing that grows back unseen.
        let file = if release_code {
            file_resident().await
        } else {
            None
        };
        if !state.tick(metrics.activity(), file) {
            continue;
        }
        purge(release_code, plugins.as_deref()).await;
        if release_code {
            state.purged(file_resident().await);
        }
    }
}

/// Trims the heap and, with `release_code`, releases the executable's code
/// pages and those of the components `plugins` holds now.
async fn purge(release_code: bool, plugins: Option<&LivePlugins>) {
    // Held through the release: a component of this registry stays
    // mapped until the snapshot is dropped, even if a reload replaces it.
    let registry = plugins.map(LivePlugins::snapshot);
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
        if let Some(registry) = registry {
            let images: Vec<_> = registry.loaded().map(|p| p.code_image()).collect();
            match crate::image_pages::release_images(&images) {
                Ok(bytes) => tracing::debug!(bytes, "released component code pages"),
                Err(e) => tracing::debug!("releasing component code pages: {e}"),
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    #[test]
    fn purges_once_per_quiet_stretch_while_nothing_grows_back() {
        let mut q = QuietPurge::new(7);
        assert!(q.tick(7, Some(20 * MB)), "start-up counts as activity");
        q.purged(Some(18 * MB));
        for _ in 0..5 {
            assert!(!q.tick(7, Some(19 * MB - 1)), "under the regrowth mark");
        }
        assert!(!q.tick(9, Some(30 * MB)), "activity: wait for quiet");
        assert!(!q.tick(12, Some(30 * MB)), "still moving");
        assert!(q.tick(12, Some(30 * MB)), "quiet again");
        q.purged(Some(19 * MB));
        assert!(!q.tick(12, Some(19 * MB)));
        assert!(
            q.tick(12, Some(20 * MB)),
            "exactly the regrowth mark above the last purge's reading"
        );
    }

    #[test]
    fn regrowth_without_activity_purges_again_backing_off_while_it_recurs() {
        let mut q = QuietPurge::new(0);
        assert!(q.tick(0, Some(20 * MB)));
        q.purged(Some(18 * MB));
        // A client's connections close: released code comes back.
        assert!(q.tick(0, Some(24 * MB)), "regrown: released again");
        q.purged(Some(18 * MB));
        // A timer keeps bringing it back: each later release waits twice as
        // long, up to the cap.
        let mut gaps = Vec::new();
        let mut since = 0;
        for _ in 0..300 {
            since += 1;
            if q.tick(0, Some(24 * MB)) {
                gaps.push(since);
                since = 0;
                q.purged(Some(18 * MB));
            }
        }
        assert_eq!(
            gaps,
            [2, 3, 5, 9, 17, 33, 65, 65, 65],
            "ticks between releases"
        );
        // Activity resets the backoff.
        assert!(!q.tick(1, Some(24 * MB)));
        assert!(q.tick(1, Some(24 * MB)));
        q.purged(Some(18 * MB));
        assert!(q.tick(1, Some(24 * MB)), "no wait after a fresh stretch");
    }

    #[test]
    fn without_readings_only_activity_triggers_a_purge() {
        let mut q = QuietPurge::new(0);
        assert!(q.tick(0, None));
        q.purged(None);
        assert!(!q.tick(0, None));
        assert!(!q.tick(0, Some(100 * MB)), "no reading after the purge");
    }

    /// `(present, file page)` for each page of `pages` (addresses in this
    /// process), from one open of the page map.
    #[cfg(target_os = "linux")]
    fn page_states(pages: &[usize]) -> Vec<(bool, bool)> {
        use std::os::unix::fs::FileExt;
        let map = std::fs::File::open("/proc/self/pagemap").unwrap();
        pages
            .iter()
            .map(|&addr| {
                let mut raw = [0u8; 8];
                map.read_exact_at(&mut raw, (addr / page_size() * 8) as u64)
                    .unwrap();
                let e = u64::from_ne_bytes(raw);
                (e & (1 << 63) != 0, e & (1 << 61) != 0)
            })
            .collect()
    }

    #[cfg(target_os = "linux")]
    fn page_size() -> usize {
        // SAFETY: sysconf only reads a constant of the system.
        unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
    }

    /// The component pages start-up touched go as soon as the loop starts,
    /// not a quiet spell later: a burst arriving right after start-up would
    /// otherwise carry them on top of its own peak.
    #[cfg(target_os = "linux")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn start_up_pages_are_released_when_the_loop_starts() {
        use turnstone_runtime::registry::LoadOptions;
        use turnstone_runtime::{CompileSource, PluginRegistry};
        let builtin = tempfile::tempdir().unwrap();
        let staged = turnstone_test_support::root()
            .join("target/components/openai")
            .canonicalize()
            .expect("the openai component is staged (cargo xtask build-components)");
        std::os::unix::fs::symlink(staged, builtin.path().join("openai")).unwrap();
        let rt = turnstone_test_support::engine::test_runtime();
        let opts = LoadOptions {
            builtin_dir: Some(builtin.path().to_path_buf()),
            ..Default::default()
        };
        // The first load may compile (an image in memory, no file pages);
        // the next comes from the `.cwasm` it left in the cache.
        let mut registry = PluginRegistry::load_all(&rt, &opts).await;
        let compiled = |r: &PluginRegistry| {
            r.plugin("openai")
                .map(|p| p.compile_source == CompileSource::Compiled)
        };
        if compiled(&registry) == Some(true) {
            registry = PluginRegistry::load_all(&rt, &opts).await;
        }
        assert_eq!(compiled(&registry), Some(false), "loaded from a .cwasm");
        let live = LivePlugins::new(registry);
        let image = live.snapshot().plugin("openai").unwrap().code_image();
        let page = page_size();
        let pages: Vec<usize> = (image.start.next_multiple_of(page)..image.end & !(page - 1))
            .step_by(page)
            .collect();
        // SAFETY: `live` keeps the image mapped for the whole test, and it is
        // readable; reading a byte of each page maps it.
        let touched: u64 = pages
            .iter()
            .map(|&a| u64::from(unsafe { (a as *const u8).read_volatile() }))
            .sum();
        let clean = || {
            page_states(&pages)
                .into_iter()
                .filter(|&state| state == (true, true))
                .count()
        };
        assert!(clean() > 16, "{} clean pages mapped ({touched})", clean());

        let shutdown = CancellationToken::new();
        let started = std::time::Instant::now();
        let purging = tokio::spawn(purge_when_quiet(
            Arc::new(Metrics::default()),
            true,
            Some(live.clone()),
            shutdown.clone(),
        ));
        while clean() > 0 && started.elapsed() < QUIET / 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            clean(),
            0,
            "released within {:?}, before any quiet spell",
            QUIET / 2
        );
        shutdown.cancel();
        purging.await.unwrap();
    }
}
