//! Letting go of the code pages start-up and bursts touched.
//!
//! Resident size counts every page of the executable (and of its shared
//! libraries) that any code path ever ran or read: configuration parsing,
//! migrations, component loading, the handlers of a burst. Those pages are
//! clean copies of the file, so [`release`] unmaps them once the server is
//! quiet (`madvise(MADV_DONTNEED)`): they stay in the page cache, shared and
//! reclaimable, and the next use maps them again with a minor fault, while
//! the process's resident size falls to what it really keeps using. This is
//! what the kernel does to the same pages under memory pressure; it is done
//! here without waiting for it.
//!
//! Only mappings the dynamic loader made for the executable and the
//! libraries loaded with it are touched (from `dl_iterate_phdr`, the objects
//! counted by [`note_startup_objects`] before any thread started: a library
//! `dlopen`ed later could be mid-relocation during a scan), only their
//! segments that are never writable, only pages wholly inside such a
//! segment, and only pages `/proc/self/pagemap` shows are still unmodified
//! file pages: a page a debugger or a uprobe patched is private memory and is
//! left alone. Pages are released batch by batch right after they are
//! checked, so the window for such a write is short.
//!
//! The loaded components' code images get the same treatment
//! ([`release_images`]), each only while the caller holds the component (so
//! it cannot be unmapped and its addresses reused during the scan). wasmtime
//! maps a `.cwasm` privately and makes the whole image read-only before the
//! component is loaded, and it never writes to it again; an image compiled
//! in memory rather than mapped from a `.cwasm` has no file pages, so it is
//! left alone. The component cache and `turnstone plugins precompile`
//! replace a `.cwasm` by renaming a new file over it, never by writing into
//! it, so a page read back comes from the bytes the component was loaded
//! from. A `.cwasm` overwritten in place while the server runs (`cp` over a
//! built-in's file) would be read back changed, as it would after the kernel
//! dropped the same pages under memory pressure: replace files by renaming.
//!
//! The pages still count against a container's memory cgroup (as page
//! cache), and unmapped page-cache pages are the first the kernel reclaims,
//! so code dropped here may be read from disk again after memory pressure.

/// What one [`release`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    /// Loaded objects (the executable, each shared library) scanned.
    pub objects: usize,
    /// Bytes of resident, unmodified file pages unmapped.
    pub bytes: u64,
}

/// Objects loaded before `main` (the executable, its libraries, the vDSO);
/// `None` until [`note_startup_objects`] ran.
static STARTUP_OBJECTS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// Counts the objects loaded at start-up, which [`release`] is limited to.
/// Call once, first thing in `main`, before anything can `dlopen` (a later
/// one is not counted).
pub fn note_startup_objects() {
    #[cfg(target_os = "linux")]
    let _ = STARTUP_OBJECTS.set(linux::loaded_objects());
}

/// Unmaps the resident, unmodified pages of the read-only segments of the
/// executable and the shared libraries loaded with it. Blocking: it reads
/// the page map. Does nothing before [`note_startup_objects`].
pub fn release() -> std::io::Result<Released> {
    let Some(&objects) = STARTUP_OBJECTS.get() else {
        return Ok(Released::default());
    };
    #[cfg(target_os = "linux")]
    {
        linux::release(objects)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = objects;
        Ok(Released::default())
    }
}

