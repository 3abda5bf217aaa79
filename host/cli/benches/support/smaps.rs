//! Where a process's resident memory lives, from `/proc/<pid>/smaps`: each
//! mapping sorted into a kind (wasm linear memories, component images,
//! 2 MiB stacks, the malloc heap, files), summed per kind, so two readings
//! can be compared kind by kind. Mappings are classified by their
//! neighbours, since the pooling allocator's reservations are anonymous:
//! a linear memory's accessible part follows a slot's guard reservation (a
//! few GiB) or its component's data image; a stack follows a one-page guard.

use std::collections::BTreeMap;

/// One mapping.
#[derive(Debug, Clone)]
struct Vma {
    start: u64,
    end: u64,
    size: u64,
    perms: String,
    /// A file path, `[heap]`, `[stack]`, or empty (anonymous).
    name: String,
    rss_kb: u64,
}

/// The kinds a mapping is sorted into.
pub const KINDS: [&str; 8] = [
    "wasm linear memories (anonymous pages)",
    "component data images mapped into linear memories (page cache, counted once per instance)",
    "component code",
    "2 MiB stacks (fiber stacks of plugin calls, thread stacks)",
    "malloc main heap",
    "other anonymous (malloc arenas, large allocations)",
    "the server binary and libraries",
    "other",
];

/// The kinds whose pages are file-backed (page cache mapped into the
/// process), as `RssFile` counts them.
pub const FILE_KINDS: [&str; 3] = [KINDS[1], KINDS[2], KINDS[6]];

fn read(pid: u32) -> Vec<Vma> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut out: Vec<Vma> = Vec::new();
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let Some(first) = parts.next() else { continue };
        if let Some((a, b)) = first.split_once('-')
            && let (Ok(start), Ok(end)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16))
        {
            let perms = parts.next().unwrap_or("").to_string();
            // Then offset, device, inode, and the name (which may hold
            // spaces), if any.
            let _ = parts.nth(2);
            let name = parts.collect::<Vec<_>>().join(" ");
            out.push(Vma {
                start,
                end,
                size: end - start,
                perms,
                name,
                rss_kb: 0,
            });
        } else if first == "Rss:"
            && let Some(v) = out.last_mut()
        {
            v.rss_kb = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        }
    }
    out
}

fn kind(prev: Option<&Vma>, v: &Vma) -> &'static str {
    const GIB: u64 = 1 << 30;
    // A component loaded from its `.cwasm` maps the image from that file;
    // one compiled in-process, from a memfd.
    let image = |v: &Vma| v.name.ends_with(".cwasm") || v.name.contains("wasm-memory-image");
    if image(v) {
        return if v.perms.starts_with("rw") {
            KINDS[1]
        } else {
            KINDS[2]
        };
    }
    // Only the mapping right below counts as a neighbour.
    let prev = prev.filter(|p| p.end == v.start);
    match v.name.as_str() {
        "[heap]" => return KINDS[4],
        n if n.starts_with('/') => return KINDS[6],
        "" => {}
        _ => return KINDS[7],
    }
    if !v.perms.starts_with("rw") {
        return KINDS[7];
    }
    match prev {
        Some(p) if image(p) && p.perms.starts_with("rw") => KINDS[0],
        // A slot's guard: between slots (or the pool's leading guard, 32
        // MiB), not the pool reservation's whole unused tail, after which
        // anything may be mapped.
        Some(p)
            if p.name.is_empty()
                && p.perms.starts_with("---")
                && (p.size == 32 << 20 || (GIB..=64 * GIB).contains(&p.size)) =>
        {
            KINDS[0]
        }
        Some(p) if p.perms.starts_with("---") && p.size == 4096 && v.size == 2 << 20 => KINDS[3],
        _ => KINDS[5],
    }
}

/// Resident kB of each kind in the process (empty if it has exited).
pub fn by_kind(pid: u32) -> BTreeMap<&'static str, u64> {
    let vmas = read(pid);
    let mut out = BTreeMap::new();
    for (i, v) in vmas.iter().enumerate() {
        let prev = i.checked_sub(1).and_then(|p| vmas.get(p));
        *out.entry(kind(prev, v)).or_default() += v.rss_kb;
    }
    out
}

/// Each kind's resident kB in `after` less in `before`, in [`KINDS`] order.
pub fn growth(
    before: &BTreeMap<&'static str, u64>,
    after: &BTreeMap<&'static str, u64>,
) -> Vec<(&'static str, i64)> {
    KINDS
        .iter()
        .map(|k| {
            let kb = |m: &BTreeMap<&'static str, u64>| m.get(k).copied().unwrap_or(0) as i64;
            (*k, kb(after) - kb(before))
        })
        .collect()
}
