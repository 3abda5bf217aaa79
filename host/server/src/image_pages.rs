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
//! Only mappings the dynamic loader made for the executable and its
//! libraries are touched (from `dl_iterate_phdr`), only their segments that
//! are never writable, only pages wholly inside such a segment, and only
//! pages `/proc/self/pagemap` shows are still unmodified file pages: a page
//! a debugger or a uprobe patched is private memory and is left alone.
//! wasmtime's `.cwasm` mappings are not touched: it relocates code in them,
//! and a load during the scan could write a page after it was checked.

/// What one [`release`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    /// Loaded objects (the executable, each shared library) scanned.
    pub objects: usize,
    /// Bytes of resident, unmodified file pages unmapped.
    pub bytes: u64,
}

/// Unmaps the resident, unmodified pages of the read-only segments of the
/// executable and its shared libraries. Blocking: it reads the page map.
pub fn release() -> std::io::Result<Released> {
    #[cfg(target_os = "linux")]
    {
        linux::release()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Ok(Released::default())
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
    struct Segment {
        start: usize,
        end: usize,
    }

    pub(super) fn release() -> std::io::Result<Released> {
        // SAFETY: sysconf only reads a constant of the system.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096);
        let (objects, segments) = read_only_segments(page);
        let pagemap = File::open("/proc/self/pagemap")?;
        let mut bytes = 0;
        for s in &segments {
            bytes += release_clean(&pagemap, s, page)?;
        }
        Ok(Released { objects, bytes })
    }

    /// The never-writable `PT_LOAD` segments of every loaded object, each
    /// shrunk to the pages that lie wholly inside it (the first and last page
    /// may be shared with a writable neighbour in some layouts).
    fn read_only_segments(page: usize) -> (usize, Vec<Segment>) {
        struct Found {
            page: usize,
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
                let start = lo.next_multiple_of(found.page);
                let end = hi & !(found.page - 1);
                if hi > lo && end > start {
                    found.segments.push(Segment { start, end });
                }
            }
            0
        }
        let mut found = Found {
            page,
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
        }
        if let Some(first) = run {
            released += unmap(s.start, first, pages, page);
        }
        Ok(released)
    }

    /// `MADV_DONTNEED` on pages `[first, end)` of the segment at `base`.
    fn unmap(base: usize, first: usize, end: usize, page: usize) -> u64 {
        let len = (end - first) * page;
        // SAFETY: the range lies inside a read-only private file mapping of
        // a loaded object, and every page in it was an unmodified file page:
        // dropping it loses nothing, the next access maps the same bytes.
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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Resident file-backed memory of this process, in KiB.
    fn rss_file_kb() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("RssFile:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn release_unmaps_code_pages_and_the_code_still_runs() {
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
        // The code the test runs next faults back in: formatting, hashing,
        // allocation and a thread all still work.
        let text = format!("{:?}", std::collections::HashMap::from([(1, "one")]));
        let joined = std::thread::spawn(move || text.len()).join().unwrap();
        assert_eq!(joined, r#"{1: "one"}"#.len());
        // A second pass finds only what ran since.
        let again = release().unwrap();
        assert!(again.bytes < released.bytes, "{again:?} after {released:?}");
    }
}
