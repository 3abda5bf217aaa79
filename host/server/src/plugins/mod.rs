//! Plugin administration: the operator's plugin state in the `plugins` table,
//! kept in step with the node's live plugin set.
//!
//! The table is the source of truth for what an operator changed (enabled,
//! grant, config overlay, reload requests); a plugin without a row follows
//! `config.toml`. Every node polls the table (default once a second) and hands
//! a changed state to its reconciler, so a change made on one node — or with
//! `turnstone plugins …` on the same database — reaches every node within a
//! few seconds. The node that made the change applies it before answering.

//!
//! MCP servers are plugins of kind `mcp` in the same table: their enabled
//! toggle, grant and reload requests are `plugins` rows; servers defined at
//! run time (admin API, console) also have an `mcp_servers` row holding the
//! definition. The same poll applies both to the node's [`turnstone_mcp::McpHub`].

mod admin;
mod mcp;

pub use admin::{
    Actor, AdminError, AdminOptions, PluginAdmin, PluginStore, Subject, Upload, install_plugin,
    subtract, uninstall_plugin,
};

use std::collections::BTreeMap;
use turnstone_mcp::ServerConfig;
use turnstone_runtime::Capabilities;
use turnstone_runtime::reconcile::{Desired, Override};
use turnstone_storage::Storage;
use turnstone_storage::types::{McpServerRecord, PluginRecord};

/// Everything the operator changed, as a node applies it: component and MCP
/// overrides (the `plugins` table) and run-time MCP server definitions (the
/// `mcp_servers` table).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OperatorState {
    /// Per plugin name: enabled, grant, config overlay, reload requests.
    pub plugins: Desired,
    /// MCP servers defined at run time, by name.
    pub mcp: BTreeMap<String, ServerConfig>,
}

/// The operator's plugin state as the reconciler wants it.
pub async fn desired_state(db: &Storage) -> Result<Desired, turnstone_storage::StorageError> {
    let rows = db.list_plugins().await?;
    Ok(desired_from_records(&rows))
}

/// The operator's whole state: [`desired_state`] plus the run-time MCP servers.
pub async fn operator_state(
    db: &Storage,
) -> Result<OperatorState, turnstone_storage::StorageError> {
    let rows = db.list_plugins().await?;
    let servers = db.list_mcp_servers().await?;
    Ok(OperatorState {
        plugins: desired_from_records(&rows),
        mcp: mcp_definitions(&servers),
    })
}

/// Stored MCP server definitions; one that does not parse is skipped with a
/// warning (a node never starts what it cannot read).
pub fn mcp_definitions(rows: &[McpServerRecord]) -> BTreeMap<String, ServerConfig> {
    rows.iter()
        .filter_map(|r| match serde_json::from_str::<ServerConfig>(&r.definition) {
            Ok(c) => Some((r.name.clone(), c)),
            Err(e) => {
                tracing::warn!(server = %r.name, "stored MCP server definition does not parse ({e}); skipped");
                None
            }
        })
        .collect()
}

/// [`desired_state`] from rows already read. A grant that does not parse is
/// applied as an empty grant (deny) and logged: never widen on bad data.
pub fn desired_from_records(rows: &[PluginRecord]) -> Desired {
    let mut plugins = BTreeMap::new();
    for r in rows {
        let grant = r.granted.as_deref().map(|g| {
            serde_json::from_str::<Capabilities>(g).unwrap_or_else(|e| {
                tracing::warn!(plugin = %r.name, "stored grant does not parse ({e}); denying everything");
                Capabilities::default()
            })
        });
        plugins.insert(
            r.name.clone(),
            Override {
                enabled: Some(r.enabled),
                grant,
                config: config_overlay(&r.config),
                reload_seq: r.reload_seq,
            },
        );
    }
    Desired { plugins }
}

/// A stored config object as string values (non-strings as their JSON text).
fn config_overlay(raw: &str) -> BTreeMap<String, String> {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(raw) else {
        return BTreeMap::new();
    };
    map.into_iter()
        .map(|(k, v)| {
            let v = match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            (k, v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, granted: Option<&str>, config: &str) -> PluginRecord {
        PluginRecord {
            name: name.into(),
            version: "1.0.0".into(),
            kind: "tool".into(),
            enabled: false,
            granted: granted.map(str::to_string),
            config: config.into(),
            state: "unknown".into(),
            last_error: None,
            updated: String::new(),
            reload_seq: 3,
        }
    }

    #[test]
    fn rows_become_overrides_and_a_bad_grant_denies_everything() {
        let d = desired_from_records(&[
            row(
                "a",
                Some(r#"{"http":["api.example.com"]}"#),
                r#"{"mode":"strict","n":2}"#,
            ),
            row("b", Some(r#"{"http": 5}"#), "not json"),
            row("c", None, "{}"),
        ]);
        let a = &d.plugins["a"];
        assert_eq!(a.enabled, Some(false));
        assert_eq!(a.grant.as_ref().unwrap().http, vec!["api.example.com"]);
        assert_eq!(a.config["mode"], "strict");
        assert_eq!(a.config["n"], "2");
        assert_eq!(a.reload_seq, 3);
        assert_eq!(d.plugins["b"].grant, Some(Capabilities::default()));
        assert!(d.plugins["b"].config.is_empty());
        assert_eq!(
            d.plugins["c"].grant, None,
            "no row grant: config.toml decides"
        );
    }
}
