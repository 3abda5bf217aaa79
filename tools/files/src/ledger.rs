//! Which files the model has seen: `edit_file` requires a prior `read_file`
//! or `diff_file` of the same path, so the model edits text it has actually
//! looked at. Kept in the plugin's host key-value store, keyed by session and
//! by the session's current context (`session-info`'s `context-id`): after a
//! compaction the model has only a summary of what it read, so it reads again
//! before editing. A direct call without a session id (`turnstone tool`) is
//! the operator's own edit, and the rule does not apply.

use std::path::Path;
use turnstone_plugin_sdk::agent::session;
use turnstone_plugin_sdk::{Context, host};

/// Whose reads count: the session, and the context the model has now (the
/// session alone when `session-info` is not granted).
fn reader(ctx: &Context) -> String {
    let context = session::current().map(|s| s.context_id).unwrap_or_default();
    if context.is_empty() {
        ctx.session_id.clone()
    } else {
        context
    }
}

fn key(prefix: &str, reader: &str, path: &Path) -> String {
    format!("{prefix}\u{0}{reader}\u{0}{}", path.display())
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

/// Records that the model has read `path` (as it is now on disk).
pub fn record_read(ctx: &Context, path: &Path) {
    let print = std::fs::read(path)
        .map(|b| fingerprint(&b))
        .unwrap_or_default();
    let _ = host::kv_set(&key("read", &reader(ctx), path), print.as_bytes());
}

/// Whether the model has read `path` in its current context (always true
/// for a direct call, which has no session).
pub fn was_read(ctx: &Context, path: &Path) -> bool {
    ctx.session_id.is_empty() || host::kv_get(&key("read", &reader(ctx), path)).is_some()
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