/// Unmaps the resident, unmodified file pages in `images`, each the code
/// image of a component the caller holds for the whole call (see the module
/// docs); returns their bytes. Blocking: it reads the page map.
pub fn release_images(images: &[std::ops::Range<usize>]) -> std::io::Result<u64> {
    #[cfg(target_os = "linux")]
    {
        linux::release_ranges(images)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = images;
        Ok(0)
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use super::Released;
    use std::fs::File;
    use std::os::unix::fs::FileExt;

    /// `/proc/<pid>/pagemap`: bit 63 "present", bit 61 "file page or shared
    /// anonymous" (a private page that was written is anonymous).
    const PRESENT: u64 = 1 << 63;
    const FILE_PAGE: u64 = 1 << 61;
    /// Page-map entries read at once.
    const BATCH: usize = 512;

    /// A read-only segment: `[start, end)`, page-aligned inwards.
    pub(super) struct Segment {
        pub(super) start: usize,
        pub(super) end: usize,
        /// Holds code (`PF_X`).
        #[cfg(test)]
        pub(super) exec: bool,
    }

    /// How many objects `dl_iterate_phdr` reports now.
    pub(super) fn loaded_objects() -> usize {
        read_only_segments(4096, usize::MAX).0
    }

    pub(super) fn release(limit: usize) -> std::io::Result<Released> {
        let page = page_size();
        let (objects, segments) = read_only_segments(page, limit);
        let pagemap = File::open("/proc/self/pagemap")?;
        let mut bytes = 0;
        for s in &segments {
            bytes += release_clean(&pagemap, s, page)?;
        }
        Ok(Released { objects, bytes })
    }

    pub(super) fn release_ranges(ranges: &[std::ops::Range<usize>]) -> std::io::Result<u64> {
        let page = page_size();
        let pagemap = File::open("/proc/self/pagemap")?;
        let mut bytes = 0;
        for r in ranges {
            // Whole pages only: a neighbour may share the first or last one.
            let end = r.end & !(page - 1);
            let Some(start) = r.start.checked_next_multiple_of(page) else {
                continue;
            };
            if end > start {
                let s = Segment {
                    start,
                    end,
                    #[cfg(test)]
                    exec: false,
                };
                bytes += release_clean(&pagemap, &s, page)?;
            }
        }
        Ok(bytes)
    }

    fn page_size() -> usize {
        // SAFETY: sysconf only reads a constant of the system.
        usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096)
    }

    /// The never-writable `PT_LOAD` segments of the first `limit` loaded
    /// objects (the loader lists them in load order), each shrunk to the
    /// pages that lie wholly inside it (the first and last page may be shared
    /// with a writable neighbour in some layouts); and how many objects there
    /// are, up to `limit`.
    pub(super) fn read_only_segments(page: usize, limit: usize) -> (usize, Vec<Segment>) {
        struct Found {
            page: usize,
            limit: usize,
            objects: usize,
            segments: Vec<Segment>,
        }
        unsafe extern "C" fn each(
            info: *mut libc::dl_phdr_info,
            _size: libc::size_t,
            data: *mut libc::c_void,
        ) -> libc::c_int {
            // SAFETY: dl_iterate_phdr passes a valid info for the duration of
            // the call and `data` is the `Found` handed to it below.
            let (info, found) = unsafe { (&*info, &mut *data.cast::<Found>()) };
            if found.objects == found.limit {
                return 1;
            }
            found.objects += 1;
            if info.dlpi_phdr.is_null() {
                return 0;
            }
            // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
            let headers =
                unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
            for h in headers {
                if h.p_type != libc::PT_LOAD || h.p_flags & libc::PF_W != 0 {
                    continue;
                }
                let lo = (info.dlpi_addr as usize).wrapping_add(h.p_vaddr as usize);
                let hi = lo.wrapping_add(h.p_memsz as usize);
                let end = hi & !(found.page - 1);
                match lo.checked_next_multiple_of(found.page) {
                    Some(start) if hi > lo && end > start => {
                        found.segments.push(Segment {
                            start,
                            end,
                            #[cfg(test)]
                            exec: h.p_flags & libc::PF_X != 0,
                        });
                    }
                    _ => {}
                }
            }
            0
        }
        let mut found = Found {
            page,
            limit,
            objects: 0,
            segments: Vec::new(),
        };
        // SAFETY: the callback only reads the headers it is given and writes
        // to `found`, which outlives the call.
        unsafe {
            libc::dl_iterate_phdr(Some(each), (&raw mut found).cast());
        }
        (found.objects, found.segments)
    }

    /// Unmaps the present, unmodified file pages of `s`; returns their bytes.
    fn release_clean(pagemap: &File, s: &Segment, page: usize) -> std::io::Result<u64> {
        let pages = (s.end - s.start) / page;
        let mut entries = [0u64; BATCH];
        let mut released = 0u64;
        // A run of releasable pages: its first page index.
        let mut run: Option<usize> = None;
        let mut done = 0;
        while done < pages {
            let n = BATCH.min(pages - done);
            let mut raw = [0u8; BATCH * 8];
            let offset = ((s.start / page + done) * 8) as u64;
            pagemap.read_exact_at(&mut raw[..n * 8], offset)?;
            for (i, chunk) in raw[..n * 8].chunks_exact(8).enumerate() {
                let mut word = [0u8; 8];
                word.copy_from_slice(chunk);
                entries[i] = u64::from_ne_bytes(word);
            }
            for (i, e) in entries[..n].iter().enumerate() {
                let index = done + i;
                let clean = e & PRESENT != 0 && e & FILE_PAGE != 0;
                match (clean, run) {
                    (true, None) => run = Some(index),
                    (false, Some(first)) => {
                        released += unmap(s.start, first, index, page);
                        run = None;
                    }
                    _ => {}
                }
            }
            done += n;
            // Release what was just checked before reading further.
            if let Some(first) = run.take() {
                released += unmap(s.start, first, done, page);
            }
        }
        Ok(released)
    }

    /// `MADV_DONTNEED` on pages `[first, end)` of the segment at `base`.
    fn unmap(base: usize, first: usize, end: usize, page: usize) -> u64 {
        let len = (end - first) * page;
        // SAFETY: the range lies inside a read-only private file mapping (a
        // loaded object's segment, or a held component's published image) and
        // every page in it was an unmodified file page: dropping it loses
        // nothing, the next access maps the same bytes.
        let rc = unsafe {
            libc::madvise(
                (base + first * page) as *mut libc::c_void,
                len,
                libc::MADV_DONTNEED,
            )
        };
        if rc == 0 { len as u64 } else { 0 }
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    /// Resident file-backed memory of this process, in KiB.
    fn rss_file_kb() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("RssFile:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    fn page_size() -> usize {
        // SAFETY: sysconf only reads a constant of the system.
        unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
    }

    /// `(present, file page)` for the page at `addr`.
    fn page_state(addr: usize) -> (bool, bool) {
        let map = std::fs::File::open("/proc/self/pagemap").unwrap();
        let mut raw = [0u8; 8];
        map.read_exact_at(&mut raw, (addr / page_size() * 8) as u64)
            .unwrap();
        let e = u64::from_ne_bytes(raw);
        (e & (1 << 63) != 0, e & (1 << 61) != 0)
    }

    #[test]
    fn release_unmaps_clean_code_pages_keeps_written_ones_and_code_still_runs() {
        note_startup_objects();
        // A page of the executable's read-only data, written once (the same
        // byte back, so nothing changes), is now private memory: what a
        // debugger's breakpoint or a uprobe leaves. Release must keep it.
        let page = page_size();
        let (_, segments) = linux::read_only_segments(page, 1);
        let data = segments
            .iter()
            .find(|s| !s.exec)
            .expect("a read-only data segment");
        let addr = data.start;
        let ptr = addr as *mut u8;
        // SAFETY: the page is mapped (inside a loaded segment); it is made
        // writable for one write of the byte it already holds, then read-only
        // again, so no reader ever sees a different value.
        unsafe {
            assert_eq!(
                libc::mprotect(ptr.cast(), 4096, libc::PROT_READ | libc::PROT_WRITE),
                0
            );
            ptr.write_volatile(ptr.read_volatile());
            assert_eq!(libc::mprotect(ptr.cast(), 4096, libc::PROT_READ), 0);
        }
        assert_eq!(page_state(addr), (true, false), "written page is private");

        let before = rss_file_kb();
        let released = release().unwrap();
        let after = rss_file_kb();
        // The test binary and libc at least.
        assert!(released.objects >= 2, "{released:?}");
        assert!(released.bytes > 64 * 1024, "{released:?}");
        // (The kernel's resident counters are batched per CPU, so only a
        // clear fall is asserted, not the exact amount.)
        assert!(
            after + 512 <= before,
            "RssFile {before} KiB → {after} KiB after releasing {released:?}"
        );
        assert_eq!(page_state(addr), (true, false), "the written page was kept");
        // The code the test runs next faults back in: formatting, hashing,
        // allocation and a thread all still work.
        let text = format!("{:?}", std::collections::HashMap::from([(1, "one")]));
        let joined = std::thread::spawn(move || text.len()).join().unwrap();
        assert_eq!(joined, r#"{1: "one"}"#.len());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_held_components_clean_image_pages_are_released_and_it_still_runs() {
        use turnstone_runtime::CompileSource;
        use turnstone_test_support::engine::{openai_provider, test_runtime};
        let rt = test_runtime();
        // The first load may compile (an image in memory, no file pages);
        // the next comes from the `.cwasm` it left in the cache.
        let mut plugin = openai_provider(&rt, &[]).await;
        if plugin.compile_source == CompileSource::Compiled {
            plugin = openai_provider(&rt, &[]).await;
        }
        assert_ne!(plugin.compile_source, CompileSource::Compiled);
        let image = plugin.code_image();
        let page = page_size();
        let pages: Vec<usize> = (image.start.next_multiple_of(page)..image.end & !(page - 1))
            .step_by(page)
            .collect();
        let count = |state: (bool, bool)| pages.iter().filter(|&&a| page_state(a) == state).count();
        // SAFETY: `plugin` keeps the image mapped, and it is readable.
        let bytes = || unsafe {
            std::slice::from_raw_parts(image.start as *const u8, image.end - image.start).to_vec()
        };
        // Reading every byte maps every page.
        let copy = bytes();
        let caps = plugin.provider_capabilities("gpt-4o").await.unwrap();
        let (clean, private) = (count((true, true)), count((true, false)));
        assert!(clean > 16, "{clean} clean pages of {}", pages.len());

        let released = release_images(std::slice::from_ref(&image)).unwrap();
        assert_eq!(released, (clean * page) as u64);
        assert_eq!(count((true, true)), 0, "no clean page stays resident");
        assert_eq!(count((true, false)), private, "private pages are kept");
        // The same bytes come back, and the component still runs.
        assert!(bytes() == copy, "the image reads back unchanged");
        let again = plugin.provider_capabilities("gpt-4o").await.unwrap();
        assert_eq!(
            (again.context_window, again.supports_vision),
            (caps.context_window, caps.supports_vision)
        );
        assert_eq!((caps.context_window, caps.supports_vision), (128_000, true));
    }
}
