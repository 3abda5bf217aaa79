//! The JSON shape of one plugin in the admin API and the console.

use serde_json::{Value, json};
use turnstone_runtime::reconcile::Shared;
use turnstone_runtime::{PluginEntry, PluginStatus};
use turnstone_storage::types::PluginRecord;

/// One plugin as the admin API shows it: state on this node, version, kind,
/// WIT version, tools, requested vs granted capabilities (and where the grant
/// comes from), counters and the last error.
pub fn plugin_view(entry: &PluginEntry, row: Option<&PluginRecord>, shared: &Shared) -> Value {
    let name = entry.name();
    let (state, error) = match (&entry.status, &entry.update_error) {
        (PluginStatus::Loaded(_), Some(e)) => ("update_failed", Some(e.clone())),
        (PluginStatus::Loaded(_), None) => ("loaded", None),
        (PluginStatus::Disabled, _) => ("disabled", None),
        (PluginStatus::Failed(e), _) => ("failed", Some(e.clone())),
    };
    let loaded = match &entry.status {
        PluginStatus::Loaded(p) => Some(p),
        _ => None,
    };
    let manifest = entry.manifest.as_ref();
    let requested = manifest
        .map(|m| serde_json::to_value(&m.capabilities).unwrap_or(Value::Null))
        .unwrap_or(Value::Null);
    let grant_source = if row.and_then(|r| r.granted.as_ref()).is_some() {
        "operator"
    } else if entry.grant.is_some() {
        "config"
    } else if entry.builtin {
        "builtin-default"
    } else {
        "none"
    };
    let counters = shared.counters(&name);
    json!({
        "name": name,
        "version": loaded.map(|p| p.manifest.plugin.version.clone())
            .or_else(|| manifest.map(|m| m.plugin.version.clone())),
        "disk_version": manifest.map(|m| m.plugin.version.clone()),
        "kind": manifest.map(|m| m.plugin.kind.as_str()),
        "wit": manifest.map(|m| m.plugin.wit.clone()),
        "description": manifest.map(|m| m.plugin.description.clone()),
        "builtin": entry.builtin,
        "dir": entry.dir.display().to_string(),
        "state": state,
        "enabled": !matches!(entry.status, PluginStatus::Disabled),
        "last_error": error,
        "tools": loaded.map(|p| p.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>()).unwrap_or_default(),
        "requested": requested,
        "granted": serde_json::to_value(entry.effective_grant()).unwrap_or(Value::Null),
        "grant_source": grant_source,
        "config": loaded.map(|p| serde_json::to_value(&p.ctx.config).unwrap_or(Value::Null)),
        "skipped_grants": loaded.map(|p| p.skipped_grants.clone()).unwrap_or_default(),
        "wasm_sha256": loaded.map(|p| p.wasm_sha256.clone()),
        "counters": {
            "calls": counters.calls(),
            "failures": counters.failures(),
            "denials": counters.denials(),
        },
        "stored": row.map(|r| json!({
            "enabled": r.enabled, "state": r.state, "last_error": r.last_error,
            "updated": r.updated, "reload_seq": r.reload_seq,
        })),
    })
}
