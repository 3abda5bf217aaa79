//! Which files this session has seen: `edit_file` requires a prior `read_file`
//! or `diff_file` of the same path, so the model edits text it has actually
//! looked at. Kept in the plugin's host key-value store, keyed by session.

use std::path::Path;
use turnstone_plugin_sdk::{Context, host};

fn key(prefix: &str, session: &str, path: &Path) -> String {
    format!("{prefix}\u{0}{session}\u{0}{}", path.display())
}

/// FNV-1a: a cheap fingerprint to notice that content changed.
pub fn fingerprint(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}:{}", bytes.len())
}

/// Records that the session has read `path` (as it is now on disk).
pub fn record_read(ctx: &Context, path: &Path) {
    let print = std::fs::read(path)
        .map(|b| fingerprint(&b))
        .unwrap_or_default();
    let _ = host::kv_set(&key("read", &ctx.session_id, path), print.as_bytes());
}

/// Whether the session has read `path`.
pub fn was_read(ctx: &Context, path: &Path) -> bool {
    host::kv_get(&key("read", &ctx.session_id, path)).is_some()
}

/// Remembers the content an approval preview was built from.
pub fn record_prepared(ctx: &Context, path: &Path, content: &[u8]) {
    let _ = host::kv_set(
        &key(&format!("prep:{}", ctx.call_id), &ctx.session_id, path),
        fingerprint(content).as_bytes(),
    );
}

/// True when the file no longer has the content its preview showed. Calls
/// without a recorded preview (run without prepare) are not checked.
pub fn changed_since_prepare(ctx: &Context, path: &Path, content: &[u8]) -> bool {
    let k = key(&format!("prep:{}", ctx.call_id), &ctx.session_id, path);
    let changed = host::kv_get(&k).is_some_and(|p| p != fingerprint(content).as_bytes());
    host::kv_delete(&k);
    changed
}
